//! The scheduler and the node lifecycle controller against a real apiserver: binding through
//! `pods/binding`, resources and cordon, `FailedScheduling` and retry when a node appears; a node
//! whose Lease goes stale is marked Unknown and tainted, its pods are evicted (by the taint eviction
//! controller), and it recovers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::*;
use client::{ListParams, Patch};
use controller::EnabledControllers;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, Node, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

const T: Duration = Duration::from_secs(15);

fn pod(name: &str, cpu: &str, node: Option<&str>) -> Pod {
    let mut spec = template("sched").spec.unwrap_or_default();
    spec.containers[0].resources = Some(ResourceRequirements {
        requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
        ..Default::default()
    });
    spec.node_name = node.map(Into::into);
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some(labels(&[("app", "sched")])),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

async fn node_of(env: &Env, name: &str) -> Option<String> {
    env.pods("default")
        .get(name)
        .await
        .ok()
        .and_then(|p| p.spec.and_then(|s| s.node_name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_by_resources_reports_failed_scheduling_and_retries() {
    let mut en = EnabledControllers::none();
    en.scheduler = true;
    // A new node is `not-ready:NoSchedule` tainted (TaintNodesByCondition) until node
    // lifecycle sees it Ready, as upstream.
    en.nodelifecycle = true;
    let env = start(en).await;
    create_node(&env.client, ready_node("n1", "1", "110")).await;
    create_node(&env.client, ready_node("n2", "1", "110")).await;
    let pods = env.pods("default");
    pods.create(&pod("a", "600m", None)).await.expect("a");
    pods.create(&pod("b", "600m", None)).await.expect("b");
    assert!(
        eventually(T, || async { node_of(&env, "a").await.is_some() }).await,
        "a bound"
    );
    assert!(
        eventually(T, || async { node_of(&env, "b").await.is_some() }).await,
        "b bound"
    );
    assert_ne!(
        node_of(&env, "a").await,
        node_of(&env, "b").await,
        "600m + 600m > 1 CPU: spread"
    );

    // Nothing fits: FailedScheduling event and PodScheduled=False.
    pods.create(&pod("c", "600m", None)).await.expect("c");
    let events = env.client.api::<Event>(Some("default"));
    assert!(
        eventually(T, || async {
            events.list(&ListParams::default()).await.is_ok_and(|l| {
                l.items.iter().any(|e| {
                    e.reason.as_deref() == Some("FailedScheduling")
                        && e.involved_object.name.as_deref() == Some("c")
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.contains("Insufficient cpu"))
                })
            })
        })
        .await,
        "FailedScheduling event"
    );
    assert!(
        eventually(T, || async {
            pods.get("c")
                .await
                .ok()
                .and_then(|p| p.status)
                .and_then(|s| s.conditions)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "PodScheduled" && c.status == "False")
                })
        })
        .await,
        "PodScheduled=False"
    );
    assert_eq!(node_of(&env, "c").await, None);

    // A node appears: the pending pod is bound to it.
    create_node(&env.client, ready_node("n3", "1", "110")).await;
    assert!(
        eventually(T, || async {
            node_of(&env, "c").await.as_deref() == Some("n3")
        })
        .await,
        "bound when a node frees up"
    );

    // Cordon n3 and fill the others' gap: a small pod avoids the cordoned node.
    let nodes = env.client.api::<Node>(None);
    nodes
        .patch(
            "n3",
            &Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordon");
    pods.create(&pod("d", "100m", None)).await.expect("d");
    assert!(
        eventually(T, || async { node_of(&env, "d").await.is_some() }).await,
        "d bound"
    );
    assert_ne!(
        node_of(&env, "d").await.as_deref(),
        Some("n3"),
        "cordoned node skipped"
    );
    env.stop().await;
}

async fn renew(env: &Env, node: &str) {
    let leases = env.client.api::<Lease>(Some("kube-node-lease"));
    let now = MicroTime(Timestamp::now());
    match leases.get(node).await {
        Ok(mut l) => {
            l.spec.get_or_insert_with(Default::default).renew_time = Some(now);
            leases.replace(node, &l).await.expect("renew lease");
        }
        Err(_) => {
            let l = Lease {
                metadata: ObjectMeta {
                    name: Some(node.into()),
                    namespace: Some("kube-node-lease".into()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(node.into()),
                    lease_duration_seconds: Some(40),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            };
            leases.create(&l).await.expect("create lease");
        }
    }
}

fn ready_status(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn unreachable_taints(n: &Node) -> usize {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|ts| {
            ts.iter()
                .filter(|t| t.key == "node.kubernetes.io/unreachable")
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_lease_marks_node_unknown_taints_evicts_and_recovers() {
    let mut en = EnabledControllers::none();
    en.nodelifecycle = true;
    // Node lifecycle taints; taint eviction evicts (as in 1.33).
    en.taint_eviction = true;
    // Grace 2 s, default toleration 1 s, checks every 200 ms (see common::start).
    let env = start(en).await;
    create_node(&env.client, ready_node("dead", "4", "110")).await;
    renew(&env, "dead").await;
    let pods = env.pods("default");
    pods.create(&pod("victim", "100m", Some("dead")))
        .await
        .expect("victim");
    let nodes = env.client.api::<Node>(None);

    // Heartbeats keep it healthy for longer than the grace period.
    let healthy_until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < healthy_until {
        renew(&env, "dead").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let n = nodes.get("dead").await.expect("node");
    assert_eq!(
        ready_status(&n).as_deref(),
        Some("True"),
        "renewing node stays Ready"
    );
    assert_eq!(unreachable_taints(&n), 0);

    // Silence: Unknown + both taints, then the pod is evicted.
    assert!(
        eventually(T, || async {
            nodes.get("dead").await.is_ok_and(|n| {
                ready_status(&n).as_deref() == Some("Unknown") && unreachable_taints(&n) == 2
            })
        })
        .await,
        "stale node marked Unknown and tainted"
    );
    assert!(
        eventually(T, || async {
            match pods.get("victim").await {
                Ok(p) => p.metadata.deletion_timestamp.is_some(),
                Err(e) => e.is_not_found(),
            }
        })
        .await,
        "pod evicted after its toleration"
    );

    // The node comes back.
    renew(&env, "dead").await;
    assert!(
        eventually(T, || async {
            nodes.get("dead").await.is_ok_and(|n| {
                ready_status(&n).as_deref() == Some("True") && unreachable_taints(&n) == 0
            })
        })
        .await,
        "recovered node untainted and Ready"
    );
    env.stop().await;
}
