//! The built-in admission plugins through the router (`oneshot`): ServiceAccount (defaulting, the
//! token volume, a missing account refused, waiting for a new namespace's `default` account,
//! the account immutable on update), DefaultTolerationSeconds, LimitRanger on pods and claims,
//! and the plugin set of an apiserver without controllers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use apiserver::admission::AdmissionConfig;
use axum::Router;
use serde_json::{json, Value};

use crate::common;
use common::http::{call, get, post};

/// A seeded server with `admission`.
async fn app_with(admission: AdmissionConfig) -> Router {
    let store = store::MemoryStore::new(store::StoreConfig::default()).expect("memory store");
    let config = apiserver::Config {
        admission,
        ..Default::default()
    };
    let token = tokio_util::sync::CancellationToken::new();
    let state = apiserver::AppState::start(config, Arc::new(store), token)
        .await
        .expect("state");
    apiserver::bootstrap::seed(&state).await.expect("seed");
    apiserver::app(state)
}

/// Every plugin, waiting at most `wait` for a `default` account.
async fn app(wait: Duration) -> Router {
    app_with(AdmissionConfig {
        default_service_account_wait: wait,
        ..AdmissionConfig::default()
    })
    .await
}

async fn namespace(app: &Router, ns: &str) {
    let (code, body) = post(app, "/api/v1/namespaces", json!({"metadata": {"name": ns}})).await;
    assert_eq!(code, 201, "{body}");
}

async fn account(app: &Router, ns: &str, name: &str) {
    let uri = format!("/api/v1/namespaces/{ns}/serviceaccounts");
    let (code, body) = post(app, &uri, json!({"metadata": {"name": name}})).await;
    assert_eq!(code, 201, "{body}");
}

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "nginx"}]);
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

async fn create_pod(app: &Router, ns: &str, body: Value) -> (u16, Value) {
    post(app, &format!("/api/v1/namespaces/{ns}/pods"), body).await
}

#[tokio::test]
async fn pods_get_their_account_token_volume_and_default_tolerations() {
    let app = app(Duration::from_secs(10)).await;
    account(&app, "default", "default").await;
    let (code, p) = create_pod(&app, "default", pod("web", json!({}))).await;
    assert_eq!(code, 201, "{p}");
    let spec = &p["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    let volume = spec["volumes"][0]["name"].as_str().unwrap();
    assert!(volume.starts_with("kube-api-access-"), "{volume}");
    assert_eq!(
        spec["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3607
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": volume, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );
    assert_eq!(
        spec["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );

    // The deprecated field names the account too.
    account(&app, "default", "builder").await;
    let (code, p) = create_pod(
        &app,
        "default",
        pod("old", json!({"serviceAccount": "builder"})),
    )
    .await;
    assert_eq!(code, 201, "{p}");
    assert_eq!(p["spec"]["serviceAccountName"], "builder");

    // The account cannot change; a full PUT without the tolerations gets them again.
    let mut changed = p.clone();
    changed["spec"]["serviceAccountName"] = json!("default");
    changed["spec"]["serviceAccount"] = json!("default");
    let (code, st) = call(
        &app,
        "PUT",
        "/api/v1/namespaces/default/pods/old",
        "application/json",
        changed,
    )
    .await;
    assert_eq!(code, 422, "{st}");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("spec: Forbidden: pod updates may not change fields other than"),
        "{st}"
    );
    let mut replaced = p.clone();
    replaced["spec"]
        .as_object_mut()
        .unwrap()
        .remove("tolerations");
    let (code, st) = call(
        &app,
        "PUT",
        "/api/v1/namespaces/default/pods/old",
        "application/json",
        replaced,
    )
    .await;
    assert_eq!(code, 200, "{st}");
    assert_eq!(st["spec"]["tolerations"], p["spec"]["tolerations"]);
}

#[tokio::test]
async fn a_missing_account_is_refused_with_upstreams_message() {
    let app = app(Duration::from_millis(200)).await;
    account(&app, "default", "default").await;
    let (code, st) = create_pod(
        &app,
        "default",
        pod("p", json!({"serviceAccountName": "builder"})),
    )
    .await;
    assert_eq!(code, 403, "{st}");
    assert_eq!(
        st["message"],
        "pods \"p\" is forbidden: error looking up service account default/builder: serviceaccount \"builder\" not found"
    );
    assert_eq!(st["reason"], "Forbidden");
    // A namespace whose `default` account never comes: refused once the wait is over.
    namespace(&app, "empty").await;
    let (code, st) = create_pod(&app, "empty", pod("p", json!({}))).await;
    assert_eq!(code, 403, "{st}");
    assert_eq!(
        st["message"],
        "pods \"p\" is forbidden: error looking up service account empty/default: serviceaccount \"default\" not found"
    );
    // A missing namespace is NamespaceLifecycle's 404, before any wait.
    let (code, st) = create_pod(&app, "nowhere", pod("p", json!({}))).await;
    assert_eq!(code, 404, "{st}");
    assert_eq!(st["message"], "namespaces \"nowhere\" not found");
}

#[tokio::test]
async fn a_pod_create_waits_for_a_new_namespaces_default_account() {
    let app = app(Duration::from_secs(30)).await;
    namespace(&app, "fresh").await;
    let creating = tokio::spawn({
        let app = app.clone();
        async move { create_pod(&app, "fresh", pod("p", json!({}))).await }
    });
    tokio::task::yield_now().await;
    account(&app, "fresh", "default").await;
    let (code, p) = tokio::time::timeout(Duration::from_secs(30), creating)
        .await
        .expect("the create ends")
        .unwrap();
    assert_eq!(code, 201, "{p}");
    assert_eq!(p["spec"]["serviceAccountName"], "default");
}

#[tokio::test]
async fn without_controllers_pods_keep_an_empty_account() {
    let app = app_with(AdmissionConfig::without_controllers()).await;
    let (code, p) = create_pod(&app, "default", pod("p", json!({}))).await;
    assert_eq!(code, 201, "{p}");
    assert!(p["spec"].get("serviceAccountName").is_none(), "{p}");
    assert!(p["spec"].get("volumes").is_none(), "{p}");
    assert_eq!(p["spec"]["tolerations"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn limit_ranges_default_and_limit_pods_and_claims() {
    let app = app(Duration::from_secs(10)).await;
    account(&app, "default", "default").await;
    let (code, lr) = post(
        &app,
        "/api/v1/namespaces/default/limitranges",
        json!({"metadata": {"name": "limits"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}},
            {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}},
        ]}}),
    )
    .await;
    assert_eq!(code, 201, "{lr}");
    let (code, p) = create_pod(&app, "default", pod("defaulted", json!({}))).await;
    assert_eq!(code, 201, "{p}");
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}})
    );
    assert_eq!(
        p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"
    );
    assert_eq!(p["status"]["qosClass"], "Burstable");

    let big = pod(
        "big",
        json!({"containers": [{"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "2"}}}]}),
    );
    let (code, st) = create_pod(&app, "default", big).await;
    assert_eq!(code, 403, "{st}");
    assert_eq!(
        st["message"],
        "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
    );
    let (code, _) = get(&app, "/api/v1/namespaces/default/pods/big").await;
    assert_eq!(code, 404);

    let claim = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                       "resources": {"requests": {"storage": "20Gi"}}}});
    let (code, st) = post(
        &app,
        "/api/v1/namespaces/default/persistentvolumeclaims",
        claim,
    )
    .await;
    assert_eq!(code, 403, "{st}");
    assert_eq!(
        st["message"],
        "persistentvolumeclaims \"data\" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"
    );
}
