//! Contract checks of `list`: prefix, order, pagination at the first page's revision, lists at
//! past revisions, malformed tokens.

use super::*;

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
