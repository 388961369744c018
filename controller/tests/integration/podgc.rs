//! The pod garbage collector against a real apiserver: a pod whose node is deleted is marked
//! Failed with `DisruptionTarget` and force-deleted; a terminating pod never bound is marked Failed
//! and force-deleted. Short period and quarantine (100 ms, 300 ms; see `common::start`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::*;
use client::{DeleteParams, ListParams, Patch, WatchEvent};
use controller::EnabledControllers;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};

const T: Duration = Duration::from_secs(15);

fn only_podgc() -> EnabledControllers {
    let mut e = EnabledControllers::none();
    e.podgc = true;
    e
}

/// Create a pod and give it a `Running` status (as its kubelet would).
async fn running(env: &Env, p: Pod) -> Pod {
    let api = env.pods("default");
    let name = p.metadata.name.clone().unwrap_or_default();
    let mut created = api.create(&p).await.expect("create pod");
    created.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..Default::default()
    });
    api.replace_status(&name, &created)
        .await
        .expect("pod status")
}

fn disruption_reason(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        .and_then(|c| c.reason.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_of_a_deleted_node_is_marked_failed_and_force_deleted() {
    let env = start(only_podgc()).await;
    create_node(&env.client, ready_node("doomed", "4", "110")).await;
    create_node(&env.client, ready_node("kept", "4", "110")).await;
    let orphan = running(&env, pod_on("orphan", Some("doomed"), None)).await;
    running(&env, pod_on("stays", Some("kept"), None)).await;
    let pods = env.pods("default");

    // Watch from the orphan's last write: every change to it until it is gone.
    let rv = orphan.metadata.resource_version.clone().unwrap_or_default();
    let mut events = pods
        .watch(&ListParams::default(), &rv)
        .await
        .expect("watch");
    env.client
        .api::<Node>(None)
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete node");

    let mut seen = Vec::new();
    let ended = tokio::time::timeout(T, async {
        while let Some(ev) = events.next().await {
            match ev.expect("watch event") {
                WatchEvent::Modified(p) if p.metadata.name.as_deref() == Some("orphan") => {
                    seen.push(("MODIFIED", p))
                }
                WatchEvent::Deleted(p) if p.metadata.name.as_deref() == Some("orphan") => {
                    seen.push(("DELETED", p));
                    return true;
                }
                _ => {}
            }
        }
        false
    })
    .await;
    assert_eq!(ended, Ok(true), "orphan deleted; saw {:?}", seen.len());
    // 1.33's markFailedAndDeletePodWithCondition: Failed + DisruptionTarget, then the delete.
    let (kind, marked) = &seen[0];
    assert_eq!(*kind, "MODIFIED");
    assert_eq!(
        marked.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed")
    );
    assert_eq!(
        disruption_reason(marked).as_deref(),
        Some("DeletionByPodGC")
    );
    assert_eq!(seen.last().map(|(k, _)| *k), Some("DELETED"));
    assert!(pods.get_opt("orphan").await.expect("get").is_none());
    // The pod of the node that still exists is untouched.
    let stays = pods.get("stays").await.expect("stays");
    assert_eq!(
        stays.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert!(stays.metadata.deletion_timestamp.is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_pod_never_bound_is_marked_failed_and_force_deleted() {
    let env = start(only_podgc()).await;
    let pods = env.pods("default");
    // A finalizer keeps the pod visible after the GC's delete, so the result can be read.
    pods.create(&pod_on("unbound", None, Some("example.com/hold")))
        .await
        .expect("create");
    pods.delete("unbound", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        eventually(T, || async {
            pods.get("unbound")
                .await
                .ok()
                .and_then(|p| p.status)
                .and_then(|s| s.phase)
                .as_deref()
                == Some("Failed")
        })
        .await,
        "marked Failed"
    );
    let marked = pods.get("unbound").await.expect("get");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        disruption_reason(&marked),
        None,
        "no condition for this pass"
    );
    pods.patch(
        "unbound",
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("drop finalizer");
    assert!(
        eventually(T, || async {
            pods.get_opt("unbound").await.is_ok_and(|p| p.is_none())
        })
        .await
    );
    env.stop().await;
}
