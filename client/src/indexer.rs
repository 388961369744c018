//! The informer cache: a thread-safe `key → Arc<K>` map with secondary indexes (client-go
//! `thread_safe_store.go`, `index.go`, `store.go`; spec informer.md §3).
//!
//! Guarantees:
//! * Every mutation updates the map and all indexes under one write lock, so readers never see an
//!   object without its index entries (or a half-applied `replace`).
//! * Index value sets that become empty are removed (no growth with high-cardinality indexes).
//! * Objects are shared `Arc`s: callers must not mutate them (they cannot, without `Arc::make_mut`
//!   on a clone, which leaves the cache untouched).
//! * The namespace index [`NAMESPACE_INDEX`] is installed by every informer in this crate.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::RwLock;

use crate::error::{Error, Result};

/// Name of the built-in namespace index (`cache.NamespaceIndex`).
pub const NAMESPACE_INDEX: &str = "namespace";

/// Computes the indexed values of an object (may be several, or none).
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;
/// Named index functions.
pub type Indexers<K> = HashMap<String, IndexFunc<K>>;

/// `MetaNamespaceKeyFunc`: `namespace/name`, or `name` for cluster-scoped objects.
pub fn meta_namespace_key<K: crate::Object>(obj: &K) -> String {
    key_of_meta(obj.meta())
}

/// Key of an `ObjectMeta`.
pub fn key_of_meta(m: &ObjectMeta) -> String {
    let name = m.name.as_deref().unwrap_or_default();
    match m.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// `SplitMetaNamespaceKey`: `name` → `("", name)`, `ns/name` → `(ns, name)`, else an error.
pub fn split_meta_namespace_key(key: &str) -> Result<(&str, &str)> {
    let mut parts = key.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => Ok(("", name)),
        (Some(ns), Some(name), None) => Ok((ns, name)),
        _ => Err(Error::InvalidKey(key.to_string())),
    }
}

/// `MetaNamespaceIndexFunc`: `[namespace]`.
pub fn namespace_index_func<K: crate::Object>(obj: &K) -> Vec<String> {
    vec![obj.meta().namespace.clone().unwrap_or_default()]
}

/// Name of the controller-owner index the ReplicaSet controller installs (spec informer.md §6.1).
pub const CONTROLLER_UID_INDEX: &str = "controllerUID";

/// `[uid of the ownerReference with controller=true]`, or nothing.
pub fn controller_uid_index_func<K: crate::Object>(obj: &K) -> Vec<String> {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
        .take(1)
        .collect()
}

/// The default indexers of an informer: just the namespace index.
pub fn namespace_indexers<K: crate::Object + 'static>() -> Indexers<K> {
    let mut m: Indexers<K> = HashMap::new();
    m.insert(
        NAMESPACE_INDEX.to_string(),
        Arc::new(namespace_index_func::<K>),
    );
    m
}

/// The objects indexed under one value, by key. client-go keeps only the keys and looks each up
/// in the item map; holding the objects makes a lookup by index (the replication controller lists
/// every pod of a namespace on every sync) a walk over one map instead of a hash lookup per key.
type Bucket<K> = HashMap<String, Arc<K>>;

struct Store<K> {
    items: HashMap<String, Arc<K>>,
    indexers: Indexers<K>,
    /// index name → indexed value → objects by key
    indices: HashMap<String, HashMap<String, Bucket<K>>>,
}

impl<K> Store<K> {
    fn update_indices(&mut self, key: &str, old: Option<&K>, new: Option<&Arc<K>>) {
        for (name, f) in &self.indexers {
            let old_vals = old.map(|o| f(o)).unwrap_or_default();
            let new_vals = new.map(|n| f(n)).unwrap_or_default();
            let index = self.indices.entry(name.clone()).or_default();
            if let (Some(new), [was], [now]) = (new, &old_vals[..], &new_vals[..]) {
                if was == now {
                    // Same value: the bucket just holds the new object.
                    if let Some(slot) = index.get_mut(now).and_then(|b| b.get_mut(key)) {
                        *slot = new.clone();
                        continue;
                    }
                }
            }
            for v in &old_vals {
                if let Some(bucket) = index.get_mut(v) {
                    bucket.remove(key);
                    if bucket.is_empty() {
                        index.remove(v);
                    }
                }
            }
            if let Some(new) = new {
                for v in new_vals {
                    index
                        .entry(v)
                        .or_default()
                        .insert(key.to_string(), new.clone());
                }
            }
        }
    }
}

/// A shared handle on the thread-safe store (client-go `cache.Indexer`). Clones share state.
pub struct Indexer<K> {
    inner: Arc<RwLock<Store<K>>>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Indexer {
            inner: self.inner.clone(),
        }
    }
}

impl<K> std::fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Indexer")
            .field("len", &self.inner.read().items.len())
            .finish()
    }
}

impl<K: Send + Sync + 'static> Indexer<K> {
    pub fn new(indexers: Indexers<K>) -> Self {
        Indexer {
            inner: Arc::new(RwLock::new(Store {
                items: HashMap::new(),
                indexers,
                indices: HashMap::new(),
            })),
        }
    }

    /// Add == Update: stores `obj` under `key` and re-indexes it. Returns the previous object.
    pub fn add(&self, key: &str, obj: Arc<K>) -> Option<Arc<K>> {
        let mut s = self.inner.write();
        let old = s.items.insert(key.to_string(), obj.clone());
        s.update_indices(key, old.as_deref(), Some(&obj));
        old
    }

    /// Same as [`add`](Self::add).
    pub fn update(&self, key: &str, obj: Arc<K>) -> Option<Arc<K>> {
        self.add(key, obj)
    }

    /// Removes `key`; returns the removed object.
    pub fn delete(&self, key: &str) -> Option<Arc<K>> {
        let mut s = self.inner.write();
        let old = s.items.remove(key)?;
        s.update_indices(key, Some(&old), None);
        Some(old)
    }

    /// Swaps in a whole new content and rebuilds every index.
    pub fn replace(&self, items: Vec<(String, Arc<K>)>) {
        let mut s = self.inner.write();
        s.items = items.into_iter().collect();
        s.indices.clear();
        let keys: Vec<(String, Arc<K>)> = s
            .items
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in keys {
            s.update_indices(&k, None, Some(&v));
        }
    }

    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.inner.read().items.contains_key(key)
    }

    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().cloned().collect()
    }

    pub fn list_keys(&self) -> Vec<String> {
        self.inner.read().items.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Objects whose `index` values contain `value`; empty (with a warning) for an unknown index.
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        match self.try_by_index(index, value) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "by_index on unknown index");
                Vec::new()
            }
        }
    }

    /// Like [`by_index`](Self::by_index) but an unknown index is an error (client-go `ByIndex`).
    pub fn try_by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>> {
        let s = self.inner.read();
        if !s.indexers.contains_key(index) {
            return Err(Error::IndexNotFound(index.to_string()));
        }
        Ok(s.indices
            .get(index)
            .and_then(|i| i.get(value))
            .map(|bucket| bucket.values().cloned().collect())
            .unwrap_or_default())
    }

    /// Keys whose `index` values contain `value`.
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<String>> {
        let s = self.inner.read();
        if !s.indexers.contains_key(index) {
            return Err(Error::IndexNotFound(index.to_string()));
        }
        Ok(s.indices
            .get(index)
            .and_then(|i| i.get(value))
            .map(|bucket| bucket.keys().cloned().collect())
            .unwrap_or_default())
    }

    /// Objects sharing any indexed value with `obj` (client-go `Index`).
    pub fn index(&self, index: &str, obj: &K) -> Result<Vec<Arc<K>>> {
        let s = self.inner.read();
        let f = s
            .indexers
            .get(index)
            .ok_or_else(|| Error::IndexNotFound(index.to_string()))?;
        let mut found: HashMap<&str, &Arc<K>> = HashMap::new();
        if let Some(i) = s.indices.get(index) {
            for v in f(obj) {
                if let Some(bucket) = i.get(&v) {
                    found.extend(bucket.iter().map(|(k, o)| (k.as_str(), o)));
                }
            }
        }
        Ok(found.into_values().cloned().collect())
    }

    /// All values currently indexed under `index`.
    pub fn list_index_func_values(&self, index: &str) -> Vec<String> {
        self.inner
            .read()
            .indices
            .get(index)
            .map(|i| i.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Registers more indexers and indexes existing items; a name conflict is an error and adds none.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        let mut s = self.inner.write();
        if let Some(name) = indexers.keys().find(|n| s.indexers.contains_key(*n)) {
            return Err(Error::IndexerConflict(name.clone()));
        }
        let items: Vec<(String, Arc<K>)> = s
            .items
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, f) in indexers {
            let mut index: HashMap<String, Bucket<K>> = HashMap::new();
            for (k, v) in &items {
                for val in f(v) {
                    index.entry(val).or_default().insert(k.clone(), v.clone());
                }
            }
            s.indices.insert(name.clone(), index);
            s.indexers.insert(name, f);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(ns: &str, name: &str, node: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.name = Some(name.into());
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        });
        Arc::new(p)
    }

    fn node_of(p: &Pod) -> Vec<String> {
        p.spec.iter().filter_map(|s| s.node_name.clone()).collect()
    }

    #[test]
    fn controller_uid_index_uses_only_the_controller_ref() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let mut p = (*pod("a", "b", "n")).clone();
        assert!(controller_uid_index_func(&p).is_empty());
        let owner = |uid: &str, controller: Option<bool>| OwnerReference {
            uid: uid.into(),
            controller,
            ..Default::default()
        };
        p.metadata.owner_references = Some(vec![owner("u1", None), owner("u2", Some(true))]);
        assert_eq!(controller_uid_index_func(&p), vec!["u2".to_string()]);
    }

    #[test]
    fn keys() -> Result<()> {
        assert_eq!(meta_namespace_key(&*pod("a", "b", "n")), "a/b");
        // Cluster-scoped (moved from the controllers' copy of this function).
        let node = ObjectMeta {
            name: Some("node-1".into()),
            ..Default::default()
        };
        assert_eq!(key_of_meta(&node), "node-1");
        let empty_ns = ObjectMeta {
            namespace: Some(String::new()),
            ..node
        };
        assert_eq!(key_of_meta(&empty_ns), "node-1");
        assert_eq!(split_meta_namespace_key("a/b")?, ("a", "b"));
        assert_eq!(split_meta_namespace_key("b")?, ("", "b"));
        assert!(split_meta_namespace_key("a/b/c").is_err());
        Ok(())
    }

    #[test]
    fn indexes_follow_updates_and_empty_sets_are_dropped() -> Result<()> {
        let idx = Indexer::new(namespace_indexers::<Pod>());
        idx.add_indexers(HashMap::from([(
            "node".to_string(),
            Arc::new(node_of) as IndexFunc<Pod>,
        )]))?;
        assert!(matches!(
            idx.add_indexers(HashMap::from([(
                "node".to_string(),
                Arc::new(node_of) as IndexFunc<Pod>
            )])),
            Err(Error::IndexerConflict(_))
        ));
        idx.add("a/p1", pod("a", "p1", "n1"));
        idx.add("a/p2", pod("a", "p2", "n1"));
        idx.add("b/p3", pod("b", "p3", "n2"));
        assert_eq!(idx.by_index(NAMESPACE_INDEX, "a").len(), 2);
        assert_eq!(idx.by_index("node", "n1").len(), 2);
        idx.update("a/p1", pod("a", "p1", "n3"));
        assert_eq!(idx.by_index("node", "n1").len(), 1);
        assert_eq!(idx.index_keys("node", "n3")?, vec!["a/p1".to_string()]);
        idx.delete("b/p3");
        let mut vals = idx.list_index_func_values("node");
        vals.sort();
        assert_eq!(
            vals,
            vec!["n1".to_string(), "n3".to_string()],
            "empty set for n2 removed"
        );
        assert!(idx.try_by_index("nope", "x").is_err());
        assert_eq!(idx.index("node", &pod("z", "z", "n1"))?.len(), 1);
        idx.replace(vec![("c/p9".into(), pod("c", "p9", "n9"))]);
        assert_eq!(idx.list_keys(), vec!["c/p9".to_string()]);
        assert!(idx.by_index(NAMESPACE_INDEX, "a").is_empty());
        assert_eq!(idx.by_index("node", "n9").len(), 1);
        Ok(())
    }

    /// An update that keeps an object's indexed values is still what a lookup by index returns.
    #[test]
    fn lookups_by_index_return_the_latest_object() -> Result<()> {
        let idx = Indexer::new(namespace_indexers::<Pod>());
        idx.add("a/p1", pod("a", "p1", "n1"));
        idx.update("a/p1", pod("a", "p1", "n2"));
        let by_ns = idx.try_by_index(NAMESPACE_INDEX, "a")?;
        assert_eq!(by_ns.len(), 1);
        assert_eq!(node_of(&by_ns[0]), vec!["n2".to_string()]);
        assert!(Arc::ptr_eq(
            &by_ns[0],
            &idx.get_by_key("a/p1").expect("stored")
        ));
        let same_ns = idx.index(NAMESPACE_INDEX, &pod("a", "other", "x"))?;
        assert_eq!(node_of(&same_ns[0]), vec!["n2".to_string()]);
        idx.delete("a/p1");
        assert!(idx.try_by_index(NAMESPACE_INDEX, "a")?.is_empty());
        Ok(())
    }
}
