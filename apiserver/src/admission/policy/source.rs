//! The policies and bindings the plugin reads (upstream's generic policy `source.go`: informers
//! over both kinds, each policy compiled once per change and joined with the bindings that name
//! it).
//!
//! One task per apiserver follows both resources in the watch cache (a watch from a snapshot,
//! re-made when the cache drops it) and publishes an immutable [`Snapshot`] after every change:
//! each policy with at least one binding, in policy-name order, with its bindings in name order.
//! A policy is compiled when it changes, never per request; a binding's change re-joins without
//! recompiling. A request reads the current snapshot (an `Arc` clone under a read lock) and,
//! when no binding exists, pays nothing else.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use super::compiled::{Binding, Policy};
use crate::watch_cache::{CacheEvent, EventType, WatchCache, WatchFrom, WatchStart};

/// The storage prefix of ValidatingAdmissionPolicies.
pub const POLICY_PREFIX: &str = "/registry/validatingadmissionpolicies/";
/// The storage prefix of ValidatingAdmissionPolicyBindings.
pub const BINDING_PREFIX: &str = "/registry/validatingadmissionpolicybindings/";

/// A policy and the bindings that name it.
#[derive(Debug)]
pub struct Hook {
    pub policy: Arc<Policy>,
    pub bindings: Vec<Arc<Binding>>,
}

/// Every bound policy, compiled, in evaluation order.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub hooks: Vec<Hook>,
}

/// The current [`Snapshot`], replaced whole on every change.
#[derive(Debug, Default)]
pub struct Source {
    current: RwLock<Arc<Snapshot>>,
}

/// Compiled objects by storage key (so by name).
type ByKey<T> = BTreeMap<String, Arc<T>>;

impl Source {
    /// The policies now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.read().clone()
    }

    /// Whether no policy is bound (a lock and a length).
    pub fn is_empty(&self) -> bool {
        self.current.read().hooks.is_empty()
    }

    /// Joins `policies` with `bindings` and publishes the result (the follower task; tests).
    pub fn publish(&self, policies: &ByKey<Policy>, bindings: &ByKey<Binding>) {
        let mut by_policy: BTreeMap<&str, Vec<Arc<Binding>>> = BTreeMap::new();
        for b in bindings.values() {
            by_policy
                .entry(b.policy_name.as_str())
                .or_default()
                .push(b.clone());
        }
        let hooks = policies
            .values()
            .filter_map(|p| {
                let bindings = by_policy.remove(p.name.as_str())?;
                Some(Hook {
                    policy: p.clone(),
                    bindings,
                })
            })
            .collect();
        *self.current.write() = Arc::new(Snapshot { hooks });
    }

    /// Follows both resources in `cache` until `shutdown`.
    pub async fn follow(self: Arc<Self>, cache: Arc<WatchCache>, shutdown: CancellationToken) {
        loop {
            let (Some(mut p), Some(mut b)) =
                (watch(&cache, POLICY_PREFIX), watch(&cache, BINDING_PREFIX))
            else {
                // A snapshot watch never expires; nothing to follow is a closed cache.
                return;
            };
            let mut policies = ByKey::new();
            let mut bindings = ByKey::new();
            for ev in p.initial.drain(..) {
                apply(&mut policies, &ev, Policy::compile);
            }
            for ev in b.initial.drain(..) {
                apply(&mut bindings, &ev, Binding::compile);
            }
            self.publish(&policies, &bindings);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    ev = p.rx.recv() => match ev {
                        Some(ev) => apply(&mut policies, &ev, Policy::compile),
                        None => break,
                    },
                    ev = b.rx.recv() => match ev {
                        Some(ev) => apply(&mut bindings, &ev, Binding::compile),
                        None => break,
                    },
                }
                self.publish(&policies, &bindings);
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

/// One event: the object compiled anew, or removed (also when it no longer decodes).
fn apply<T>(
    map: &mut ByKey<T>,
    ev: &CacheEvent,
    compile: impl Fn(&serde_json::Value) -> Option<T>,
) {
    let compiled = match ev.kind {
        EventType::Deleted => None,
        _ => compile(&ev.object),
    };
    match compiled {
        Some(c) => {
            map.insert(ev.key.clone(), Arc::new(c));
        }
        None => {
            map.remove(&ev.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compiled<T>(v: Option<T>) -> Arc<T> {
        match v {
            Some(v) => Arc::new(v),
            None => panic!("does not decode"),
        }
    }

    #[test]
    fn only_bound_policies_are_published_in_name_order() {
        let policy = |n: &str| compiled(Policy::compile(&json!({"metadata": {"name": n}})));
        let binding = |n: &str, p: &str| {
            compiled(Binding::compile(
                &json!({"metadata": {"name": n}, "spec": {"policyName": p}}),
            ))
        };
        let policies: ByKey<Policy> = [
            ("k/b".to_string(), policy("b")),
            ("k/a".to_string(), policy("a")),
            ("k/unbound".to_string(), policy("unbound")),
        ]
        .into();
        let bindings: ByKey<Binding> = [
            ("k/2".to_string(), binding("2", "a")),
            ("k/1".to_string(), binding("1", "a")),
            ("k/3".to_string(), binding("3", "b")),
            ("k/4".to_string(), binding("4", "missing")),
        ]
        .into();
        let source = Source::default();
        assert!(source.is_empty());
        source.publish(&policies, &bindings);
        let snap = source.snapshot();
        let got: Vec<(String, Vec<String>)> = snap
            .hooks
            .iter()
            .map(|h| {
                (
                    h.policy.name.clone(),
                    h.bindings.iter().map(|b| b.name.clone()).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".to_string(), vec!["1".to_string(), "2".to_string()]),
                ("b".to_string(), vec!["3".to_string()]),
            ]
        );
    }
}
