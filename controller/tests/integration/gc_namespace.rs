//! Garbage collection (Background, Orphan, Foreground) and namespace deletion against a real
//! apiserver, with the replication controller creating the dependents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::*;
use client::{DeleteParams, Patch, PropagationPolicy};
use controller::EnabledControllers;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, ReplicationController, ReplicationControllerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const T: Duration = Duration::from_secs(15);

fn rc(ns: &str, name: &str, replicas: i32, pod_finalizer: Option<&str>) -> ReplicationController {
    let mut t = template(name);
    if let (Some(f), Some(m)) = (pod_finalizer, t.metadata.as_mut()) {
        m.finalizers = Some(vec![f.to_string()]);
    }
    ReplicationController {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        spec: Some(ReplicationControllerSpec {
            replicas: Some(replicas),
            selector: Some(labels(&[("app", name)])),
            template: Some(t),
            min_ready_seconds: None,
        }),
        status: None,
    }
}

fn gc_env() -> EnabledControllers {
    let mut e = EnabledControllers::none();
    e.replicationcontroller = true;
    e.garbagecollector = true;
    e.namespace = true;
    e
}

fn policy(p: PropagationPolicy) -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(p),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletes_dependents_after_owner() {
    let env = start(gc_env()).await;
    let rcs = env.client.api::<ReplicationController>(Some("default"));
    let pods = env.pods("default");
    rcs.create(&rc("default", "bg", 2, None)).await.expect("rc");
    assert!(eventually(T, || async { live_pods(&pods, "bg").await.len() == 2 }).await);
    rcs.delete("bg", &policy(PropagationPolicy::Background))
        .await
        .expect("delete");
    assert!(
        eventually(T, || async {
            rcs.get("bg").await.is_err_and(|e| e.is_not_found())
        })
        .await
    );
    assert!(
        eventually(T, || async { live_pods(&pods, "bg").await.is_empty() }).await,
        "dependents garbage-collected"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_keeps_dependents_without_owner_reference() {
    let env = start(gc_env()).await;
    let rcs = env.client.api::<ReplicationController>(Some("default"));
    let pods = env.pods("default");
    rcs.create(&rc("default", "orph", 2, None))
        .await
        .expect("rc");
    assert!(eventually(T, || async { live_pods(&pods, "orph").await.len() == 2 }).await);
    rcs.delete("orph", &policy(PropagationPolicy::Orphan))
        .await
        .expect("delete");
    assert!(
        eventually(T, || async {
            rcs.get("orph").await.is_err_and(|e| e.is_not_found())
        })
        .await,
        "owner removed once its orphan finalizer is processed"
    );
    let left = live_pods(&pods, "orph").await;
    assert_eq!(left.len(), 2, "pods left running");
    for p in left {
        assert!(
            p.metadata.owner_references.unwrap_or_default().is_empty(),
            "ownerReference removed before the owner went away"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_owner_waits_for_blocking_dependents() {
    let env = start(gc_env()).await;
    let rcs = env.client.api::<ReplicationController>(Some("default"));
    let pods = env.pods("default");
    // Pods carry a finalizer of our own so they stay (terminating) until we release them.
    rcs.create(&rc("default", "fg", 2, Some("example.com/hold")))
        .await
        .expect("rc");
    assert!(eventually(T, || async { live_pods(&pods, "fg").await.len() == 2 }).await);
    rcs.delete("fg", &policy(PropagationPolicy::Foreground))
        .await
        .expect("delete");
    // Dependents get deleted (deletionTimestamp), the owner stays while they exist.
    assert!(
        eventually(T, || async { live_pods(&pods, "fg").await.is_empty() }).await,
        "dependents deleted first"
    );
    let owner = rcs
        .get("fg")
        .await
        .expect("owner still present while dependents exist");
    assert!(owner.metadata.deletion_timestamp.is_some());
    assert!(owner
        .metadata
        .finalizers
        .unwrap_or_default()
        .iter()
        .any(|f| f == "foregroundDeletion"));
    // Release the dependents; then the owner goes.
    let all = pods.list(&Default::default()).await.expect("list").items;
    for p in all {
        let name = p.metadata.name.unwrap_or_default();
        let patch = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
        pods.patch(&name, &patch).await.expect("drop finalizer");
    }
    assert!(
        eventually(T, || async {
            rcs.get("fg").await.is_err_and(|e| e.is_not_found())
        })
        .await,
        "owner deleted last"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_deletion_empties_then_removes_namespace() {
    let env = start(gc_env()).await;
    let nss = env.client.api::<Namespace>(None);
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("team".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    nss.create(&ns).await.expect("namespace");
    let rcs = env.client.api::<ReplicationController>(Some("team"));
    rcs.create(&rc("team", "app", 2, None)).await.expect("rc");
    let cms = env.client.api::<ConfigMap>(Some("team"));
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("cfg".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    cms.create(&cm).await.expect("configmap");
    let pods = env.pods("team");
    assert!(eventually(T, || async { live_pods(&pods, "app").await.len() == 2 }).await);

    nss.delete("team", &DeleteParams::default())
        .await
        .expect("delete ns");
    assert!(
        eventually(T, || async {
            nss.get("team").await.is_err_and(|e| e.is_not_found())
        })
        .await,
        "namespace finalized and removed"
    );
    assert!(cms.get("cfg").await.is_err_and(|e| e.is_not_found()));
    assert!(live_pods(&pods, "app").await.is_empty());
    env.stop().await;
}
