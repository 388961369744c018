//! Benchmark: a rolling update of an N-replica Deployment (maxSurge 25 %, maxUnavailable 25 %) on M
//! fake nodes, in process: the apiserver over a memory store on 127.0.0.1:0, the controller manager
//! (deployment, replica-set, scheduler, GC, node lifecycle) over HTTP, and `kubelet-fake` nodes
//! driving pods to Running/Ready (default lifecycle: start 100–300 ms, terminate 100–200 ms).
//!
//! `cargo run --release -p controller --example rollout_bench -- [N] [M]` (defaults 1000, 20; a
//! node holds 110 pods, so M must give room for `N + maxSurge` pods).
//!
//! It creates the Deployment, waits until it is rolled out, then changes the image and measures
//! the time until (a) the Deployment status is complete (observedGeneration current, replicas =
//! updatedReplicas = availableReplicas = N), (b) the old RS is at 0 (spec and status), (c) no
//! pod of the old template is left at all (terminated pods deleted by their kubelet). A pod
//! informer sees every pod change in order and records the most live pods (not terminating) and
//! the fewest Ready live pods during the update: they must stay within `N + maxSurge` and
//! `N - maxUnavailable`. A one-second timeline, milestones and the apiserver's write counts (from
//! its `/metrics`) show where the time goes. Every wait is bounded (600 s).
//!
//! Measured 2026-12-03, release build, 2 shared cores (load 2.8–3.4): update complete in 4.3–4.9 s
//! on 20 nodes and 3.8 s on 100 nodes; max 1,247 live pods, min 750 Ready; ~6,500 API writes during
//! the update, 97 % of them pod churn (details in BENCHMARKS.md).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{
    Client, Config, DeletedObject, HasSynced, ListParams, Patch, ResourceEventHandler,
    SharedInformerFactory,
};
use controller::{ControllerManagerConfig, EnabledControllers};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, ReplicaSet, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubelet_fake::{FakeKubelets, KubeletConfig};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

const NAME: &str = "bench";
const NS: &str = "default";
/// Bound of every wait.
const LIMIT: Duration = Duration::from_secs(600);

/// What one pod contributes to the counts.
#[derive(Clone, Default, PartialEq, Eq)]
struct Contribution {
    hash: String,
    live: bool,
    ready: bool,
}

fn contribution(p: &Pod) -> Contribution {
    let terminal = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
    let live = p.metadata.deletion_timestamp.is_none() && !terminal;
    let ready = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    Contribution {
        hash: p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-hash"))
            .cloned()
            .unwrap_or_default(),
        live,
        ready: live && ready,
    }
}

#[derive(Default)]
struct Counts {
    by_uid: HashMap<String, Contribution>,
    /// Per template hash: (pod objects, live, ready).
    by_hash: HashMap<String, (i64, i64, i64)>,
    live: i64,
    ready: i64,
}

impl Counts {
    fn apply(&mut self, c: &Contribution, sign: i64) {
        let e = self.by_hash.entry(c.hash.clone()).or_default();
        e.0 += sign;
        e.1 += sign * i64::from(c.live);
        e.2 += sign * i64::from(c.ready);
        self.live += sign * i64::from(c.live);
        self.ready += sign * i64::from(c.ready);
    }
}

/// Pod informer handler: exact counts at every resourceVersion the watch delivers.
struct Observer {
    counts: Mutex<Counts>,
    measuring: AtomicBool,
    max_live: AtomicI64,
    min_ready: AtomicI64,
}

impl Observer {
    fn set(&self, p: &Pod) {
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let c = contribution(p);
        let mut counts = self.counts.lock();
        if let Some(old) = counts.by_uid.insert(uid, c.clone()) {
            counts.apply(&old, -1);
        }
        counts.apply(&c, 1);
        self.record(&counts);
    }

    fn record(&self, counts: &Counts) {
        if self.measuring.load(Ordering::Relaxed) {
            self.max_live.fetch_max(counts.live, Ordering::Relaxed);
            self.min_ready.fetch_min(counts.ready, Ordering::Relaxed);
        }
    }

    /// (pod objects, live, ready) of template `hash`, and (live, ready) overall.
    fn of(&self, hash: &str) -> ((i64, i64, i64), (i64, i64)) {
        let c = self.counts.lock();
        (
            c.by_hash.get(hash).copied().unwrap_or_default(),
            (c.live, c.ready),
        )
    }

    /// (pod objects, live, ready) of every template but `hash`.
    fn others(&self, hash: &str) -> (i64, i64, i64) {
        let c = self.counts.lock();
        c.by_hash
            .iter()
            .filter(|(h, _)| h.as_str() != hash)
            .fold((0, 0, 0), |a, (_, v)| (a.0 + v.0, a.1 + v.1, a.2 + v.2))
    }
}

impl ResourceEventHandler<Pod> for Observer {
    fn on_add(&self, obj: &Arc<Pod>, _in_initial_list: bool) {
        self.set(obj);
    }

    fn on_update(&self, _old: &Arc<Pod>, new: &Arc<Pod>) {
        self.set(new);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        let uid = obj.object().metadata.uid.clone().unwrap_or_default();
        let mut counts = self.counts.lock();
        if let Some(old) = counts.by_uid.remove(&uid) {
            counts.apply(&old, -1);
        }
        self.record(&counts);
    }
}

fn deployment(replicas: i32, image: &str) -> Deployment {
    let labels: BTreeMap<String, String> = [("app".to_string(), NAME.to_string())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                match_expressions: None,
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::String("25%".into())),
                    max_unavailable: Some(IntOrString::String("25%".into())),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some(image.into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// Deployment status complete for `n` replicas at the current generation.
fn complete(d: &Deployment, n: i32) -> bool {
    let gen = d.metadata.generation;
    d.status.as_ref().is_some_and(|s| {
        s.observed_generation == gen
            && s.replicas == Some(n)
            && s.updated_replicas == Some(n)
            && s.available_replicas == Some(n)
    })
}

fn hash_of(rs: &ReplicaSet) -> String {
    rs.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"))
        .cloned()
        .unwrap_or_default()
}

/// (spec.replicas, status.replicas, readyReplicas, availableReplicas) of an RS.
fn rs_counts(rs: Option<&ReplicaSet>) -> (i32, i32, i32, i32) {
    let Some(rs) = rs else {
        return (0, 0, 0, 0);
    };
    let spec = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let st = rs.status.clone().unwrap_or_default();
    (
        spec,
        st.replicas,
        st.ready_replicas.unwrap_or(0),
        st.available_replicas.unwrap_or(0),
    )
}

/// Write requests the apiserver served, by "VERB resource" (and code, if not 2xx): (count, seconds
/// spent in the server; the time is not split by code),
/// from its `/metrics` (a plain HTTP/1.1 GET on the loopback listener).
async fn write_requests(url: &str) -> BTreeMap<String, (u64, f64)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut out = BTreeMap::new();
    let Some(addr) = url.strip_prefix("http://") else {
        return out;
    };
    let fetch = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await.ok()?;
        let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        conn.write_all(req.as_bytes()).await.ok()?;
        let mut body = String::new();
        conn.read_to_string(&mut body).await.ok()?;
        Some(body)
    };
    let Ok(Some(body)) = tokio::time::timeout(Duration::from_secs(5), fetch).await else {
        return out;
    };
    let label = |line: &str, k: &str| -> String {
        line.split(&format!("{k}=\"")[..])
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_default()
            .to_string()
    };
    for line in body.lines() {
        let count = line.starts_with("apiserver_request_total{");
        let sum = line.starts_with("apiserver_request_duration_seconds_sum{");
        if !count && !sum {
            continue;
        }
        let verb = label(line, "verb");
        if matches!(verb.as_str(), "GET" | "LIST" | "WATCH") {
            continue;
        }
        // Counts by code: a non-2xx code is its own entry ("PUT pods/status 409").
        let code = label(line, "code");
        let key = if count && !code.starts_with('2') {
            format!("{verb} {} {code}", label(line, "resource"))
        } else {
            format!("{verb} {}", label(line, "resource"))
        };
        let v: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let e = out.entry(key).or_insert((0, 0.0));
        if count {
            e.0 += v as u64;
        } else {
            e.1 += v;
        }
    }
    out
}

async fn wait(what: &str, start: Instant, mut f: impl AsyncFnMut() -> bool) -> Option<Duration> {
    loop {
        if f().await {
            return Some(start.elapsed());
        }
        if start.elapsed() > LIMIT {
            println!("{what}: not reached within {LIMIT:?}");
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(
        || "not reached".into(),
        |d| format!("{:.2} s", d.as_secs_f64()),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let args: Vec<String> = std::env::args().collect();
    let n: i32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let m: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let surge = (n + 3) / 4;
    let unavailable = n / 4;

    let config = apiserver::Config {
        address: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    let store = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
    let server = apiserver::start(config, Arc::new(store)).await.unwrap();
    let client = Client::new(Config::new(server.url())).unwrap();
    let shutdown = CancellationToken::new();

    let kcfg = KubeletConfig {
        nodes: m,
        ..Default::default()
    };
    let kubelets = FakeKubelets::start(client.clone(), kcfg, shutdown.clone())
        .await
        .unwrap();
    let cfg = ControllerManagerConfig {
        controllers: EnabledControllers::all(),
        scheduled_events: false,
        ..Default::default()
    };
    let mgr = tokio::spawn(controller::run(client.clone(), cfg, shutdown.clone()));

    let observer = Arc::new(Observer {
        counts: Mutex::new(Counts::default()),
        measuring: AtomicBool::new(false),
        max_live: AtomicI64::new(0),
        min_ready: AtomicI64::new(i64::MAX),
    });
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let reg = factory
        .informer::<Pod>()
        .add_event_handler(observer.clone());
    factory.start(shutdown.clone());
    assert!(client::wait_for_cache_sync(&[&reg as &dyn HasSynced], &shutdown).await);

    let deployments = client.api::<Deployment>(Some(NS));
    let rss = client.api::<ReplicaSet>(Some(NS));
    let t0 = Instant::now();
    deployments.create(&deployment(n, "nginx:1")).await.unwrap();
    let created = wait("initial rollout", t0, async || {
        deployments.get(NAME).await.is_ok_and(|d| complete(&d, n))
    })
    .await;
    println!(
        "{n} replicas on {m} nodes: created → rolled out (all available) in {}",
        secs(created)
    );
    let old_hash = rss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .first()
        .map(hash_of)
        .unwrap_or_default();
    let usage0 = kubelet_fake::bench::process_usage();
    let writes0 = write_requests(&server.url()).await;

    // The update.
    observer.measuring.store(true, Ordering::Relaxed);
    let t1 = Instant::now();
    deployments
        .patch(
            NAME,
            &Patch::Merge(
                serde_json::json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "c", "image": "nginx:2"}
                ]}}}}),
            ),
        )
        .await
        .unwrap();

    // Timeline: once a second, until (c) or the limit.
    let done = Arc::new(AtomicBool::new(false));
    let timeline = {
        let (rss, obs, done, old_hash) = (
            rss.clone(),
            observer.clone(),
            done.clone(),
            old_hash.clone(),
        );
        let deployments = deployments.clone();
        tokio::spawn(async move {
            println!(
                "   t  | new RS spec/st/ready/avail | old RS spec/st/ready/avail | live ready | d.status upd/avail"
            );
            while !done.load(Ordering::Relaxed) && t1.elapsed() < LIMIT {
                let list = rss.list(&ListParams::default()).await.ok();
                let items = list.map(|l| l.items).unwrap_or_default();
                let old = items.iter().find(|r| hash_of(r) == old_hash);
                let new = items.iter().find(|r| hash_of(r) != old_hash);
                let (_, (live, ready)) = obs.of(&old_hash);
                let st = deployments
                    .get(NAME)
                    .await
                    .ok()
                    .and_then(|d| d.status)
                    .unwrap_or_default();
                let f = |c: (i32, i32, i32, i32)| {
                    format!("{:>4}/{:>4}/{:>4}/{:>4}", c.0, c.1, c.2, c.3)
                };
                println!(
                    "{:>5.1} | {}        | {}        | {live:>4} {ready:>5} | {}/{}",
                    t1.elapsed().as_secs_f64(),
                    f(rs_counts(new)),
                    f(rs_counts(old)),
                    st.updated_replicas.unwrap_or(0),
                    st.available_replicas.unwrap_or(0),
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    let first_new = wait("first new pod", t1, async || {
        observer.others(&old_hash).0 > 0
    });
    let new_created = wait("all new pods created", t1, async || {
        observer.others(&old_hash).1 >= i64::from(n)
    });
    let new_ready = wait("all new pods Ready", t1, async || {
        observer.others(&old_hash).2 >= i64::from(n)
    });
    let status = wait("deployment status complete", t1, async || {
        deployments.get(NAME).await.is_ok_and(|d| complete(&d, n))
    });
    let old_zero = wait("old RS at 0", t1, async || {
        rss.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items
                .iter()
                .filter(|r| hash_of(r) == old_hash)
                .all(|r| rs_counts(Some(r)).0 == 0 && rs_counts(Some(r)).1 == 0)
        })
    });
    let no_old_live = wait("no live old pod", t1, async || {
        observer.of(&old_hash).0 .1 == 0
    });
    let no_old_pods = wait("no old pod object", t1, async || {
        observer.of(&old_hash).0 .0 == 0
    });
    let (first_new, new_created, new_ready, status, old_zero, no_old_live, no_old_pods) = tokio::join!(
        first_new,
        new_created,
        new_ready,
        status,
        old_zero,
        no_old_live,
        no_old_pods
    );
    observer.measuring.store(false, Ordering::Relaxed);
    done.store(true, Ordering::Relaxed);
    let _ = timeline.await;
    let usage1 = kubelet_fake::bench::process_usage();
    let writes1 = write_requests(&server.url()).await;

    let max_live = observer.max_live.load(Ordering::Relaxed);
    let min_ready = observer.min_ready.load(Ordering::Relaxed);
    let ok = |b: bool| if b { "ok" } else { "VIOLATED" };
    println!("image update of {n} replicas (maxSurge {surge}, maxUnavailable {unavailable}):");
    println!(
        "  first new pod after {}; all {n} new pods created after {}, all Ready after {}",
        secs(first_new),
        secs(new_created),
        secs(new_ready)
    );
    println!("  (a) Deployment status complete after {}", secs(status));
    println!("  (b) old RS spec and status at 0 after {}", secs(old_zero));
    println!(
        "  (c) no live old pod after {}; no old pod object at all after {}",
        secs(no_old_live),
        secs(no_old_pods)
    );
    println!(
        "  max live pods {max_live} (bound {}: {}), min Ready live pods {min_ready} (bound {}: {})",
        n + surge,
        ok(max_live <= i64::from(n + surge)),
        n - unavailable,
        ok(min_ready >= i64::from(n - unavailable)),
    );
    if let (Some(a), Some(b)) = (usage0, usage1) {
        println!(
            "  process CPU during the update {:.1} s; RSS {} MiB",
            (b.cpu_time.saturating_sub(a.cpu_time)).as_secs_f64(),
            b.rss_bytes >> 20
        );
    }
    let mut total = 0;
    let mut line = String::new();
    for (k, (n1, s1)) in &writes1 {
        let (n0, s0) = writes0.get(k).copied().unwrap_or((0, 0.0));
        if n1 > &n0 {
            total += n1 - n0;
            line.push_str(&format!(" {k} {} ({:.1} s);", n1 - n0, s1 - s0));
        }
    }
    println!("  apiserver writes during the update: {total} (server time):{line}");
    let km = kubelets.metrics();
    println!("  kubelets: {km:?}");

    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(15), mgr).await;
    drop(kubelets);
    let _ = server.stop().await;
}
