//! `minik8s bench scale`: DESIGN.md's headline figure, `kubectl scale rc --replicas=N` on a whole
//! control plane (apiserver, controller manager, fake kubelets on `nodes` nodes, all in this
//! process and talking over HTTP), timed until every pod is Running and Ready, then back to 0.
//!
//! The scale is the request `kubectl scale` sends: a merge PATCH of the RC's `scale` subresource.
//! Progress is followed on one watch of the RC's pods (no polling LISTs that would load the
//! server): the first time each pod is seen bound, Running and Ready is recorded, so the run also
//! reports when the 10th/50th/90th percentile and the last pod got there. Scale-down is timed
//! until no pod of the RC exists (deletion finished, not merely requested). Bounded by
//! `deadline` per direction.
//!
//! With `--kubeconfig` the same run drives a cluster already running (`minik8s up`) from this
//! process, optionally through the real `kubectl scale`; the server's CPU and memory then come from
//! its `/metrics`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::{ms, percentile, Error};

/// What one pod has reached, first seen at these offsets from the scale request.
#[derive(Default, Clone, Copy)]
struct Seen {
    bound: Option<Duration>,
    ready: Option<Duration>,
}

/// What the benchmark reads of a pod. Its watch is the observer, not part of the control plane,
/// yet shares the process's two cores with it: decoding these fields instead of whole pods keeps
/// the observer's share of the CPU small.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct PodProgress {
    #[serde(deserialize_with = "progress_meta")]
    pub(super) metadata: ObjectMeta,
    #[serde(default)]
    pub(super) spec: ProgressSpec,
    #[serde(default)]
    status: ProgressStatus,
}

/// The metadata the benchmarks read: every other member (labels, owner references, managed
/// fields) is skipped while parsing, never built, so the watch needs no managed-fields stripping
/// pass either.
#[derive(Deserialize)]
struct ProgressMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(rename = "deletionTimestamp", default)]
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

fn progress_meta<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = ProgressMeta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        resource_version: m.resource_version,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct ProgressSpec {
    #[serde(rename = "nodeName", default)]
    pub(super) node_name: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ProgressStatus {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    conditions: Vec<ProgressCondition>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ProgressCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl k8s_openapi::Resource for PodProgress {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for PodProgress {
    const LIST_KIND: &'static str = "PodList";
}

impl k8s_openapi::Metadata for PodProgress {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Running and Ready, as `kubectl get pods` shows it.
pub(super) fn is_ready(p: &PodProgress) -> bool {
    p.status.phase.as_deref() == Some("Running")
        && p.status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

pub(super) fn rc(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": {"app": name},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}
    })
}

/// `apiserver_request_total` from `/metrics`: `"VERB resource"` (successes) or
/// `"VERB resource (code)"` → count.
pub(super) async fn request_counts(
    http: &reqwest::Client,
    base: &str,
) -> Result<BTreeMap<String, u64>, Error> {
    Ok(counts_in(&metrics_text(http, base).await?))
}

/// The server's `/metrics` text.
pub(super) async fn metrics_text(http: &reqwest::Client, base: &str) -> Result<String, Error> {
    Ok(http
        .get(format!("{base}/metrics"))
        .send()
        .await?
        .text()
        .await?)
}

/// [`request_counts`] of a `/metrics` text.
fn counts_in(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, n)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |k: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(k))
                .map(|v| v.trim_matches('"').to_string())
                .unwrap_or_default()
        };
        let code = label("code=");
        let mut key = format!("{} {}", label("verb="), label("resource="));
        if !code.starts_with('2') {
            key = format!("{key} ({code})");
        }
        *out.entry(key).or_insert(0) += n.parse::<u64>().unwrap_or(0);
    }
    out
}

/// Prints the requests served between two [`request_counts`] snapshots, largest first, after
/// `phase` (`scale: 0 → N`).
pub(super) fn print_requests(
    phase: &str,
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) {
    let mut delta: Vec<(u64, &String)> = after
        .iter()
        .map(|(k, n)| (n - before.get(k).copied().unwrap_or(0).min(*n), k))
        .filter(|(n, _)| *n > 0)
        .collect();
    delta.sort_by(|a, b| b.cmp(a));
    let total: u64 = delta.iter().map(|(n, _)| n).sum();
    // The eight largest, and every refusal (a 429 costs its client a one-second Retry-After).
    let list: Vec<String> = delta
        .iter()
        .enumerate()
        .filter(|(i, (_, k))| *i < 8 || k.ends_with(')'))
        .map(|(_, (n, k))| format!("{k} {n}"))
        .collect();
    println!("{phase}: {total} API requests ({})", list.join(", "));
}

pub(super) fn cpu_since(a: Option<kubelet_fake::bench::ProcessUsage>) -> String {
    usage_between(a, kubelet_fake::bench::process_usage())
}

/// CPU spent between two readings, and the memory at the second.
fn usage_between(
    a: Option<kubelet_fake::bench::ProcessUsage>,
    b: Option<kubelet_fake::bench::ProcessUsage>,
) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!(
            "{:.1} s CPU, RSS {:.0} MiB",
            (b.cpu_time - a.cpu_time).as_secs_f64(),
            b.rss_bytes as f64 / 1048576.0
        ),
        _ => String::new(),
    }
}

/// Runs the benchmark on a fresh control plane. `on_disk`: the sled store in a temporary
/// directory (what `minik8s up` uses) instead of memory.
pub async fn scale(
    replicas: usize,
    nodes: usize,
    on_disk: bool,
    secure: bool,
    deadline: Duration,
) -> Result<(), Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::Failed(e.to_string()))?;
    let mut config = super::plane::config(nodes, on_disk.then(|| dir.path()));
    if secure {
        config.apiserver.secure = Some(apiserver::config::SecureConfig::default());
    }
    let storage = match (on_disk, secure) {
        (true, true) => "sled on disk, secure",
        (true, false) => "sled on disk",
        (false, true) => "in memory, secure",
        (false, false) => "in memory",
    };
    scale_on(replicas, nodes, config, storage, deadline).await
}

/// The benchmark on a control plane of `config` (its storage described by `storage`), e.g. on
/// etcd (`minik8s bench scale --etcd-servers URL`).
pub async fn scale_on(
    replicas: usize,
    nodes: usize,
    config: crate::control_plane::ControlPlaneConfig,
    storage: &str,
    deadline: Duration,
) -> Result<(), Error> {
    let (plane, took) = super::plane::start_ready(config, deadline).await?;
    println!(
        "scale: control plane with {nodes} Ready nodes ({storage}) in {}",
        ms(took)
    );
    let cluster = Cluster {
        client: plane.client(),
        http: super::admin_http(&plane, reqwest::Client::builder())?,
        url: plane.url().to_string(),
        kubectl: None,
        in_process: true,
    };
    let result = run(&cluster, replicas, deadline).await;
    plane.shutdown().await;
    result
}

/// The benchmark against a running cluster named by `kubeconfig` (e.g. `minik8s up --nodes 100`),
/// scaled with the real `kubectl` if `kubectl`: what a user of `minik8s up` sees, with the
/// observer in a process of its own.
pub async fn scale_cluster(
    kubeconfig: &std::path::Path,
    kubectl: bool,
    replicas: usize,
    deadline: Duration,
) -> Result<(), Error> {
    let config =
        client::Config::from_kubeconfig(kubeconfig).map_err(|e| Error::Failed(e.to_string()))?;
    let http = super::http_for(&config, reqwest::Client::builder())?;
    let url = config.server.clone();
    let client = client::Client::new(config).map_err(|e| Error::Failed(e.to_string()))?;
    let nodes = client
        .api::<k8s_openapi::api::core::v1::Node>(None)
        .list(&client::ListParams::default())
        .await
        .map_err(|e| Error::Failed(format!("list nodes: {e}")))?;
    let ready = nodes
        .items
        .iter()
        .filter(|n| controller::scheduler::filter::node_ready(n))
        .count();
    println!(
        "scale: the cluster at {url} ({} nodes, {ready} Ready), scaled with {}",
        nodes.items.len(),
        if kubectl {
            "kubectl"
        } else {
            "a PATCH of the scale subresource"
        }
    );
    let cluster = Cluster {
        client,
        http,
        url,
        kubectl: kubectl.then(|| kubeconfig.to_path_buf()),
        in_process: false,
    };
    run(&cluster, replicas, deadline).await
}

/// How long `kubectl scale` may take (its discovery included) before the run fails.
const KUBECTL_DEADLINE: Duration = Duration::from_secs(60);

/// The cluster a run drives.
struct Cluster {
    client: client::Client,
    /// An HTTP client with the cluster's admin credentials.
    http: reqwest::Client,
    url: String,
    /// Scale with `kubectl --kubeconfig <this>` instead of the request it sends.
    kubectl: Option<std::path::PathBuf>,
    /// The control plane runs in this process: its CPU and memory are this process's (the
    /// observer's included); otherwise they are the server's own, from its `/metrics`.
    in_process: bool,
}

impl Cluster {
    /// `kubectl scale rc <name> --replicas=<n>`, or the merge PATCH of the RC's `scale`
    /// subresource that it sends.
    async fn scale(&self, name: &str, n: usize) -> Result<(), Error> {
        if let Some(kubeconfig) = &self.kubectl {
            let run = tokio::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(["--namespace", "default", "scale", "rc", name])
                .arg(format!("--replicas={n}"))
                .kill_on_drop(true)
                .output();
            let out = tokio::time::timeout(KUBECTL_DEADLINE, run)
                .await
                .map_err(|_| Error::Failed(format!("kubectl scale to {n}: no answer in time")))?
                .map_err(|e| Error::Failed(format!("kubectl: {e}")))?;
            return if out.status.success() {
                Ok(())
            } else {
                Err(Error::Failed(format!(
                    "kubectl scale to {n}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )))
            };
        }
        let r = self
            .http
            .patch(format!(
                "{}/api/v1/namespaces/default/replicationcontrollers/{name}/scale",
                self.url
            ))
            .header("Content-Type", "application/merge-patch+json")
            .body(serde_json::json!({"spec": {"replicas": n}}).to_string())
            .send()
            .await?;
        if r.status().is_success() {
            Ok(())
        } else {
            Err(Error::Failed(format!("scale to {n}: {}", r.status())))
        }
    }

    /// The requests the server has served and the control plane's CPU time and memory (see
    /// `in_process`), from one read of its `/metrics`.
    async fn reading(&self) -> Result<Reading, Error> {
        let text = metrics_text(&self.http, &self.url).await?;
        let usage = if self.in_process {
            kubelet_fake::bench::process_usage()
        } else {
            usage_in(&text).ok()
        };
        Ok((counts_in(&text), usage))
    }
}

/// What [`Cluster::reading`] reads.
type Reading = (
    BTreeMap<String, u64>,
    Option<kubelet_fake::bench::ProcessUsage>,
);

/// The server's `process_cpu_seconds_total` and `process_resident_memory_bytes` in a `/metrics`
/// text.
pub(super) fn usage_in(text: &str) -> Result<kubelet_fake::bench::ProcessUsage, Error> {
    let value = |name: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .ok_or_else(|| Error::Failed(format!("no {name} in the server's /metrics")))
    };
    Ok(kubelet_fake::bench::ProcessUsage {
        cpu_time: Duration::from_secs_f64(value("process_cpu_seconds_total")?.max(0.0)),
        rss_bytes: value("process_resident_memory_bytes")? as u64,
    })
}

/// One round up and down on `cluster`.
async fn run(cluster: &Cluster, replicas: usize, deadline: Duration) -> Result<(), Error> {
    let client = &cluster.client;
    let http = &cluster.http;
    let base = format!("{}/api/v1/namespaces/default", cluster.url);
    let name = "web";
    let r = http
        .post(format!("{base}/replicationcontrollers"))
        .json(&rc(name))
        .send()
        .await?;
    if !r.status().is_success() {
        return Err(Error::Failed(format!("create rc: {}", r.status())));
    }
    let result = drive(cluster, name, replicas, deadline).await;
    // Whatever happened: a cluster of another process keeps running after this one.
    let rcs = client.api::<ReplicationController>(Some("default"));
    let _ = rcs.delete(name, &client::DeleteParams::default()).await;
    result
}

/// The round itself, on the RC `name` [`run`] created.
async fn drive(
    cluster: &Cluster,
    name: &str,
    replicas: usize,
    deadline: Duration,
) -> Result<(), Error> {
    let client = &cluster.client;
    // The watch reads names, nodes, phases and conditions only.
    let pods = client.api::<PodProgress>(Some("default"));
    let lp = client::ListParams::default().labels(format!("app={name}"));
    let mut stream = super::plane::watch_from_now(&pods, &lp).await?;

    // Up.
    let (counts0, cpu0) = cluster.reading().await?;
    let t0 = Instant::now();
    cluster.scale(name, replicas).await?;
    let scaled = t0.elapsed();
    let mut seen: HashMap<String, Seen> = HashMap::with_capacity(replicas);
    let mut created = Vec::with_capacity(replicas);
    let mut ready = 0usize;
    let up_deadline = t0 + deadline;
    while ready < replicas && Instant::now() < up_deadline {
        let pod = match super::plane::next_event(&mut stream, up_deadline).await? {
            Some(client::WatchEvent::Added(p) | client::WatchEvent::Modified(p)) => p,
            Some(_) => continue,
            None => break,
        };
        let at = t0.elapsed();
        let key = pod.metadata.name.clone().unwrap_or_default();
        let s = seen.entry(key).or_insert_with(|| {
            created.push(at);
            Seen::default()
        });
        if s.bound.is_none() && pod.spec.node_name.is_some() {
            s.bound = Some(at);
        }
        if s.ready.is_none() && is_ready(&pod) {
            s.ready = Some(at);
            ready += 1;
        }
    }
    let up = t0.elapsed();
    let (counts1, cpu1) = cluster.reading().await?;
    let cpu = usage_between(cpu0, cpu1);
    // Timeline: pods created, bound and Ready by the end of each half second.
    let count_by = |at: Duration, f: &dyn Fn(&Seen) -> Option<Duration>| {
        seen.values()
            .filter(|s| f(s).is_some_and(|t| t <= at))
            .count()
    };
    let mut timeline = Vec::new();
    let mut at = Duration::from_millis(500);
    while at < up + Duration::from_millis(500) {
        timeline.push(format!(
            "{:.1}s {}/{}/{}",
            at.as_secs_f64(),
            created.iter().filter(|t| **t <= at).count(),
            count_by(at, &|s| s.bound),
            count_by(at, &|s| s.ready)
        ));
        at += Duration::from_millis(500);
    }
    println!(
        "scale: timeline (created/bound/Ready): {}",
        timeline.join(", ")
    );
    let mut bound: Vec<Duration> = seen.values().filter_map(|s| s.bound).collect();
    let mut readies: Vec<Duration> = seen.values().filter_map(|s| s.ready).collect();
    bound.sort();
    readies.sort();
    if ready < replicas {
        println!(
            "scale: 0 → {replicas}: only {ready} Running and Ready after {} ({} created, {} bound)",
            ms(up),
            created.len(),
            bound.len()
        );
    } else {
        println!(
            "scale: 0 → {replicas}: all Running and Ready in {} (scale request {}, last created {}, last bound {}; ready p10 {} p50 {} p90 {}; {cpu})",
            ms(up),
            ms(scaled),
            ms(created.last().copied().unwrap_or_default()),
            ms(bound.last().copied().unwrap_or_default()),
            ms(percentile(&readies, 0.1)),
            ms(percentile(&readies, 0.5)),
            ms(percentile(&readies, 0.9)),
        );
    }

    print_requests("scale: 0 → N", &counts0, &counts1);

    // Down: until no pod of the RC exists.
    let t1 = Instant::now();
    cluster.scale(name, 0).await?;
    let scaled_down = t1.elapsed();
    let mut live = seen.len();
    let down_deadline = t1 + deadline;
    let mut terminating = std::collections::HashSet::new();
    let mut last_terminating = Duration::ZERO;
    while live > 0 && Instant::now() < down_deadline {
        let Some(ev) = super::plane::next_event(&mut stream, down_deadline).await? else {
            break;
        };
        match ev {
            client::WatchEvent::Deleted(p) => {
                seen.remove(p.metadata.name.as_deref().unwrap_or_default());
            }
            client::WatchEvent::Modified(p) => {
                let marked = p.metadata.deletion_timestamp.is_some();
                if marked && terminating.insert(p.metadata.name.unwrap_or_default()) {
                    last_terminating = t1.elapsed();
                }
            }
            client::WatchEvent::Added(p) => {
                seen.entry(p.metadata.name.unwrap_or_default()).or_default();
            }
            client::WatchEvent::Error(_) | client::WatchEvent::Bookmark(_) => {}
        }
        live = seen.len();
    }
    let down = t1.elapsed();
    let (counts2, cpu2) = cluster.reading().await?;
    let cpu = usage_between(cpu1, cpu2);
    if live > 0 {
        println!(
            "scale: {replicas} → 0: {live} pods still exist after {}",
            ms(down)
        );
    } else {
        println!(
            "scale: {replicas} → 0: every pod deleted in {} (scale request {}, last pod marked terminating at {}, {} seen terminating; {cpu})",
            ms(down),
            ms(scaled_down),
            ms(last_terminating),
            terminating.len()
        );
    }
    print_requests("scale: N → 0", &counts1, &counts2);
    if ready < replicas || live > 0 {
        return Err(Error::Failed(format!(
            "the scale did not finish: {ready} of {replicas} Ready up, {live} pods left down"
        )));
    }
    Ok(())
}
