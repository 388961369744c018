//! Consistent list snapshots from the watch cache.
//!
//! The state at an older revision `T` is the current state with every ring change after `T`
//! undone: for each key the first change after `T` tells its state at `T` (its `prev` entry, or
//! absent for a creation). Items are returned in key order, so pages are stable and a continue token is
//! simply (revision, last key).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use store::Revision;

use super::{Entry, ResourceCache, SelectorView, WatchCache};

/// At which revision a list is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListAt {
    /// The cache's current revision.
    Current,
    /// Exactly this revision.
    Exact(Revision),
}

/// One page of a list: of objects, or of [`Listed`] items.
#[derive(Debug, Clone)]
pub struct Snapshot<T = Arc<Value>> {
    /// Matching items in key order.
    pub items: Vec<T>,
    /// Revision the page is consistent at.
    pub revision: Revision,
    /// Key of the last item when more matching items remain.
    pub more_after: Option<String>,
    /// Matching items after this page, when counted.
    pub remaining: Option<u64>,
}

/// Outcome of [`WatchCache::list`].
#[derive(Debug, Clone)]
pub enum SnapshotOutcome<T = Arc<Value>> {
    /// The page.
    Listed(Snapshot<T>),
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

/// A filter that reads only what a selector view holds (labels, name, namespace and the kind's
/// field labels: [`super::StorageDefaults::selector_view`]), so it tells on a held object's view
/// as it would on the object.
pub trait ViewFilter: Sync {
    /// Whether the object of `view` passes.
    fn on_view(&self, view: &SelectorView) -> bool;
    /// Whether `obj` passes; the same answer as [`on_view`](Self::on_view) of its view.
    fn on_object(&self, obj: &Value) -> bool;
}

/// Which objects a list keeps.
#[derive(Clone, Copy)]
pub enum Select<'a> {
    /// Every one.
    All,
    /// Those the filter passes; a held object is told on its view, without decoding it, when
    /// it has one.
    OnView(&'a dyn ViewFilter),
    /// Those the function passes, read on the whole object.
    Object(&'a (dyn Fn(&Value) -> bool + Sync)),
}

impl Select<'_> {
    /// Whether this keeps every object.
    pub fn is_everything(&self) -> bool {
        matches!(self, Select::All)
    }

    /// Whether `obj` (a whole object) passes.
    pub fn matches(&self, obj: &Value) -> bool {
        match self {
            Select::All => true,
            Select::OnView(f) => f.on_object(obj),
            Select::Object(f) => f(obj),
        }
    }

    /// Whether the held `entry` passes, if that can be told without decoding it.
    pub(super) fn decides(&self, entry: &Entry) -> Option<bool> {
        match (self, &entry.view) {
            (Select::All, _) => Some(true),
            (Select::OnView(f), Some(view)) => Some(f.on_view(view)),
            _ => None,
        }
    }
}

impl SnapshotOutcome<Listed> {
    /// The outcome with its items decoded.
    pub fn into_objects(self) -> SnapshotOutcome {
        match self {
            SnapshotOutcome::Listed(page) => SnapshotOutcome::Listed(Snapshot {
                items: page.items.iter().filter_map(Listed::object).collect(),
                revision: page.revision,
                more_after: page.more_after,
                remaining: page.remaining,
            }),
            SnapshotOutcome::Expired { oldest } => SnapshotOutcome::Expired { oldest },
            SnapshotOutcome::Future { current } => SnapshotOutcome::Future { current },
        }
    }
}

/// A state a list may return: a held entry (a current state, or a past one the ring keeps), or a
/// decoded object (decoded to be told on, or read from the store).
#[derive(Debug, Clone)]
enum Item {
    Held(Arc<Entry>),
    Decoded(Arc<Value>),
}

impl Item {
    fn object(&self) -> Option<Arc<Value>> {
        match self {
            Item::Held(entry) => entry.object(),
            Item::Decoded(object) => Some(object.clone()),
        }
    }
}

/// One object of a list, as the cache has it: a decoded tree, or its held text, which a response
/// writes with a copy instead of decoding and serialising it
/// ([`list`](WatchCache::list)).
#[derive(Debug, Clone)]
pub struct Listed(Item);

impl Listed {
    /// A decoded object.
    pub fn object_of(object: Arc<Value>) -> Self {
        Listed(Item::Decoded(object))
    }

    /// The object, decoded if it must be (`None` only for a text that does not parse).
    pub fn object(&self) -> Option<Arc<Value>> {
        self.0.object()
    }

    /// What the kind's selectors read of a held object, with its `apiVersion` and `kind`
    /// ([`super::StorageDefaults::selector_view`]): whether its text can be sent as it is.
    /// `None` for a decoded object, or a kind without views.
    pub fn held_view(&self) -> Option<&SelectorView> {
        match &self.0 {
            Item::Held(entry) => entry.view.as_ref(),
            Item::Decoded(_) => None,
        }
    }

    /// Writes a held object's JSON, resourceVersion set, to `out` (exactly what serialising the
    /// object writes); `false`, writing nothing, for a decoded object.
    pub fn write_held_text(&self, out: &mut Vec<u8>) -> bool {
        match &self.0 {
            Item::Held(entry) => {
                entry
                    .json
                    .write_with_resource_version(&entry.revision.to_string(), out);
                true
            }
            Item::Decoded(_) => false,
        }
    }
}

/// What a list takes under the cache's lock: the page as far as it could be told, and from the
/// first item whose entry must be decoded to tell on, every later candidate (decoded and
/// filtered after the lock).
struct Taken {
    /// Items that pass, in key order, up to the limit.
    page: Vec<Item>,
    /// Key of the page's last item.
    last_key: Option<String>,
    /// Set when an item that passes came after a full page: the page's last key.
    more_after: Option<String>,
    /// Items that pass after a full page.
    remaining: u64,
    /// From the first undecided item on, every candidate: `(key, item, passes)`, `passes` false
    /// for an undecided one.
    rest: Vec<(String, Item, bool)>,
}

impl WatchCache {
    /// Objects of `resource_prefix` whose keys start with `key_prefix` and that `select` keeps,
    /// at `at`, after key `start_after`, at most `limit` of them, as the cache has them: an object
    /// that passes on its view (or with no selector) is not decoded ([`Listed`]).
    ///
    /// The items are chosen under the cache's read lock, and decoded (those whose trees are
    /// gone, [`Entry`], told on as a whole) after it: a list of cold objects never holds up the
    /// feeder.
    pub fn list(
        &self,
        resource_prefix: &str,
        key_prefix: &str,
        at: ListAt,
        start_after: Option<&str>,
        limit: Option<usize>,
        select: Select<'_>,
    ) -> SnapshotOutcome<Listed> {
        let (taken, revision) = {
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
            let taken = take(
                res,
                revision,
                current,
                key_prefix,
                start_after,
                limit,
                select,
            );
            (taken, revision)
        };
        let Taken {
            page,
            mut last_key,
            mut more_after,
            mut remaining,
            rest,
        } = taken;
        let mut items: Vec<Listed> = page.into_iter().map(Listed).collect();
        for (key, item, passes) in rest {
            let item = if passes {
                item
            } else {
                let Some(object) = item.object() else {
                    continue;
                };
                if !select.matches(&object) {
                    continue;
                }
                // Decoded to be told on: the tree is at hand.
                Item::Decoded(object)
            };
            if limit.is_some_and(|l| items.len() >= l) {
                if more_after.is_none() {
                    more_after = last_key.take();
                }
                remaining += 1;
                continue;
            }
            last_key = Some(key);
            items.push(Listed(item));
        }
        SnapshotOutcome::Listed(Snapshot {
            items,
            revision,
            more_after,
            remaining: (remaining > 0).then_some(remaining),
        })
    }

    /// Every object of `resource_prefix` under `key_prefix` that `select` keeps, decoded, as of
    /// the cache's revision (which a list always can serve): what the server's own readers
    /// (admission, authorization) look at.
    pub fn current(
        &self,
        resource_prefix: &str,
        key_prefix: &str,
        select: Select<'_>,
    ) -> Vec<Arc<Value>> {
        match self
            .list(
                resource_prefix,
                key_prefix,
                ListAt::Current,
                None,
                None,
                select,
            )
            .into_objects()
        {
            SnapshotOutcome::Listed(page) => page.items,
            SnapshotOutcome::Expired { .. } | SnapshotOutcome::Future { .. } => Vec::new(),
        }
    }
}

/// The candidates of a list in `res` at `revision` (see [`Taken`]).
fn take(
    res: &ResourceCache,
    revision: Revision,
    current: Revision,
    key_prefix: &str,
    start_after: Option<&str>,
    limit: Option<usize>,
    select: Select<'_>,
) -> Taken {
    // Keys whose state at `revision` differs from now: the first event after it decides.
    let mut overrides: BTreeMap<&str, Option<&Arc<Entry>>> = BTreeMap::new();
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
        .map(|(k, e)| (k.as_str(), e))
        .peekable();
    let mut old = overrides
        .iter()
        .filter(|(k, _)| start_after.is_none_or(|s| **k > s))
        .map(|(k, v)| (*k, *v))
        .peekable();
    let mut taken = Taken {
        page: Vec::new(),
        last_key: None,
        more_after: None,
        remaining: 0,
        rest: Vec::new(),
    };
    let mut last_key: Option<&str> = None;
    loop {
        // Merge the two key-ordered sequences; an override wins for its key.
        let (key, item) = match (now.peek(), old.peek()) {
            (None, None) => break,
            (Some((nk, _)), Some((ok, _))) if ok <= nk => {
                let Some((k, v)) = old.next() else { break };
                if Some(&k) == now.peek().map(|(nk, _)| nk) {
                    now.next();
                }
                (k, v.map(|v| Item::Held(v.clone())))
            }
            (Some(_), _) => {
                let Some((k, e)) = now.next() else { break };
                (k, Some(Item::Held(e.clone())))
            }
            (None, Some(_)) => {
                let Some((k, v)) = old.next() else { break };
                (k, v.map(|v| Item::Held(v.clone())))
            }
        };
        let Some(item) = item else { continue };
        let passes = match &item {
            Item::Held(entry) => select.decides(entry),
            Item::Decoded(object) => Some(select.matches(object)),
        };
        if passes == Some(false) {
            continue;
        }
        if passes.is_none() || !taken.rest.is_empty() {
            // Told after the lock.
            taken.rest.push((key.to_string(), item, passes.is_some()));
            continue;
        }
        if limit.is_some_and(|l| taken.page.len() >= l) {
            if taken.more_after.is_none() {
                taken.more_after = last_key.map(String::from);
            }
            taken.remaining += 1;
            continue;
        }
        last_key = Some(key);
        taken.page.push(item);
    }
    taken.last_key = last_key.map(String::from);
    taken
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::watch_cache::{
        Before, CacheEvent, Change, EventType, Inner, ResourceCache, WatchFrom, WatchStart,
    };
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
        let held = |n: &str, rv| Entry::new(rv, &obj(n, rv), None, None).unwrap();
        res.objects.insert(k("a"), held("a", 5));
        res.objects.insert(k("b"), held("b", 11));
        res.objects.insert(k("d"), held("d", 13));
        let change = |kind, n: &str, revision, object, prev| Change {
            kind,
            key: k(n),
            revision,
            object,
            prev,
        };
        res.ring.push_back(change(
            EventType::Modified,
            "b",
            11,
            held("b", 11),
            Some(held("b", 6)),
        ));
        // A delete's change holds the last state as both.
        res.ring.push_back(change(
            EventType::Deleted,
            "c",
            12,
            held("c", 7),
            Some(held("c", 7)),
        ));
        res.ring
            .push_back(change(EventType::Added, "d", 13, held("d", 13), None));
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
            stored_text: Default::default(),
            recent_reads: Default::default(),
        }
    }

    fn names(o: SnapshotOutcome<Listed>) -> Vec<(String, String)> {
        match o.into_objects() {
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
        let all = Select::All;
        let p = "/registry/pods/";
        assert_eq!(
            names(c.list(p, p, ListAt::Current, None, None, all)),
            [pair("a", "5"), pair("b", "11"), pair("d", "13")]
        );
        assert_eq!(
            names(c.list(p, p, ListAt::Exact(10), None, None, all)),
            [pair("a", "5"), pair("b", "6"), pair("c", "7")]
        );
        assert_eq!(
            names(c.list(p, p, ListAt::Exact(12), None, None, all)),
            [pair("a", "5"), pair("b", "11")]
        );
        // Pages at a past revision continue after the last key.
        let page = c.list(p, p, ListAt::Exact(10), None, Some(2), all);
        let SnapshotOutcome::Listed(s) = page.into_objects() else {
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
                all
            )),
            [pair("c", "7")]
        );
        assert!(matches!(
            c.list(p, p, ListAt::Exact(9), None, None, all),
            SnapshotOutcome::Expired { oldest: 10 }
        ));
        assert!(matches!(
            c.list(p, p, ListAt::Exact(14), None, None, all),
            SnapshotOutcome::Future { current: 13 }
        ));
    }

    fn page(o: SnapshotOutcome<Listed>) -> (Vec<String>, Option<String>, Option<u64>) {
        let o = o.into_objects();
        let SnapshotOutcome::Listed(s) = o else {
            panic!("not listed: {o:?}")
        };
        let names = s
            .items
            .iter()
            .map(|v| v["metadata"]["name"].as_str().unwrap_or("").to_string());
        (names.collect(), s.more_after, s.remaining)
    }

    #[test]
    fn pages_of_objects_that_must_be_decoded_are_cut_after_the_lock() {
        let c = cache(100);
        let p = "/registry/pods/";
        // `e` is held and has no event in the ring.
        c.inner
            .write()
            .resources
            .get_mut(p)
            .unwrap()
            .objects
            .insert(
                "/registry/pods/ns/e".into(),
                Entry::new(5, &obj("e", 5), None, None).unwrap(),
            );
        let not_a = |o: &Value| o["metadata"]["name"] != "a";
        let select = Select::Object(&not_a);
        // At 10: a (held, told after the lock), b and c (past states, told under it), e (held).
        assert_eq!(
            page(c.list(p, p, ListAt::Exact(10), None, Some(2), select)),
            (
                vec!["b".into(), "c".into()],
                Some("/registry/pods/ns/c".into()),
                Some(1)
            )
        );
        // After `a`: a page of past states is full before the first held object comes.
        assert_eq!(
            page(c.list(
                p,
                p,
                ListAt::Exact(10),
                Some("/registry/pods/ns/a"),
                Some(1),
                select
            )),
            (
                vec!["b".into()],
                Some("/registry/pods/ns/b".into()),
                Some(2)
            )
        );
        assert_eq!(
            page(c.list(p, p, ListAt::Current, None, None, select)),
            (vec!["b".into(), "d".into(), "e".into()], None, None)
        );
    }

    #[test]
    fn held_objects_are_told_on_their_views_without_decoding() {
        let c = cache(100);
        let p = "/registry/pods/";
        let labelled = |n: &str, color: &str| {
            let o = Arc::new(json!({"metadata": {"name": n, "resourceVersion": "20",
                                                 "labels": {"color": color}},
                                    "spec": {"big": "x".repeat(100)}}));
            let labels = [("color".to_string(), color.to_string())].into();
            let view = SelectorView::new("v1", "Pod", n, "ns", &labels, &[], |_| String::new());
            Entry::new(20, &o, None, view).unwrap()
        };
        let (red, blue) = (labelled("r", "red"), labelled("u", "blue"));
        {
            let mut inner = c.inner.write();
            let objects = &mut inner.resources.get_mut(p).unwrap().objects;
            objects.insert("/registry/pods/ns/r".into(), red.clone());
            objects.insert("/registry/pods/ns/u".into(), blue.clone());
        }
        assert!(!red.is_decoded() && !blue.is_decoded());
        struct IsRed;
        impl ViewFilter for IsRed {
            fn on_view(&self, view: &SelectorView) -> bool {
                view.label("color") == Some("red")
            }
            fn on_object(&self, obj: &Value) -> bool {
                obj["metadata"]["labels"]["color"] == "red"
            }
        }
        let listed = c.list(
            p,
            "/registry/pods/ns/",
            ListAt::Current,
            None,
            None,
            Select::OnView(&IsRed),
        );
        let SnapshotOutcome::Listed(s) = listed.into_objects() else {
            panic!("not listed")
        };
        // The fixture's other objects have no view: they are decoded and told on as a whole.
        let names: Vec<&str> = s
            .items
            .iter()
            .filter_map(|v| v["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["r"]);
        assert_eq!(
            s.items[0]["spec"]["big"],
            "x".repeat(100),
            "the whole object is listed"
        );
        assert!(red.is_decoded(), "held by the page");
        assert!(!blue.is_decoded(), "told on its view, never decoded");
        drop(s);
        assert!(!red.is_decoded());
        // A watch event's state before is told on the same way.
        let after = |prev: &Arc<Entry>| {
            let key = "/registry/pods/ns/x".to_string();
            let before = Some(Before::Held(prev.clone()));
            CacheEvent::with_before(EventType::Modified, key, 21, obj("x", 21), before)
        };
        assert!(after(&red).prev_passes(Select::OnView(&IsRed)));
        assert!(!after(&blue).prev_passes(Select::OnView(&IsRed)));
        assert!(!red.is_decoded() && !blue.is_decoded(), "on views");
        let on_object = |o: &Value| IsRed.on_object(o);
        assert!(after(&red).prev_passes(Select::Object(&on_object)));
        assert!(
            !CacheEvent::new(EventType::Added, "k".into(), 21, obj("x", 21), None)
                .prev_passes(Select::All)
        );
    }

    #[test]
    fn a_held_object_is_written_from_its_text_as_its_tree_serialises() {
        let c = cache(100);
        let p = "/registry/pods/";
        let listed = c.list(p, p, ListAt::Current, None, None, Select::All);
        let SnapshotOutcome::Listed(page) = listed else {
            panic!("not listed")
        };
        assert_eq!(page.items.len(), 3);
        for item in &page.items {
            let mut text = Vec::new();
            assert!(item.write_held_text(&mut text));
            let object = item.object().unwrap();
            assert_eq!(text, api::wire::to_vec(object.as_ref()).unwrap());
        }
        // A past state is the ring's entry of it: written from its text, at its own revision.
        let past = c.list(p, p, ListAt::Exact(10), None, None, Select::All);
        let SnapshotOutcome::Listed(page) = past else {
            panic!("not listed")
        };
        let written: Vec<Value> = page
            .items
            .iter()
            .map(|i| {
                let mut text = Vec::new();
                assert!(i.write_held_text(&mut text));
                serde_json::from_slice(&text).unwrap()
            })
            .collect();
        assert_eq!(
            written,
            [obj("a", 5), obj("b", 6), obj("c", 7)].map(Arc::unwrap_or_clone),
            "a (current), b and c (past)"
        );
    }

    #[test]
    fn an_object_read_again_is_decoded_once_while_among_the_last_read() {
        let c = cache(100);
        let key = "/registry/pods/ns/a";
        let held = c.inner.read().resources["/registry/pods/"].objects[key].clone();
        assert!(!held.is_decoded(), "the fixture's objects are cold");
        let first = c.get(key).unwrap();
        let first_at = Arc::as_ptr(&first);
        drop(first);
        assert!(held.is_decoded(), "kept among the recent reads");
        assert_eq!(
            Arc::as_ptr(&c.get(key).unwrap()),
            first_at,
            "not decoded again"
        );
        // Pushed out by as many other reads: cold again.
        for i in 0..super::super::RECENT_READS {
            let k = format!("/registry/pods/ns/x{i}");
            let o = obj(&k, 30);
            c.inner
                .write()
                .resources
                .get_mut("/registry/pods/")
                .unwrap()
                .objects
                .insert(k.clone(), Entry::new(30, &o, None, None).unwrap());
            drop(o);
            c.get(&k).unwrap();
        }
        assert!(!held.is_decoded());
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
    fn a_snapshot_watch_decodes_its_objects_a_page_at_a_time() {
        use crate::watch_cache::pages::PAGE;
        let c = cache(100);
        let p = "/registry/pods/";
        {
            let mut inner = c.inner.write();
            let res = inner.resources.get_mut(p).unwrap();
            for i in 0..2 * PAGE + 497 {
                let n = format!("p{i:05}");
                let held = Entry::new(13, &obj(&n, 13), None, None).unwrap();
                res.objects.insert(format!("/registry/pods/ns/{n}"), held);
            }
        }
        // With `a`, `b` and `d`.
        let total = 2 * PAGE + 500;
        // Only a namespace's objects when it asks for a namespace.
        match c.watch_paged(p, "/registry/pods/other/", WatchFrom::Snapshot) {
            WatchStart::Watching(w) => assert!(w.initial.is_empty() && w.pages.is_none()),
            other => panic!("{other:?}"),
        }
        let mut w = match c.watch_paged(p, "/registry/pods/ns/", WatchFrom::Snapshot) {
            WatchStart::Watching(w) => w,
            other => panic!("{other:?}"),
        };
        assert!(w.initial.is_empty(), "nothing decoded at the start");
        let mut pages = w.pages.take().unwrap();
        let (mut sizes, mut keys) = (Vec::new(), Vec::new());
        while let Some(page) = futures::executor::block_on(pages.next()) {
            let page = page.unwrap();
            sizes.push(page.len());
            for ev in page {
                assert_eq!((ev.kind, ev.revision), (EventType::Added, 13));
                keys.push(ev.key.clone());
            }
        }
        assert_eq!(sizes, [PAGE, PAGE, 500]);
        assert!(keys.windows(2).all(|k| k[0] < k[1]), "in key order");
        // The server's own followers get them all at once.
        match c.watch(p, WatchFrom::Snapshot) {
            WatchStart::Watching(w) => {
                assert_eq!(w.initial.len(), total);
                assert!(w.pages.is_none());
            }
            other => panic!("{other:?}"),
        }
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
