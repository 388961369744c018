//! The client against the project's real apiserver (in process, 127.0.0.1:0, memory store):
//! informer sync of 10,000 pods, relist with tombstones after the watch history was compacted past
//! the informer's RV, resume across an apiserver restart with per-object in-order delivery (T5),
//! late-handler replay, and leader election on real Leases.

#![allow(clippy::result_large_err)] // client::Error carries a full Status by design

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use client::{
    Api, Client, Config, DeletedObject, ListParams, ListerWatcher, ObjectList,
    ResourceEventHandler, SharedIndexInformer, WatchEvent, WatchStream,
};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

async fn server(
    watch_history: usize,
    addr: Option<std::net::SocketAddr>,
    store: Arc<dyn store::Store>,
) -> apiserver::Server {
    let config = apiserver::Config {
        address: addr.unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        watch_history,
        ..Default::default()
    };
    match apiserver::start(config, store).await {
        Ok(s) => s,
        Err(e) => panic!("apiserver: {e}"),
    }
}

fn memory_store() -> Arc<dyn store::Store> {
    match store::MemoryStore::new(store::StoreConfig::default()) {
        Ok(s) => Arc::new(s),
        Err(e) => panic!("store: {e}"),
    }
}

fn client(s: &apiserver::Server) -> Client {
    match Client::new(Config::new(s.url())) {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    }
}

fn pod(name: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("default".into());
    p.spec = Some(PodSpec {
        containers: vec![Container {
            name: "c".into(),
            image: Some("busybox".into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    p
}

fn rv(p: &Pod) -> u64 {
    p.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

async fn eventually(what: &str, within: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Mirrors the state implied by the events and every RV seen per key (for T5).
#[derive(Default)]
struct Rec {
    state: Mutex<BTreeMap<String, u64>>,
    seen: Mutex<HashMap<String, Vec<u64>>>,
    tombstones: Mutex<Vec<String>>,
    initial_adds: Mutex<usize>,
}

struct H(Arc<Rec>);

impl ResourceEventHandler<Pod> for H {
    fn on_add(&self, p: &Arc<Pod>, initial: bool) {
        let k = client::meta_namespace_key(p.as_ref());
        if initial {
            *self.0.initial_adds.lock() += 1;
        }
        self.0.seen.lock().entry(k.clone()).or_default().push(rv(p));
        self.0.state.lock().insert(k, rv(p));
    }
    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        let k = client::meta_namespace_key(new.as_ref());
        if rv(old) != rv(new) {
            self.0
                .seen
                .lock()
                .entry(k.clone())
                .or_default()
                .push(rv(new));
        }
        self.0.state.lock().insert(k, rv(new));
    }
    fn on_delete(&self, d: DeletedObject<Pod>) {
        let k = d.key();
        if d.is_tombstone() {
            self.0.tombstones.lock().push(k.clone());
        }
        self.0.state.lock().remove(&k);
    }
}

async fn server_state(api: &Api<Pod>) -> BTreeMap<String, u64> {
    match api.list(&ListParams::default()).await {
        Ok(l) => l
            .items
            .iter()
            .map(|p| (client::meta_namespace_key(p), rv(p)))
            .collect(),
        Err(e) => panic!("list: {e}"),
    }
}

fn cache(inf: &SharedIndexInformer<Pod>) -> BTreeMap<String, u64> {
    inf.indexer()
        .list()
        .iter()
        .map(|p| (client::meta_namespace_key(p.as_ref()), rv(p)))
        .collect()
}

async fn converge(what: &str, inf: &SharedIndexInformer<Pod>, rec: &Rec, api: &Api<Pod>) {
    let want = server_state(api).await;
    eventually(&format!("{what}: cache"), Duration::from_secs(60), || {
        cache(inf) == want
    })
    .await;
    eventually(&format!("{what}: handler"), Duration::from_secs(60), || {
        *rec.state.lock() == want
    })
    .await;
}

fn assert_in_order(rec: &Rec) {
    for (k, rvs) in rec.seen.lock().iter() {
        assert!(
            rvs.windows(2).all(|w| w[0] < w[1]),
            "T5: {k} observed out of order: {rvs:?}"
        );
    }
}

fn run(inf: &SharedIndexInformer<Pod>) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let t = CancellationToken::new();
    let (i, t2) = (inf.clone(), t.clone());
    (t, tokio::spawn(async move { i.run(t2).await }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_syncs_10000_pods_then_follows_writes() {
    let s = server(10_000, None, memory_store()).await;
    let c = client(&s);
    let api = c.api::<Pod>(Some("default"));
    let created = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..32 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..10_000).step_by(32) {
                if let Err(e) = api.create(&pod(&format!("p{i:05}"))).await {
                    panic!("create p{i}: {e}");
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let create_time = created.elapsed();
    let inf = SharedIndexInformer::new(c.all::<Pod>(), ListParams::default(), Duration::ZERO);
    let rec = Arc::new(Rec::default());
    inf.add_event_handler(H(rec.clone()));
    let started = Instant::now();
    let (token, task) = run(&inf);
    eventually("synced", Duration::from_secs(120), || inf.has_synced()).await;
    let synced = started.elapsed();
    assert_eq!(inf.indexer().len(), 10_000);
    eventually(
        "handler saw the initial list",
        Duration::from_secs(60),
        || *rec.initial_adds.lock() == 10_000,
    )
    .await;
    eprintln!("10,000 pods: created in {create_time:?} (32 writers), informer synced in {synced:?} (debug build)");
    for i in 0..100 {
        let mut p = match api.get(&format!("p{i:05}")).await {
            Ok(p) => p,
            Err(e) => panic!("get: {e}"),
        };
        p.metadata.labels = Some(BTreeMap::from([("touched".to_string(), "yes".to_string())]));
        if let Err(e) = api.replace(&format!("p{i:05}"), &p).await {
            panic!("replace: {e}");
        }
    }
    converge("after updates", &inf, &rec, &api).await;
    assert_in_order(&rec);
    token.cancel();
    let _ = task.await;
    let _ = s.stop().await;
}

/// `Api<Pod>` whose watches can be cut and held back, to let the server's history move past the
/// informer's RV.
struct Gated {
    api: Api<Pod>,
    open: tokio::sync::watch::Sender<bool>,
    cut: Mutex<CancellationToken>,
    saw_gone: AtomicBool,
}

impl Gated {
    fn cut_and_hold(&self) {
        self.open.send_replace(false);
        let old = std::mem::replace(&mut *self.cut.lock(), CancellationToken::new());
        old.cancel();
    }
    fn release(&self) {
        self.open.send_replace(true);
    }
}

struct GatedLw(Arc<Gated>);

#[async_trait]
impl ListerWatcher<Pod> for GatedLw {
    async fn list(&self, p: &ListParams) -> client::Result<ObjectList<Pod>> {
        self.0.api.list(p).await
    }
    async fn watch(&self, p: &ListParams, rv: &str) -> client::Result<WatchStream<Pod>> {
        let mut rx = self.0.open.subscribe();
        let _ = rx.wait_for(|open| *open).await;
        let token = self.0.cut.lock().clone();
        let me = self.0.clone();
        match self.0.api.watch(p, rv).await {
            Err(e) => {
                if e.is_gone() {
                    me.saw_gone.store(true, Ordering::SeqCst);
                }
                Err(e)
            }
            Ok(s) => {
                let s = s.inspect(move |ev| {
                    if let Ok(WatchEvent::Error(st)) = ev {
                        if st.code == Some(410) {
                            me.saw_gone.store(true, Ordering::SeqCst);
                        }
                    }
                });
                Ok(WatchStream::new(s.take_until(token.cancelled_owned())))
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_after_history_compaction_delivers_tombstones() {
    let s = server(20, None, memory_store()).await;
    let c = client(&s);
    let api = c.api::<Pod>(Some("default"));
    for i in 0..5 {
        let _ = api.create(&pod(&format!("p{i}"))).await;
    }
    let (open, _) = tokio::sync::watch::channel(true);
    let gated = Arc::new(Gated {
        api: c.all::<Pod>(),
        open,
        cut: Mutex::new(CancellationToken::new()),
        saw_gone: AtomicBool::new(false),
    });
    let inf = SharedIndexInformer::new(
        GatedLw(gated.clone()),
        ListParams::default(),
        Duration::ZERO,
    );
    let rec = Arc::new(Rec::default());
    inf.add_event_handler(H(rec.clone()));
    let (token, task) = run(&inf);
    eventually("synced", Duration::from_secs(30), || inf.has_synced()).await;
    let _ = api.create(&pod("seen-by-watch")).await;
    eventually("watch delivers", Duration::from_secs(30), || {
        cache(&inf).contains_key("default/seen-by-watch")
    })
    .await;

    gated.cut_and_hold();
    // While the informer cannot watch: deletions it never sees, and enough writes to push the
    // server's watch history (20 events) past the informer's RV.
    for i in 0..3 {
        let _ = api
            .delete(
                &format!("p{i}"),
                &client::DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await;
    }
    let mut churn = match api.create(&pod("churn")).await {
        Ok(p) => p,
        Err(e) => panic!("create: {e}"),
    };
    for i in 0..40 {
        churn.metadata.labels = Some(BTreeMap::from([("i".to_string(), i.to_string())]));
        churn = match api.replace("churn", &churn).await {
            Ok(p) => p,
            Err(e) => panic!("replace: {e}"),
        };
    }
    gated.release();
    converge("after relist", &inf, &rec, &api).await;
    let mut tombs = rec.tombstones.lock().clone();
    tombs.sort();
    // Pods with a deletion grace period may linger terminating; check those actually gone.
    let gone: Vec<String> = (0..3)
        .map(|i| format!("default/p{i}"))
        .filter(|k| !cache(&inf).contains_key(k))
        .collect();
    assert!(
        !gone.is_empty(),
        "at least one pod was deleted while the watch was down"
    );
    for k in &gone {
        assert!(
            tombs.contains(k),
            "{k}: deletion inferred by the relist arrives as a tombstone: {tombs:?}"
        );
    }
    assert!(
        gated.saw_gone.load(Ordering::SeqCst),
        "the re-watch from the old RV got 410"
    );
    assert_in_order(&rec);
    token.cancel();
    let _ = task.await;
    let _ = s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_after_apiserver_restart_and_late_handler_gets_replay() {
    let store = memory_store();
    let s = server(10_000, None, store.clone()).await;
    let addr = s.addr;
    let c = client(&s);
    let api = c.api::<Pod>(Some("default"));
    for i in 0..20 {
        let _ = api.create(&pod(&format!("p{i}"))).await;
    }
    let inf = SharedIndexInformer::new(c.all::<Pod>(), ListParams::default(), Duration::ZERO);
    let rec = Arc::new(Rec::default());
    inf.add_event_handler(H(rec.clone()));
    let (token, task) = run(&inf);
    converge("initial", &inf, &rec, &api).await;

    let _ = s.stop().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = server(10_000, Some(addr), store.clone()).await;
    for i in 20..30 {
        let _ = api.create(&pod(&format!("p{i}"))).await;
    }
    for i in 0..5 {
        let _ = api
            .delete(
                &format!("p{i}"),
                &client::DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await;
    }
    converge("after restart", &inf, &rec, &api).await;
    assert_in_order(&rec);

    let late = Arc::new(Rec::default());
    let reg = inf.add_event_handler(H(late.clone()));
    let want = server_state(&api).await;
    eventually("late handler replay", Duration::from_secs(30), || {
        *late.state.lock() == want
    })
    .await;
    assert_eq!(
        *late.initial_adds.lock(),
        want.len(),
        "replayed as initial-list adds"
    );
    eventually("late handler synced", Duration::from_secs(30), || {
        reg.has_synced()
    })
    .await;
    token.cancel();
    let _ = task.await;
    let _ = s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_hands_over_on_real_leases() {
    let s = server(1000, None, memory_store()).await;
    let c = client(&s).with_max_retries(0);
    let cfg = |id: &str| {
        let mut l = client::LeaderElectionConfig::new("kube-system", "kube-controller-manager", id);
        l.lease_duration = Duration::from_secs(2);
        l.renew_deadline = Duration::from_millis(1500);
        l.retry_period = Duration::from_millis(250);
        l
    };
    let spawn = |id: &str| {
        let e = match client::LeaderElector::new(c.clone(), cfg(id)) {
            Ok(e) => Arc::new(e),
            Err(e) => panic!("{e}"),
        };
        let leading = Arc::new(AtomicBool::new(false));
        let l2 = leading.clone();
        let token = CancellationToken::new();
        let cb = client::LeaderCallbacks {
            on_started_leading: Box::new(move |t: CancellationToken| {
                async move {
                    l2.store(true, Ordering::SeqCst);
                    t.cancelled().await;
                    l2.store(false, Ordering::SeqCst);
                }
                .boxed()
            }),
            on_stopped_leading: Box::new(|| {}),
            on_new_leader: None,
        };
        let (e2, t2) = (e.clone(), token.clone());
        let task = tokio::spawn(async move { e2.run(t2, cb).await });
        (e, leading, token, task)
    };
    let (_ea, a_leading, a_token, a_task) = spawn("a");
    eventually("a leads", Duration::from_secs(15), || {
        a_leading.load(Ordering::SeqCst)
    })
    .await;
    let (eb, b_leading, b_token, b_task) = spawn("b");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!b_leading.load(Ordering::SeqCst));
    assert_eq!(eb.get_leader(), "a");
    a_token.cancel();
    let _ = a_task.await;
    eventually("b leads", Duration::from_secs(15), || {
        b_leading.load(Ordering::SeqCst)
    })
    .await;
    let leases = c.api::<k8s_openapi::api::coordination::v1::Lease>(Some("kube-system"));
    let lease = match leases.get("kube-controller-manager").await {
        Ok(l) => l,
        Err(e) => panic!("{e}"),
    };
    let spec = lease.spec.unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
    b_token.cancel();
    let _ = b_task.await;
    let _ = s.stop().await;
}
