//! The informer stack over real HTTP: factory → informer → `Api<K>` list+watch against the axum
//! test server; plus the REST client's token bucket.

#![allow(clippy::result_large_err)] // client::Error carries a full Status by design

use std::sync::Arc;
use std::time::Duration;

use crate::common::TestServer;
use api::labels::Selector;
use client::{Client, Config, FnHandler, ListParams, SharedInformerFactory};
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn pod(name: &str, node: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("default".into());
    p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
        node_name: Some(node.into()),
        ..Default::default()
    });
    p
}

#[tokio::test]
async fn factory_informer_lists_then_follows_the_watch_over_http() -> client::Result<()> {
    let s = TestServer::start().await;
    let client = Client::new(Config::new(s.url()))?;
    let api = client.api::<Pod>(Some("default"));
    for i in 0..3 {
        api.create(&pod(&format!("p{i}"), "n1")).await?;
    }
    // Events the watch will deliver after the list RV (the server lists at RV 103).
    let ev = |t: &str, name: &str, rv: u64| {
        json!({"type": t, "object": {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "default", "resourceVersion": rv.to_string()}}})
        .to_string()
    };
    *s.state.watch_lines.lock() = vec![
        ev("ADDED", "p9", 104),
        ev("MODIFIED", "p0", 105),
        json!({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "106"}}}).to_string(),
        ev("DELETED", "p1", 107),
    ];
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let inf = factory.informer::<Pod>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
    inf.add_event_handler(
        FnHandler::new()
            .on_add(move |p: &Arc<Pod>, initial| {
                a.lock().push(format!(
                    "add {} {initial}",
                    p.metadata.name.clone().unwrap_or_default()
                ))
            })
            .on_update(move |_, p: &Arc<Pod>| {
                u.lock().push(format!(
                    "update {}",
                    p.metadata.name.clone().unwrap_or_default()
                ))
            })
            .on_delete(move |p| {
                d.lock().push(format!(
                    "delete {}",
                    p.object().metadata.name.clone().unwrap_or_default()
                ))
            }),
    );
    let token = CancellationToken::new();
    factory.start(token.clone());
    assert!(
        tokio::time::timeout(Duration::from_secs(10), factory.wait_for_cache_sync(&token))
            .await
            .unwrap_or(false)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while inf.last_sync_resource_version() != "107" {
        assert!(
            Instant::now() < deadline,
            "rv {} seen {:?}",
            inf.last_sync_resource_version(),
            seen.lock()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut keys = inf.indexer().list_keys();
    keys.sort();
    assert_eq!(keys, vec!["default/p0", "default/p2", "default/p9"]);
    let got = seen.lock().clone();
    assert_eq!(
        &got[3..],
        &["add p9 false", "update p0", "delete p1"],
        "{got:?}"
    );
    assert_eq!(
        inf.lister()
            .namespace("default")
            .list(&Selector::everything())
            .len(),
        3
    );
    let reqs = s.requests();
    let list = reqs
        .iter()
        .find(|r| r.path == "/api/v1/pods" && !r.query.contains_key("watch"))
        .cloned();
    let Some(list) = list else { panic!("no list") };
    assert_eq!(
        list.query.get("resourceVersion").map(String::as_str),
        Some("0")
    );
    assert_eq!(list.query.get("limit").map(String::as_str), Some("500"));
    let watch = reqs.iter().find(|r| r.query.contains_key("watch")).cloned();
    let Some(watch) = watch else {
        panic!("no watch")
    };
    assert_eq!(
        watch.query.get("resourceVersion").map(String::as_str),
        Some("103")
    );
    assert_eq!(
        watch.query.get("allowWatchBookmarks").map(String::as_str),
        Some("true")
    );
    let t: u32 = watch
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    assert!(
        (300..600).contains(&t),
        "watch timeout in [5 min, 10 min): {t}"
    );
    token.cancel();
    assert!(
        tokio::time::timeout(Duration::from_secs(10), factory.shutdown())
            .await
            .is_ok()
    );
    Ok(())
}

#[tokio::test]
async fn field_selector_informer_sends_its_selector() -> client::Result<()> {
    let s = TestServer::start().await;
    let client = Client::new(Config::new(s.url()))?;
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let inf = factory.informer_for::<Pod>(ListParams::default().fields("spec.nodeName=n1"));
    let token = CancellationToken::new();
    factory.start(token.clone());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !inf.has_synced() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reqs = s.requests();
    assert!(reqs
        .iter()
        .all(|r| r.query.get("fieldSelector").map(String::as_str) == Some("spec.nodeName=n1")));
    token.cancel();
    factory.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn client_side_token_bucket_spaces_requests() -> client::Result<()> {
    let s = TestServer::start().await;
    let mut cfg = Config::new(s.url());
    cfg.qps = 20.0;
    cfg.burst = 1;
    let api = Client::new(cfg)?.api::<Pod>(Some("default"));
    let start = Instant::now();
    for _ in 0..5 {
        let _ = api.get_opt("x").await?;
    }
    // Burst 1, then 4 more tokens at 20/s: at least 200 ms (a bound the limiter guarantees).
    assert!(
        start.elapsed() >= Duration::from_millis(195),
        "{:?}",
        start.elapsed()
    );
    Ok(())
}
