//! DeltaFIFO: the queue between a [`Reflector`](crate::Reflector) and the informer's cache
//! (client-go `tools/cache/delta_fifo.go`; spec informer.md §2).
//!
//! Data model: `items: key → Deltas` (oldest first, never empty) and `queue: [key]` in first-queued
//! order with no duplicates (`key ∈ queue ⇔ key ∈ items`). Events for one key are grouped at the
//! key's first queue position: A1, B2, A3 are popped as A(1,3) then B(2).
//!
//! Guarantees:
//! * Dedup rule (the only one): two consecutive `Deleted` deltas collapse into one; the real final
//!   state beats an inferred tombstone.
//! * `replace` emits `Replaced` for every listed object and `Deleted(DeletedFinalStateUnknown)`
//!   tombstones for keys that vanished — both for keys still queued here and for keys only known
//!   downstream (`known_objects`, the informer's indexer).
//! * `pop` runs its callback while holding the FIFO lock, so downstream updates made by the callback
//!   are atomic with respect to `replace`, `resync` and `delete`, which read `known_objects`.
//!   Lock order: FIFO → indexer (never the reverse).
//! * `has_synced` becomes true once every item queued by the first `replace` was popped (or once any
//!   add/update/delete arrived before a replace) and then stays true.
//! * A transform, if set (client-go's `TransformFunc`), is applied to every object before it is
//!   queued (tombstones made here excepted), outside the lock.
//! * Bounded by the number of distinct keys plus the deltas queued per key between pops.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::indexer::{meta_namespace_key, Indexer};

/// Kind of change a delta records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeltaType {
    Added,
    Updated,
    Deleted,
    /// Produced by a relist (`replace`).
    Replaced,
    /// Produced by a periodic resync.
    Sync,
}

/// A deletion inferred from a relist rather than observed: `obj` is the last known (possibly stale)
/// state.
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    pub key: String,
    pub obj: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        DeletedFinalStateUnknown {
            key: self.key.clone(),
            obj: self.obj.clone(),
        }
    }
}

/// What a delete notification carries: the object, or a tombstone.
#[derive(Debug)]
pub enum DeletedObject<K> {
    Object(Arc<K>),
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            DeletedObject::Object(o) => DeletedObject::Object(o.clone()),
            DeletedObject::Tombstone(t) => DeletedObject::Tombstone(t.clone()),
        }
    }
}

impl<K> DeletedObject<K> {
    /// The object, unwrapping a tombstone.
    pub fn object(&self) -> &Arc<K> {
        match self {
            DeletedObject::Object(o) => o,
            DeletedObject::Tombstone(t) => &t.obj,
        }
    }
    pub fn is_tombstone(&self) -> bool {
        matches!(self, DeletedObject::Tombstone(_))
    }
}

impl<K: crate::Object> DeletedObject<K> {
    /// `DeletionHandlingMetaNamespaceKeyFunc`: a tombstone's stored key, else the object's key.
    pub fn key(&self) -> String {
        match self {
            DeletedObject::Object(o) => meta_namespace_key(o.as_ref()),
            DeletedObject::Tombstone(t) => t.key.clone(),
        }
    }
}

/// One recorded change.
#[derive(Debug)]
pub struct Delta<K> {
    pub type_: DeltaType,
    /// A tombstone only for `Deleted` deltas inferred by `replace`.
    pub object: DeletedObject<K>,
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Delta {
            type_: self.type_,
            object: self.object.clone(),
        }
    }
}

/// The downstream state consulted by `delete`, `replace` and `resync` (client-go `KeyListerGetter`).
pub trait KnownObjects<K>: Send + Sync {
    fn list_keys(&self) -> Vec<String>;
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;
}

impl<K: Send + Sync + 'static> KnownObjects<K> for Indexer<K> {
    fn list_keys(&self) -> Vec<String> {
        Indexer::list_keys(self)
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        Indexer::get_by_key(self, key)
    }
}

/// What a [`Reflector`](crate::Reflector) writes into (client-go `cache.Store` as used by reflectors).
pub trait ReflectorStore<K>: Send + Sync + 'static {
    fn add(&self, obj: K);
    fn update(&self, obj: K);
    fn delete(&self, obj: K);
    /// Full relist result at resourceVersion `rv`. Shared objects: the reflector wraps each page's
    /// items as the page arrives, so a 100,000-object relist never holds all of them unshared.
    fn replace(&self, list: Vec<Arc<K>>, rv: &str);
    fn resync(&self);
}

struct State<K> {
    items: HashMap<String, Vec<Delta<K>>>,
    queue: VecDeque<String>,
    populated: bool,
    initial_population_count: usize,
    synced: bool,
    closed: bool,
}

impl<K> State<K> {
    fn check_synced(&mut self) {
        if self.populated && self.initial_population_count == 0 {
            self.synced = true;
        }
    }
}

/// The delta queue. Single consumer (`pop`), many producers.
pub struct DeltaFifo<K> {
    state: Mutex<State<K>>,
    /// Wakes the consumer; `notify_one` keeps a permit, so no wakeup is lost.
    notify: Notify,
    known: Option<Arc<dyn KnownObjects<K>>>,
    /// Informers set this: relists queue `Replaced` instead of the legacy `Sync`.
    emit_replaced: bool,
    /// Applied to every object before it is queued (client-go's `TransformFunc`); set at most
    /// once, before the first object arrives.
    transform: OnceLock<Transformer<K>>,
}

/// What a [`DeltaFifo`] applies to each object it queues (see
/// [`SharedIndexInformer::set_transform`](crate::SharedIndexInformer::set_transform)).
pub type Transformer<K> = Arc<dyn Fn(Arc<K>) -> Arc<K> + Send + Sync>;

impl<K: crate::Object + Send + Sync + 'static> DeltaFifo<K> {
    /// `known`: the downstream store (informers pass their indexer). Emits `Replaced` deltas.
    pub fn new(known: Option<Arc<dyn KnownObjects<K>>>) -> Self {
        Self::with_options(known, true)
    }

    pub fn with_options(known: Option<Arc<dyn KnownObjects<K>>>, emit_replaced: bool) -> Self {
        DeltaFifo {
            state: Mutex::new(State {
                items: HashMap::new(),
                queue: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
                synced: false,
                closed: false,
            }),
            notify: Notify::new(),
            known,
            emit_replaced,
            transform: OnceLock::new(),
        }
    }

    /// Sets the transform applied to every object queued from now on; `false` if one is set.
    pub fn set_transform(&self, transform: Transformer<K>) -> bool {
        self.transform.set(transform).is_ok()
    }

    /// `obj` as it is queued: transformed, if a transform is set (outside the queue's lock).
    fn transformed(&self, obj: Arc<K>) -> Arc<K> {
        match self.transform.get() {
            Some(t) => t(obj),
            None => obj,
        }
    }

    fn queue_action(
        &self,
        s: &mut State<K>,
        type_: DeltaType,
        key: String,
        object: DeletedObject<K>,
    ) {
        let deltas = s.items.entry(key.clone()).or_default();
        let was_new = deltas.is_empty();
        deltas.push(Delta { type_, object });
        dedup_deltas(deltas);
        if was_new {
            s.queue.push_back(key);
        }
        self.notify.notify_one();
    }

    fn add_or_update(&self, type_: DeltaType, obj: K) {
        let obj = self.transformed(Arc::new(obj));
        let key = meta_namespace_key(&*obj);
        let mut s = self.state.lock();
        s.populated = true;
        s.check_synced();
        self.queue_action(&mut s, type_, key, DeletedObject::Object(obj));
    }

    /// Queues `Added`.
    pub fn add(&self, obj: K) {
        self.add_or_update(DeltaType::Added, obj)
    }

    /// Queues `Updated`.
    pub fn update(&self, obj: K) {
        self.add_or_update(DeltaType::Updated, obj)
    }

    /// Queues `Deleted` unless neither downstream nor this queue knows the key (a deletion already
    /// inferred by a relist is not reported twice).
    pub fn delete(&self, obj: K) {
        let obj = self.transformed(Arc::new(obj));
        let key = meta_namespace_key(&*obj);
        let mut s = self.state.lock();
        s.populated = true;
        s.check_synced();
        let queued = s.items.contains_key(&key);
        let known = match &self.known {
            None => false,
            Some(k) => k.get_by_key(&key).is_some(),
        };
        if !queued && !known {
            return;
        }
        self.queue_action(&mut s, DeltaType::Deleted, key, DeletedObject::Object(obj));
    }

    /// Relist result: `Replaced` for each object, tombstones for vanished keys (spec §2.4).
    pub fn replace(&self, list: Vec<Arc<K>>, _rv: &str) {
        let list: Vec<Arc<K>> = if self.transform.get().is_some() {
            list.into_iter().map(|o| self.transformed(o)).collect()
        } else {
            list
        };
        let mut s = self.state.lock();
        let type_ = if self.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let mut keys = HashSet::with_capacity(list.len());
        for obj in list {
            let key = meta_namespace_key(&*obj);
            keys.insert(key.clone());
            self.queue_action(&mut s, type_, key, DeletedObject::Object(obj));
        }
        let mut queued_deletions = 0usize;
        // Keys queued here but absent from the new list.
        let stale: Vec<(String, Arc<K>)> = s
            .items
            .iter()
            .filter(|(k, _)| !keys.contains(*k))
            .filter_map(|(k, d)| d.last().map(|d| (k.clone(), d.object.object().clone())))
            .collect();
        for (key, obj) in stale {
            queued_deletions += 1;
            let t = DeletedFinalStateUnknown {
                key: key.clone(),
                obj,
            };
            self.queue_action(&mut s, DeltaType::Deleted, key, DeletedObject::Tombstone(t));
        }
        // Keys known downstream, absent from the list, with nothing queued.
        if let Some(known) = &self.known {
            for key in known.list_keys() {
                if keys.contains(&key) || s.items.contains_key(&key) {
                    continue;
                }
                let Some(obj) = known.get_by_key(&key) else {
                    continue;
                };
                queued_deletions += 1;
                let t = DeletedFinalStateUnknown {
                    key: key.clone(),
                    obj,
                };
                self.queue_action(&mut s, DeltaType::Deleted, key, DeletedObject::Tombstone(t));
            }
        }
        if !s.populated {
            s.populated = true;
            s.initial_population_count = keys.len() + queued_deletions;
            s.check_synced();
        }
    }

    /// Queues `Sync` for every downstream object that has no pending deltas (spec §2.4).
    pub fn resync(&self) {
        let Some(known) = &self.known else {
            return;
        };
        let mut s = self.state.lock();
        for key in known.list_keys() {
            if s.items.contains_key(&key) {
                continue;
            }
            if let Some(obj) = known.get_by_key(&key) {
                self.queue_action(&mut s, DeltaType::Sync, key, DeletedObject::Object(obj));
            }
        }
    }

    /// Waits for the head key and runs `process(deltas, is_in_initial_list)` under the FIFO lock.
    /// Returns `None` once closed and empty.
    pub async fn pop<R>(&self, process: impl FnOnce(Vec<Delta<K>>, bool) -> R) -> Option<R> {
        loop {
            {
                let mut s = self.state.lock();
                if let Some(key) = s.queue.pop_front() {
                    let in_initial = !s.synced;
                    if s.initial_population_count > 0 {
                        s.initial_population_count -= 1;
                        s.check_synced();
                    }
                    let Some(deltas) = s.items.remove(&key) else {
                        // Invariant key ∈ queue ⇔ key ∈ items; tolerate a violation.
                        tracing::error!(%key, "delta fifo: queued key without deltas");
                        continue;
                    };
                    return Some(process(deltas, in_initial));
                }
                if s.closed {
                    return None;
                }
            }
            self.notify.notified().await;
        }
    }

    /// True once the first relist was fully popped (see module docs).
    pub fn has_synced(&self) -> bool {
        self.state.lock().synced
    }

    /// Wakes the consumer; `pop` returns `None` once the queue drains.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.notify.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// Number of queued keys.
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queued keys in pop order (diagnostics and tests).
    pub fn queued_keys(&self) -> Vec<String> {
        self.state.lock().queue.iter().cloned().collect()
    }

    /// The deltas queued for `key` (diagnostics and tests).
    pub fn deltas_of(&self, key: &str) -> Vec<Delta<K>> {
        self.state
            .lock()
            .items
            .get(key)
            .cloned()
            .unwrap_or_default()
    }
}

/// Collapses two trailing `Deleted` deltas (spec §2.3).
fn dedup_deltas<K>(deltas: &mut Vec<Delta<K>>) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    if deltas[n - 1].type_ != DeltaType::Deleted || deltas[n - 2].type_ != DeltaType::Deleted {
        return;
    }
    if deltas[n - 2].object.is_tombstone() {
        deltas.remove(n - 2); // keep the newer (real or tombstone)
    } else {
        deltas.pop(); // keep the older, real final state
    }
}

impl<K: crate::Object + Send + Sync + 'static> ReflectorStore<K> for DeltaFifo<K> {
    fn add(&self, obj: K) {
        DeltaFifo::add(self, obj)
    }
    fn update(&self, obj: K) {
        DeltaFifo::update(self, obj)
    }
    fn delete(&self, obj: K) {
        DeltaFifo::delete(self, obj)
    }
    fn replace(&self, list: Vec<Arc<K>>, rv: &str) {
        DeltaFifo::replace(self, list, rv)
    }
    fn resync(&self) {
        DeltaFifo::resync(self)
    }
}

#[cfg(test)]
#[path = "delta_fifo_tests.rs"]
mod tests;
