//! Compatibility with kube-rs: typed list/get/create/patch/delete, and its `watcher` running
//! through a 410 relist.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

fn client(url: &str) -> kube::Client {
    let config = kube::Config::new(url.parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "labels": { "app": "kube-rs" } },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] },
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_crud() {
    let server = common::start().await;
    let client = client(&server.url());
    let v = client.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "33"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("p1"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let err = pods
        .create(&PostParams::default(), &pod("p1"))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("unexpected {other:?}"),
    }
    let got = pods.get("p1").await.unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("p1"));
    let list = pods
        .list(&ListParams::default().labels("app=kube-rs"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.resource_version.is_some());

    let merged = pods
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata":{"labels":{"m":"1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata.labels.unwrap()["m"], "1");
    let strategic = pods
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata":{"labels":{"s":"1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(strategic.metadata.labels.unwrap()["s"], "1");
    let applied = pods
        .patch(
            "p1",
            &PatchParams::apply("kube-rs-test"),
            &Patch::Apply(
                json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"a":"1"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.labels.unwrap()["a"], "1");
    assert!(applied
        .metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .any(|m| m.manager.as_deref() == Some("kube-rs-test")));

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata":{"name":"c1"},"data":{"k":"v"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let deleted = cms.delete("c1", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right(), "configmap delete answers a Status");
    let err = cms.get("c1").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );

    let deleted = pods.delete("p1", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_left(), "pod delete answers the pod");
    assert!(pods.get_opt("p1").await.unwrap().is_none());
    server.stop().await.unwrap();
}

/// The watcher lists, watches, falls behind while not polled (the server closes its watch), and
/// resumes from a resourceVersion older than the history: the server answers 410 and the
/// watcher relists (a second `Init` … `InitDone`) and sees every object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_relists_after_410() {
    let server = common::start_with(apiserver::Config {
        watch_buffer: 4,
        watch_history: 8,
        ..Default::default()
    })
    .await;
    let client = client(&server.url());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let stream = watcher(cms.clone(), watcher::Config::default());
    let mut stream = std::pin::pin!(stream);
    let mut inits = 0;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        if matches!(ev, watcher::Event::Init) {
            inits += 1;
        }
        if matches!(ev, watcher::Event::InitDone) {
            break;
        }
    }
    assert_eq!(inits, 1);
    // While the watcher is not polled, write far more than socket buffers, the watcher queue
    // and the history hold.
    let pad = "x".repeat(64 * 1024);
    let writer = cms.clone();
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata":{"name":"big"},"data":{"pad": pad}})).unwrap();
    writer.create(&PostParams::default(), &cm).await.unwrap();
    for i in 0..400 {
        writer
            .patch(
                "big",
                &PatchParams::default(),
                &Patch::Merge(json!({"data":{"i": i.to_string()}})),
            )
            .await
            .unwrap();
    }
    let last: ConfigMap = serde_json::from_value(json!({"metadata":{"name":"last"}})).unwrap();
    writer.create(&PostParams::default(), &last).await.unwrap();
    let mut saw_last = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !(inits >= 2 && saw_last) {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("watcher relists within the deadline");
        match ev {
            Some(Ok(watcher::Event::Init)) => inits += 1,
            Some(Ok(watcher::Event::InitApply(o))) | Some(Ok(watcher::Event::Apply(o)))
                if o.metadata.name.as_deref() == Some("last") =>
            {
                saw_last = true
            }
            Some(_) => {}
            None => panic!("watcher stream ended"),
        }
    }
    server.stop().await.unwrap();
}
