//! The replication controller against a real apiserver over HTTP: scale up/down for RS and RC,
//! status, adoption of a matching orphan, release of a pod whose labels no longer match.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::*;
use client::{ListParams, Patch};
use controller::EnabledControllers;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, ReplicationController, ReplicationControllerSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

const T: Duration = Duration::from_secs(15);

fn only_replication() -> EnabledControllers {
    let mut e = EnabledControllers::none();
    e.replicaset = true;
    e.replicationcontroller = true;
    e
}

fn rc(name: &str, replicas: i32) -> ReplicationController {
    ReplicationController {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(ReplicationControllerSpec {
            replicas: Some(replicas),
            selector: Some(labels(&[("app", name)])),
            template: Some(template(name)),
            min_ready_seconds: None,
        }),
        status: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rc_scales_up_and_down_with_owned_pods_and_status() {
    let env = start(only_replication()).await;
    let rcs = env.client.api::<ReplicationController>(Some("default"));
    let pods = env.pods("default");
    let created = rcs.create(&rc("web", 3)).await.expect("create rc");
    let uid = created.metadata.uid.clone().unwrap_or_default();

    assert!(
        eventually(T, || async { live_pods(&pods, "web").await.len() == 3 }).await,
        "3 pods"
    );
    for p in live_pods(&pods, "web").await {
        let name = p.metadata.name.clone().unwrap_or_default();
        assert!(name.starts_with("web-"), "generateName web-: {name}");
        let refs = p.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].kind, "ReplicationController");
        assert_eq!(refs[0].uid, uid);
        assert_eq!(refs[0].controller, Some(true));
    }
    assert!(
        eventually(T, || async {
            rcs.get("web")
                .await
                .ok()
                .and_then(|r| r.status)
                .is_some_and(|s| s.replicas == 3 && s.observed_generation.is_some())
        })
        .await,
        "status.replicas = 3"
    );

    let patch = Patch::Merge(serde_json::json!({"spec": {"replicas": 1}}));
    rcs.patch("web", &patch).await.expect("scale");
    assert!(
        eventually(T, || async { live_pods(&pods, "web").await.len() == 1 }).await,
        "scaled to 1"
    );
    assert!(
        eventually(T, || async {
            rcs.get("web")
                .await
                .ok()
                .and_then(|r| r.status)
                .is_some_and(|s| s.replicas == 1)
        })
        .await,
        "status.replicas = 1"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs_adopts_matching_orphan_and_releases_relabelled_pod() {
    let env = start(only_replication()).await;
    let pods = env.pods("default");
    // An orphan that matches, created before the ReplicaSet.
    let orphan = Pod {
        metadata: ObjectMeta {
            name: Some("orphan".into()),
            namespace: Some("default".into()),
            labels: Some(labels(&[("app", "fe")])),
            ..Default::default()
        },
        spec: template("fe").spec,
        status: None,
    };
    pods.create(&orphan).await.expect("orphan");
    let rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some("fe".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(2),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "fe")])),
                match_expressions: None,
            },
            template: Some(template("fe")),
            min_ready_seconds: None,
        }),
        status: None,
    };
    let rss = env.client.api::<ReplicaSet>(Some("default"));
    let created = rss.create(&rs).await.expect("create rs");
    let uid = created.metadata.uid.clone().unwrap_or_default();

    assert!(
        eventually(T, || async {
            pods.get("orphan").await.ok().is_some_and(|p| {
                p.metadata
                    .owner_references
                    .unwrap_or_default()
                    .iter()
                    .any(|r| r.uid == uid && r.controller == Some(true))
            })
        })
        .await,
        "orphan adopted"
    );
    assert!(
        eventually(T, || async { live_pods(&pods, "fe").await.len() == 2 }).await,
        "exactly one pod created besides the adopted orphan"
    );

    // Relabel the adopted pod: it is released and a replacement is created.
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"app": "other"}}}));
    pods.patch("orphan", &patch).await.expect("relabel");
    assert!(
        eventually(T, || async {
            pods.get("orphan")
                .await
                .ok()
                .is_some_and(|p| p.metadata.owner_references.unwrap_or_default().is_empty())
        })
        .await,
        "relabelled pod released"
    );
    assert!(
        eventually(T, || async { live_pods(&pods, "fe").await.len() == 2 }).await,
        "replacement created"
    );
    let all = pods.list(&ListParams::default()).await.expect("list").items;
    assert!(
        all.iter()
            .any(|p| p.metadata.name.as_deref() == Some("orphan")),
        "released pod kept"
    );
    env.stop().await;
}
