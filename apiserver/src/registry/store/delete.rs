//! Delete and delete-collection (`Store.Delete`, `Store.DeleteCollection` upstream).
//!
//! Order of decisions for an existing object, taken on every attempt of one
//! [`Store::guaranteed_update`]: names the kind protects (403) → preconditions (409) → already
//! terminating (a shorter grace period moves `deletionTimestamp` earlier, a zero one removes an
//! object without finalizers, else nothing changes) → graceful deletion (the kind's
//! `graceful_deletion_seconds`: `deletionTimestamp = now + grace`; for pods the kubelet completes
//! it, and the pod garbage collector force-deletes pods whose node is gone) → propagation
//! finalizers (`orphan`, `foregroundDeletion`) → pending finalizers, of the object or the kind
//! (mark and keep) → remove now. Nothing of a deletion lives only in memory: a marked object is
//! stored, and whoever finishes it does so through the API. A client's delete first passes the
//! admission webhooks (operation DELETE, the object being deleted as `oldObject`).

use std::sync::Arc;

use serde_json::Value;

use super::{Attempt, Outcome, Store, Written};
use crate::error::{ApiError, Result};
use crate::http::query::ListOptions;
use crate::registry::{DeleteOptions, Propagation, WriteOptions};
use crate::watch_cache::{ListAt, Listed, ObjectJson, SnapshotOutcome};

/// What a delete did.
#[derive(Debug)]
pub enum Deleted {
    /// Removed from storage: the last state, shared with the watch cache, the deletion's
    /// revision, its resourceVersion from now on (none for a dry run: the state's own), and the
    /// state's JSON if the cache had it.
    Removed(Arc<Value>, Option<u64>, Option<ObjectJson>),
    /// Kept, marked for deletion (graceful or finalizers): its new state.
    Marked(Written),
}

impl Deleted {
    /// The object as a response shows it (the removed state carries the deletion's
    /// resourceVersion).
    pub fn into_object(self) -> Value {
        match self {
            Deleted::Marked(w) => Arc::unwrap_or_clone(w.object),
            Deleted::Removed(obj, revision, _) => {
                let mut obj = Arc::unwrap_or_clone(obj);
                if let Some(rev) = revision {
                    api::meta::set_resource_version(&mut obj, &rev.to_string());
                }
                obj
            }
        }
    }
}

fn bump_generation(obj: &mut Value) {
    if let Some(g) = api::meta::generation(obj).filter(|g| *g > 0) {
        api::meta::set_generation(obj, g + 1);
    }
}

fn time_in(seconds: i64) -> String {
    let now = jiff::Timestamp::now();
    let t = now
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(now);
    api::meta::format_time(t)
}

impl Store<'_> {
    /// Deletes `name` following the module docs.
    pub async fn delete(&self, name: &str, opts: &DeleteOptions) -> Result<Deleted> {
        let strategy = self.resource.strategy.clone();
        if let Some(reason) = strategy.protected_from_deletion(name) {
            return Err(api::status::forbidden(&self.group_resource(), name, reason).into());
        }
        self.delete_webhooks(name, opts).await?;
        let write = WriteOptions {
            dry_run: opts.dry_run,
            ..Default::default()
        };
        let outcome = self
            .guaranteed_update(name, "DELETE", &opts.preconditions, &write, |current| {
                let Some(current) = current else {
                    return Err(self.not_found(name));
                };
                let obj = &current.object;
                let mut finalizers = api::meta::finalizers(obj);
                if api::meta::deletion_timestamp(obj).is_some() {
                    // Already terminating: only a shorter grace period changes anything.
                    let current_grace = api::meta::deletion_grace_period_seconds(obj).unwrap_or(0);
                    return Ok(match opts.grace_period_seconds {
                        Some(0) if finalizers.is_empty() => Attempt::Remove,
                        Some(g) if g < current_grace => {
                            let g = g.max(1);
                            let mut new = Value::clone(obj);
                            api::meta::set_deletion(&mut new, &time_in(g), g);
                            Attempt::Write(new)
                        }
                        _ => Attempt::Keep,
                    });
                }
                let grace = strategy
                    .graceful_deletion_seconds(obj, opts.grace_period_seconds)
                    .filter(|g| *g > 0);
                let policy = opts
                    .propagation
                    .unwrap_or_else(|| strategy.default_propagation_policy());
                let gc_finalizer = match policy {
                    Propagation::Orphan => Some("orphan"),
                    Propagation::Foreground => Some("foregroundDeletion"),
                    Propagation::Background => None,
                };
                if let Some(f) = gc_finalizer {
                    if !finalizers.iter().any(|x| x == f) {
                        finalizers.push(f.to_string());
                    }
                }
                if grace.is_none() && finalizers.is_empty() && !strategy.pending_finalization(obj) {
                    return Ok(Attempt::Remove);
                }
                let mut new = Value::clone(obj);
                match grace {
                    Some(g) => api::meta::set_deletion(&mut new, &time_in(g), g),
                    None => api::meta::set_deletion(&mut new, &api::meta::now_rfc3339(), 0),
                }
                bump_generation(&mut new);
                api::meta::set_finalizers(&mut new, &finalizers);
                strategy.prepare_for_delete(&mut new);
                Ok(Attempt::Write(new))
            })
            .await?;
        Ok(match outcome {
            Outcome::Stored(w) | Outcome::Created(w) => Deleted::Marked(w),
            Outcome::Removed(obj, rev, json) => Deleted::Removed(obj, rev, json),
        })
    }

    /// The admission webhooks of a client's delete of `name`, on the object as read now (a
    /// missing one is left to the delete to report). Nothing is read when no webhook exists.
    async fn delete_webhooks(&self, name: &str, opts: &DeleteOptions) -> Result<()> {
        // NodeRestriction: a kubelet deletes only its own objects (its Node, Lease, pods).
        let node = crate::admission::node_restriction::NodeOperation::Delete;
        self.restrict_node(node, None, None, "", name, opts.user.as_deref())?;
        let info = &self.resource.info;
        let webhooks = &self.state.webhooks;
        let any = webhooks.any_mutating(&info.group, &info.plural)
            || webhooks.any_validating(&info.group, &info.plural);
        if opts.user.is_none() || !any {
            return Ok(());
        }
        match self.read(name).await? {
            Some(current) => self.admit_delete_by_webhooks(&current.object, opts).await,
            None => Ok(()),
        }
    }

    /// Deletes every object of the collection that `list` selects, each as [`delete`](Self::delete)
    /// does; returns what each became (removed or marked), in key order. Objects already gone
    /// are skipped.
    pub async fn delete_collection(
        &self,
        opts: &DeleteOptions,
        list: &ListOptions,
    ) -> Result<Vec<Deleted>> {
        let filter = self.filter(list)?;
        self.wait_consistent_if_cached().await?;
        let listed = self
            .state
            .cache
            .list_resource(
                &self.resource_prefix(),
                &self.collection_prefix(),
                ListAt::Current,
                None,
                None,
                filter.select(&|o| filter.matches(o)),
            )
            .await?;
        let snapshot = match listed {
            SnapshotOutcome::Listed(s) => s,
            _ => {
                return Err(ApiError::internal(
                    "listing for deletecollection",
                    "cache snapshot unavailable",
                ))
            }
        };
        let mut out = Vec::new();
        for obj in snapshot.items.iter().filter_map(Listed::object) {
            let name = api::meta::name(&obj).unwrap_or("").to_string();
            let store = Store::new(
                self.state,
                self.resource.clone(),
                api::meta::namespace(&obj),
            );
            match store.delete(&name, opts).await {
                Ok(d) => out.push(d),
                Err(e) if e.code() == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The store's current revision (the resourceVersion of a delete-collection's answer).
    pub fn current_revision(&self) -> u64 {
        self.state.store.current_revision()
    }
}
