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
