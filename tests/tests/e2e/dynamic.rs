//! The client's dynamic API against a Sandbox, over built-in kinds: discovery and the REST
//! mapper, every verb of `Api<DynamicObject>`, a watch, and a dynamic informer feeding a work
//! queue drained by the `Runner` (the framework the replication controller is written with).

#![allow(clippy::result_large_err)] // client::Error carries a full Status by design

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use minik8s::client::{
    self, Action, DeleteParams, DynamicObject, Error, FnHandler, GroupVersionKind, ListParams,
    Patch, RateLimitingQueue, RestMapper, Runner, SharedInformerFactory, WatchEvent,
};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

async fn sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .without_controllers()
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"))
}

fn config_map(name: &str, app: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "data": {"k": "v"}
    }))
    .unwrap_or_else(|e| panic!("config map: {e}"))
}

/// Polls `f` until it is true, failing with `what` after 10 s.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_rest_mapper_resolves_kinds_and_resources_through_discovery() -> client::Result<()> {
    let sandbox = sandbox().await;
    let mapper = RestMapper::new(sandbox.client());
    let cm = mapper
        .resolve(&GroupVersionKind::new("", "v1", "ConfigMap"))
        .await?;
    assert_eq!((cm.plural.as_str(), cm.namespaced), ("configmaps", true));
    assert_eq!(cm.api_version, "v1");
    let ns = mapper.resolve_kind("", "Namespace").await?;
    assert_eq!((ns.plural.as_str(), ns.namespaced), ("namespaces", false));
    assert!(ns.has_subresource("status"), "{ns:?}");
    let deploy = mapper.resolve_resource("apps", None, "deployments").await?;
    assert_eq!(deploy.kind, "Deployment");
    assert!(deploy.has_subresource("status") && deploy.has_subresource("scale"));
    // A kind nobody serves: rediscovered once, then apimachinery's message.
    let err = mapper
        .resolve(&GroupVersionKind::new("example.com", "v1", "Widget"))
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some(r#"no matches for kind "Widget" in version "example.com/v1""#)
    );
    let err = mapper.resolve_kind("example.com", "Widget").await.err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some(r#"no matches for kind "Widget" in group "example.com""#)
    );
    let err = mapper
        .resolve_resource("", Some("v1"), "widgets")
        .await
        .err();
    assert!(
        matches!(err, Some(Error::NoResourceMatch { .. })),
        "{err:?}"
    );
    sandbox.stop().await;
    Ok(())
}

#[tokio::test]
async fn every_verb_of_the_dynamic_api_on_config_maps() -> client::Result<()> {
    let sandbox = sandbox().await;
    let mapper = RestMapper::new(sandbox.client());
    let obj = config_map("one", "web");
    let api = mapper.api_for(&obj).await?;
    assert_eq!(api.namespace(), Some("default"));

    let created = api.create(&obj).await?;
    assert_eq!(created.kind, "ConfigMap");
    assert_eq!(created.pointer("/data/k"), Some(&json!("v")));
    assert!(created.metadata.uid.is_some());
    api.create(&config_map("two", "db")).await?;
    assert!(api.create(&obj).await.is_err_and(|e| e.is_already_exists()));

    let got = api.get("one").await?;
    assert_eq!(
        got.metadata.resource_version,
        created.metadata.resource_version
    );
    assert!(api.get_opt("missing").await?.is_none());

    let web = api.list(&ListParams::default().labels("app=web")).await?;
    assert_eq!(web.items.len(), 1);
    assert_eq!(web.items[0].name(), "one");
    let all = api.list(&ListParams::default()).await?;
    assert_eq!(all.items.len(), 2);

    // Update (PUT) with the read resourceVersion; a stale one conflicts.
    let mut update = got.clone();
    update.data.insert("data".into(), json!({"k": "v2"}));
    let updated = api.replace("one", &update).await?;
    assert_eq!(updated.pointer("/data/k"), Some(&json!("v2")));
    assert!(api
        .replace("one", &update)
        .await
        .is_err_and(|e| e.is_conflict()));

    // Merge, JSON and apply patches.
    let merged = api
        .patch("one", &Patch::Merge(json!({"data": {"m": "1"}})))
        .await?;
    assert_eq!(merged.pointer("/data/m"), Some(&json!("1")));
    let jsonp = api
        .patch(
            "one",
            &Patch::Json(json!([{"op": "add", "path": "/data/j", "value": "2"}])),
        )
        .await?;
    assert_eq!(jsonp.pointer("/data/j"), Some(&json!("2")));
    let applied = api
        .patch(
            "three",
            &Patch::Apply {
                body: json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "three"}, "data": {"a": "b"}}),
                field_manager: "dynamic-test".into(),
                force: false,
            },
        )
        .await?;
    assert_eq!(applied.pointer("/data/a"), Some(&json!("b")));

    api.delete("two", &DeleteParams::default()).await?;
    assert!(api.get_opt("two").await?.is_none());
    assert!(api
        .delete("two", &DeleteParams::default())
        .await
        .is_err_and(|e| e.is_not_found()));

    // Status of a kind that has the subresource: a cluster-scoped Namespace.
    let ns_api = mapper
        .api(
            &GroupVersionKind::new("", "v1", "Namespace"),
            Some("ignored"),
        )
        .await?;
    assert_eq!(ns_api.namespace(), None);
    let ns = ns_api
        .create(
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "dyn"}}))
            .map_err(|e| Error::Decode {
                what: "ns".into(),
                source: e,
            })?,
        )
        .await?;
    let status = ns_api
        .patch_status(
            "dyn",
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Dyn", "status": "True"}]}})),
        )
        .await?;
    assert_eq!(
        status.pointer("/status/conditions/0/type"),
        Some(&json!("Dyn"))
    );
    let mut replaced = status.clone();
    replaced
        .data
        .insert("status".into(), json!({"phase": "Active"}));
    let replaced = ns_api.replace_status("dyn", &replaced).await?;
    assert_eq!(replaced.pointer("/status/phase"), Some(&json!("Active")));
    assert_ne!(
        replaced.metadata.resource_version,
        ns.metadata.resource_version
    );
    sandbox.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_dynamic_watch_delivers_typed_events() -> client::Result<()> {
    let sandbox = sandbox().await;
    let mapper = RestMapper::new(sandbox.client());
    let api = mapper
        .api(
            &GroupVersionKind::new("", "v1", "ConfigMap"),
            Some("default"),
        )
        .await?;
    let rv = api.list(&ListParams::default()).await?.resource_version;
    let mut watch = api.watch(&ListParams::default(), &rv).await?;
    api.create(&config_map("w", "web")).await?;
    api.delete("w", &DeleteParams::default()).await?;
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < 2 {
        let ev = tokio::time::timeout_at(deadline, watch.next())
            .await
            .unwrap_or_else(|_| panic!("timed out; seen {seen:?}"));
        match ev {
            Some(Ok(WatchEvent::Added(o))) => seen.push(format!("ADDED {} {}", o.kind, o.name())),
            Some(Ok(WatchEvent::Deleted(o))) => seen.push(format!("DELETED {}", o.name())),
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["ADDED ConfigMap w", "DELETED w"]);
    sandbox.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_dynamic_informer_feeds_listers_and_a_work_queue() -> client::Result<()> {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let mapper = RestMapper::new(client.clone());
    let resource = mapper.resolve_kind("", "ConfigMap").await?;
    let api = client.dynamic(&resource, Some("default"));
    api.create(&config_map("before", "web")).await?;

    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.dynamic_informer(&resource);
    // The factory shares one informer per resource.
    assert!(factory
        .dynamic_informer(&resource)
        .lister()
        .get("x")
        .is_none());
    let queue = RateLimitingQueue::<String>::with_default_controller_rate_limiter("configmaps");
    let q = (queue.clone(), queue.clone(), queue.clone());
    informer.add_event_handler(
        FnHandler::new()
            .on_add(move |o: &Arc<DynamicObject>, _| {
                q.0.add(client::meta_namespace_key(o.as_ref()))
            })
            .on_update(move |_, o: &Arc<DynamicObject>| {
                q.1.add(client::meta_namespace_key(o.as_ref()))
            })
            .on_delete(move |d| q.2.add(d.key())),
    );
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    assert!(factory.wait_for_cache_sync(&shutdown).await);
    let lister = informer.lister();
    assert_eq!(
        lister
            .get("default/before")
            .map(|o| o.kind.clone())
            .as_deref(),
        Some("ConfigMap")
    );

    // A reconciler that records what it saw in the cache, by key.
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let runner = {
        let (seen, lister, shutdown) = (seen.clone(), lister.clone(), shutdown.clone());
        let queue = queue.clone();
        let informer = informer.clone();
        tokio::spawn(async move {
            Runner::new("configmaps")
                .workers(2)
                .run_workers(queue, &[&informer], &shutdown, move |key: String| {
                    let state = match lister.get(&key) {
                        Some(o) => format!(
                            "{key}={}",
                            o.pointer("/data/k").and_then(|v| v.as_str()).unwrap_or("")
                        ),
                        None => format!("{key} gone"),
                    };
                    seen.lock().unwrap_or_else(|p| p.into_inner()).insert(state);
                    async move { Ok::<_, Error>(Action::AwaitChange) }
                })
                .await
        })
    };
    api.create(&config_map("after", "db")).await?;
    api.patch("before", &Patch::Merge(json!({"data": {"k": "changed"}})))
        .await?;
    api.delete("after", &DeleteParams::default()).await?;
    eventually("the reconciler to see every change", || {
        let s = seen.lock().unwrap_or_else(|p| p.into_inner());
        s.contains("default/before=changed") && s.contains("default/after gone")
    })
    .await;
    let web = lister.namespace("default").list(
        &api::labels::Selector::parse("app=web")
            .unwrap_or_else(|_| api::labels::Selector::nothing()),
    );
    assert_eq!(web.len(), 1);
    assert!(lister.get("default/after").is_none());
    shutdown.cancel();
    let _ = runner.await;
    factory.shutdown().await;
    sandbox.stop().await;
    Ok(())
}
