//! `minik8s bench statefulset`: a StatefulSet of N replicas with `OrderedReady` pod management
//! on a whole control plane (apiserver, controller manager, fake kubelets, all in this process
//! and talking over HTTP), timed from its creation until every pod is Running and Ready.
//!
//! OrderedReady makes this a latency chain, not a throughput figure: pod `i+1` is created only
//! after the controller has seen pod `i` Ready, so the total is N × (create → schedule → kubelet
//! start → Ready → informer → sync). Progress is followed on one watch of the set's pods; the run
//! prints the total, the gaps between consecutive Ready pods (p50, p90, max) and the API
//! requests it took. Bounded by `deadline`.
//!
//! The fake kubelets' pod start delay is `start_delay` (the default lifecycle's is 100 ms plus up
//! to 200 ms of jitter, which alone would cost 100 pods about 20 s in a chain); 0 measures the
//! control plane's share.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;

use super::scale::{is_ready, print_requests, request_counts, PodProgress};
use super::{ms, percentile, Error};

fn set(name: &str, replicas: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "serviceName": name,
            "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}
    })
}

/// Runs the benchmark on a fresh in-memory control plane with `nodes` fake nodes.
pub async fn statefulset(
    replicas: usize,
    nodes: usize,
    start_delay: Duration,
    deadline: Duration,
) -> Result<(), Error> {
    let mut config = super::plane::config(nodes, None);
    config.kubelet.lifecycle.pod_start_delay = kubelet_fake::config::Delay::fixed(start_delay);
    let (plane, took) = super::plane::start_ready(config, deadline).await?;
    let client = plane.client();
    println!(
        "statefulset: control plane with {nodes} Ready nodes (in memory, pod start delay {}) in {}",
        ms(start_delay),
        ms(took)
    );

    let name = "web";
    let pods = client
        .api::<PodProgress>(Some("default"))
        .without_managed_fields();
    let lp = client::ListParams::default().labels(format!("app={name}"));
    let mut stream = super::plane::watch_from_now(&pods, &lp).await?;

    let http = reqwest::Client::new();
    let metrics_base = plane.url().to_string();
    let counts0 = request_counts(&http, &metrics_base).await?;
    let t0 = Instant::now();
    let r = http
        .post(format!(
            "{}/apis/apps/v1/namespaces/default/statefulsets",
            plane.url()
        ))
        .json(&set(name, replicas))
        .send()
        .await?;
    if !r.status().is_success() {
        return Err(Error::Failed(format!("create statefulset: {}", r.status())));
    }
    let mut ready_at: Vec<Duration> = Vec::with_capacity(replicas);
    let mut seen = std::collections::HashSet::with_capacity(replicas);
    let end = t0 + deadline;
    while ready_at.len() < replicas && Instant::now() < end {
        let pod = match super::plane::next_event(&mut stream, end).await? {
            Some(client::WatchEvent::Added(p) | client::WatchEvent::Modified(p)) => p,
            Some(_) => continue,
            None => break,
        };
        if is_ready(&pod) && seen.insert(pod.metadata.name.clone().unwrap_or_default()) {
            ready_at.push(t0.elapsed());
        }
    }
    let total = t0.elapsed();
    if ready_at.len() < replicas {
        println!(
            "statefulset: {replicas} OrderedReady: only {} Running and Ready after {}",
            ready_at.len(),
            ms(total)
        );
    } else {
        let mut gaps: Vec<Duration> = ready_at
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect();
        gaps.sort();
        println!(
            "statefulset: {replicas} OrderedReady: all Running and Ready in {} (first Ready at {}; gap between pods p50 {} p90 {} max {})",
            ms(total),
            ms(ready_at.first().copied().unwrap_or_default()),
            ms(percentile(&gaps, 0.5)),
            ms(percentile(&gaps, 0.9)),
            ms(gaps.last().copied().unwrap_or_default()),
        );
    }
    let counts1 = request_counts(&http, &metrics_base).await?;
    print_requests("statefulset: 0 → N", &counts0, &counts1);
    let sets = client.api::<StatefulSet>(Some("default"));
    let _ = sets.delete(name, &client::DeleteParams::default()).await;
    plane.shutdown().await;
    Ok(())
}
