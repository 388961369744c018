//! Typed listers over an informer's [`Indexer`] (client-go `listers.go`; spec informer.md §3.4).
//!
//! Reads only the local cache, never the apiserver. `list(everything)` skips label evaluation;
//! `namespace(ns)` uses the namespace index (falling back to a scan, with a warning, if an indexer
//! without it was supplied). Absence is a value (`None`), not an error.

use std::sync::Arc;

use crate::indexer::{Indexer, NAMESPACE_INDEX};
use api::labels::Selector;

/// Lister across all namespaces.
pub struct Lister<K> {
    indexer: Indexer<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Lister {
            indexer: self.indexer.clone(),
        }
    }
}

fn select<K: crate::Object>(objs: Vec<Arc<K>>, sel: &Selector) -> Vec<Arc<K>> {
    if sel.is_empty() {
        return objs;
    }
    objs.into_iter()
        .filter(|o| sel.matches(o.meta().labels.as_ref()))
        .collect()
}

impl<K: crate::Object + Send + Sync + 'static> Lister<K> {
    pub fn new(indexer: Indexer<K>) -> Self {
        Lister { indexer }
    }

    /// Every cached object matching `selector`.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        select(self.indexer.list(), selector)
    }

    /// By key (`ns/name` or `name`).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.indexer.get_by_key(key)
    }

    /// Lister restricted to one namespace (`""` = all namespaces).
    pub fn namespace(&self, ns: &str) -> NamespaceLister<K> {
        NamespaceLister {
            indexer: self.indexer.clone(),
            namespace: ns.to_string(),
        }
    }
}

/// Lister within one namespace.
pub struct NamespaceLister<K> {
    indexer: Indexer<K>,
    namespace: String,
}

impl<K: crate::Object + Send + Sync + 'static> NamespaceLister<K> {
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        if self.namespace.is_empty() {
            return select(self.indexer.list(), selector);
        }
        let objs = match self.indexer.try_by_index(NAMESPACE_INDEX, &self.namespace) {
            Ok(v) => v,
            Err(_) => {
                tracing::warn!(namespace = %self.namespace, "namespace index missing; scanning");
                self.indexer
                    .list()
                    .into_iter()
                    .filter(|o| o.meta().namespace.as_deref() == Some(self.namespace.as_str()))
                    .collect()
            }
        };
        select(objs, selector)
    }

    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        if self.namespace.is_empty() {
            self.indexer.get_by_key(name)
        } else {
            self.indexer
                .get_by_key(&format!("{}/{}", self.namespace, name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indexer::namespace_indexers;
    use k8s_openapi::api::core::v1::Pod;
    use std::collections::BTreeMap;

    fn pod(ns: &str, name: &str, app: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.name = Some(name.into());
        p.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
        Arc::new(p)
    }

    #[test]
    fn namespace_and_selector() -> crate::Result<()> {
        let idx = Indexer::new(namespace_indexers::<Pod>());
        idx.add("a/1", pod("a", "1", "web"));
        idx.add("a/2", pod("a", "2", "db"));
        idx.add("b/3", pod("b", "3", "web"));
        let l = Lister::new(idx);
        let web = Selector::parse("app=web").unwrap_or_else(|_| Selector::nothing());
        assert_eq!(l.list(&web).len(), 2);
        assert_eq!(l.list(&Selector::everything()).len(), 3);
        assert!(l.list(&Selector::nothing()).is_empty());
        assert_eq!(l.namespace("a").list(&web).len(), 1);
        assert_eq!(l.namespace("a").list(&Selector::everything()).len(), 2);
        assert!(l.namespace("a").get("2").is_some());
        assert!(l.namespace("b").get("2").is_none());
        assert!(l.get("b/3").is_some());
        Ok(())
    }
}
