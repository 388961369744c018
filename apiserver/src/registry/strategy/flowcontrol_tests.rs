//! FlowSchemas and PriorityLevelConfigurations: defaults, upstream's messages and field paths,
//! the mandatory objects' fixed specs, the printers.

use crate::registry::{builtin, Resource};
use serde_json::{json, Value};
use std::sync::Arc;

fn s(plural: &str) -> Arc<Resource> {
    match builtin::find("flowcontrol.apiserver.k8s.io", plural) {
        Some(s) => s,
        None => panic!("no strategy for {plural}"),
    }
}

fn errors(r: &Resource, obj: &Value) -> Vec<String> {
    let mut obj = obj.clone();
    r.prepare_for_create(&mut obj);
    r.validate_create(&obj)
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

#[test]
fn priority_level_defaults_and_validation() {
    let pl = s("prioritylevelconfigurations");
    let mut obj = json!({"metadata": {"name": "mine"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}});
    pl.prepare_for_create(&mut obj);
    assert_eq!(
        obj["spec"]["limited"],
        json!({"nominalConcurrencyShares": 30, "lendablePercent": 0, "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}})
    );
    assert_eq!(obj["metadata"]["generation"], 1);
    assert_eq!(errors(&pl, &obj), Vec::<String>::new());
    let bad = json!({"metadata": {"name": "mine"}, "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": -1, "lendablePercent": 101, "borrowingLimitPercent": -2,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 5, "queueLengthLimit": -1}}}}});
    assert_eq!(
        errors(&pl, &bad),
        [
            "spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
            "spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: -1: must be positive",
            "spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)",
            "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
            "spec.limited.borrowingLimitPercent: Invalid value: -2: if specified, must be a non-negative integer",
        ]
    );
    assert_eq!(
        errors(&pl, &json!({"metadata": {"name": "exempt"}, "spec": {"type": "Limited"}})),
        [
            "spec.type: Invalid value: \"Limited\": type must be 'Exempt' if and only if name is 'exempt'",
            "spec.limited: Required value: must not be empty when type is Limited",
            "spec: Invalid value: {\"type\":\"Limited\"}: spec of 'exempt' must equal the fixed value",
        ]
    );
    assert_eq!(
        errors(&pl, &json!({"metadata": {"name": "x"}, "spec": {"type": "Sometimes", "limited": {"limitResponse": {"type": "Reject", "queuing": {}}}}})),
        ["spec.type: Unsupported value: \"Sometimes\": supported values: \"Exempt\", \"Limited\""]
    );
    let rows = pl.strategy.table_cells(&obj, jiff::Timestamp::now());
    assert_eq!(
        rows[1..6],
        [json!("Limited"), json!(30), json!(64), json!(8), json!(50)]
    );
    let exempt = &crate::bootstrap::flowcontrol::priority_levels()[0];
    assert_eq!(
        pl.strategy.table_cells(exempt, jiff::Timestamp::now())[2..6],
        [
            json!("<none>"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>")
        ]
    );
}

#[test]
fn flow_schema_defaults_and_validation() {
    let fs = s("flowschemas");
    let ok = json!({"metadata": {"name": "mine"}, "spec": {"priorityLevelConfiguration": {"name": "workload-low"},
        "rules": [{"subjects": [{"kind": "User", "user": {"name": "jane"}}], "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]}]}});
    let mut obj = ok.clone();
    fs.prepare_for_create(&mut obj);
    assert_eq!(obj["spec"]["matchingPrecedence"], 1000);
    assert_eq!(errors(&fs, &ok), Vec::<String>::new());
    let bad = json!({"metadata": {"name": "mine"}, "spec": {
    "matchingPrecedence": 1, "distinguisherMethod": {"type": "ByPod"},
    "priorityLevelConfiguration": {"name": ""},
    "rules": [
        {"subjects": []},
        {"subjects": [{"kind": "Robot"}, {"kind": "ServiceAccount", "user": {"name": "x"}}],
         "resourceRules": [{"verbs": ["*", "get"], "apiGroups": [], "resources": ["pods"], "namespaces": ["Bad_NS"]}],
         "nonResourceRules": [{"verbs": ["fly"], "nonResourceURLs": ["metrics", "/a/*/b"]}]},
    ]}});
    assert_eq!(
        errors(&fs, &bad),
        [
            "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1",
            "spec.distinguisherMethod.type: Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:\"ByPod\"}: supported values: \"ByNamespace\", \"ByUser\"",
            "spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
            "spec.rules[0].subjects: Required value: subjects must contain at least one value",
            "spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty",
            "spec.rules[1].subjects[0].kind: Unsupported value: \"Robot\": supported values: \"Group\", \"ServiceAccount\", \"User\"",
            "spec.rules[1].subjects[1].serviceAccount: Required value: serviceAccount is required when subject kind is 'ServiceAccount'",
            "spec.rules[1].subjects[1].user: Forbidden: user is forbidden when subject kind is not 'User'",
            "spec.rules[1].resourceRules[0].verbs: Invalid value: []string{\"*\", \"get\"}: if '*' is present, must not specify other verbs",
            "spec.rules[1].resourceRules[0].apiGroups: Required value: resource rules must supply at least one api group",
            "spec.rules[1].resourceRules[0].namespaces[0]: Invalid value: \"Bad_NS\": each member of this list must be '*' or a DNS-1123 label; a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            "spec.rules[1].nonResourceRules[0].verbs: Unsupported value: []string{\"fly\"}: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"",
            "spec.rules[1].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"metrics\": must start with slash",
            "spec.rules[1].nonResourceRules[0].nonResourceURLs[1]: Invalid value: \"/a/*/b\": wildcard can only do suffix matching",
        ]
    );
    let cells = fs.strategy.table_cells(&obj, jiff::Timestamp::now());
    assert_eq!(
        cells[1..4],
        [json!("workload-low"), json!(1000), json!("<none>")]
    );
    assert_eq!(cells[5], "?");
}
