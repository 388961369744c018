//! HorizontalPodAutoscalers: v1 ↔ v2 conversion (the cpu target, the alpha annotations), v2
//! defaults, upstream's validation messages and field paths, the printer's TARGETS.

use crate::registry::{builtin, ClusterIpAllocator, Resource};
use serde_json::{json, Value};
use std::sync::Arc;

fn at(version: &str) -> Arc<Resource> {
    let ips = Arc::new(ClusterIpAllocator::new());
    match builtin::resources(&ips)
        .into_iter()
        .find(|r| r.info.is("autoscaling", "horizontalpodautoscalers") && r.info.version == version)
    {
        Some(r) => Arc::new(r),
        None => panic!("no autoscaling/{version}"),
    }
}

/// A body as the endpoint of `r` receives it, in storage form, defaulted.
fn stored(r: &Resource, mut body: Value) -> Value {
    body["apiVersion"] = json!(r.info.api_version());
    body["kind"] = json!("HorizontalPodAutoscaler");
    let mut obj = r.strategy.to_storage(body);
    r.prepare_for_create(&mut obj);
    obj
}

fn errors(r: &Resource, obj: &Value) -> Vec<String> {
    r.validate_create(obj)
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

fn v1_hpa(spec: Value) -> Value {
    json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

const REF: &str = r#"{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}"#;

fn target_ref() -> Value {
    serde_json::from_str(REF).unwrap_or_default()
}

#[test]
fn a_v1_cpu_target_is_a_v2_resource_metric_and_back() {
    let (v1, v2) = (at("v1"), at("v2"));
    let obj = stored(
        &v1,
        v1_hpa(
            json!({"scaleTargetRef": target_ref(), "maxReplicas": 5, "targetCPUUtilizationPercentage": 50}),
        ),
    );
    assert_eq!(obj["apiVersion"], "autoscaling/v2");
    assert_eq!(
        obj["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert_eq!(obj["spec"]["minReplicas"], 1);
    assert_eq!(obj["status"], json!({"desiredReplicas": 0}));
    assert_eq!(errors(&v1, &obj), Vec::<String>::new());
    let back = v1.present(obj.clone());
    assert_eq!(back["apiVersion"], "autoscaling/v1");
    assert_eq!(back["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(back["spec"]["minReplicas"], 1);
    assert_eq!(
        back["status"],
        json!({"currentReplicas": 0, "desiredReplicas": 0})
    );
    assert!(back["metadata"].get("annotations").is_none(), "{back}");
    assert!(v2.is_presentable(&obj));
    assert!(!v1.is_presentable(&obj));
}

#[test]
fn a_v1_object_without_target_gets_the_default_cpu_metric() {
    let v1 = at("v1");
    let obj = stored(
        &v1,
        v1_hpa(json!({"scaleTargetRef": target_ref(), "maxReplicas": 3})),
    );
    assert_eq!(
        obj["spec"]["metrics"][0]["resource"]["target"],
        json!({"type": "Utilization", "averageUtilization": 80})
    );
    assert_eq!(
        v1.present(obj)["spec"]["targetCPUUtilizationPercentage"],
        80
    );
}

#[test]
fn other_v2_metrics_and_status_travel_in_v1_annotations() {
    let (v1, v2) = (at("v1"), at("v2"));
    let mut obj = stored(
        &v2,
        json!({"metadata": {"name": "web", "namespace": "default", "annotations": {"a": "b"}}, "spec": {
        "scaleTargetRef": target_ref(), "minReplicas": 2, "maxReplicas": 10,
        "metrics": [
            {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "100"}}},
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}},
        ]}}),
    );
    obj["status"] = json!({
        "currentReplicas": 3, "desiredReplicas": 4,
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 70, "averageValue": "300m"}}}],
        "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}],
    });
    let shown = v1.present(obj.clone());
    assert_eq!(shown["spec"]["targetCPUUtilizationPercentage"], 60);
    assert_eq!(shown["status"]["currentCPUUtilizationPercentage"], 70);
    assert_eq!(shown["status"]["currentReplicas"], 3);
    let ann = &shown["metadata"]["annotations"];
    assert_eq!(ann["a"], "b");
    let metrics: Value =
        serde_json::from_str(ann[super::METRICS_ANNOTATION].as_str().unwrap_or(""))
            .unwrap_or_default();
    assert_eq!(
        metrics,
        json!([
            {"type": "Pods", "pods": {"metricName": "rps", "targetAverageValue": "100"}},
            {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "1Gi"}},
        ])
    );
    let current: Value = serde_json::from_str(
        ann[super::CURRENT_METRICS_ANNOTATION]
            .as_str()
            .unwrap_or(""),
    )
    .unwrap_or_default();
    assert_eq!(
        current,
        json!([{"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 70, "currentAverageValue": "300m"}}])
    );
    assert!(ann[super::CONDITIONS_ANNOTATION].is_string());
    // And back: the same v2 object (the cpu metric moves last, as upstream's conversion puts it).
    let again = v1.strategy.to_storage(shown);
    assert_eq!(again["metadata"]["annotations"], json!({"a": "b"}));
    let m = again["spec"]["metrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(m.len(), 3);
    assert_eq!(m[0], obj["spec"]["metrics"][0]);
    assert_eq!(m[1], obj["spec"]["metrics"][2]);
    assert_eq!(m[2], obj["spec"]["metrics"][1]);
    assert_eq!(
        again["status"]["currentMetrics"],
        obj["status"]["currentMetrics"]
    );
    assert_eq!(again["status"]["conditions"], obj["status"]["conditions"]);
    assert_eq!(again["status"]["desiredReplicas"], 4);
}

#[test]
fn v2_behavior_defaults_fill_each_scaling_rule() {
    let v2 = at("v2");
    let obj = stored(
        &v2,
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {
            "scaleTargetRef": target_ref(), "maxReplicas": 10,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300, "tolerance": "0.1"}}}}),
    );
    assert_eq!(
        obj["spec"]["behavior"],
        json!({
            "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15}]},
            "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max", "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        })
    );
    assert_eq!(errors(&v2, &obj), Vec::<String>::new());
    // At v1 the behavior is an annotation in Go's encoding of the internal type, and comes back.
    let v1 = at("v1");
    let shown = v1.present(obj.clone());
    assert_eq!(
        shown["metadata"]["annotations"][super::BEHAVIOR_ANNOTATION],
        r#"{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15},{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null},"ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
    );
    let back = v1.strategy.to_storage(shown);
    assert_eq!(back["spec"]["behavior"], obj["spec"]["behavior"]);
    assert!(back["metadata"].get("annotations").is_none(), "{back}");
}

#[test]
fn validation_uses_upstreams_messages_and_v2_paths_at_both_versions() {
    let (v1, v2) = (at("v1"), at("v2"));
    let obj = stored(
        &v1,
        v1_hpa(
            json!({"scaleTargetRef": {"kind": "", "name": "a/b"}, "minReplicas": 0, "maxReplicas": 0, "targetCPUUtilizationPercentage": 0}),
        ),
    );
    assert_eq!(
        errors(&v1, &obj),
        [
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
            "spec.maxReplicas: Invalid value: 0: must be greater than 0",
            "spec.scaleTargetRef.kind: Required value",
            "spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'",
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
            "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
        ]
    );
    let obj = stored(
        &v2,
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {
            "scaleTargetRef": target_ref(), "minReplicas": 3, "maxReplicas": 2,
            "metrics": [
                {"type": "Pods"},
                {"type": "Foo", "pods": {"metric": {"name": ""}, "target": {"type": "x", "averageValue": "-1"}}, "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "1", "averageValue": "2"}}},
            ],
            "behavior": {"scaleUp": {"policies": [], "selectPolicy": "Sometimes", "stabilizationWindowSeconds": 4000}}}}),
    );
    assert_eq!(
        errors(&v2, &obj),
        [
            "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
            "spec.metrics[0].pods: Required value: must populate information for the given metric source",
            "spec.metrics[1].type: Unsupported value: \"Foo\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
            "spec.metrics[1].pods.metric.name: Required value: must specify a metric name",
            "spec.metrics[1].pods.target.type: Invalid value: \"x\": must be either Utilization, Value, or AverageValue",
            "spec.metrics[1].pods.target.averageValue: Invalid value: -1: must be positive",
            "spec.metrics[1].type: Unsupported value: \"Foo\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
            "spec.metrics[1].pods: Forbidden: must populate the given metric source only",
            "spec.metrics[1].resource: Forbidden: must populate the given metric source only",
            "spec.metrics[2].external.target.value: Forbidden: may not set both a target value for metric and a per-pod target",
            "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
            "spec.behavior.scaleUp.selectPolicy: Unsupported value: \"Sometimes\": supported values: \"Disabled\", \"Max\", \"Min\"",
            "spec.behavior.scaleUp.policies: Required value: must specify at least one Policy",
        ]
    );
}

#[test]
fn mistyped_fields_are_refused_not_stored() {
    for version in ["v1", "v2"] {
        let r = at(version);
        let obj = stored(
            &r,
            v1_hpa(json!({"scaleTargetRef": target_ref(), "maxReplicas": "five"})),
        );
        let errs = errors(&r, &obj);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].starts_with("spec: Invalid value"), "{errs:?}");
    }
}

#[test]
fn targets_column_follows_format_hpa_metrics() {
    let v2 = at("v2");
    let mut obj = stored(
        &v2,
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {
        "scaleTargetRef": target_ref(), "maxReplicas": 10,
        "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
            {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "100"}}},
            {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "AverageValue", "averageValue": "30"}}},
        ]}}),
    );
    let now = jiff::Timestamp::now();
    let cells = v2.strategy.table_cells(&obj, now);
    assert_eq!(cells[1], "Deployment/web");
    assert_eq!(cells[2], "cpu: <unknown>/50%, <unknown>/100 + 1 more...");
    assert_eq!(cells[3], "1");
    assert_eq!(cells[4], 10);
    assert_eq!(cells[5], 0);
    obj["status"]["currentMetrics"] = json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]);
    if let Some(m) = obj["spec"]["metrics"].as_array_mut() {
        m.truncate(1);
    }
    assert_eq!(v2.strategy.table_cells(&obj, now)[2], "cpu: 12%/50%");
    let names: Vec<Value> = v2
        .strategy
        .table_columns()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Reference",
            "Targets",
            "MinPods",
            "MaxPods",
            "Replicas",
            "Age"
        ]
    );
}
