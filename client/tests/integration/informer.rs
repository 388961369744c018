//! SharedIndexInformer, processor and factory against the in-process source, on paused time
//! (spec informer.md §4), plus a randomized convergence test (replay with `TEST_SEED=`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::testing::MemoryListerWatcher;
use client::{
    wait_for_cache_sync, Client, Config, DeletedObject, FnHandler, HasSynced, IndexFunc,
    ListParams, ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn cm(name: &str, data: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.namespace = Some("default".into());
    c.metadata.name = Some(name.into());
    c.data = Some(BTreeMap::from([("v".to_string(), data.to_string())]));
    c
}

fn rv(c: &ConfigMap) -> u64 {
    c.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Add(String, u64, bool),
    Update(String, u64, u64),
    Delete(String, u64, bool),
}

/// Records events and mirrors the state they imply; checks per-key RV order (T5).
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Ev>>,
    state: Mutex<BTreeMap<String, u64>>,
    last_rv: Mutex<HashMap<String, u64>>,
    last_seen_all: Mutex<HashMap<String, Vec<u64>>>,
    order_violations: Mutex<Vec<String>>,
}

impl Recorder {
    fn see(&self, key: &str, r: u64) {
        let mut last = self.last_rv.lock();
        let prev = last.get(key).copied().unwrap_or(0);
        if r <= prev {
            self.order_violations
                .lock()
                .push(format!("{key}: rv {r} after {prev}"));
        }
        last.insert(key.to_string(), r);
        self.last_seen_all
            .lock()
            .entry(key.to_string())
            .or_default()
            .push(r);
    }
}

struct H(Arc<Recorder>);

impl ResourceEventHandler<ConfigMap> for H {
    fn on_add(&self, obj: &Arc<ConfigMap>, initial: bool) {
        let k = client::meta_namespace_key(obj.as_ref());
        self.0.see(&k, rv(obj));
        self.0.state.lock().insert(k.clone(), rv(obj));
        self.0.events.lock().push(Ev::Add(k, rv(obj), initial));
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let k = client::meta_namespace_key(new.as_ref());
        if rv(old) != rv(new) {
            self.0.see(&k, rv(new));
        }
        self.0.state.lock().insert(k.clone(), rv(new));
        self.0.events.lock().push(Ev::Update(k, rv(old), rv(new)));
    }
    fn on_delete(&self, obj: DeletedObject<ConfigMap>) {
        let k = obj.key();
        let r = rv(obj.object());
        {
            let mut last = self.0.last_rv.lock();
            let e = last.entry(k.clone()).or_insert(0);
            *e = (*e).max(r);
        }
        self.0.state.lock().remove(&k);
        self.0
            .events
            .lock()
            .push(Ev::Delete(k, r, obj.is_tombstone()));
    }
}

async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(900);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn source_state(src: &MemoryListerWatcher<ConfigMap>) -> BTreeMap<String, u64> {
    src.objects()
        .iter()
        .map(|(k, v)| (k.clone(), rv(v)))
        .collect()
}

fn cache_state(inf: &SharedIndexInformer<ConfigMap>) -> BTreeMap<String, u64> {
    inf.indexer()
        .list()
        .iter()
        .map(|o| (client::meta_namespace_key(o.as_ref()), rv(o)))
        .collect()
}

fn run(inf: &SharedIndexInformer<ConfigMap>) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let token = CancellationToken::new();
    let (i, t) = (inf.clone(), token.clone());
    (token, tokio::spawn(async move { i.run(t).await }))
}

/// client-go's `SetTransform`: listed and watched objects reach the cache and the handlers
/// transformed; refused once the informer started.
#[tokio::test(start_paused = true)]
async fn a_transform_applies_to_listed_and_watched_objects() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("listed", "1"));
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    inf.set_transform(|mut c: ConfigMap| {
        c.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert("transformed".into(), "yes".into());
        c
    })
    .unwrap();
    assert!(
        inf.set_transform(|c: ConfigMap| c).is_err(),
        "one transform only"
    );
    let handled = Arc::new(Mutex::new(Vec::new()));
    let h = handled.clone();
    inf.add_event_handler(FnHandler::new().on_add(move |o: &Arc<ConfigMap>, _| {
        h.lock().push(o.metadata.labels.clone().unwrap_or_default());
    }));
    let (token, task) = run(&inf);
    assert!(wait_for_cache_sync(&[&inf], &token).await);
    src.apply(cm("watched", "2"));
    eventually("both handled", || handled.lock().len() == 2).await;
    let transformed = |c: &ConfigMap| {
        c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("transformed"))
            == Some(&"yes".to_string())
    };
    for key in ["default/listed", "default/watched"] {
        let cached = inf.indexer().get_by_key(key).unwrap();
        assert!(transformed(&cached), "{key} cached as transformed");
    }
    assert!(handled
        .lock()
        .iter()
        .all(|l| l.get("transformed").is_some()));
    let err = inf.set_transform(|c: ConfigMap| c).unwrap_err();
    assert_eq!(err.to_string(), "informer has already started");
    token.cancel();
    let _ = task.await;
}

#[tokio::test(start_paused = true)]
async fn cache_is_updated_before_handlers_run() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("a", "1"));
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let lister = inf.lister();
    let violations = Arc::new(Mutex::new(0usize));
    let (v1, v2) = (violations.clone(), violations.clone());
    let (l1, l2) = (lister.clone(), lister.clone());
    let seen = Arc::new(Mutex::new(0usize));
    let s2 = seen.clone();
    inf.add_event_handler(
        FnHandler::new()
            .on_add(move |o: &Arc<ConfigMap>, _| {
                let k = client::meta_namespace_key(o.as_ref());
                if l1.get(&k).map(|c| rv(&c)).unwrap_or(0) < rv(o) {
                    *v1.lock() += 1;
                }
                *s2.lock() += 1;
            })
            .on_update(move |_, n: &Arc<ConfigMap>| {
                let k = client::meta_namespace_key(n.as_ref());
                if l2.get(&k).map(|c| rv(&c)).unwrap_or(0) < rv(n) {
                    *v2.lock() += 1;
                }
            }),
    );
    let (token, task) = run(&inf);
    let none: [&dyn HasSynced; 0] = [];
    assert!(wait_for_cache_sync(&none, &token).await);
    assert!(wait_for_cache_sync(&[&inf], &token).await);
    assert!(!inf.last_sync_resource_version().is_empty());
    for i in 0..20 {
        src.apply(cm(&format!("n{i}"), "x"));
        src.apply(cm("a", &i.to_string()));
    }
    eventually("all added", || *seen.lock() == 21).await;
    eventually("converged", || cache_state(&inf) == source_state(&src)).await;
    assert_eq!(
        *violations.lock(),
        0,
        "a handler saw an object the cache did not have yet"
    );
    token.cancel();
    let _ = task.await;
    assert!(inf.is_stopped());
}

#[tokio::test(start_paused = true)]
async fn late_handler_gets_existing_objects_replayed_then_live_events() {
    let src = MemoryListerWatcher::new();
    for i in 0..5 {
        src.apply(cm(&format!("c{i}"), "x"));
    }
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let (token, task) = run(&inf);
    eventually("synced", || inf.has_synced()).await;
    let rec = Arc::new(Recorder::default());
    let reg = inf.add_event_handler(H(rec.clone()));
    eventually("replayed", || rec.events.lock().len() == 5).await;
    assert!(
        rec.events
            .lock()
            .iter()
            .all(|e| matches!(e, Ev::Add(_, _, true))),
        "replay = initial-list adds"
    );
    eventually("handler synced", || reg.has_synced()).await;
    src.apply(cm("new", "y"));
    eventually("live add", || rec.events.lock().len() == 6).await;
    assert!(matches!(rec.events.lock()[5], Ev::Add(ref k, _, false) if k == "default/new"));
    assert!(inf.remove_event_handler(&reg));
    token.cancel();
    let _ = task.await;
}

#[tokio::test(start_paused = true)]
async fn relist_after_410_delivers_tombstones_and_only_real_changes() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("same", "1"));
    src.apply(cm("changed", "1"));
    src.apply(cm("gone", "1"));
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let rec = Arc::new(Recorder::default());
    inf.add_event_handler(H(rec.clone()));
    let (token, task) = run(&inf);
    eventually("synced", || {
        inf.has_synced() && rec.events.lock().len() == 3
    })
    .await;
    assert!(rec
        .events
        .lock()
        .iter()
        .all(|e| matches!(e, Ev::Add(_, _, true))));
    // Watch cut; meanwhile one object changes, one is deleted, history is compacted.
    src.disconnect_watchers();
    src.apply(cm("changed", "2"));
    src.delete("default/gone");
    src.compact();
    eventually("converged", || cache_state(&inf) == source_state(&src)).await;
    eventually("handler converged", || {
        *rec.state.lock() == source_state(&src)
    })
    .await;
    let evs = rec.events.lock()[3..].to_vec();
    assert!(
        evs.iter()
            .any(|e| matches!(e, Ev::Delete(k, 4, true) if k == "default/gone")),
        "tombstone with last known state: {evs:?}"
    );
    assert!(
        evs.iter()
            .any(|e| matches!(e, Ev::Update(k, 3, 5) if k == "default/changed")),
        "{evs:?}"
    );
    assert!(
        !evs.iter()
            .any(|e| matches!(e, Ev::Update(k, ..) if k == "default/same")),
        "unchanged object is a sync: not delivered to a non-resyncing handler: {evs:?}"
    );
    token.cancel();
    let _ = task.await;
}

#[tokio::test(start_paused = true)]
async fn per_handler_resync_periods() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("a", "1"));
    // Informer default 30 s; a 2 s handler lowers the check period before start.
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::from_secs(30));
    let fast = Arc::new(Recorder::default());
    let none = Arc::new(Recorder::default());
    let default = Arc::new(Recorder::default());
    inf.add_event_handler_with_resync(H(fast.clone()), Duration::from_secs(2));
    inf.add_event_handler_with_resync(H(none.clone()), Duration::ZERO);
    inf.add_event_handler(H(default.clone()));
    let (token, task) = run(&inf);
    eventually("synced", || inf.has_synced()).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let syncs = |r: &Recorder| {
        r.events
            .lock()
            .iter()
            .filter(|e| matches!(e, Ev::Update(_, a, b) if a == b))
            .count()
    };
    let n = syncs(&fast);
    assert!((2..=4).contains(&n), "resync every ~2 s: {n}");
    assert_eq!(
        syncs(&none),
        0,
        "a handler without resync never gets sync updates"
    );
    assert_eq!(syncs(&default), 0, "30 s default not due yet");
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert!(syncs(&default) >= 1, "default handler resyncs at 30 s");
    // Never-resync semantics when the informer itself has no resync period (client-go
    // determineResyncPeriod): a handler's period is ignored.
    let inf0 = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let ignored = Arc::new(Recorder::default());
    inf0.add_event_handler_with_resync(H(ignored.clone()), Duration::from_secs(2));
    let (t0, task0) = run(&inf0);
    eventually("synced", || inf0.has_synced()).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(syncs(&ignored), 0);
    t0.cancel();
    let _ = task0.await;
    assert_eq!(
        src.calls()
            .iter()
            .filter(|c| matches!(c, client::testing::Call::List { .. }))
            .count(),
        2,
        "one list per informer: resync never relists"
    );
    token.cancel();
    let _ = task.await;
}

#[tokio::test(start_paused = true)]
async fn custom_indexer_and_label_lister() {
    let src = MemoryListerWatcher::new();
    let mut a = cm("a", "1");
    a.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into())]));
    src.apply(a);
    src.apply(cm("b", "2"));
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let by_data: IndexFunc<ConfigMap> =
        Arc::new(|c: &ConfigMap| c.data.iter().flat_map(|d| d.values().cloned()).collect());
    assert!(inf
        .add_indexers(HashMap::from([("data".to_string(), by_data)]))
        .is_ok());
    let (token, task) = run(&inf);
    eventually("synced", || inf.has_synced()).await;
    assert_eq!(inf.indexer().by_index("data", "2").len(), 1);
    assert_eq!(
        inf.indexer()
            .by_index(client::NAMESPACE_INDEX, "default")
            .len(),
        2
    );
    let web = Selector::parse("app=web").unwrap_or_else(|_| Selector::nothing());
    assert_eq!(inf.lister().namespace("default").list(&web).len(), 1);
    assert!(inf.lister().namespace("default").get("b").is_some());
    token.cancel();
    let _ = task.await;
    assert!(
        inf.add_indexers(HashMap::new()).is_err(),
        "stopped informer"
    );
}

#[tokio::test]
async fn factory_shares_one_informer_per_type_and_params() {
    let client = Client::new(Config::new("http://127.0.0.1:9")).map_err(|e| e.to_string());
    let Ok(client) = client else {
        panic!("client: {client:?}")
    };
    let f = SharedInformerFactory::new(client, Duration::ZERO);
    let a = f.informer::<Pod>();
    let b = f.informer::<Pod>();
    let idx: IndexFunc<Pod> = Arc::new(|_p: &Pod| vec![]);
    assert!(a
        .add_indexers(HashMap::from([("x".to_string(), idx.clone())]))
        .is_ok());
    assert!(
        b.add_indexers(HashMap::from([("x".to_string(), idx.clone())]))
            .is_err(),
        "same instance"
    );
    let c = f.informer_for::<Pod>(ListParams::default().fields("spec.nodeName=n1"));
    assert!(
        c.add_indexers(HashMap::from([("x".to_string(), idx)]))
            .is_ok(),
        "different params → different informer"
    );
    let _cm = f.informer::<ConfigMap>();
    assert!(!a.is_started());
}

/// T5 + convergence: under random writes, disconnects, compactions and 410s the informer's cache
/// and every handler's view converge to the source, and each handler sees per-object RVs in order.
#[tokio::test(start_paused = true)]
async fn randomized_informer_converges_to_source() {
    let base: u64 = std::env::var("TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    let rounds = if std::env::var("TEST_SEED").is_ok() {
        1
    } else {
        3
    };
    for round in 0..rounds {
        let seed = base.wrapping_add(round);
        eprintln!("randomized_informer_converges_to_source: TEST_SEED={seed}");
        one_random_run(seed).await;
    }
}

async fn one_random_run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut written = std::collections::HashSet::new();
    let src = MemoryListerWatcher::new();
    for i in 0..20 {
        let o = src.apply(cm(&format!("k{i}"), "0"));
        written.insert((client::meta_namespace_key(&o), rv(&o)));
    }
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let early = Arc::new(Recorder::default());
    inf.add_event_handler(H(early.clone()));
    let (token, task) = run(&inf);
    let late = Arc::new(Recorder::default());
    let late_at = rng.gen_range(100..1500);
    let mut injected = 0;
    for step in 0..2000 {
        if step == late_at {
            inf.add_event_handler(H(late.clone()));
        }
        let name = format!("k{}", rng.gen_range(0..60));
        match rng.gen_range(0..100) {
            0..=44 => {
                let o = src.apply(cm(&name, &step.to_string()));
                written.insert((client::meta_namespace_key(&o), rv(&o)));
            }
            45..=79 => {
                src.delete(&format!("default/{name}"));
            }
            80..=81 => src.disconnect_watchers(),
            82 => {
                src.error_watchers(410, "Expired");
                src.compact();
            }
            83 => src.compact(),
            84..=88 => src.bookmark(),
            // Queued failures are consumed by later calls; cap them so backoff stays bounded.
            89 if injected < 4 => {
                injected += 1;
                src.fail_next_list(client::Error::Api {
                    code: 500,
                    status: Default::default(),
                })
            }
            90 if injected < 4 => {
                injected += 1;
                src.fail_next_watch(client::Error::Api {
                    code: 503,
                    status: Default::default(),
                })
            }
            _ => tokio::time::sleep(Duration::from_millis(rng.gen_range(0..500))).await,
        }
        if rng.gen_bool(0.5) {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(0..50))).await;
        }
    }
    if late_at >= 2000 {
        inf.add_event_handler(H(late.clone()));
    }
    // T5: every state a handler observed is a state the source actually had, in order.
    for r in [&early, &late] {
        for (k, rvs) in r.last_seen_all.lock().iter() {
            for v in rvs {
                assert!(
                    written.contains(&(k.clone(), *v)),
                    "seed {seed}: {k}@{v} was never written"
                );
            }
        }
    }
    let want = source_state(&src);
    let deadline = Instant::now() + Duration::from_secs(900);
    while cache_state(&inf) != want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if cache_state(&inf) != want {
        let got = cache_state(&inf);
        let diff: Vec<String> = want
            .iter()
            .filter(|(k, v)| got.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k}: want {v} got {:?}", got.get(k)))
            .chain(
                got.iter()
                    .filter(|(k, _)| !want.contains_key(*k))
                    .map(|(k, v)| format!("{k}: extra {v}")),
            )
            .collect();
        panic!(
            "seed {seed}: cache did not converge; last rv {} source rv {}; diff {diff:?}; calls tail {:?}",
            inf.last_sync_resource_version(),
            src.resource_version(),
            src.calls().iter().rev().take(6).collect::<Vec<_>>()
        );
    }
    eventually(&format!("early handler converged (seed {seed})"), || {
        *early.state.lock() == want
    })
    .await;
    eventually(&format!("late handler converged (seed {seed})"), || {
        *late.state.lock() == want
    })
    .await;
    let lists = src
        .calls()
        .iter()
        .filter(|c| matches!(c, client::testing::Call::List { .. }))
        .count();
    let tombstones = early
        .events
        .lock()
        .iter()
        .filter(|e| matches!(e, Ev::Delete(_, _, true)))
        .count();
    eprintln!(
        "seed {seed}: {lists} lists, {tombstones} tombstones, {} events",
        early.events.lock().len()
    );
    assert!(lists >= 2, "the run must exercise relists");
    assert!(
        early.order_violations.lock().is_empty(),
        "seed {seed}: {:?}",
        early.order_violations.lock()
    );
    assert!(
        late.order_violations.lock().is_empty(),
        "seed {seed}: {:?}",
        late.order_violations.lock()
    );
    token.cancel();
    let _ = task.await;
}

/// A blocked handler neither blocks the informer nor other handlers (growing per-listener
/// buffer), and still receives everything in order once it resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_handler_does_not_block_others_and_keeps_order() {
    let src = MemoryListerWatcher::new();
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let slow_seen = Arc::new(Mutex::new(Vec::new()));
    let fast_seen = Arc::new(Mutex::new(Vec::new()));
    let (s2, f2) = (slow_seen.clone(), fast_seen.clone());
    inf.add_event_handler(FnHandler::new().on_add(move |o: &Arc<ConfigMap>, _| {
        // Blocks this listener's task (on its own worker thread) until released.
        if s2.lock().is_empty() {
            let _ = release_rx.lock().recv_timeout(Duration::from_secs(20));
        }
        s2.lock().push(rv(o));
    }));
    inf.add_event_handler(
        FnHandler::new().on_add(move |o: &Arc<ConfigMap>, _| f2.lock().push(rv(o))),
    );
    let (token, task) = run(&inf);
    for i in 0..2000 {
        src.apply(cm(&format!("c{i}"), "x"));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while fast_seen.lock().len() < 2000 {
        assert!(
            std::time::Instant::now() < deadline,
            "fast handler starved: {}",
            fast_seen.lock().len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(slow_seen.lock().len() <= 1, "slow handler still blocked");
    assert_eq!(cache_state(&inf).len(), 2000, "the cache kept up too");
    let _ = release_tx.send(());
    while slow_seen.lock().len() < 2000 {
        assert!(
            std::time::Instant::now() < deadline,
            "slow handler did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Each handler gets notifications in distribution order: the same sequence for both.
    let (slow, fast) = (slow_seen.lock().clone(), fast_seen.lock().clone());
    assert_eq!(slow, fast, "per-handler order preserved");
    token.cancel();
    let _ = task.await;
}

#[tokio::test(start_paused = true)]
async fn panicking_handler_skips_the_item_and_keeps_running() {
    let src = MemoryListerWatcher::new();
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    inf.add_event_handler(FnHandler::new().on_add(move |o: &Arc<ConfigMap>, _| {
        if o.metadata.name.as_deref() == Some("bad") {
            panic!("handler bug");
        }
        s2.lock().push(o.metadata.name.clone().unwrap_or_default());
    }));
    let (token, task) = run(&inf);
    eventually("synced", || inf.has_synced()).await;
    src.apply(cm("bad", "x"));
    src.apply(cm("good", "x"));
    eventually("later event delivered", || {
        seen.lock().contains(&"good".to_string())
    })
    .await;
    assert_eq!(*seen.lock(), vec!["good".to_string()]);
    token.cancel();
    let _ = task.await;
}

#[tokio::test(start_paused = true)]
async fn filtering_handler_turns_crossings_into_add_and_delete() {
    let src = MemoryListerWatcher::new();
    let inf = SharedIndexInformer::new(src.clone(), ListParams::default(), Duration::ZERO);
    let rec = Arc::new(Recorder::default());
    inf.add_event_handler(client::FilteringHandler {
        filter: Box::new(|c: &ConfigMap| {
            c.data.as_ref().and_then(|d| d.get("v")).map(String::as_str) == Some("in")
        }),
        handler: H(rec.clone()),
    });
    let (token, task) = run(&inf);
    eventually("synced", || inf.has_synced()).await;
    src.apply(cm("a", "out"));
    src.apply(cm("a", "in")); // crosses in → add
    src.apply(cm("a", "in")); // stays in → update
    src.apply(cm("a", "out")); // crosses out → delete
    src.apply(cm("b", "out"));
    src.delete("default/b"); // never in → nothing
    eventually("events", || rec.events.lock().len() == 3).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let evs = rec.events.lock().clone();
    assert!(
        matches!(&evs[0], Ev::Add(k, 3, false) if k == "default/a"),
        "{evs:?}"
    );
    assert!(
        matches!(&evs[1], Ev::Update(k, 3, 4) if k == "default/a"),
        "{evs:?}"
    );
    assert!(
        matches!(&evs[2], Ev::Delete(k, 4, false) if k == "default/a"),
        "{evs:?}"
    );
    assert_eq!(evs.len(), 3);
    token.cancel();
    let _ = task.await;
}
