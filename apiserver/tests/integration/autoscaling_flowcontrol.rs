//! autoscaling (HorizontalPodAutoscalers at v1 and v2 over one storage), flowcontrol (the bootstrap
//! configuration) and admissionregistration over HTTP (router with `oneshot`, no sockets):
//! round trips between the versions through create, get, list, watch, patch and apply, 422s with
//! upstream's field paths.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;
use common::router_and_state as app;

const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn call_as(
    app: &Router,
    method: &str,
    uri: &str,
    accept: &str,
    content_type: &str,
    body: String,
) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("accept", accept)
        .header("content-type", content_type);
    let body = if body.is_empty() {
        Body::empty()
    } else {
        Body::from(body)
    };
    let resp = app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn call(app: &Router, method: &str, uri: &str, body: Value) -> (u16, Value) {
    let ct = match method {
        "PATCH" => "application/merge-patch+json",
        _ => "application/json",
    };
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    call_as(app, method, uri, "application/json", ct, body).await
}

async fn get(app: &Router, uri: &str) -> (u16, Value) {
    call(app, "GET", uri, Value::Null).await
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn causes(body: &Value) -> Vec<String> {
    body["details"]["causes"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// The first `n` events of a watch.
async fn watch_lines(app: &Router, uri: &str, n: usize) -> Vec<Value> {
    let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut body = resp.into_body();
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("watch event in time");
        let Some(frame) = frame else { break };
        if let Ok(data) = frame.unwrap().into_data() {
            buf.extend_from_slice(&data);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                out.push(serde_json::from_slice(&line).unwrap());
            }
        }
    }
    out
}

fn v1_hpa(name: &str, cpu: i64) -> Value {
    json!({
        "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "maxReplicas": 5, "targetCPUUtilizationPercentage": cpu},
    })
}

fn v2_hpa(name: &str) -> Value {
    json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 2, "maxReplicas": 8,
                 "metrics": [
                     {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                     {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                 ],
                 "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
    })
}

#[tokio::test]
async fn an_hpa_created_at_v1_reads_at_v2_and_the_reverse() {
    let (app, _s) = app().await;
    let (code, created) = call(&app, "POST", V1, v1_hpa("from-v1", 50)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "autoscaling/v1");
    assert_eq!(created["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(created["spec"]["minReplicas"], 1);
    assert_eq!(
        created["status"],
        json!({"currentReplicas": 0, "desiredReplicas": 0})
    );

    let (code, at_v2) = get(&app, &format!("{V2}/from-v1")).await;
    assert_eq!(code, 200);
    assert_eq!(at_v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        at_v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert_eq!(at_v2["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(
        at_v2["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    let (code, created) = call(&app, "POST", V2, v2_hpa("from-v2")).await;
    assert_eq!(code, 201, "{created}");
    // v2 defaults: every scaling rule filled.
    assert_eq!(
        created["spec"]["behavior"]["scaleUp"]["selectPolicy"],
        "Max"
    );
    assert_eq!(
        created["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        60
    );
    assert_eq!(
        created["spec"]["behavior"]["scaleDown"]["policies"][0]["type"],
        "Percent"
    );
    let (code, at_v1) = get(&app, &format!("{V1}/from-v2")).await;
    assert_eq!(code, 200);
    assert_eq!(at_v1["apiVersion"], "autoscaling/v1");
    assert_eq!(at_v1["spec"]["targetCPUUtilizationPercentage"], 70);
    assert_eq!(at_v1["spec"]["minReplicas"], 2);
    let other: Value = serde_json::from_str(
        at_v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        other,
        json!([{"type": "Pods", "pods": {"metricName": "rps", "targetAverageValue": "10"}}])
    );

    // Lists at both versions see both objects, each in the version asked for.
    for (base, version) in [(V1, "autoscaling/v1"), (V2, "autoscaling/v2")] {
        let (code, list) = get(&app, base).await;
        assert_eq!(code, 200);
        assert_eq!(list["apiVersion"], version);
        assert_eq!(list["kind"], "HorizontalPodAutoscalerList");
        assert_eq!(names(&list), ["from-v1", "from-v2"]);
        for item in list["items"].as_array().unwrap() {
            if version == "autoscaling/v1" {
                assert!(item["spec"].get("metrics").is_none(), "{item}");
                assert!(item["spec"]["targetCPUUtilizationPercentage"].is_number());
            } else {
                assert!(item["spec"]["metrics"].is_array(), "{item}");
            }
        }
    }
}

#[tokio::test]
async fn a_v1_update_keeps_the_v2_metrics_carried_in_annotations() {
    let (app, _s) = app().await;
    assert_eq!(call(&app, "POST", V2, v2_hpa("web")).await.0, 201);
    // What a v1 client does: read, change, write back (annotations included).
    let (_, mut at_v1) = get(&app, &format!("{V1}/web")).await;
    at_v1["spec"]["maxReplicas"] = json!(12);
    at_v1["spec"]["targetCPUUtilizationPercentage"] = json!(55);
    let (code, updated) = call(&app, "PUT", &format!("{V1}/web"), at_v1).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["maxReplicas"], 12);
    let (_, at_v2) = get(&app, &format!("{V2}/web")).await;
    let metrics = at_v2["spec"]["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 2, "{at_v2}");
    assert_eq!(metrics[0]["type"], "Pods");
    assert_eq!(metrics[1]["resource"]["target"]["averageUtilization"], 55);
    assert!(at_v2["metadata"].get("annotations").is_none(), "{at_v2}");
}

#[tokio::test]
async fn patch_and_apply_work_at_either_version() {
    let (app, _s) = app().await;
    assert_eq!(call(&app, "POST", V1, v1_hpa("web", 50)).await.0, 201);
    // Merge patch at v1, in v1's shape.
    let (code, patched) = call(
        &app,
        "PATCH",
        &format!("{V1}/web"),
        json!({"spec": {"targetCPUUtilizationPercentage": 65}}),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"]["targetCPUUtilizationPercentage"], 65);
    // JSON patch at v2, in v2's shape.
    let (code, patched) = call_as(
        &app,
        "PATCH",
        &format!("{V2}/web"),
        "application/json",
        "application/json-patch+json",
        json!([{"op": "replace", "path": "/spec/maxReplicas", "value": 9}]).to_string(),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        patched["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        65
    );
    assert_eq!(patched["spec"]["maxReplicas"], 9);
    // Server-side apply at v1 of an object stored as v2.
    let apply = "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: web\n  maxReplicas: 7\n  targetCPUUtilizationPercentage: 40\n";
    let (code, applied) = call_as(
        &app,
        "PATCH",
        &format!("{V1}/web?fieldManager=me&force=true"),
        "application/json",
        "application/apply-patch+yaml",
        apply.to_string(),
    )
    .await;
    assert_eq!(code, 200, "{applied}");
    assert_eq!(applied["apiVersion"], "autoscaling/v1");
    assert_eq!(applied["spec"]["maxReplicas"], 7);
    assert_eq!(applied["spec"]["targetCPUUtilizationPercentage"], 40);
    let (_, at_v2) = get(&app, &format!("{V2}/web")).await;
    assert_eq!(
        at_v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        40
    );
    // Apply creating an object at v2.
    let apply = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: applied\nspec:\n  scaleTargetRef:\n    kind: Deployment\n    name: web\n  maxReplicas: 3\n";
    let (code, created) = call_as(
        &app,
        "PATCH",
        &format!("{V2}/applied?fieldManager=me"),
        "application/json",
        "application/apply-patch+yaml",
        apply.to_string(),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let (_, at_v1) = get(&app, &format!("{V1}/applied")).await;
    assert_eq!(at_v1["spec"]["targetCPUUtilizationPercentage"], 80);
}

#[tokio::test]
async fn watches_at_either_version_see_their_own_shape() {
    let (app, _s) = app().await;
    let (_, list) = get(&app, V1).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(call(&app, "POST", V2, v2_hpa("web")).await.0, 201);
    let (code, _) = call(
        &app,
        "PATCH",
        &format!("{V1}/web"),
        json!({"spec": {"maxReplicas": 4}}),
    )
    .await;
    assert_eq!(code, 200);
    let at_v1 = watch_lines(&app, &format!("{V1}?watch=true&resourceVersion={rv}"), 2).await;
    let at_v2 = watch_lines(&app, &format!("{V2}?watch=true&resourceVersion={rv}"), 2).await;
    assert_eq!(at_v1[0]["type"], "ADDED");
    assert_eq!(at_v1[1]["type"], "MODIFIED");
    for ev in &at_v1 {
        assert_eq!(ev["object"]["apiVersion"], "autoscaling/v1");
        assert_eq!(ev["object"]["spec"]["targetCPUUtilizationPercentage"], 70);
    }
    assert_eq!(at_v1[1]["object"]["spec"]["maxReplicas"], 4);
    for ev in &at_v2 {
        assert_eq!(ev["object"]["apiVersion"], "autoscaling/v2");
        assert!(ev["object"]["spec"]["metrics"].is_array());
    }
}

#[tokio::test]
async fn hpa_status_table_and_invalid_objects() {
    let (app, _s) = app().await;
    assert_eq!(call(&app, "POST", V1, v1_hpa("web", 50)).await.0, 201);
    // /status at v1 carries the cpu utilization into v2's currentMetrics.
    let (_, mut at_v1) = get(&app, &format!("{V1}/web")).await;
    at_v1["status"] =
        json!({"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 33});
    at_v1["spec"]["maxReplicas"] = json!(99);
    let (code, st) = call(&app, "PUT", &format!("{V1}/web/status"), at_v1).await;
    assert_eq!(code, 200, "{st}");
    assert_eq!(
        st["spec"]["maxReplicas"], 5,
        "a status write keeps the spec"
    );
    let (_, at_v2) = get(&app, &format!("{V2}/web")).await;
    assert_eq!(at_v2["status"]["currentReplicas"], 2);
    assert_eq!(
        at_v2["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"],
        33
    );
    // Table at either version.
    for base in [V1, V2] {
        let (code, t) = call_as(&app, "GET", base, TABLE, "application/json", String::new()).await;
        assert_eq!(code, 200);
        let cols: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            cols,
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
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "Deployment/web");
        assert_eq!(cells[2], "cpu: 33%/50%");
        assert_eq!(cells[3], "1");
        assert_eq!(cells[4], 5);
        assert_eq!(cells[5], 2);
    }
    // 422s name v2's field paths at both versions.
    let mut bad = v1_hpa("bad", 0);
    bad["spec"]["maxReplicas"] = json!(0);
    let (code, body) = call(&app, "POST", V1, bad).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(
        causes(&body),
        [
            "spec.maxReplicas: Invalid value: 0: must be greater than 0",
            "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`",
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
        ]
    );
    let mut bad = v2_hpa("bad");
    bad["spec"]["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]);
    let (code, body) = call(&app, "POST", V2, bad).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "HorizontalPodAutoscaler.autoscaling \"bad\" is invalid: spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization"
    );
    // Mistyped fields: a 4xx, never stored.
    let mut bad = v1_hpa("typed", 50);
    bad["spec"]["maxReplicas"] = json!("five");
    let (code, _) = call(&app, "POST", V1, bad).await;
    assert!((400..500).contains(&code), "{code}");
    assert_eq!(get(&app, &format!("{V2}/typed")).await.0, 404);
}

const FC: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

#[tokio::test]
async fn the_bootstrap_flowcontrol_configuration_is_there() {
    let (app, _s) = app().await;
    let (code, levels) = get(&app, &format!("{FC}/prioritylevelconfigurations")).await;
    assert_eq!(code, 200);
    assert_eq!(
        names(&levels),
        [
            "catch-all",
            "exempt",
            "global-default",
            "leader-election",
            "node-high",
            "system",
            "workload-high",
            "workload-low"
        ]
    );
    let (code, schemas) = get(&app, &format!("{FC}/flowschemas")).await;
    assert_eq!(code, 200);
    assert_eq!(names(&schemas).len(), 13, "{schemas}");
    for fs in schemas["items"].as_array().unwrap() {
        assert_eq!(
            fs["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
            "true"
        );
        assert_eq!(fs["status"]["conditions"][0]["type"], "Dangling", "{fs}");
        assert_eq!(fs["status"]["conditions"][0]["status"], "False", "{fs}");
    }
    let (_, exempt) = get(&app, &format!("{FC}/flowschemas/exempt")).await;
    assert_eq!(exempt["spec"]["matchingPrecedence"], 1);
    assert_eq!(
        exempt["spec"]["rules"][0]["subjects"][0]["group"]["name"],
        "system:masters"
    );
    // The table kubectl shows.
    let (code, t) = call_as(
        &app,
        "GET",
        &format!("{FC}/flowschemas"),
        TABLE,
        "application/json",
        String::new(),
    )
    .await;
    assert_eq!(code, 200);
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        cols,
        [
            "Name",
            "PriorityLevel",
            "MatchingPrecedence",
            "DistinguisherMethod",
            "Age",
            "MissingPL"
        ]
    );
    let row = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == "catch-all")
        .unwrap();
    assert_eq!(
        row["cells"].as_array().unwrap()[1..4],
        [json!("catch-all"), json!(10000), json!("ByUser")]
    );
    assert_eq!(row["cells"][5], "False");

    // A schema naming a missing level is Dangling; mandatory specs are fixed.
    let mine = json!({"metadata": {"name": "mine"}, "spec": {"priorityLevelConfiguration": {"name": "nope"},
        "rules": [{"subjects": [{"kind": "Group", "group": {"name": "devs"}}], "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "clusterScope": true}]}]}});
    let (code, created) = call(&app, "POST", &format!("{FC}/flowschemas"), mine).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["matchingPrecedence"], 1000);
    assert_eq!(created["status"]["conditions"][0]["status"], "True");
    assert_eq!(created["status"]["conditions"][0]["reason"], "NotFound");
    let (code, body) = call(
        &app,
        "PATCH",
        &format!("{FC}/prioritylevelconfigurations/catch-all"),
        json!({"spec": {"limited": {"nominalConcurrencyShares": 50}}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert!(
        causes(&body)[0].starts_with("spec: Invalid value: "),
        "{body}"
    );
    assert!(
        causes(&body)[0].ends_with("spec of 'catch-all' must equal the fixed value"),
        "{body}"
    );
    let bad = json!({"metadata": {"name": "bad"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": -1, "limitResponse": {"type": "Queue"}}}});
    let (code, body) = call(
        &app,
        "POST",
        &format!("{FC}/prioritylevelconfigurations"),
        bad,
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        causes(&body),
        [
            "spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
            "spec.limited.limitResponse.queuing: Required value: must not be empty if limited.limitResponse.type is Limited",
        ]
    );
}

const AR: &str = "/apis/admissionregistration.k8s.io/v1";

fn webhook_config(name: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "pods.example.com",
            "clientConfig": {"service": {"namespace": "default", "name": "hooks", "path": "/validate"}, "caBundle": "Y2E="},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "matchConditions": [{"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:')"}],
        }],
    })
}

#[tokio::test]
async fn admissionregistration_crud_and_invalid_objects() {
    let (app, _s) = app().await;
    // Validating and mutating webhook configurations: defaults, generation, table.
    let (code, created) = call(
        &app,
        "POST",
        &format!("{AR}/validatingwebhookconfigurations"),
        webhook_config("pods"),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let hook = &created["webhooks"][0];
    assert_eq!(
        (hook["failurePolicy"].as_str(), hook["matchPolicy"].as_str()),
        (Some("Fail"), Some("Equivalent"))
    );
    assert_eq!(hook["timeoutSeconds"], 10);
    assert_eq!(hook["namespaceSelector"], json!({}));
    assert_eq!(hook["rules"][0]["scope"], "*");
    assert_eq!(hook["clientConfig"]["service"]["port"], 443);
    assert_eq!(
        hook["matchConditions"][0]["expression"],
        "!request.userInfo.username.startsWith('system:')"
    );
    assert_eq!(created["metadata"]["generation"], 1);
    let (code, patched) = call(
        &app,
        "PATCH",
        &format!("{AR}/validatingwebhookconfigurations/pods"),
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["generation"], 1);
    let mut changed = patched.clone();
    changed["webhooks"][0]["timeoutSeconds"] = json!(3);
    let (code, updated) = call(
        &app,
        "PUT",
        &format!("{AR}/validatingwebhookconfigurations/pods"),
        changed,
    )
    .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["metadata"]["generation"], 2);
    let (code, t) = call_as(
        &app,
        "GET",
        &format!("{AR}/validatingwebhookconfigurations"),
        TABLE,
        "application/json",
        String::new(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(t["rows"][0]["cells"][1], 1);
    let mut mutating = webhook_config("m");
    mutating["kind"] = json!("MutatingWebhookConfiguration");
    let (code, created) = call(
        &app,
        "POST",
        &format!("{AR}/mutatingwebhookconfigurations"),
        mutating,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["webhooks"][0]["reinvocationPolicy"], "Never");

    // 422s with upstream's paths.
    let mut bad = webhook_config("bad");
    bad["webhooks"][0]["clientConfig"] = json!({"url": "http://example.com/hook"});
    bad["webhooks"][0]
        .as_object_mut()
        .unwrap()
        .remove("sideEffects");
    bad["webhooks"][0]["admissionReviewVersions"] = json!([]);
    let (code, body) = call(
        &app,
        "POST",
        &format!("{AR}/validatingwebhookconfigurations"),
        bad,
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        causes(&body),
        [
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        ]
    );
    assert_eq!(
        get(&app, &format!("{AR}/validatingwebhookconfigurations/bad"))
            .await
            .0,
        404
    );

    // A policy (status subresource) and its binding.
    let policy = json!({"metadata": {"name": "replicas"}, "spec": {
        "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5", "message": "too many"}]}});
    let (code, created) = call(
        &app,
        "POST",
        &format!("{AR}/validatingadmissionpolicies"),
        policy,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["failurePolicy"], "Fail");
    assert_eq!(created["metadata"]["generation"], 1);
    let mut with_status = created.clone();
    with_status["status"] = json!({"observedGeneration": 1, "typeChecking": {"expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": "w"}]}});
    let (code, st) = call(
        &app,
        "PUT",
        &format!("{AR}/validatingadmissionpolicies/replicas/status"),
        with_status,
    )
    .await;
    assert_eq!(code, 200, "{st}");
    assert_eq!(st["status"]["observedGeneration"], 1);
    let binding = json!({"metadata": {"name": "replicas-binding"}, "spec": {"policyName": "replicas", "validationActions": ["Deny"]}});
    let (code, created) = call(
        &app,
        "POST",
        &format!("{AR}/validatingadmissionpolicybindings"),
        binding,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let (code, body) = call(
        &app,
        "POST",
        &format!("{AR}/validatingadmissionpolicybindings"),
        json!({"metadata": {"name": "b"}, "spec": {"validationActions": []}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        causes(&body),
        [
            "spec.policyName: Required value",
            "spec.validationActions: Required value: at least one validation action is required",
        ]
    );
    for plural in [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    ] {
        let (code, list) = get(&app, &format!("{AR}/{plural}")).await;
        assert_eq!(code, 200);
        assert_eq!(names(&list).len(), 1, "{plural}: {list}");
    }
    let (code, _) = call(
        &app,
        "DELETE",
        &format!("{AR}/validatingadmissionpolicies/replicas"),
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
}
