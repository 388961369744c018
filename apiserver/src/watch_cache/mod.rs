//! The watch cache (DESIGN.md, Watch): every current object per resource in memory plus a ring of
//! recent changes, fed by ONE store watch over `/registry/`.
//!
//! Guarantees:
//! - **One order.** Events are applied in store revision order by a single feeder task; the
//!   object map and the ring change together under one write lock, and a watch registers under
//!   the same lock at the revision its snapshot or replay covers. The event then goes to the
//!   watchers after the lock is released, through one shared log per resource ([`live`]): a
//!   watcher skips what its initial events covered, so it never misses or repeats an event, and
//!   neither readers nor the write that is waiting for the cache wait for the fan-out.
//! - **Consistent lists.** A list is served at one revision: the current one, or an older one `T`
//!   still covered by the ring (reconstructed by undoing the ring's changes after `T` with their
//!   previous states). Older than the ring → `Expired` (410).
//! - **Bounded.** The ring holds at most `history` changes per resource, their states as texts
//!   ([`ring`]); the live log of a resource
//!   holds its last `buffer` events, shared by all its watchers. A watcher more than `buffer`
//!   events behind is ended (its stream ends, the client re-watches from its last
//!   resourceVersion); writers never wait on readers.
//! - **Encoded once.** A [`CacheEvent`] carries its object's JSON (its entry's text, handed over
//!   by the writer or serialised once), shared by every watcher that sends it unchanged.
//! - **Held as text.** A current object is its JSON text and a selector view ([`entry`],
//!   [`view`]: its labels and field-label values, as upstream's `storeElement`): its
//!   decoded tree lives while the live log, a watcher or a request holds it, and is decoded
//!   again on demand. Lists are filtered on views under the lock and decoded after it; a JSON list copies
//!   the texts ([`Listed`]).
//! - **Relist.** If the store watch ends (the feeder fell behind, compaction, a store error), the
//!   cache relists the store, rebuilds itself at the new revision and closes every watcher.
//! - **Not every resource.** Events are not held, as upstream keeps no watch cache for them: their
//!   lists and watches are served from the store ([`uncached`]).
//! - **Defaulted.** What enters from storage, not from this process's writers, is defaulted as
//!   upstream's storage codec defaults what it decodes ([`defaults`]).

mod defaults;
#[cfg(test)]
mod defaults_tests;
mod entry;
#[cfg(test)]
mod fan_out_tests;
mod handover;
mod json;
mod live;
mod pages;
mod ring;
mod snapshot;
pub mod stored;
mod uncached;
mod view;

pub use defaults::{Defaulter, StorageDefaults};
pub use handover::{StoreWrite, Written};
pub use json::ObjectJson;
pub use live::LiveEvents;

use entry::Entry;
use handover::Offers;
use ring::Change;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use parking_lot::RwLock;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use store::{Event, EventKind, Revision, Store, WatchItem, WatchOutcome};

pub use pages::InitialPages;
pub use snapshot::{ListAt, Listed, Select, Snapshot, SnapshotOutcome, ViewFilter};
pub use stored::StoredText;
pub use uncached::UNCACHED_RESOURCES;
pub use view::SelectorView;

/// Root of every object key.
pub const REGISTRY_ROOT: &str = "/registry/";

/// Most store events the feeder applies before it wakes the writes waiting for the cache.
const MAX_BURST: usize = 256;

/// How many objects [`WatchCache::get`] decoded keep their trees after the caller let go: the
/// most recently decoded ones.
const RECENT_READS: usize = 1024;

/// Kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created (or, for a filtered watcher, started to match).
    Added,
    /// The object changed.
    Modified,
    /// The object was deleted (or stopped matching).
    Deleted,
}

impl EventType {
    /// The wire name (`ADDED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change of one object, as it goes to the watchers.
#[derive(Debug, Clone)]
pub struct CacheEvent {
    /// Kind of change.
    pub kind: EventType,
    /// Storage key.
    pub key: String,
    /// Revision of the change (for DELETED: of the delete).
    pub revision: Revision,
    /// New state (for DELETED: the last state, with the delete's resourceVersion).
    pub object: Arc<Value>,
    /// Previous state, if the object existed before ([`prev`](Self::prev)).
    before: Option<Before>,
    /// `object` serialised once and shared by every watcher that sends it unchanged.
    pub encoded: std::sync::OnceLock<bytes::Bytes>,
    /// `object` is the last state as stored and goes out with `revision` as its
    /// resourceVersion (a DELETED event shares the removed object instead of copying it).
    pub stamp_revision: bool,
}

/// The state before an event: a tree, or the cache's entry of it, decoded only for a watcher
/// whose filter cannot tell on its view (most watchers never read the state before; a tree kept
/// with every event would hold a second copy of every changed object).
#[derive(Debug, Clone)]
enum Before {
    Tree(Arc<Value>),
    Held(Arc<Entry>),
}

impl CacheEvent {
    /// A new event.
    pub fn new(
        kind: EventType,
        key: String,
        revision: Revision,
        object: Arc<Value>,
        prev: Option<Arc<Value>>,
    ) -> Self {
        Self::with_before(kind, key, revision, object, prev.map(Before::Tree))
    }

    /// A new event whose previous state is `before`.
    fn with_before(
        kind: EventType,
        key: String,
        revision: Revision,
        object: Arc<Value>,
        before: Option<Before>,
    ) -> Self {
        CacheEvent {
            kind,
            key,
            revision,
            object,
            before,
            encoded: std::sync::OnceLock::new(),
            stamp_revision: false,
        }
    }

    /// Whether the object existed before this event.
    pub fn had_prev(&self) -> bool {
        self.before.is_some()
    }

    /// The previous state, if the object existed before (decoded if it must be; `None` also for
    /// a held text that does not parse, which a text this process made always does).
    pub fn prev(&self) -> Option<Arc<Value>> {
        match self.before.as_ref()? {
            Before::Tree(tree) => Some(tree.clone()),
            Before::Held(entry) => entry.object(),
        }
    }

    /// Whether the previous state exists and `select` keeps it: told on its view when it has
    /// one and `select` can, else on the decoded state.
    pub fn prev_passes(&self, select: Select<'_>) -> bool {
        match &self.before {
            None => false,
            Some(Before::Tree(tree)) => select.matches(tree),
            Some(Before::Held(entry)) => select
                .decides(entry)
                .unwrap_or_else(|| entry.object().is_some_and(|o| select.matches(&o))),
        }
    }

    /// The JSON text of the event's object, serialised on first use.
    pub fn encoded_object(&self) -> &bytes::Bytes {
        self.encoded.get_or_init(|| {
            if self.stamp_revision {
                ObjectJson::encode(&self.object)
                    .map(|json| json.with_resource_version(&self.revision.to_string()))
                    .unwrap_or_default()
            } else {
                // Kept as long as the event is (the live log): at its exact length.
                api::wire::to_vec(self.object.as_ref())
                    .map(json::exact)
                    .unwrap_or_default()
            }
        })
    }

    /// The event's object as it goes out (a copy only when its resourceVersion must be set).
    pub fn output_object(&self) -> std::borrow::Cow<'_, Value> {
        if !self.stamp_revision {
            return std::borrow::Cow::Borrowed(&self.object);
        }
        let mut obj = Value::clone(&self.object);
        stamp(&mut obj, self.revision);
        std::borrow::Cow::Owned(obj)
    }
}

/// Per-resource state (one storage prefix such as `/registry/pods/`).
#[derive(Default)]
struct ResourceCache {
    /// Current objects by key, as texts decoded on demand ([`entry`]).
    objects: BTreeMap<String, Arc<Entry>>,
    /// Recent changes, ascending revision ([`ring`]).
    ring: VecDeque<Change>,
    /// Every event of this resource with revision > `oldest` is in `ring`.
    oldest: Revision,
    /// Where the resource's watchers read live events; made at the first watch.
    live: Option<live::Log>,
}

struct Inner {
    /// Revision of the last applied store event (or of the initial list).
    revision: Revision,
    /// Revision the cache was (re)built at: the `oldest` of resources first seen later.
    base: Revision,
    resources: HashMap<String, ResourceCache>,
}

/// How a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// From the current state: synthetic ADDED events for every current object, then changes.
    Snapshot,
    /// Every change with revision > the given one, no synthetic events.
    After(Revision),
}

/// A registered watcher: initial events, then the live queue.
#[derive(Debug)]
pub struct CacheWatch {
    /// Events to deliver before the live ones.
    pub initial: Vec<Arc<CacheEvent>>,
    /// More initial events, read page by page (a snapshot or a replay from the ring, see
    /// [`InitialPages`]).
    pub pages: Option<Box<InitialPages>>,
    /// Live events (after `revision`); they end when the watcher fell behind or the cache
    /// relisted.
    pub rx: LiveEvents,
    /// Revision the initial events are consistent at.
    pub revision: Revision,
    /// Events with a revision ≤ this are not to be delivered (watch from a future revision).
    pub skip_through: Revision,
}

/// Outcome of [`WatchCache::watch`].
#[derive(Debug)]
pub enum WatchStart {
    /// Registered.
    Watching(CacheWatch),
    /// The requested revision is older than the ring: `oldest` is the oldest start possible.
    Expired {
        /// Oldest revision a watch can start after.
        oldest: Revision,
    },
}

/// The cache. Cheap to share behind an `Arc`.
pub struct WatchCache {
    inner: RwLock<Inner>,
    offers: parking_lot::Mutex<Offers>,
    /// Mirror of `inner.revision` for waiters.
    progress: watch::Sender<Revision>,
    /// Every event up to this revision is in its resource's live log (ahead of `progress` while
    /// the feeder applies a burst of events).
    dispatched: AtomicU64,
    relists: AtomicU64,
    history: usize,
    buffer: usize,
    /// The store: lists and watches of the resources not cached are served from it.
    store: Arc<dyn Store>,
    /// Prefixes (`/registry/<storage>/`) of the resources the cache does not hold.
    uncached: Vec<String>,
    /// The kinds' defaults, applied to what enters from storage ([`defaults`]).
    defaulter: Defaulter,
    /// How the texts this cache encodes are kept, and written through it to the store.
    stored_text: StoredText,
    /// The trees [`Self::get`] decoded last, held so that they stay decoded ([`RECENT_READS`]).
    recent_reads: parking_lot::Mutex<VecDeque<Arc<Value>>>,
}

impl std::fmt::Debug for WatchCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchCache")
            .field("revision", &self.revision())
            .finish_non_exhaustive()
    }
}

/// `/registry/<storage>/` of a key, if it has one.
pub fn resource_prefix(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(REGISTRY_ROOT)?;
    let slash = rest.find('/')?;
    Some(&key[..REGISTRY_ROOT.len() + slash + 1])
}

/// A key after every key under `prefix` (`/registry/<storage>/`) and before every key of a
/// resource sorting after it: the prefix with its closing `/` turned into `0`, the next byte.
fn past_prefix(prefix: &str) -> String {
    let mut key = prefix.strip_suffix('/').unwrap_or(prefix).to_string();
    key.push('0');
    key
}

/// The same stored bytes: the same buffer (a store passes the written `Bytes` on), or equal.
fn same_bytes(a: &bytes::Bytes, b: &bytes::Bytes) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// Sets `metadata.resourceVersion` as decoding a stored value does.
fn stamp(obj: &mut Value, revision: Revision) {
    // At its place in Go order, where [`ObjectJson`] splices it into the text.
    api::wire::set_resource_version(obj, revision.to_string());
}

/// Parses a stored value (either [`StoredText`]) and stamps its resourceVersion.
fn decode(kv_value: &[u8], revision: Revision) -> Option<Value> {
    let mut v: Value = stored::parse(kv_value)?;
    stamp(&mut v, revision);
    Some(v)
}

impl WatchCache {
    /// Lists the store, then follows it from the listed revision in a background task that ends
    /// with `shutdown`. Objects are kept as stored (no kind's defaults: see
    /// [`start_defaulting`](Self::start_defaulting)).
    pub async fn start(
        store: Arc<dyn Store>,
        history: usize,
        buffer: usize,
        shutdown: CancellationToken,
    ) -> Result<Arc<Self>, store::Error> {
        Self::start_defaulting(
            store,
            Defaulter::default(),
            StoredText::Json,
            history,
            buffer,
            shutdown,
        )
        .await
    }

    /// [`start`](Self::start), with every object that enters from storage defaulted by
    /// `defaulter` ([`defaults`]), and the texts it encodes kept as `stored_text` says (what it
    /// writes through to the store too).
    pub async fn start_defaulting(
        store: Arc<dyn Store>,
        defaulter: Defaulter,
        stored_text: StoredText,
        history: usize,
        buffer: usize,
        shutdown: CancellationToken,
    ) -> Result<Arc<Self>, store::Error> {
        let (progress, _) = watch::channel(0);
        let cache = Arc::new(WatchCache {
            inner: RwLock::new(Inner {
                revision: 0,
                base: 0,
                resources: HashMap::new(),
            }),
            progress,
            dispatched: AtomicU64::new(0),
            offers: Default::default(),
            relists: AtomicU64::new(0),
            history: history.max(1),
            buffer: buffer.clamp(1, live::MAX_BUFFER),
            store: store.clone(),
            uncached: UNCACHED_RESOURCES.iter().map(|p| p.to_string()).collect(),
            defaulter,
            stored_text,
            recent_reads: Default::default(),
        });
        let stream = cache.relist(store.as_ref()).await?;
        let feeder = cache.clone();
        tokio::spawn(async move { feeder.feed(store, stream, shutdown).await });
        Ok(cache)
    }

    /// The revision the cache has applied. Never ahead of [`Self::dispatched`]: the cache moves it
    /// on only after handing the events up to it to their watchers.
    pub fn revision(&self) -> Revision {
        *self.progress.borrow()
    }

    /// The revision up to which every event is in its watchers' reach: a watcher that has read
    /// all its live events has seen every change up to here (what a bookmark may claim).
    pub fn dispatched(&self) -> Revision {
        self.dispatched.load(Ordering::Acquire)
    }

    /// How many objects the cache holds now, of every resource.
    pub fn object_count(&self) -> usize {
        let inner = self.inner.read();
        inner.resources.values().map(|r| r.objects.len()).sum()
    }

    /// How many times the cache rebuilt itself after losing the store watch.
    pub fn relists(&self) -> u64 {
        self.relists.load(Ordering::Relaxed)
    }

    /// Waits until the cache has applied `rev`, at most `timeout`. Returns whether it has.
    pub async fn wait_for(&self, rev: Revision, timeout: Duration) -> bool {
        let mut rx = self.progress.subscribe();
        if *rx.borrow() >= rev {
            return true;
        }
        let reached = tokio::time::timeout(timeout, rx.wait_for(|r| *r >= rev)).await;
        matches!(reached, Ok(Ok(_)))
    }

    /// Loads the whole store and replaces the cache's contents; returns the store watch.
    async fn relist(&self, store: &dyn Store) -> Result<store::WatchStream, store::Error> {
        loop {
            let mut objects: HashMap<String, BTreeMap<String, Arc<Entry>>> = HashMap::new();
            let mut opts = store::ListOptions {
                limit: Some(1000),
                ..Default::default()
            };
            let mut revision = None;
            let mut restart = false;
            loop {
                match store.list(REGISTRY_ROOT, opts.clone()).await? {
                    store::ListOutcome::Listed(page) => {
                        revision.get_or_insert(page.revision);
                        let mut skip_past = None;
                        for kv in page.items {
                            let Some(prefix) = resource_prefix(&kv.key) else {
                                continue;
                            };
                            if !self.caches(prefix) {
                                // A resource the cache does not hold is not read at all: the
                                // list goes on after its last possible key.
                                skip_past = Some(past_prefix(prefix));
                                break;
                            }
                            // The tree goes once its text and view are made.
                            let Some(entry) = self
                                .defaulter
                                .decode(&kv.key, &kv.value, kv.mod_revision)
                                .and_then(|v| {
                                    let v = Arc::new(v);
                                    self.entry(&kv.key, kv.mod_revision, &v, None, Some(&kv.value))
                                })
                            else {
                                tracing::warn!(key = %kv.key, "undecodable object skipped");
                                continue;
                            };
                            objects
                                .entry(prefix.to_string())
                                .or_default()
                                .insert(kv.key.clone(), entry);
                        }
                        match (skip_past, page.continue_token) {
                            // Even from the last page: the keys after the skipped ones in it.
                            (Some(key), _) => {
                                opts =
                                    store::ListOptions::after_key(page.revision, &key, opts.limit)
                            }
                            (None, Some(t)) => opts.continue_token = Some(t),
                            (None, None) => break,
                        }
                    }
                    // The snapshot was compacted mid-way: start over.
                    _ => {
                        restart = true;
                        break;
                    }
                }
            }
            if restart {
                continue;
            }
            let revision = revision.unwrap_or(0);
            let stream = match store.watch(REGISTRY_ROOT, revision, self.buffer.max(16_384))? {
                WatchOutcome::Watching(s) => s,
                WatchOutcome::Expired { .. } => continue,
            };
            let mut inner = self.inner.write();
            inner.revision = revision;
            inner.base = revision;
            // Dropping the old resources closes every watcher: they re-watch.
            inner.resources = objects
                .into_iter()
                .map(|(prefix, objects)| {
                    (
                        prefix,
                        ResourceCache {
                            objects,
                            oldest: revision,
                            ..Default::default()
                        },
                    )
                })
                .collect();
            drop(inner);
            self.dispatched.store(revision, Ordering::Release);
            // Offers for writes the list already covers would never be taken.
            let mut offers = self.offers.lock();
            offers.by_key.clear();
            offers.applied = offers.applied.max(revision);
            drop(offers);
            self.progress.send_replace(revision);
            return Ok(stream);
        }
    }

    async fn feed(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        mut stream: store::WatchStream,
        shutdown: CancellationToken,
    ) {
        // An item read at the end of a burst of events, handled next.
        let mut pending = None;
        loop {
            let item = match pending.take() {
                Some(item) => item,
                None => tokio::select! {
                    _ = shutdown.cancelled() => break,
                    item = stream.next() => item,
                },
            };
            match item {
                Some(WatchItem::Event(ev)) => {
                    // The events the store has already published go in before the writes waiting
                    // for them are woken: one wake-up of every waiter per burst, not per event (a
                    // group commit publishes its writes together, and each waiter is woken to
                    // check its revision).
                    let mut applied = self.apply_event(ev);
                    for _ in 1..MAX_BURST {
                        match stream.next().now_or_never() {
                            Some(Some(WatchItem::Event(ev))) => applied = self.apply_event(ev),
                            Some(other) => {
                                pending = Some(other);
                                break;
                            }
                            None => break,
                        }
                    }
                    self.progress.send_replace(applied);
                }
                Some(WatchItem::Progress(revision)) => self.advance(revision),
                Some(WatchItem::Closed(store::WatchClosedReason::StoreShutdown)) | None => break,
                Some(WatchItem::Closed(reason)) => {
                    tracing::warn!(?reason, "watch cache lost the store watch; relisting");
                    self.relists.fetch_add(1, Ordering::Relaxed);
                    loop {
                        match self.relist(store.as_ref()).await {
                            Ok(s) => {
                                stream = s;
                                break;
                            }
                            Err(e) => {
                                tracing::error!(error = %e, "watch cache relist failed");
                                tokio::select! {
                                    _ = shutdown.cancelled() => return self.close_all(),
                                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                                }
                            }
                        }
                    }
                }
            }
        }
        self.close_all();
    }

    fn close_all(&self) {
        let mut inner = self.inner.write();
        for res in inner.resources.values_mut() {
            res.live = None;
        }
    }

    /// A progress mark of the store watch (etcd): no event of `/registry/` up to `revision` is
    /// missing, so the cache is at `revision` (upstream's watch cache bookmarks on etcd progress
    /// notifications the same way).
    fn advance(&self, revision: Revision) {
        let mut inner = self.inner.write();
        if revision <= inner.revision {
            return;
        }
        inner.revision = revision;
        drop(inner);
        self.dispatched.fetch_max(revision, Ordering::AcqRel);
        self.progress.send_replace(revision);
    }

    /// Applies one store event and wakes the writes waiting for it.
    #[cfg(test)]
    fn apply(&self, ev: Event) {
        let revision = self.apply_event(ev);
        self.progress.send_replace(revision);
    }

    /// The entry of `object`, the state of `key` at `revision`, with `json` as its text if a
    /// writer handed one over.
    fn entry(
        &self,
        key: &str,
        revision: Revision,
        object: &Arc<Value>,
        json: Option<ObjectJson>,
        stored: Option<&bytes::Bytes>,
    ) -> Option<Arc<Entry>> {
        // Not handed over by a writer: kept as this apiserver stores texts, in the store's own
        // buffer when that holds the same bytes (a load or a relist then keeps one copy).
        let json = json.or_else(|| {
            let json = ObjectJson::encode_as(object, self.stored_text).ok()?;
            Some(match stored {
                Some(stored) => json.sharing(stored),
                None => json,
            })
        });
        Entry::new(revision, object, json, self.defaulter.view(key, object))
    }

    /// Applies one store event and hands it to its watchers; returns its revision. The cache's
    /// [`Self::revision`] moves on when the caller sends it to `progress`.
    fn apply_event(&self, ev: Event) -> Revision {
        let revision = ev.revision;
        let mut expired = None;
        let mut fan_out = None;
        // An uncached resource's event only moves the revision on (its writer offered nothing).
        let prefix = resource_prefix(&ev.key).filter(|p| self.caches(p));
        // The new state and its entry, made before the lock: readers do not wait for a decode or
        // a serialisation.
        let new_state = match (prefix, ev.kind, ev.value.as_ref()) {
            (Some(_), EventKind::Put, Some(kv)) => {
                // Not handed over: written by another process (or its offer missed its event),
                // so defaulted here, by the defaults in force now ([`Self::redefault`] relies on
                // it).
                let made = self
                    .take_offer(&ev.key, revision, Some(&kv.value))
                    .or_else(|| {
                        self.defaulter
                            .decode(&kv.key, &kv.value, kv.mod_revision)
                            .map(|v| (Arc::new(v), None))
                    })
                    .and_then(|(object, json)| {
                        let entry =
                            self.entry(&ev.key, revision, &object, json, Some(&kv.value))?;
                        Some((object, entry))
                    });
                if made.is_none() {
                    tracing::warn!(key = %ev.key, revision, "undecodable event skipped");
                }
                made
            }
            (Some(_), _, _) => {
                self.take_offer(&ev.key, revision, None);
                None
            }
            (None, _, _) => None,
        };
        // A delete's event carries the last state: decoded (if its tree is gone) before the
        // lock too. Only this task replaces entries, but for a relist or a change of defaults,
        // which the lock's check below catches.
        let before = prefix
            .filter(|_| ev.kind == EventKind::Delete)
            .and_then(|p| {
                let inner = self.inner.read();
                inner.resources.get(p)?.objects.get(&ev.key).cloned()
            });
        let before_object = before.as_ref().and_then(|e| e.object());
        let mut inner = self.inner.write();
        let base = inner.base;
        if let Some(prefix) = prefix {
            let res = inner
                .resources
                .entry(prefix.to_string())
                .or_insert_with(|| ResourceCache {
                    oldest: base,
                    ..Default::default()
                });
            let prev = res.objects.get(&ev.key).cloned();
            let changed = match ev.kind {
                EventKind::Put => new_state.map(|(object, entry)| {
                    res.objects.insert(ev.key.clone(), entry.clone());
                    let kind = if prev.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    };
                    let before = prev.clone().map(Before::Held);
                    let event =
                        CacheEvent::with_before(kind, ev.key.clone(), revision, object, before);
                    (
                        Change {
                            kind,
                            key: ev.key.clone(),
                            revision,
                            object: entry,
                            prev,
                        },
                        event,
                    )
                }),
                EventKind::Delete => {
                    res.objects.remove(&ev.key);
                    let held = prev.and_then(|now| {
                        let tree = match &before {
                            Some(then) if Arc::ptr_eq(&now, then) => before_object,
                            _ => now.object(),
                        }?;
                        Some((now, tree))
                    });
                    // Not held (or its text did not parse): the store's last state.
                    let last = held.or_else(|| {
                        let kv = ev.prev.as_ref()?;
                        let tree =
                            Arc::new(self.defaulter.decode(&kv.key, &kv.value, kv.mod_revision)?);
                        let entry =
                            self.entry(&ev.key, kv.mod_revision, &tree, None, Some(&kv.value))?;
                        Some((entry, tree))
                    });
                    last.map(|(entry, tree)| {
                        let event = CacheEvent {
                            stamp_revision: true,
                            ..CacheEvent::new(
                                EventType::Deleted,
                                ev.key.clone(),
                                revision,
                                tree.clone(),
                                Some(tree),
                            )
                        };
                        let change = Change {
                            kind: EventType::Deleted,
                            key: ev.key.clone(),
                            revision,
                            object: entry.clone(),
                            prev: Some(entry),
                        };
                        (change, event)
                    })
                }
            };
            if let Some((change, event)) = changed {
                let entry = change.object.clone();
                res.ring.push_back(change);
                while res.ring.len() > self.history {
                    if let Some(old) = res.ring.pop_front() {
                        res.oldest = old.revision;
                        // Freed after the lock is released: readers do not wait on it.
                        expired = Some(old);
                    }
                }
                fan_out = res.live.clone().map(|log| (log, event, entry));
            }
        }
        inner.revision = revision;
        drop(inner);
        drop(expired);
        // The event goes to the watchers outside the lock (a watcher registered meanwhile skips
        // it: its snapshot has it).
        if let Some((log, mut event, entry)) = fan_out {
            // The text the entry holds (handed over by the writer, or serialised once when the
            // entry was made), at the event's revision: what serialising the object would write.
            event.encoded = entry
                .json
                .with_resource_version(&revision.to_string())
                .into();
            // No receiver: nobody to tell.
            let _ = log.send(Arc::new(event));
        }
        self.dispatched.fetch_max(revision, Ordering::AcqRel);
        revision
    }

    /// Registers a watcher on the resource `prefix` (`/registry/<storage>/`), every event of
    /// its snapshot or replay decoded (what the server's own followers of small resources read).
    pub fn watch(&self, prefix: &str, from: WatchFrom) -> WatchStart {
        let mut start = self.watch_paged(prefix, prefix, from);
        if let WatchStart::Watching(w) = &mut start {
            if let Some(pages) = w.pages.take() {
                match *pages {
                    InitialPages::Held(held) => w.initial.extend(held.rest()),
                    store => w.pages = Some(Box::new(store)),
                }
            }
        }
        start
    }

    /// [`Self::watch`], a snapshot's objects or a replay's changes decoded a page at a time as the
    /// watcher sends them (`pages`), so a watch of a large collection does not hold it all
    /// decoded; a snapshot holds
    /// only the objects under `key_prefix` (a namespace's), the live events all of the resource's.
    pub fn watch_paged(&self, prefix: &str, key_prefix: &str, from: WatchFrom) -> WatchStart {
        let mut inner = self.inner.write();
        let current = inner.revision;
        let base = inner.base;
        let res = inner
            .resources
            .entry(prefix.to_string())
            .or_insert_with(|| ResourceCache {
                oldest: base,
                ..Default::default()
            });
        let (held, skip_through) = match from {
            // Decoded after the lock is released, a page at a time.
            WatchFrom::Snapshot => {
                let held: Vec<Change> = res
                    .objects
                    .range::<str, _>((
                        std::ops::Bound::Included(key_prefix),
                        std::ops::Bound::Unbounded,
                    ))
                    .take_while(|(k, _)| k.starts_with(key_prefix))
                    .map(|(k, e)| Change::snapshot(k.clone(), current, e.clone()))
                    .collect();
                (held, current)
            }
            // Decoded as they are sent, as a snapshot is.
            WatchFrom::After(rev) => {
                if rev < res.oldest {
                    return WatchStart::Expired { oldest: res.oldest };
                }
                let start = res.ring.partition_point(|e| e.revision <= rev);
                (res.ring.iter().skip(start).cloned().collect(), rev)
            }
        };
        let buffer = self.buffer;
        let log = res.live.get_or_insert_with(|| live::log(buffer));
        let rx = LiveEvents::new(log, current);
        drop(inner);
        let pages =
            (!held.is_empty()).then(|| Box::new(InitialPages::Held(pages::HeldPages::new(held))));
        WatchStart::Watching(CacheWatch {
            initial: Vec::new(),
            pages,
            rx,
            revision: current,
            skip_through,
        })
    }

    /// The JSON of the cached object at `key` if it is at `revision`.
    pub fn json_at(&self, key: &str, revision: Revision) -> Option<ObjectJson> {
        let prefix = resource_prefix(key)?;
        let inner = self.inner.read();
        let entry = inner.resources.get(prefix)?.objects.get(key)?;
        (entry.revision == revision).then(|| entry.json.clone())
    }

    /// The cached object at `key`, if any (as of the cache's revision: possibly behind the store).
    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        let prefix = resource_prefix(key)?;
        let entry = self
            .inner
            .read()
            .resources
            .get(prefix)
            .and_then(|r| r.objects.get(key).cloned())?;
        // Decoded, if it must be, after the lock is released.
        let (object, decoded) = entry.object_told()?;
        if decoded {
            // Objects read one at a time again and again (a pod's namespace and service account
            // at each create) stay decoded while they are among the last few read.
            let mut recent = self.recent_reads.lock();
            if recent.len() >= RECENT_READS {
                recent.pop_front();
            }
            recent.push_back(object.clone());
        }
        Some(object)
    }

    /// How many objects the cache holds under the resource prefix `prefix` (a LIST's width).
    pub fn resource_count(&self, prefix: &str) -> usize {
        self.inner
            .read()
            .resources
            .get(prefix)
            .map_or(0, |r| r.objects.len())
    }

    /// Number of watchers registered on `prefix`.
    pub fn watcher_count(&self, prefix: &str) -> usize {
        self.inner
            .read()
            .resources
            .get(prefix)
            .and_then(|r| r.live.as_ref())
            .map_or(0, |log| log.receiver_count())
    }
}
