//! `minik8s bench`: the performance figures (targets in `BENCHMARKS.md`), measured end to end over
//! HTTP.
//!
//! Every benchmark starts its own in-process control plane on `127.0.0.1:0` (in memory unless it says
//! otherwise), drives it through the public API only, and prints one line per figure. Every load loop
//! is bounded by a count and a deadline. Results are recorded in `BENCHMARKS.md` with the command.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};

use crate::control_plane::{ControlPlane, ControlPlaneConfig, Storage};

mod conns;
mod crds;
mod creates;
mod daemonset;
mod etcd;
mod etcd_baseline;
mod etcd_gateway;
mod job;
mod memory;
mod plane;
mod restart;
mod scale;
mod service;
mod statefulset;
mod watch;
mod watch_readers;
mod webhooks;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// Sandbox start-up to ready (in memory), and the binary's cold start to `/readyz` 200.
    Startup,
    /// Durable creates/s over HTTP (sled store on disk) at `--writers` concurrent writers, with
    /// 429 and other non-2xx counts.
    Creates,
    /// LIST of 10,000 pods.
    List,
    /// Watch fan-out: N watchers while writes go at a fixed rate; delivery latency percentiles.
    Watch,
    /// `kubectl scale rc --replicas=N` on a whole control plane with fake nodes: time to all pods
    /// Running and Ready, and back to 0 (not part of `all`: it takes a few seconds per run).
    Scale,
    /// A Service over `--replicas` pods on `--nodes` fake nodes: time from every pod Running and
    /// Ready until its EndpointSlices list them all, and the slice count (not part of `all`).
    Service,
    /// Custom resources: the Gateway API CRDs installed until Established, and durable creates/s of
    /// a Certificate-like CR and of an HTTPRoute beside ConfigMaps (not part of `all`: it needs
    /// the CRDs' directory, `--gateway-crds`).
    Crds,
    /// A Job with `--completions` and `--parallelism` on `--nodes` fake nodes, pods that exit at
    /// once: time to the Job's Complete condition (not part of `all`).
    Job,
    /// A StatefulSet of `--set-replicas` pods, OrderedReady, on `--set-nodes` fake nodes: time
    /// until every pod is Running and Ready (not part of `all`).
    Statefulset,
    /// A DaemonSet on `--daemonset-nodes` fake nodes: time to every daemon pod Running and Ready
    /// (not part of `all`).
    Daemonset,
    /// Admission webhooks: ConfigMap create latency with no webhook, with one that matches
    /// nothing, and with a local mutating webhook; with a ValidatingAdmissionPolicy that matches
    /// nothing and with one that matches (not part of `all`).
    Webhooks,
    /// Hostile connections: `/healthz` and `GET pods` latency on new connections, quiet, under
    /// `--conn-watches` watches plus `--stallers` slowloris clients, and under `--uploaders` slow
    /// uploads with creates (not part of `all`).
    Conns,
    /// Memory: `--pods` pods (through one RC) on enough fake nodes, held by the apiserver and
    /// every informer: RSS, peak RSS and (with `--features heap-stats`) jemalloc's figures, when
    /// all are Running and after the plane is idle (sled on disk unless `--in-memory`; not part
    /// of `all`).
    Memory,
    /// Start-up over a store already holding `--stored-pods` pods, as written and stored bare:
    /// the watch cache's load without and with defaulting, and the apiserver state's start (not
    /// part of `all`).
    Restart,
    /// The quick ones: `startup`, `creates`, `list` and `watch`.
    All,
    /// The readers of `watch` in a child process (started by `watch` itself).
    #[value(hide = true)]
    WatchClients,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark to run.
    #[arg(value_enum, default_value = "all")]
    pub which: Which,
    /// Watchers for the watch benchmark.
    #[arg(long, default_value_t = 1000)]
    pub watchers: usize,
    /// The collection a `watch-clients` child watches (set by `watch`).
    #[arg(long, hide = true, default_value = "")]
    pub watch_url: String,
    /// The resourceVersion a `watch-clients` child watches from (set by `watch`).
    #[arg(long, hide = true, default_value = "0")]
    pub watch_rv: String,
    /// Writes per second for the watch benchmark.
    #[arg(long, default_value_t = 1000)]
    pub write_rate: u64,
    /// Seconds of load for the creates and watch benchmarks.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Concurrent writers of the creates benchmark, one run each.
    #[arg(long, value_delimiter = ',', default_values_t = [16usize, 64, 256])]
    pub writers: Vec<usize>,
    /// Replicas for the scale benchmark.
    #[arg(long, default_value_t = 10_000)]
    pub replicas: usize,
    /// Fake nodes for the scale and job benchmarks (110 pods each).
    #[arg(long, default_value_t = 100)]
    pub nodes: usize,
    /// Replicas for the statefulset benchmark.
    #[arg(long, default_value_t = 100)]
    pub set_replicas: usize,
    /// Fake nodes for the statefulset benchmark.
    #[arg(long, default_value_t = 3)]
    pub set_nodes: usize,
    /// The fake kubelets' pod start delay in the statefulset benchmark, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub set_start_delay_ms: u64,
    /// Fake nodes for the daemonset benchmark.
    #[arg(long, default_value_t = 1000)]
    pub daemonset_nodes: usize,
    /// Pods for the memory benchmark (its nodes: `--nodes`, or more to fit 110 pods a node).
    #[arg(long, default_value_t = 100_000)]
    pub pods: usize,
    /// Pods already in the store for the restart benchmark.
    #[arg(long, default_value_t = 10_000)]
    pub stored_pods: usize,
    /// The memory benchmark on the in-memory store instead of sled on disk.
    #[arg(long)]
    pub in_memory: bool,
    /// The memory benchmark with the watch cache keeping this many events per resource instead
    /// of the apiserver's default (10,240): at a few thousand pods the ring of superseded
    /// objects outweighs the pods themselves.
    #[arg(long)]
    pub watch_history: Option<usize>,
    /// Scale and list benchmarks on the on-disk sled store (as `minik8s up`) instead of memory.
    #[arg(long)]
    pub on_disk: bool,
    /// Scale benchmark against the running cluster this kubeconfig names (e.g. `minik8s up
    /// --nodes 100`: its nodes must be Ready) instead of a control plane in this process; the
    /// server's CPU and memory are read from its `/metrics`.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["on_disk", "etcd_servers", "etcd_members", "secure"])]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Scale benchmark scaling with the real `kubectl scale rc` (on PATH) instead of the PATCH it
    /// sends (needs --kubeconfig).
    #[arg(long, requires = "kubeconfig")]
    pub kubectl: bool,
    /// Completions of the job benchmark.
    #[arg(long, default_value_t = 1000)]
    pub completions: usize,
    /// Parallelism of the job benchmark.
    #[arg(long, default_value_t = 100)]
    pub parallelism: usize,
    /// Creates per configuration of the webhooks benchmark.
    #[arg(long, default_value_t = 2000)]
    pub webhook_creates: usize,
    /// Open watches of the conns benchmark.
    #[arg(long, default_value_t = 2000)]
    pub conn_watches: usize,
    /// Slowloris clients of the conns benchmark.
    #[arg(long, default_value_t = 600)]
    pub stallers: usize,
    /// Slow uploads (1 MB declared, 10 B/s) of the conns benchmark.
    #[arg(long, default_value_t = 48)]
    pub uploaders: usize,
    /// Run the startup, creates and scale benchmarks against a secure server (HTTPS, client
    /// certificates, RBAC on every request) to compare with plain HTTP.
    #[arg(long)]
    pub secure: bool,
    /// The Gateway API CRDs for the crds benchmark.
    #[arg(long, default_value = "../shared/crds/gateway-api")]
    pub gateway_crds: std::path::PathBuf,
    /// `creates` through an apiserver on this etcd (comma-separated client URLs), beside etcd's own
    /// put rate in the same run; `scale` on this etcd.
    #[arg(long, value_name = "URL", value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// `creates` and `scale` on N etcd members started on loopback for the run (Debian's
    /// `etcd-server`, or `$ETCD_BIN`), instead of `--etcd-servers`; `creates` then also prints
    /// the CPU time per write of this process and of the members.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        conflicts_with = "etcd_servers"
    )]
    pub etcd_members: usize,
    /// Run `creates` with an audit log at PATH, every request at the Metadata level (to compare
    /// with a run without).
    #[arg(long, value_name = "PATH")]
    pub audit_log: Option<std::path::PathBuf>,
    /// Follow each `creates` run with etcd's put rate through its JSON gateway at this client URL
    /// (same writers, seconds and 1 KiB values), and print the ratio.
    #[arg(long, value_name = "URL")]
    pub etcd_gateway: Option<String>,
}

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    ControlPlane(#[from] crate::control_plane::Error),
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    #[error("{0}")]
    Failed(String),
}

fn in_memory_config() -> ControlPlaneConfig {
    ControlPlaneConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        storage: Storage::InMemory,
        nodes: 0,
        controllers: false,
        apiserver: apiserver::Config {
            admission: apiserver::admission::AdmissionConfig::without_controllers(),
            ..apiserver::Config::default()
        },
        ..ControlPlaneConfig::default()
    }
}

pub async fn run(args: BenchArgs) -> Result<(), Error> {
    if args.which == Which::WatchClients {
        return watch_readers::child(&args.watch_url, &args.watch_rv, args.watchers).await;
    }
    let all = args.which == Which::All;
    if all || args.which == Which::Startup {
        startup(args.secure).await?;
    }
    let on_etcd = !args.etcd_servers.is_empty() || args.etcd_members > 0;
    if args.which == Which::Creates && on_etcd {
        let target = etcd::Target::new(&args.etcd_servers, args.etcd_members).await?;
        etcd::creates(&target, Duration::from_secs(args.seconds)).await?;
    } else if all || args.which == Which::Creates {
        creates::creates(
            &args.writers,
            Duration::from_secs(args.seconds),
            args.secure,
            args.audit_log.as_deref(),
            args.etcd_gateway.as_deref(),
        )
        .await?;
    }
    if all || args.which == Which::List {
        list(10_000, args.on_disk).await?;
    }
    if all || args.which == Which::Watch {
        watch::watch(
            args.watchers,
            args.write_rate,
            Duration::from_secs(args.seconds),
        )
        .await?;
    }
    if args.which == Which::Crds {
        crds::crds(&args.gateway_crds, Duration::from_secs(args.seconds)).await?;
    }
    if args.which == Which::Conns {
        conns::conns(
            args.conn_watches,
            args.stallers,
            args.uploaders,
            Duration::from_secs(args.seconds),
        )
        .await?;
    }
    if args.which == Which::Webhooks {
        webhooks::webhooks(args.webhook_creates, Duration::from_secs(120)).await?;
    }
    if args.which == Which::Job {
        job::job_bench(
            args.completions,
            args.parallelism,
            args.nodes,
            Duration::from_secs(120),
        )
        .await?;
    }
    if args.which == Which::Statefulset {
        statefulset::statefulset(
            args.set_replicas,
            args.set_nodes,
            Duration::from_millis(args.set_start_delay_ms),
            Duration::from_secs(120),
        )
        .await?;
    }
    if args.which == Which::Daemonset {
        daemonset::daemonset(args.daemonset_nodes, Duration::from_secs(120)).await?;
    }
    if args.which == Which::Service {
        service::service(args.replicas, args.nodes, Duration::from_secs(120)).await?;
    }
    if args.which == Which::Memory {
        let nodes = memory::nodes_for(args.pods, args.nodes);
        // Creating and starting the pods takes about 1 ms each in a release build; 20 ms each
        // leaves room for a debug build.
        let deadline = Duration::from_secs(120)
            + Duration::from_millis(20) * u32::try_from(args.pods).unwrap_or(u32::MAX);
        memory::memory(
            args.pods,
            nodes,
            args.in_memory,
            args.watch_history,
            deadline,
        )
        .await?;
    }
    if args.which == Which::Restart {
        restart::restart(args.stored_pods, Duration::from_secs(600)).await?;
    }
    if args.which == Which::Scale && on_etcd {
        let target = etcd::Target::new(&args.etcd_servers, args.etcd_members).await?;
        scale::scale_on(
            args.replicas,
            args.nodes,
            etcd::plane_config(&target.endpoints, args.nodes),
            "etcd",
            Duration::from_secs(120),
        )
        .await?;
    } else if let (Which::Scale, Some(kubeconfig)) = (args.which, &args.kubeconfig) {
        scale::scale_cluster(
            kubeconfig,
            args.kubectl,
            args.replicas,
            Duration::from_secs(120),
        )
        .await?;
    } else if args.which == Which::Scale {
        scale::scale(
            args.replicas,
            args.nodes,
            args.on_disk,
            args.secure,
            Duration::from_secs(120),
        )
        .await?;
    }
    Ok(())
}

/// An HTTP client acting as the admin of `plane`: with its CA and an admin client certificate
/// on a secure plane, plain otherwise.
pub(crate) fn admin_http(
    plane: &ControlPlane,
    builder: reqwest::ClientBuilder,
) -> Result<reqwest::Client, Error> {
    let users = plane.users();
    let admin = users.issue(
        crate::control_plane::ADMIN_USER,
        &[crate::control_plane::ADMIN_GROUP.to_string()],
    )?;
    http_for(&users.client_config(admin.as_ref()), builder)
}

/// An HTTP client with `cfg`'s credentials: its CAs, client certificate and bearer token.
pub(crate) fn http_for(
    cfg: &client::Config,
    builder: reqwest::ClientBuilder,
) -> Result<reqwest::Client, Error> {
    let mut b = builder;
    if let Some(ca) = &cfg.ca_pem {
        b = b.tls_built_in_root_certs(false);
        for c in reqwest::Certificate::from_pem_bundle(ca)? {
            b = b.add_root_certificate(c);
        }
    }
    if cfg.insecure_skip_verify {
        b = b.danger_accept_invalid_certs(true);
    }
    if let Some(id) = &cfg.identity_pem {
        b = b.identity(reqwest::Identity::from_pem(id)?);
    }
    if let Some(token) = &cfg.token {
        let mut headers = reqwest::header::HeaderMap::new();
        let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|e| Error::Failed(format!("bearer token: {e}")))?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
        b = b.default_headers(headers);
    }
    Ok(b.build()?)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Sandbox (in-process, in memory, controllers on, no nodes) start-up, and the binary's cold start.
async fn startup(secure: bool) -> Result<(), Error> {
    const ROUNDS: usize = 20;
    if secure {
        return secure_startup(ROUNDS).await;
    }
    let mut times = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let sandbox = crate::Sandbox::builder().in_memory().start().await?;
        times.push(t.elapsed());
        sandbox.stop().await;
    }
    times.sort();
    println!(
        "startup: Sandbox::start (in memory, controllers, 0 nodes) to ready: median {} p90 {} max {} ({ROUNDS} rounds)",
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.9)),
        ms(percentile(&times, 1.0))
    );

    let exe = std::env::current_exe().map_err(|e| Error::Failed(format!("current exe: {e}")))?;
    let mut cold = Vec::with_capacity(5);
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Error::Failed(e.to_string()))?
            .port();
        let dir = tempfile::tempdir().map_err(|e| Error::Failed(e.to_string()))?;
        let t = Instant::now();
        let mut child = tokio::process::Command::new(&exe)
            .args([
                "up",
                "--nodes",
                "0",
                "--port",
                &port.to_string(),
                "--data-dir",
            ])
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::Failed(format!("spawn: {e}")))?;
        let http = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}/readyz");
        let deadline = t + Duration::from_secs(10);
        loop {
            if let Ok(r) = http.get(&url).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            if Instant::now() > deadline {
                return Err(Error::Failed("binary did not become ready in 10 s".into()));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        cold.push(t.elapsed());
        let _ = child.kill().await;
    }
    cold.sort();
    println!(
        "startup: binary `up` (on-disk store, fresh dir) to /readyz 200: median {} max {} (5 rounds)",
        ms(percentile(&cold, 0.5)),
        ms(percentile(&cold, 1.0))
    );
    Ok(())
}

/// Secure start-up: the first with a fresh credentials directory (the CA and key generated),
/// then with that CA existing (read back, a serving certificate issued).
async fn secure_startup(rounds: usize) -> Result<(), Error> {
    let pki = tempfile::tempdir().map_err(|e| Error::Failed(e.to_string()))?;
    let sandbox = |dir: std::path::PathBuf| {
        crate::Sandbox::builder()
            .in_memory()
            .secure()
            .configure(move |c| c.apiserver.credentials_dir = Some(dir))
    };
    let t = Instant::now();
    let first = sandbox(pki.path().to_path_buf()).start().await?;
    let generated = t.elapsed();
    first.stop().await;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        let s = sandbox(pki.path().to_path_buf()).start().await?;
        times.push(t.elapsed());
        s.stop().await;
    }
    times.sort();
    println!(
        "startup (secure): Sandbox::start (in memory, controllers, 0 nodes) generating the CA {}; with the CA existing: median {} p90 {} max {} ({rounds} rounds)",
        ms(generated),
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.9)),
        ms(percentile(&times, 1.0))
    );
    Ok(())
}

/// Upper bound of operations per writer of a closed loop (the deadline ends a run long before).
const MAX_PER_WRITER: u64 = 1_000_000;

/// `writers` tasks each awaiting `op(writer, i)` for i = 0, 1, … until `load` has passed (at
/// most [`MAX_PER_WRITER`] each): how many operations succeeded and failed, and the time taken.
async fn closed_loop<F, Fut>(writers: usize, load: Duration, op: F) -> (u64, u64, Duration)
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let start = Instant::now();
    let deadline = start + load;
    let mut tasks = Vec::with_capacity(writers);
    for w in 0..writers {
        let (op, ok, failed) = (op.clone(), ok.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..MAX_PER_WRITER {
                if Instant::now() > deadline {
                    break;
                }
                let counter = if op(w, i).await { &ok } else { &failed };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    (
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        start.elapsed(),
    )
}

fn configmap(name: &str, payload: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"payload": payload}})
}

/// LIST of `n` pods (JSON, whole body received).
async fn list(n: usize, on_disk: bool) -> Result<(), Error> {
    let mut config = in_memory_config();
    // As `minik8s up` keeps them: durable, the texts compressed. Removed when the run ends.
    let dir = on_disk
        .then(tempfile::tempdir)
        .transpose()
        .map_err(|e| Error::Failed(e.to_string()))?;
    if let Some(dir) = &dir {
        config.storage = Storage::Dir(dir.path().to_path_buf());
    }
    let plane = ControlPlane::start(config).await?;
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/namespaces/default/pods", plane.url());
    let created = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..16 {
        let (http, url, created) = (http.clone(), url.clone(), created.clone());
        tasks.push(tokio::spawn(async move {
            for i in (w..n).step_by(16) {
                let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("pod-{i}"), "labels": {"app": "bench"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
                if let Ok(r) = http.post(&url).json(&pod).send().await {
                    if r.status().as_u16() == 201 {
                        created.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let created = created.load(Ordering::Relaxed) as usize;
    if created != n {
        return Err(Error::Failed(format!("created {created} of {n} pods")));
    }
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..10 {
        let t = Instant::now();
        let body = http.get(&url).send().await?.bytes().await?;
        times.push(t.elapsed());
        bytes = body.len();
    }
    times.sort();
    println!(
        "list: LIST {n} pods ({:.1} MiB JSON, {}): median {} p90 {} (10 rounds)",
        bytes as f64 / 1048576.0,
        if on_disk { "sled on disk" } else { "in memory" },
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.9))
    );
    let mut ttimes = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let _ = http
            .get(&url)
            .header(
                "Accept",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )
            .send()
            .await?
            .bytes()
            .await?;
        ttimes.push(t.elapsed());
    }
    ttimes.sort();
    println!(
        "list: LIST {n} pods as Table (kubectl get): median {}",
        ms(percentile(&ttimes, 0.5))
    );
    plane.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_from_the_sorted_samples() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 0.5), Duration::from_millis(51));
        assert_eq!(percentile(&v, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }

    /// `bench scale --kubeconfig` drives another process's cluster the way a user reaches it: a
    /// secure sandbox's kubeconfig (its CA and client certificate), scaled by the real kubectl
    /// and by the PATCH; the server's CPU and memory come from its `/metrics`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scale_drives_a_running_cluster_through_its_kubeconfig() {
        let sandbox = crate::Sandbox::builder()
            .nodes(2)
            .secure()
            .start()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let kubeconfig = sandbox.kubeconfig_path().to_path_buf();
        let config = client::Config::from_kubeconfig(&kubeconfig).unwrap_or_else(|e| panic!("{e}"));
        let http = http_for(&config, reqwest::Client::builder()).unwrap_or_else(|e| panic!("{e}"));
        let before = scale::metrics_text(&http, sandbox.url())
            .await
            .and_then(|text| scale::usage_in(&text))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(before.rss_bytes > 0);
        for kubectl in [true, false] {
            scale::scale_cluster(&kubeconfig, kubectl, 12, Duration::from_secs(60))
                .await
                .unwrap_or_else(|e| panic!("kubectl {kubectl}: {e}"));
        }
        let after = scale::metrics_text(&http, sandbox.url())
            .await
            .and_then(|text| scale::usage_in(&text))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(after.cpu_time > before.cpu_time, "{before:?} {after:?}");
        sandbox.stop().await;
    }
}
