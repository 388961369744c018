//! Handler tests through the router with `oneshot` (no sockets): statuses, negotiation, list
//! and watch semantics, deletion and finalizers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

async fn app_with(config: apiserver::Config) -> (Router, apiserver::AppState) {
    let store = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
    let token = tokio_util::sync::CancellationToken::new();
    let state = apiserver::AppState::start(config, Arc::new(store), token)
        .await
        .unwrap();
    apiserver::bootstrap::seed(&state).await.unwrap();
    (apiserver::app(state.clone()), state)
}

async fn app() -> Router {
    app_with(apiserver::Config::default()).await.0
}

struct Resp {
    code: u16,
    headers: axum::http::HeaderMap,
    body: Value,
    text: String,
}

async fn call(app: &Router, method: &str, uri: &str, headers: &[(&str, &str)], body: &str) -> Resp {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp = app
        .clone()
        .oneshot(b.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Resp {
        code,
        headers,
        body,
        text,
    }
}

async fn post(app: &Router, uri: &str, body: Value) -> Resp {
    call(
        app,
        "POST",
        uri,
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"labels":labels},
           "spec":{"containers":[{"name":"c","image":"busybox"}]}})
}

#[tokio::test]
async fn error_statuses() {
    let app = app().await;
    let r = call(&app, "GET", "/api/v1/namespaces/default/pods/nope", &[], "").await;
    assert_eq!((r.code, r.body["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(r.body["message"], "pods \"nope\" not found");
    assert_eq!(r.body["code"], 404);
    let r = call(&app, "GET", "/api/v1/foos", &[], "").await;
    assert_eq!(r.code, 404);
    assert_eq!(
        r.body["message"],
        "the server could not find the requested resource"
    );
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/pods",
        &[("accept", "text/html")],
        "",
    )
    .await;
    assert_eq!(
        (r.code, r.body["reason"].as_str()),
        (406, Some("NotAcceptable"))
    );
    let r = call(
        &app,
        "POST",
        "/api/v1/namespaces/default/pods",
        &[("content-type", "text/plain")],
        "x",
    )
    .await;
    assert_eq!(
        (r.code, r.body["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let r = post(
        &app,
        "/api/v1/namespaces/default/pods",
        pod("Bad_Name", json!({})),
    )
    .await;
    assert_eq!((r.code, r.body["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.name");
    let r = post(&app, "/api/v1/namespaces/nowhere/pods", pod("p", json!({}))).await;
    assert_eq!(r.code, 404);
    assert_eq!(r.body["message"], "namespaces \"nowhere\" not found");
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/pods?resourceVersionMatch=Exact",
        &[],
        "",
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(r.body["details"]["kind"], "ListOptions");
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/pods?labelSelector=a%20in%20(",
        &[],
        "",
    )
    .await;
    assert_eq!(r.code, 400);
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/pods/x",
        &[("content-type", "application/json")],
        "{}",
    )
    .await;
    assert_eq!(r.code, 415);
    let r = call(&app, "DELETE", "/api/v1/namespaces/kube-system", &[], "").await;
    assert_eq!(
        (r.code, r.body["reason"].as_str()),
        (403, Some("Forbidden"))
    );
}

#[tokio::test]
async fn create_update_conflict_and_generate_name() {
    let app = app().await;
    let r = post(&app, "/api/v1/namespaces/default/pods", json!({"metadata":{"generateName":"gen-"},"spec":{"containers":[{"name":"c","image":"i"}]}})).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let name = r.body["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    assert!(r.body["metadata"]["uid"].is_string());
    let rv = r.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let r = post(
        &app,
        "/api/v1/namespaces/default/pods?dryRun=All",
        pod("dry", json!({})),
    )
    .await;
    assert_eq!(r.code, 201);
    let r = call(&app, "GET", "/api/v1/namespaces/default/pods/dry", &[], "").await;
    assert_eq!(r.code, 404, "dry run must not persist");

    let mut obj = call(
        &app,
        "GET",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        &[],
        "",
    )
    .await
    .body;
    obj["metadata"]["labels"] = json!({"x":"1"});
    let r = call(
        &app,
        "PUT",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        &[],
        &obj.to_string(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_ne!(r.body["metadata"]["resourceVersion"].as_str().unwrap(), rv);
    // The same body again carries the old resourceVersion: 409.
    let r = call(
        &app,
        "PUT",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        &[],
        &obj.to_string(),
    )
    .await;
    assert_eq!((r.code, r.body["reason"].as_str()), (409, Some("Conflict")));
    // Without resourceVersion: unconditional.
    obj["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    obj["metadata"]["labels"] = json!({"x":"2"});
    let r = call(
        &app,
        "PUT",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        &[],
        &obj.to_string(),
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["metadata"]["labels"]["x"], "2");
    // A merge patch carrying a stale resourceVersion: 409.
    let r = call(
        &app,
        "PATCH",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        &[("content-type", "application/merge-patch+json")],
        &json!({"metadata":{"resourceVersion": rv}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 409);
    let r = call(
        &app,
        "PATCH",
        &format!("/api/v1/namespaces/default/pods/{name}?force=true"),
        &[("content-type", "application/merge-patch+json")],
        "{}",
    )
    .await;
    assert_eq!(r.code, 422);
}

#[tokio::test]
async fn tables_and_metadata_lists() {
    let app = app().await;
    post(
        &app,
        "/api/v1/namespaces/default/pods",
        pod("a", json!({"app":"x"})),
    )
    .await;
    post(
        &app,
        "/api/v1/namespaces/default/pods",
        pod("b", json!({"app":"y"})),
    )
    .await;
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Dx",
        &[(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )],
        "",
    )
    .await;
    assert_eq!(
        r.headers["content-type"],
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    );
    assert_eq!(r.body["kind"], "Table");
    let cols: Vec<&str> = r.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols[..5], ["Name", "Ready", "Status", "Restarts", "Age"]);
    let rows = r.body["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["cells"][0], "a");
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["namespace"], "default");
    let r = call(
        &app,
        "GET",
        "/api/v1/pods",
        &[(
            "accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )],
        "",
    )
    .await;
    assert_eq!(r.body["kind"], "PartialObjectMetadataList");
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    assert!(r.body["items"][0]["spec"].is_null());
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/pods?limit=1",
        &[],
        "",
    )
    .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["metadata"]["remainingItemCount"], 1);
    // With a selector (here one every pod passes) the rest is not counted, as upstream's etcd
    // store does not count it.
    let selected = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/pods?limit=1&labelSelector=x%21%3Dy",
        &[],
        "",
    )
    .await;
    assert_eq!(selected.body["items"].as_array().unwrap().len(), 1);
    assert!(selected.body["metadata"]["continue"].is_string());
    assert!(selected.body["metadata"]
        .get("remainingItemCount")
        .is_none());
    let token = r.body["metadata"]["continue"].as_str().unwrap().to_string();
    let list_rv = r.body["metadata"]["resourceVersion"].clone();
    post(&app, "/api/v1/namespaces/default/pods", pod("c", json!({}))).await;
    // The continuation is served at the first page's revision: "c" is not in it.
    let r = call(
        &app,
        "GET",
        &format!("/api/v1/namespaces/default/pods?limit=5&continue={token}"),
        &[],
        "",
    )
    .await;
    let names: Vec<&str> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b"]);
    assert_eq!(r.body["metadata"]["resourceVersion"], list_rv);
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dc",
        &[],
        "",
    )
    .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
}

async fn watch_lines(app: &Router, uri: &str, n: usize) -> Vec<Value> {
    let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let mut out = Vec::new();
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

#[tokio::test]
async fn watch_semantics() {
    let (app, _state) = app_with(apiserver::Config {
        watch_history: 4,
        ..Default::default()
    })
    .await;
    let r = post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata":{"name":"w0"}}),
    )
    .await;
    let rv0: u64 = r.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    for i in 1..=6 {
        post(
            &app,
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata":{"name": format!("w{i}")}}),
        )
        .await;
    }
    // Older than the ring: one ERROR 410 event.
    let ev = watch_lines(
        &app,
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv0}"),
        1,
    )
    .await;
    assert_eq!(ev[0]["type"], "ERROR");
    assert_eq!(ev[0]["object"]["code"], 410);
    assert_eq!(ev[0]["object"]["reason"], "Expired");
    // Within the ring: exactly the later events, in order.
    let ev = watch_lines(
        &app,
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={}",
            rv0 + 4
        ),
        2,
    )
    .await;
    let names: Vec<&str> = ev
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w5", "w6"]);
    assert!(ev.iter().all(|e| e["type"] == "ADDED"));
    // Streaming list: synthetic ADDED for all 7, then the initial-events-end bookmark.
    let ev = watch_lines(&app, "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", 8).await;
    assert_eq!(ev[..7].iter().filter(|e| e["type"] == "ADDED").count(), 7);
    assert_eq!(ev[7]["type"], "BOOKMARK");
    assert_eq!(
        ev[7]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(ev[7]["object"]["kind"], "ConfigMap");
    // timeoutSeconds ends the stream cleanly.
    let started = std::time::Instant::now();
    let ev = watch_lines(
        &app,
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1&resourceVersion={}",
            rv0 + 6
        ),
        100,
    )
    .await;
    assert!(ev.is_empty());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn deletion_finalizers_and_propagation() {
    let app = app().await;
    // A finalizer keeps the object, marked, until an update removes it.
    post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata":{"name":"f","finalizers":["example.com/x"]}}),
    )
    .await;
    let r = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/f",
        &[],
        "",
    )
    .await;
    assert_eq!(r.code, 200);
    assert!(
        r.body["metadata"]["deletionTimestamp"].is_string(),
        "{}",
        r.text
    );
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/configmaps/f",
        &[],
        "",
    )
    .await;
    assert_eq!(r.code, 200);
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/f",
        &[("content-type", "application/merge-patch+json")],
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/configmaps/f",
        &[],
        "",
    )
    .await;
    assert_eq!(r.code, 404);
    // Orphan and Foreground add the garbage collector's finalizers.
    for (name, policy, fin) in [
        ("o", "Orphan", "orphan"),
        ("g", "Foreground", "foregroundDeletion"),
    ] {
        post(
            &app,
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata":{"name":name}}),
        )
        .await;
        let r = call(
            &app,
            "DELETE",
            &format!("/api/v1/namespaces/default/configmaps/{name}"),
            &[],
            &json!({"propagationPolicy": policy}).to_string(),
        )
        .await;
        assert_eq!(r.code, 200);
        assert_eq!(r.body["metadata"]["finalizers"], json!([fin]), "{}", r.text);
    }
    // Background on a plain object: gone at once, Success Status with the plural as kind.
    post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata":{"name":"b"}}),
    )
    .await;
    let r = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/b?propagationPolicy=Background",
        &[],
        "",
    )
    .await;
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["details"]["kind"].as_str()
        ),
        (Some("Success"), Some("configmaps"))
    );
    // Preconditions.
    post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata":{"name":"p"}}),
    )
    .await;
    let r = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/p",
        &[],
        r#"{"preconditions":{"uid":"nope"}}"#,
    )
    .await;
    assert_eq!(r.code, 409);
    // deletecollection with a selector.
    for i in 0..3 {
        post(
            &app,
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata":{"name": format!("dc{i}"), "labels":{"dc":"y"}}}),
        )
        .await;
    }
    let r = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/configmaps?labelSelector=dc%3Dy",
        &[],
        "",
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["items"].as_array().unwrap().len(), 3);
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/configmaps?labelSelector=dc%3Dy",
        &[],
        "",
    )
    .await;
    assert!(r.body["items"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn namespace_lifecycle_and_graceful_pods() {
    let app = app().await;
    post(
        &app,
        "/api/v1/namespaces",
        json!({"metadata":{"name":"gone"}}),
    )
    .await;
    let r = call(&app, "DELETE", "/api/v1/namespaces/gone", &[], "").await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["status"]["phase"], "Terminating");
    let r = post(
        &app,
        "/api/v1/namespaces/gone/configmaps",
        json!({"metadata":{"name":"x"}}),
    )
    .await;
    assert_eq!(r.code, 403);
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "NamespaceTerminating"
    );
    let mut ns = call(&app, "GET", "/api/v1/namespaces/gone", &[], "")
        .await
        .body;
    ns["spec"]["finalizers"] = json!([]);
    let r = call(
        &app,
        "PUT",
        "/api/v1/namespaces/gone/finalize",
        &[],
        &ns.to_string(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    let r = call(&app, "GET", "/api/v1/namespaces/gone", &[], "").await;
    assert_eq!(r.code, 404, "a finalized terminating namespace is removed");

    // A scheduled pod is deleted gracefully. As upstream, the apiserver does not finish it: the
    // pod stays, terminating, until its kubelet (or the pod garbage collector, for a node that is
    // gone) deletes it with no grace period left.
    let mut p = pod("g", json!({}));
    p["spec"]["nodeName"] = json!("n1");
    p["spec"]["terminationGracePeriodSeconds"] = json!(1);
    assert_eq!(
        post(&app, "/api/v1/namespaces/default/pods", p).await.code,
        201
    );
    let r = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/pods/g",
        &[],
        "{}",
    )
    .await;
    assert_eq!(r.code, 200);
    assert!(
        r.body["metadata"]["deletionTimestamp"].is_string(),
        "{}",
        r.text
    );
    assert_eq!(r.body["metadata"]["deletionGracePeriodSeconds"], 1);
    let r = call(&app, "GET", "/api/v1/namespaces/default/pods/g", &[], "").await;
    assert_eq!(r.code, 200, "kept until its kubelet finishes it");
    let r = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/pods/g",
        &[],
        r#"{"gracePeriodSeconds": 0}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    let r = call(&app, "GET", "/api/v1/namespaces/default/pods/g", &[], "").await;
    assert_eq!(r.code, 404, "the kubelet's final delete removes it");
}

#[tokio::test]
async fn discovery_documents() {
    let app = app().await;
    let r = call(
        &app,
        "GET",
        "/api",
        &[(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )],
        "",
    )
    .await;
    assert_eq!(
        r.headers["content-type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(r.body["kind"], "APIGroupDiscoveryList");
    let r = call(&app, "GET", "/apis", &[("accept", "application/json")], "").await;
    assert_eq!(r.body["kind"], "APIGroupList");
    assert!(r.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "apps"));
    let r = call(&app, "GET", "/apis/apps/v1", &[], "").await;
    assert_eq!(r.body["groupVersion"], "apps/v1");
    let r = call(&app, "GET", "/openapi/v3", &[], "").await;
    let url = r.body["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call(&app, "GET", &url, &[], "").await;
    let ops = r.body["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"].clone();
    assert_eq!(ops["x-kubernetes-group-version-kind"]["kind"], "Pod");
    assert!(ops["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation"));
    let r = call(&app, "GET", "/metrics", &[], "").await;
    assert!(r.text.contains("apiserver_request_total"), "{}", r.text);
    for p in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(call(&app, "GET", p, &[], "").await.code, 200);
    }
}

/// Regression: a merge PATCH of `/scale` without a resourceVersion answered 409 when a
/// controller's status write landed between its read and its compare-and-swap (the patched Scale
/// carries the resourceVersion it was applied to, which was taken for a precondition). Seen as
/// `kubectl scale` failing during `minik8s bench scale`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_patch_without_resource_version_retries_races_instead_of_409() {
    let app = app().await;
    let rc = json!({"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"r"},
        "spec":{"replicas":0,"selector":{"app":"r"},
                "template":{"metadata":{"labels":{"app":"r"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}});
    let r = post(
        &app,
        "/api/v1/namespaces/default/replicationcontrollers",
        rc,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    // A status writer racing the scale patches, as the replication controller does.
    let writer = {
        let app = app.clone();
        tokio::spawn(async move {
            for i in 0..300 {
                let body = json!({"status":{"replicas": i, "observedGeneration": 1}}).to_string();
                let r = call(
                    &app,
                    "PATCH",
                    "/api/v1/namespaces/default/replicationcontrollers/r/status",
                    &[("content-type", "application/merge-patch+json")],
                    &body,
                )
                .await;
                assert_eq!(r.code, 200, "{}", r.text);
            }
        })
    };
    let mut codes = std::collections::BTreeMap::new();
    for i in 1..=300 {
        let r = call(
            &app,
            "PATCH",
            "/api/v1/namespaces/default/replicationcontrollers/r/scale",
            &[("content-type", "application/merge-patch+json")],
            &json!({"spec":{"replicas": i}}).to_string(),
        )
        .await;
        *codes.entry(r.code).or_insert(0) += 1;
    }
    writer.await.unwrap();
    assert_eq!(codes, std::collections::BTreeMap::from([(200, 300)]));
    // A patch that names a stale resourceVersion is still a precondition.
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/replicationcontrollers/r/scale",
        &[("content-type", "application/merge-patch+json")],
        r#"{"metadata":{"resourceVersion":"1"},"spec":{"replicas":1}}"#,
    )
    .await;
    assert_eq!(r.code, 409, "{}", r.text);
}

/// Regression: a pod stored without today's spec defaults (here written straight into the store,
/// as an older version might have left it) could not be updated at all: the update was defaulted,
/// the stored spec was not, and even an annotation-only PATCH answered 422.
#[tokio::test]
async fn a_pod_stored_without_defaults_can_still_be_updated() {
    let (app, state) = app_with(apiserver::Config::default()).await;
    let raw = json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":"old","namespace":"default","uid":"u-old","creationTimestamp":"2026-01-01T00:00:00Z"},
        "spec":{"containers":[{"name":"c","image":"nginx"}]},
        "status":{"phase":"Pending"}});
    let created = state
        .store
        .create(
            "/registry/pods/default/old",
            serde_json::to_vec(&raw).unwrap().into(),
        )
        .await
        .unwrap();
    assert!(matches!(created, store::CreateOutcome::Created(_)));
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/pods/old",
        &[("content-type", "application/merge-patch+json")],
        r#"{"metadata":{"annotations":{"a":"b"}}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_eq!(r.body["metadata"]["annotations"]["a"], "b");
    // The stored pod now carries the defaults; a real spec change is still refused.
    assert_eq!(r.body["spec"]["restartPolicy"], "Always");
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/pods/old",
        &[("content-type", "application/merge-patch+json")],
        r#"{"spec":{"restartPolicy":"Never"}}"#,
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text);
}

#[tokio::test]
async fn subresources_binding_status_scale_and_event_conversion() {
    let app = app().await;
    // pods/binding sets spec.nodeName; a second binding conflicts.
    post(&app, "/api/v1/namespaces/default/pods", pod("b", json!({}))).await;
    let binding = json!({"apiVersion":"v1","kind":"Binding","metadata":{"name":"b"},"target":{"kind":"Node","name":"n1"}});
    let r = post(
        &app,
        "/api/v1/namespaces/default/pods/b/binding",
        binding.clone(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    let p = call(&app, "GET", "/api/v1/namespaces/default/pods/b", &[], "").await;
    assert_eq!(p.body["spec"]["nodeName"], "n1");
    let r = post(&app, "/api/v1/namespaces/default/pods/b/binding", binding).await;
    assert_eq!(r.code, 409, "{}", r.text);

    // /status writes change status only; main-resource writes keep status.
    let mut obj = p.body.clone();
    obj["status"] = json!({"phase":"Running"});
    obj["metadata"]["labels"] = json!({"sneaky":"1"});
    let r = call(
        &app,
        "PUT",
        "/api/v1/namespaces/default/pods/b/status",
        &[],
        &obj.to_string(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_eq!(r.body["status"]["phase"], "Running");
    assert!(
        r.body["metadata"]["labels"]["sneaky"].is_null(),
        "{}",
        r.text
    );
    let r = call(
        &app,
        "PATCH",
        "/api/v1/namespaces/default/pods/b",
        &[("content-type", "application/merge-patch+json")],
        r#"{"status":{"phase":"Failed"}}"#,
    )
    .await;
    assert_eq!(r.body["status"]["phase"], "Running");

    // Unknown fields of a status write: dropped from the status it stores (the rest of the body is
    // not used), refused anywhere with fieldValidation=Strict.
    let mut obj = r.body.clone();
    obj["status"]["bogus"] = json!(1);
    obj["spec"]["bogus"] = json!(2);
    let status_uri = "/api/v1/namespaces/default/pods/b/status";
    let r = call(&app, "PUT", status_uri, &[], &obj.to_string()).await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert!(r.body["status"].get("bogus").is_none(), "{}", r.text);
    assert!(r.body["spec"].get("bogus").is_none(), "{}", r.text);
    assert_eq!(r.body["status"]["phase"], "Running");
    obj["metadata"]["resourceVersion"] = r.body["metadata"]["resourceVersion"].clone();
    obj["status"].as_object_mut().map(|s| s.remove("bogus"));
    let strict = format!("{status_uri}?fieldValidation=Strict");
    let r = call(&app, "PUT", &strict, &[], &obj.to_string()).await;
    assert_eq!(r.code, 400, "{}", r.text);
    assert!(r.text.contains("spec.bogus"), "{}", r.text);

    // Deployment scale through apps/v1.
    let d = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
        "spec":{"replicas":1,"selector":{"matchLabels":{"app":"d"}},
                "template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}});
    let r = post(&app, "/apis/apps/v1/namespaces/default/deployments", d).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let r = call(
        &app,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/d/scale",
        &[],
        "",
    )
    .await;
    assert_eq!(
        (r.body["kind"].as_str(), r.body["spec"]["replicas"].as_i64()),
        (Some("Scale"), Some(1))
    );
    let r = call(
        &app,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/d/scale",
        &[("content-type", "application/merge-patch+json")],
        r#"{"spec":{"replicas":4}}"#,
    )
    .await;
    assert_eq!(r.body["spec"]["replicas"], 4, "{}", r.text);
    let r = call(
        &app,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/d",
        &[],
        "",
    )
    .await;
    assert_eq!(r.body["spec"]["replicas"], 4);
    assert_eq!(r.body["metadata"]["generation"], 2);
    let mut scale = call(
        &app,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/d/scale",
        &[],
        "",
    )
    .await
    .body;
    scale["metadata"]["resourceVersion"] = json!("1");
    scale["spec"]["replicas"] = json!(5);
    let r = call(
        &app,
        "PUT",
        "/apis/apps/v1/namespaces/default/deployments/d/scale",
        &[],
        &scale.to_string(),
    )
    .await;
    assert_eq!(r.code, 409, "stale Scale resourceVersion");

    // events.k8s.io/v1 and core v1 share storage with the field mapping.
    let ev = json!({"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"generateName":"ctl-"},
        "eventTime": "2026-12-02T10:00:00.000000Z", "reportingController": "ctl", "reportingInstance": "ctl-1",
        "action": "Scale", "reason": "Scaled", "note": "scaled it", "type": "Normal",
        "regarding": {"kind":"Deployment","namespace":"default","name":"d","apiVersion":"apps/v1"}});
    let r = post(&app, "/apis/events.k8s.io/v1/namespaces/default/events", ev).await;
    assert_eq!(r.code, 201, "{}", r.text);
    assert_eq!(r.body["apiVersion"], "events.k8s.io/v1");
    assert_eq!(r.body["note"], "scaled it");
    let name = r.body["metadata"]["name"].as_str().unwrap().to_string();
    let r = call(
        &app,
        "GET",
        &format!("/api/v1/namespaces/default/events/{name}"),
        &[],
        "",
    )
    .await;
    assert_eq!(r.body["apiVersion"], "v1");
    assert_eq!(r.body["message"], "scaled it");
    assert_eq!(r.body["involvedObject"]["name"], "d");
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dd",
        &[],
        "",
    )
    .await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);

    // Services get a cluster IP from 10.96.0.0/12; the built-in kubernetes Service has 10.96.0.1.
    let r = post(
        &app,
        "/api/v1/namespaces/default/services",
        json!({"metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    let ip = r.body["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(
        ip.starts_with("10.9") || ip.starts_with("10.10") || ip.starts_with("10.11"),
        "{ip}"
    );
    assert_ne!(ip, "10.96.0.1");
    let r = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/services/kubernetes",
        &[],
        "",
    )
    .await;
    assert_eq!(r.body["spec"]["clusterIP"], "10.96.0.1");
}

#[tokio::test]
async fn writers_share_the_watch_cache_copy_only_at_the_same_revision() {
    use apiserver::registry::store::stored_object;
    let (app, state) = app_with(apiserver::Config::default()).await;
    let r = post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    let key = "/registry/configmaps/default/c";
    let kv = state.store.get(key).await.unwrap().unwrap();
    assert!(
        state
            .cache
            .wait_for(kv.mod_revision, Duration::from_secs(5))
            .await,
        "cache caught up"
    );
    let cached = state.cache.get(key).unwrap();
    let read = stored_object(&state, &kv).unwrap();
    assert!(
        Arc::ptr_eq(&read, &cached),
        "same revision: the cache's copy"
    );
    assert_eq!(
        read["metadata"]["resourceVersion"],
        kv.mod_revision.to_string()
    );

    // Another revision of the key (here a value the cache never saw): decoded from the store.
    let other = store::KeyValue {
        value: serde_json::to_vec(&json!({"metadata": {"name": "c"}, "data": {"a": "2"}}))
            .unwrap()
            .into(),
        mod_revision: kv.mod_revision + 1,
        ..kv.clone()
    };
    let read = stored_object(&state, &other).unwrap();
    assert!(!Arc::ptr_eq(&read, &cached));
    assert_eq!(read["data"]["a"], "2");
    assert_eq!(
        read["metadata"]["resourceVersion"],
        (kv.mod_revision + 1).to_string()
    );
}

#[tokio::test]
async fn a_removed_pod_is_answered_with_the_deletion_resource_version() {
    let (app, state) = app_with(apiserver::Config::default()).await;
    let r = post(
        &app,
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    let created: u64 = r.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // Let the watch cache hold the pod, so the delete reads the shared copy.
    assert!(state.cache.wait_for(created, Duration::from_secs(5)).await);
    let r = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/pods/p",
        &[],
        r#"{"gracePeriodSeconds": 0}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_eq!(r.body["kind"], "Pod");
    let deleted: u64 = r.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(deleted > created);
    assert_eq!(deleted, state.store.current_revision());
    // The cache's copy of the last state keeps its own resourceVersion.
    assert!(state.cache.wait_for(deleted, Duration::from_secs(5)).await);
    assert!(state.cache.get("/registry/pods/default/p").is_none());
}

#[tokio::test]
async fn a_resource_registered_at_run_time_is_served_until_it_is_removed() {
    use apiserver::registry::{GenericStrategy, Resource};
    const AGGREGATED: &str =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let (app, state) = app_with(apiserver::Config::default()).await;
    let groups = |r: &Resp| -> Vec<String> {
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let before = call(&app, "GET", "/apis", &[("accept", AGGREGATED)], "").await;
    assert!(!groups(&before).contains(&"example.com".to_string()));
    let etag_before = before.headers["etag"].to_str().unwrap().to_string();
    let unchanged = call(
        &app,
        "GET",
        "/apis",
        &[("accept", AGGREGATED), ("if-none-match", &etag_before)],
        "",
    )
    .await;
    assert_eq!(unchanged.code, 304, "an unchanged set is not sent again");

    let widgets = api::ResourceInfo::new("example.com", "v1", "Widget", "widgets")
        .short_names(&["wd"])
        .categories(&["all"]);
    state
        .resources
        .register(Resource::new(widgets, Arc::new(GenericStrategy)))
        .unwrap();

    // Discovery, aggregated and legacy, and OpenAPI show it.
    let after = call(
        &app,
        "GET",
        "/apis",
        &[("accept", AGGREGATED), ("if-none-match", &etag_before)],
        "",
    )
    .await;
    assert_eq!(after.code, 200, "the ETag changed with the served set");
    assert_ne!(after.headers["etag"], etag_before.as_str());
    let group = after.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "example.com")
        .cloned()
        .unwrap();
    let entry = &group["versions"][0]["resources"][0];
    assert_eq!(entry["resource"], "widgets");
    assert_eq!(entry["responseKind"]["kind"], "Widget");
    assert_eq!(entry["shortNames"], json!(["wd"]));
    let legacy = call(&app, "GET", "/apis/example.com/v1", &[], "").await;
    assert_eq!(legacy.body["resources"][0]["name"], "widgets");
    let r = call(&app, "GET", "/apis/example.com", &[], "").await;
    assert_eq!(r.body["preferredVersion"]["groupVersion"], "example.com/v1");
    let r = call(&app, "GET", "/openapi/v3", &[], "").await;
    assert!(r.body["paths"]["apis/example.com/v1"].is_object());

    // Create, list, watch, Table.
    let base = "/apis/example.com/v1/namespaces/default/widgets";
    let r = post(
        &app,
        base,
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w1", "labels": {"a": "b"}}, "spec": {"size": 3}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    assert_eq!(r.body["spec"]["size"], 3, "no schema: every field is kept");
    let r = call(&app, "GET", &format!("{base}?labelSelector=a%3Db"), &[], "").await;
    assert_eq!(r.body["kind"], "WidgetList");
    assert_eq!(r.body["items"][0]["metadata"]["name"], "w1");
    let r = call(
        &app,
        "GET",
        base,
        &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        "",
    )
    .await;
    assert_eq!(r.body["columnDefinitions"][0]["name"], "Name");
    assert_eq!(r.body["rows"][0]["cells"][0], "w1");
    let resp = app
        .clone()
        .oneshot(
            Request::builder()
                .uri(format!("{base}?watch=true&resourceVersion=0"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("an event in time")
        .unwrap()
        .unwrap();
    let line: Value = serde_json::from_slice(frame.data_ref().unwrap()).unwrap();
    assert_eq!(line["type"], "ADDED");
    assert_eq!(line["object"]["metadata"]["name"], "w1");

    // Removed: gone from discovery, OpenAPI and routing.
    assert!(state
        .resources
        .remove("example.com", "v1", "widgets")
        .is_some());
    let gone = call(&app, "GET", "/apis", &[("accept", AGGREGATED)], "").await;
    assert!(!groups(&gone).contains(&"example.com".to_string()));
    assert_ne!(gone.headers["etag"], after.headers["etag"]);
    assert_eq!(call(&app, "GET", base, &[], "").await.code, 404);
    assert_eq!(
        call(&app, "GET", "/apis/example.com/v1", &[], "")
            .await
            .code,
        404
    );
    let r = call(&app, "GET", "/openapi/v3", &[], "").await;
    assert!(r.body["paths"]["apis/example.com/v1"].is_null());
}

#[tokio::test]
async fn a_watch_without_resource_version_sends_a_large_collection_whole() {
    // More than a page of held objects: the snapshot is decoded a page at a time as it is sent.
    let app = app().await;
    let n = 1_050;
    for i in 0..n {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:04}")}});
        let r = call(
            &app,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[],
            &cm.to_string(),
        )
        .await;
        assert_eq!(r.code, 201, "{}", r.text);
    }
    let listed = call(
        &app,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[],
        "",
    )
    .await;
    let all = listed.body["items"].as_array().unwrap().len();
    let events = crate::common::http::watch_lines(
        &app,
        "/api/v1/namespaces/default/configmaps?watch=true",
        all,
    )
    .await;
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "ADDED")
        .filter_map(|e| e["object"]["metadata"]["name"].as_str())
        .filter(|name| name.starts_with("cm-"))
        .collect();
    let expected: Vec<String> = (0..n).map(|i| format!("cm-{i:04}")).collect();
    assert_eq!(names, expected);
}
