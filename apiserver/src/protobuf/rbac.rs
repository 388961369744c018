//! Protobuf bodies of `rbac.authorization.k8s.io/v1` and `scheduling.k8s.io/v1` objects, as
//! `kubectl create role|clusterrole|rolebinding|clusterrolebinding|priorityclass` sends them:
//! every field of these kinds (they have no status).

use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::api::scheduling::v1 as scheduling;
use serde_json::Value;

use super::{label_selector, object_meta, Obj};

fn rule(r: rbac::PolicyRule) -> Value {
    Obj::default()
        .strs("verbs", r.verbs)
        .strs("apiGroups", r.api_groups)
        .strs("resources", r.resources)
        .strs("resourceNames", r.resource_names)
        .strs("nonResourceURLs", r.non_resource_ur_ls)
        .done()
}

fn rules(rules: Vec<rbac::PolicyRule>) -> Vec<Value> {
    rules.into_iter().map(rule).collect()
}

pub(super) fn role(r: rbac::Role) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(r.metadata)))
        .list("rules", rules(r.rules))
        .done()
}

pub(super) fn cluster_role(r: rbac::ClusterRole) -> Value {
    let aggregation = r.aggregation_rule.map(|a| {
        let selectors = a
            .cluster_role_selectors
            .into_iter()
            .filter_map(|s| label_selector(Some(s)))
            .collect();
        Obj::default()
            .list("clusterRoleSelectors", selectors)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(r.metadata)))
        .list("rules", rules(r.rules))
        .v("aggregationRule", aggregation)
        .done()
}

fn role_ref(r: Option<rbac::RoleRef>) -> Value {
    let r = r.unwrap_or_default();
    Obj::default()
        .s("apiGroup", r.api_group)
        .s("kind", r.kind)
        .s("name", r.name)
        .done()
}

fn subjects(subjects: Vec<rbac::Subject>) -> Vec<Value> {
    subjects
        .into_iter()
        .map(|s| {
            Obj::default()
                .s("kind", s.kind)
                .s("apiGroup", s.api_group)
                .s("name", s.name)
                .s("namespace", s.namespace)
                .done()
        })
        .collect()
}

pub(super) fn role_binding(b: rbac::RoleBinding) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(b.metadata)))
        .list("subjects", subjects(b.subjects))
        .v("roleRef", Some(role_ref(b.role_ref)))
        .done()
}

pub(super) fn cluster_role_binding(b: rbac::ClusterRoleBinding) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(b.metadata)))
        .list("subjects", subjects(b.subjects))
        .v("roleRef", Some(role_ref(b.role_ref)))
        .done()
}

pub(super) fn priority_class(pc: scheduling::PriorityClass) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(pc.metadata)))
        .i("value", pc.value.map(i64::from))
        .b_t("globalDefault", pc.global_default)
        .s("description", pc.description)
        .s("preemptionPolicy", pc.preemption_policy)
        .done()
}
