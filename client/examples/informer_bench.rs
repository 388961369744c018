//! Informer pipeline benchmark against the in-process source (no HTTP): time to sync N pods,
//! resident memory, and event delivery latency (write → handler) under a paced write load.
//!
//! `cargo run -p client --release --example informer_bench -- [pods=10000] [updates=10000] [rate=1000]`
//!
//! Bounded: exactly `updates` writes, paced at `rate`/s; the run ends when every write was seen
//! or after a 120 s deadline.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::testing::MemoryListerWatcher;
use client::{FnHandler, ListParams, SharedIndexInformer};
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn pod(i: usize) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(format!("web-{i:06}"));
    p.metadata.namespace = Some(format!("ns-{}", i % 10));
    p.metadata.uid = Some(format!("00000000-0000-0000-0000-{i:012}"));
    p.metadata.labels = Some(BTreeMap::from([
        ("app".to_string(), "web".to_string()),
        ("pod-template-hash".to_string(), "5d8f7c9b6".to_string()),
    ]));
    p.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web-5d8f7c9b6".into(),
        uid: "11111111-2222-3333-4444-555555555555".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    p.spec = Some(PodSpec {
        node_name: Some(format!("node-{}", i % 100)),
        containers: vec![Container {
            name: "web".into(),
            image: Some("nginx:1.27".into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    p.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    p
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)] as f64 / 1000.0
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let pods = args.first().copied().unwrap_or(10_000);
    let updates = args.get(1).copied().unwrap_or(10_000);
    let rate = args.get(2).copied().unwrap_or(1000).max(1);

    let rss0 = rss_mib();
    let src = MemoryListerWatcher::new();
    for i in 0..pods {
        src.apply(pod(i));
    }
    let rss_src = rss_mib();

    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let added = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(updates)));
    let epoch = Instant::now();
    let (a, l) = (added.clone(), latencies.clone());
    inf.add_event_handler(
        FnHandler::new()
            .on_add(move |_p: &Arc<Pod>, _| {
                a.fetch_add(1, Ordering::Relaxed);
            })
            .on_update(move |_, p: &Arc<Pod>| {
                let sent = p
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("sent-us"))
                    .and_then(|s| s.parse::<u64>().ok());
                if let Some(sent) = sent {
                    let now = epoch.elapsed().as_micros() as u64;
                    l.lock().push(now.saturating_sub(sent));
                }
            }),
    );
    let token = CancellationToken::new();
    let (i2, t2) = (inf.clone(), token.clone());
    let start = Instant::now();
    let task = tokio::spawn(async move { i2.run(t2).await });
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(inf.has_synced() && added.load(Ordering::Relaxed) == pods) && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let sync = start.elapsed();
    let rss_synced = rss_mib();

    // Paced updates: `rate` per second in 1 ms batches.
    let per_ms = (rate as f64 / 1000.0).max(0.001);
    let load_start = Instant::now();
    let mut sent = 0usize;
    let mut base = pod(0);
    while sent < updates && Instant::now() < deadline {
        let due = ((load_start.elapsed().as_secs_f64() * 1000.0) * per_ms) as usize;
        while sent < due.min(updates) {
            let i = sent % pods.max(1);
            base.metadata.name = Some(format!("web-{i:06}"));
            base.metadata.namespace = Some(format!("ns-{}", i % 10));
            base.metadata.annotations = Some(BTreeMap::from([(
                "sent-us".to_string(),
                (epoch.elapsed().as_micros() as u64).to_string(),
            )]));
            src.apply(base.clone());
            sent += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let load = load_start.elapsed();
    while latencies.lock().len() < sent && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut lat = latencies.lock().clone();
    lat.sort_unstable();
    token.cancel();
    let _ = task.await;

    println!("pods={pods} updates={sent} target_rate={rate}/s");
    println!("time_to_synced_ms={:.1}", sync.as_secs_f64() * 1000.0);
    println!(
        "rss_mib: start={rss0:.1} source_filled={rss_src:.1} informer_synced={rss_synced:.1} (informer ≈ {:.1})",
        rss_synced - rss_src
    );
    println!(
        "achieved_rate={:.0}/s delivered={} latency_ms p50={:.3} p99={:.3} max={:.3}",
        sent as f64 / load.as_secs_f64(),
        lat.len(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        percentile(&lat, 1.0)
    );
}
