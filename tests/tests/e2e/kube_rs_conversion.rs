//! A kube-rs user of a CRD with `conversion: Webhook` against a Sandbox
//! (`Sandbox::kube_client()`): objects written at the storage version `v1` (`spec.size`) are
//! read, listed and watched through a `#[derive(CustomResource)]` type of `v2`
//! (`spec.replicas`), converted by a local HTTPS webhook (the apiserver tests' one, with a
//! generated CA in `caBundle`), and a write at `v2` is stored as `v1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::conversion_server as server;

use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{watcher, WatchStreamExt};
use kube::CustomResource;
use minik8s::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use server::{Mode, Server};

/// The `v2` view of a widget.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "example.com", version = "v2", kind = "Widget", namespaced)]
pub struct WidgetSpec {
    pub replicas: i64,
}

fn version(name: &str, field: &str, storage: bool) -> serde_json::Value {
    json!({"name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_reads_and_writes_a_non_storage_version() {
    let hook = Server::start().await;
    hook.set(Mode::Versions);
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(0)
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    let client = sandbox.kube_client().unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem);
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://{}/convert", hook.addr), "caBundle": ca}}},
            "versions": [version("v1", "size", true), version("v2", "replicas", false)]},
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = await_condition(
        crds,
        "widgets.example.com",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .expect("established in time")
        .unwrap();

    // Written at v1 with a dynamic client.
    let v1 = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &v1);
    let mut a = DynamicObject::new("a", &v1);
    a.data = json!({"spec": {"size": 3}});
    dynamic.create(&PostParams::default(), &a).await.unwrap();

    // Read, listed and watched at v2 through the typed kube-rs API.
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    assert_eq!(widgets.get("a").await.unwrap().spec.replicas, 3);
    let listed = widgets.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let watched = watcher(widgets.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(10), watched.into_future())
        .await
        .expect("a watch event in time");
    let w = match first.0 {
        Some(Ok(w)) => w,
        other => panic!("watch ended: {:?}", other.map(|r| r.err())),
    };
    assert_eq!(w.spec.replicas, 3);

    // Written at v2, stored (and read back) at v1.
    let b = Widget::new("b", WidgetSpec { replicas: 5 });
    let created = widgets.create(&PostParams::default(), &b).await.unwrap();
    assert_eq!(created.spec.replicas, 5);
    let stored = dynamic.get("b").await.unwrap();
    assert_eq!(stored.data["spec"], json!({"size": 5}));
    let all: Vec<Widget> = widgets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .collect();
    let replicas: Vec<i64> = all.iter().map(|w| w.spec.replicas).collect();
    assert_eq!(replicas, [3, 5]);
    assert!(hook.reviews() >= 4);
}
