//! Measures LIST latency of 10,000 pods served from the watch cache (DESIGN.md target: ≤ 50 ms),
//! as JSON and as a Table. Run: `cargo run -p apiserver --release --example bench_list`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use store::Store;

/// As the `minik8s` binary: what a list allocates and frees is part of its cost.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let store = Arc::new(store::MemoryStore::new(store::StoreConfig::default()).unwrap());
    for i in 0..10_000 {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pod-{i:05}"), "namespace": "default", "uid": format!("uid-{i}"),
                         "labels": {"app": "bench", "i": i.to_string()}, "creationTimestamp": "2026-12-02T10:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx:1.27"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "nginx", "imageID": "", "state": {"running": {}}}]},
        });
        let key = format!("/registry/pods/default/pod-{i:05}");
        store
            .create(&key, serde_json::to_vec(&pod).unwrap().into())
            .await
            .unwrap();
    }
    let config = apiserver::Config {
        address: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    let server = apiserver::start(config, store).await.unwrap();
    let url = server.url();
    let c = reqwest::Client::new();
    for (label, accept) in [
        ("json", "application/json"),
        (
            "table",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        ),
    ] {
        let mut samples = Vec::new();
        for _ in 0..10 {
            let t0 = Instant::now();
            let body = c
                .get(format!("{url}/api/v1/namespaces/default/pods"))
                .header("accept", accept)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            samples.push(t0.elapsed());
            assert!(body.len() > 1_000_000);
        }
        samples.sort();
        println!(
            "LIST 10,000 pods ({label}): median {:?}, max {:?}",
            samples[samples.len() / 2],
            samples[samples.len() - 1]
        );
    }
    server.stop().await.unwrap();
}
