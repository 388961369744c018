//! Resources the watch cache does not hold: lists and watches of them are served from the store,
//! as kube-apiserver serves a resource whose watch-cache size is 0. Upstream's default sizes
//! (`DefaultWatchCacheSizes`, `pkg/kubeapiserver/default_storage_factory_builder.go`) disable the
//! cache for core and `events.k8s.io` Events, which share the storage `events`: they are written
//! often, read rarely and outnumber pods several times (a running pod has about six), so holding
//! them decoded cost more memory than the pods themselves (issue 17, item 7).
//!
//! Guarantees:
//! - **Nothing kept.** The feeder still applies their store events to the cache's revision (a
//!   consistent read waits for them as for any other write) and takes writers' offers for them
//!   (an offer never outlives its event), but keeps no object, ring entry or live log.
//! - **Consistent lists.** A list reads the store at one revision: the current one, or an exact one
//!   still in the store's history (older is `Expired`, newer `Future`), page by page, decoding each
//!   object once and keeping what passes the filter. With a limit it stops at the limit and goes on
//!   after the last key it read, as upstream's etcd3 storage does; the remaining count is given only
//!   when nothing is filtered (it is then the store's count of keys after the page).
//! - **Watches.** Each watcher has its own store watch of its collection's keys, bounded by the
//!   watch buffer and ended when it falls behind, as each of upstream's etcd watchers is; its events
//!   are decoded for it. A watch from no revision first lists the collection at one revision
//!   (ADDED events), then watches after it.

use std::sync::Arc;

use serde_json::Value;

use store::{Event, EventKind, KeyValue, ListOptions, ListOutcome, Revision, WatchOutcome};

use super::{
    stamp, CacheEvent, CacheWatch, EventType, ListAt, LiveEvents, Snapshot, SnapshotOutcome,
    WatchCache, WatchFrom, WatchStart,
};

/// The resource prefixes not cached by default: upstream's `DefaultWatchCacheSizes` (core and
/// `events.k8s.io` Events, one storage).
pub const UNCACHED_RESOURCES: &[&str] = &["/registry/events/"];

/// Keys read from the store per page when nothing bounds the page (upstream's etcd3 storage reads
/// at most 10,000 keys per request; smaller pages keep the transient copies small).
const PAGE: usize = 1000;

/// `bytes` stored at `revision`, decoded and stamped with it (not compacted: the object is sent
/// once and dropped).
fn decode(kv: &KeyValue) -> Option<Value> {
    let mut v = serde_json::from_slice(&kv.value).ok()?;
    stamp(&mut v, kv.mod_revision);
    Some(v)
}

/// A store event as the watch handler sends it (`None`: undecodable, or a delete of nothing).
pub(super) fn cache_event(ev: Event) -> Option<CacheEvent> {
    let decoded = |kv: &KeyValue| decode(kv).map(Arc::new);
    match ev.kind {
        EventKind::Put => {
            let object = decoded(ev.value.as_ref()?)?;
            let kind = if ev.prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            };
            let prev = ev.prev.as_ref().and_then(decoded);
            Some(CacheEvent::new(kind, ev.key, ev.revision, object, prev))
        }
        EventKind::Delete => {
            // The last state, sent with the delete's resourceVersion.
            let last = decoded(ev.prev.as_ref()?)?;
            Some(CacheEvent {
                stamp_revision: true,
                ..CacheEvent::new(
                    EventType::Deleted,
                    ev.key,
                    ev.revision,
                    last.clone(),
                    Some(last),
                )
            })
        }
    }
}

/// A list's page with each item's key, or why there is none.
enum Keyed {
    Listed(KeyedPage),
    Not(SnapshotOutcome),
}

/// [`Snapshot`] with keys.
struct KeyedPage {
    items: Vec<(String, Arc<Value>)>,
    revision: Revision,
    more_after: Option<String>,
    remaining: Option<u64>,
}

/// One page read from the store, or why there is none.
enum Read {
    Page(store::ListPage),
    Done(SnapshotOutcome),
}

impl WatchCache {
    /// Whether the cache holds the objects of the resource `resource_prefix`
    /// (`/registry/<storage>/`); those it does not are listed with
    /// [`list_uncached`](Self::list_uncached) and watched with
    /// [`watch_uncached`](Self::watch_uncached).
    pub fn caches(&self, resource_prefix: &str) -> bool {
        !self.uncached.iter().any(|p| p == resource_prefix)
    }

    async fn read(&self, prefix: &str, opts: ListOptions) -> Result<Read, store::Error> {
        Ok(match self.store.list(prefix, opts).await? {
            ListOutcome::Listed(page) => Read::Page(page),
            ListOutcome::Expired { compacted } => {
                Read::Done(SnapshotOutcome::Expired { oldest: compacted })
            }
            ListOutcome::FutureRevision { current } => {
                Read::Done(SnapshotOutcome::Future { current })
            }
            // Only the store's own tokens are passed on.
            ListOutcome::InvalidContinue => return Err(store::Error::Failed),
        })
    }

    /// Items under `key_prefix` that pass `filter`, at `at`, after key `start_after`, at most
    /// `limit`, read from the store (see the module docs). `everything`: `filter` passes every
    /// object (the remaining count is then known).
    pub async fn list_uncached(
        &self,
        key_prefix: &str,
        at: ListAt,
        start_after: Option<&str>,
        limit: Option<usize>,
        filter: &(dyn Fn(&Value) -> bool + Sync),
        everything: bool,
    ) -> Result<SnapshotOutcome, store::Error> {
        let listed = self
            .list_keyed(key_prefix, at, start_after, limit, filter, everything)
            .await?;
        Ok(match listed {
            Keyed::Listed(page) => SnapshotOutcome::Listed(Snapshot {
                items: page.items.into_iter().map(|(_, v)| v).collect(),
                revision: page.revision,
                more_after: page.more_after,
                remaining: page.remaining,
            }),
            Keyed::Not(outcome) => outcome,
        })
    }

    /// [`list_uncached`](Self::list_uncached) with each item's key.
    async fn list_keyed(
        &self,
        key_prefix: &str,
        at: ListAt,
        start_after: Option<&str>,
        limit: Option<usize>,
        filter: &(dyn Fn(&Value) -> bool + Sync),
        everything: bool,
    ) -> Result<Keyed, store::Error> {
        let limit = limit.filter(|l| *l > 0);
        // Without a filter a page of the limit is the answer; with one, pages are read until
        // enough match.
        let page_size = match limit {
            Some(l) if everything => l,
            _ => PAGE,
        };
        let revision = match at {
            ListAt::Current => None,
            ListAt::Exact(r) => Some(r),
        };
        let mut opts = match start_after {
            Some(key) => {
                let at = revision.unwrap_or_else(|| self.store.current_revision());
                ListOptions::after_key(at, key, Some(page_size))
            }
            None => ListOptions {
                limit: Some(page_size),
                revision,
                continue_token: None,
            },
        };
        let mut items = Vec::new();
        loop {
            let page = match self.read(key_prefix, opts).await? {
                Read::Page(page) => page,
                Read::Done(outcome) => return Ok(Keyed::Not(outcome)),
            };
            let more_keys = page.continue_token.is_some();
            let mut kvs = page.items.into_iter().peekable();
            while let Some(kv) = kvs.next() {
                let decoded = decode(&kv);
                let key = kv.key;
                match decoded {
                    Some(obj) if filter(&obj) => items.push((key.clone(), Arc::new(obj))),
                    Some(_) => {}
                    None => tracing::warn!(%key, "undecodable object skipped"),
                }
                if limit.is_some_and(|l| items.len() >= l) && (kvs.peek().is_some() || more_keys) {
                    // More keys follow: the next page starts after the last one read.
                    let whole_page = everything && kvs.peek().is_none();
                    return Ok(Keyed::Listed(KeyedPage {
                        items,
                        revision: page.revision,
                        more_after: Some(key),
                        remaining: page.remaining.filter(|_| whole_page),
                    }));
                }
            }
            match page.continue_token {
                Some(token) => {
                    opts = ListOptions {
                        limit: Some(page_size),
                        continue_token: Some(token),
                        revision: None,
                    }
                }
                None => {
                    return Ok(Keyed::Listed(KeyedPage {
                        items,
                        revision: page.revision,
                        more_after: None,
                        remaining: None,
                    }))
                }
            }
        }
    }

    /// A watch of the keys under `key_prefix` of an uncached resource, from the store (see the
    /// module docs).
    pub async fn watch_uncached(
        &self,
        key_prefix: &str,
        from: WatchFrom,
    ) -> Result<WatchStart, store::Error> {
        let (initial, after) = match from {
            WatchFrom::After(rev) => (Vec::new(), rev),
            WatchFrom::Snapshot => {
                let listed = self
                    .list_keyed(key_prefix, ListAt::Current, None, None, &|_| true, true)
                    .await?;
                let Keyed::Listed(snapshot) = listed else {
                    // The current revision is never compacted nor in the future.
                    return Err(store::Error::Failed);
                };
                let at = snapshot.revision;
                let initial = snapshot
                    .items
                    .into_iter()
                    .map(|(key, obj)| {
                        Arc::new(CacheEvent::new(EventType::Added, key, at, obj, None))
                    })
                    .collect();
                (initial, at)
            }
        };
        match self.store.watch(key_prefix, after, self.buffer)? {
            WatchOutcome::Watching(stream) => Ok(WatchStart::Watching(CacheWatch {
                initial,
                rx: LiveEvents::from_store(stream),
                revision: after,
                skip_through: after,
            })),
            WatchOutcome::Expired { compacted } => Ok(WatchStart::Expired { oldest: compacted }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use store::Store;

    const EVENTS: &str = "/registry/events/";

    fn event(name: &str, reason: &str) -> Bytes {
        Bytes::from(
            json!({"metadata": {"name": name, "namespace": "ns"}, "reason": reason}).to_string(),
        )
    }

    fn key(name: &str) -> String {
        format!("/registry/events/ns/{name}")
    }

    /// A store with events `e0`–`e4` and one ConfigMap, and a cache over it.
    async fn setup() -> (Arc<dyn Store>, Arc<WatchCache>, CancellationToken) {
        let store: Arc<dyn Store> = Arc::new(
            store::MemoryStore::new(store::StoreConfig::default())
                .unwrap_or_else(|e| panic!("memory store: {e}")),
        );
        for i in 0..5 {
            let name = format!("e{i}");
            store
                .create(&key(&name), event(&name, "Pulled"))
                .await
                .unwrap();
        }
        let cm = Bytes::from(json!({"metadata": {"name": "c", "namespace": "ns"}}).to_string());
        store.create("/registry/configmaps/ns/c", cm).await.unwrap();
        let shutdown = CancellationToken::new();
        let cache = WatchCache::start(store.clone(), 100, 100, shutdown.clone())
            .await
            .unwrap();
        (store, cache, shutdown)
    }

    fn listed(outcome: SnapshotOutcome) -> Snapshot {
        match outcome {
            SnapshotOutcome::Listed(s) => s,
            other => panic!("not listed: {other:?}"),
        }
    }

    fn names(s: &Snapshot) -> Vec<&str> {
        s.items
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or(""))
            .collect()
    }

    #[tokio::test]
    async fn events_are_not_held_but_listed_from_the_store_at_one_revision() {
        let (store, cache, _shutdown) = setup().await;
        assert!(!cache.caches(EVENTS));
        assert!(cache.caches("/registry/configmaps/"));
        store
            .create(&key("e5"), event("e5", "Started"))
            .await
            .unwrap();
        let rev = store.current_revision();
        assert!(cache.wait_for(rev, Duration::from_secs(10)).await);
        assert_eq!(cache.object_count(), 1, "only the ConfigMap is held");

        let all = |_: &Value| true;
        let s = listed(
            cache
                .list_uncached(EVENTS, ListAt::Current, None, None, &all, true)
                .await
                .unwrap(),
        );
        assert_eq!(names(&s), ["e0", "e1", "e2", "e3", "e4", "e5"]);
        assert_eq!(s.revision, rev);
        assert_eq!(s.items[5]["metadata"]["resourceVersion"], rev.to_string());
        assert_eq!(s.more_after, None);

        // The state at an older revision: e5 did not exist, e0 had its first reason.
        let changed = Bytes::from(
            json!({"metadata": {"name": "e0", "namespace": "ns"}, "reason": "Killing"}).to_string(),
        );
        store.update(&key("e0"), changed, None).await.unwrap();
        let s = listed(
            cache
                .list_uncached(EVENTS, ListAt::Exact(rev - 1), None, None, &all, true)
                .await
                .unwrap(),
        );
        assert_eq!(names(&s), ["e0", "e1", "e2", "e3", "e4"]);
        assert_eq!(s.items[0]["reason"], "Pulled");
        assert!(matches!(
            cache
                .list_uncached(EVENTS, ListAt::Exact(rev + 10), None, None, &all, true)
                .await,
            Ok(SnapshotOutcome::Future { .. })
        ));
    }

    #[tokio::test]
    async fn pages_stop_at_the_limit_and_continue_after_the_last_key_read() {
        let (_store, cache, _shutdown) = setup().await;
        let all = |_: &Value| true;
        let first = listed(
            cache
                .list_uncached(EVENTS, ListAt::Current, None, Some(2), &all, true)
                .await
                .unwrap(),
        );
        assert_eq!(names(&first), ["e0", "e1"]);
        assert_eq!(first.more_after.as_deref(), Some(key("e1").as_str()));
        assert_eq!(first.remaining, Some(3), "counted without a filter");
        let at = ListAt::Exact(first.revision);
        let next = listed(
            cache
                .list_uncached(EVENTS, at, first.more_after.as_deref(), Some(3), &all, true)
                .await
                .unwrap(),
        );
        assert_eq!(names(&next), ["e2", "e3", "e4"]);
        assert_eq!(next.more_after, None, "nothing after the last key");

        // With a filter: the page holds `limit` matches and goes on after the last key read.
        let some =
            |o: &Value| ["e1", "e3", "e4"].contains(&o["metadata"]["name"].as_str().unwrap_or(""));
        let first = listed(
            cache
                .list_uncached(EVENTS, ListAt::Current, None, Some(2), &some, false)
                .await
                .unwrap(),
        );
        assert_eq!(names(&first), ["e1", "e3"]);
        assert_eq!(first.more_after.as_deref(), Some(key("e3").as_str()));
        assert_eq!(first.remaining, None, "not counted with a filter");
        let next = listed(
            cache
                .list_uncached(
                    EVENTS,
                    at,
                    first.more_after.as_deref(),
                    Some(2),
                    &some,
                    false,
                )
                .await
                .unwrap(),
        );
        assert_eq!(names(&next), ["e4"]);
        assert_eq!(next.more_after, None);
    }

    async fn next(watch: &mut CacheWatch) -> Arc<CacheEvent> {
        tokio::time::timeout(Duration::from_secs(10), watch.rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no event within 10 s"))
            .unwrap_or_else(|| panic!("the watch ended"))
    }

    #[tokio::test]
    async fn a_watch_lists_then_follows_the_store() {
        let (store, cache, _shutdown) = setup().await;
        let before = store.current_revision();
        let WatchStart::Watching(mut w) = cache
            .watch_uncached("/registry/events/ns/", WatchFrom::Snapshot)
            .await
            .unwrap()
        else {
            panic!("not watching")
        };
        assert_eq!(w.revision, before);
        let initial: Vec<(&str, EventType)> =
            w.initial.iter().map(|e| (e.key.as_str(), e.kind)).collect();
        assert_eq!(initial.len(), 5);
        assert!(initial.iter().all(|(_, k)| *k == EventType::Added));
        assert_eq!(initial[0].0, key("e0"));

        store
            .create(&key("e9"), event("e9", "Started"))
            .await
            .unwrap();
        store
            .update(&key("e9"), event("e9", "Killing"), None)
            .await
            .unwrap();
        store.delete(&key("e9"), None).await.unwrap();
        let added = next(&mut w).await;
        assert_eq!((added.kind, added.revision), (EventType::Added, before + 1));
        let modified = next(&mut w).await;
        assert_eq!(modified.kind, EventType::Modified);
        assert_eq!(modified.object["reason"], "Killing");
        assert_eq!(
            modified.prev.as_ref().map(|p| p["reason"].clone()),
            Some(json!("Started"))
        );
        let deleted = next(&mut w).await;
        assert_eq!(deleted.kind, EventType::Deleted);
        let sent: Value = serde_json::from_slice(deleted.encoded_object()).unwrap();
        assert_eq!(
            sent["metadata"]["resourceVersion"],
            (before + 3).to_string(),
            "a DELETED event carries the delete's resourceVersion"
        );
        assert_eq!(
            w.rx.try_recv().err(),
            Some(tokio::sync::mpsc::error::TryRecvError::Empty)
        );

        // From a revision: the store's later events, nothing listed.
        let WatchStart::Watching(mut after) = cache
            .watch_uncached("/registry/events/ns/", WatchFrom::After(before + 1))
            .await
            .unwrap()
        else {
            panic!("not watching")
        };
        assert!(after.initial.is_empty());
        assert_eq!(next(&mut after).await.revision, before + 2);
        assert_eq!(next(&mut after).await.revision, before + 3);
        assert_eq!(
            w.rx.complete_through(&cache),
            0,
            "a store watch claims no more than it sent"
        );
    }
}
