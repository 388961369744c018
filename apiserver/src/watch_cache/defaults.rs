//! Defaulting of objects read from storage, as upstream's storage codec defaults every object it
//! decodes from etcd (the versioning codec's `Decode` runs the scheme's defaulter; a custom
//! resource's codec applies its structural schema's `default`s), so that an object stored before a
//! default existed (an older data dir, a write by another process on the same etcd, a CRD whose
//! schema gained a `default` later) is served defaulted by GET, LIST and WATCH. The defaulted
//! object is never written back, and keeps its resourceVersion.
//!
//! The cache does not know kinds: the registry gives it a [`StorageDefaults`] ([`Defaulter`]),
//! asked by storage key. Where it is asked, and why only there:
//! - **Initial list and relists** ([`super::WatchCache`]'s `relist`): every object, once per load.
//! - **Store events no writer of this process handed over**: writes by another apiserver on the
//!   same etcd, by an older process, or whose offer did not meet its event. A handed-over object
//!   is the object this process's registry defaulted before it stored it, so the per-event path
//!   of this process's own writes never decodes or defaults anything.
//! - **A change of the defaults themselves** (a CRD's schema): [`super::WatchCache::redefault`]
//!   brings the held objects of the resource up to the new defaults, as upstream rebuilds the
//!   CRD's storage (and its cacher) from etcd.
//! - **Reads around the cache**: the uncached resources' lists and watches, and the registry's
//!   read of an object newer than the cache ([`Defaulter::decode`]).
//!
//! Guarantees: defaulting only adds what the kind's defaults add (the object's resourceVersion
//! and every field it had are kept); an object the defaults change is put back into Go field
//! order, so reads stay a plain serialisation of what is held.

use std::sync::Arc;

use serde_json::Value;

use store::Revision;

use super::{stamp, Entry, SelectorView, WatchCache};

/// The defaults of stored objects, by storage key: what the registry knows of the kinds.
pub trait StorageDefaults: Send + Sync + 'static {
    /// Applies to `obj`, read from storage at `key`, the defaults of its kind (and of the version
    /// it is stored in); whether they added fields (then `obj` was put back into Go field order;
    /// a default that only replaced a value in place is applied but not told). Objects of kinds
    /// without defaults are left as they are, cheaply.
    fn default_stored(&self, key: &str, obj: &mut Value) -> bool;

    /// What label and field selectors of the kind read of `obj`, held at `key`: its labels,
    /// the values of its field labels, and its `apiVersion` and `kind` (upstream's cacher keeps
    /// an object's labels and fields beside it the same way). The cache filters lists on it
    /// without decoding the object, and a list response sends the held text as it is when the
    /// type meta is the endpoint's. `None` (the default) when the kind cannot say: a filter
    /// then reads the whole object.
    fn selector_view(&self, key: &str, obj: &Value) -> Option<SelectorView> {
        let _ = (key, obj);
        None
    }
}

/// The cache's handle on the [`StorageDefaults`], if it has any (a cache without one, as in
/// the store-level tests, keeps objects as stored). Cheap to clone.
#[derive(Clone, Default)]
pub struct Defaulter(Option<Arc<dyn StorageDefaults>>);

impl std::fmt::Debug for Defaulter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Defaulter").field(&self.0.is_some()).finish()
    }
}

impl Defaulter {
    /// A defaulter asking `defaults`.
    pub fn new(defaults: Arc<dyn StorageDefaults>) -> Self {
        Defaulter(Some(defaults))
    }

    /// Applies the defaults of the object at `key`; whether they added fields.
    pub fn apply(&self, key: &str, obj: &mut Value) -> bool {
        self.0.as_ref().is_some_and(|d| d.default_stored(key, obj))
    }

    /// What selectors read of the object at `key` ([`StorageDefaults::selector_view`]).
    pub fn view(&self, key: &str, obj: &Value) -> Option<SelectorView> {
        self.0.as_ref().and_then(|d| d.selector_view(key, obj))
    }

    /// Decodes the `bytes` stored at `key` (either [`super::StoredText`]), stamps `revision` as their resourceVersion and
    /// applies the defaults.
    pub fn decode(&self, key: &str, bytes: &[u8], revision: Revision) -> Option<Value> {
        let mut v = super::stored::parse(bytes)?;
        self.apply(key, &mut v);
        stamp(&mut v, revision);
        Some(v)
    }
}

impl WatchCache {
    /// The defaulter of what enters from storage; the registry decodes through it what it reads
    /// from the store itself.
    pub fn defaulter(&self) -> &Defaulter {
        &self.defaulter
    }

    /// Brings the held objects of the resource `prefix` (`/registry/<storage>/`) up to its
    /// defaults after they changed (a CRD's schema gained or changed a `default`), as upstream
    /// rebuilds a changed CRD's storage and its cache from etcd. Call it after the new defaults
    /// are in force: events applied from then on are defaulted by them already.
    ///
    /// Each object the defaults change is replaced (its resourceVersion kept, nothing written to
    /// the store) unless an event replaced it meanwhile; if any was, the resource's history is
    /// dropped and its watchers are ended, so that no watcher mixes events of both schemas (they
    /// watch again and see the new state). Objects are defaulted outside the cache's lock, from
    /// their held state: a default the schema dropped stays on objects defaulted before, until
    /// they are written again or the cache relists. Returns how many objects changed.
    pub fn redefault(&self, prefix: &str) -> usize {
        let held: Vec<(String, Arc<Entry>)> = match self.inner.read().resources.get(prefix) {
            Some(res) => res
                .objects
                .iter()
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect(),
            None => return 0,
        };
        let defaulted: Vec<(String, Arc<Entry>, Arc<Entry>)> = held
            .into_iter()
            .filter_map(|(key, old)| {
                let held = old.object()?;
                let mut v = Value::clone(&held);
                self.defaulter.apply(&key, &mut v);
                if v == *held {
                    return None;
                }
                let new = self.entry(&key, old.revision, &Arc::new(v), None, None)?;
                Some((key, old, new))
            })
            .collect();
        if defaulted.is_empty() {
            return 0;
        }
        let mut inner = self.inner.write();
        let current = inner.revision;
        let Some(res) = inner.resources.get_mut(prefix) else {
            return 0;
        };
        let mut changed = 0;
        for (key, old, new) in defaulted {
            // An object an event replaced since was defaulted by the new defaults.
            if let Some(slot) = res.objects.get_mut(&key).filter(|e| Arc::ptr_eq(e, &old)) {
                *slot = new;
                changed += 1;
            }
        }
        if changed == 0 {
            // Every object was replaced by an event meanwhile: no watcher saw an old default.
            return 0;
        }
        // Freed after the lock is released: readers do not wait on it.
        let history = std::mem::take(&mut res.ring);
        res.oldest = current;
        res.live = None;
        drop(inner);
        drop(history);
        tracing::info!(prefix, changed, "stored objects defaulted anew");
        changed
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::{json, Value};

    use super::StorageDefaults;

    /// Defaults `spec.color` (to `color`) of widgets and events, counting its calls.
    #[derive(Default)]
    pub struct Colors {
        pub calls: AtomicUsize,
        /// The default; changed by a test to stand for a schema change.
        pub color: parking_lot::Mutex<String>,
    }

    impl StorageDefaults for Colors {
        fn default_stored(&self, key: &str, obj: &mut Value) -> bool {
            self.calls.fetch_add(1, Ordering::Relaxed);
            // Widgets, and events (a resource the cache does not hold) for the uncached paths.
            if !key.starts_with("/registry/widgets/") && !key.starts_with("/registry/events/") {
                return false;
            }
            let color = self.color.lock().clone();
            let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
                return false;
            };
            if spec.contains_key("color") || color.is_empty() {
                return false;
            }
            spec.insert("color".into(), json!(color));
            true
        }
    }
}
