//! Node lifecycle and taint eviction end to end, on a fake clock: a node whose Ready condition
//! is `False` gets the `node.kubernetes.io/not-ready:NoExecute` taint, and the taint eviction
//! controller evicts its pods that do not tolerate it while a pod tolerating it for 300 s
//! (DefaultTolerationSeconds' default) stays: the fake clock never reaches its deadline. Ready
//! again, the node loses the taint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use client::{Api, Patch};
use controller::clock::Clock;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;
use tests::eventually;

fn ready(status: &str) -> serde_json::Value {
    json!({"status": {"conditions": [{"type": "Ready", "status": status,
        "reason": if status == "True" { "KubeletReady" } else { "KubeletNotReady" },
        "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}})
}

fn no_execute(node: &Node) -> Vec<String> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone());
    taints
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.effect == "NoExecute")
        .map(|t| t.key)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_node_evicts_the_pods_that_do_not_tolerate_it() {
    let clock = controller::clock::FakeClock::new(minik8s::k8s_openapi::jiff::Timestamp::now());
    let cm_clock = clock.clone();
    // No kubelet: the node is written by the test. Without DefaultTolerationSeconds a pod gets
    // no toleration it did not ask for.
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(0)
        .disable_admission_plugins("DefaultTolerationSeconds")
        .configure(move |c| {
            c.controller_manager.clock = cm_clock;
            c.controller_manager.controllers = controller::EnabledControllers::parse(
                "nodelifecycle,taint-eviction-controller,serviceaccount",
            )
            .unwrap();
        })
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let nodes: Api<Node> = client.api(None);
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    nodes.create(&node).await.unwrap();
    nodes
        .patch_status("n1", &Patch::Merge(ready("False")))
        .await
        .unwrap();
    let tainted = eventually("the not-ready NoExecute taint", || async {
        let n = nodes.get("n1").await.ok()?;
        (no_execute(&n) == vec!["node.kubernetes.io/not-ready".to_string()]).then_some(n)
    })
    .await;
    let taint = tainted.spec.unwrap().taints.unwrap();
    let taint = taint.iter().find(|t| t.effect == "NoExecute").unwrap();
    // Added at the controller's (fake) now.
    let added = taint.time_added.as_ref().unwrap().0;
    assert_eq!(added.as_second(), clock.now().as_second(), "{taint:?}");

    let pods: Api<Pod> = client.api(Some("default"));
    let pod = |name: &str, tolerations: serde_json::Value| -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"nodeName": "n1",
            "tolerations": tolerations,
            "containers": [{"name": "c", "image": "nginx"}]}}),
        )
        .unwrap()
    };
    pods.create(&pod(
        "tolerates",
        json!([{"key": "node.kubernetes.io/not-ready",
        "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
    ))
    .await
    .unwrap();
    pods.create(&pod("intolerant", json!([]))).await.unwrap();
    let evicted = eventually("the intolerant pod evicted", || async {
        let p = pods.get("intolerant").await.ok()?;
        p.metadata.deletion_timestamp.is_some().then_some(p)
    })
    .await;
    let conditions = evicted
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(
        conditions.iter().any(|c| c.type_ == "DisruptionTarget"
            && c.reason.as_deref() == Some("DeletionByTaintManager")),
        "{conditions:?}"
    );
    // The tolerating pod's 300 s have not passed on the fake clock.
    let stays = pods.get("tolerates").await.unwrap();
    assert!(stays.metadata.deletion_timestamp.is_none());

    // Ready again: the taint goes.
    nodes
        .patch_status("n1", &Patch::Merge(ready("True")))
        .await
        .unwrap();
    eventually("the NoExecute taint removed", || async {
        let n = nodes.get("n1").await.ok()?;
        no_execute(&n).is_empty().then_some(())
    })
    .await;
    assert!(pods
        .get("tolerates")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_none());
}
