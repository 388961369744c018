//! RBAC strategies: upstream's messages and field paths for invalid roles and bindings,
//! defaulting, roleRef immutability, tables.

use crate::registry::{builtin, Resource};
use serde_json::{json, Value};
use std::sync::Arc;

const G: &str = "rbac.authorization.k8s.io";

fn s(plural: &str) -> Arc<Resource> {
    match builtin::find(G, plural) {
        Some(s) => s,
        None => panic!("no strategy for {plural}"),
    }
}

/// `field: body` of each error, as a 422's causes read.
fn errors(r: &Resource, obj: &Value) -> Vec<String> {
    r.validate_create(obj)
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

fn role(rules: Value) -> Value {
    json!({"metadata": {"name": "r", "namespace": "default"}, "rules": rules})
}

fn cluster_role(rules: Value) -> Value {
    json!({"metadata": {"name": "system:r"}, "rules": rules})
}

#[test]
fn rules_need_verbs_and_either_resources_or_urls() {
    let roles = s("roles");
    let ok = role(
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a", "b"]}]),
    );
    assert_eq!(errors(&roles, &ok), Vec::<String>::new());
    assert_eq!(
        errors(&roles, &role(json!([{}]))),
        [
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[0].resources: Required value: resource rules must supply at least one resource",
        ]
    );
    assert_eq!(
        errors(
            &roles,
            &role(json!([{"verbs": ["get"]}, {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/api/*"]}]))
        ),
        [
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[0].resources: Required value: resource rules must supply at least one resource",
            "rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\", \"/api/*\"}: namespaced rules cannot apply to non-resource URLs",
        ]
    );
    let crs = s("clusterroles");
    let urls = cluster_role(json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]));
    assert_eq!(errors(&crs, &urls), Vec::<String>::new());
    let both = cluster_role(
        json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"], "resources": ["pods"]}]),
    );
    assert_eq!(
        errors(&crs, &both),
        ["rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: rules cannot apply to both regular resources and non-resource URLs"]
    );
}

#[test]
fn names_are_path_segments() {
    let crs = s("clusterroles");
    // `system:` names are valid; upper case too.
    let ok = json!({"metadata": {"name": "system:controller:Foo"}});
    assert_eq!(errors(&crs, &ok), Vec::<String>::new());
    let bad = json!({"metadata": {"name": "a/b%c"}});
    assert_eq!(
        errors(&crs, &bad),
        [
            "metadata.name: Invalid value: \"a/b%c\": may not contain '/'",
            "metadata.name: Invalid value: \"a/b%c\": may not contain '%'",
        ]
    );
    let dots = json!({"metadata": {"name": ".."}});
    assert_eq!(
        errors(&crs, &dots),
        ["metadata.name: Invalid value: \"..\": may not be '..'"]
    );
    // Cluster roles have no namespace; roles need one.
    let roles = s("roles");
    assert_eq!(
        errors(&roles, &json!({"metadata": {"name": "r"}})),
        ["metadata.namespace: Required value"]
    );
}

#[test]
fn aggregation_rules_need_valid_selectors() {
    let crs = s("clusterroles");
    let agg = |sel: Value| json!({"metadata": {"name": "agg"}, "aggregationRule": sel});
    let ok = agg(
        json!({"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-agg": "true"}}]}),
    );
    assert_eq!(errors(&crs, &ok), Vec::<String>::new());
    assert_eq!(
        errors(&crs, &agg(json!({}))),
        ["aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"]
    );
    let bad_op = agg(
        json!({"clusterRoleSelectors": [{"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}]}),
    );
    assert_eq!(
        errors(&crs, &bad_op),
        [
            "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
            "aggregationRule.clusterRoleSelectors[0]: Invalid value: \"null\": invalid label selector.",
        ]
    );
    let no_values = agg(
        json!({"clusterRoleSelectors": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]}),
    );
    assert_eq!(
        errors(&crs, &no_values)[0],
        "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
    );
    let exists_with_values = agg(
        json!({"clusterRoleSelectors": [{"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}]}),
    );
    assert_eq!(
        errors(&crs, &exists_with_values)[0],
        "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
    );
    // A bad label value fails twice (the value, and building the selector); an update of a role
    // stored with one is spared the first (upstream's AllowInvalidLabelValueInSelector).
    let bad_value = agg(
        json!({"clusterRoleSelectors": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["-bad-"]}]}]}),
    );
    let errs = errors(&crs, &bad_value);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].starts_with("aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values[0]: Invalid value: \"-bad-\": a valid label must be"), "{errs:?}");
    let kept = crs.strategy.validate_update(&bad_value, &bad_value);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].message, "invalid label selector.");
    assert_eq!(crs.strategy.validate_update(&bad_value, &ok).len(), 2);
}

fn binding(role_ref: Value, subjects: Value) -> Value {
    json!({"metadata": {"name": "b", "namespace": "default"}, "roleRef": role_ref, "subjects": subjects})
}

fn prepared(r: &Resource, mut obj: Value) -> Value {
    r.prepare_for_create(&mut obj);
    obj
}

#[test]
fn bindings_default_groups_and_validate_role_refs_and_subjects() {
    let rbs = s("rolebindings");
    let b = prepared(
        &rbs,
        binding(
            json!({"kind": "ClusterRole", "name": "view"}),
            json!([{"kind": "User", "name": "jane"}, {"kind": "Group", "name": "devs"},
                   {"kind": "ServiceAccount", "name": "default"}]),
        ),
    );
    assert_eq!(b.pointer("/roleRef/apiGroup"), Some(&json!(G)));
    assert_eq!(b.pointer("/subjects/0/apiGroup"), Some(&json!(G)));
    assert_eq!(b.pointer("/subjects/1/apiGroup"), Some(&json!(G)));
    assert_eq!(b.pointer("/subjects/2/apiGroup"), None);
    assert_eq!(errors(&rbs, &b), Vec::<String>::new());

    let missing = prepared(
        &rbs,
        json!({"metadata": {"name": "b", "namespace": "default"}}),
    );
    assert_eq!(
        errors(&rbs, &missing),
        [
            "roleRef.kind: Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\"",
            "roleRef.name: Required value",
        ]
    );
    let bad = prepared(
        &rbs,
        binding(
            json!({"apiGroup": "example.com", "kind": "Secret", "name": "a/b"}),
            json!([{"kind": "Robot", "name": "r2"}, {"kind": "ServiceAccount", "name": "Bad_Name", "apiGroup": "v1"},
                   {"kind": "User", "name": "", "apiGroup": "example.com"}]),
        ),
    );
    assert_eq!(
        errors(&rbs, &bad),
        [
            "roleRef.apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
            "roleRef.kind: Unsupported value: \"Secret\": supported values: \"Role\", \"ClusterRole\"",
            "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
            "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            "subjects[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "subjects[1].apiGroup: Unsupported value: \"v1\": supported values: \"\"",
            "subjects[2].name: Required value",
            "subjects[2].apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
        ]
    );

    // Cluster bindings: only ClusterRoles, and service accounts need a namespace.
    let crbs = s("clusterrolebindings");
    let cb = prepared(
        &crbs,
        json!({"metadata": {"name": "cb"}, "roleRef": {"kind": "Role", "name": "r"},
               "subjects": [{"kind": "ServiceAccount", "name": "default"}]}),
    );
    assert_eq!(
        errors(&crbs, &cb),
        [
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
            "subjects[0].namespace: Required value",
        ]
    );
}

#[test]
fn role_refs_never_change() {
    let rbs = s("rolebindings");
    let old = prepared(
        &rbs,
        binding(json!({"kind": "ClusterRole", "name": "view"}), json!([])),
    );
    // Defaulting happens before the comparison: an update without apiGroup is no change.
    let mut same = binding(
        json!({"kind": "ClusterRole", "name": "view"}),
        json!([{"kind": "User", "name": "u"}]),
    );
    rbs.strategy.prepare_for_update(&mut same, &old);
    assert!(rbs.strategy.validate_update(&same, &old).is_empty());
    let mut changed = binding(json!({"kind": "ClusterRole", "name": "edit"}), json!([]));
    rbs.strategy.prepare_for_update(&mut changed, &old);
    let errs: Vec<String> = rbs
        .strategy
        .validate_update(&changed, &old)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        ["roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"]
    );
    assert!(s("clusterrolebindings")
        .strategy
        .validate_update(&changed, &old)
        .iter()
        .any(|e| e.message == "cannot change roleRef"));
    for plural in [
        "roles",
        "clusterroles",
        "rolebindings",
        "clusterrolebindings",
    ] {
        assert!(s(plural).strategy.allow_create_on_update(), "{plural}");
    }
}

#[test]
fn tables_as_kubectl_shows_them() {
    let now = api::meta::parse_time("2026-12-02T16:00:00Z").unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let cr = json!({"metadata": {"name": "admin", "creationTimestamp": "2026-12-02T15:55:00Z"}});
    let crs = s("clusterroles");
    let names: Vec<Value> = crs
        .strategy
        .table_columns()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(names, [json!("Name"), json!("Created At")]);
    assert_eq!(crs.strategy.table_columns()[1]["type"], json!("date"));
    assert_eq!(
        crs.strategy.table_cells(&cr, now),
        [json!("admin"), json!("2026-12-02T15:55:00Z")]
    );
    let rb = json!({"metadata": {"name": "b", "creationTimestamp": "2026-12-02T15:55:00Z"},
        "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "jane"}, {"kind": "User", "name": "joe"},
                     {"kind": "Group", "name": "devs"},
                     {"kind": "ServiceAccount", "name": "default", "namespace": "ci"}]});
    let rbs = s("rolebindings");
    let cols: Vec<(Value, Value)> = rbs
        .strategy
        .table_columns()
        .iter()
        .map(|c| (c["name"].clone(), c["priority"].clone()))
        .collect();
    assert_eq!(
        cols,
        [
            (json!("Name"), json!(0)),
            (json!("Role"), json!(0)),
            (json!("Age"), json!(0)),
            (json!("Users"), json!(1)),
            (json!("Groups"), json!(1)),
            (json!("ServiceAccounts"), json!(1)),
        ]
    );
    assert_eq!(
        rbs.strategy.table_cells(&rb, now),
        [
            json!("b"),
            json!("ClusterRole/view"),
            json!("5m"),
            json!("jane, joe"),
            json!("devs"),
            json!("ci/default"),
        ]
    );
    assert_eq!(
        s("clusterrolebindings").strategy.table_columns()[5]["description"],
        json!("ServiceAccounts in the clusterRoleBinding")
    );
}
