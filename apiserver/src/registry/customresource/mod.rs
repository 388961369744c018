//! The CRD controllers of the apiextensions server, in process: naming (`controller/status`),
//! establishing (`controller/establish`), serving (the CRD handler's per-CRD storage) and the
//! `customresourcecleanup` finalizer (`controller/finalizer`).
//!
//! One task follows the CRDs in the watch cache (a snapshot, then every change; a fresh snapshot
//! when its buffer overflows) and brings each changed CRD in step, one at a time:
//! 1. **Gone** from storage: its resources stop being served; the other CRDs of its group are
//!    looked at again (names it held are free).
//! 2. **Naming**: requested names that differ from the accepted ones are decided
//!    ([`naming::decide`]) and written to status with `NamesAccepted` and `Established`.
//! 3. **Serving**: with its names accepted, the CRD's served versions are (re)registered in the
//!    resource registry whenever the CRD changed, in one registry change (so discovery, OpenAPI
//!    and routing see the new versions, schemas and columns from the next request on).
//! 4. **Establishing**: once served, `Established=True` is written. The registry change comes
//!    first, so a client that saw `Established` finds the resource served.
//! 5. **Cleanup**: a CRD marked for deletion with the finalizer is served as terminating (creates
//!    refused), `Terminating=True` `InstanceDeletionInProgress`; every instance is deleted through
//!    the generic store; when none is left the finalizer is removed with `Terminating=False`
//!    `InstanceDeletionCompleted` and the store removes the CRD. Instances held by their own
//!    finalizers are looked at again every [`CLEANUP_RECHECK`].
//!
//! Every write is a status write through the generic store (validation, managed fields,
//! compare-and-swap); a lost race or a vanished CRD is simply looked at again on its next event.

pub mod naming;
pub mod serving;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::store::{Attempt, WriteScope};
use super::strategy::{condition_true, set_condition, CLEANUP_FINALIZER};
use super::{DeleteOptions, Preconditions, Store, WriteOptions};
use crate::error::{ApiError, Result};
use crate::state::AppState;
use crate::watch_cache::{ListAt, Select, SnapshotOutcome, WatchFrom, WatchStart};

pub use serving::schema_name;

const GROUP: &str = "apiextensions.k8s.io";
const PLURAL: &str = "customresourcedefinitions";
const PREFIX: &str = "/registry/customresourcedefinitions/";

/// How often a terminating CRD whose instances are not all gone is looked at again (upstream's
/// finalizer polls every 5 s, `wait.PollImmediate(5*time.Second, …)` in `crd_finalizer.go`).
const CLEANUP_RECHECK: Duration = Duration::from_secs(5);

/// The manager of the controllers' writes (the loopback client of kube-apiserver).
const FIELD_MANAGER: &str = "kube-apiserver";

/// What is served for one CRD: the registry keys and the CRD state they were built from.
struct ServedCrd {
    keys: Vec<serving::Served>,
    /// `spec`, accepted names and terminating as last registered: a change re-registers.
    fingerprint: Value,
}

/// The controller's memory: what it registered, per CRD name.
#[derive(Default)]
struct Controller {
    served: HashMap<String, ServedCrd>,
    /// Terminating CRDs with instances left.
    cleaning: BTreeSet<String>,
    /// CRDs to look at again (others of a group whose names changed), drained after each event;
    /// a set, so a name is looked at once however many changes asked for it.
    queue: BTreeSet<String>,
}

/// Starts the CRD controllers; they run until shutdown.
pub fn keep_in_step(state: &AppState) {
    let state = state.clone();
    tokio::spawn(async move {
        let mut controller = Controller::default();
        let mut recheck = tokio::time::interval(CLEANUP_RECHECK);
        'watch: loop {
            let mut watch = match state.cache.watch(PREFIX, WatchFrom::Snapshot) {
                WatchStart::Watching(w) => w,
                WatchStart::Expired { .. } => continue,
            };
            // The snapshot: every CRD, including those served before a relist.
            let mut names: BTreeSet<String> =
                watch.initial.iter().map(|e| key_name(&e.key)).collect();
            names.extend(controller.served.keys().cloned());
            for name in names {
                controller.sync(&state, &name).await;
            }
            controller.drain(&state).await;
            loop {
                tokio::select! {
                    _ = state.shutdown.cancelled() => break 'watch,
                    event = watch.rx.recv() => match event {
                        Some(e) => {
                            let name = key_name(&e.key);
                            controller.sync(&state, &name).await;
                            controller.drain(&state).await;
                        }
                        // Fell behind (or the cache relisted): start from a snapshot again.
                        None => continue 'watch,
                    },
                    _ = recheck.tick() => {
                        let pending: Vec<String> = controller.cleaning.iter().cloned().collect();
                        for name in pending {
                            controller.sync(&state, &name).await;
                        }
                    }
                }
            }
        }
    });
}

fn key_name(key: &str) -> String {
    key.strip_prefix(PREFIX).unwrap_or(key).to_string()
}

fn crd_store(state: &AppState) -> Option<Store<'_>> {
    let resource = state.resources.find(GROUP, "v1", PLURAL)?;
    Some(Store::new(state, resource, None))
}

/// Every CRD in the cache.
fn all_crds(state: &AppState) -> Vec<Arc<Value>> {
    state.cache.current(PREFIX, PREFIX, Select::All)
}

fn group_of(crd: &Value) -> &str {
    crd.pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Controller {
    /// Syncs the queued CRDs until none is queued. Terminates: a CRD is queued only by a status
    /// write that changed another CRD's names (or its removal), and the accepted names of a group
    /// only move towards the requested ones.
    async fn drain(&mut self, state: &AppState) {
        while let Some(name) = self.queue.pop_first() {
            self.sync(state, &name).await;
        }
    }

    /// Brings the CRD `name` in step (the steps of the module docs); failures are logged and
    /// retried on the CRD's next event.
    async fn sync(&mut self, state: &AppState, name: &str) {
        if let Err(e) = self.try_sync(state, name).await {
            tracing::warn!(crd = name, error = %e, "bringing a CustomResourceDefinition in step failed");
        }
    }

    async fn try_sync(&mut self, state: &AppState, name: &str) -> Result<()> {
        let Some(store) = crd_store(state) else {
            return Ok(());
        };
        store.wait_consistent().await?;
        let Some(crd) = state.cache.get(&format!("{PREFIX}{name}")) else {
            self.cleaning.remove(name);
            if let Some(gone) = self.served.remove(name) {
                if let Err(e) = state.resources.replace(&gone.keys, Vec::new()) {
                    tracing::warn!(crd = name, error = %e, "unserving a CRD failed");
                }
            }
            self.requeue_group(state, name);
            return Ok(());
        };
        if !naming::settled(&crd) {
            let group = group_of(&crd).to_string();
            let others: Vec<Arc<Value>> = all_crds(state)
                .into_iter()
                .filter(|c| group_of(c) == group && api::meta::name(c) != Some(name))
                .collect();
            let others: Vec<&Value> = others.iter().map(|c| c.as_ref()).collect();
            let decided = naming::decide(&crd, &others);
            let changed = write_status(&store, name, |obj| {
                if let Some(status) = super::strategy::object_at(obj, "status") {
                    status.insert("acceptedNames".into(), decided.accepted.clone());
                }
                set_condition(obj, decided.names_accepted.clone());
                set_condition(obj, decided.established.clone());
            })
            .await?;
            // Its own status event brings it to the next steps; names it released or took change
            // what the others of its group may accept.
            if changed {
                self.requeue_group(state, name);
            }
            return Ok(());
        }
        if !condition_true(&crd, "NamesAccepted") {
            return Ok(());
        }
        let served = self.serve(state, name, &crd);
        if served
            && !condition_true(&crd, "Established")
            && api::meta::deletion_timestamp(&crd).is_none()
        {
            write_status(&store, name, |obj| {
                set_condition(obj, naming::established())
            })
            .await?;
        }
        if api::meta::deletion_timestamp(&crd).is_some()
            && api::meta::finalizers(&crd)
                .iter()
                .any(|f| f == CLEANUP_FINALIZER)
        {
            self.clean_up(state, &store, name, &crd).await?;
        }
        Ok(())
    }

    /// Registers (or re-registers, when it changed) what `crd` serves; whether it is served (a
    /// resource colliding with one served already, such as a built-in, is not).
    fn serve(&mut self, state: &AppState, name: &str, crd: &Value) -> bool {
        let fingerprint = serde_json::json!({
            "spec": crd.get("spec"),
            "names": crd.pointer("/status/acceptedNames"),
            "terminating": condition_true(crd, "Terminating"),
        });
        if self
            .served
            .get(name)
            .is_some_and(|s| s.fingerprint == fingerprint)
        {
            return true;
        }
        let resources = serving::resources(crd);
        let keys = serving::keys(&resources);
        let old = self
            .served
            .get(name)
            .map(|s| s.keys.clone())
            .unwrap_or_default();
        match state.resources.replace(&old, resources) {
            Ok(()) => {
                // Objects stored before a default of the new schema existed read with it, as
                // upstream's rebuilt storage decodes them (the registry first: events applied
                // from now on are defaulted by the new schema).
                if serving::has_defaults(crd) {
                    let prefix = format!("/registry/{}/", serving::storage_segment(crd));
                    state.cache.redefault(&prefix);
                }
                self.served
                    .insert(name.to_string(), ServedCrd { keys, fingerprint });
                true
            }
            Err(e) => {
                tracing::warn!(crd = name, error = %e, "serving a CRD failed");
                false
            }
        }
    }

    /// Queues the other CRDs of the group of the CRD `name` whose names are not settled (names
    /// may have been freed or taken).
    fn requeue_group(&mut self, state: &AppState, name: &str) {
        let group = name.split_once('.').map(|(_, g)| g).unwrap_or("");
        let others = all_crds(state);
        let unsettled = others
            .iter()
            .filter(|c| group_of(c) == group && api::meta::name(c) != Some(name))
            .filter(|c| !naming::settled(c))
            .filter_map(|c| api::meta::name(c).map(String::from));
        self.queue.extend(unsettled);
    }

    /// The finalizer: deletes every instance, then lets the CRD go.
    async fn clean_up(
        &mut self,
        state: &AppState,
        store: &Store<'_>,
        name: &str,
        crd: &Value,
    ) -> Result<()> {
        if !condition_true(crd, "Established") {
            self.cleaning.remove(name);
            return finish(
                store,
                name,
                "NeverEstablished",
                "resource was never established",
            )
            .await;
        }
        let in_progress = serde_json::json!({"type": "Terminating", "status": "True",
            "reason": "InstanceDeletionInProgress", "message": "CustomResource deletion is in progress"});
        write_status(store, name, |obj| set_condition(obj, in_progress.clone())).await?;
        let storage = super::strategy::storage_version(crd).unwrap_or("");
        let group = group_of(crd);
        let plural = crd
            .pointer("/status/acceptedNames/plural")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(resource) = state.resources.find(group, storage, plural).or_else(|| {
            let served = state.resources.snapshot();
            served
                .resources
                .iter()
                .find(|r| r.info.group == group && r.info.plural == plural)
                .cloned()
        }) else {
            return Ok(());
        };
        let prefix = format!("/registry/{}/", serving::storage_segment(crd));
        let instances = state.cache.current(&prefix, &prefix, Select::All);
        let mut failed = None;
        for obj in &instances {
            if api::meta::deletion_timestamp(obj).is_some() {
                continue;
            }
            let instance = Store::new(state, resource.clone(), api::meta::namespace(obj));
            let name = api::meta::name(obj).unwrap_or("");
            match instance.delete(name, &DeleteOptions::default()).await {
                Ok(_) => {}
                Err(e) if e.code() == 404 => {}
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            let msg = format!("could not issue all deletes: {e}");
            let failed = serde_json::json!({"type": "Terminating", "status": "True",
                "reason": "InstanceDeletionFailed", "message": msg});
            write_status(store, name, |obj| set_condition(obj, failed.clone())).await?;
            self.cleaning.insert(name.to_string());
            return Ok(());
        }
        store.wait_consistent().await?;
        let left = match state.cache.list(
            &prefix,
            &prefix,
            ListAt::Current,
            None,
            Some(1),
            Select::All,
        ) {
            SnapshotOutcome::Listed(s) => s.items.len(),
            _ => 1,
        };
        if left > 0 {
            self.cleaning.insert(name.to_string());
            return Ok(());
        }
        self.cleaning.remove(name);
        finish(
            store,
            name,
            "InstanceDeletionCompleted",
            "removed all instances",
        )
        .await
    }
}

/// Removes the cleanup finalizer with `Terminating=False` (`reason`, `message`); the store then
/// removes the CRD if nothing else holds it.
async fn finish(store: &Store<'_>, name: &str, reason: &str, message: &str) -> Result<()> {
    let cond = serde_json::json!({"type": "Terminating", "status": "False",
        "reason": reason, "message": message});
    write_status(store, name, |obj| {
        set_condition(obj, cond.clone());
        let left: Vec<String> = api::meta::finalizers(obj)
            .into_iter()
            .filter(|f| f != CLEANUP_FINALIZER)
            .collect();
        api::meta::set_finalizers(obj, &left);
    })
    .await
    .map(|_| ())
}

/// Writes a change of a CRD's status (or, for the finalizer, its finalizers) computed from the
/// stored object by `change`, through the generic store; whether it changed anything. A vanished
/// CRD is not an error.
async fn write_status(store: &Store<'_>, name: &str, change: impl Fn(&mut Value)) -> Result<bool> {
    let opts = WriteOptions {
        field_manager: FIELD_MANAGER.to_string(),
        ..WriteOptions::default()
    };
    let changed = std::sync::atomic::AtomicBool::new(false);
    let written = store
        .guaranteed_update(name, "PUT", &Preconditions::default(), &opts, |current| {
            let Some(current) = current else {
                return Err(ApiError::not_found(&format!("{PLURAL}.{GROUP}"), name));
            };
            let mut new = Value::clone(&current.object);
            change(&mut new);
            let differs = new != *current.object;
            changed.store(differs, std::sync::atomic::Ordering::Relaxed);
            if !differs {
                return Ok(Attempt::Keep);
            }
            store.prepare_update(
                &mut new,
                &current.object,
                WriteScope::Internal,
                FIELD_MANAGER,
            )?;
            Ok(Attempt::Write(new))
        })
        .await;
    match written {
        Ok(_) => Ok(changed.load(std::sync::atomic::Ordering::Relaxed)),
        Err(e) if e.code() == 404 => Ok(false),
        Err(e) => Err(e),
    }
}
