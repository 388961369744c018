//! Resources the watch cache does not hold: lists and watches of them are served from the store,
//! as kube-apiserver serves a resource whose watch-cache size is 0. Upstream's default sizes
//! (`DefaultWatchCacheSizes`, `pkg/kubeapiserver/default_storage_factory_builder.go`) disable the
//! cache for core and `events.k8s.io` Events, which share the storage `events`: they are written
//! often, read rarely and outnumber pods several times (a running pod has about six), so holding
//! them decoded cost more memory than the pods themselves (issue 17, item 7).
//!
//! Guarantees:
//! - **Nothing kept.** The feeder still applies their store events to the cache's revision (a
//!   consistent read waits for them as for any other write), but keeps no object, ring entry or
//!   live log; their writers offer nothing (there is nothing to hand over).
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

use super::pages::PAGE;
use super::{
    CacheEvent, CacheWatch, Defaulter, EventType, InitialPages, ListAt, Listed, LiveEvents, Select,
    Snapshot, SnapshotOutcome, WatchCache, WatchFrom, WatchStart,
};

/// The resource prefixes not cached by default: upstream's `DefaultWatchCacheSizes` (core and
/// `events.k8s.io` Events, one storage).
pub const UNCACHED_RESOURCES: &[&str] = &["/registry/events/"];

/// `bytes` stored at `revision`, decoded, defaulted and stamped with it (not compacted: the
/// object is sent once and dropped).
fn decode(kv: &KeyValue, defaulter: &Defaulter) -> Option<Value> {
    defaulter.decode(&kv.key, &kv.value, kv.mod_revision)
}

/// A store event as the watch handler sends it (`None`: undecodable, or a delete of nothing).
pub(super) fn cache_event(ev: Event, defaulter: &Defaulter) -> Option<CacheEvent> {
    let decoded = |kv: &KeyValue| decode(kv, defaulter).map(Arc::new);
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
    /// Expired or Future (never Listed).
    Not(SnapshotOutcome<Listed>),
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
    /// Expired or Future (never Listed).
    Done(SnapshotOutcome<Listed>),
}

impl WatchCache {
    /// Whether the cache holds the objects of the resource `resource_prefix`
    /// (`/registry/<storage>/`); those it does not are listed and watched from the store
    /// ([`list_resource`](Self::list_resource), [`watch_resource`](Self::watch_resource)).
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

    /// The objects of the resource `resource_prefix` under `key_prefix` that pass `filter`, at
    /// `at`, after key `start_after`, at most `limit`: from the cache's snapshot, or read from
    /// the store for a resource the cache does not hold (see the module docs). `everything`:
    /// `filter` passes every object (the store's remaining count is then the answer's).
    #[allow(clippy::too_many_arguments)]
    pub async fn list_resource(
        &self,
        resource_prefix: &str,
        key_prefix: &str,
        at: ListAt,
        start_after: Option<&str>,
        limit: Option<usize>,
        select: Select<'_>,
    ) -> Result<SnapshotOutcome<Listed>, store::Error> {
        if self.caches(resource_prefix) {
            return Ok(self.list(resource_prefix, key_prefix, at, start_after, limit, select));
        }
        let listed = self
            .list_keyed(
                key_prefix,
                at,
                start_after,
                limit,
                &|o| select.matches(o),
                select.is_everything(),
            )
            .await?;
        Ok(match listed {
            Keyed::Listed(page) => SnapshotOutcome::Listed(Snapshot {
                items: page
                    .items
                    .into_iter()
                    .map(|(_, v)| Listed::object_of(v))
                    .collect(),
                revision: page.revision,
                more_after: page.more_after,
                remaining: page.remaining,
            }),
            Keyed::Not(outcome) => outcome,
        })
    }

    /// A watch of the resource `resource_prefix` (events under `key_prefix` are the caller's
    /// to pick): the cache's, or for a resource the cache does not hold its own store watch of
    /// `key_prefix` (see the module docs).
    pub async fn watch_resource(
        &self,
        resource_prefix: &str,
        key_prefix: &str,
        from: WatchFrom,
    ) -> Result<WatchStart, store::Error> {
        if self.caches(resource_prefix) {
            return Ok(self.watch_paged(resource_prefix, key_prefix, from));
        }
        self.watch_uncached(key_prefix, from).await
    }

    /// The objects of an uncached resource, read from the store, each with its key.
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
                let decoded = decode(&kv, &self.defaulter);
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
    /// module docs): a store watch no consistent read waits on; from no revision, the first
    /// page of the collection at the current revision, the rest read as the watcher sends them.
    async fn watch_uncached(
        &self,
        key_prefix: &str,
        from: WatchFrom,
    ) -> Result<WatchStart, store::Error> {
        let (initial, pages, after) = match from {
            WatchFrom::After(rev) => (Vec::new(), None, rev),
            WatchFrom::Snapshot => {
                let mut pages = StorePages {
                    store: self.store.clone(),
                    defaulter: self.defaulter.clone(),
                    key_prefix: key_prefix.to_string(),
                    next: Some(ListOptions {
                        limit: Some(PAGE),
                        revision: None,
                        continue_token: None,
                    }),
                    revision: 0,
                };
                let first = pages.next().await.unwrap_or(Ok(Vec::new()))?;
                let at = pages.revision;
                (
                    first,
                    pages
                        .next
                        .is_some()
                        .then(|| Box::new(InitialPages::Store(pages))),
                    at,
                )
            }
        };
        match self.store.watch_passive(key_prefix, after, self.buffer)? {
            WatchOutcome::Watching(stream) => Ok(WatchStart::Watching(CacheWatch {
                initial,
                pages,
                rx: LiveEvents::from_store(stream, self.defaulter.clone()),
                revision: after,
                skip_through: after,
            })),
            WatchOutcome::Expired { compacted } => Ok(WatchStart::Expired { oldest: compacted }),
        }
    }
}

/// The initial ADDED events of an uncached watch from no revision after its first page, read
/// from the store a page at a time as the watcher sends them, all at the first page's
/// revision: a watcher holds one page, never the whole collection.
pub struct StorePages {
    store: Arc<dyn store::Store>,
    defaulter: Defaulter,
    key_prefix: String,
    /// The next page's request; `None` once the last was read.
    next: Option<ListOptions>,
    /// The revision of the pages (the first page's).
    revision: Revision,
}

impl std::fmt::Debug for StorePages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorePages")
            .field("key_prefix", &self.key_prefix)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl StorePages {
    /// The next page's events; `None` once every page was read. An error (the revision was
    /// compacted since the first page) ends the watch: its client watches again.
    pub async fn next(&mut self) -> Option<Result<Vec<Arc<CacheEvent>>, store::Error>> {
        let opts = self.next.take()?;
        let page = match self.store.list(&self.key_prefix, opts).await {
            Ok(ListOutcome::Listed(page)) => page,
            Ok(_) => return Some(Err(store::Error::Failed)),
            Err(e) => return Some(Err(e)),
        };
        self.revision = page.revision;
        self.next = page.continue_token.map(|token| ListOptions {
            limit: Some(PAGE),
            revision: None,
            continue_token: Some(token),
        });
        let events = page
            .items
            .into_iter()
            .filter_map(|kv| match decode(&kv, &self.defaulter) {
                Some(obj) => Some(Arc::new(CacheEvent::new(
                    EventType::Added,
                    kv.key,
                    page.revision,
                    Arc::new(obj),
                    None,
                ))),
                None => {
                    tracing::warn!(key = %kv.key, "undecodable object skipped");
                    None
                }
            })
            .collect();
        Some(Ok(events))
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

    /// A store with events `e0`–`e4`, a ConfigMap and a Lease, and a cache over it.
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
        // A resource after the events in key order: the relist skips the events, not it.
        let lease = Bytes::from(json!({"metadata": {"name": "l", "namespace": "ns"}}).to_string());
        store.create("/registry/leases/ns/l", lease).await.unwrap();
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

    /// One page of the events at `at`, after `after`, of at most `limit` items passing `filter`.
    async fn page(
        cache: &WatchCache,
        at: ListAt,
        after: Option<&str>,
        limit: Option<usize>,
        filter: &(dyn Fn(&Value) -> bool + Sync),
        everything: bool,
    ) -> SnapshotOutcome {
        let select = if everything {
            Select::All
        } else {
            Select::Object(filter)
        };
        cache
            .list_resource(EVENTS, EVENTS, at, after, limit, select)
            .await
            .unwrap()
            .into_objects()
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
        assert_eq!(
            cache.object_count(),
            2,
            "only the ConfigMap and the Lease are held"
        );
        assert!(cache.get("/registry/leases/ns/l").is_some());

        let all = |_: &Value| true;
        let s = listed(page(&cache, ListAt::Current, None, None, &all, true).await);
        assert_eq!(names(&s), ["e0", "e1", "e2", "e3", "e4", "e5"]);
        assert_eq!(s.revision, rev);
        assert_eq!(s.items[5]["metadata"]["resourceVersion"], rev.to_string());
        assert_eq!(s.more_after, None);

        // The state at an older revision: e5 did not exist, e0 had its first reason.
        let changed = Bytes::from(
            json!({"metadata": {"name": "e0", "namespace": "ns"}, "reason": "Killing"}).to_string(),
        );
        store.update(&key("e0"), changed, None).await.unwrap();
        let s = listed(page(&cache, ListAt::Exact(rev - 1), None, None, &all, true).await);
        assert_eq!(names(&s), ["e0", "e1", "e2", "e3", "e4"]);
        assert_eq!(s.items[0]["reason"], "Pulled");
        assert!(matches!(
            page(&cache, ListAt::Exact(rev + 10), None, None, &all, true).await,
            SnapshotOutcome::Future { .. }
        ));
    }

    #[tokio::test]
    async fn pages_stop_at_the_limit_and_continue_after_the_last_key_read() {
        let (_store, cache, _shutdown) = setup().await;
        let all = |_: &Value| true;
        let first = listed(page(&cache, ListAt::Current, None, Some(2), &all, true).await);
        assert_eq!(names(&first), ["e0", "e1"]);
        assert_eq!(first.more_after.as_deref(), Some(key("e1").as_str()));
        assert_eq!(first.remaining, Some(3), "counted without a filter");
        let at = ListAt::Exact(first.revision);
        let next = listed(page(&cache, at, first.more_after.as_deref(), Some(3), &all, true).await);
        assert_eq!(names(&next), ["e2", "e3", "e4"]);
        assert_eq!(next.more_after, None, "nothing after the last key");

        // With a filter: the page holds `limit` matches and goes on after the last key read.
        let some =
            |o: &Value| ["e1", "e3", "e4"].contains(&o["metadata"]["name"].as_str().unwrap_or(""));
        let first = listed(page(&cache, ListAt::Current, None, Some(2), &some, false).await);
        assert_eq!(names(&first), ["e1", "e3"]);
        assert_eq!(first.more_after.as_deref(), Some(key("e3").as_str()));
        assert_eq!(first.remaining, None, "not counted with a filter");
        let next = listed(
            page(
                &cache,
                at,
                first.more_after.as_deref(),
                Some(2),
                &some,
                false,
            )
            .await,
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
            .watch_resource(EVENTS, "/registry/events/ns/", WatchFrom::Snapshot)
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
        assert!(w.pages.is_none(), "one page holds them all");

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
            modified.prev().as_ref().map(|p| p["reason"].clone()),
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
            .watch_resource(EVENTS, "/registry/events/ns/", WatchFrom::After(before + 1))
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

    #[tokio::test]
    async fn a_watch_from_no_revision_reads_the_collection_a_page_at_a_time() {
        let (store, cache, _shutdown) = setup().await;
        for i in 5..PAGE + 205 {
            let name = format!("e{i:05}");
            store
                .create(&key(&name), event(&name, "Pulled"))
                .await
                .unwrap();
        }
        let at = store.current_revision();
        let WatchStart::Watching(mut w) = cache
            .watch_resource(EVENTS, "/registry/events/ns/", WatchFrom::Snapshot)
            .await
            .unwrap()
        else {
            panic!("not watching")
        };
        assert_eq!((w.initial.len(), w.revision), (PAGE, at));
        // Written after the watch began: not in the later pages (read at the first one's
        // revision), delivered live.
        store
            .create(&key("late"), event("late", "Started"))
            .await
            .unwrap();
        let mut pages = w.pages.take().unwrap_or_else(|| panic!("more pages"));
        let rest = pages.next().await.unwrap().unwrap();
        assert_eq!(rest.len(), 205);
        assert!(rest
            .iter()
            .all(|e| e.revision == at && e.kind == EventType::Added));
        assert!(pages.next().await.is_none());
        assert_eq!(next(&mut w).await.key, key("late"));
    }
}
