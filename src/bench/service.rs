//! `minik8s bench service`: a Service over `replicas` pods (10,000 on 100 fake nodes by default)
//! on a whole control plane, timed from the moment every pod is Running and Ready until the
//! Service's EndpointSlices list every one of them as ready, with the slice count, the size of
//! the (truncated) Endpoints object and the endpoint requests it took.
//!
//! The Service exists before the pods: the RC is scaled from 0 (the request `kubectl scale` sends)
//! and the endpoint controllers follow the pods as they come. Progress is followed on two watches
//! opened before the scale, of the RC's pods (names, phases and conditions only) and of the
//! Service's slices; nothing polls. Bounded by `deadline`.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::scale::{cpu_since, is_ready, rc, request_counts, PodProgress};
use super::{ms, Error};

fn ready_endpoints(s: &EndpointSlice) -> usize {
    s.endpoints
        .iter()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .count()
}

/// Runs the benchmark on a fresh in-memory control plane.
pub async fn service(replicas: usize, nodes: usize, deadline: Duration) -> Result<(), Error> {
    let (plane, took) =
        super::plane::start_ready(super::plane::config(nodes, None), deadline).await?;
    let client = plane.client();
    println!(
        "service: control plane with {nodes} Ready nodes in {}",
        ms(took)
    );

    let http = reqwest::Client::new();
    let base = format!("{}/api/v1/namespaces/default", plane.url());
    let name = "web";
    let svc = serde_json::json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}
    });
    for (what, body) in [("services", svc), ("replicationcontrollers", rc(name))] {
        let r = http
            .post(format!("{base}/{what}"))
            .json(&body)
            .send()
            .await?;
        if !r.status().is_success() {
            return Err(Error::Failed(format!("create {what}: {}", r.status())));
        }
    }
    let pods = client
        .api::<PodProgress>(Some("default"))
        .without_managed_fields();
    let lp = client::ListParams::default().labels(format!("app={name}"));
    let mut pod_stream = super::plane::watch_from_now(&pods, &lp).await?;
    let slices = client
        .api::<EndpointSlice>(Some("default"))
        .without_managed_fields();
    let slp = client::ListParams::default().labels(format!("kubernetes.io/service-name={name}"));
    let mut slice_stream = super::plane::watch_from_now(&slices, &slp).await?;

    let counts0 = request_counts(&http, plane.url()).await?;
    let cpu0 = kubelet_fake::bench::process_usage();
    let t0 = Instant::now();
    let r = http
        .patch(format!("{base}/replicationcontrollers/{name}/scale"))
        .header("Content-Type", "application/merge-patch+json")
        .body(serde_json::json!({"spec": {"replicas": replicas}}).to_string())
        .send()
        .await?;
    if !r.status().is_success() {
        return Err(Error::Failed(format!("scale: {}", r.status())));
    }
    let end = t0 + deadline;
    let mut ready_pods: HashSet<String> = HashSet::with_capacity(replicas);
    let mut by_slice: HashMap<String, usize> = HashMap::new();
    let mut all_ready: Option<Duration> = None;
    let mut complete: Option<Duration> = None;
    while complete.is_none() && Instant::now() < end {
        tokio::select! {
            ev = super::plane::next_event(&mut pod_stream, end) => {
                let pod = match ev? {
                    Some(client::WatchEvent::Added(p) | client::WatchEvent::Modified(p)) => p,
                    Some(_) => continue,
                    None => break,
                };
                if is_ready(&pod) {
                    ready_pods.insert(pod.metadata.name.unwrap_or_default());
                    if ready_pods.len() == replicas && all_ready.is_none() {
                        all_ready = Some(t0.elapsed());
                    }
                }
            }
            ev = super::plane::next_event(&mut slice_stream, end) => {
                match ev? {
                    Some(client::WatchEvent::Added(s) | client::WatchEvent::Modified(s)) => {
                        by_slice.insert(s.metadata.name.clone().unwrap_or_default(), ready_endpoints(&s));
                    }
                    Some(client::WatchEvent::Deleted(s)) => {
                        by_slice.remove(s.metadata.name.as_deref().unwrap_or_default());
                    }
                    Some(_) => {}
                    None => break,
                }
            }
        }
        if all_ready.is_some() && by_slice.values().sum::<usize>() == replicas {
            complete = Some(t0.elapsed());
        }
    }
    let cpu = cpu_since(cpu0);
    let (Some(ready_at), Some(done_at)) = (all_ready, complete) else {
        println!(
            "service: incomplete after {}: {} of {replicas} pods Ready, {} ready endpoints in {} slices",
            ms(t0.elapsed()),
            ready_pods.len(),
            by_slice.values().sum::<usize>(),
            by_slice.len()
        );
        plane.shutdown().await;
        return Ok(());
    };
    let eps = client
        .api::<Endpoints>(Some("default"))
        .get(name)
        .await
        .map_err(|e| Error::Failed(format!("get endpoints: {e}")))?;
    let addresses: usize = eps
        .subsets
        .iter()
        .flatten()
        .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
        .sum();
    let over = eps
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("endpoints.kubernetes.io/over-capacity").cloned())
        .unwrap_or_else(|| "-".into());
    println!(
        "service: {replicas} pods Running and Ready {} after the scale; EndpointSlices complete {} later ({} slices, {replicas} ready endpoints); the Endpoints then held {addresses} ready addresses (over-capacity: {over}); {cpu}",
        ms(ready_at),
        ms(done_at.saturating_sub(ready_at)),
        by_slice.len()
    );
    let counts1 = request_counts(&http, plane.url()).await?;
    let mut writes: Vec<String> = counts1
        .iter()
        .filter(|(k, _)| k.contains("endpoint"))
        .map(|(k, n)| format!("{k} {}", n - counts0.get(k).copied().unwrap_or(0).min(*n)))
        .collect();
    writes.sort();
    println!("service: endpoint requests: {}", writes.join(", "));
    plane.shutdown().await;
    Ok(())
}
