//! An in-process [`ListerWatcher`]: a real, small source of objects with a global resourceVersion,
//! an event history, compaction (→ 410 on old watches and expired continue tokens), forced
//! disconnects and injected failures. It models the apiserver contract the reflector relies on
//! (spec informer.md §1.9) so informers can be tested without a server.
//!
//! Semantics: every write bumps the RV by one and stamps the object; LIST at `""`/`"0"`/`N ≤ rv`
//! returns the current state (not older than N), `N > rv` is "too large resource version"; LIST
//! with `limit` pages over a snapshot taken by the first page; WATCH from `""`/`"0"` first sends
//! synthetic ADDED events; WATCH from `N` replays history after `N` (410 if compacted past `N`)
//! then follows live. Each watcher has a bounded buffer ([`WATCH_BUFFER`]); a watcher that falls
//! behind is closed, as the real server does. Label selectors are honoured; field selectors are not.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::error::{synthetic_status, Error, Result};
use crate::indexer::meta_namespace_key;
use crate::list_watch::ListerWatcher;
use crate::rest::{ListParams, ObjectList, Resource, WatchEvent, WatchStream};
use api::labels::Selector;

/// Per-watcher buffer; a watcher this far behind is disconnected.
pub const WATCH_BUFFER: usize = 1024;
/// Events retained before the oldest is compacted away.
pub const MAX_HISTORY: usize = 100_000;
/// Most open paginated-list snapshots kept.
const MAX_SNAPSHOTS: usize = 64;

/// A recorded call, for assertions on reflector behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    List {
        resource_version: Option<String>,
        limit: Option<u32>,
        continue_token: Option<String>,
    },
    Watch {
        resource_version: String,
    },
}

struct Watcher<K> {
    tx: mpsc::Sender<Result<WatchEvent<K>>>,
    selector: Selector,
    bookmarks: bool,
}

struct Src<K> {
    rv: u64,
    objects: BTreeMap<String, K>,
    history: VecDeque<(u64, WatchEvent<K>)>,
    /// Events with RV ≤ this are gone.
    compacted: u64,
    watchers: Vec<Watcher<K>>,
    /// continue token → (list RV, the full snapshot, offset of the next page). Shared so that
    /// paging costs O(page), not O(rest).
    snapshots: HashMap<String, (u64, Arc<Vec<K>>, usize)>,
    next_snapshot: u64,
    fail_lists: VecDeque<Error>,
    fail_watches: VecDeque<Error>,
    calls: Vec<Call>,
}

/// The in-memory source. Clones share state.
pub struct MemoryListerWatcher<K> {
    src: Arc<Mutex<Src<K>>>,
}

impl<K> Clone for MemoryListerWatcher<K> {
    fn clone(&self) -> Self {
        MemoryListerWatcher {
            src: self.src.clone(),
        }
    }
}

fn labels_of<K: Resource>(o: &K) -> Option<&BTreeMap<String, String>> {
    o.metadata().labels.as_ref()
}

fn gone(msg: String) -> Error {
    Error::Gone(synthetic_status(410, "Expired", msg))
}

/// The request's `labelSelector`; an unparsable one is a 400 `BadRequest`, as the apiserver answers.
fn label_selector(p: &ListParams) -> Result<Selector> {
    Selector::parse(p.label_selector.as_deref().unwrap_or("")).map_err(|e| {
        Error::from_status(
            400,
            synthetic_status(400, "BadRequest", e.to_string()),
            None,
        )
    })
}

impl<K: Resource> Default for MemoryListerWatcher<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource> MemoryListerWatcher<K> {
    pub fn new() -> Self {
        MemoryListerWatcher {
            src: Arc::new(Mutex::new(Src {
                rv: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted: 0,
                watchers: Vec::new(),
                snapshots: HashMap::new(),
                next_snapshot: 0,
                fail_lists: VecDeque::new(),
                fail_watches: VecDeque::new(),
                calls: Vec::new(),
            })),
        }
    }

    fn publish(s: &mut Src<K>, ev: WatchEvent<K>) {
        let rv = s.rv;
        s.watchers.retain(|w| {
            let matches = match &ev {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                    w.selector.matches(labels_of(o))
                }
                _ => true,
            };
            !matches || w.tx.try_send(Ok(ev.clone())).is_ok()
        });
        s.history.push_back((rv, ev));
        while s.history.len() > MAX_HISTORY {
            if let Some((old, _)) = s.history.pop_front() {
                s.compacted = old;
            }
        }
    }

    /// Creates or replaces the object under its key; returns it stamped with the new RV.
    pub fn apply(&self, mut obj: K) -> K {
        let mut s = self.src.lock();
        s.rv += 1;
        obj.metadata_mut().resource_version = Some(s.rv.to_string());
        let key = meta_namespace_key(&obj);
        let existed = s.objects.insert(key, obj.clone()).is_some();
        let ev = if existed {
            WatchEvent::Modified(obj.clone())
        } else {
            WatchEvent::Added(obj.clone())
        };
        Self::publish(&mut s, ev);
        obj
    }

    /// Deletes by key; the DELETED event carries the deletion RV.
    pub fn delete(&self, key: &str) -> Option<K> {
        let mut s = self.src.lock();
        let mut obj = s.objects.remove(key)?;
        s.rv += 1;
        obj.metadata_mut().resource_version = Some(s.rv.to_string());
        Self::publish(&mut s, WatchEvent::Deleted(obj.clone()));
        Some(obj)
    }

    /// Drops history up to the current RV: watches from older RVs get 410.
    pub fn compact(&self) {
        let mut s = self.src.lock();
        s.compacted = s.rv;
        s.history.clear();
        s.snapshots.clear();
    }

    /// Closes every open watch (as a server restart or a network cut would).
    pub fn disconnect_watchers(&self) {
        self.src.lock().watchers.clear();
    }

    /// Sends an `ERROR` event with `status` to every watcher and closes them.
    pub fn error_watchers(&self, code: u16, reason: &str) {
        let mut s = self.src.lock();
        let st = synthetic_status(code, reason, format!("injected {code}"));
        for w in s.watchers.drain(..) {
            let _ = w.tx.try_send(Ok(WatchEvent::Error(st.clone())));
        }
    }

    /// Sends a BOOKMARK at the current RV to watchers that asked for bookmarks.
    pub fn bookmark(&self) {
        let mut s = self.src.lock();
        let rv = s.rv.to_string();
        s.watchers.retain(|w| {
            !w.bookmarks || w.tx.try_send(Ok(WatchEvent::Bookmark(rv.clone()))).is_ok()
        });
    }

    /// The next LIST fails with `e`.
    pub fn fail_next_list(&self, e: Error) {
        self.src.lock().fail_lists.push_back(e);
    }

    /// The next WATCH start fails with `e`.
    pub fn fail_next_watch(&self, e: Error) {
        self.src.lock().fail_watches.push_back(e);
    }

    pub fn resource_version(&self) -> u64 {
        self.src.lock().rv
    }

    /// Current objects by key.
    pub fn objects(&self) -> BTreeMap<String, K> {
        self.src.lock().objects.clone()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.src.lock().calls.clone()
    }

    pub fn open_watchers(&self) -> usize {
        let mut s = self.src.lock();
        s.watchers.retain(|w| !w.tx.is_closed());
        s.watchers.len()
    }

    fn record(s: &mut Src<K>, c: Call) {
        if s.calls.len() >= 100_000 {
            s.calls.remove(0);
        }
        s.calls.push(c);
    }
}

#[async_trait]
impl<K: Resource> ListerWatcher<K> for MemoryListerWatcher<K> {
    async fn list(&self, p: &ListParams) -> Result<ObjectList<K>> {
        let mut s = self.src.lock();
        Self::record(
            &mut s,
            Call::List {
                resource_version: p.resource_version.clone(),
                limit: p.limit,
                continue_token: p.continue_token.clone(),
            },
        );
        if let Some(e) = s.fail_lists.pop_front() {
            return Err(e);
        }
        let sel = label_selector(p)?;
        let (rv, items, offset) = if let Some(token) = &p.continue_token {
            match s.snapshots.remove(token) {
                Some(snap) => snap,
                None => return Err(gone(format!("continue token {token} expired"))),
            }
        } else {
            if let Some(want) = p
                .resource_version
                .as_deref()
                .filter(|r| !r.is_empty() && *r != "0")
            {
                let want: u64 = want.parse().map_err(|_| {
                    Error::Invalid(synthetic_status(400, "BadRequest", "bad resourceVersion"))
                })?;
                if want > s.rv {
                    let st = synthetic_status(
                        504,
                        "Timeout",
                        format!("Too large resource version: {want}, current: {}", s.rv),
                    );
                    return Err(Error::from_status(504, st, None));
                }
            }
            let items: Vec<K> = s
                .objects
                .values()
                .filter(|o| sel.matches(labels_of(*o)))
                .cloned()
                .collect();
            (s.rv, Arc::new(items), 0)
        };
        let end = match p.limit {
            Some(n) => offset.saturating_add(n as usize).min(items.len()),
            None => items.len(),
        };
        let page: Vec<K> = items
            .get(offset..end)
            .map(<[K]>::to_vec)
            .unwrap_or_default();
        let continue_token = (end < items.len()).then(|| {
            s.next_snapshot += 1;
            let t = format!("{}:{}", rv, s.next_snapshot);
            if s.snapshots.len() >= MAX_SNAPSHOTS {
                s.snapshots.clear();
            }
            s.snapshots.insert(t.clone(), (rv, items, end));
            t
        });
        Ok(ObjectList {
            items: page,
            resource_version: rv.to_string(),
            continue_token,
        })
    }

    async fn watch(&self, p: &ListParams, resource_version: &str) -> Result<WatchStream<K>> {
        let mut s = self.src.lock();
        Self::record(
            &mut s,
            Call::Watch {
                resource_version: resource_version.to_string(),
            },
        );
        if let Some(e) = s.fail_watches.pop_front() {
            return Err(e);
        }
        let selector = label_selector(p)?;
        let mut initial: Vec<Result<WatchEvent<K>>> = Vec::new();
        if resource_version.is_empty() || resource_version == "0" {
            for o in s
                .objects
                .values()
                .filter(|o| selector.matches(labels_of(*o)))
            {
                initial.push(Ok(WatchEvent::Added(o.clone())));
            }
        } else {
            let from: u64 = resource_version.parse().map_err(|_| {
                Error::Invalid(synthetic_status(400, "BadRequest", "bad resourceVersion"))
            })?;
            if from < s.compacted {
                let st = synthetic_status(
                    410,
                    "Expired",
                    format!("too old resource version: {from} ({})", s.compacted),
                );
                let once = futures::stream::iter(vec![Ok(WatchEvent::Error(st))]);
                return Ok(WatchStream::new(once));
            }
            for (rv, ev) in &s.history {
                if *rv <= from {
                    continue;
                }
                let keep = match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                        selector.matches(labels_of(o))
                    }
                    _ => true,
                };
                if keep {
                    initial.push(Ok(ev.clone()));
                }
            }
        }
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        s.watchers.push(Watcher {
            tx,
            selector,
            bookmarks: p.allow_bookmarks,
        });
        let live =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
        Ok(WatchStream::new(futures::stream::iter(initial).chain(live)))
    }
}
