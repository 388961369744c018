//! Consistent list snapshots from the watch cache.
//!
//! The state at an older revision `T` is the current state with every ring event after `T`
//! undone: for each key the first event after `T` tells its state at `T` (`prev`, or absent for a
//! creation). Items are returned in key order, so pages are stable and a continue token is
//! simply (revision, last key).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use store::Revision;

use super::{ResourceCache, WatchCache};

/// At which revision a list is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListAt {
    /// The cache's current revision.
    Current,
    /// Exactly this revision.
    Exact(Revision),
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Matching items in key order.
    pub items: Vec<Arc<Value>>,
    /// Revision the page is consistent at.
    pub revision: Revision,
    /// Key of the last item when more matching items remain.
    pub more_after: Option<String>,
    /// Matching items after this page, when counted.
    pub remaining: Option<u64>,
}

/// Outcome of [`WatchCache::list`].
#[derive(Debug, Clone)]
pub enum SnapshotOutcome {
    /// The page.
    Listed(Snapshot),
    /// The revision is older than the ring covers.
    Expired {
        /// Oldest revision that can be served.
        oldest: Revision,
    },
    /// The revision is newer than the cache.
    Future {
        /// The cache's revision.
        current: Revision,
    },
}

impl WatchCache {
    /// Items of `resource_prefix` whose keys start with `key_prefix` and that pass `filter`, at
    /// `at`, after key `start_after`, at most `limit` of them.
    pub fn list(
        &self,
        resource_prefix: &str,
        key_prefix: &str,
        at: ListAt,
        start_after: Option<&str>,
        limit: Option<usize>,
        filter: &dyn Fn(&Value) -> bool,
    ) -> SnapshotOutcome {
        let inner = self.inner.read();
        let current = inner.revision;
        let revision = match at {
            ListAt::Current => current,
            ListAt::Exact(r) if r > current => return SnapshotOutcome::Future { current },
            ListAt::Exact(r) => r,
        };
        let empty = ResourceCache {
            oldest: inner.base,
            ..Default::default()
        };
        let res = inner.resources.get(resource_prefix).unwrap_or(&empty);
        if revision < current && revision < res.oldest {
            return SnapshotOutcome::Expired { oldest: res.oldest };
        }
        // Keys whose state at `revision` differs from now: the first event after it decides.
        let mut overrides: BTreeMap<&str, Option<&Arc<Value>>> = BTreeMap::new();
        if revision < current {
            let start = res.ring.partition_point(|e| e.revision <= revision);
            for e in res.ring.iter().skip(start) {
                if e.key.starts_with(key_prefix) {
                    overrides.entry(e.key.as_str()).or_insert(e.prev.as_ref());
                }
            }
        }
        let lower = match start_after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Included(key_prefix),
        };
        let mut now = res
            .objects
            .range::<str, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(key_prefix))
            .map(|(k, v)| (k.as_str(), v))
            .peekable();
        let mut old = overrides
            .iter()
            .filter(|(k, _)| match start_after {
                Some(s) => **k > s,
                None => true,
            })
            .map(|(k, v)| (*k, *v))
            .peekable();
        let mut items = Vec::new();
        let mut more_after = None;
        let mut remaining = 0u64;
        let mut last_key: Option<&str> = None;
        loop {
            // Merge the two key-ordered sequences; an override wins for its key.
            let next = match (now.peek(), old.peek()) {
                (None, None) => break,
                (Some((nk, _)), Some((ok, _))) if ok <= nk => {
                    let (k, v) = old.next().map_or(("", None), |x| x);
                    if Some(&k) == now.peek().map(|(nk, _)| nk) {
                        now.next();
                    }
                    (k, v)
                }
                (Some(_), _) => {
                    let (k, v) = now.next().map_or(("", None), |(k, v)| (k, Some(v)));
                    (k, v)
                }
                (None, Some(_)) => old.next().map_or(("", None), |x| x),
            };
            let (key, value) = next;
            let Some(value) = value else { continue };
            if !filter(value) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                if more_after.is_none() {
                    more_after = last_key.map(String::from);
                }
                remaining += 1;
                continue;
            }
            last_key = Some(key);
            items.push(value.clone());
        }
        SnapshotOutcome::Listed(Snapshot {
            items,
            revision,
            more_after,
            remaining: (remaining > 0).then_some(remaining),
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::watch_cache::{CacheEvent, EventType, Inner, ResourceCache, WatchFrom, WatchStart};
    use parking_lot::RwLock;
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicU64;

    fn obj(name: &str, rv: u64) -> Arc<Value> {
        Arc::new(json!({ "metadata": { "name": name, "resourceVersion": rv.to_string() } }))
    }

    /// A cache whose pods went through: rv 10 a,b,c exist; 11 modify b; 12 delete c; 13 add d.
    /// A cache of pods `a`–`d` at revision 13, its ring from 10 holding at most `history` events.
    pub(in crate::watch_cache) fn cache(history: usize) -> WatchCache {
        let p = "/registry/pods/";
        let k = |n: &str| format!("/registry/pods/ns/{n}");
        let mut res = ResourceCache {
            oldest: 10,
            ..Default::default()
        };
        res.objects.insert(k("a"), obj("a", 5));
        res.objects.insert(k("b"), obj("b", 11));
        res.objects.insert(k("d"), obj("d", 13));
        let ev = |kind, n: &str, rv, o: Arc<Value>, prev| {
            Arc::new(CacheEvent::new(kind, k(n), rv, o, prev))
        };
        res.ring.push_back(ev(
            EventType::Modified,
            "b",
            11,
            obj("b", 11),
            Some(obj("b", 6)),
        ));
        res.ring.push_back(ev(
            EventType::Deleted,
            "c",
            12,
            obj("c", 12),
            Some(obj("c", 7)),
        ));
        res.ring
            .push_back(ev(EventType::Added, "d", 13, obj("d", 13), None));
        let mut resources = HashMap::new();
        resources.insert(p.to_string(), res);
        let (progress, _) = tokio::sync::watch::channel(13);
        WatchCache {
            inner: RwLock::new(Inner {
                revision: 13,
                base: 10,
                resources,
            }),
            progress,
            dispatched: AtomicU64::new(13),
            offers: Default::default(),
            relists: AtomicU64::new(0),
            history,
            buffer: 8,
            store: Arc::new(
                store::MemoryStore::new(store::StoreConfig::default())
                    .unwrap_or_else(|e| panic!("memory store: {e}")),
            ),
            uncached: vec!["/registry/events/".to_string()],
            defaulter: Default::default(),
        }
    }

    fn names(o: SnapshotOutcome) -> Vec<(String, String)> {
        match o {
            SnapshotOutcome::Listed(s) => s
                .items
                .iter()
                .map(|v| {
                    (
                        v["metadata"]["name"].as_str().unwrap_or("").to_string(),
                        v["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap_or("")
                            .to_string(),
                    )
                })
                .collect(),
            other => panic!("not listed: {other:?}"),
        }
    }

    fn pair(n: &str, rv: &str) -> (String, String) {
        (n.to_string(), rv.to_string())
    }

    #[test]
    fn past_snapshots_undo_ring_events() {
        let c = cache(100);
        let all = |_: &Value| true;
        let p = "/registry/pods/";
        assert_eq!(
            names(c.list(p, p, ListAt::Current, None, None, &all)),
            [pair("a", "5"), pair("b", "11"), pair("d", "13")]
        );
        assert_eq!(
            names(c.list(p, p, ListAt::Exact(10), None, None, &all)),
            [pair("a", "5"), pair("b", "6"), pair("c", "7")]
        );
        assert_eq!(
            names(c.list(p, p, ListAt::Exact(12), None, None, &all)),
            [pair("a", "5"), pair("b", "11")]
        );
        // Pages at a past revision continue after the last key.
        let page = c.list(p, p, ListAt::Exact(10), None, Some(2), &all);
        let SnapshotOutcome::Listed(s) = page else {
            panic!("not listed")
        };
        assert_eq!(s.items.len(), 2);
        assert_eq!(s.more_after.as_deref(), Some("/registry/pods/ns/b"));
        assert_eq!(s.remaining, Some(1));
        assert_eq!(
            names(c.list(
                p,
                p,
                ListAt::Exact(10),
                s.more_after.as_deref(),
                Some(2),
                &all
            )),
            [pair("c", "7")]
        );
        assert!(matches!(
            c.list(p, p, ListAt::Exact(9), None, None, &all),
            SnapshotOutcome::Expired { oldest: 10 }
        ));
        assert!(matches!(
            c.list(p, p, ListAt::Exact(14), None, None, &all),
            SnapshotOutcome::Future { current: 13 }
        ));
    }

    #[test]
    fn watches_replay_the_ring_or_expire() {
        let c = cache(100);
        let p = "/registry/pods/";
        let replay = match c.watch(p, WatchFrom::After(11)) {
            WatchStart::Watching(w) => {
                let revs: Vec<u64> = w.initial.iter().map(|e| e.revision).collect();
                assert_eq!(revs, [12, 13]);
                assert_eq!(w.skip_through, 11);
                w
            }
            other => panic!("{other:?}"),
        };
        assert!(matches!(
            c.watch(p, WatchFrom::After(9)),
            WatchStart::Expired { oldest: 10 }
        ));
        let snapshot = match c.watch(p, WatchFrom::Snapshot) {
            WatchStart::Watching(w) => {
                assert_eq!(w.initial.len(), 3);
                w
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(c.watcher_count(p), 2);
        drop((replay, snapshot));
        assert_eq!(
            c.watcher_count(p),
            0,
            "a dropped watch leaves no reader behind"
        );
    }

    #[test]
    fn a_deleted_event_goes_out_with_the_delete_revision_without_copying() {
        let last = obj("a", 7);
        let ev = CacheEvent {
            stamp_revision: true,
            ..CacheEvent::new(
                EventType::Deleted,
                "/registry/pods/ns/a".into(),
                9,
                last.clone(),
                Some(last.clone()),
            )
        };
        assert!(Arc::ptr_eq(&ev.object, &last));
        let sent: Value = serde_json::from_slice(ev.encoded_object()).unwrap();
        assert_eq!(sent["metadata"]["resourceVersion"], "9");
        assert_eq!(ev.output_object()["metadata"]["resourceVersion"], "9");
        assert_eq!(
            last["metadata"]["resourceVersion"], "7",
            "the shared object is untouched"
        );
    }
}
