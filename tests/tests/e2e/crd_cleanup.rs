//! Custom resources take part in garbage collection and namespace deletion, as built-in kinds do:
//! a pod owned by a custom resource goes when its owner goes, a custom resource owned by a pod
//! goes when the pod goes, and deleting a namespace deletes the
//! custom resources in it before the namespace itself goes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use minik8s::client::{Api, ApiResource, DeleteParams};
use minik8s::k8s_openapi::api::core::v1::{Namespace, Pod};
use minik8s::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.cleanup.example.com"},
        "spec": {
            "group": "cleanup.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}]
        }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_are_collected_and_their_namespaces_emptied() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .crd(widget_crd())
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let widgets = ApiResource::new("cleanup.example.com", "v1", "Widget", "widgets", true);
    for ns in ["gc-a", "gc-b"] {
        let n: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        client.all::<Namespace>().create(&n).await.unwrap();
    }

    // A pod owned by a widget goes when the widget is deleted.
    let api = client.dynamic(&widgets, Some("gc-a"));
    let owner = api
        .create(&minik8s::client::DynamicObject::new("owner", &widgets).within("gc-a"))
        .await
        .unwrap();
    let uid = owner.metadata.uid.clone().unwrap();
    let pods: Api<Pod> = client.api(Some("gc-a"));
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "owned", "ownerReferences": [{
            "apiVersion": "cleanup.example.com/v1", "kind": "Widget", "name": "owner", "uid": uid
        }]},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .unwrap();
    pods.create(&pod).await.unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually("the owned pod collected", || async {
        match pods.get_opt("owned").await.unwrap() {
            None => true,
            Some(p) => p.metadata.deletion_timestamp.is_some(),
        }
    })
    .await;

    // A widget owned by a pod goes when the pod goes (custom resources as dependents).
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "holder"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .unwrap();
    let holder = pods.create(&pod).await.unwrap();
    let mut dependent = minik8s::client::DynamicObject::new("dependent", &widgets).within("gc-a");
    dependent.metadata.owner_references = Some(vec![
        minik8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "holder".into(),
            uid: holder.metadata.uid.clone().unwrap(),
            ..Default::default()
        },
    ]);
    let api = client.dynamic(&widgets, Some("gc-a"));
    api.create(&dependent).await.unwrap();
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("holder", &force).await.unwrap();
    eventually("the pod's widget collected", || async {
        api.get_opt("dependent").await.unwrap().is_none()
    })
    .await;

    // Deleting a namespace deletes its widgets, then the namespace.
    let api = client.dynamic(&widgets, Some("gc-b"));
    api.create(&minik8s::client::DynamicObject::new("inside", &widgets).within("gc-b"))
        .await
        .unwrap();
    client
        .all::<Namespace>()
        .delete("gc-b", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the namespace and its widget gone", || async {
        let ns_gone = client
            .all::<Namespace>()
            .get_opt("gc-b")
            .await
            .unwrap()
            .is_none();
        let widget_gone = api.get_opt("inside").await.unwrap().is_none();
        ns_gone && widget_gone
    })
    .await;
    sandbox.stop().await;
}
