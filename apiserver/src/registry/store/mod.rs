//! The generic registry store, in the shape of upstream's `genericregistry.Store`: one
//! implementation of every verb for every resource, with the kind's rules from its
//! [`Strategy`](super::Strategy) hooks.
//!
//! - Reads: [`get`](Store::get) from the store (always the latest state, shared with the watch cache
//!   when it holds exactly that revision); [`list`](Store::list) and [`watch`](Store::watch) from the
//!   watch cache at a consistent revision ([`list`]).
//! - [`create`](Store::create) ([`create`]): type meta, namespace, generated names, system metadata,
//!   the kind's defaults, admission ([`admission`]) and validation, allocations, then a store
//!   create.
//! - Every read-modify-write — update, every patch type, status and scale writes, binding,
//!   finalize, graceful deletion, finalizer removal — goes through ONE
//!   [`guaranteed_update`](Store::guaranteed_update): read the current object, let the caller compute
//!   the next state, compare-and-swap on the revision, and on a lost race read again and recompute.
//!   A conditional write (one naming a resourceVersion) fails its check on the re-read and answers
//!   409; an unconditional one is re-applied to the new state. [`MAX_ATTEMPTS`] and
//!   [`RETRY_WINDOW`] bound the loop (a 500 ServerTimeout after both are spent). A no-op write is not stored; an update that leaves a deleted object without grace
//!   period or finalizers removes it (`ShouldDeleteDuringUpdate`).
//! - Under a webhook converter ([`convert`]) reads and write results are in the endpoint's
//!   version and writes are converted to the storage version before they are stored.
//! - [`delete`](Store::delete) and [`delete_collection`](Store::delete_collection) ([`delete`]).
//!
//! The store takes request-independent options ([`WriteOptions`](super::WriteOptions),
//! [`DeleteOptions`](super::DeleteOptions), [`ListOptions`]), never HTTP. Written objects are handed
//! to the watch cache ([`WatchCache::write_through`](crate::watch_cache::WatchCache::write_through))
//! so their events are neither decoded nor serialised again.

mod admission;
mod convert;
mod create;
mod decode;
mod delete;
mod list;
mod policy_params;
mod subresource_admission;
mod update;

pub use admission::CachedObjects;
pub use create::generate_name;
pub use decode::Written as Decoded;
pub use delete::Deleted;
pub use list::{Filter, ListPage, WatchOpened};
pub(crate) use subresource_admission::{connect_kind, SubresourceRequest, BINDING, EVICTION};
pub use update::{PatchRequest, WriteScope};

pub use crate::watch_cache::Written;

use std::sync::Arc;

use serde_json::Value;

use super::{Preconditions, Resource};
use crate::error::{ApiError, Result};
use crate::state::AppState;
use crate::watch_cache::{ObjectJson, StoreWrite};

/// Attempts of one [`Store::guaranteed_update`] before it may give up: a write that keeps losing
/// compare-and-swap races to other writers of the same object.
pub const MAX_ATTEMPTS: usize = 16;

/// How long [`Store::guaranteed_update`] keeps retrying lost races once [`MAX_ATTEMPTS`] are spent.
/// Upstream's `GuaranteedUpdate` retries until the request's deadline; a count alone let a writer
/// whose attempts are slower than a competitor's lose every one of them (a status PATCH against a
/// stream of scale PATCHes).
pub const RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);

/// The stored object a read-modify-write starts from.
#[derive(Debug, Clone)]
pub struct Current {
    /// Shared with the watch cache; copy it only to change it.
    pub object: Arc<Value>,
    /// Its revision (its resourceVersion).
    pub revision: u64,
}

/// What one attempt of a read-modify-write decided.
pub enum Attempt {
    /// Store this state (nothing is written when it equals the current one; the object is removed
    /// when the resource says it should be deleted during this update).
    Write(Value),
    /// The object stays as it is.
    Keep,
    /// Remove the current object now (a delete).
    Remove,
    /// The object does not exist and this write creates it: a new object, not yet prepared.
    Create(Value),
}

/// What a [`Store::guaranteed_update`] did.
#[derive(Debug)]
pub enum Outcome {
    /// The object as it now is (written, unchanged, or a dry run).
    Stored(Written),
    /// The object was created (PUT of events, server-side apply of a missing object).
    Created(Written),
    /// The object was removed: its last state, the deletion's revision (none for a dry run) and
    /// the state's JSON text if the cache had it.
    Removed(Arc<Value>, Option<u64>, Option<ObjectJson>),
}

/// The generic store of one resource, in one namespace (or all, or none for cluster-scoped
/// resources). Cheap to make per request.
pub struct Store<'a> {
    state: &'a AppState,
    resource: Arc<Resource>,
    namespace: Option<String>,
}

impl<'a> Store<'a> {
    /// The store of `resource` in `namespace` (ignored for cluster-scoped resources).
    pub fn new(state: &'a AppState, resource: Arc<Resource>, namespace: Option<&str>) -> Self {
        let namespace = namespace
            .filter(|_| resource.info.namespaced)
            .map(String::from);
        Store {
            state,
            resource,
            namespace,
        }
    }

    /// The resource.
    pub fn resource(&self) -> &Arc<Resource> {
        &self.resource
    }

    /// The namespace of this store, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// `pods` / `deployments.apps`.
    pub fn group_resource(&self) -> String {
        self.resource.info.group_resource()
    }

    /// `/registry/<storage>/`.
    pub fn resource_prefix(&self) -> String {
        format!("/registry/{}/", self.resource.info.storage)
    }

    /// Prefix of the keys of this store's namespace (every key for all namespaces).
    pub fn collection_prefix(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("/registry/{}/{}/", self.resource.info.storage, ns),
            None => self.resource_prefix(),
        }
    }

    /// Storage key of the named object.
    pub fn key(&self, name: &str) -> String {
        object_key(&self.resource.info, self.namespace.as_deref(), name)
    }

    pub(crate) fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.group_resource(), name)
    }

    pub(crate) fn conflict(&self, name: &str) -> ApiError {
        ApiError::conflict(&self.group_resource(), name)
    }

    pub(crate) fn invalid(&self, name: &str, errs: &[api::validation::FieldError]) -> ApiError {
        api::status::invalid(&self.resource.info.group_kind(), name, errs).into()
    }

    /// The current object named `name` in the endpoint's version, or 404.
    pub async fn get(&self, name: &str) -> Result<Arc<Value>> {
        let obj = self
            .read(name)
            .await?
            .map(|c| c.object)
            .ok_or_else(|| self.not_found(name))?;
        self.to_endpoint_version(obj).await
    }

    /// The current object named `name` and its revision, if it exists.
    pub async fn read(&self, name: &str) -> Result<Option<Current>> {
        let key = self.key(name);
        match self.state.store.get(&key).await? {
            Some(kv) => Ok(Some(Current {
                object: stored_object(self.state, &kv)?,
                revision: kv.mod_revision,
            })),
            None => Ok(None),
        }
    }

    /// The watch cache's copy of the object at `key`, if it holds one (possibly behind the store).
    fn read_cached(&self, key: &str) -> Option<Current> {
        let object = self.state.cache.get(key)?;
        let revision = api::meta::resource_version(&object)?.parse().ok()?;
        Some(Current { object, revision })
    }

    /// Waits until the watch cache has every write acknowledged so far (a "most recent" read).
    pub async fn wait_consistent(&self) -> Result<()> {
        // A quorum read on etcd: writes through other apiservers count too.
        let current = self.state.store.consistent_revision().await?;
        self.wait_cache(current).await
    }

    /// [`wait_consistent`](Self::wait_consistent) for a resource the watch cache holds; one it
    /// does not is read from the store, whose reads are consistent themselves (upstream reads
    /// etcd directly for a resource without a cache).
    pub async fn wait_consistent_if_cached(&self) -> Result<()> {
        if self.state.cache.caches(&self.resource_prefix()) {
            self.wait_consistent().await?;
        }
        Ok(())
    }

    /// Waits until the watch cache has every write this apiserver acknowledged (on one store the
    /// same as [`Self::wait_consistent`]; on etcd, without a quorum read per call: what admission
    /// reads is as fresh as upstream's informers, never older than this server's own writes).
    pub async fn wait_own_writes(&self) -> Result<()> {
        self.wait_cache(self.state.store.current_revision()).await
    }

    async fn wait_cache(&self, current: u64) -> Result<()> {
        if self
            .state
            .cache
            .wait_for(current, self.state.config.future_rv_wait)
            .await
        {
            Ok(())
        } else {
            Err(api::status::timeout("the watch cache is not caught up with the store").into())
        }
    }

    /// Waits until the watch cache has applied `rev`, else 504 `Too large resource version`.
    pub async fn wait_for_revision(&self, rev: u64) -> Result<()> {
        if self
            .state
            .cache
            .wait_for(rev, self.state.config.future_rv_wait)
            .await
        {
            Ok(())
        } else {
            Err(api::status::too_large_resource_version(rev, self.state.cache.revision()).into())
        }
    }

    /// The one read-modify-write loop (see the module docs): reads `name`, checks
    /// `preconditions`, asks `try_update` for the next state and commits it with compare-and-swap
    /// on the revision read; on a lost race, reads again. `verb` names the operation in the
    /// ServerTimeout after [`MAX_ATTEMPTS`] and [`RETRY_WINDOW`].
    pub async fn guaranteed_update<F>(
        &self,
        name: &str,
        verb: &str,
        preconditions: &Preconditions,
        opts: &super::WriteOptions,
        try_update: F,
    ) -> Result<Outcome>
    where
        F: FnMut(Option<&Current>) -> Result<Attempt>,
    {
        self.admitted_update(name, verb, preconditions, opts, None, try_update)
            .await
    }

    /// [`guaranteed_update`](Self::guaranteed_update) of a client's write: each attempt's new
    /// state passes validating admission ([`crate::admission`]) as a write of `subresource`
    /// (`Some("")` for the main resource) before it is stored; `None` skips it (server-internal
    /// writes).
    pub async fn admitted_update<F>(
        &self,
        name: &str,
        verb: &str,
        preconditions: &Preconditions,
        opts: &super::WriteOptions,
        subresource: Option<&str>,
        mut try_update: F,
    ) -> Result<Outcome>
    where
        F: FnMut(Option<&Current>) -> Result<Attempt>,
    {
        let key = self.key(name);
        let started = std::time::Instant::now();
        let mut attempts = 0;
        // The first attempt starts from the watch cache's copy, as upstream's cacher hands its
        // object to the storage's update: no store read (on etcd a quorum round trip) when the
        // copy is current, which the compare-and-swap proves. Whatever a possibly stale copy
        // decides short of a write — a failed precondition, an error, a no-op — is decided again
        // on the store's current state.
        let mut cached = match opts.dry_run {
            true => None,
            false => self.read_cached(&key),
        };
        while attempts < MAX_ATTEMPTS || started.elapsed() < RETRY_WINDOW {
            attempts += 1;
            let (current, fresh) = match cached.take() {
                Some(copy) => (Some(copy), false),
                None => (self.read(name).await?, true),
            };
            if let Some(current) = &current {
                match self.check_preconditions(name, preconditions, current) {
                    Err(_) if !fresh => continue,
                    checked => checked?,
                }
            }
            // Under a webhook converter the update is computed in the request's version and
            // stored in the storage version ([`convert`]).
            let view = self.view_of(current.as_ref()).await?;
            let attempt = match try_update(view.as_ref().or(current.as_ref())) {
                Err(_) if !fresh => continue,
                attempt => attempt?,
            };
            // Admission webhooks see a client's write in the request's version.
            let attempt = match (attempt, subresource, view.as_ref().or(current.as_ref())) {
                (Attempt::Write(new), Some(sub), Some(old)) => {
                    match self
                        .admit_update_by_webhooks(new, &old.object, sub, opts)
                        .await
                    {
                        Err(_) if !fresh => continue,
                        admitted => Attempt::Write(admitted?),
                    }
                }
                (other, _, _) => other,
            };
            if !fresh && matches!(attempt, Attempt::Keep | Attempt::Create(_)) {
                continue;
            }
            let attempt = match attempt {
                Attempt::Write(new) if view.is_some() && !opts.dry_run => {
                    Attempt::Write(self.to_storage_version(new).await?)
                }
                other => other,
            };
            let committed = match (attempt, current) {
                (Attempt::Create(obj), None) => {
                    return self.create(obj, opts).await.map(Outcome::Created)
                }
                (Attempt::Create(_), Some(_)) => {
                    return Err(ApiError::already_exists(&self.group_resource(), name))
                }
                (_, None) => return Err(self.not_found(name)),
                (Attempt::Keep, Some(current)) => Some(Outcome::Stored(Written::shared(
                    view.map_or(current.object, |v| v.object),
                ))),
                (Attempt::Remove, Some(current)) => {
                    self.remove(&key, current, None, opts.dry_run).await?
                }
                (Attempt::Write(new), Some(current)) => {
                    if self.resource.should_delete_during_update(&new) {
                        self.remove(&key, current, Some(new), opts.dry_run).await?
                    } else {
                        self.write(&key, new, current, fresh, opts.dry_run, subresource)
                            .await?
                    }
                }
            };
            if let Some(outcome) = committed {
                return self.outcome_to_endpoint_version(outcome).await;
            }
        }
        Err(api::status::server_timeout(&self.group_resource(), verb, 1).into())
    }

    /// `Preconditions.Check` of upstream, with its messages.
    fn check_preconditions(
        &self,
        name: &str,
        pre: &Preconditions,
        current: &Current,
    ) -> Result<()> {
        let gr = self.group_resource();
        if let Some(want) = &pre.uid {
            let uid = api::meta::uid(&current.object).unwrap_or("");
            if want != uid {
                return Err(api::status::conflict(
                    &gr,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                    ),
                )
                .into());
            }
        }
        if let Some(want) = &pre.resource_version {
            if *want != current.revision.to_string() {
                return Err(api::status::conflict(
                    &gr,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}",
                        current.revision
                    ),
                )
                .into());
            }
        }
        Ok(())
    }

    /// Writes `new` over `current` unless it is the same, after validating admission of a write
    /// of `subresource` if any; `None` when the compare-and-swap lost, or when `current` is not
    /// `fresh` from the store and would be written unchanged (a no-op is answered from the store's
    /// current state, as upstream re-reads before it skips a write).
    async fn write(
        &self,
        key: &str,
        mut new: Value,
        current: Current,
        fresh: bool,
        dry_run: bool,
        subresource: Option<&str>,
    ) -> Result<Option<Outcome>> {
        self.resource.canonicalize(&mut new);
        let same = same_ignoring_rv(&new, &current.object);
        if same && !fresh {
            return Ok(None);
        }
        if let (false, Some(subresource)) = (same, subresource) {
            self.validate_quota(&new, Some(&current.object), subresource, dry_run)
                .await?;
        }
        if same || dry_run {
            let mut out = new;
            api::wire::set_resource_version(&mut out, current.revision.to_string());
            return Ok(Some(Outcome::Stored(Written::object(out))));
        }
        let strategy = &self.resource.strategy;
        let undo = strategy
            .before_update(&mut new, &current.object)
            .map_err(|errs| self.invalid(api::meta::name(&current.object).unwrap_or(""), &errs))?;
        let written = self.write_through(key, new, &current).await;
        match &written {
            Ok(Ok(stored)) => strategy.after_update(&stored.object, &current.object),
            _ => {
                if let Some(undo) = undo {
                    undo();
                }
            }
        }
        Ok(written?.ok().map(Outcome::Stored))
    }

    /// The compare-and-swap store write of `new` over `current`, through the watch cache: the
    /// object written, or `Err(new)` back when the race was lost.
    async fn write_through(
        &self,
        key: &str,
        new: Value,
        current: &Current,
    ) -> Result<std::result::Result<Written, Value>> {
        let store = &self.state.store;
        let written = self
            .state
            .cache
            .write_through(key, new, |bytes| async {
                Ok(
                    match store.update(key, bytes, Some(current.revision)).await? {
                        store::UpdateOutcome::Updated { kv, .. } => {
                            StoreWrite::Stored(kv.mod_revision)
                        }
                        // Deleted or changed meanwhile: the next attempt reads it again.
                        store::UpdateOutcome::NotFound | store::UpdateOutcome::Conflict(_) => {
                            StoreWrite::NotStored
                        }
                    },
                )
            })
            .await?;
        Ok(written)
    }

    /// Removes `current` (with compare-and-swap); answers with `last` (the state an update left)
    /// or the current state. `None` when the compare-and-swap lost.
    async fn remove(
        &self,
        key: &str,
        current: Current,
        last: Option<Value>,
        dry_run: bool,
    ) -> Result<Option<Outcome>> {
        if dry_run {
            let shown = last.map(Arc::new).unwrap_or(current.object);
            return Ok(Some(Outcome::Removed(shown, None, None)));
        }
        // Taken before the delete: the cache lets go of it once the delete's event is applied.
        let json = match &last {
            None => self.state.cache.json_at(key, current.revision),
            Some(_) => None,
        };
        match self.state.store.delete(key, Some(current.revision)).await? {
            store::DeleteOutcome::Deleted { revision, .. } => {
                self.resource.strategy.after_delete(&current.object);
                let shown = match last {
                    Some(mut last) => {
                        api::meta::set_resource_version(&mut last, &revision.to_string());
                        Arc::new(last)
                    }
                    None => current.object,
                };
                Ok(Some(Outcome::Removed(shown, Some(revision), json)))
            }
            store::DeleteOutcome::NotFound | store::DeleteOutcome::Conflict(_) => Ok(None),
        }
    }
}

/// Storage key of an object.
pub fn object_key(info: &api::ResourceInfo, namespace: Option<&str>, name: &str) -> String {
    match (info.namespaced, namespace) {
        (true, Some(ns)) => format!("/registry/{}/{}/{}", info.storage, ns, name),
        _ => format!("/registry/{}/{}", info.storage, name),
    }
}

/// The object `kv` holds, shared with the watch cache when the cache has applied exactly this
/// revision of it (a key's value at one revision never changes), else decoded. Writers read the
/// object they are about to replace through this: most of the time it costs no parse.
pub fn stored_object(state: &AppState, kv: &store::KeyValue) -> Result<Arc<Value>> {
    if let Some(cached) = state.cache.get(&kv.key) {
        if api::meta::resource_version(&cached).and_then(|rv| rv.parse().ok())
            == Some(kv.mod_revision)
        {
            return Ok(cached);
        }
    }
    // Newer than the cache: decoded and defaulted as the cache would.
    state
        .cache
        .defaulter()
        .decode(&kv.key, &kv.value, kv.mod_revision)
        .map(Arc::new)
        .ok_or_else(|| ApiError::internal("decoding a stored object", "undecodable object"))
}

/// Whether two objects are equal but for `metadata.resourceVersion`, compared in place (this runs
/// on every update; copying both objects to strip the field cost more than the comparison).
fn same_ignoring_rv(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let meta_equal = |x: Option<&Value>, y: Option<&Value>| match (x, y) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let rest = |m: &'_ serde_json::Map<String, Value>| {
                m.len() - usize::from(m.contains_key("resourceVersion"))
            };
            rest(x) == rest(y)
                && x.iter()
                    .filter(|(k, _)| *k != "resourceVersion")
                    .all(|(k, v)| y.get(k) == Some(v))
        }
        (x, y) => x == y,
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| {
            if k == "metadata" {
                meta_equal(Some(v), b.get(k))
            } else {
                b.get(k) == Some(v)
            }
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::same_ignoring_rv;

    #[test]
    fn same_ignoring_rv_ignores_only_the_resource_version() {
        let a = json!({"metadata": {"name": "p", "resourceVersion": "5"}, "spec": {"x": 1}});
        let b = json!({"metadata": {"name": "p", "resourceVersion": "7"}, "spec": {"x": 1}});
        let no_rv = json!({"metadata": {"name": "p"}, "spec": {"x": 1}});
        assert!(same_ignoring_rv(&a, &b));
        assert!(same_ignoring_rv(&a, &no_rv));
        assert!(same_ignoring_rv(&no_rv, &a));
        let label = json!({"metadata": {"name": "p", "labels": {}}, "spec": {"x": 1}});
        assert!(!same_ignoring_rv(&a, &label));
        assert!(!same_ignoring_rv(&label, &a));
        let spec = json!({"metadata": {"name": "p", "resourceVersion": "5"}, "spec": {"x": 2}});
        assert!(!same_ignoring_rv(&a, &spec));
        let extra = json!({"metadata": {"name": "p"}, "spec": {"x": 1}, "status": {}});
        assert!(!same_ignoring_rv(&a, &extra));
        // resourceVersion matters anywhere but metadata.
        let nested = json!({"metadata": {"name": "p"}, "spec": {"resourceVersion": "1"}});
        let nested2 = json!({"metadata": {"name": "p"}, "spec": {"resourceVersion": "2"}});
        assert!(!same_ignoring_rv(&nested, &nested2));
        assert!(same_ignoring_rv(&json!(1), &json!(1)));
        // Same length, one with resourceVersion and one with another key instead.
        let other = json!({"metadata": {"name": "p", "uid": "u"}, "spec": {"x": 1}});
        assert!(!same_ignoring_rv(&a, &other));
    }
}
