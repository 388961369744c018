//! Discovery and the REST mapper against a fake discovery server whose served groups change:
//! the deferred mapper rediscovers on a miss (and only then), a miss right after a discovery is
//! final, concurrent misses share one discovery, preferred versions are honoured, subresources
//! fold into their resources, and a group-version that fails is left out.

#![allow(clippy::result_large_err, clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use client::{Client, Config, Error, GroupVersionKind, RestMapper};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Served {
    /// Whether the `example.com` group (v1 and v2, v2 preferred) is served.
    widgets: Mutex<bool>,
    /// Requests for `/apis`: one per discovery.
    discoveries: AtomicUsize,
}

async fn core() -> Json<Value> {
    Json(json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}))
}

async fn core_v1() -> Json<Value> {
    Json(
        json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "configmaps", "singularName": "configmap", "namespaced": true, "kind": "ConfigMap", "verbs": ["get"]},
            {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace", "verbs": ["get"]},
            {"name": "namespaces/status", "singularName": "", "namespaced": false, "kind": "Namespace", "verbs": ["get"]},
        ]}),
    )
}

async fn groups(State(s): State<Arc<Served>>) -> Json<Value> {
    s.discoveries.fetch_add(1, Ordering::SeqCst);
    let mut groups = vec![json!({"name": "broken.io",
        "versions": [{"groupVersion": "broken.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "broken.io/v1", "version": "v1"}})];
    if *s.widgets.lock() {
        groups.push(json!({"name": "example.com",
            "versions": [{"groupVersion": "example.com/v1", "version": "v1"},
                         {"groupVersion": "example.com/v2", "version": "v2"}],
            "preferredVersion": {"groupVersion": "example.com/v2", "version": "v2"}}));
    }
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

async fn group_version(
    State(s): State<Arc<Served>>,
    Path((group, version)): Path<(String, String)>,
) -> Response {
    if group == "example.com" && *s.widgets.lock() {
        return Json(json!({"kind": "APIResourceList", "groupVersion": format!("example.com/{version}"),
            "resources": [
                {"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget", "verbs": ["get"]},
                {"name": "widgets/status", "singularName": "", "namespaced": true, "kind": "Widget", "verbs": ["get"]},
                {"name": "widgets/scale", "singularName": "", "namespaced": true, "kind": "Scale",
                    "group": "autoscaling", "version": "v1", "verbs": ["get"]},
            ]}))
        .into_response();
    }
    // broken.io: an aggregated API that is down.
    (StatusCode::SERVICE_UNAVAILABLE, "unavailable").into_response()
}

struct Server {
    served: Arc<Served>,
    client: Client,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn server() -> Server {
    let served = Arc::new(Served::default());
    let app = Router::new()
        .route("/api", get(core))
        .route("/api/v1", get(core_v1))
        .route("/apis", get(groups))
        .route("/apis/{group}/{version}", get(group_version))
        .with_state(served.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await;
    });
    // No retries: the 503 group-version is answered once.
    let client = Client::new(Config::new(format!("http://{addr}")))
        .unwrap()
        .with_max_retries(0);
    Server {
        served,
        client,
        stop,
    }
}

#[tokio::test]
async fn a_miss_rediscovers_once_and_a_fresh_miss_is_final() -> client::Result<()> {
    let s = server().await;
    let mapper = RestMapper::new(s.client.clone());
    let widget = GroupVersionKind::new("example.com", "v1", "Widget");
    // First lookup: discovery runs, the kind is not there, and the miss is final at once.
    let err = mapper.resolve(&widget).await.err();
    assert!(matches!(err, Some(Error::NoKindMatch { .. })), "{err:?}");
    assert_eq!(s.served.discoveries.load(Ordering::SeqCst), 1);
    // A known kind: answered from the cache.
    let cm = mapper.resolve_kind("", "ConfigMap").await?;
    assert_eq!(cm.plural, "configmaps");
    let ns = mapper.resolve_kind("", "Namespace").await?;
    assert!(!ns.namespaced && ns.has_subresource("status"));
    assert_eq!(s.served.discoveries.load(Ordering::SeqCst), 1);
    // The group appears (a CRD established): the cached document misses, so it rediscovers.
    *s.served.widgets.lock() = true;
    let w = mapper.resolve(&widget).await?;
    assert_eq!(
        (w.plural.as_str(), w.api_version.as_str()),
        ("widgets", "example.com/v1")
    );
    assert_eq!(w.subresources, ["status", "scale"]);
    assert_eq!(s.served.discoveries.load(Ordering::SeqCst), 2);
    // Without a version: the preferred one.
    assert_eq!(
        mapper.resolve_kind("example.com", "Widget").await?.version,
        "v2"
    );
    assert_eq!(
        mapper
            .resolve_resource("example.com", Some("v1"), "widgets")
            .await?
            .version,
        "v1"
    );
    // The failing group-version was left out, not fatal.
    let err = mapper.resolve_kind("broken.io", "Thing").await.err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some(r#"no matches for kind "Thing" in group "broken.io""#)
    );
    assert_eq!(s.served.discoveries.load(Ordering::SeqCst), 3);
    let d = mapper.discovery().await?;
    assert!(d.groups.iter().all(|g| g.name != "broken.io"));
    // reset: the next lookup discovers again.
    mapper.reset();
    mapper.resolve_kind("", "ConfigMap").await?;
    assert_eq!(s.served.discoveries.load(Ordering::SeqCst), 4);
    Ok(())
}

#[tokio::test]
async fn concurrent_misses_share_one_discovery() -> client::Result<()> {
    let s = server().await;
    let mapper = RestMapper::new(s.client.clone());
    mapper.discovery().await?;
    assert_eq!(s.served.discoveries.load(Ordering::SeqCst), 1);
    let missing = GroupVersionKind::new("nowhere.io", "v1", "Ghost");
    let lookups = (0..8).map(|_| {
        let (m, g) = (mapper.clone(), missing.clone());
        tokio::spawn(async move { m.resolve(&g).await })
    });
    for r in futures::future::join_all(lookups).await {
        assert!(matches!(r, Ok(Err(Error::NoKindMatch { .. }))), "{r:?}");
    }
    // All eight began with the same cached document: one rediscovery served them all.
    assert_eq!(s.served.discoveries.load(Ordering::SeqCst), 2);
    Ok(())
}
