//! REST client against a real HTTP server (axum, 127.0.0.1:0): paths, verbs, content types,
//! error classification from `Status`, retries, watch decoding.

#![allow(clippy::result_large_err)] // client::Error carries a full Status by design

use std::collections::BTreeMap;

use crate::common::TestServer;
use client::{
    Client, Config, DeleteParams, Error, ListParams, Patch, Preconditions, PropagationPolicy,
    WatchEvent,
};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.namespace = Some("default".into());
    c.data = Some(BTreeMap::from([("a".to_string(), "1".to_string())]));
    c
}

fn client_for(s: &TestServer) -> Client {
    let mut cfg = Config::new(s.url());
    cfg.token = Some("t0ken".into());
    cfg.user_agent = "client-tests/1".into();
    match Client::new(cfg) {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    }
}

#[tokio::test]
async fn crud_paths_content_types_and_error_classes() -> client::Result<()> {
    let s = TestServer::start().await;
    let c = client_for(&s);
    let api = c.api::<ConfigMap>(Some("default"));

    let created = api.create(&cm("a")).await?;
    assert!(created.metadata.resource_version.is_some());
    let r = &s.requests()[0];
    assert_eq!(r.path, "/api/v1/namespaces/default/configmaps");
    assert_eq!(r.authorization.as_deref(), Some("Bearer t0ken"));
    assert_eq!(r.user_agent.as_deref(), Some("client-tests/1"));

    let dup = api.create(&cm("a")).await;
    assert!(matches!(&dup, Err(e) if e.is_already_exists()), "{dup:?}");
    let missing = api.get("nope").await;
    assert!(
        matches!(&missing, Err(e) if e.is_not_found() && e.code() == Some(404)),
        "{missing:?}"
    );
    if let Err(Error::NotFound(st)) = &missing {
        assert_eq!(st.reason.as_deref(), Some("NotFound"));
    }

    let mut stale = created.clone();
    stale.metadata.resource_version = Some("1".into());
    let conflict = api.replace("a", &stale).await;
    assert!(
        matches!(&conflict, Err(e) if e.is_conflict()),
        "{conflict:?}"
    );
    let mut fresh = api.get("a").await?;
    fresh.data = Some(BTreeMap::from([("b".to_string(), "2".to_string())]));
    let replaced = api.replace("a", &fresh).await?;
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    let status_written = api.replace_status("a", &replaced).await?;
    assert_eq!(
        s.requests()
            .last()
            .map(|r| r.path.clone())
            .unwrap_or_default(),
        "/api/v1/namespaces/default/configmaps/a/status"
    );
    // The metadata-only variant sends the same request and returns the stored metadata.
    let meta = api.replace_status_metadata("a", &status_written).await?;
    assert_eq!(meta.name.as_deref(), Some("a"));
    assert_eq!(
        meta.resource_version,
        api.get("a").await?.metadata.resource_version
    );
    assert_eq!(
        s.requests()
            .iter()
            .rev()
            .find(|r| r.path.ends_with("/status"))
            .map(|r| r.method.clone()),
        Some(http::Method::PUT)
    );

    let patched = api
        .patch("a", &Patch::Merge(json!({"data": {"c": "3"}})))
        .await?;
    assert_eq!(
        patched
            .data
            .as_ref()
            .and_then(|d| d.get("c"))
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        s.requests()
            .last()
            .and_then(|r| r.content_type.clone())
            .as_deref(),
        Some("application/merge-patch+json")
    );
    api.patch("a", &Patch::Strategic(json!({"data": {"d": "4"}})))
        .await?;
    assert_eq!(
        s.requests()
            .last()
            .and_then(|r| r.content_type.clone())
            .as_deref(),
        Some("application/strategic-merge-patch+json")
    );
    api.patch_status(
        "a",
        &Patch::Apply {
            body: json!({"data": {"e": "5"}}),
            field_manager: "me".into(),
            force: true,
        },
    )
    .await?;
    let last = s.requests().last().cloned();
    let Some(last) = last else {
        panic!("no request")
    };
    assert_eq!(
        last.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(
        last.query.get("fieldManager").map(String::as_str),
        Some("me")
    );
    assert_eq!(last.query.get("force").map(String::as_str), Some("true"));
    assert!(last.path.ends_with("/a/status"));

    let opts = DeleteParams {
        grace_period_seconds: Some(0),
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions {
            uid: Some("uid-a".into()),
            resource_version: None,
        }),
    };
    api.delete("a", &opts).await?;
    let del = s.requests().last().cloned();
    let Some(del) = del else { panic!("no request") };
    assert_eq!(
        del.body,
        json!({"gracePeriodSeconds": 0, "propagationPolicy": "Foreground", "preconditions": {"uid": "uid-a"}})
    );
    let gone = api.delete("a", &DeleteParams::default()).await;
    assert!(matches!(&gone, Err(e) if e.is_not_found()));

    // Group paths and cluster-wide lists.
    let leases = c.api::<Lease>(Some("kube-system"));
    let _ = leases.get("x").await;
    assert_eq!(
        s.requests()
            .last()
            .map(|r| r.path.clone())
            .unwrap_or_default(),
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x"
    );
    c.all::<Pod>().list(&ListParams::default()).await?;
    assert_eq!(
        s.requests()
            .last()
            .map(|r| r.path.clone())
            .unwrap_or_default(),
        "/api/v1/pods"
    );
    Ok(())
}

#[tokio::test]
async fn list_pagination_and_selectors() -> client::Result<()> {
    let s = TestServer::start().await;
    let api = client_for(&s).api::<ConfigMap>(Some("default"));
    for i in 0..5 {
        api.create(&cm(&format!("c{i}"))).await?;
    }
    let p = ListParams::default()
        .labels("app=web")
        .fields("metadata.name!=x")
        .limit(2);
    let first = api.list(&p).await?;
    assert_eq!(first.items.len(), 2);
    assert!(!first.resource_version.is_empty());
    let q = s
        .requests()
        .last()
        .map(|r| r.query.clone())
        .unwrap_or_default();
    assert_eq!(q.get("labelSelector").map(String::as_str), Some("app=web"));
    assert_eq!(
        q.get("fieldSelector").map(String::as_str),
        Some("metadata.name!=x")
    );
    assert_eq!(q.get("limit").map(String::as_str), Some("2"));
    let mut all = first.items.len();
    let mut token = first.continue_token;
    while let Some(t) = token {
        let page = api
            .list(&ListParams {
                continue_token: Some(t),
                limit: Some(2),
                ..Default::default()
            })
            .await?;
        all += page.items.len();
        token = page.continue_token;
    }
    assert_eq!(all, 5);

    // Go servers may send `"items": null` for an empty list.
    s.state.inject.lock().push_back(crate::common::Injected {
        status: 200,
        retry_after: None,
        body: Some(json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": null})),
    });
    let empty = api.list(&ListParams::default()).await?;
    assert!(
        empty.items.is_empty() && empty.resource_version == "9" && empty.continue_token.is_none()
    );

    assert!(api.get_opt("c0").await?.is_some());
    assert!(
        api.get_opt("missing").await?.is_none(),
        "absence is a value"
    );
    Ok(())
}

#[tokio::test]
async fn watch_stream_decodes_events_across_chunks() -> client::Result<()> {
    let s = TestServer::start().await;
    let obj = |n: &str, rv: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default", "resourceVersion": rv}, "data": {"k": "a long value to push this line over several chunks"}});
    *s.state.watch_lines.lock() = vec![
        json!({"type": "ADDED", "object": obj("a", "6")}).to_string(),
        json!({"type": "MODIFIED", "object": obj("a", "7")}).to_string(),
        String::new(),
        json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": "8"}}}).to_string(),
        json!({"type": "DELETED", "object": obj("a", "9")}).to_string(),
        json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version: 5 (9)"}}).to_string(),
    ];
    let api = client_for(&s).api::<ConfigMap>(Some("default"));
    let p = ListParams {
        timeout_seconds: Some(1),
        allow_bookmarks: true,
        ..Default::default()
    };
    let stream = api.watch(&p, "5").await?;
    let events: Vec<client::Result<WatchEvent<ConfigMap>>> = stream.collect().await;
    let q = s
        .requests()
        .last()
        .map(|r| r.query.clone())
        .unwrap_or_default();
    assert_eq!(q.get("watch").map(String::as_str), Some("true"));
    assert_eq!(q.get("resourceVersion").map(String::as_str), Some("5"));
    assert_eq!(
        q.get("allowWatchBookmarks").map(String::as_str),
        Some("true")
    );
    assert_eq!(q.get("timeoutSeconds").map(String::as_str), Some("1"));
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            Ok(WatchEvent::Added(o)) => format!(
                "A{}",
                o.metadata.resource_version.clone().unwrap_or_default()
            ),
            Ok(WatchEvent::Modified(o)) => format!(
                "M{}",
                o.metadata.resource_version.clone().unwrap_or_default()
            ),
            Ok(WatchEvent::Deleted(o)) => format!(
                "D{}",
                o.metadata.resource_version.clone().unwrap_or_default()
            ),
            Ok(WatchEvent::Bookmark(rv)) => format!("B{rv}"),
            Ok(WatchEvent::Error(st)) => format!("E{}", st.code.unwrap_or_default()),
            Err(e) => format!("err {e}"),
        })
        .collect();
    assert_eq!(kinds, vec!["A6", "M7", "B8", "D9", "E410"]);
    if let Some(Ok(WatchEvent::Error(st))) = events.last() {
        assert!(Error::from_watch_status(st.clone()).is_gone());
    }
    Ok(())
}

#[tokio::test]
async fn retries_429_with_retry_after_and_5xx_only_for_idempotent_verbs() -> client::Result<()> {
    let s = TestServer::start().await;
    let c = client_for(&s);
    let api = c.api::<ConfigMap>(Some("default"));
    api.create(&cm("a")).await?;

    s.clear_requests();
    s.inject(429, Some(0));
    s.inject(429, Some(0));
    api.get("a").await?;
    assert_eq!(s.requests().len(), 3, "two 429s then success");

    s.clear_requests();
    s.inject(503, None);
    s.inject(500, None);
    api.get("a").await?;
    assert_eq!(s.requests().len(), 3, "GET retried on 5xx");

    s.clear_requests();
    s.inject(503, None);
    let r = api.create(&cm("b")).await;
    assert!(matches!(r, Err(Error::Api { code: 503, .. })), "{r:?}");
    assert_eq!(s.requests().len(), 1, "POST is not retried on 5xx");

    s.clear_requests();
    s.inject(429, Some(0));
    api.create(&cm("b")).await?;
    assert_eq!(
        s.requests().len(),
        2,
        "POST is retried on 429: the server did not act"
    );

    s.clear_requests();
    for _ in 0..10 {
        s.inject(429, Some(0));
    }
    let r = api.get("a").await;
    assert!(matches!(&r, Err(e) if e.is_too_many_requests()), "{r:?}");
    assert_eq!(
        s.requests().len() as u32,
        client::rest::client::MAX_RETRIES + 1,
        "bounded retries"
    );
    s.state.inject.lock().clear();

    s.clear_requests();
    s.inject(500, None);
    let r = c
        .with_max_retries(0)
        .api::<ConfigMap>(Some("default"))
        .get("a")
        .await;
    assert!(matches!(r, Err(Error::Api { code: 500, .. })));
    assert_eq!(s.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn subresource_post_and_transport_errors() -> client::Result<()> {
    let s = TestServer::start().await;
    let c = client_for(&s);
    let pods = c.api::<Pod>(Some("default"));
    let mut p = Pod::default();
    p.metadata.name = Some("p1".into());
    pods.create(&p).await?;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"}, "target": {"kind": "Node", "name": "n1"}});
    let v = pods.create_subresource("p1", "binding", &binding).await?;
    assert_eq!(v["status"], "Success");
    let last = s.requests().last().cloned();
    let Some(last) = last else {
        panic!("no request")
    };
    assert_eq!(last.path, "/api/v1/namespaces/default/pods/p1/binding");
    assert_eq!(last.body["target"]["name"], "n1");

    // Nothing listens on port 1: connection refused, classified, not retried forever.
    let dead = Client::new(Config::new("http://127.0.0.1:1"))?.with_max_retries(1);
    let r = dead.api::<Pod>(Some("default")).get("x").await;
    assert!(matches!(&r, Err(e) if e.is_connection_refused()), "{r:?}");

    assert!(matches!(
        Client::new(Config::new("ftp://x")),
        Err(Error::Config(_))
    ));
    let mut bad_ca = Config::new("https://127.0.0.1:1");
    bad_ca.ca_pem = Some(b"not a pem".to_vec());
    assert!(
        matches!(Client::new(bad_ca), Err(Error::Config(_))),
        "a CA bundle without certificates is rejected"
    );
    Ok(())
}
