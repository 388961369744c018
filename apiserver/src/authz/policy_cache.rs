//! The current [`RuleResolver`] of an apiserver, kept in step with the RBAC objects of the watch
//! cache (upstream's RBAC authorizer reads its informers' listers; here the resolver is what
//! those listers would be compiled into).
//!
//! It follows the four RBAC resources with watches from a snapshot and applies their events
//! **at the decision that needs them**, not in a background task: [`PolicyCache::current`]
//! first drains whatever the watches hold, recompiling the resolver only when something
//! changed. So a decision sees every RBAC write whose response was sent before its request
//! arrived, exactly as reading the watch cache at each decision did:
//!
//! - A write is answered once the watch cache has applied it (its revision ≤
//!   [`WatchCache::revision`]); its event is in the resource's live log once
//!   [`WatchCache::dispatched`] has reached that revision, a handful of instructions later in
//!   the cache's feeder. `current` reads the revision first and waits, yielding, until
//!   `dispatched` has caught up before it drains — bounded by [`HANDOVER_WAIT`]; past it the
//!   resolver is as current as an informer's would be.
//! - A watch the cache ended (the resolver fell more than the live log's length behind, or the
//!   cache relisted) is made again from a snapshot and everything is recompiled.
//!
//! Cost: without a change, a lock and four empty `try_recv`s per decision; a change recompiles
//! every RBAC object once (linear in their number) at the next decision, however many changes
//! came in between.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::rule_resolver::RuleResolver;
use crate::watch_cache::{CacheEvent, EventType, LiveEvents, WatchCache, WatchFrom, WatchStart};

/// The storage prefixes of ClusterRoles, Roles, ClusterRoleBindings and RoleBindings, in the
/// order [`RuleResolver::compile`] takes them.
const PREFIXES: [&str; 4] = [
    "/registry/clusterroles/",
    "/registry/roles/",
    "/registry/clusterrolebindings/",
    "/registry/rolebindings/",
];

/// The longest a decision waits for the cache's feeder to hand the events of writes it has
/// already acknowledged to the live logs (normally microseconds; only a feeder descheduled in
/// between makes it wait at all).
pub const HANDOVER_WAIT: Duration = Duration::from_millis(10);

/// One RBAC resource followed: its objects by key, and the watch that keeps them current.
struct Followed {
    objects: BTreeMap<String, Arc<Value>>,
    live: LiveEvents,
}

/// What the lock guards.
#[derive(Default)]
struct Following {
    /// The four resources, in [`PREFIXES`] order; `None` before the first decision and after a
    /// watch ended.
    resources: Option<[Followed; 4]>,
    /// Compiled from `resources` as they were after the last drain.
    resolver: Arc<RuleResolver>,
}

/// The resolver of one apiserver.
#[derive(Default)]
pub struct PolicyCache {
    /// One lock: draining is short, and a recompile is done once for everyone waiting.
    following: Mutex<Following>,
}

impl std::fmt::Debug for PolicyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyCache").finish_non_exhaustive()
    }
}

impl PolicyCache {
    /// The resolver as of every RBAC change `cache` has acknowledged.
    pub fn current(&self, cache: &WatchCache) -> Arc<RuleResolver> {
        let acknowledged = cache.revision();
        let deadline = Instant::now() + HANDOVER_WAIT;
        while cache.dispatched() < acknowledged && Instant::now() < deadline {
            std::thread::yield_now();
        }
        let mut following = self.following.lock();
        let changed = match following.resources.as_mut().map(drain) {
            Some(Some(changed)) => changed,
            // The first decision, or a watch ended: follow from a snapshot.
            Some(None) | None => {
                following.resources = snapshot(cache);
                true
            }
        };
        if changed {
            following.resolver = Arc::new(compile(following.resources.as_ref()));
        }
        following.resolver.clone()
    }
}

/// Applies every pending event; `Some(whether anything changed)`, or `None` once a watch ended.
fn drain(resources: &mut [Followed; 4]) -> Option<bool> {
    let mut changed = false;
    for r in resources.iter_mut() {
        loop {
            match r.live.try_recv() {
                Ok(ev) => {
                    apply(&mut r.objects, &ev);
                    changed = true;
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return None,
            }
        }
    }
    Some(changed)
}

fn apply(objects: &mut BTreeMap<String, Arc<Value>>, ev: &CacheEvent) {
    match ev.kind {
        EventType::Deleted => {
            objects.remove(&ev.key);
        }
        _ => {
            objects.insert(ev.key.clone(), ev.object.clone());
        }
    }
}

/// Watches the four resources from a snapshot; `None` if the cache would not (closed).
fn snapshot(cache: &WatchCache) -> Option<[Followed; 4]> {
    let follow = |prefix: &str| match cache.watch(prefix, WatchFrom::Snapshot) {
        WatchStart::Watching(w) => Some(Followed {
            objects: w
                .initial
                .iter()
                .map(|e| (e.key.clone(), e.object.clone()))
                .collect(),
            live: w.rx,
        }),
        WatchStart::Expired { .. } => None,
    };
    Some([
        follow(PREFIXES[0])?,
        follow(PREFIXES[1])?,
        follow(PREFIXES[2])?,
        follow(PREFIXES[3])?,
    ])
}

fn compile(resources: Option<&[Followed; 4]>) -> RuleResolver {
    let Some([cr, r, crb, rb]) = resources else {
        return RuleResolver::default();
    };
    fn values(f: &Followed) -> impl Iterator<Item = &Value> {
        f.objects.values().map(AsRef::as_ref)
    }
    RuleResolver::compile(values(cr), values(r), values(crb), values(rb))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::authn::UserInfo;

    async fn cache() -> (Arc<dyn store::Store>, Arc<WatchCache>, CancellationToken) {
        let store: Arc<dyn store::Store> =
            Arc::new(store::MemoryStore::new(store::StoreConfig::default()).unwrap());
        let shutdown = CancellationToken::new();
        // A live log of 4 events, so a few writes between decisions overrun it.
        let cache = WatchCache::start(store.clone(), 100, 4, shutdown.clone())
            .await
            .unwrap();
        (store, cache, shutdown)
    }

    /// Writes `obj` at `key` and waits until the cache has applied it (as a write's response
    /// does before it is sent).
    async fn write(store: &dyn store::Store, cache: &WatchCache, key: &str, obj: Value) {
        let bytes = bytes::Bytes::from(obj.to_string());
        let rev = match store.get(key).await.unwrap() {
            Some(_) => match store.update(key, bytes, None).await.unwrap() {
                store::UpdateOutcome::Updated { kv, .. } => kv.mod_revision,
                other => panic!("update: {other:?}"),
            },
            None => match store.create(key, bytes).await.unwrap() {
                store::CreateOutcome::Created(kv) => kv.mod_revision,
                other => panic!("create: {other:?}"),
            },
        };
        assert!(cache.wait_for(rev, Duration::from_secs(10)).await);
    }

    fn bound(resolver: &RuleResolver, user: &str) -> Vec<String> {
        let u = UserInfo {
            username: user.into(),
            ..Default::default()
        };
        let mut out = Vec::new();
        resolver.visit(&u, "", |b| {
            out.push(b.description());
            true
        });
        out
    }

    fn crb(name: &str, user: &str) -> Value {
        json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole", "name": "r"}, "subjects": [{"kind": "User", "name": user}]})
    }

    #[tokio::test]
    async fn a_decision_sees_every_acknowledged_rbac_write() {
        let (store, cache, shutdown) = cache().await;
        let policy = PolicyCache::default();
        assert!(bound(&policy.current(&cache), "u").is_empty());
        let key = |n: &str| format!("/registry/clusterrolebindings/{n}");
        write(store.as_ref(), &cache, &key("a"), crb("a", "u")).await;
        // No wait beyond the write's own: the next decision has it.
        assert_eq!(
            bound(&policy.current(&cache), "u"),
            vec![r#"ClusterRoleBinding "a" of ClusterRole "r" to User "u""#]
        );
        // Unchanged: the same compiled resolver is handed out.
        let before = policy.current(&cache);
        write(
            store.as_ref(),
            &cache,
            "/registry/configmaps/ns/x",
            json!({}),
        )
        .await;
        assert!(Arc::ptr_eq(&before, &policy.current(&cache)));
        // More changes than the live log holds between two decisions: followed from a new
        // snapshot, nothing lost.
        for i in 0..10 {
            write(
                store.as_ref(),
                &cache,
                &key(&format!("b{i}")),
                crb("b", "v"),
            )
            .await;
        }
        write(store.as_ref(), &cache, &key("a"), crb("a", "w")).await;
        let now = policy.current(&cache);
        assert!(bound(&now, "u").is_empty());
        assert_eq!(bound(&now, "v").len(), 10);
        assert_eq!(bound(&now, "w").len(), 1);
        assert!(store.delete(&key("a"), None).await.is_ok());
        let rev = store.current_revision();
        assert!(cache.wait_for(rev, Duration::from_secs(10)).await);
        assert!(bound(&policy.current(&cache), "w").is_empty());
        shutdown.cancel();
    }
}
