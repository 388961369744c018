//! Cases from upstream's `pods_test.go` (`TestPodEvaluatorUsage`, `TestPodConstraintsFunc`,
//! `TestPodEvaluatorMatchingScopes`).

use serde_json::{json, Value};

use super::*;
use crate::quota::to_json;

fn now() -> jiff::Timestamp {
    "2025-01-01T00:00:00Z"
        .parse()
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

fn container(name: &str, requests: Value, limits: Value) -> Value {
    json!({"name": name, "resources": {"requests": requests, "limits": limits}})
}

#[test]
fn usage_counts_requests_limits_and_the_pod() {
    let pod = json!({"spec": {"containers": [
        container("a", json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "2", "memory": "2Gi"})),
        container("b", json!({"cpu": "500m", "ephemeral-storage": "32Mi", "hugepages-2Mi": "4Mi",
            "example.com/dongle": "3"}), json!({})),
    ]}});
    assert_eq!(
        to_json(&usage(&pod, now())),
        json!({
            "count/pods": "1", "cpu": "1500m", "ephemeral-storage": "32Mi", "hugepages-2Mi": "4Mi",
            "limits.cpu": "2", "limits.memory": "2Gi", "memory": "1Gi", "pods": "1",
            "requests.cpu": "1500m", "requests.ephemeral-storage": "32Mi",
            "requests.example.com/dongle": "3", "requests.hugepages-2Mi": "4Mi",
            "requests.memory": "1Gi"
        })
    );
}

#[test]
fn init_containers_raise_the_maximum_and_sidecars_add() {
    let pod = json!({"spec": {
        "initContainers": [container("init", json!({"cpu": "2"}), json!({}))],
        "containers": [container("a", json!({"cpu": "1"}), json!({}))],
        "overhead": {"cpu": "100m"}}});
    assert_eq!(
        usage(&pod, now())
            .get("requests.cpu")
            .map(|q| q.to_string()),
        Some("2100m".into())
    );
    let sidecar = json!({"spec": {
        "initContainers": [
            {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            container("init", json!({"cpu": "1500m"}), json!({}))],
        "containers": [container("a", json!({"cpu": "1"}), json!({}))]}});
    // Containers 1 + sidecar 1 = 2; while "init" runs: sidecar 1 + 1.5 = 2.5.
    assert_eq!(
        usage(&sidecar, now())
            .get("requests.cpu")
            .map(|q| q.to_string()),
        Some("2500m".into())
    );
}

#[test]
fn terminal_and_long_terminating_pods_count_only_as_objects() {
    let spec = json!({"containers": [container("a", json!({"cpu": "1"}), json!({}))]});
    for status in ["Succeeded", "Failed"] {
        let pod = json!({"spec": spec, "status": {"phase": status}});
        assert_eq!(to_json(&usage(&pod, now())), json!({"count/pods": "1"}));
    }
    let past = json!({"metadata": {"deletionTimestamp": "2024-12-31T23:59:00Z",
        "deletionGracePeriodSeconds": 30}, "spec": spec});
    assert_eq!(to_json(&usage(&past, now())), json!({"count/pods": "1"}));
    let within = json!({"metadata": {"deletionTimestamp": "2024-12-31T23:59:50Z",
        "deletionGracePeriodSeconds": 30}, "spec": spec});
    assert_eq!(
        usage(&within, now()).get("pods"),
        Some(&Quantity::from_units(1))
    );
}

#[test]
fn constraints_name_every_container_missing_a_validated_resource() {
    let pod = json!({"spec": {
        "initContainers": [container("init", json!({"cpu": "1"}), json!({"cpu": "1"}))],
        "containers": [
            container("a", json!({"cpu": "1", "memory": "1Gi"}), json!({})),
            container("b", json!({}), json!({}))]}});
    let required = ["limits.cpu", "requests.memory", "pods", "requests.storage"].map(String::from);
    assert_eq!(
        constraints(&required, &pod),
        Err("must specify limits.cpu for: a,b; requests.memory for: b,init".to_string())
    );
    assert_eq!(constraints(&["pods".to_string()], &pod), Ok(()));
    let ok = json!({"spec": {"containers": [container("a", json!({"memory": "1Gi"}), json!({}))]}});
    assert_eq!(constraints(&["memory".to_string()], &ok), Ok(()));
}

#[test]
fn scopes_classify_pods() {
    let best_effort = json!({"spec": {"containers": [{"name": "a"}]}});
    let burstable = json!({"spec": {"activeDeadlineSeconds": 10, "priorityClassName": "high",
        "containers": [container("a", json!({"cpu": "1"}), json!({}))]}});
    let m = |scope: &str, pod: &Value| matches_scope(&ScopeRequirement::exists(scope), pod);
    assert_eq!(m(scope::BEST_EFFORT, &best_effort), Ok(true));
    assert_eq!(m(scope::NOT_BEST_EFFORT, &best_effort), Ok(false));
    assert_eq!(m(scope::TERMINATING, &burstable), Ok(true));
    assert_eq!(m(scope::NOT_TERMINATING, &best_effort), Ok(true));
    assert_eq!(m(scope::PRIORITY_CLASS, &burstable), Ok(true));
    assert_eq!(m(scope::PRIORITY_CLASS, &best_effort), Ok(false));
    let in_low = ScopeRequirement {
        operator: "In".into(),
        values: vec!["low".into()],
        ..ScopeRequirement::exists(scope::PRIORITY_CLASS)
    };
    assert_eq!(matches_scope(&in_low, &burstable), Ok(false));
    let not_in_low = ScopeRequirement {
        operator: "NotIn".into(),
        ..in_low.clone()
    };
    assert_eq!(matches_scope(&not_in_low, &best_effort), Ok(true));
    let cross = json!({"spec": {"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"namespaceSelector": {}, "topologyKey": "k"}}]}}}});
    assert_eq!(m(scope::CROSS_NAMESPACE_POD_AFFINITY, &cross), Ok(true));
    assert_eq!(
        m(scope::CROSS_NAMESPACE_POD_AFFINITY, &burstable),
        Ok(false)
    );
}
