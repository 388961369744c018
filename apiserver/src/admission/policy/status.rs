//! The status of ValidatingAdmissionPolicies (upstream's `validatingadmissionpolicy-status-
//! controller`, which kube-controller-manager runs; here it runs in the apiserver beside the CRD
//! controllers, because the schemas it checks against are the apiserver's served kinds).
//!
//! For every policy whose `metadata.generation` is above `status.observedGeneration`, the
//! expressions are type-checked ([`super::typecheck`]) and the status written as upstream's
//! apply does: `observedGeneration` and `typeChecking.expressionWarnings` (empty when there are
//! none); no conditions. The task follows the policies in the watch cache (a snapshot, then
//! events; a dropped watch starts again from a snapshot), writes through the generic store
//! (compare-and-swap, retried by `guaranteed_update`) and logs a failed write; the next change of
//! the policy, or the next snapshot, tries again.

use serde_json::{json, Value};

use super::source::POLICY_PREFIX;
use crate::error::{ApiError, Result};
use crate::registry::store::{Attempt, WriteScope};
use crate::registry::{Preconditions, Store, WriteOptions};
use crate::state::AppState;
use crate::watch_cache::{EventType, WatchFrom, WatchStart};

/// upstream's controller name, its field manager.
pub const FIELD_MANAGER: &str = "validatingadmissionpolicy-status-controller";

const GROUP: &str = "admissionregistration.k8s.io";
const PLURAL: &str = "validatingadmissionpolicies";

/// Whether `policy`'s status is behind its spec.
pub fn behind(policy: &Value) -> bool {
    let generation = policy
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let observed = policy
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    generation > observed
}

/// Starts the status controller; it runs until shutdown.
pub fn keep_in_step(state: &AppState) {
    let state = state.clone();
    tokio::spawn(async move {
        loop {
            let mut watch = match state.cache.watch(POLICY_PREFIX, WatchFrom::Snapshot) {
                WatchStart::Watching(w) => w,
                WatchStart::Expired { .. } => return,
            };
            for ev in std::mem::take(&mut watch.initial) {
                reconcile(&state, &ev.object).await;
            }
            loop {
                tokio::select! {
                    _ = state.shutdown.cancelled() => return,
                    ev = watch.rx.recv() => match ev {
                        Some(ev) if ev.kind != EventType::Deleted => {
                            reconcile(&state, &ev.object).await;
                        }
                        Some(_) => {}
                        None => break,
                    },
                }
            }
            tokio::select! {
                _ = state.shutdown.cancelled() => return,
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            }
        }
    });
}

async fn reconcile(state: &AppState, policy: &Value) {
    if !behind(policy) {
        return;
    }
    let name = api::meta::name(policy).unwrap_or("").to_string();
    if let Err(e) = write(state, &name).await {
        tracing::warn!(policy = %name, error = %e, "writing a ValidatingAdmissionPolicy's status failed");
    }
}

/// Type-checks the stored policy `name` and writes its status, unless it is current.
async fn write(state: &AppState, name: &str) -> Result<()> {
    let Some(resource) = state.resources.find(GROUP, "v1", PLURAL) else {
        return Ok(());
    };
    let store = Store::new(state, resource, None);
    let opts = WriteOptions {
        field_manager: FIELD_MANAGER.to_string(),
        ..WriteOptions::default()
    };
    let written = store
        .guaranteed_update(name, "PUT", &Preconditions::default(), &opts, |current| {
            let Some(current) = current else {
                return Err(ApiError::not_found(&format!("{PLURAL}.{GROUP}"), name));
            };
            if !behind(&current.object) {
                return Ok(Attempt::Keep);
            }
            let warnings = super::typecheck::check(&current.object, &state.resources.snapshot());
            let mut new = Value::clone(&current.object);
            let generation = new.pointer("/metadata/generation").cloned();
            // As upstream's apply: no warnings leave `typeChecking` empty.
            let type_checking = if warnings.is_empty() {
                json!({})
            } else {
                json!({"expressionWarnings": warnings})
            };
            if let Some(obj) = new.as_object_mut() {
                obj.insert(
                    "status".into(),
                    json!({"observedGeneration": generation, "typeChecking": type_checking}),
                );
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
        Ok(_) => Ok(()),
        Err(e) if e.code() == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
