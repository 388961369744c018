//! Benchmark helpers: how much memory and CPU N simulated nodes (and their pods) cost.
//!
//! [`process_usage`] reads this process's resident set size and CPU time from `/proc/self`
//! (Linux only; `None` elsewhere). [`measure_nodes`] starts N nodes against any apiserver, lets
//! them heartbeat for a measuring window and reports start time, RSS and CPU use over the window;
//! [`measure_pods`] additionally creates pods bound round-robin to the nodes and reports how long
//! until all of them were Running and Ready. Both are bounded in count and time and never assert:
//! the numbers go to `BENCHMARKS.md` with the command that produced them.

use std::time::{Duration, Instant};

use client::{Api, Client, DeleteParams, ListParams};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::{FakeKubelets, KubeletConfig, KubeletMetrics};

/// `sysconf(_SC_CLK_TCK)` on Linux is 100 on every mainstream architecture; `/proc/<pid>/stat`
/// reports CPU times in these ticks.
const CLOCK_TICKS_PER_SECOND: u64 = 100;

/// Memory and CPU of this process at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessUsage {
    /// Resident set size (`VmRSS`).
    pub rss_bytes: u64,
    /// User + system CPU time consumed so far.
    pub cpu_time: Duration,
}

/// Reads [`ProcessUsage`] from `/proc/self`; `None` where that is unavailable.
pub fn process_usage() -> Option<ProcessUsage> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5), i.e. 11 and 12 after the name and state.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = utime + stime;
    Some(ProcessUsage {
        rss_bytes: rss_kib * 1024,
        cpu_time: Duration::from_millis(ticks * 1000 / CLOCK_TICKS_PER_SECOND),
    })
}

/// What [`measure_nodes`] / [`measure_pods`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleReport {
    pub nodes: usize,
    pub pods: usize,
    /// `FakeKubelets::start` (registration and first heartbeat of every node).
    pub start_duration: Duration,
    /// Creating all pods (32 concurrent creates).
    pub create_duration: Duration,
    /// From the first pod create to all pods Running and Ready (`None` if not reached in time).
    pub pods_ready_after: Option<Duration>,
    /// RSS before starting and at the end.
    pub rss_before: u64,
    pub rss_after: u64,
    /// CPU used during the steady-state window, as a fraction of one core.
    pub steady_cpu_cores: f64,
    /// The window the CPU figure covers.
    pub window: Duration,
    pub metrics: KubeletMetrics,
}

impl std::fmt::Display for ScaleReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        write!(
            f,
            "nodes={} pods={} start={:.2?} create={:.2?} pods_ready_after={} rss_before={:.1}MiB rss_after={:.1}MiB \
             steady_cpu={:.3} cores over {:.1?} status_writes={} lease_renewals={} node_status_writes={}",
            self.nodes,
            self.pods,
            self.start_duration,
            self.create_duration,
            self.pods_ready_after
                .map_or("not reached".to_string(), |d| format!("{d:.2?}")),
            mib(self.rss_before),
            mib(self.rss_after),
            self.steady_cpu_cores,
            self.window,
            self.metrics.status_writes,
            self.metrics.lease_renewals,
            self.metrics.node_status_writes,
        )
    }
}

fn bench_pod(name: &str, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([("app".to_string(), "kubelet-bench".to_string())].into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_string()),
            containers: vec![Container {
                name: "app".to_string(),
                image: Some("nginx:1.25".to_string()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// Starts `cfg.nodes` nodes, lets them run for `window` and reports. The nodes are stopped (the
/// token is cancelled) before returning.
pub async fn measure_nodes(
    client: Client,
    cfg: KubeletConfig,
    window: Duration,
) -> Result<ScaleReport> {
    measure_pods(client, cfg, 0, "default", Duration::ZERO, window).await
}

/// Like [`measure_nodes`], and first creates `pods` pods in `namespace` bound round-robin to the
/// nodes, waiting at most `ready_timeout` for all of them to be Running and Ready; deletes them
/// (grace 0) at the end.
pub async fn measure_pods(
    client: Client,
    cfg: KubeletConfig,
    pods: usize,
    namespace: &str,
    ready_timeout: Duration,
    window: Duration,
) -> Result<ScaleReport> {
    let before = process_usage();
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let kubelets = FakeKubelets::start(client.clone(), cfg.clone(), shutdown.clone()).await?;
    let start_duration = started.elapsed();
    let names = kubelets.node_names();
    let api: Api<Pod> = client.api(Some(namespace));

    let mut pods_ready_after = None;
    let mut create_duration = Duration::ZERO;
    if pods > 0 && !names.is_empty() {
        let t0 = Instant::now();
        let creates = futures::stream::iter(0..pods).map(|i| {
            let api = api.clone();
            let pod = bench_pod(&format!("kubelet-bench-{i}"), &names[i % names.len()]);
            async move { api.create(&pod).await.is_ok() }
        });
        let created = creates
            .buffer_unordered(32)
            .fold(0usize, |n, ok| async move { n + usize::from(ok) })
            .await;
        create_duration = t0.elapsed();
        let deadline = t0 + ready_timeout;
        let selector = ListParams::default().labels("app=kubelet-bench");
        while Instant::now() < deadline {
            let ready = match api.list(&selector).await {
                Ok(list) => list.items.iter().filter(|p| is_ready(p)).count(),
                Err(_) => 0,
            };
            if ready >= created {
                pods_ready_after = Some(t0.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let window_start = process_usage();
    let w0 = Instant::now();
    tokio::time::sleep(window).await;
    let window_end = process_usage();
    let wall = w0.elapsed();
    let metrics = kubelets.metrics();

    if pods > 0 {
        let opts = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let deletes = futures::stream::iter(0..pods).map(|i| {
            let api = api.clone();
            let opts = opts.clone();
            async move {
                let _ = api.delete(&format!("kubelet-bench-{i}"), &opts).await;
            }
        });
        deletes.buffer_unordered(32).collect::<Vec<()>>().await;
    }
    shutdown.cancel();
    kubelets.join().await;

    let steady_cpu_cores = match (window_start, window_end) {
        (Some(a), Some(b)) if !wall.is_zero() => {
            b.cpu_time.saturating_sub(a.cpu_time).as_secs_f64() / wall.as_secs_f64()
        }
        _ => 0.0,
    };
    Ok(ScaleReport {
        nodes: names.len(),
        pods,
        start_duration,
        create_duration,
        pods_ready_after,
        rss_before: before.map_or(0, |u| u.rss_bytes),
        rss_after: window_end.map_or(0, |u| u.rss_bytes),
        steady_cpu_cores,
        window: wall,
        metrics,
    })
}

fn is_ready(p: &Pod) -> bool {
    let Some(s) = p.status.as_ref() else {
        return false;
    };
    s.phase.as_deref() == Some("Running")
        && s.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_usage() {
        if let Some(u) = process_usage() {
            assert!(u.rss_bytes > 1024 * 1024, "{u:?}");
            let v: Vec<u8> = vec![1; 1 << 20];
            let later = process_usage().map_or(Duration::ZERO, |u| u.cpu_time);
            assert!(later >= u.cpu_time);
            assert_eq!(v.len(), 1 << 20);
        }
    }
}
