//! Measures the fake kubelets at scale.
//!
//! ```text
//! cargo run --release -p kubelet-fake --example kubelet_scale -- [NODES] [PODS] [WINDOW_SECS] [SERVER_URL]
//! ```
//!
//! Without `SERVER_URL` an in-memory apiserver is started in the same process (its memory and CPU
//! are then included in the figures; give the URL of a separately started `minik8s apiserver` to
//! measure the kubelets alone). Prints one line of results.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use kubelet_fake::bench::measure_pods;
use kubelet_fake::KubeletConfig;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nodes: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let pods: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0);
    let window = Duration::from_secs(args.get(2).and_then(|a| a.parse().ok()).unwrap_or(30));
    let (url, server) = match args.get(3) {
        Some(url) => (url.clone(), None),
        None => {
            let config = apiserver::Config {
                address: "127.0.0.1:0".parse().unwrap(),
                ..Default::default()
            };
            let store = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
            let server = apiserver::start(config, Arc::new(store)).await.unwrap();
            (server.url(), Some(server))
        }
    };
    let client = client::Client::new(client::Config::new(url)).unwrap();
    let cfg = KubeletConfig {
        nodes,
        ..KubeletConfig::default()
    };
    let report = measure_pods(
        client,
        cfg,
        pods,
        "default",
        Duration::from_secs(300),
        window,
    )
    .await
    .unwrap();
    println!("{report}");
    if let Some(s) = server {
        let _ = s.stop().await;
    }
}
