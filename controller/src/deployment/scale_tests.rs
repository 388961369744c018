//! The deployment controller alone against an in-process apiserver on 127.0.0.1:0: no replica-set
//! controller and no kubelets, so ReplicaSets never report pods, a rolling update stops at a known
//! split, and a resize then shows how `scale` spreads the change over the active ReplicaSets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use client::record::EventBroadcaster;
use client::{Api, Client, Config, ListParams, Patch, SharedInformerFactory};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio_util::sync::CancellationToken;

use super::util::{desired_replicas_annotation, max_replicas_annotation, rs_replicas};
use super::DeploymentController;

const T: Duration = Duration::from_secs(20);

fn deployment(replicas: i32) -> Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_string(), "web".to_string())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                match_expressions: None,
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(3)),
                    max_unavailable: Some(IntOrString::Int(2)),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some("nginx:1".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

fn image_of(rs: &ReplicaSet) -> Option<&str> {
    rs.spec
        .as_ref()?
        .template
        .as_ref()?
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()
}

/// (replicas, desired-replicas, max-replicas) of the RS running `image`.
async fn rs_of(api: &Api<ReplicaSet>, image: &str) -> Option<(i32, Option<i32>, Option<i32>)> {
    let list = api.list(&ListParams::default()).await.ok()?;
    let rs = list.items.iter().find(|r| image_of(r) == Some(image))?;
    Some((
        rs_replicas(rs),
        desired_replicas_annotation(rs),
        max_replicas_annotation(rs),
    ))
}

/// Waits (at most `T`) until the RSs of nginx:1 and nginx:2 have these sizes and were last scaled
/// for `desired` (max-replicas `desired + 3`).
async fn expect_split(api: &Api<ReplicaSet>, old: i32, new: i32, desired: i32) {
    let want = |n| Some((n, Some(desired), Some(desired + 3)));
    let deadline = Instant::now() + T;
    loop {
        let seen = (rs_of(api, "nginx:1").await, rs_of(api, "nginx:2").await);
        if seen == (want(old), want(new)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "expected old {old} / new {new} for {desired}, saw {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizing_mid_rollout_spreads_the_change_in_proportion() {
    let config = apiserver::Config {
        address: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    let store = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
    let server = apiserver::start(config, Arc::new(store)).await.unwrap();
    let client = Client::new(Config::new(server.url())).unwrap();
    let shutdown = CancellationToken::new();
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let broadcaster = EventBroadcaster::new(client.clone(), "controller-manager");
    let dc = DeploymentController::new(
        client.clone(),
        factory.informer::<Deployment>(),
        factory.informer::<ReplicaSet>(),
        crate::cached_pod::informer(&factory),
        broadcaster.recorder("deployment-controller"),
        crate::clock::system(),
    );
    let run = tokio::spawn(dc.run(1, shutdown.clone()));
    tokio::spawn(broadcaster.run(shutdown.clone()));
    factory.start(shutdown.clone());

    let deployments = client.api::<Deployment>(Some("default"));
    let rss = client.api::<ReplicaSet>(Some("default"));
    deployments.create(&deployment(10)).await.unwrap();
    let deadline = Instant::now() + T;
    while rs_of(&rss, "nginx:1").await.map(|r| r.0) != Some(10) {
        assert!(Instant::now() < deadline, "first RS at 10");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // No pod ever becomes available: the update surges the new RS to 3, removes 2 unavailable old
    // replicas (maxUnavailable), lets the new RS grow to 5 and stops at 8 + 5 = 10 + maxSurge.
    let image = |img: &str| {
        Patch::Merge(
            serde_json::json!({"spec": {"template": {"spec": {"containers": [
                {"name": "c", "image": img}
            ]}}}}),
        )
    };
    deployments.patch("web", &image("nginx:2")).await.unwrap();
    expect_split(&rss, 8, 5, 10).await;

    // 10 -> 20 (allowed 23, 10 to add): shares of the 13 they were scaled for, 8 -> 14 and
    // 5 -> 9 (rounded from 14.15 and 8.85), nothing left over.
    let scale = |n: i32| Patch::Merge(serde_json::json!({"spec": {"replicas": n}}));
    deployments.patch("web", &scale(20)).await.unwrap();
    expect_split(&rss, 14, 9, 20).await;

    // 20 -> 12 (allowed 15, 8 to remove): 14 -> 9 (9.13), 9 -> 6 (5.87), leftover 0.
    deployments.patch("web", &scale(12)).await.unwrap();
    expect_split(&rss, 9, 6, 12).await;

    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    let _ = server.stop().await;
}
