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
mod tests {
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
    fn cache(history: usize) -> WatchCache {
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
            offers: Default::default(),
            relists: AtomicU64::new(0),
            history,
            buffer: 8,
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
        match c.watch(p, WatchFrom::After(11)) {
            WatchStart::Watching(w) => {
                let revs: Vec<u64> = w.initial.iter().map(|e| e.revision).collect();
                assert_eq!(revs, [12, 13]);
                assert_eq!(w.skip_through, 11);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            c.watch(p, WatchFrom::After(9)),
            WatchStart::Expired { oldest: 10 }
        ));
        match c.watch(p, WatchFrom::Snapshot) {
            WatchStart::Watching(w) => assert_eq!(w.initial.len(), 3),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.watcher_count(p), 2);
    }

    #[test]
    fn an_offer_serves_only_its_own_event_and_never_outlives_it() {
        let c = cache(4);
        let obj =
            |n: u64| Arc::new(json!({"metadata": {"name": "p", "resourceVersion": n.to_string()}}));
        let a = obj(20);
        let json = crate::watch_cache::ObjectJson::encode(&json!({})).unwrap();
        c.offer("/registry/pods/ns/p", 20, a.clone(), Some(json.clone()));
        // An earlier event of the key leaves the offer for its own.
        assert!(c.take_offer("/registry/pods/ns/p", 19, None).is_none());
        let got = c.take_offer("/registry/pods/ns/p", 20, None);
        assert!(got.is_some_and(
            |(g, j)| Arc::ptr_eq(&g, &a) && j.is_some_and(|j| j.text() == json.text())
        ));
        assert!(
            c.take_offer("/registry/pods/ns/p", 20, None).is_none(),
            "used once"
        );
        // An offer arriving after its event was applied is dropped, not kept.
        c.offer("/registry/pods/ns/q", 18, obj(18), None);
        assert!(c.offers.lock().by_key.is_empty());
        // An offer whose event went by without it (a relist) is dropped by the key's next event.
        c.offer("/registry/pods/ns/r", 21, obj(21), None);
        assert!(c.take_offer("/registry/pods/ns/r", 22, None).is_none());
        assert!(c.offers.lock().by_key.is_empty());
    }

    #[test]
    fn a_pending_offer_goes_to_whichever_comes_first_writer_or_event() {
        let c = cache(4);
        let key = "/registry/pods/ns/p";
        let stored = json!({"metadata": {"name": "p"}, "spec": {"x": 1}});
        let json = crate::watch_cache::ObjectJson::encode(&stored).unwrap();
        let bytes = json.text().clone();
        assert_eq!(bytes, serde_json::to_vec(&stored).unwrap());
        let text_at = |rev: u64| {
            let mut o = stored.clone();
            o["metadata"]["resourceVersion"] = json!(rev.to_string());
            bytes::Bytes::from(serde_json::to_vec(&o).unwrap())
        };
        // The event first: it takes the object (by its bytes), stamped, and its text at the
        // event's revision; the writer finds none.
        c.offer_pending(key, json.clone(), stored.clone()).unwrap();
        let other = bytes::Bytes::from_static(br#"{"metadata":{"name":"p"}}"#);
        assert!(
            c.take_offer(key, 30, Some(&other)).is_none(),
            "another write's event"
        );
        let (got, json_31) = c.take_offer(key, 31, Some(&bytes)).unwrap();
        assert_eq!(got["metadata"]["resourceVersion"], "31");
        assert_eq!(
            json_31.map(|j| j.with_resource_version("31")),
            Some(text_at(31))
        );
        assert!(c.settle(key, &bytes, 31).is_none());
        assert!(c.offers.lock().by_key.is_empty());
        // The writer first: it settles the object and its text, the event then takes both.
        c.offer_pending(key, json.clone(), stored.clone()).unwrap();
        assert!(
            c.offer_pending(key, json.clone(), stored.clone()).is_err(),
            "one at a time"
        );
        let mine = c.settle(key, &bytes, 40).unwrap();
        assert_eq!(mine["metadata"]["resourceVersion"], "40");
        let (got, json_40) = c.take_offer(key, 40, Some(&bytes)).unwrap();
        assert!(Arc::ptr_eq(&got, &mine));
        assert_eq!(
            json_40.map(|j| j.with_resource_version("40")),
            Some(text_at(40))
        );
        // A write that did not happen takes its object back.
        c.offer_pending(key, json.clone(), stored.clone()).unwrap();
        assert_eq!(c.withdraw(key, &bytes), Some(stored));
        assert!(c.offers.lock().by_key.is_empty());
    }

    #[test]
    fn a_handed_over_text_serves_the_event_the_delete_response_and_the_deleted_event() {
        use crate::watch_cache::ObjectJson;
        use store::{Event, EventKind, KeyValue};
        let c = cache(4);
        let key = "/registry/pods/ns/t";
        let stored = json!({"metadata": {"name": "t", "uid": "u"}, "spec": {"x": 1}});
        let at = |rv: &str| {
            let mut o = stored.clone();
            o["metadata"]["resourceVersion"] = json!(rv);
            bytes::Bytes::from(serde_json::to_vec(&o).unwrap())
        };
        let last_text = |c: &WatchCache| {
            let inner = c.inner.read();
            let ev = inner.resources["/registry/pods/"]
                .ring
                .back()
                .cloned()
                .unwrap();
            (ev.encoded.get().cloned(), ev.encoded_object().clone())
        };
        let json = ObjectJson::encode(&stored).unwrap();
        c.offer_pending(key, json.clone(), stored.clone()).unwrap();
        let kv = KeyValue {
            key: key.into(),
            value: json.text().clone(),
            create_revision: 50,
            mod_revision: 50,
        };
        c.apply(Event {
            kind: EventKind::Put,
            key: key.into(),
            revision: 50,
            value: Some(kv.clone()),
            prev: None,
        });
        // Made when the event was applied, not serialised on first use.
        assert_eq!(last_text(&c), (Some(at("50")), at("50")));
        let text = |j: Option<ObjectJson>| j.map(|j| j.with_resource_version("51"));
        assert_eq!(text(c.json_at(key, 50)), Some(at("51")));
        assert!(
            c.json_at(key, 49).is_none(),
            "only at the object's revision"
        );
        c.apply(Event {
            kind: EventKind::Delete,
            key: key.into(),
            revision: 51,
            value: None,
            prev: Some(kv.clone()),
        });
        assert_eq!(last_text(&c), (Some(at("51")), at("51")));
        assert!(c.json_at(key, 50).is_none());
        // An object that came from the store's bytes has no text: its events serialise it.
        c.apply(Event {
            kind: EventKind::Put,
            key: key.into(),
            revision: 52,
            value: Some(KeyValue {
                mod_revision: 52,
                ..kv
            }),
            prev: None,
        });
        assert_eq!(last_text(&c), (None, at("52")));
        assert!(c.json_at(key, 52).is_none());
        assert!(c.inner.read().resources["/registry/pods/"].texts.is_empty());
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
