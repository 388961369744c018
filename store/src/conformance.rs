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

pub async fn list_prefix_order_and_revision<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    for key in ["/l/b", "/l/a", "/l/c", "/m/a", "/l"] {
        created(store, key, key).await;
    }
    let page = listed(store, "/l/", ListOptions::default()).await;
    let keys: Vec<&str> = page.items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/l/a", "/l/b", "/l/c"]);
    assert_eq!(page.revision, store.current_revision());
    assert_eq!(page.continue_token, None);
    let empty = listed(store, "/nothing/", ListOptions::default()).await;
    assert!(empty.items.is_empty());
    let all = listed(store, "", ListOptions::default()).await;
    assert_eq!(all.items.len(), 5);
    ok(store.flush_and_close().await, "close");
}

async fn collect_pages(
    store: &dyn Store,
    prefix: &str,
    limit: usize,
    between: impl AsyncFnMutHook,
) -> (Vec<KeyValue>, Revision) {
    let mut between = between;
    let mut items = Vec::new();
    let mut token = None;
    let mut revision = None;
    loop {
        let page = listed(
            store,
            prefix,
            ListOptions {
                limit: Some(limit),
                continue_token: token.take(),
                revision: None,
            },
        )
        .await;
        assert!(page.items.len() <= limit);
        if let Some(first) = revision {
            assert_eq!(
                page.revision, first,
                "every page must be at the first page's revision"
            );
        }
        revision = Some(page.revision);
        items.extend(page.items);
        match page.continue_token {
            Some(next) => token = Some(next),
            None => break,
        }
        between.call(store).await;
    }
    (items, revision.unwrap_or(0))
}

/// A hook run between pages (writes that the pages must not see).
pub trait AsyncFnMutHook {
    fn call<'a>(&'a mut self, store: &'a dyn Store) -> futures::future::BoxFuture<'a, ()>;
}

struct Churn {
    round: usize,
}

impl AsyncFnMutHook for Churn {
    fn call<'a>(&'a mut self, store: &'a dyn Store) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            self.round += 1;
            let round = self.round;
            // Touch keys before, inside and after the pages already served: update, delete, create.
            let _ = ok(
                store
                    .update(&format!("/p/{:02}", (round * 7) % 20), val("changed"), None)
                    .await,
                "churn update",
            );
            let _ = ok(
                store
                    .delete(&format!("/p/{:02}", (round * 3 + 5) % 20), None)
                    .await,
                "churn delete",
            );
            let _ = ok(
                store
                    .create(&format!("/p/{:02}x", round % 20), val("new"))
                    .await,
                "churn create",
            );
            let _ = ok(
                store
                    .create(&format!("/q/{round}"), val("other prefix"))
                    .await,
                "churn create",
            );
        })
    }
}

struct NoChurn;

impl AsyncFnMutHook for NoChurn {
    fn call<'a>(&'a mut self, _store: &'a dyn Store) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

pub async fn list_pages_stay_at_first_revision<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    for i in 0..20 {
        created(store, &format!("/p/{i:02}"), &format!("v{i}")).await;
    }
    let expected = listed(store, "/p/", ListOptions::default()).await;
    for limit in [1, 3, 7, 20, 50] {
        let (unchurned, _) = collect_pages(store, "/p/", limit, NoChurn).await;
        assert_eq!(
            unchurned.len(),
            listed(store, "/p/", ListOptions::default())
                .await
                .items
                .len()
        );
    }
    // Pages served while keys change must together equal the list at the first page's revision.
    let (items, revision) = collect_pages(store, "/p/", 3, Churn { round: 0 }).await;
    assert_eq!(revision, expected.revision);
    assert_eq!(
        items, expected.items,
        "paginated list under churn differs from the snapshot"
    );
    // And the whole list at that revision, asked directly, is the same snapshot.
    let at = listed(
        store,
        "/p/",
        ListOptions {
            revision: Some(revision),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(at.items, expected.items);
    ok(store.flush_and_close().await, "close");
}

pub async fn list_at_revision_and_bad_tokens<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let a1 = created(store, "/r/a", "1").await;
    let at_one = store.current_revision();
    created(store, "/r/b", "1").await;
    updated(store, "/r/a", "2", None).await;
    ok(store.delete("/r/b", None).await, "delete");
    let old = listed(
        store,
        "/r/",
        ListOptions {
            revision: Some(at_one),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(old.items, vec![a1]);
    assert_eq!(old.revision, at_one);
    let current = store.current_revision();
    match ok(
        store
            .list(
                "/r/",
                ListOptions {
                    revision: Some(current + 5),
                    ..Default::default()
                },
            )
            .await,
        "future list",
    ) {
        ListOutcome::FutureRevision { current: c } => assert_eq!(c, current),
        other => panic!("expected FutureRevision, got {other:?}"),
    }
    for bad in ["", "not a token", "eyJ2IjoxfQ", "%%%"] {
        let opts = ListOptions {
            continue_token: Some(bad.into()),
            limit: Some(1),
            ..Default::default()
        };
        match ok(store.list("/r/", opts).await, "list with bad token") {
            ListOutcome::InvalidContinue => {}
            other => panic!("token {bad:?}: expected InvalidContinue, got {other:?}"),
        }
    }
    ok(store.flush_and_close().await, "close");
}

fn check_event(event: &Event, kind: EventKind, key: &str, value: Option<&str>, prev: Option<&str>) {
    assert_eq!(event.kind, kind, "{event:?}");
    assert_eq!(event.key, key, "{event:?}");
    assert_eq!(
        event.value.as_ref().map(|kv| kv.value.clone()),
        value.map(val),
        "{event:?}"
    );
    assert_eq!(
        event.prev.as_ref().map(|kv| kv.value.clone()),
        prev.map(val),
        "{event:?}"
    );
    if let Some(kv) = &event.value {
        assert_eq!(kv.mod_revision, event.revision);
        assert_eq!(kv.key, event.key);
    }
}

pub async fn watch_from_now_past_and_future<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let start = store.current_revision();
    created(store, "/w/a", "1").await;
    updated(store, "/w/a", "2", None).await;
    let middle = store.current_revision();
    let mut now = watching(store, "/w/", middle, 64);
    let mut future = watching(store, "/w/", middle + 2, 64);
    ok(store.delete("/w/a", None).await, "delete");
    created(store, "/w/b", "1").await;
    created(store, "/w/c", "1").await;
    let mut past = watching(store, "/w/", start, 64);

    let e = next_event(&mut past).await;
    check_event(&e, EventKind::Put, "/w/a", Some("1"), None);
    assert!(e.is_create());
    assert_eq!(e.revision, start + 1);
    let e = next_event(&mut past).await;
    check_event(&e, EventKind::Put, "/w/a", Some("2"), Some("1"));
    for stream in [&mut past, &mut now] {
        let e = next_event(stream).await;
        check_event(&e, EventKind::Delete, "/w/a", None, Some("2"));
        assert_eq!(e.revision, middle + 1);
        let e = next_event(stream).await;
        check_event(&e, EventKind::Put, "/w/b", Some("1"), None);
    }
    // The future watch skips everything up to its revision.
    let e = next_event(&mut future).await;
    assert_eq!(e.revision, middle + 3);
    check_event(&e, EventKind::Put, "/w/c", Some("1"), None);
    for stream in [&mut past, &mut now] {
        assert_eq!(next_event(stream).await.revision, middle + 3);
    }
    // Resumable: a new watch after the last revision seen continues exactly there.
    created(store, "/w/d", "1").await;
    let mut resumed = watching(store, "/w/", now.last_revision(), 64);
    assert_eq!(next_event(&mut resumed).await.key, "/w/d");
    assert_eq!(next_event(&mut now).await.key, "/w/d");
    ok(store.flush_and_close().await, "close");
}

pub async fn watch_filters_by_prefix<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let start = store.current_revision();
    let mut live = watching(store, "/f/a/", start, 16);
    for key in ["/f/b/1", "/f/a/1", "/f/ab", "/f/a/2"] {
        created(store, key, "v").await;
    }
    let mut replay = watching(store, "/f/a/", start, 16);
    for stream in [&mut live, &mut replay] {
        assert_eq!(next_event(stream).await.key, "/f/a/1");
        assert_eq!(next_event(stream).await.key, "/f/a/2");
    }
    ok(store.flush_and_close().await, "close");
}

pub async fn concurrent_writers_and_watchers<H: Harness>(harness: &H) {
    const WRITERS: usize = 16;
    const PER_WRITER: usize = 50;
    let store: Arc<dyn Store> = Arc::new(harness.open(StoreConfig::default()));
    let start = store.current_revision();
    let mut from_start = watching(&*store, "/c/", start, 4096);
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let mut revisions = Vec::new();
            for i in 0..PER_WRITER {
                let key = format!("/c/{w}/{i}");
                let kv = created(&*store, &key, &key).await;
                revisions.push(kv.mod_revision);
                if i % 5 == 0 {
                    revisions.push(
                        updated(&*store, &key, "u", Some(kv.mod_revision))
                            .await
                            .mod_revision,
                    );
                }
            }
            revisions
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        match task.await {
            Ok(revisions) => {
                assert!(
                    revisions.windows(2).all(|w| w[0] < w[1]),
                    "one writer's revisions must increase"
                );
                all.extend(revisions);
            }
            Err(error) => panic!("writer task failed: {error}"),
        }
    }
    all.sort_unstable();
    let total = WRITERS * PER_WRITER * 6 / 5;
    let expected: Vec<Revision> = (start + 1..=start + total as u64).collect();
    assert_eq!(
        all, expected,
        "acknowledged revisions must be exactly the dense range"
    );
    let mut from_past = watching(&*store, "/c/", start, 4096);
    for stream in [&mut from_start, &mut from_past] {
        for revision in &expected {
            assert_eq!(next_event(stream).await.revision, *revision);
        }
    }
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

pub async fn slow_watcher_is_closed_without_blocking_writers<H: Harness>(harness: &H) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let start = store.current_revision();
    let mut slow = watching(store, "/s/", start, 8);
    let mut fast = watching(store, "/s/", start, 1024);
    // Let both subscribe (they catch up to the head on their first poll).
    created(store, "/s/first", "v").await;
    assert_eq!(next_event(&mut slow).await.key, "/s/first");
    assert_eq!(next_event(&mut fast).await.key, "/s/first");
    for i in 0..100 {
        created(store, &format!("/s/{i}"), "v").await;
    }
    let mut delivered = 0;
    loop {
        match next_item(&mut slow).await {
            Some(WatchItem::Event(_)) => delivered += 1,
            Some(WatchItem::Closed(WatchClosedReason::FellBehind { buffer })) => {
                assert_eq!(buffer, 8);
                break;
            }
            other => panic!("expected FellBehind, got {other:?}"),
        }
    }
    assert!(
        delivered <= 8,
        "a slow watcher got {delivered} events past a buffer of 8"
    );
    assert_eq!(next_item(&mut slow).await, None);
    for i in 0..100 {
        assert_eq!(next_event(&mut fast).await.key, format!("/s/{i}"));
    }
    ok(store.flush_and_close().await, "close");
}

pub async fn compaction_expires_old_watches_and_lists<H: Harness>(harness: &H) {
    let cfg = StoreConfig {
        event_log_max_events: 10,
        compaction_interval: Duration::from_millis(20),
        ..StoreConfig::default()
    };
    let store = harness.open(cfg);
    let store: &dyn Store = &store;
    let start = store.current_revision();
    for i in 0..5 {
        created(store, &format!("/x/{i}"), "v").await;
    }
    let first_page = listed(
        store,
        "/x/",
        ListOptions {
            limit: Some(2),
            ..Default::default()
        },
    )
    .await;
    let Some(token) = first_page.continue_token.clone() else {
        panic!("expected a continue token")
    };
    // Behind from the start (it has five events to replay), and it never reads until compaction ran.
    let mut lagging = watching(store, "/x/", start, 1024);
    for i in 0..40 {
        updated(store, &format!("/x/{}", i % 5), &i.to_string(), None).await;
    }
    let head = store.current_revision();
    wait_until("compaction reaches the count bound", || {
        store.compacted_revision() >= head - 10
    })
    .await;
    assert!(store.compacted_revision() <= head);
    match ok(store.watch("/x/", start, 16), "old watch") {
        WatchOutcome::Expired { compacted } => assert!(compacted > start),
        WatchOutcome::Watching(_) => panic!("a watch from a compacted revision must expire"),
    }
    match ok(
        store
            .list(
                "/x/",
                ListOptions {
                    limit: Some(2),
                    continue_token: Some(token),
                    revision: None,
                },
            )
            .await,
        "old token",
    ) {
        ListOutcome::Expired { compacted } => assert!(compacted > first_page.revision),
        other => panic!("expected Expired for a compacted continue token, got {other:?}"),
    }
    match ok(
        store
            .list(
                "/x/",
                ListOptions {
                    revision: Some(start + 1),
                    ..Default::default()
                },
            )
            .await,
        "old list",
    ) {
        ListOutcome::Expired { .. } => {}
        other => panic!("expected Expired, got {other:?}"),
    }
    // A watcher that never read before its events were compacted is told so, never given a gap.
    match next_item(&mut lagging).await {
        Some(WatchItem::Closed(WatchClosedReason::Compacted { compacted })) => {
            assert!(compacted > start)
        }
        other => panic!("expected Compacted, got {other:?}"),
    }
    // Watching from the compacted revision itself still works and is gap-free. No writes follow, so
    // compaction stays where it is while the watcher replays.
    updated(store, "/x/0", "after", None).await;
    let head = store.current_revision();
    wait_until("compaction settles", || {
        store.compacted_revision() == head - 10
    })
    .await;
    let compacted = store.compacted_revision();
    let mut recent = watching(store, "/x/", compacted, 1024);
    let mut expect = compacted + 1;
    while expect <= head {
        assert_eq!(next_event(&mut recent).await.revision, expect);
        expect += 1;
    }
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

/// One acknowledged write, as its writer saw it.
#[derive(Debug, Clone)]
struct Acked {
    kind: EventKind,
    key: String,
    value: Option<Bytes>,
}

/// spec/reliability.md T3 at the store level: while writers run, watchers from now, from the past,
/// from a future revision and with a narrow prefix record every event; then every stream is checked
/// against the history the writers were acknowledged (all writes in the store come from them):
/// ordered, unique, reliable (exactly the filtered history, no gap), resumable (a stream broken
/// mid-way and resumed from its last revision continues exactly), `prev` and create-ness correct, and
/// a future watch delivers nothing at or before its revision.
pub async fn watch_guarantees_checker<H: Harness>(harness: &H, seed: u64) {
    const WRITERS: u64 = 4;
    const OPS: u64 = 300;
    const KEYS: u64 = 10;
    tracing::info!(seed, "watch checker");
    let store: Arc<dyn Store> = Arc::new(harness.open(StoreConfig::default()));
    let base = store.current_revision();
    let history = Arc::new(parking_lot::Mutex::new(BTreeMap::<Revision, Acked>::new()));

    async fn write(
        store: &dyn Store,
        rng: &mut SeededRng,
        tag: &str,
        history: &parking_lot::Mutex<BTreeMap<Revision, Acked>>,
    ) {
        let key = match rng.next() % 8 {
            0 => format!("/other/k{}", rng.next() % 3),
            _ => format!("/t3/k{}", rng.next() % KEYS),
        };
        let value = Bytes::from(format!("{tag}-{}", rng.next()));
        let current = ok(store.get(&key).await, "get");
        let acked = match (current, rng.next() % 10) {
            (None, _) => match ok(store.create(&key, value.clone()).await, "create") {
                CreateOutcome::Created(kv) => Some((kv.mod_revision, EventKind::Put, Some(value))),
                CreateOutcome::AlreadyExists(_) => None,
            },
            (Some(kv), 0..=1) => {
                match ok(store.delete(&key, Some(kv.mod_revision)).await, "delete") {
                    DeleteOutcome::Deleted { revision, .. } => {
                        Some((revision, EventKind::Delete, None))
                    }
                    _ => None,
                }
            }
            (Some(kv), _) => match ok(
                store
                    .update(&key, value.clone(), Some(kv.mod_revision))
                    .await,
                "update",
            ) {
                UpdateOutcome::Updated { kv, .. } => {
                    Some((kv.mod_revision, EventKind::Put, Some(value)))
                }
                _ => None,
            },
        };
        if let Some((revision, kind, value)) = acked {
            history.lock().insert(revision, Acked { kind, key, value });
        }
    }

    // Some history before the watchers start, so "from the past" has something to replay.
    let mut rng = SeededRng(seed | 1);
    for _ in 0..60 {
        write(&*store, &mut rng, "pre", &history).await;
    }
    let head = store.current_revision();
    let past_offset = 1 + rng.next() % (head - base);
    let specs: Vec<(&str, Revision, &str)> = vec![
        ("", head, "now-all"),
        ("/t3/", head, "now-t3"),
        ("/t3/", head, "now-t3-b"),
        ("", head, "now-all-b"),
        ("/t3/", head - past_offset, "past-random"),
        ("", base, "past-start"),
        ("/t3/", head + 10, "future"),
        ("/t3/k1", head - past_offset / 2, "filtered"),
    ];
    let sentinel = "/t3/k1~end";
    let mut watchers = Vec::new();
    for (prefix, after, name) in specs.iter().cloned() {
        let mut stream = watching(&*store, prefix, after, 1 << 16);
        // One stream of the from-now ones is broken mid-way and resumed from its last revision.
        let break_after = (name == "now-t3-b").then_some(100usize);
        let store = Arc::clone(&store);
        watchers.push(tokio::spawn(async move {
            let mut events = Vec::new();
            loop {
                if Some(events.len()) == break_after {
                    let resume = stream.last_revision();
                    stream = watching(&*store, prefix, resume, 1 << 16);
                }
                let event = next_event(&mut stream).await;
                let done = event.key == sentinel;
                events.push(event);
                if done {
                    return (name, prefix, after, events);
                }
            }
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let store = Arc::clone(&store);
        let history = Arc::clone(&history);
        let mut rng = SeededRng(seed.wrapping_add(w + 1).wrapping_mul(0x9E37_79B9) | 1);
        writers.push(tokio::spawn(async move {
            for _ in 0..OPS {
                write(&*store, &mut rng, &format!("w{w}"), &history).await;
            }
        }));
    }
    for writer in writers {
        if let Err(error) = writer.await {
            panic!("seed {seed}: writer failed: {error}");
        }
    }
    let end = created(&*store, sentinel, "end").await;
    history.lock().insert(
        end.mod_revision,
        Acked {
            kind: EventKind::Put,
            key: sentinel.into(),
            value: Some(val("end")),
        },
    );
    let history = history.lock().clone();
    let last = end.mod_revision;
    let expected_all: Vec<Revision> = (base + 1..=last).collect();
    assert_eq!(
        history.keys().copied().collect::<Vec<_>>(),
        expected_all,
        "seed {seed}: acknowledged revisions are not dense"
    );

    // The state of every key before each revision, to check `prev` and create-ness.
    let mut state: HashMap<String, (Bytes, Revision)> = HashMap::new();
    let mut before: HashMap<Revision, Option<(Bytes, Revision)>> = HashMap::new();
    for (revision, acked) in &history {
        before.insert(*revision, state.get(&acked.key).cloned());
        match &acked.value {
            Some(value) => state.insert(acked.key.clone(), (value.clone(), *revision)),
            None => state.remove(&acked.key),
        };
    }
    for watcher in watchers {
        let (name, prefix, after, events) = match watcher.await {
            Ok(result) => result,
            Err(error) => panic!("seed {seed}: watcher failed: {error}"),
        };
        let expected: Vec<Revision> = history
            .range(after + 1..)
            .filter(|(_, a)| a.key.starts_with(prefix))
            .map(|(r, _)| *r)
            .collect();
        let got: Vec<Revision> = events.iter().map(|e| e.revision).collect();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "seed {seed}: {name}: not strictly ordered / unique"
        );
        assert_eq!(
            got, expected,
            "seed {seed}: {name}: not exactly the filtered history after {after}"
        );
        for event in &events {
            let Some(acked) = history.get(&event.revision) else {
                panic!(
                    "seed {seed}: {name}: event at unknown revision {}",
                    event.revision
                )
            };
            assert_eq!(
                (event.kind, &event.key),
                (acked.kind, &acked.key),
                "seed {seed}: {name}"
            );
            assert_eq!(
                event.value.as_ref().map(|kv| kv.value.clone()),
                acked.value,
                "seed {seed}: {name}"
            );
            let prev = event
                .prev
                .as_ref()
                .map(|kv| (kv.value.clone(), kv.mod_revision));
            let expected_prev = before.get(&event.revision).cloned().flatten();
            assert_eq!(
                prev, expected_prev,
                "seed {seed}: {name}: prev at {}",
                event.revision
            );
            assert_eq!(
                event.is_create(),
                event.kind == EventKind::Put && expected_prev.is_none()
            );
        }
        if name == "future" {
            assert!(
                got.iter().all(|r| *r > after),
                "seed {seed}: future watch delivered old events"
            );
        }
    }
    ok(store.flush_and_close().await, "close");
}

/// Lists at every past revision, whole and paginated, equal the state the writes produced at that
/// revision (MVCC from the event log). Random sequential writes on a small key space.
pub async fn list_at_every_revision_matches_history<H: Harness>(harness: &H, seed: u64) {
    let store = harness.open(StoreConfig::default());
    let store: &dyn Store = &store;
    let mut rng = SeededRng(seed.wrapping_mul(0x2545_F491) | 1);
    let mut state: BTreeMap<String, KeyValue> = BTreeMap::new();
    let mut history: Vec<(Revision, BTreeMap<String, KeyValue>)> =
        vec![(store.current_revision(), state.clone())];
    for _ in 0..200 {
        let key = format!("/h/{:02}", rng.next() % 15);
        let value = val(&format!("{}", rng.next()));
        match state.get(&key).cloned() {
            None => {
                if let CreateOutcome::Created(kv) = ok(store.create(&key, value).await, "create") {
                    state.insert(key, kv);
                }
            }
            Some(current) if rng.next().is_multiple_of(3) => {
                if let DeleteOutcome::Deleted { .. } = ok(
                    store.delete(&key, Some(current.mod_revision)).await,
                    "delete",
                ) {
                    state.remove(&key);
                }
            }
            Some(current) => {
                if let UpdateOutcome::Updated { kv, .. } = ok(
                    store.update(&key, value, Some(current.mod_revision)).await,
                    "update",
                ) {
                    state.insert(key, kv);
                }
            }
        }
        history.push((store.current_revision(), state.clone()));
    }
    for (revision, expected) in &history {
        for limit in [None, Some(1), Some(4)] {
            let mut items = Vec::new();
            let mut token = None;
            loop {
                let opts = ListOptions {
                    limit,
                    continue_token: token.take(),
                    revision: Some(*revision),
                };
                let page = listed(store, "/h/", opts).await;
                assert_eq!(page.revision, *revision, "seed {seed}");
                items.extend(page.items);
                match page.continue_token {
                    Some(next) => token = Some(next),
                    None => break,
                }
            }
            let expected: Vec<KeyValue> = expected.values().cloned().collect();
            assert_eq!(
                items, expected,
                "seed {seed}: list at revision {revision} with limit {limit:?}"
            );
        }
    }
    ok(store.flush_and_close().await, "close");
}
