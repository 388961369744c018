//! The RBAC policy a kube-apiserver 1.33 creates at start (upstream's
//! `plugin/pkg/auth/authorizer/rbac/bootstrappolicy`, with 1.33's default feature gates): the
//! user-facing and `system:` cluster roles ([`roles`]), one `system:controller:<name>` role and
//! binding per kube-controller-manager controller ([`controllers`]), the default cluster role
//! bindings and the roles and bindings of `kube-system` and `kube-public` ([`bindings`]).
//!
//! Every object carries the label `kubernetes.io/bootstrapping: rbac-defaults` and the annotation
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`. Rules are built as upstream's
//! `PolicyRuleBuilder` builds them: verbs, groups, resources, names and URLs each sorted.
//!
//! `admin`, `edit` and `view` are aggregated roles: upstream creates them with an
//! `aggregationRule` and no rules, and kube-controller-manager's clusterrole-aggregation
//! controller then writes the union of the selected roles' rules. [`policy`] computes that same
//! union once, here (the selected roles sorted by name, each rule once, to a fixed point since
//! `edit` selects `view` and `admin` selects `edit`), so that an apiserver run without a
//! controller manager still answers access reviews as a full cluster would; the controller
//! (`controller::clusterroleaggregation`) finds the rules already right and keeps them up to date
//! as roles labelled `aggregate-to-*` come and go.

mod bindings;
mod controllers;
mod roles;

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use crate::registry::strategy::RBAC_GROUP;

/// The label of every bootstrap RBAC object.
pub const BOOTSTRAPPING_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

/// The annotation that lets upstream's reconciliation update a bootstrap object.
pub const AUTOUPDATE_ANNOTATION: (&str, &str) =
    ("rbac.authorization.kubernetes.io/autoupdate", "true");

/// Verbs of read access (`bootstrappolicy.Read`).
const READ: &[&str] = &["get", "list", "watch"];
/// Verbs of write access (`bootstrappolicy.Write`).
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
/// Both (`bootstrappolicy.ReadWrite`).
const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// One policy rule being built (upstream's `PolicyRuleBuilder`). Two rules are equal when
/// their JSON is (the lists as sets in sorted order), which [`rule`] and its setters keep true
/// by sorting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Rule {
    verbs: Vec<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    urls: Vec<String>,
}

/// The items, sorted (`RuleOrDie` sorts every list).
fn owned(items: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    v.sort_unstable();
    v
}

/// A rule granting `verbs`.
fn rule(verbs: &[&str]) -> Rule {
    Rule {
        verbs: owned(verbs),
        ..Rule::default()
    }
}

impl Rule {
    fn groups(mut self, groups: &[&str]) -> Self {
        self.groups = owned(groups);
        self
    }

    fn resources(mut self, resources: &[&str]) -> Self {
        self.resources = owned(resources);
        self
    }

    fn names(mut self, names: &[&str]) -> Self {
        self.names = owned(names);
        self
    }

    fn urls(mut self, urls: &[&str]) -> Self {
        self.urls = owned(urls);
        self
    }

    /// The `rbac/v1` PolicyRule.
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut put = |key: &str, items: &[String]| {
            if !items.is_empty() {
                m.insert(key.to_string(), json!(items));
            }
        };
        put("verbs", &self.verbs);
        put("apiGroups", &self.groups);
        put("resources", &self.resources);
        put("resourceNames", &self.names);
        put("nonResourceURLs", &self.urls);
        Value::Object(m)
    }
}

/// Events may be created and updated in both event groups (`eventsRule`).
fn events_rule() -> Rule {
    rule(&["create", "update", "patch"])
        .groups(&["", "events.k8s.io"])
        .resources(&["events"])
}

/// A bootstrap ClusterRole being built.
struct ClusterRole {
    name: String,
    rules: Vec<Rule>,
    /// Extra labels (`rbac.authorization.k8s.io/aggregate-to-*`).
    labels: Vec<(&'static str, &'static str)>,
    /// The label the role aggregates (`matchLabels: {label: "true"}`).
    aggregates: Option<&'static str>,
}

fn cluster_role(name: impl Into<String>, rules: Vec<Rule>) -> ClusterRole {
    ClusterRole {
        name: name.into(),
        rules,
        labels: Vec::new(),
        aggregates: None,
    }
}

impl ClusterRole {
    /// Adds the label `label: "true"`.
    fn labeled(mut self, label: &'static str) -> Self {
        self.labels.push((label, "true"));
        self
    }

    /// An aggregated role selecting roles labeled `label: "true"`.
    fn aggregating(mut self, label: &'static str) -> Self {
        self.aggregates = Some(label);
        self
    }

    fn to_json(&self) -> Value {
        let mut obj = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(&self.name, None, &self.labels),
            "rules": self.rules.iter().map(Rule::to_json).collect::<Vec<_>>(),
        });
        if let Some(label) = self.aggregates {
            obj["aggregationRule"] =
                json!({"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]});
        }
        obj
    }
}

/// A namespaced bootstrap Role.
struct Role {
    namespace: &'static str,
    name: &'static str,
    rules: Vec<Rule>,
}

impl Role {
    fn to_json(&self) -> Value {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(self.name, Some(self.namespace), &[]),
            "rules": self.rules.iter().map(Rule::to_json).collect::<Vec<_>>(),
        })
    }
}

/// A subject of a bootstrap binding.
#[derive(Debug, Clone, Copy)]
enum Subject {
    User(&'static str),
    Group(&'static str),
    /// (namespace, name).
    ServiceAccount(&'static str, &'static str),
}

impl Subject {
    fn to_json(self) -> Value {
        match self {
            Subject::User(name) => json!({"kind": "User", "apiGroup": RBAC_GROUP, "name": name}),
            Subject::Group(name) => json!({"kind": "Group", "apiGroup": RBAC_GROUP, "name": name}),
            Subject::ServiceAccount(ns, name) => {
                json!({"kind": "ServiceAccount", "name": name, "namespace": ns})
            }
        }
    }
}

/// A bootstrap binding: a ClusterRoleBinding (no namespace) or a RoleBinding.
struct Binding {
    name: String,
    /// `Some` for a RoleBinding of a Role.
    namespace: Option<&'static str>,
    role: String,
    subjects: Vec<Subject>,
}

/// The ClusterRoleBinding `name` of the ClusterRole of the same name (`NewClusterBinding`).
fn cluster_binding(name: impl Into<String>, subjects: Vec<Subject>) -> Binding {
    let name = name.into();
    Binding {
        role: name.clone(),
        name,
        namespace: None,
        subjects,
    }
}

/// The RoleBinding `name` in `namespace` of the Role `role` (`NewRoleBinding`).
fn role_binding(
    namespace: &'static str,
    name: &'static str,
    role: &'static str,
    subjects: Vec<Subject>,
) -> Binding {
    Binding {
        name: name.to_string(),
        namespace: Some(namespace),
        role: role.to_string(),
        subjects,
    }
}

impl Binding {
    fn to_json(&self) -> Value {
        let (kind, role_kind) = match self.namespace {
            Some(_) => ("RoleBinding", "Role"),
            None => ("ClusterRoleBinding", "ClusterRole"),
        };
        let mut obj = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": metadata(&self.name, self.namespace, &[]),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": self.role},
        });
        if !self.subjects.is_empty() {
            let subjects: Vec<Value> = self.subjects.iter().map(|s| s.to_json()).collect();
            obj["subjects"] = Value::from(subjects);
        }
        obj
    }
}

/// `addDefaultMetadata`: the bootstrapping label (and `extra`) and the autoupdate annotation.
fn metadata(name: &str, namespace: Option<&str>, extra: &[(&str, &str)]) -> Value {
    let mut labels = Map::new();
    for (k, v) in std::iter::once(&BOOTSTRAPPING_LABEL).chain(extra) {
        labels.insert(k.to_string(), Value::from(*v));
    }
    let mut meta = json!({
        "name": name,
        "labels": labels,
        "annotations": {AUTOUPDATE_ANNOTATION.0: AUTOUPDATE_ANNOTATION.1},
    });
    if let Some(ns) = namespace {
        meta["namespace"] = Value::from(ns);
    }
    meta
}

/// The bootstrap policy as API objects, in creation order.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub cluster_roles: Vec<Value>,
    pub cluster_role_bindings: Vec<Value>,
    /// Roles, each with its `metadata.namespace`.
    pub roles: Vec<Value>,
    /// RoleBindings, each with its `metadata.namespace`.
    pub role_bindings: Vec<Value>,
}

/// The whole bootstrap policy, the aggregated roles' rules filled in (see the module docs).
/// Built once per process (it is constant; building it takes about as long as storing it, and
/// tests start many servers).
pub fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(build)
}

fn build() -> Policy {
    let (controller_roles, controller_bindings) = controllers::controller_roles();
    let mut cluster_roles = roles::cluster_roles();
    cluster_roles.extend(controller_roles);
    aggregate(&mut cluster_roles);
    let cluster_role_bindings = bindings::cluster_role_bindings()
        .iter()
        .chain(&controller_bindings)
        .map(Binding::to_json)
        .collect();
    Policy {
        cluster_roles: cluster_roles.iter().map(ClusterRole::to_json).collect(),
        cluster_role_bindings,
        roles: bindings::namespace_roles()
            .iter()
            .map(Role::to_json)
            .collect(),
        role_bindings: bindings::namespace_role_bindings()
            .iter()
            .map(Binding::to_json)
            .collect(),
    }
}

/// Fills the rules of the aggregated roles as the clusterrole-aggregation controller would:
/// the rules of the roles labeled `<label>: "true"`, those roles sorted by name, each rule once;
/// repeated until nothing changes (an aggregated role may select another).
fn aggregate(roles: &mut [ClusterRole]) {
    let mut order: Vec<usize> = (0..roles.len()).collect();
    order.sort_by(|a, b| roles[*a].name.cmp(&roles[*b].name));
    // Each pass settles at least one more level of nesting.
    for _ in 0..roles.len() {
        let mut changed = false;
        for me in 0..roles.len() {
            let Some(label) = roles[me].aggregates else {
                continue;
            };
            let mut rules: Vec<Rule> = Vec::new();
            for &other in &order {
                let selected = other != me && roles[other].labels.contains(&(label, "true"));
                for r in roles[other].rules.iter().filter(|_| selected) {
                    if !rules.contains(r) {
                        rules.push(r.clone());
                    }
                }
            }
            if roles[me].rules != rules {
                roles[me].rules = rules;
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
