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
//!   [`WatchCache::revision`]), and the cache moves its revision on only after handing the
//!   events up to it to the resources' live logs ([`WatchCache::dispatched`] is never behind
//!   it). So `current` drains whatever the watches hold and sees every such write, with no
//!   waiting.
//! - A watch the cache ended (the resolver fell more than the live log's length behind, or the
//!   cache relisted) is made again from a snapshot and everything is recompiled.
//!
//! Cost: without a change, a lock and four empty `try_recv`s per decision. Changes are compiled
//! at the next decision, once however many came in between, and only the parts they touch: a
//! namespace's Roles and RoleBindings, or the ClusterRoleBindings
//! ([`RuleResolver::with_namespace`], [`RuleResolver::with_cluster_bindings`]); a ClusterRole's
//! change, a new snapshot, compile everything (linear in the RBAC objects).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

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

/// One RBAC resource followed: its objects by key, and the watch that keeps them current.
struct Followed {
    /// Its storage prefix (one of [`PREFIXES`]).
    prefix: &'static str,
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
        let mut following = self.following.lock();
        let following = &mut *following;
        let changes = match following.resources.as_mut().map(drain) {
            Some(Some(changes)) => changes,
            // The first decision, or a watch ended: follow from a snapshot.
            Some(None) | None => {
                following.resources = snapshot(cache);
                Changes {
                    everything: true,
                    ..Changes::default()
                }
            }
        };
        let Some(resources) = following.resources.as_ref() else {
            following.resolver = Arc::default();
            return following.resolver.clone();
        };
        if changes.everything {
            following.resolver = Arc::new(compile(resources));
        } else if changes.cluster_bindings || !changes.namespaces.is_empty() {
            let [_, roles, crb, rb] = resources;
            let mut resolver = RuleResolver::clone(&following.resolver);
            if changes.cluster_bindings {
                resolver = resolver.with_cluster_bindings(values(crb, ""));
            }
            for ns in &changes.namespaces {
                let scope = format!("{ns}/");
                resolver = resolver.with_namespace(ns, values(roles, &scope), values(rb, &scope));
            }
            following.resolver = Arc::new(resolver);
        }
        following.resolver.clone()
    }
}

/// What the events drained changed.
#[derive(Debug, Default)]
struct Changes {
    /// A ClusterRole (or everything is new).
    everything: bool,
    /// A ClusterRoleBinding.
    cluster_bindings: bool,
    /// The namespaces of changed Roles and RoleBindings.
    namespaces: BTreeSet<String>,
}

/// Applies every pending event; `Some(what changed)`, or `None` once a watch ended.
fn drain(resources: &mut [Followed; 4]) -> Option<Changes> {
    let mut changes = Changes::default();
    for (i, r) in resources.iter_mut().enumerate() {
        loop {
            match r.live.try_recv() {
                Ok(ev) => {
                    apply(&mut r.objects, &ev);
                    match i {
                        0 => changes.everything = true,
                        2 => changes.cluster_bindings = true,
                        _ => {
                            let rest = ev.key.strip_prefix(PREFIXES[i]).unwrap_or("");
                            let ns = rest.split('/').next().unwrap_or("");
                            changes.namespaces.insert(ns.to_string());
                        }
                    }
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return None,
            }
        }
    }
    Some(changes)
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
    let follow = |prefix: &'static str| match cache.watch(prefix, WatchFrom::Snapshot) {
        WatchStart::Watching(w) => Some(Followed {
            prefix,
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

/// The objects of `f` whose keys continue its prefix with `scope` (`<ns>/`, or "" for all), in
/// key order.
fn values<'a>(f: &'a Followed, scope: &str) -> impl Iterator<Item = &'a Value> + 'a {
    let start = format!("{}{scope}", f.prefix);
    f.objects
        .range(start.clone()..)
        .take_while(move |(k, _)| k.starts_with(&start))
        .map(|(_, v)| v.as_ref())
}

fn compile(resources: &[Followed; 4]) -> RuleResolver {
    let [cr, r, crb, rb] = resources;
    RuleResolver::compile(
        values(cr, ""),
        values(r, ""),
        values(crb, ""),
        values(rb, ""),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

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

    /// What `user` is bound to in `namespace`: each binding's description and rule count.
    fn rules_in(resolver: &RuleResolver, user: &str, namespace: &str) -> Vec<(String, usize)> {
        let u = UserInfo {
            username: user.into(),
            ..Default::default()
        };
        let mut out = Vec::new();
        resolver.visit(&u, namespace, |b| {
            out.push((b.description(), b.rules.as_ref().map_or(0, |r| r.len())));
            true
        });
        out
    }

    #[tokio::test]
    async fn namespaced_changes_compile_their_namespace_and_cluster_roles_everything() {
        let (store, cache, shutdown) = cache().await;
        let policy = PolicyCache::default();
        let rule = |verb: &str| json!({"apiGroups": [""], "resources": ["pods"], "verbs": [verb]});
        let role = |rules: Value| json!({"metadata": {"name": "r"}, "rules": rules});
        let rb = |ns: &str, kind: &str, name: &str| {
            json!({"metadata": {"name": "rb", "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                "subjects": [{"kind": "User", "name": "u"}]})
        };
        let s = store.as_ref();
        write(
            s,
            &cache,
            "/registry/clusterroles/r",
            role(json!([rule("get")])),
        )
        .await;
        write(
            s,
            &cache,
            "/registry/rolebindings/a/rb",
            rb("a", "ClusterRole", "r"),
        )
        .await;
        write(
            s,
            &cache,
            "/registry/roles/b/ro",
            json!({"metadata": {"name": "ro", "namespace": "b"}, "rules": [rule("get"), rule("list")]}),
        )
        .await;
        write(
            s,
            &cache,
            "/registry/rolebindings/b/rb",
            rb("b", "Role", "ro"),
        )
        .await;
        let r = policy.current(&cache);
        assert_eq!(
            rules_in(&r, "u", "a"),
            [(
                r#"RoleBinding "rb/a" of ClusterRole "r" to User "u""#.to_string(),
                1
            )]
        );
        assert_eq!(rules_in(&r, "u", "b").len(), 1);
        // A ClusterRole's change reaches the bindings of every namespace.
        write(
            s,
            &cache,
            "/registry/clusterroles/r",
            role(json!([rule("get"), rule("list"), rule("watch")])),
        )
        .await;
        assert_eq!(rules_in(&policy.current(&cache), "u", "a")[0].1, 3);
        // A namespace's change leaves the others as they were.
        assert!(store
            .delete("/registry/rolebindings/a/rb", None)
            .await
            .is_ok());
        assert!(
            cache
                .wait_for(store.current_revision(), Duration::from_secs(10))
                .await
        );
        let r = policy.current(&cache);
        assert!(rules_in(&r, "u", "a").is_empty());
        assert_eq!(
            rules_in(&r, "u", "b"),
            [(
                r#"RoleBinding "rb/b" of Role "ro" to User "u""#.to_string(),
                2
            )]
        );
        shutdown.cancel();
    }
}
