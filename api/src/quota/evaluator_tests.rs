//! Cases from upstream's `services_test.go`, `persistent_volume_claims_test.go`,
//! `generic/evaluator_test.go` and `resources_test.go`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::quota::{from_json, to_json};

fn now() -> jiff::Timestamp {
    jiff::Timestamp::UNIX_EPOCH
}

#[test]
fn services_count_node_ports_and_load_balancers() {
    let e = Evaluator::for_resource("", "services");
    let svc = |spec: Value| json!({"spec": spec});
    assert_eq!(
        to_json(&e.usage(
            &svc(json!({"type": "ClusterIP", "ports": [{"port": 80}]})),
            now()
        )),
        json!({"count/services": "1", "services": "1", "services.loadbalancers": "0",
            "services.nodeports": "0"})
    );
    assert_eq!(
        to_json(&e.usage(
            &svc(json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]})),
            now()
        )),
        json!({"count/services": "1", "services": "1", "services.loadbalancers": "0",
            "services.nodeports": "2"})
    );
    let lb = json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
        "ports": [{"port": 80, "nodePort": 30001}, {"port": 81}]});
    assert_eq!(
        to_json(&e.usage(&svc(lb), now())),
        json!({"count/services": "1", "services": "1", "services.loadbalancers": "1",
            "services.nodeports": "1"})
    );
    assert!(e.handles(Operation::Update, "", &Value::Null, None));
    assert!(!e.handles(Operation::Update, "status", &Value::Null, None));
}

#[test]
fn claims_charge_storage_per_class_rounded_up() {
    let e = Evaluator::for_resource("", "persistentvolumeclaims");
    let pvc = json!({"spec": {"storageClassName": "gold",
        "resources": {"requests": {"storage": "1500m"}}},
        "status": {"allocatedResources": {"storage": "1Gi"}}});
    assert_eq!(
        to_json(&e.usage(&pvc, now())),
        json!({"count/persistentvolumeclaims": "1",
            "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
            "gold.storageclass.storage.k8s.io/requests.storage": "1Gi",
            "persistentvolumeclaims": "1", "requests.storage": "1Gi"})
    );
    let annotated = json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "b"}},
        "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1500m"}}}});
    let usage = e.usage(&annotated, now());
    assert_eq!(
        usage
            .get("b.storageclass.storage.k8s.io/requests.storage")
            .map(|q| q.to_string()),
        Some("2".to_string())
    );
    let names = [
        "gold.storageclass.storage.k8s.io/requests.storage",
        "pods",
        "requests.storage",
    ]
    .map(String::from);
    assert_eq!(e.matching_resources(names.iter()).len(), 2);
    let resized = json!({"status": {"allocatedResources": {"storage": "2Gi"}}});
    assert!(e.handles(Operation::Update, "status", &resized, Some(&pvc)));
    assert!(!e.handles(Operation::Update, "status", &pvc, Some(&pvc)));
}

#[test]
fn other_resources_are_counted_with_legacy_aliases() {
    let cm = Evaluator::for_resource("", "configmaps");
    assert_eq!(
        to_json(&cm.usage(&json!({}), now())),
        json!({"configmaps": "1", "count/configmaps": "1"})
    );
    let deploy = Evaluator::for_resource("apps", "deployments");
    assert_eq!(
        to_json(&deploy.usage(&json!({}), now())),
        json!({"count/deployments.apps": "1"})
    );
    assert_eq!(
        Evaluator::for_count_name("count/deployments.apps"),
        Some(deploy.clone())
    );
    assert_eq!(
        Evaluator::for_count_name("count/widgets.example.com").map(|e| e.group().to_string()),
        Some("example.com".to_string())
    );
    assert!(deploy.handles(Operation::Create, "", &Value::Null, None));
    assert!(!deploy.handles(Operation::Update, "", &Value::Null, None));
}

#[test]
fn scoped_quotas_match_only_pods_in_every_scope() {
    let pods = Evaluator::for_resource("", "pods");
    let services = Evaluator::for_resource("", "services");
    let quota = json!({"spec": {"scopes": ["BestEffort"]},
        "status": {"hard": {"pods": "5", "services": "1"}}});
    let best_effort = json!({"spec": {"containers": [{"name": "a"}]}});
    let burstable = json!({"spec": {"containers": [{"name": "a",
        "resources": {"requests": {"cpu": "1"}}}]}});
    assert_eq!(pods.matches(&quota, &best_effort), Ok(true));
    assert_eq!(pods.matches(&quota, &burstable), Ok(false));
    assert_eq!(services.matches(&quota, &json!({})), Ok(false));
    let unscoped = json!({"status": {"hard": {"services": "1"}}});
    assert_eq!(services.matches(&unscoped, &json!({})), Ok(true));
    assert_eq!(pods.matches(&unscoped, &best_effort), Ok(false));
}

#[test]
fn calculate_usage_sums_the_namespace_and_masks_to_hard() {
    let hard = from_json(Some(
        &json!({"pods": "10", "requests.cpu": "4", "count/deployments.apps": "2",
        "services": "3", "example.com/unknown": "1"}),
    ));
    let mut evaluators = Evaluator::registry();
    evaluators.extend(Evaluator::for_count_name("count/deployments.apps"));
    let pod = |cpu: &str, phase: &str| {
        Arc::new(json!({"spec": {"containers": [{"name": "a",
            "resources": {"requests": {"cpu": cpu}}}]}, "status": {"phase": phase}}))
    };
    let (used, errors) = calculate_usage(
        &hard,
        &[],
        &evaluators,
        |e| match e.resource() {
            "pods" => Ok(vec![
                pod("1", "Running"),
                pod("500m", "Pending"),
                pod("2", "Succeeded"),
            ]),
            "deployments" => Ok(vec![Arc::new(json!({}))]),
            "services" => Err("services unavailable".to_string()),
            _ => Ok(Vec::new()),
        },
        now(),
    );
    assert_eq!(errors, ["services unavailable"]);
    assert_eq!(
        to_json(&used),
        json!({"count/deployments.apps": "1", "pods": "2", "requests.cpu": "1500m"})
    );
}
