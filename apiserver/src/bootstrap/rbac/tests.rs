//! The bootstrap policy: what kube-apiserver 1.33 creates, valid for our own strategies.

use super::*;
use crate::registry::builtin;

fn by_name<'a>(objs: &'a [Value], name: &str) -> &'a Value {
    match objs.iter().find(|o| api::meta::name(o) == Some(name)) {
        Some(o) => o,
        None => panic!("no {name}"),
    }
}

fn names(objs: &[Value]) -> Vec<&str> {
    objs.iter().filter_map(|o| api::meta::name(o)).collect()
}

#[test]
fn the_roles_and_bindings_of_a_1_33_cluster() {
    let p = policy();
    let roles = names(&p.cluster_roles);
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "system:monitoring",
        "system:node",
        "system:node-proxier",
        "system:kube-scheduler",
        "system:kube-controller-manager",
        "system:volume-scheduler",
        "system:auth-delegator",
        "system:certificates.k8s.io:kube-apiserver-client-approver",
        "system:controller:replicaset-controller",
        "system:controller:namespace-controller",
        "system:controller:service-cidrs-controller",
        "system:controller:selinux-warning-controller",
    ] {
        assert!(roles.contains(&name), "{name} missing from {roles:?}");
    }
    // Roles of feature gates off by default in 1.33 are not created.
    assert!(!roles.contains(&"system:controller:resource-claim-controller"));
    // 31 roles plus one per controller (35); each controller role has its binding.
    assert_eq!(p.cluster_roles.len(), 31 + 35);
    assert_eq!(p.cluster_role_bindings.len(), 12 + 35);
    let mut unique = roles.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), roles.len(), "duplicate names");
    let rsc = by_name(
        &p.cluster_role_bindings,
        "system:controller:replicaset-controller",
    );
    assert_eq!(
        rsc["subjects"],
        json!([{"kind": "ServiceAccount", "name": "replicaset-controller", "namespace": "kube-system"}])
    );
    assert_eq!(
        by_name(&p.cluster_role_bindings, "cluster-admin")["subjects"],
        json!([{"kind": "Group", "apiGroup": RBAC_GROUP, "name": "system:masters"}])
    );
    assert_eq!(
        by_name(&p.cluster_role_bindings, "system:node").get("subjects"),
        None
    );
    let public: Vec<&Value> = by_name(&p.cluster_role_bindings, "system:public-info-viewer")
        ["subjects"]
        .as_array()
        .map(|a| a.iter().map(|s| &s["name"]).collect())
        .unwrap_or_default();
    assert_eq!(
        public,
        [
            &json!("system:authenticated"),
            &json!("system:unauthenticated")
        ]
    );
    assert_eq!(
        names(&p.roles),
        [
            "extension-apiserver-authentication-reader",
            "system:controller:bootstrap-signer",
            "system:controller:cloud-provider",
            "system:controller:token-cleaner",
            "system::leader-locking-kube-controller-manager",
            "system::leader-locking-kube-scheduler",
            "system:controller:bootstrap-signer",
        ]
    );
    assert_eq!(p.role_bindings.len(), 7);
}

#[test]
fn every_object_is_labeled_annotated_and_valid() {
    let p = policy();
    let kinds = [
        ("clusterroles", &p.cluster_roles),
        ("clusterrolebindings", &p.cluster_role_bindings),
        ("roles", &p.roles),
        ("rolebindings", &p.role_bindings),
    ];
    for (plural, objs) in kinds {
        let Some(r) = builtin::find(RBAC_GROUP, plural) else {
            panic!("{plural} not served")
        };
        for obj in objs.iter() {
            let name = api::meta::name(obj).unwrap_or("");
            assert_eq!(
                obj.pointer("/metadata/labels/kubernetes.io~1bootstrapping"),
                Some(&json!("rbac-defaults")),
                "{name}"
            );
            assert_eq!(
                obj.pointer("/metadata/annotations/rbac.authorization.kubernetes.io~1autoupdate"),
                Some(&json!("true")),
                "{name}"
            );
            let mut o = obj.clone();
            r.prepare_for_create(&mut o);
            assert_eq!(r.validate_create(&o), Vec::new(), "{plural} {name}");
            assert_eq!(o, *obj, "{plural} {name}: defaults changed it");
        }
    }
}

#[test]
fn rules_are_built_sorted_as_upstream() {
    let p = policy();
    let cm = by_name(&p.cluster_roles, "system:controller:deployment-controller");
    assert_eq!(
        cm["rules"][0],
        json!({"verbs": ["get", "list", "update", "watch"], "apiGroups": ["apps", "extensions"], "resources": ["deployments"]})
    );
    assert_eq!(
        by_name(&p.cluster_roles, "cluster-admin")["rules"],
        json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}])
    );
    assert_eq!(
        by_name(&p.cluster_roles, "system:discovery")["rules"][0]["nonResourceURLs"],
        json!([
            "/api",
            "/api/*",
            "/apis",
            "/apis/*",
            "/healthz",
            "/livez",
            "/openapi",
            "/openapi/*",
            "/readyz",
            "/version",
            "/version/"
        ])
    );
}

#[test]
fn aggregated_roles_get_the_rules_of_the_roles_they_select() {
    let p = policy();
    let rules = |name: &str| -> Vec<Value> {
        by_name(&p.cluster_roles, name)["rules"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        by_name(&p.cluster_roles, "admin")["aggregationRule"],
        json!({"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}]})
    );
    assert_eq!(
        by_name(&p.cluster_roles, "view")["metadata"]["labels"]
            ["rbac.authorization.k8s.io/aggregate-to-edit"],
        json!("true")
    );
    let view = rules("view");
    assert_eq!(view, rules("system:aggregate-to-view"));
    // edit: its own role's rules, then view's (sorted by role name), each once.
    let mut edit = rules("system:aggregate-to-edit");
    edit.extend(
        view.iter()
            .filter(|r| !edit.contains(r))
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert_eq!(rules("edit"), edit);
    let mut admin = edit.clone();
    let to_admin = rules("system:aggregate-to-admin");
    admin.extend(
        to_admin
            .iter()
            .filter(|r| !admin.contains(r))
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert_eq!(rules("admin"), admin);
    assert!(admin.contains(&json!({"verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings", "roles"]})));
}
