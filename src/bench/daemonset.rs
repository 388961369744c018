//! `minik8s bench daemonset`: a DaemonSet on `nodes` fake nodes (apiserver, controller manager
//! and fake kubelets in this process, talking over HTTP), timed from its creation until every
//! node runs a daemon pod that is Running and Ready.
//!
//! Progress is followed on one watch of the DaemonSet's pods (the first time each pod is seen
//! bound and Ready is recorded), so the run also reports the 10th/50th/90th percentile; the
//! DaemonSet's own status (`numberReady`) is read at the end. Bounded by `deadline`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;

use super::scale::{cpu_since, is_ready, print_requests, request_counts, PodProgress};
use super::{ms, percentile, Error};

fn manifest(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}
    })
}

/// Runs the benchmark on a fresh in-memory control plane with `nodes` fake nodes.
pub async fn daemonset(nodes: usize, deadline: Duration) -> Result<(), Error> {
    let (plane, took) =
        super::plane::start_ready(super::plane::config(nodes, None), deadline).await?;
    let client = plane.client();
    println!(
        "daemonset: control plane with {nodes} Ready nodes in {}",
        ms(took)
    );

    let name = "agent";
    let pods = client
        .api::<PodProgress>(Some("default"))
        .without_managed_fields();
    let lp = client::ListParams::default().labels(format!("app={name}"));
    let mut stream = super::plane::watch_from_now(&pods, &lp).await?;

    let http = reqwest::Client::new();
    let base = plane.url().to_string();
    let counts0 = request_counts(&http, &base).await?;
    let cpu0 = kubelet_fake::bench::process_usage();
    let t0 = Instant::now();
    let r = http
        .post(format!("{base}/apis/apps/v1/namespaces/default/daemonsets"))
        .json(&manifest(name))
        .send()
        .await?;
    if !r.status().is_success() {
        return Err(Error::Failed(format!("create daemonset: {}", r.status())));
    }
    // Per pod: first seen (created), first seen bound, first seen Ready.
    let mut seen: HashMap<String, (Duration, Option<Duration>, Option<Duration>)> =
        HashMap::with_capacity(nodes);
    let mut ready = 0usize;
    let until = t0 + deadline;
    while ready < nodes && Instant::now() < until {
        let pod = match super::plane::next_event(&mut stream, until).await? {
            Some(client::WatchEvent::Added(p) | client::WatchEvent::Modified(p)) => p,
            Some(_) => continue,
            None => break,
        };
        let at = t0.elapsed();
        let s = seen
            .entry(pod.metadata.name.clone().unwrap_or_default())
            .or_insert((at, None, None));
        if s.1.is_none() && pod.spec.node_name.is_some() {
            s.1 = Some(at);
        }
        if s.2.is_none() && is_ready(&pod) {
            s.2 = Some(at);
            ready += 1;
        }
    }
    let up = t0.elapsed();
    let cpu = cpu_since(cpu0);
    let mut created: Vec<Duration> = seen.values().map(|s| s.0).collect();
    let mut bound: Vec<Duration> = seen.values().filter_map(|s| s.1).collect();
    let mut readies: Vec<Duration> = seen.values().filter_map(|s| s.2).collect();
    created.sort();
    bound.sort();
    readies.sort();
    // Timeline: pods created, bound and Ready by the end of each half second.
    let by = |v: &[Duration], at: Duration| v.iter().filter(|t| **t <= at).count();
    let mut timeline = Vec::new();
    let mut at = Duration::from_millis(500);
    while at < up + Duration::from_millis(500) {
        timeline.push(format!(
            "{:.1}s {}/{}/{}",
            at.as_secs_f64(),
            by(&created, at),
            by(&bound, at),
            by(&readies, at)
        ));
        at += Duration::from_millis(500);
    }
    println!(
        "daemonset: timeline (created/bound/Ready): {}",
        timeline.join(", ")
    );
    if ready < nodes {
        println!(
            "daemonset: only {ready} of {nodes} daemon pods Running and Ready after {} ({} created, {} bound)",
            ms(up),
            seen.len(),
            bound.len()
        );
    } else {
        println!(
            "daemonset: {nodes} daemon pods Running and Ready in {} (last created {}, last bound {}; ready p10 {} p50 {} p90 {}; {cpu})",
            ms(up),
            ms(created.last().copied().unwrap_or_default()),
            ms(bound.last().copied().unwrap_or_default()),
            ms(percentile(&readies, 0.1)),
            ms(percentile(&readies, 0.5)),
            ms(percentile(&readies, 0.9)),
        );
    }
    let counts1 = request_counts(&http, &base).await?;
    print_requests("daemonset: create", &counts0, &counts1);
    // The controller's own view, once it has caught up (bounded).
    let dss = client.api::<DaemonSet>(Some("default"));
    let status_deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = dss.get(name).await.ok().and_then(|d| d.status);
        let number_ready = st.as_ref().map_or(0, |s| s.number_ready);
        if usize::try_from(number_ready).unwrap_or(0) >= nodes || Instant::now() > status_deadline {
            println!(
                "daemonset: status desired {} ready {} available {} (read {} after creation)",
                st.as_ref().map_or(0, |s| s.desired_number_scheduled),
                number_ready,
                st.as_ref().and_then(|s| s.number_available).unwrap_or(0),
                ms(t0.elapsed())
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = dss.delete(name, &client::DeleteParams::default()).await;
    plane.shutdown().await;
    Ok(())
}
