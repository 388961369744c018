//! The store contract suite, written once and generic over [`Store`]: every back end runs it
//! (`store/tests/contract.rs` runs it for [`crate::MemoryStore`] and [`crate::SledStore`]; a future etcd
//! back end calls [`run_all`] with its own [`Harness`]).
//!
//! Each check opens a fresh store, panics with a message on a violation, and waits for conditions
//! with deadlines (never fixed sleeps as assertions). Checks make no assumption about the starting
//! revision beyond "nothing under the check's own key prefix".

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

mod lists;
mod watches;

pub use lists::*;
pub use watches::*;

use crate::{
    CreateOutcome, DeleteOutcome, Error, Event, EventKind, KeyValue, ListOptions, ListOutcome,
    ListPage, Result, Revision, Store, StoreConfig, UpdateOutcome, WatchClosedReason, WatchItem,
    WatchOutcome, WatchStream, MAX_VALUE_SIZE,
};

/// How long any single expected event or condition may take before the check fails.
const DEADLINE: Duration = Duration::from_secs(20);

/// Opens fresh, empty stores of one back end.
pub trait Harness: Send + Sync {
    type S: Store;
    fn open(&self, cfg: StoreConfig) -> Self::S;

    /// Whether a watch stream receives its events as they are committed, up to its buffer, whether
    /// or not its reader reads (etcd's watch). Then a watcher that does not read is not overtaken by
    /// compaction: it has every event already, and the suite checks exactly that instead.
    fn watch_reads_ahead(&self) -> bool {
        false
    }
}

fn ok<T>(result: Result<T>, what: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("{what}: unexpected error {error}"),
    }
}

fn val(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn created(store: &dyn Store, key: &str, value: &str) -> KeyValue {
    match ok(store.create(key, val(value)).await, "create") {
        CreateOutcome::Created(kv) => kv,
        other => panic!("create {key}: expected Created, got {other:?}"),
    }
}

async fn updated(
    store: &dyn Store,
    key: &str,
    value: &str,
    expected: Option<Revision>,
) -> KeyValue {
    match ok(store.update(key, val(value), expected).await, "update") {
        UpdateOutcome::Updated { kv, .. } => kv,
        other => panic!("update {key}: expected Updated, got {other:?}"),
    }
}

async fn listed(store: &dyn Store, prefix: &str, opts: ListOptions) -> ListPage {
    match ok(store.list(prefix, opts).await, "list") {
        ListOutcome::Listed(page) => page,
        other => panic!("list {prefix}: expected Listed, got {other:?}"),
    }
}

fn watching(store: &dyn Store, prefix: &str, after: Revision, buffer: usize) -> WatchStream {
    match ok(store.watch(prefix, after, buffer), "watch") {
        WatchOutcome::Watching(stream) => stream,
        WatchOutcome::Expired { compacted } => {
            panic!("watch {prefix} after {after}: unexpectedly expired (compacted {compacted})")
        }
    }
}

/// The next item of `stream`, failing the check after 20 s.
pub async fn next_item(stream: &mut WatchStream) -> Option<WatchItem> {
    match tokio::time::timeout(DEADLINE, stream.next()).await {
        Ok(item) => item,
        Err(_) => panic!("no watch item within {DEADLINE:?}"),
    }
}

async fn next_event(stream: &mut WatchStream) -> Event {
    match next_item(stream).await {
        Some(WatchItem::Event(event)) => event,
        other => panic!("expected a watch event, got {other:?}"),
    }
}

/// Wait until `condition` holds, polling, failing after 20 s.
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition() {
        if tokio::time::Instant::now() > deadline {
            panic!("condition not reached within {DEADLINE:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Run every check against stores from `harness`, randomized ones with [`test_seed`].
pub async fn run_all<H: Harness>(harness: &H) {
    run_all_with_seed(harness, test_seed()).await;
}

/// Run every check; randomized checks use `seed` (print it in the caller to replay with `TEST_SEED`).
pub async fn run_all_with_seed<H: Harness>(harness: &H, seed: u64) {
    revisions_are_dense_and_outcomes_are_values(harness).await;
    create_revision_spans_one_life(harness).await;
    value_size_limit(harness).await;
    list_prefix_order_and_revision(harness).await;
    list_pages_stay_at_first_revision(harness).await;
    list_at_revision_and_bad_tokens(harness).await;
    list_at_every_revision_matches_history(harness, seed).await;
    watch_from_now_past_and_future(harness).await;
    watch_filters_by_prefix(harness).await;
    watch_guarantees_checker(harness, seed).await;
    concurrent_writers_and_watchers(harness).await;
    lost_update_counter(harness).await;
    slow_watcher_is_closed_without_blocking_writers(harness).await;
    compaction_expires_old_watches_and_lists(harness).await;
    close_ends_watchers_and_refuses_writes(harness).await;
}

pub async fn revisions_are_dense_and_outcomes_are_values<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let base = store.current_revision();
    let a = created(store, "/d/a", "1").await;
    assert_eq!(a.mod_revision, base + 1);
    assert_eq!(store.current_revision(), base + 1);

    match ok(store.create("/d/a", val("x")).await, "create twice") {
        CreateOutcome::AlreadyExists(current) => assert_eq!(current, a),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(
        store.current_revision(),
        base + 1,
        "a refused create must not use a revision"
    );

    match ok(
        store.update("/d/missing", val("x"), None).await,
        "update missing",
    ) {
        UpdateOutcome::NotFound => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
    match ok(
        store
            .update("/d/a", val("x"), Some(a.mod_revision + 100))
            .await,
        "stale update",
    ) {
        UpdateOutcome::Conflict(current) => assert_eq!(current, a),
        other => panic!("expected Conflict, got {other:?}"),
    }
    let a2 = match ok(
        store.update("/d/a", val("2"), Some(a.mod_revision)).await,
        "update",
    ) {
        UpdateOutcome::Updated { kv, prev } => {
            assert_eq!(prev, a);
            kv
        }
        other => panic!("expected Updated, got {other:?}"),
    };
    assert_eq!(a2.mod_revision, base + 2);
    let a3 = updated(store, "/d/a", "3", None).await;
    assert_eq!(a3.mod_revision, base + 3);
    assert_eq!(ok(store.get("/d/a").await, "get"), Some(a3.clone()));

    match ok(store.delete("/d/missing", None).await, "delete missing") {
        DeleteOutcome::NotFound => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
    match ok(
        store.delete("/d/a", Some(a2.mod_revision)).await,
        "stale delete",
    ) {
        DeleteOutcome::Conflict(current) => assert_eq!(current, a3),
        other => panic!("expected Conflict, got {other:?}"),
    }
    match ok(store.delete("/d/a", Some(a3.mod_revision)).await, "delete") {
        DeleteOutcome::Deleted { prev, revision } => {
            assert_eq!(prev, a3);
            assert_eq!(revision, base + 4);
        }
        other => panic!("expected Deleted, got {other:?}"),
    }
    assert_eq!(ok(store.get("/d/a").await, "get deleted"), None);
    assert_eq!(store.current_revision(), base + 4);
    ok(store.flush_and_close().await, "close");
}

pub async fn create_revision_spans_one_life<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let first = created(store, "/life/k", "1").await;
    let second = updated(store, "/life/k", "2", None).await;
    assert_eq!(second.create_revision, first.create_revision);
    assert!(second.mod_revision > first.mod_revision);
    ok(store.delete("/life/k", None).await, "delete");
    let reborn = created(store, "/life/k", "3").await;
    assert_eq!(reborn.create_revision, reborn.mod_revision);
    assert!(reborn.create_revision > second.mod_revision);
    ok(store.flush_and_close().await, "close");
}

pub async fn value_size_limit<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let base = store.current_revision();
    let big = Bytes::from(vec![b'x'; MAX_VALUE_SIZE + 1]);
    match store.create("/big/k", big.clone()).await {
        Err(Error::ValueTooLarge { size, limit }) => {
            assert_eq!(size, MAX_VALUE_SIZE + 1);
            assert_eq!(limit, MAX_VALUE_SIZE);
        }
        other => panic!("expected ValueTooLarge, got {other:?}"),
    }
    let at_limit = Bytes::from(vec![b'y'; MAX_VALUE_SIZE]);
    match ok(
        store.create("/big/k", at_limit).await,
        "create at the limit",
    ) {
        CreateOutcome::Created(kv) => assert_eq!(kv.value.len(), MAX_VALUE_SIZE),
        other => panic!("expected Created, got {other:?}"),
    }
    assert!(matches!(
        store.update("/big/k", big, None).await,
        Err(Error::ValueTooLarge { .. })
    ));
    assert_eq!(store.current_revision(), base + 1);
    ok(store.flush_and_close().await, "close");
}

pub async fn lost_update_counter<H: Harness>(harness: &H) {
    const CLIENTS: usize = 8;
    const INCREMENTS: usize = 25;
    let store: Arc<dyn Store> = Arc::new(harness.open(StoreConfig::default()));
    created(&*store, "/counter", "0").await;
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0u64;
            for _ in 0..INCREMENTS {
                loop {
                    let Some(current) = ok(store.get("/counter").await, "get") else {
                        panic!("counter vanished");
                    };
                    let n: u64 = String::from_utf8_lossy(&current.value)
                        .parse()
                        .unwrap_or(u64::MAX);
                    match ok(
                        store
                            .update(
                                "/counter",
                                val(&(n + 1).to_string()),
                                Some(current.mod_revision),
                            )
                            .await,
                        "cas",
                    ) {
                        UpdateOutcome::Updated { .. } => break,
                        UpdateOutcome::Conflict(_) => conflicts += 1,
                        UpdateOutcome::NotFound => panic!("counter vanished"),
                    }
                }
            }
            conflicts
        }));
    }
    for task in tasks {
        if let Err(error) = task.await {
            panic!("client failed: {error}");
        }
    }
    let final_value = ok(store.get("/counter").await, "get").map(|kv| kv.value);
    assert_eq!(final_value, Some(val(&(CLIENTS * INCREMENTS).to_string())));
    ok(store.flush_and_close().await, "close");
}

pub async fn close_ends_watchers_and_refuses_writes<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let mut watch = watching(store, "", store.current_revision(), 16);
    created(store, "/z/a", "v").await;
    assert_eq!(next_event(&mut watch).await.key, "/z/a");
    ok(store.flush_and_close().await, "close");
    assert_eq!(
        next_item(&mut watch).await,
        Some(WatchItem::Closed(WatchClosedReason::StoreShutdown))
    );
    assert_eq!(next_item(&mut watch).await, None);
    assert!(matches!(
        store.create("/z/b", val("v")).await,
        Err(Error::Closed)
    ));
    assert!(matches!(store.watch("", 0, 1), Err(Error::Closed)));
    // Reads of what was acknowledged still work; closing twice is fine.
    assert!(ok(store.get("/z/a").await, "get after close").is_some());
    ok(store.flush_and_close().await, "second close");
}

/// Every key's state, for comparing stores.
pub async fn snapshot(store: &dyn Store) -> BTreeMap<String, KeyValue> {
    listed(store, "", ListOptions::default())
        .await
        .items
        .into_iter()
        .map(|kv| (kv.key.clone(), kv))
        .collect()
}

/// xorshift64*: deterministic choices from a seed, no dependency.
struct SeededRng(u64);

impl SeededRng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The seed of randomized checks: `TEST_SEED` if set, else from the clock. Always in failure messages.
pub fn test_seed() -> u64 {
    std::env::var("TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}
