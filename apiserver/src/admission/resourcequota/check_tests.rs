//! Cases from upstream's `plugin/pkg/admission/resourcequota/admission_test.go`.

use serde_json::{json, Value};

use super::*;

fn quota(name: &str, hard: Value, used: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "test", "resourceVersion": "124"},
        "status": {"hard": hard, "used": used}})
}

fn pod(requests: Value, limits: Value) -> Value {
    json!({"metadata": {"name": "123", "namespace": "test"}, "spec": {"containers": [
        {"name": "ctr", "image": "image", "resources": {"requests": requests, "limits": limits}}]}})
}

fn create<'a>(e: &'a Evaluator, obj: &'a Value) -> Request<'a> {
    Request {
        evaluator: e,
        operation: Operation::Create,
        subresource: "",
        object: obj,
        old: None,
        now: jiff::Timestamp::UNIX_EPOCH,
    }
}

fn used(charges: &[Charge]) -> Vec<Value> {
    charges.iter().map(|c| q::to_json(&c.used)).collect()
}

fn pods() -> Evaluator {
    Evaluator::for_resource("", "pods")
}

#[test]
fn below_the_limit_charges_the_quota() {
    let quotas = [quota(
        "quota",
        json!({"cpu": "3", "memory": "100Gi", "pods": "5"}),
        json!({"cpu": "1", "memory": "50Gi", "pods": "3"}),
    )];
    let p = pod(json!({"cpu": "100m", "memory": "2Gi"}), json!({}));
    let e = pods();
    let charges = check_request(&quotas, &create(&e, &p));
    assert_eq!(
        charges.map(|c| used(&c)),
        Ok(vec![json!({"cpu": "1100m", "memory": "52Gi", "pods": "4"})])
    );
}

#[test]
fn above_the_limit_is_refused_naming_only_the_exceeded_resources() {
    let quotas = [quota(
        "quota",
        json!({"cpu": "3", "memory": "100Gi", "pods": "5"}),
        json!({"cpu": "1", "memory": "50Gi", "pods": "3"}),
    )];
    let p = pod(json!({"cpu": "3", "memory": "2Gi"}), json!({}));
    let e = pods();
    assert_eq!(
        check_request(&quotas, &create(&e, &p)),
        Err(Refusal::Forbidden(
            "exceeded quota: quota, requested: cpu=3, used: cpu=1, limited: cpu=3".into()
        ))
    );
    let full = [quota("q", json!({"pods": "2"}), json!({"pods": "2"}))];
    assert_eq!(
        check_request(&full, &create(&e, &p)),
        Err(Refusal::Forbidden(
            "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2".into()
        ))
    );
}

#[test]
fn quotas_on_cpu_or_memory_require_containers_to_state_them() {
    let quotas = [quota(
        "quota",
        json!({"limits.cpu": "2", "requests.memory": "1Gi"}),
        json!({"limits.cpu": "0", "requests.memory": "0"}),
    )];
    let p = pod(json!({"memory": "100Mi"}), json!({}));
    let e = pods();
    assert_eq!(
        check_request(&quotas, &create(&e, &p)),
        Err(Refusal::Forbidden(
            "failed quota: quota: must specify limits.cpu for: ctr".into()
        ))
    );
}

#[test]
fn a_quota_without_usage_yet_refuses_until_it_is_synced() {
    let quotas = [quota("quota", json!({"pods": "5", "cpu": "1"}), json!({}))];
    let p = pod(json!({"cpu": "100m"}), json!({}));
    let e = pods();
    assert_eq!(
        check_request(&quotas, &create(&e, &p)),
        Err(Refusal::Forbidden(
            "status unknown for quota: quota, resources: cpu,pods".into()
        ))
    );
    // A quota whose status.hard is still empty does not apply at all (as upstream).
    let fresh = [json!({"metadata": {"name": "new"}, "spec": {"hard": {"pods": "1"}}})];
    assert_eq!(check_request(&fresh, &create(&e, &p)), Ok(vec![]));
}

#[test]
fn scoped_quotas_only_charge_pods_in_scope() {
    let mut best_effort = quota("be", json!({"pods": "1"}), json!({"pods": "1"}));
    best_effort["spec"] = json!({"scopes": ["BestEffort"]});
    let not_best_effort = quota("nbe", json!({"pods": "5"}), json!({"pods": "0"}));
    let mut q2 = not_best_effort.clone();
    q2["spec"] = json!({"scopes": ["NotBestEffort"]});
    let quotas = [best_effort, q2];
    let burstable = pod(json!({"cpu": "1"}), json!({}));
    let e = pods();
    let charges = check_request(&quotas, &create(&e, &burstable)).unwrap_or_default();
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].index, 1);
    let be_pod = pod(json!({}), json!({}));
    assert!(matches!(
        check_request(&quotas, &create(&e, &be_pod)),
        Err(Refusal::Forbidden(m)) if m.starts_with("exceeded quota: be,")
    ));
}

#[test]
fn updates_charge_only_the_growth() {
    let quotas = [quota(
        "quota",
        json!({"services": "4", "services.nodeports": "2"}),
        json!({"services": "1", "services.nodeports": "0"}),
    )];
    let e = Evaluator::for_resource("", "services");
    let old = json!({"metadata": {"resourceVersion": "3"},
        "spec": {"type": "ClusterIP", "ports": [{"port": 80}]}});
    let new = json!({"metadata": {"resourceVersion": "3"},
        "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30001}]}});
    let req = Request {
        operation: Operation::Update,
        old: Some(&old),
        ..create(&e, &new)
    };
    assert_eq!(
        check_request(&quotas, &req).map(|c| used(&c)),
        Ok(vec![json!({"services": "1", "services.nodeports": "1"})])
    );
    // Back to ClusterIP frees nothing at admission (the controller recounts).
    let back = Request {
        operation: Operation::Update,
        object: &old,
        old: Some(&new),
        ..create(&e, &new)
    };
    assert_eq!(check_request(&quotas, &back), Ok(vec![]));
}

#[test]
fn object_counts_and_status_writes() {
    let quotas = [quota(
        "quota",
        json!({"count/deployments.apps": "1", "requests.storage": "1Gi"}),
        json!({"count/deployments.apps": "1", "requests.storage": "1Gi"}),
    )];
    let deployments = Evaluator::for_resource("apps", "deployments");
    let d = json!({"metadata": {"name": "d"}});
    assert_eq!(
        check_request(&quotas, &create(&deployments, &d)),
        Err(Refusal::Forbidden(
            "exceeded quota: quota, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1".into()
        ))
    );
    // A claim's allocated size growing (a status write) is recorded without the limit check.
    let claims = Evaluator::for_resource("", "persistentvolumeclaims");
    let old = json!({"metadata": {"resourceVersion": "1"},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}}});
    let mut grown = old.clone();
    grown["status"] = json!({"allocatedResources": {"storage": "2Gi"}});
    let req = Request {
        operation: Operation::Update,
        subresource: "status",
        old: Some(&old),
        ..create(&claims, &grown)
    };
    assert_eq!(
        check_request(&quotas, &req).map(|c| used(&c)),
        Ok(vec![
            json!({"count/deployments.apps": "1", "requests.storage": "2Gi"})
        ])
    );
}

#[test]
fn invalid_scope_selectors_are_internal_errors() {
    let mut bad = quota("bad", json!({"pods": "1"}), json!({"pods": "0"}));
    bad["spec"] = json!({"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "Gt", "values": ["1"]}]}});
    let p = pod(json!({}), json!({}));
    let e = pods();
    assert!(matches!(
        check_request(&[bad], &create(&e, &p)),
        Err(Refusal::Internal(m)) if m.starts_with("error matching scopes of quota bad, err: ")
    ));
}
