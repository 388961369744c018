//! Our informer against kube-rs's `reflector`, side by side on one apiserver: time to synced,
//! resident memory, and event delivery latency under a paced write load.
//!
//! ```text
//! cargo build --release -p client --example informer_vs_kube
//! target/release/examples/informer_vs_kube [sizes=10000,100000] [reps=3] [updates=10000] [rate=1000]
//! ```
//!
//! The parent process hosts the real apiserver (`apiserver::start` on `127.0.0.1:0`, over an
//! in-memory `store::MemoryStore`), seeds it with `N` pods written straight into the store before
//! the server starts (64 concurrent store creates; the watch cache loads them at start), and runs
//! the writer. Each seeded pod is a copy of one pod created over HTTP on a throwaway apiserver (so
//! it is defaulted like any stored pod; about 1.2 KiB of JSON) with its own name, namespace
//! (`ns-0`..`ns-9`), uid and node. Each client runs in its own child process — this binary
//! re-executed with `--client ours|kube` — so its RSS is its own:
//!
//! * `ours`: `SharedInformerFactory` → `SharedIndexInformer<Pod>` over our REST client (HTTP/JSON,
//!   LIST pages of 500 at RV "0", then WATCH), one handler. Synced = `has_synced()`, polled every
//!   1 ms (`wait_for_cache_sync` polls every 100 ms, which would quantise the figure).
//! * `kube`: `kube::runtime::reflector(store writer, watcher(Api::<Pod>::all, Config::default())
//!   .default_backoff())` — kube-rs defaults: `ListWatch`, pages of 500, no RV (a consistent
//!   LIST), bookmarks, JSON. Synced = `Store::wait_until_ready()` (after `InitDone`).
//!
//! Per run the child prints `SYNCED` with its time to synced and VmRSS/VmHWM from
//! `/proc/self/status`; the parent waits 1 s, then sends exactly `updates` merge-PATCHes (one
//! annotation carrying the run id and the send time in wall-clock ns) at `rate`/s with at most 32
//! in flight (the apiserver's mutating cap), and records the resourceVersion and wall-clock time of
//! each acknowledgement. The child records, for each update of this run its handler/stream sees,
//! the RV and the wall-clock receive time, and reports them when the parent tells it how many
//! writes were acknowledged (or 30 s later). Delivery latency = receive − acknowledgement of the
//! same RV (same machine, same clock); a watch event can beat the PATCH response to its client,
//! such samples count as 0 and are reported as `early`. Send → receive is reported as well.
//!
//! The two clients run alternately, never concurrently, `reps` times each against the same server
//! and data (order swapped every repetition); the summary is the median over runs of each figure
//! (of each run's p50, p99, max). RSS: VmRSS right after sync, VmHWM at the end of the run; both
//! include the child's ~5 MiB baseline. Every loop is bounded by a count and a deadline; the only
//! network is 127.0.0.1.

use std::collections::{BTreeMap, HashMap};
use std::error::Error as StdError;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use client::{FnHandler, SharedInformerFactory};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use parking_lot::Mutex;
use serde_json::{json, Value};
use store::Store;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdout, Command};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

type Result<T, E = Box<dyn StdError + Send + Sync>> = std::result::Result<T, E>;

/// Annotation naming the run a write belongs to (children ignore earlier runs' writes).
const RUN_ANNOTATION: &str = "bench.minik8s.io/run";
/// Annotation carrying the writer's wall-clock send time, ns since the Unix epoch.
const SENT_ANNOTATION: &str = "bench.minik8s.io/sent-ns";
/// Writes in flight at once: the apiserver's `max_mutating_inflight` default.
const WRITERS: usize = 32;
/// Store creates in flight while seeding.
const SEEDERS: usize = 64;
/// Bound on a child's initial sync.
const SYNC_DEADLINE: Duration = Duration::from_secs(600);
/// How long a child keeps waiting for deliveries after the writer is done.
const DRAIN_DEADLINE: Duration = Duration::from_secs(30);
/// Pause between a child's sync and the first write (its watch connects, RSS settles).
const SETTLE: Duration = Duration::from_secs(1);

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.first().map(String::as_str) == Some("--client") {
        rt.block_on(child(ChildArgs::parse(&args)?))
    } else {
        rt.block_on(parent(&args))
    }
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// (VmRSS, VmHWM) in KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

// ---------------------------------------------------------------------------------------------
// Child: one client, one run.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Which {
    Ours,
    Kube,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Ours => "ours",
            Which::Kube => "kube",
        }
    }
}

struct ChildArgs {
    which: Which,
    server: String,
    run: String,
    pods: usize,
    updates: usize,
}

impl ChildArgs {
    fn parse(args: &[String]) -> Result<Self> {
        let get = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
                .ok_or_else(|| format!("missing {flag}"))
        };
        let which = match get("--client")?.as_str() {
            "ours" => Which::Ours,
            "kube" => Which::Kube,
            other => return Err(format!("unknown client {other}").into()),
        };
        Ok(ChildArgs {
            which,
            server: get("--server")?,
            run: get("--run")?,
            pods: get("--pods")?.parse()?,
            updates: get("--updates")?.parse()?,
        })
    }
}

/// One delivered update of this run: (resourceVersion, send ns, receive ns).
type Received = (u64, u64, u64);

/// Records `pod` if it carries this run's annotation; bounded by `cap` entries.
fn record(pod: &Pod, run: &str, cap: usize, sink: &Mutex<Vec<Received>>) {
    let now = wall_ns();
    let Some(ann) = pod.metadata.annotations.as_ref() else {
        return;
    };
    if ann.get(RUN_ANNOTATION).map(String::as_str) != Some(run) {
        return;
    }
    let rv = pod
        .metadata
        .resource_version
        .as_deref()
        .and_then(|s| s.parse().ok());
    let sent = ann.get(SENT_ANNOTATION).and_then(|s| s.parse().ok());
    if let (Some(rv), Some(sent)) = (rv, sent) {
        let mut s = sink.lock();
        if s.len() < cap {
            s.push((rv, sent, now));
        }
    }
}

async fn child(a: ChildArgs) -> Result<()> {
    let (base_rss, _) = rss_kib();
    let cap = a.updates * 2;
    let received: Arc<Mutex<Vec<Received>>> = Arc::new(Mutex::new(Vec::with_capacity(cap)));
    let token = CancellationToken::new();
    let start = Instant::now();
    let (synced, cached) = match a.which {
        Which::Ours => {
            let c = client::Client::new(client::Config::new(a.server.clone()))?;
            let factory = SharedInformerFactory::new(c, Duration::ZERO);
            let inf = factory.informer::<Pod>();
            let (run, sink) = (a.run.clone(), received.clone());
            inf.add_event_handler(
                FnHandler::new()
                    .on_add(|_p: &Arc<Pod>, _| {})
                    .on_update(move |_, p: &Arc<Pod>| record(p, &run, cap, &sink)),
            );
            factory.start(token.clone());
            while !inf.has_synced() && start.elapsed() < SYNC_DEADLINE {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let synced = start.elapsed();
            (synced, inf.indexer().len())
        }
        Which::Kube => {
            let config = kube::Config::new(a.server.parse()?);
            let kc = kube::Client::try_from(config)?;
            let api: kube::Api<Pod> = kube::Api::all(kc);
            let (reader, writer) = reflector::store::<Pod>();
            let stream = reflector(
                writer,
                watcher(api, watcher::Config::default()).default_backoff(),
            );
            let (run, sink, t) = (a.run.clone(), received.clone(), token.clone());
            tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                loop {
                    let ev = tokio::select! {
                        _ = t.cancelled() => return,
                        ev = stream.next() => ev,
                    };
                    match ev {
                        None => return,
                        Some(Ok(watcher::Event::Apply(p))) => record(&p, &run, cap, &sink),
                        Some(Ok(_)) => {}
                        Some(Err(e)) => eprintln!("kube watcher error: {e}"),
                    }
                }
            });
            tokio::time::timeout(SYNC_DEADLINE, reader.wait_until_ready()).await??;
            let synced = start.elapsed();
            (synced, reader.state().len())
        }
    };
    let (rss, hwm) = rss_kib();
    println!(
        "SYNCED {} {cached} {base_rss} {rss} {hwm}",
        synced.as_micros()
    );
    if cached < a.pods {
        eprintln!(
            "{}: only {cached} of {} pods cached",
            a.which.name(),
            a.pods
        );
    }

    // Wait for the parent's "SENT <n>" (bounded), then for n deliveries (bounded).
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let sent: usize = match tokio::time::timeout(SYNC_DEADLINE, stdin.next_line()).await {
        Ok(Ok(Some(line))) => line
            .strip_prefix("SENT ")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0),
        _ => 0,
    };
    let drain = Instant::now();
    while received.lock().len() < sent && drain.elapsed() < DRAIN_DEADLINE {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (rss_end, hwm_end) = rss_kib();
    token.cancel();
    let got = received.lock().clone();
    let mut out = String::with_capacity(got.len() * 40);
    for (rv, sent_ns, recv_ns) in &got {
        out.push_str(&format!("RECV {rv} {sent_ns} {recv_ns}\n"));
    }
    out.push_str(&format!("DONE {rss_end} {hwm_end}\n"));
    let mut stdout = tokio::io::stdout();
    stdout.write_all(out.as_bytes()).await?;
    stdout.flush().await?;
    // Tasks may still be parked on the HTTP connection; the process ends here.
    std::process::exit(0)
}

// ---------------------------------------------------------------------------------------------
// Parent: apiserver, seeding, writer, orchestration.

/// The pod every seeded pod is a copy of (name, namespace, uid and node vary).
fn pod_manifest() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "template", "namespace": "ns-0",
            "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c9b6",
                                 "uid": "11111111-2222-3333-4444-555555555555",
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"nodeName": "node-0", "containers": [{"name": "web", "image": "nginx:1.27"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1",
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                                          "image": "nginx:1.27", "imageID": "", "state": {"running": {}}}]},
    })
}

/// A namespace and a pod as the apiserver stores them (defaulted, uid, timestamps):
/// created over HTTP on a throwaway in-memory apiserver and read back. Seeding raw manifests
/// straight into the store would leave them undefaulted, and the apiserver then refuses every
/// update of such a pod (the defaulted new spec differs from the stored one: 422).
async fn stored_templates() -> Result<(Value, Value)> {
    let store: Arc<dyn Store> = Arc::new(store::MemoryStore::new(store::StoreConfig::default())?);
    let config = apiserver::Config {
        address: "127.0.0.1:0".parse()?,
        ..Default::default()
    };
    let server = apiserver::start(config, store).await?;
    let url = server.url();
    let http = reqwest::Client::new();
    let ns: Value = http
        .post(format!("{url}/api/v1/namespaces"))
        .json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns-0"}}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    http.post(format!("{url}/api/v1/namespaces/ns-0/pods"))
        .json(&pod_manifest())
        .send()
        .await?
        .error_for_status()?;
    // The status is set through the status subresource, as a kubelet would.
    let pod: Value = http
        .put(format!("{url}/api/v1/namespaces/ns-0/pods/template/status"))
        .json(&{
            let mut p: Value = http
                .get(format!("{url}/api/v1/namespaces/ns-0/pods/template"))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            p["status"] = pod_manifest()["status"].clone();
            p
        })
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    server.stop().await?;
    Ok((ns, pod))
}

/// Writes 10 namespaces and `n` pods straight into the store, 64 creates in flight.
async fn seed(store: Arc<dyn Store>, n: usize) -> Result<()> {
    let (ns_t, pod_t) = stored_templates().await?;
    let strip = |mut v: Value| {
        if let Some(m) = v["metadata"].as_object_mut() {
            m.remove("resourceVersion");
        }
        v
    };
    let (ns_t, pod_t) = (Arc::new(strip(ns_t)), Arc::new(strip(pod_t)));
    for ns in 0..10 {
        let mut obj = Value::clone(&ns_t);
        obj["metadata"]["name"] = json!(format!("ns-{ns}"));
        obj["metadata"]["uid"] = json!(format!("00000000-0000-0000-0001-{ns:012}"));
        if let Some(l) = obj["metadata"]["labels"].as_object_mut() {
            l.insert(
                "kubernetes.io/metadata.name".into(),
                json!(format!("ns-{ns}")),
            );
        }
        let key = format!("/registry/namespaces/ns-{ns}");
        store.create(&key, serde_json::to_vec(&obj)?.into()).await?;
    }
    let mut creates = futures::stream::iter(0..n)
        .map(|i| {
            let (store, pod_t) = (store.clone(), pod_t.clone());
            async move {
                let mut p = Value::clone(&pod_t);
                p["metadata"]["name"] = json!(format!("web-{i:06}"));
                p["metadata"]["namespace"] = json!(format!("ns-{}", i % 10));
                p["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{i:012}"));
                p["spec"]["nodeName"] = json!(format!("node-{}", i % 100));
                let key = format!("/registry/pods/ns-{}/web-{i:06}", i % 10);
                store.create(&key, serde_json::to_vec(&p)?.into()).await?;
                Ok::<(), Box<dyn StdError + Send + Sync>>(())
            }
        })
        .buffer_unordered(SEEDERS);
    while let Some(r) = creates.next().await {
        r?;
    }
    Ok(())
}

struct WriterReport {
    /// resourceVersion → wall-clock ns of the acknowledgement.
    acks: HashMap<u64, u64>,
    sent: usize,
    failed: usize,
    elapsed: Duration,
}

/// One merge-PATCH, retried on 429 (bounded). Returns (rv, ack wall-clock ns).
async fn patch_one(http: &reqwest::Client, url: &str, run: &str) -> Result<(u64, u64)> {
    for _ in 0..50 {
        let body = json!({"metadata": {"annotations": {
            RUN_ANNOTATION: run, SENT_ANNOTATION: wall_ns().to_string()}}});
        let resp = http
            .patch(url)
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string())
            .send()
            .await?;
        let ack = wall_ns();
        if resp.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        if !resp.status().is_success() {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            return Err(format!("PATCH {url}: {status}: {text}").into());
        }
        let obj: Value = resp.json().await?;
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .ok_or("PATCH response without resourceVersion")?;
        return Ok((rv, ack));
    }
    Err(format!("PATCH {url}: still 429 after 50 attempts").into())
}

/// Exactly `updates` PATCHes paced at `rate`/s (1 ms ticks), at most [`WRITERS`] in flight.
async fn write_load(
    server: &str,
    pods: usize,
    updates: usize,
    rate: usize,
    run: &str,
) -> Result<WriterReport> {
    let http = reqwest::Client::new();
    let gate = Arc::new(Semaphore::new(WRITERS));
    let mut tasks = JoinSet::new();
    let mut acks = HashMap::with_capacity(updates);
    let mut failed = 0usize;
    let mut collect = |r: std::result::Result<Result<(u64, u64)>, tokio::task::JoinError>| match r {
        Ok(Ok((rv, ack))) => {
            acks.insert(rv, ack);
        }
        Ok(Err(e)) => {
            failed += 1;
            eprintln!("writer: {e}");
        }
        Err(e) => {
            failed += 1;
            eprintln!("writer task: {e}");
        }
    };
    let deadline = Duration::from_secs((updates / rate.max(1)) as u64 * 3 + 30);
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let mut sent = 0usize;
    while sent < updates && start.elapsed() < deadline {
        tick.tick().await;
        let due = (start.elapsed().as_secs_f64() * rate as f64) as usize;
        while sent < due.min(updates) {
            let permit = gate.clone().acquire_owned().await?;
            let i = sent % pods.max(1);
            let url = format!("{server}/api/v1/namespaces/ns-{}/pods/web-{i:06}", i % 10);
            let (http, run) = (http.clone(), run.to_string());
            tasks.spawn(async move {
                let r = patch_one(&http, &url, &run).await;
                drop(permit);
                r
            });
            sent += 1;
        }
        while let Some(r) = tasks.try_join_next() {
            collect(r);
        }
    }
    while let Some(r) = tasks.join_next().await {
        collect(r);
    }
    Ok(WriterReport {
        acks,
        sent,
        failed,
        elapsed: start.elapsed(),
    })
}

/// Figures of one client run.
#[derive(Clone, Debug, Default)]
struct RunResult {
    sync_ms: f64,
    cached: usize,
    base_rss_mib: f64,
    synced_rss_mib: f64,
    end_rss_mib: f64,
    hwm_mib: f64,
    acked: usize,
    delivered: usize,
    early: usize,
    write_rate: f64,
    /// ack → receive, ms: p50, p99, max.
    ack_lat: [f64; 3],
    /// send → receive, ms: p50, p99, max.
    send_lat: [f64; 3],
}

fn percentiles_ms(mut v: Vec<u64>) -> [f64; 3] {
    if v.is_empty() {
        return [f64::NAN; 3];
    }
    v.sort_unstable();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize] as f64 / 1e6;
    [at(0.5), at(0.99), at(1.0)]
}

fn mib(kib: &str) -> f64 {
    kib.parse::<f64>().unwrap_or(0.0) / 1024.0
}

async fn next_line(lines: &mut tokio::io::Lines<BufReader<ChildStdout>>) -> Result<String> {
    match tokio::time::timeout(SYNC_DEADLINE, lines.next_line()).await {
        Ok(Ok(Some(l))) => Ok(l),
        Ok(Ok(None)) => Err("child closed its stdout".into()),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err("child silent past the deadline".into()),
    }
}

async fn run_one(
    which: Which,
    server: &str,
    pods: usize,
    updates: usize,
    rate: usize,
    run: &str,
) -> Result<RunResult> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(["--client", which.name(), "--server", server, "--run", run])
        .args([
            "--pods",
            &pods.to_string(),
            "--updates",
            &updates.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("child stdin")?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("child stdout")?).lines();
    let synced = next_line(&mut lines).await?;
    let f: Vec<&str> = synced.split_whitespace().collect();
    if f.len() != 6 || f[0] != "SYNCED" {
        return Err(format!("unexpected child line: {synced}").into());
    }
    let mut r = RunResult {
        sync_ms: f[1].parse::<f64>()? / 1000.0,
        cached: f[2].parse()?,
        base_rss_mib: mib(f[3]),
        synced_rss_mib: mib(f[4]),
        hwm_mib: mib(f[5]),
        ..Default::default()
    };
    tokio::time::sleep(SETTLE).await;
    let w = write_load(server, pods, updates, rate, run).await?;
    stdin
        .write_all(format!("SENT {}\n", w.acks.len()).as_bytes())
        .await?;
    stdin.flush().await?;
    let (mut ack_lat, mut send_lat) = (Vec::new(), Vec::new());
    loop {
        let line = next_line(&mut lines).await?;
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.first().copied() {
            Some("RECV") if f.len() == 4 => {
                let (rv, sent, recv): (u64, u64, u64) =
                    (f[1].parse()?, f[2].parse()?, f[3].parse()?);
                send_lat.push(recv.saturating_sub(sent));
                if let Some(ack) = w.acks.get(&rv) {
                    if recv < *ack {
                        r.early += 1;
                    }
                    ack_lat.push(recv.saturating_sub(*ack));
                }
            }
            Some("DONE") if f.len() == 3 => {
                r.end_rss_mib = mib(f[1]);
                r.hwm_mib = mib(f[2]);
                break;
            }
            _ => return Err(format!("unexpected child line: {line}").into()),
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    r.acked = w.acks.len();
    r.delivered = ack_lat.len();
    r.write_rate = w.sent as f64 / w.elapsed.as_secs_f64();
    if w.failed > 0 {
        eprintln!("{}: {} writes failed", which.name(), w.failed);
    }
    r.ack_lat = percentiles_ms(ack_lat);
    r.send_lat = percentiles_ms(send_lat);
    Ok(r)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

async fn parent(args: &[String]) -> Result<()> {
    let sizes: Vec<usize> = match args.first() {
        Some(s) => s
            .split(',')
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()?,
        None => vec![10_000, 100_000],
    };
    let num = |i: usize, default: usize| -> Result<usize> {
        Ok(match args.get(i) {
            Some(s) => s.parse()?,
            None => default,
        })
    };
    let (reps, updates, rate) = (num(1, 3)?, num(2, 10_000)?, num(3, 1000)?.max(1));
    println!(
        "informer_vs_kube sizes={sizes:?} reps={reps} updates={updates} rate={rate}/s; loadavg {}",
        loadavg()
    );
    let mut table = Vec::new();
    for &n in &sizes {
        let store: Arc<dyn Store> =
            Arc::new(store::MemoryStore::new(store::StoreConfig::default())?);
        let t = Instant::now();
        seed(store.clone(), n).await?;
        let seeded = t.elapsed();
        let config = apiserver::Config {
            address: "127.0.0.1:0".parse()?,
            ..Default::default()
        };
        let t = Instant::now();
        let server = apiserver::start(config, store).await?;
        let url = server.url();
        println!(
            "\n== {n} pods: seeded into the store in {:.2} s, apiserver up in {:.2} s at {url}; loadavg {}",
            seeded.as_secs_f64(),
            t.elapsed().as_secs_f64(),
            loadavg()
        );
        let mut results: BTreeMap<&str, Vec<RunResult>> = BTreeMap::new();
        for rep in 0..reps {
            let order = if rep % 2 == 0 {
                [Which::Ours, Which::Kube]
            } else {
                [Which::Kube, Which::Ours]
            };
            for which in order {
                let run = format!("{n}-{rep}-{}", which.name());
                let r = run_one(which, &url, n, updates, rate, &run).await?;
                println!(
                    "{:>4} rep {rep}: synced {:.0} ms ({} cached); RSS base {:.1} synced {:.1} end {:.1} peak {:.1} MiB; \
                     writes {:.0}/s, {} acked, {} delivered ({} early); ack→recv ms p50 {:.2} p99 {:.2} max {:.2}; \
                     send→recv p50 {:.2} p99 {:.2} max {:.2}; loadavg {}",
                    which.name(), r.sync_ms, r.cached, r.base_rss_mib, r.synced_rss_mib, r.end_rss_mib,
                    r.hwm_mib, r.write_rate, r.acked, r.delivered, r.early,
                    r.ack_lat[0], r.ack_lat[1], r.ack_lat[2],
                    r.send_lat[0], r.send_lat[1], r.send_lat[2], loadavg()
                );
                results.entry(which.name()).or_default().push(r);
            }
        }
        for (name, rs) in &results {
            let m = |f: &dyn Fn(&RunResult) -> f64| median(rs.iter().map(f).collect());
            table.push(format!(
                "| {n} | {name} | {:.0} ms | {:.0} MiB | {:.0} MiB | {:.2} / {:.2} / {:.2} ms | {:.2} / {:.2} / {:.2} ms | {:.0} / {:.0} |",
                m(&|r| r.sync_ms),
                m(&|r| r.synced_rss_mib),
                m(&|r| r.hwm_mib),
                m(&|r| r.ack_lat[0]),
                m(&|r| r.ack_lat[1]),
                m(&|r| r.ack_lat[2]),
                m(&|r| r.send_lat[0]),
                m(&|r| r.send_lat[1]),
                m(&|r| r.send_lat[2]),
                m(&|r| r.delivered as f64),
                m(&|r| r.acked as f64),
            ));
        }
        server.stop().await?;
    }
    println!("\nmedians over {reps} runs; loadavg {}", loadavg());
    println!("| pods | client | time to synced | RSS synced | RSS peak | ack→recv p50 / p99 / max | send→recv p50 / p99 / max | delivered / acked |");
    println!("|---|---|---|---|---|---|---|---|");
    for row in table {
        println!("{row}");
    }
    Ok(())
}
