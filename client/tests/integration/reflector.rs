//! Reflector state machine against the in-process `MemoryListerWatcher`, on paused tokio time
//! (spec informer.md §1).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use client::testing::{Call, MemoryListerWatcher};
use client::{
    Error, ListParams, ListerWatcher, ObjectList, Reflector, ReflectorStore, Result, WatchStream,
};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.namespace = Some("default".into());
    c.metadata.name = Some(name.into());
    c
}

fn rv_of(c: &ConfigMap) -> String {
    c.metadata.resource_version.clone().unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Add(String),
    Update(String),
    Delete(String),
    Replace(usize, String),
    Resync,
}

/// A store recording every call and keeping the resulting key → RV state.
#[derive(Default)]
struct Rec {
    ops: Mutex<Vec<Op>>,
    state: Mutex<BTreeMap<String, String>>,
}

fn key(c: &ConfigMap) -> String {
    client::meta_namespace_key(c)
}

impl ReflectorStore<ConfigMap> for Rec {
    fn add(&self, o: ConfigMap) {
        self.ops.lock().push(Op::Add(key(&o)));
        self.state.lock().insert(key(&o), rv_of(&o));
    }
    fn update(&self, o: ConfigMap) {
        self.ops.lock().push(Op::Update(key(&o)));
        self.state.lock().insert(key(&o), rv_of(&o));
    }
    fn delete(&self, o: ConfigMap) {
        self.ops.lock().push(Op::Delete(key(&o)));
        self.state.lock().remove(&key(&o));
    }
    fn replace(&self, list: Vec<std::sync::Arc<ConfigMap>>, rv: &str) {
        self.ops
            .lock()
            .push(Op::Replace(list.len(), rv.to_string()));
        *self.state.lock() = list.iter().map(|o| (key(o), rv_of(o))).collect();
    }
    fn resync(&self) {
        self.ops.lock().push(Op::Resync);
    }
}

/// Wraps the source: stamps every call with the (virtual) time and runs an optional hook after
/// the first LIST returns.
struct Timed {
    inner: MemoryListerWatcher<ConfigMap>,
    times: Mutex<Vec<(Instant, Call)>>,
    after_first_list: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Timed {
    fn new(inner: MemoryListerWatcher<ConfigMap>) -> Arc<Self> {
        Arc::new(Timed {
            inner,
            times: Mutex::new(Vec::new()),
            after_first_list: Mutex::new(None),
        })
    }
    fn calls(&self) -> Vec<(Instant, Call)> {
        self.times.lock().clone()
    }
    fn lists(&self) -> Vec<(Instant, Call)> {
        self.calls()
            .into_iter()
            .filter(|c| matches!(c.1, Call::List { .. }))
            .collect()
    }
    fn watches(&self) -> Vec<(Instant, Call)> {
        self.calls()
            .into_iter()
            .filter(|c| matches!(c.1, Call::Watch { .. }))
            .collect()
    }
}

#[async_trait]
impl ListerWatcher<ConfigMap> for Timed {
    async fn list(&self, p: &ListParams) -> Result<ObjectList<ConfigMap>> {
        self.times.lock().push((
            Instant::now(),
            Call::List {
                resource_version: p.resource_version.clone(),
                limit: p.limit,
                continue_token: p.continue_token.clone(),
            },
        ));
        let r = self.inner.list(p).await;
        if let Some(hook) = self.after_first_list.lock().take() {
            hook();
        }
        r
    }
    async fn watch(&self, p: &ListParams, rv: &str) -> Result<WatchStream<ConfigMap>> {
        self.times.lock().push((
            Instant::now(),
            Call::Watch {
                resource_version: rv.to_string(),
            },
        ));
        self.inner.watch(p, rv).await
    }
}

struct Running {
    store: Arc<Rec>,
    lw: Arc<Timed>,
    token: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    rv: Arc<parking_lot::RwLock<String>>,
}

fn start(
    src: &MemoryListerWatcher<ConfigMap>,
    params: ListParams,
    resync: Duration,
    should_resync: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
    hook: Option<Box<dyn FnOnce() + Send>>,
) -> Running {
    let store = Arc::new(Rec::default());
    let lw = Timed::new(src.clone());
    *lw.after_first_list.lock() = hook;
    let rv = Arc::new(parking_lot::RwLock::new(String::new()));
    let mut r = Reflector::new("test", lw.clone(), store.clone(), params, resync)
        .with_last_sync_rv(rv.clone());
    if let Some(f) = should_resync {
        r = r.with_should_resync(f);
    }
    let token = CancellationToken::new();
    let t = token.clone();
    let task = tokio::spawn(async move { r.run(t).await });
    Running {
        store,
        lw,
        token,
        task,
        rv,
    }
}

impl Running {
    async fn stop(self) {
        self.token.cancel();
        let r = tokio::time::timeout(Duration::from_secs(5), self.task).await;
        assert!(r.is_ok(), "reflector stops promptly on shutdown");
    }
}

/// Waits (virtual time; auto-advanced) for `cond`, panicking after a deadline.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn paginated_initial_list_then_watch_from_list_rv() {
    let src = MemoryListerWatcher::new();
    for i in 0..1200 {
        src.apply(cm(&format!("c{i:04}")));
    }
    let list_rv = src.resource_version().to_string();
    let r = start(&src, ListParams::default(), Duration::ZERO, None, None);
    eventually("watch started", || !r.lw.watches().is_empty()).await;
    let lists: Vec<Call> = r.lw.lists().into_iter().map(|c| c.1).collect();
    assert_eq!(lists.len(), 3, "{lists:?}");
    assert_eq!(
        lists[0],
        Call::List {
            resource_version: Some("0".into()),
            limit: Some(500),
            continue_token: None
        },
        "first list: RV 0, page size 500"
    );
    for c in &lists[1..] {
        match c {
            Call::List {
                resource_version,
                limit,
                continue_token,
            } => {
                assert_eq!(*resource_version, None, "continuation pages carry no RV");
                assert_eq!(*limit, Some(500));
                assert!(continue_token.is_some());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(r.store.ops.lock()[0], Op::Replace(1200, list_rv.clone()));
    assert_eq!(
        r.lw.watches()[0].1,
        Call::Watch {
            resource_version: list_rv.clone()
        }
    );
    assert_eq!(*r.rv.read(), list_rv);
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn list_then_watch_has_no_gap() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("before"));
    let s2 = src.clone();
    // Writes land after the LIST was served and before the WATCH is opened.
    let hook: Box<dyn FnOnce() + Send> = Box::new(move || {
        s2.apply(cm("between-1"));
        s2.apply(cm("between-2"));
        s2.delete("default/before");
    });
    let r = start(
        &src,
        ListParams::default(),
        Duration::ZERO,
        None,
        Some(hook),
    );
    eventually("converged", || *r.store.state.lock() == src_state(&src)).await;
    let ops = r.store.ops.lock().clone();
    assert_eq!(ops[0], Op::Replace(1, "2".into()));
    assert!(ops.contains(&Op::Add("default/between-1".into())));
    assert!(ops.contains(&Op::Delete("default/before".into())));
    assert_eq!(r.lw.lists().len(), 1);
    r.stop().await;
}

fn src_state(src: &MemoryListerWatcher<ConfigMap>) -> BTreeMap<String, String> {
    src.objects()
        .into_iter()
        .map(|(k, v)| (k, rv_of(&v)))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn normal_close_resumes_from_last_rv_immediately_without_relist() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("a"));
    let r = start(&src, ListParams::default(), Duration::ZERO, None, None);
    eventually("watching", || src.open_watchers() == 1).await;
    let x = src.apply(cm("x"));
    eventually("x seen", || r.store.state.lock().contains_key("default/x")).await;
    let closed_at = Instant::now();
    src.disconnect_watchers();
    src.apply(cm("y"));
    eventually("y seen", || r.store.state.lock().contains_key("default/y")).await;
    let watches = r.lw.watches();
    assert_eq!(watches.len(), 2);
    assert_eq!(
        watches[1].1,
        Call::Watch {
            resource_version: rv_of(&x)
        },
        "resume from the last event's RV"
    );
    assert!(
        watches[1].0 - closed_at < Duration::from_millis(100),
        "no backoff after a normal close"
    );
    assert_eq!(r.lw.lists().len(), 1, "no relist");
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_410_relists_at_last_rv_and_drops_vanished_objects() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("a"));
    src.apply(cm("b"));
    let r = start(&src, ListParams::default(), Duration::ZERO, None, None);
    eventually("watching", || src.open_watchers() == 1).await;
    let last = r.rv.read().clone();
    // While the watch is down, b is deleted and history compacted: re-watch gets 410.
    src.error_watchers(410, "Expired");
    src.delete("default/b");
    src.apply(cm("c"));
    src.compact();
    eventually("converged", || *r.store.state.lock() == src_state(&src)).await;
    let lists: Vec<Call> = r.lw.lists().into_iter().map(|c| c.1).collect();
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert_eq!(
        lists[1],
        Call::List {
            resource_version: Some(last),
            limit: None,
            continue_token: None
        },
        "relist at the last RV, unpaginated (not-older-than)"
    );
    assert!(!r.store.state.lock().contains_key("default/b"));
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn list_410_retries_immediately_at_most_recent() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("a"));
    src.fail_next_list(Error::Gone(Default::default()));
    let r = start(&src, ListParams::default(), Duration::ZERO, None, None);
    eventually("synced", || r.store.state.lock().len() == 1).await;
    let lists = r.lw.lists();
    assert_eq!(lists.len(), 2);
    assert_eq!(
        lists[0].1,
        Call::List {
            resource_version: Some("0".into()),
            limit: Some(500),
            continue_token: None
        }
    );
    assert_eq!(
        lists[1].1,
        Call::List {
            resource_version: Some("".into()),
            limit: Some(500),
            continue_token: None
        }
    );
    assert_eq!(lists[1].0, lists[0].0, "retried without backoff");
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn bookmark_advances_resume_rv() {
    let src = MemoryListerWatcher::new();
    let mut labelled = cm("mine");
    labelled.metadata.labels = Some(BTreeMap::from([("app".into(), "x".into())]));
    src.apply(labelled);
    let r = start(
        &src,
        ListParams::default().labels("app=x"),
        Duration::ZERO,
        None,
        None,
    );
    eventually("watching", || src.open_watchers() == 1).await;
    // Writes the watcher does not see advance the RV; a bookmark tells the reflector.
    for i in 0..5 {
        src.apply(cm(&format!("other{i}")));
    }
    let now_rv = src.resource_version().to_string();
    src.bookmark();
    eventually("bookmark applied", || *r.rv.read() == now_rv).await;
    assert_eq!(
        r.store.state.lock().len(),
        1,
        "bookmarks do not touch the store"
    );
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn failed_lists_back_off_exponentially_with_jitter() {
    let src = MemoryListerWatcher::new();
    for _ in 0..5 {
        src.fail_next_list(Error::Api {
            code: 500,
            status: Default::default(),
        });
    }
    let r = start(&src, ListParams::default(), Duration::ZERO, None, None);
    eventually("sixth list", || r.lw.lists().len() >= 6).await;
    let t: Vec<Instant> = r.lw.lists().iter().map(|c| c.0).collect();
    for (i, base) in [0.8, 1.6, 3.2, 6.4, 12.8].iter().enumerate() {
        let gap = (t[i + 1] - t[i]).as_secs_f64();
        assert!(
            gap >= *base - 1e-3 && gap < 2.0 * base + 1e-3,
            "gap {i} = {gap}, want [{base}, {})",
            2.0 * base
        );
    }
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_start_429_rewatches_after_backoff_without_relist() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("a"));
    src.fail_next_watch(Error::TooManyRequests {
        status: Default::default(),
        retry_after: None,
    });
    let r = start(&src, ListParams::default(), Duration::ZERO, None, None);
    eventually("second watch", || r.lw.watches().len() == 2).await;
    let w = r.lw.watches();
    assert!(w[1].0 - w[0].0 >= Duration::from_millis(800));
    assert_eq!(w[1].1, w[0].1, "same RV");
    assert_eq!(r.lw.lists().len(), 1);
    // Any other start error goes back to a relist.
    src.apply(cm("b"));
    eventually("b seen", || r.store.state.lock().contains_key("default/b")).await;
    src.fail_next_watch(Error::Api {
        code: 500,
        status: Default::default(),
    });
    src.disconnect_watchers();
    eventually("relisted", || r.lw.lists().len() == 2).await;
    let (w, l) = (r.lw.watches(), r.lw.lists());
    assert!(
        w.len() >= 3 && w[2].0 <= l[1].0,
        "normal close → re-watch (fails) → relist"
    );
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn very_short_watch_without_events_relists() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("a"));
    let r = start(&src, ListParams::default(), Duration::ZERO, None, None);
    eventually("watching", || src.open_watchers() == 1).await;
    let closed = Instant::now();
    src.disconnect_watchers();
    eventually("relist", || r.lw.lists().len() == 2).await;
    let lists = r.lw.lists();
    assert!(
        lists[1].0 - closed >= Duration::from_millis(800),
        "relist after backoff"
    );
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn resync_timer_calls_store_resync_when_allowed() {
    let src = MemoryListerWatcher::new();
    src.apply(cm("a"));
    let allow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let a2 = allow.clone();
    let gate: Arc<dyn Fn() -> bool + Send + Sync> =
        Arc::new(move || a2.load(std::sync::atomic::Ordering::SeqCst));
    let r = start(
        &src,
        ListParams::default(),
        Duration::from_secs(1),
        Some(gate),
        None,
    );
    eventually("watching", || src.open_watchers() == 1).await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(
        !r.store.ops.lock().contains(&Op::Resync),
        "gate closed: no resync"
    );
    allow.store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let n = r
        .store
        .ops
        .lock()
        .iter()
        .filter(|o| **o == Op::Resync)
        .count();
    assert!((2..=3).contains(&n), "one resync per period: {n}");
    assert_eq!(r.lw.lists().len(), 1, "resync never contacts the server");
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_continue_token_falls_back_to_one_full_list() {
    let src = MemoryListerWatcher::new();
    for i in 0..700 {
        src.apply(cm(&format!("c{i:04}")));
    }
    let s2 = src.clone();
    // History compacted between the first and second page: the continue token expires.
    let hook: Box<dyn FnOnce() + Send> = Box::new(move || s2.compact());
    let r = start(
        &src,
        ListParams::default(),
        Duration::ZERO,
        None,
        Some(hook),
    );
    eventually("synced", || r.store.state.lock().len() == 700).await;
    let lists: Vec<Call> = r.lw.lists().into_iter().map(|c| c.1).collect();
    assert_eq!(lists.len(), 3, "{lists:?}");
    assert!(matches!(
        &lists[1],
        Call::List {
            continue_token: Some(_),
            ..
        }
    ));
    assert_eq!(
        lists[2],
        Call::List {
            resource_version: Some("0".into()),
            limit: None,
            continue_token: None
        },
        "pager FullListIfExpired: unpaginated at the original RV"
    );
    assert_eq!(
        r.store.ops.lock()[0],
        Op::Replace(700, src.resource_version().to_string())
    );
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn paginated_first_list_keeps_relists_paginated_and_too_large_rv_relists_from_scratch() {
    let src = MemoryListerWatcher::new();
    for i in 0..600 {
        src.apply(cm(&format!("c{i:04}")));
    }
    let r = start(&src, ListParams::default(), Duration::ZERO, None, None);
    eventually("watching", || src.open_watchers() == 1).await;
    let last = r.rv.read().clone();
    // A relist after a watch 410 stays paginated because the RV=0 list was paginated.
    src.fail_next_list(Error::ResourceVersionTooLarge(Default::default()));
    src.error_watchers(410, "Expired");
    eventually("relisted", || r.lw.lists().len() >= 5).await;
    let lists: Vec<Call> = r.lw.lists().into_iter().map(|c| c.1).collect();
    assert_eq!(
        lists[2],
        Call::List {
            resource_version: Some(last),
            limit: Some(500),
            continue_token: None
        },
        "{lists:?}"
    );
    assert_eq!(
        lists[3],
        Call::List {
            resource_version: Some("".into()),
            limit: Some(500),
            continue_token: None
        },
        "too large RV is treated like 410: immediate retry at the most recent RV"
    );
    eventually("converged", || r.store.state.lock().len() == 600).await;
    r.stop().await;
}
