//! The webhook configurations the dispatchers read (upstream's
//! `configuration.NewMutatingWebhookConfigurationManager`: an informer over the configurations,
//! compiled into webhook accessors once per change).
//!
//! One task per apiserver follows both configuration resources in the watch cache (a watch from
//! a snapshot, re-made when the cache drops it: it fell behind or relisted) and publishes an
//! immutable [`Hooks`] after every change: compiled hooks sorted by configuration name, then by
//! their index in it, as upstream orders them. A request reads the current snapshot (an `Arc`
//! clone under a read lock) and pays nothing else when it matches no webhook. A change takes
//! effect as soon as the task has applied it: shortly after the write, as with upstream's
//! informer.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use super::matching::Hook;
use crate::watch_cache::{EventType, WatchCache, WatchFrom, WatchStart};

/// The storage prefix of MutatingWebhookConfigurations.
pub const MUTATING_PREFIX: &str = "/registry/mutatingwebhookconfigurations/";
/// The storage prefix of ValidatingWebhookConfigurations.
pub const VALIDATING_PREFIX: &str = "/registry/validatingwebhookconfigurations/";

/// Every webhook, compiled, in call order.
#[derive(Debug, Default)]
pub struct Hooks {
    pub mutating: Vec<Arc<Hook>>,
    pub validating: Vec<Arc<Hook>>,
}

/// The current [`Hooks`], replaced whole on every change.
#[derive(Debug, Default)]
pub struct Source {
    current: RwLock<Arc<Hooks>>,
}

/// The compiled webhooks of each configuration, by storage key (so by name).
type ByConfiguration = BTreeMap<String, Vec<Arc<Hook>>>;

impl Source {
    /// The webhooks now.
    pub fn hooks(&self) -> Arc<Hooks> {
        self.current.read().clone()
    }

    /// Replaces the webhooks (the follower task; tests).
    pub fn publish(&self, mutating: &ByConfiguration, validating: &ByConfiguration) {
        let flat = |m: &ByConfiguration| m.values().flatten().cloned().collect();
        *self.current.write() = Arc::new(Hooks {
            mutating: flat(mutating),
            validating: flat(validating),
        });
    }

    /// Follows both configuration resources in `cache` until `shutdown`.
    pub async fn follow(self: Arc<Self>, cache: Arc<WatchCache>, shutdown: CancellationToken) {
        loop {
            let (Some(mut m), Some(mut v)) = (
                watch(&cache, MUTATING_PREFIX),
                watch(&cache, VALIDATING_PREFIX),
            ) else {
                // A snapshot watch never expires; nothing to follow is a closed cache.
                return;
            };
            let mut mutating = ByConfiguration::new();
            let mut validating = ByConfiguration::new();
            for ev in m.initial.drain(..) {
                apply(&mut mutating, &ev);
            }
            for ev in v.initial.drain(..) {
                apply(&mut validating, &ev);
            }
            self.publish(&mutating, &validating);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    ev = m.rx.recv() => match ev {
                        Some(ev) => apply(&mut mutating, &ev),
                        None => break,
                    },
                    ev = v.rx.recv() => match ev {
                        Some(ev) => apply(&mut validating, &ev),
                        None => break,
                    },
                }
                self.publish(&mutating, &validating);
            }
            // Dropped by the cache (behind, or relisted): start again from a snapshot, after a
            // pause so a cache that keeps closing is not spun on.
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            }
        }
    }
}

fn watch(cache: &WatchCache, prefix: &str) -> Option<crate::watch_cache::CacheWatch> {
    match cache.watch(prefix, WatchFrom::Snapshot) {
        WatchStart::Watching(w) => Some(w),
        WatchStart::Expired { .. } => None,
    }
}

/// One configuration event: its webhooks compiled anew, or removed.
fn apply(configs: &mut ByConfiguration, ev: &crate::watch_cache::CacheEvent) {
    if ev.kind == EventType::Deleted {
        configs.remove(&ev.key);
        return;
    }
    let name = api::meta::name(&ev.object).unwrap_or("").to_string();
    let hooks = ev
        .object
        .get("webhooks")
        .and_then(serde_json::Value::as_array)
        .map(|ws| {
            ws.iter()
                .enumerate()
                .filter_map(|(i, w)| Hook::compile(&name, i, w).map(Arc::new))
                .collect()
        })
        .unwrap_or_default();
    configs.insert(ev.key.clone(), hooks);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(name: &str, hooks: &[&str]) -> bytes::Bytes {
        let webhooks: Vec<_> = hooks
            .iter()
            .map(|h| {
                json!({"name": h, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://127.0.0.1/"}})
            })
            .collect();
        let obj = json!({"metadata": {"name": name}, "webhooks": webhooks});
        bytes::Bytes::from(obj.to_string())
    }

    fn names(hooks: &[Arc<Hook>]) -> Vec<String> {
        hooks.iter().map(|h| h.name.clone()).collect()
    }

    /// Waits (bounded) until the published hooks satisfy `f`.
    async fn until(source: &Source, f: impl Fn(&Hooks) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while tokio::time::Instant::now() < deadline {
            if f(&source.hooks()) {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        false
    }

    #[tokio::test]
    async fn follows_configurations_in_name_then_index_order() {
        let store: Arc<dyn store::Store> =
            match store::MemoryStore::new(store::StoreConfig::default()) {
                Ok(s) => Arc::new(s),
                Err(e) => panic!("store: {e}"),
            };
        let shutdown = CancellationToken::new();
        let cache = match WatchCache::start(store.clone(), 100, 100, shutdown.clone()).await {
            Ok(c) => c,
            Err(e) => panic!("cache: {e}"),
        };
        let key = |p: &str, n: &str| format!("{p}{n}");
        // One before the source starts (its snapshot), the rest after (its watch).
        let b = key(MUTATING_PREFIX, "b");
        assert!(store.create(&b, config("b", &["b1.x.io"])).await.is_ok());
        let source = Arc::new(Source::default());
        tokio::spawn(source.clone().follow(cache.clone(), shutdown.clone()));
        let a = key(MUTATING_PREFIX, "a");
        assert!(store
            .create(&a, config("a", &["a1.x.io", "a2.x.io"]))
            .await
            .is_ok());
        let v = key(VALIDATING_PREFIX, "v");
        assert!(store.create(&v, config("v", &["v1.x.io"])).await.is_ok());
        assert!(
            until(&source, |h| names(&h.mutating)
                == ["a1.x.io", "a2.x.io", "b1.x.io"]
                && names(&h.validating) == ["v1.x.io"])
            .await,
            "{:?}",
            source.hooks()
        );
        assert!(store.delete(&a, None).await.is_ok());
        assert!(until(&source, |h| names(&h.mutating) == ["b1.x.io"]).await);
        shutdown.cancel();
    }
}
