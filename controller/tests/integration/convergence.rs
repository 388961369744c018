//! T5 (spec/reliability.md), in-process form: a ReplicaSet scaled 5 → 20 → 0 → 7 while pods are
//! deleted and the controller manager is restarted; exactly `replicas` live pods at the end, and
//! without faults never more than `replicas` at any time (expectations work). Also readiness and
//! minReadySeconds reflected in status, driven by a test double writing pod status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use client::{DeletedObject, ResourceEventHandler, SharedInformerFactory};
use controller::metrics::ManagerMetrics;
use controller::{ControllerManagerConfig, EnabledControllers};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(20);

fn rs(name: &str, replicas: i32, min_ready: Option<i32>) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", name)])),
                match_expressions: None,
            },
            template: Some(template(name)),
            min_ready_seconds: min_ready,
        }),
        status: None,
    }
}

/// Tracks live pods (seen through a watch, so transients are not missed) and the maximum count.
#[derive(Default)]
struct LiveCount {
    live: Mutex<HashSet<String>>,
    max: AtomicUsize,
}

impl LiveCount {
    fn set(&self, key: String, live: bool) {
        let mut s = self.live.lock();
        if live {
            s.insert(key);
        } else {
            s.remove(&key);
        }
        self.max.fetch_max(s.len(), Ordering::SeqCst);
    }
    fn reset_max(&self) {
        let n = self.live.lock().len();
        self.max.store(n, Ordering::SeqCst);
    }
}

struct Counter(Arc<LiveCount>);

fn key(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn is_live(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
}

impl ResourceEventHandler<Pod> for Counter {
    fn on_add(&self, p: &Arc<Pod>, _: bool) {
        self.0.set(key(p), is_live(p));
    }
    fn on_update(&self, _: &Arc<Pod>, p: &Arc<Pod>) {
        self.0.set(key(p), is_live(p));
    }
    fn on_delete(&self, p: DeletedObject<Pod>) {
        self.0.set(key(p.object()), false);
    }
}

type Manager = (
    CancellationToken,
    tokio::task::JoinHandle<controller::Result<()>>,
);

fn manager_with(client: &client::Client, metrics: Arc<ManagerMetrics>) -> Manager {
    let mut en = EnabledControllers::none();
    en.replicaset = true;
    let cfg = ControllerManagerConfig {
        controllers: en,
        metrics,
        ..Default::default()
    };
    let token = CancellationToken::new();
    let h = tokio::spawn(controller::run(client.clone(), cfg, token.clone()));
    (token, h)
}

fn manager(client: &client::Client) -> Manager {
    manager_with(client, ManagerMetrics::new())
}

/// No key was ever synced by two workers at once, and some syncs happened.
fn assert_serial_syncs(m: &ManagerMetrics) {
    let s = m.sync_metrics("replicaset").expect("replicaset registered");
    assert!(s.syncs.load(Ordering::SeqCst) > 0);
    assert_eq!(
        s.concurrent_syncs.load(Ordering::SeqCst),
        0,
        "concurrent reconcile of one key"
    );
}

async fn scale(api: &client::Api<ReplicaSet>, n: i32) {
    let patch = client::Patch::Merge(serde_json::json!({"spec": {"replicas": n}}));
    // A patch without resourceVersion should never conflict; this apiserver sometimes answers 409
    // when it races the controller's status write, so retry (bounded) as a client would.
    for attempt in 0..20 {
        match api.patch("t5", &patch).await {
            Ok(_) => return,
            Err(e) if e.is_conflict() && attempt < 19 => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("scale: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t5_scale_sequence_with_deletions_and_restarts() {
    let seed: u64 = std::env::var("TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Timestamp::now().as_nanosecond() as u64);
    println!("TEST_SEED={seed}");
    let mut rng_state = seed | 1;
    let mut next = move || {
        // xorshift64: deterministic from the seed.
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state
    };

    let (server, client) = server().await;
    let watch_stop = CancellationToken::new();
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let counter = Arc::new(LiveCount::default());
    let _reg = factory
        .informer::<Pod>()
        .add_event_handler(Counter(counter.clone()));
    factory.start(watch_stop.clone());

    let rss = client.api::<ReplicaSet>(Some("default"));
    let pods = client.api::<Pod>(Some("default"));
    let metrics = ManagerMetrics::new();
    let (mut token, mut handle) = manager_with(&client, metrics.clone());
    rss.create(&rs("t5", 5, None)).await.expect("rs");
    assert!(eventually(T, || async { live_pods(&pods, "t5").await.len() == 5 }).await);
    assert!(
        counter.max.load(Ordering::SeqCst) <= 5,
        "never above 5 while scaling to 5"
    );

    // 5 → 20, no faults: never above 20.
    counter.reset_max();
    scale(&rss, 20).await;
    assert!(eventually(T, || async { live_pods(&pods, "t5").await.len() == 20 }).await);
    assert!(
        eventually(T, || async { counter.live.lock().len() == 20 }).await,
        "watch caught up"
    );
    let max = counter.max.load(Ordering::SeqCst);
    assert!(
        max <= 20,
        "live pods exceeded replicas during scale-up: {max}"
    );

    // Faults: delete random pods and restart the controller manager, then 20 → 0.
    for _ in 0..3 {
        let live = live_pods(&pods, "t5").await;
        if let Some(p) = live.get((next() as usize) % live.len().max(1)) {
            let _ = pods.delete(&key(p), &Default::default()).await;
        }
    }
    token.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(15), handle)
        .await
        .expect("manager stops");
    assert_serial_syncs(&metrics);
    (token, handle) = manager(&client);
    scale(&rss, 0).await;
    assert!(
        eventually(T, || async { live_pods(&pods, "t5").await.is_empty() }).await,
        "scaled to 0"
    );

    // 0 → 7 with a restart in the middle and deletions: ends at exactly 7.
    counter.reset_max();
    scale(&rss, 7).await;
    let live_now = live_pods(&pods, "t5").await;
    for p in live_now.iter().take((next() as usize) % 3) {
        let _ = pods.delete(&key(p), &Default::default()).await;
    }
    token.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(15), handle)
        .await
        .expect("manager stops");
    (token, handle) = manager(&client);
    assert!(eventually(T, || async { live_pods(&pods, "t5").await.len() == 7 }).await);
    // Stable: still exactly 7 a moment later, all owned by the ReplicaSet.
    let uid = rss
        .get("t5")
        .await
        .expect("rs")
        .metadata
        .uid
        .unwrap_or_default();
    assert!(
        eventually(T, || async {
            rss.get("t5")
                .await
                .ok()
                .and_then(|r| r.status)
                .is_some_and(|s| s.replicas == 7)
        })
        .await
    );
    let live = live_pods(&pods, "t5").await;
    assert_eq!(live.len(), 7);
    assert!(live.iter().all(|p| p
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|r| r.iter().any(|r| r.uid == uid))));

    token.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(15), handle)
        .await
        .expect("manager stops");
    watch_stop.cancel();
    factory.shutdown().await;
    let _ = server.stop().await;
}

/// Mark a pod Running and Ready (what a kubelet would write).
async fn make_ready(pods: &client::Api<Pod>, p: &Pod) {
    let mut p = p.clone();
    p.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time(Timestamp::now())),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let name = key(&p);
    pods.replace_status(&name, &p).await.expect("pod status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_and_available_replicas_honour_min_ready_seconds() {
    let (server, client) = server().await;
    let (token, handle) = manager(&client);
    let rss = client.api::<ReplicaSet>(Some("default"));
    let pods = client.api::<Pod>(Some("default"));
    rss.create(&rs("mr", 2, Some(2))).await.expect("rs");
    assert!(eventually(T, || async { live_pods(&pods, "mr").await.len() == 2 }).await);
    for p in live_pods(&pods, "mr").await {
        make_ready(&pods, &p).await;
    }
    assert!(
        eventually(T, || async {
            rss.get("mr")
                .await
                .ok()
                .and_then(|r| r.status)
                .is_some_and(|s| {
                    s.ready_replicas == Some(2) && s.available_replicas.unwrap_or(0) == 0
                })
        })
        .await,
        "ready but not yet available"
    );
    assert!(
        eventually(T, || async {
            rss.get("mr")
                .await
                .ok()
                .and_then(|r| r.status)
                .is_some_and(|s| s.available_replicas == Some(2))
        })
        .await,
        "available after minReadySeconds (requeue, no further events)"
    );
    let st = rss.get("mr").await.expect("rs").status.unwrap_or_default();
    assert_eq!(st.fully_labeled_replicas, Some(2));
    token.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(15), handle)
        .await
        .expect("manager stops");
    let _ = server.stop().await;
}
