//! `pods/eviction` (`EvictionREST` of `pkg/registry/core/pod/storage/eviction.go`, Kubernetes
//! 1.33): a `policy/v1` Eviction deletes its pod unless a PodDisruptionBudget forbids it.
//!
//! In order: a pod that is terminal, still `Pending` or already being deleted is deleted at once
//! (it disrupts nothing; a live one is deleted with its resourceVersion as a precondition, so it
//! cannot become ready in between). Otherwise the PDBs of the pod's namespace whose selector
//! matches it (an empty or invalid selector matches nothing) decide: more than one is a 500
//! Failure Status with upstream's message; none deletes the pod; one is checked and decremented
//! (`checkAndDecrement`) in one [`Store::guaranteed_update`] of its status: a status the
//! disruption controller never computed (`observedGeneration < generation`, also a PDB fresh from
//! create) or `disruptionsAllowed == 0` is 429 TooManyRequests with upstream's message and
//! `DisruptionBudget` cause; otherwise `disruptionsAllowed` goes down by one (the
//! `DisruptionAllowed` condition turns False at zero) and the pod is recorded in
//! `disruptedPods`, then the pod is deleted with the Eviction's `deleteOptions`. An unready pod of
//! a budget that is already met skips the decrement and is deleted with its resourceVersion as a
//! precondition (a conflict there is the 429 again). A dry run checks everything and writes
//! nothing.

use std::collections::BTreeMap;

use api::status::StatusObject;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};
use serde_json::{json, Value};

use super::store::{Attempt, WriteScope};
use super::{DeleteOptions, Preconditions, Store, WriteOptions};
use crate::error::{ApiError, Result};
use crate::state::AppState;

/// `MaxDisruptedPodSize`: the eviction handler refuses once this many evictions are not yet
/// confirmed by the disruption controller (eviction.go).
pub const MAX_DISRUPTED_POD_SIZE: usize = 2000;

/// Reads of a pod that bypasses budgets before a conflicting delete is given up (upstream's
/// `EvictionsRetry` has 20 steps 500 ms apart; here they are immediate, so fewer).
const EVICTION_ATTEMPTS: usize = 5;

/// The message of every 429 of the eviction subresource.
pub const VIOLATES_BUDGET: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

/// The message of the 500 for a pod under several budgets.
pub const MULTIPLE_BUDGETS: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

/// What an eviction answered when it did not fail.
#[derive(Debug, Clone, PartialEq)]
pub enum Evicted {
    /// The pod was deleted (or would be, for a dry run): `Status{status: Success}`.
    Success,
    /// Several budgets cover the pod: a Failure Status with code 500 (upstream returns it as the
    /// result object, not as an error).
    MultipleBudgets,
}

impl Evicted {
    /// The Status object of the answer (`code` as upstream's create handler fills it).
    pub fn to_status(&self) -> StatusObject {
        match self {
            Evicted::Success => StatusObject {
                status: Some("Success".into()),
                code: Some(201),
                ..Default::default()
            },
            Evicted::MultipleBudgets => StatusObject {
                status: Some("Failure".into()),
                message: Some(MULTIPLE_BUDGETS.into()),
                code: Some(500),
                ..Default::default()
            },
        }
    }
}

/// `errors.NewTooManyRequests(VIOLATES_BUDGET, retry_after)` with a `DisruptionBudget` cause.
fn too_many_requests(retry_after: i32, cause: String) -> ApiError {
    ApiError::from(StatusObject {
        status: Some("Failure".into()),
        message: Some(VIOLATES_BUDGET.into()),
        reason: Some("TooManyRequests".into()),
        code: Some(429),
        details: Some(StatusDetails {
            causes: Some(vec![StatusCause {
                reason: Some("DisruptionBudget".into()),
                message: Some(cause),
                field: None,
            }]),
            // `RetryAfterSeconds` is omitempty: 0 is not sent (nor a Retry-After header).
            retry_after_seconds: (retry_after > 0).then_some(retry_after),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// `createTooManyRequestsError`: the budget's status is not computed yet.
fn still_processing(pdb: &str) -> ApiError {
    too_many_requests(
        10,
        format!("The disruption budget {pdb} is still being processed by the server."),
    )
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `canIgnorePDB`: terminal, pending and terminating pods are deleted without a budget check.
fn can_ignore_pdb(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending")
        || api::meta::deletion_timestamp(pod).is_some()
}

/// `shouldEnforceResourceVersion`: not for terminal or terminating pods.
fn should_enforce_resource_version(pod: &Value) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && api::meta::deletion_timestamp(pod).is_none()
}

/// `podutil.IsPodReady`: the `Ready` condition is `True`.
fn is_pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type") == Some(&json!("Ready")) && c.get("status") == Some(&json!("True")))
}

fn status_int(pdb: &Value, key: &str) -> i64 {
    pdb.get("status")
        .and_then(|s| s.get(key))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `checkAndDecrement` on `pdb` (a copy of the stored one): the new state to store, or the
/// refusal.
pub fn check_and_decrement(pdb: &Value, pod: &str, now: &str) -> Result<Value> {
    let name = api::meta::name(pdb).unwrap_or("");
    let generation = api::meta::generation(pdb).unwrap_or(0);
    if status_int(pdb, "observedGeneration") < generation {
        return Err(still_processing(name));
    }
    let allowed = status_int(pdb, "disruptionsAllowed");
    let gr = "poddisruptionbudget.policy";
    if allowed < 0 {
        return Err(api::status::forbidden(gr, name, "pdb disruptions allowed is negative").into());
    }
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_POD_SIZE {
        return Err(api::status::forbidden(
            gr,
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )
        .into());
    }
    if allowed == 0 {
        return Err(too_many_requests(
            0,
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status_int(pdb, "desiredHealthy"),
                status_int(pdb, "currentHealthy")
            ),
        ));
    }
    let mut new = pdb.clone();
    let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) else {
        return Err(still_processing(name));
    };
    status.insert("disruptionsAllowed".into(), json!(allowed - 1));
    if allowed - 1 == 0 {
        set_disruption_allowed_false(status, now);
    }
    let pods = status.entry("disruptedPods").or_insert_with(|| json!({}));
    if let Some(pods) = pods.as_object_mut() {
        pods.insert(pod.to_string(), json!(now));
    } else {
        *pods = json!({ pod: now });
    }
    Ok(new)
}

/// `UpdateDisruptionAllowedCondition` with no disruption left: `DisruptionAllowed` False,
/// `InsufficientPods` (`meta.SetStatusCondition`: the transition time changes with the status).
fn set_disruption_allowed_false(status: &mut serde_json::Map<String, Value>, now: &str) {
    let observed = status
        .get("observedGeneration")
        .cloned()
        .unwrap_or(json!(0));
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    let wanted = json!({
        "type": "DisruptionAllowed",
        "status": "False",
        "observedGeneration": observed,
        "lastTransitionTime": now,
        "reason": "InsufficientPods",
        "message": "",
    });
    match list
        .iter_mut()
        .find(|c| c.get("type") == Some(&json!("DisruptionAllowed")))
    {
        Some(c) => {
            let same = c.get("status") == Some(&json!("False"));
            let time = c.get("lastTransitionTime").cloned();
            *c = wanted;
            if let (true, Some(t)) = (same, time) {
                c["lastTransitionTime"] = t;
            }
        }
        None => list.push(wanted),
    }
}

/// The budgets of `pod`'s namespace selecting it (`getPodDisruptionBudgets`), from the watch
/// cache as upstream reads them from its client's cache.
fn budgets_of(state: &AppState, pod: &Value) -> Vec<Value> {
    let Some(resource) = pdb_resource(state) else {
        return Vec::new();
    };
    let ns = api::meta::namespace(pod).unwrap_or("");
    let labels: BTreeMap<String, String> = api::meta::labels(pod);
    let store = Store::new(state, resource, Some(ns));
    let budgets = state.cache.current(
        &store.resource_prefix(),
        &store.collection_prefix(),
        crate::watch_cache::Select::All,
    );
    budgets
        .iter()
        .filter(|p| super::pdb_selects(p, &labels))
        .map(|p| Value::clone(p))
        .collect()
}

fn pdb_resource(state: &AppState) -> Option<std::sync::Arc<super::Resource>> {
    state.resources.find("policy", "v1", "poddisruptionbudgets")
}

/// Evicts the pod `name` of `pods` (its namespace's pod store) with the Eviction's delete
/// options `opts` (their dry run already merged with the request's).
pub async fn evict(
    state: &AppState,
    pods: &Store<'_>,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Evicted> {
    // Pods that disrupt nothing are deleted at once; a conflict (the pod changed since it was
    // read) reads it again, unless the client named a resourceVersion itself.
    let mut attempts = 0;
    let pod = loop {
        attempts += 1;
        let pod = pods.get(name).await?;
        if !can_ignore_pdb(&pod) {
            break pod;
        }
        let mut delete = opts.clone();
        let retry = opts.preconditions.resource_version.is_none();
        if should_enforce_resource_version(&pod) && retry {
            delete.preconditions.resource_version =
                api::meta::resource_version(&pod).map(String::from);
        }
        match pods.delete(name, &delete).await {
            Ok(_) => return Ok(Evicted::Success),
            Err(e) if e.code() == 409 && retry && attempts < EVICTION_ATTEMPTS => continue,
            Err(e) => return Err(e),
        }
    };
    // A consistent list, as upstream's client list is: every acknowledged write is seen.
    pods.wait_consistent().await?;
    let budgets = budgets_of(state, &pod);
    if budgets.len() > 1 {
        return Ok(Evicted::MultipleBudgets);
    }
    let mut delete = opts.clone();
    let mut guarded = false;
    if let Some(pdb) = budgets.first() {
        let pdb_name = api::meta::name(pdb).unwrap_or("").to_string();
        let (current, desired) = (
            status_int(pdb, "currentHealthy"),
            status_int(pdb, "desiredHealthy"),
        );
        if !is_pod_ready(&pod) && current >= desired && desired > 0 {
            guarded = true;
            delete.preconditions.resource_version =
                api::meta::resource_version(&pod).map(String::from);
        } else {
            decrement(state, &pdb_name, &pod, opts.dry_run).await?;
        }
        match pods.delete(name, &delete).await {
            Ok(_) => return Ok(Evicted::Success),
            Err(e)
                if guarded && e.code() == 409 && opts.preconditions.resource_version.is_none() =>
            {
                return Err(still_processing(&pdb_name))
            }
            Err(e) => return Err(e),
        }
    }
    pods.delete(name, &delete).await?;
    Ok(Evicted::Success)
}

/// The budget `pdb_name` allows one more disruption, recorded in its status (not for a dry run).
async fn decrement(state: &AppState, pdb_name: &str, pod: &Value, dry_run: bool) -> Result<()> {
    let Some(resource) = pdb_resource(state) else {
        return Ok(());
    };
    let pod_name = api::meta::name(pod).unwrap_or("").to_string();
    let store = Store::new(state, resource, api::meta::namespace(pod));
    let opts = WriteOptions {
        dry_run,
        ..Default::default()
    };
    let now = api::meta::now_rfc3339();
    store
        .guaranteed_update(
            pdb_name,
            "PUT",
            &Preconditions::default(),
            &opts,
            |current| {
                let Some(current) = current else {
                    return Err(ApiError::not_found("poddisruptionbudgets.policy", pdb_name));
                };
                let mut new = check_and_decrement(&current.object, &pod_name, &now)?;
                store.prepare_update(&mut new, &current.object, WriteScope::Status, "")?;
                Ok(Attempt::Write(new))
            },
        )
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(generation: i64, status: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "d", "generation": generation}, "status": status})
    }

    #[test]
    fn uncomputed_status_is_still_being_processed() {
        let err = check_and_decrement(&pdb(1, json!({"disruptionsAllowed": 0})), "p", "t")
            .err()
            .map(|e| e.to_status());
        let s = err.unwrap_or_default();
        assert_eq!(s["code"], 429);
        assert_eq!(s["reason"], "TooManyRequests");
        assert_eq!(s["message"], VIOLATES_BUDGET);
        assert_eq!(s["details"]["retryAfterSeconds"], 10);
        assert_eq!(
            s["details"]["causes"],
            json!([{"reason": "DisruptionBudget", "message": "The disruption budget web is still being processed by the server."}])
        );
    }

    #[test]
    fn no_disruption_allowed_names_the_healthy_counts() {
        let st = json!({"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2});
        let s = check_and_decrement(&pdb(1, st), "p", "t")
            .err()
            .map(|e| e.to_status())
            .unwrap_or_default();
        assert_eq!(s["code"], 429);
        assert!(s["details"].get("retryAfterSeconds").is_none());
        assert_eq!(
            s["details"]["causes"][0]["message"],
            "The disruption budget web needs 2 healthy pods and has 2 currently"
        );
        let neg = json!({"observedGeneration": 1, "disruptionsAllowed": -1});
        let s = check_and_decrement(&pdb(1, neg), "p", "t")
            .err()
            .map(|e| e.to_status())
            .unwrap_or_default();
        assert_eq!(
            s["message"],
            "poddisruptionbudget.policy \"web\" is forbidden: pdb disruptions allowed is negative"
        );
    }

    #[test]
    fn decrements_and_records_the_pod() {
        let st = json!({"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2});
        let new = check_and_decrement(&pdb(1, st), "web-1", "2025-01-01T00:00:00Z");
        let new = new.unwrap_or_default();
        assert_eq!(new["status"]["disruptionsAllowed"], 0);
        assert_eq!(
            new["status"]["disruptedPods"],
            json!({"web-1": "2025-01-01T00:00:00Z"})
        );
        assert_eq!(new["status"]["conditions"][0]["type"], "DisruptionAllowed");
        assert_eq!(new["status"]["conditions"][0]["status"], "False");
        assert_eq!(new["status"]["conditions"][0]["reason"], "InsufficientPods");
        let st = json!({"observedGeneration": 1, "disruptionsAllowed": 3});
        let new = check_and_decrement(&pdb(1, st), "a", "t").unwrap_or_default();
        assert_eq!(new["status"]["disruptionsAllowed"], 2);
        assert!(new["status"].get("conditions").is_none());
    }

    #[test]
    fn which_pods_bypass_budgets() {
        for (phase, bypass) in [
            ("Pending", true),
            ("Succeeded", true),
            ("Failed", true),
            ("Running", false),
        ] {
            assert_eq!(
                can_ignore_pdb(&json!({"status": {"phase": phase}})),
                bypass,
                "{phase}"
            );
        }
        assert!(can_ignore_pdb(
            &json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}, "status": {"phase": "Running"}})
        ));
        assert!(!should_enforce_resource_version(
            &json!({"status": {"phase": "Failed"}})
        ));
        assert!(should_enforce_resource_version(
            &json!({"status": {"phase": "Pending"}})
        ));
        assert!(is_pod_ready(
            &json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        ));
        assert!(!is_pod_ready(&json!({"status": {}})));
    }
}
