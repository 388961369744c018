//! The core storage and policy kinds (PersistentVolumes, PersistentVolumeClaims, PodTemplates,
//! LimitRanges, ResourceQuotas, Endpoints), discovery.k8s.io EndpointSlices and the unstored
//! `componentstatuses` and `bindings`, through the router with `oneshot`: for each stored kind
//! create, get, list with a label selector, watch, update, merge/JSON/strategic patch, apply,
//! delete, and bad input as a 422 with upstream's field paths — never a 5xx.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;
use common::router as app;

struct Resp {
    code: u16,
    body: Value,
}

async fn call(app: &Router, method: &str, uri: &str, content_type: &str, body: &str) -> Resp {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert!(code < 500, "{method} {uri}: {code} {body}");
    Resp { code, body }
}

async fn json_call(app: &Router, method: &str, uri: &str, body: &Value) -> Resp {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    call(app, method, uri, "application/json", &text).await
}

/// The first `n` events of a watch.
async fn watch_events(app: &Router, uri: &str, n: usize) -> Vec<Value> {
    let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{uri}");
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

/// One stored kind of the table-driven test.
struct Case {
    /// Collection URL.
    base: &'static str,
    api_version: &'static str,
    kind: &'static str,
    /// A minimal valid object (without apiVersion/kind/name).
    object: Value,
    /// An invalid object and the field paths of its 422 causes.
    bad: Value,
    bad_fields: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    let ns = "/api/v1/namespaces/default";
    let _ = ns;
    vec![
        Case {
            base: "/api/v1/persistentvolumes",
            api_version: "v1",
            kind: "PersistentVolume",
            object: json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}}),
            bad: json!({"spec": {"capacity": {"storage": "1Gi", "cpu": "1"}, "accessModes": ["ReadWriteOnce"]}}),
            bad_fields: &["spec.capacity", "spec"],
        },
        Case {
            base: "/api/v1/namespaces/default/persistentvolumeclaims",
            api_version: "v1",
            kind: "PersistentVolumeClaim",
            object: json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
            bad: json!({"spec": {"accessModes": ["Everyone"], "resources": {"requests": {"storage": "0"}}, "volumeMode": "Raw"}}),
            bad_fields: &[
                "spec.accessModes",
                "spec.resources[storage]",
                "spec.volumeMode",
            ],
        },
        Case {
            base: "/api/v1/namespaces/default/podtemplates",
            api_version: "v1",
            kind: "PodTemplate",
            object: json!({"template": {"metadata": {"labels": {"app": "t"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}),
            bad: json!({"template": {"spec": {"containers": [{"name": "c"}]}}}),
            bad_fields: &["template.spec.containers[0].image"],
        },
        Case {
            base: "/api/v1/namespaces/default/limitranges",
            api_version: "v1",
            kind: "LimitRange",
            object: json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}),
            bad: json!({"spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}}),
            bad_fields: &[
                "spec.limits[0].min[cpu]",
                "spec.limits[0].defaultRequest[cpu]",
                "spec.limits[0].default[cpu]",
            ],
        },
        Case {
            base: "/api/v1/namespaces/default/resourcequotas",
            api_version: "v1",
            kind: "ResourceQuota",
            object: json!({"spec": {"hard": {"pods": "10", "requests.memory": "1Gi"}}}),
            bad: json!({"spec": {"hard": {"pods": "0.5"}, "scopes": ["Sometimes"]}}),
            bad_fields: &["spec.hard[pods]", "spec.scopes"],
        },
        Case {
            base: "/api/v1/namespaces/default/endpoints",
            api_version: "v1",
            kind: "Endpoints",
            object: json!({"subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 8080}]}]}),
            bad: json!({"subsets": [{"addresses": [{"ip": "0.0.0.0"}], "ports": [{"port": 70000}]}]}),
            bad_fields: &["subsets[0].addresses[0].ip", "subsets[0].ports[0].port"],
        },
        Case {
            base: "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            api_version: "discovery.k8s.io/v1",
            kind: "EndpointSlice",
            object: json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.3"]}], "ports": [{"port": 80}]}),
            bad: json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.300"]}], "ports": [{"protocol": "ICMP"}]}),
            bad_fields: &["endpoints[0].addresses[0]", "ports[0].protocol"],
        },
    ]
}

fn with_meta(c: &Case, name: &str, labels: Value) -> Value {
    let mut obj = c.object.clone();
    obj["apiVersion"] = json!(c.api_version);
    obj["kind"] = json!(c.kind);
    obj["metadata"] = json!({"name": name, "labels": labels});
    obj
}

#[tokio::test]
async fn every_kind_through_every_verb() {
    let app = app().await;
    for c in cases() {
        let what = c.kind;
        let item = format!("{}/one", c.base);
        let r = json_call(
            &app,
            "POST",
            c.base,
            &with_meta(&c, "one", json!({"app": "x"})),
        )
        .await;
        assert_eq!(r.code, 201, "{what}: {}", r.body);
        json_call(
            &app,
            "POST",
            c.base,
            &with_meta(&c, "two", json!({"app": "y"})),
        )
        .await;
        let got = json_call(&app, "GET", &item, &Value::Null).await;
        assert_eq!(got.code, 200, "{what}");
        assert_eq!(got.body["kind"], c.kind);
        let list = json_call(
            &app,
            "GET",
            &format!("{}?labelSelector=app%3Dx", c.base),
            &Value::Null,
        )
        .await;
        let names: Vec<&str> = list.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["one"], "{what}: {}", list.body);
        assert_eq!(list.body["kind"], format!("{}List", c.kind));
        let events = watch_events(
            &app,
            &format!(
                "{}?watch=true&resourceVersion=0&labelSelector=app%3Dy",
                c.base
            ),
            1,
        )
        .await;
        assert_eq!(events[0]["type"], "ADDED", "{what}");
        assert_eq!(events[0]["object"]["metadata"]["name"], "two", "{what}");

        let mut obj = got.body.clone();
        obj["metadata"]["labels"]["put"] = json!("yes");
        let r = json_call(&app, "PUT", &item, &obj).await;
        assert_eq!(r.code, 200, "{what}: {}", r.body);
        assert_eq!(r.body["metadata"]["labels"]["put"], "yes");
        let r = call(
            &app,
            "PATCH",
            &item,
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"merge": "yes"}}}).to_string(),
        )
        .await;
        assert_eq!(r.code, 200, "{what}: {}", r.body);
        let r = call(
            &app,
            "PATCH",
            &item,
            "application/json-patch+json",
            &json!([{"op": "add", "path": "/metadata/labels/json", "value": "yes"}]).to_string(),
        )
        .await;
        assert_eq!(r.code, 200, "{what}: {}", r.body);
        let r = call(
            &app,
            "PATCH",
            &item,
            "application/strategic-merge-patch+json",
            &json!({"metadata": {"annotations": {"smp": "yes"}}}).to_string(),
        )
        .await;
        assert_eq!(r.code, 200, "{what}: {}", r.body);
        let labels = &r.body["metadata"]["labels"];
        assert_eq!(
            (labels["merge"].as_str(), labels["json"].as_str()),
            (Some("yes"), Some("yes")),
            "{what}"
        );
        let applied = with_meta(&c, "three", json!({"app": "applied"}));
        let r = call(
            &app,
            "PATCH",
            &format!("{}/three?fieldManager=test", c.base),
            "application/apply-patch+yaml",
            &applied.to_string(),
        )
        .await;
        assert_eq!(r.code, 201, "{what}: {}", r.body);
        assert_eq!(
            r.body["metadata"]["managedFields"][0]["manager"], "test",
            "{what}"
        );

        let bad = {
            let mut b = c.bad.clone();
            b["apiVersion"] = json!(c.api_version);
            b["kind"] = json!(c.kind);
            b["metadata"] = json!({"name": "bad"});
            b
        };
        let r = json_call(&app, "POST", c.base, &bad).await;
        assert_eq!(r.code, 422, "{what}: {}", r.body);
        let fields: Vec<&str> = r.body["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["field"].as_str())
            .collect();
        assert_eq!(fields, c.bad_fields, "{what}: {}", r.body["message"]);

        for name in ["one", "two", "three"] {
            let r = json_call(&app, "DELETE", &format!("{}/{name}", c.base), &Value::Null).await;
            assert_eq!(r.code, 200, "{what}: {}", r.body);
        }
        let after = json_call(&app, "GET", &item, &Value::Null).await;
        // StorageObjectInUseProtection: a volume or claim stays Terminating until the
        // pv-protection / pvc-protection controller (not run here) removes its finalizer.
        let protection = match c.kind {
            "PersistentVolume" => Some("kubernetes.io/pv-protection"),
            "PersistentVolumeClaim" => Some("kubernetes.io/pvc-protection"),
            _ => None,
        };
        match protection {
            Some(finalizer) => {
                assert_eq!(after.code, 200, "{what}: {}", after.body);
                assert!(
                    after.body["metadata"]["deletionTimestamp"].is_string(),
                    "{what}"
                );
                assert_eq!(
                    after.body["metadata"]["finalizers"],
                    json!([finalizer]),
                    "{what}"
                );
            }
            None => assert_eq!(after.code, 404, "{what}"),
        }
    }
}

#[tokio::test]
async fn status_is_a_subresource_of_volumes_claims_and_quotas() {
    let app = app().await;
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "nfs": {"server": "nfs.example.com", "path": "/exports"}},
        "status": {"phase": "Bound"}});
    let r = json_call(&app, "POST", "/api/v1/persistentvolumes", &pv).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["status"]["phase"], "Pending");
    assert_eq!(r.body["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    let mut st = r.body.clone();
    st["status"] = json!({"phase": "Available"});
    let r = json_call(&app, "PUT", "/api/v1/persistentvolumes/pv1/status", &st).await;
    assert_eq!(
        (r.code, r.body["status"]["phase"].as_str()),
        (200, Some("Available")),
        "{}",
        r.body
    );

    let q = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"pods": "4"}}, "status": {"hard": {"pods": "4"}}});
    let r = json_call(
        &app,
        "POST",
        "/api/v1/namespaces/default/resourcequotas",
        &q,
    )
    .await;
    assert_eq!(r.body["status"], json!({}), "{}", r.body);
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/resourcequotas/q",
        "application/merge-patch+json",
        &json!({"status": {"hard": {"pods": "4"}}}).to_string(),
    )
    .await;
    assert_eq!(r.body["status"], json!({}), "{}", r.body);
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/resourcequotas/q/status",
        "application/merge-patch+json",
        &json!({"status": {"hard": {"pods": "4"}, "used": {"pods": "1"}}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["status"]["used"]["pods"], "1");
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/resourcequotas/q/status",
        "application/merge-patch+json",
        &json!({"status": {"used": {"pods": "-1"}}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.body["details"]["causes"][0]["field"], "status.used[pods]");
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/resourcequotas/q",
        "application/merge-patch+json",
        &json!({"spec": {"scopes": ["NotTerminating"]}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.body["message"], "ResourceQuota \"q\" is invalid: spec.scopes: Invalid value: []core.ResourceQuotaScope{\"NotTerminating\"}: field is immutable");

    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let r = json_call(
        &app,
        "POST",
        "/api/v1/namespaces/default/persistentvolumeclaims",
        &pvc,
    )
    .await;
    assert_eq!(
        (
            r.body["status"]["phase"].as_str(),
            r.body["spec"]["volumeMode"].as_str()
        ),
        (Some("Pending"), Some("Filesystem"))
    );
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/persistentvolumeclaims/c",
        "application/merge-patch+json",
        &json!({"spec": {"accessModes": ["ReadWriteMany"]}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec");
}

#[tokio::test]
async fn bindings_bind_pods_and_component_statuses_are_computed() {
    let app = app().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}], "volumes": [{"name": "scratch"}]}});
    let r = json_call(&app, "POST", "/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(
        r.body["spec"]["volumes"][0]["emptyDir"],
        json!({}),
        "{}",
        r.body
    );
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-1"}});
    let r = json_call(
        &app,
        "POST",
        "/api/v1/namespaces/default/bindings",
        &binding,
    )
    .await;
    assert_eq!(
        (r.code, r.body["status"].as_str()),
        (201, Some("Success")),
        "{}",
        r.body
    );
    let r = json_call(
        &app,
        "GET",
        "/api/v1/namespaces/default/pods/p",
        &Value::Null,
    )
    .await;
    assert_eq!(r.body["spec"]["nodeName"], "node-1");
    let r = json_call(
        &app,
        "POST",
        "/api/v1/namespaces/default/bindings",
        &binding,
    )
    .await;
    assert_eq!(r.code, 409, "{}", r.body);
    let mut missing = binding.clone();
    missing["metadata"]["name"] = json!("nope");
    assert_eq!(
        json_call(
            &app,
            "POST",
            "/api/v1/namespaces/default/bindings",
            &missing
        )
        .await
        .code,
        404
    );
    assert_eq!(
        json_call(
            &app,
            "GET",
            "/api/v1/namespaces/default/bindings",
            &Value::Null
        )
        .await
        .code,
        405
    );
    let mut elsewhere = binding.clone();
    elsewhere["metadata"]["namespace"] = json!("kube-system");
    let r = json_call(
        &app,
        "POST",
        "/api/v1/namespaces/default/bindings",
        &elsewhere,
    )
    .await;
    assert_eq!(r.code, 400, "{}", r.body);

    let r = json_call(&app, "GET", "/api/v1/componentstatuses", &Value::Null).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["kind"], "ComponentStatusList");
    let names: Vec<&str> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    let r = json_call(
        &app,
        "GET",
        "/api/v1/componentstatuses/etcd-0",
        &Value::Null,
    )
    .await;
    assert_eq!(
        r.body["conditions"][0],
        json!({"type": "Healthy", "status": "True", "message": "ok"})
    );
    // No controller manager runs in this test's process.
    let r = json_call(
        &app,
        "GET",
        "/api/v1/componentstatuses/scheduler",
        &Value::Null,
    )
    .await;
    assert_eq!(r.body["conditions"][0]["status"], "False", "{}", r.body);
    assert_eq!(
        json_call(&app, "GET", "/api/v1/componentstatuses/nope", &Value::Null)
            .await
            .code,
        404
    );
    assert_eq!(
        json_call(&app, "POST", "/api/v1/componentstatuses", &json!({}))
            .await
            .code,
        405
    );
    assert_eq!(
        json_call(
            &app,
            "DELETE",
            "/api/v1/componentstatuses/etcd-0",
            &Value::Null
        )
        .await
        .code,
        405
    );
}

#[tokio::test]
async fn deprecated_resources_answer_with_a_warning() {
    let app = app().await;
    for (uri, text) in [
        (
            "/api/v1/namespaces/default/endpoints",
            "299 - \"v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice\"",
        ),
        (
            "/api/v1/namespaces/default/endpoints/missing",
            "299 - \"v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice\"",
        ),
        (
            "/api/v1/componentstatuses",
            "299 - \"v1 ComponentStatus is deprecated in v1.19+\"",
        ),
    ] {
        let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let warning = resp.headers().get("warning").and_then(|v| v.to_str().ok());
        assert_eq!(warning, Some(text), "{uri}");
    }
    let req = Request::builder()
        .uri("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices")
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert!(resp.headers().get("warning").is_none());
}
