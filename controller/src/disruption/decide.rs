//! Disruption decisions (upstream `pkg/controller/disruption/disruption.go` and
//! `pkg/apis/policy/v1/helper`), free of I/O and driven by an explicit `now`.
//!
//! A PodDisruptionBudget's status follows from its pods and, when the budget is relative to the
//! pods' controllers, from their scale:
//! - `minAvailable: N` (a number): `desiredHealthy = N`, `expectedPods` = the matching pods;
//! - `minAvailable: P%`: `expectedPods` = the sum of the scales of the pods' controllers,
//!   `desiredHealthy = ceil(P% × expectedPods)`;
//! - `maxUnavailable` (number or percentage, rounded up): `expectedPods` as above,
//!   `desiredHealthy = max(0, expectedPods − maxUnavailable)`.
//!
//! `currentHealthy` counts the pods that are Ready, not being deleted and not in
//! `disruptedPods` (pods the eviction subresource let go within [`DELETION_TIMEOUT`]);
//! `disruptionsAllowed = max(0, currentHealthy − desiredHealthy)`, and 0 while `expectedPods` is
//! 0. The `DisruptionAllowed` condition is True (`SufficientPods`) when disruptions are allowed,
//! False (`InsufficientPods`) otherwise, and False (`SyncFailed`, the error as message) when the
//! status could not be computed, in which case `disruptionsAllowed` is forced to 0 (fail safe).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::cached_pod::CachedPod;
use crate::pod_util::is_pod_ready;

/// `DeletionTimeout`: how long a pod the eviction subresource let go may take to be deleted
/// before the budget counts it again (2 min).
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);
/// `stalePodDisruptionTimeout`: after this long a `DisruptionTarget` condition on a pod that is
/// not being deleted is reset to False (2 min).
pub const STALE_POD_DISRUPTION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);
/// `DisruptionAllowedCondition`.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// `SufficientPodsReason`.
pub const SUFFICIENT_PODS: &str = "SufficientPods";
/// `InsufficientPodsReason`.
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";
/// `SyncFailedReason`.
pub const SYNC_FAILED: &str = "SyncFailed";

/// Whether the budget needs the scale of the pods' controllers (`maxUnavailable`, or a
/// percentage `minAvailable`).
pub fn needs_scale(pdb: &PodDisruptionBudget) -> bool {
    let Some(spec) = pdb.spec.as_ref() else {
        return false;
    };
    spec.max_unavailable.is_some() || matches!(spec.min_available, Some(IntOrString::String(_)))
}

/// `intstr.GetScaledValueFromIntOrPercent`: a number as is, `P%` of `total`, rounded up or down.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let Some(digits) = s.strip_suffix('%') else {
                return Err("invalid type: string is not a percentage".to_string());
            };
            let p: i64 = digits
                .parse()
                .map_err(|e| format!("invalid value for IntOrString: invalid value {s:?}: {e}"))?;
            let product = p * i64::from(total);
            let v = if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            Ok(i32::try_from(v).unwrap_or(i32::MAX))
        }
    }
}

/// `getExpectedPodCount`: `(expectedPods, desiredHealthy)` for `pods` matching pods and, when
/// [`needs_scale`], `scale` = the sum of their controllers' scales.
pub fn expected_and_desired(
    pdb: &PodDisruptionBudget,
    pods: usize,
    scale: i32,
) -> Result<(i32, i32), String> {
    let Some(spec) = pdb.spec.as_ref() else {
        return Ok((0, 0));
    };
    if let Some(max) = &spec.max_unavailable {
        let max = scaled_value(max, scale, true)?;
        return Ok((scale, (scale - max).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((i32::try_from(pods).unwrap_or(i32::MAX), *n)),
        Some(pct @ IntOrString::String(_)) => Ok((scale, scaled_value(pct, scale, true)?)),
        None => Ok((0, 0)),
    }
}

/// `buildDisruptedPodMap`: the `disruptedPods` entries still pending (pod present, not being
/// deleted, within [`DELETION_TIMEOUT`]), the earliest instant one of them expires (recheck
/// then), and the names of the pods that overstayed (a `NotDeleted` event each).
pub fn disrupted_pods(
    pods: &[&CachedPod],
    pdb: &PodDisruptionBudget,
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>, Vec<String>) {
    let mut kept = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let mut overdue = Vec::new();
    let Some(listed) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else {
        return (kept, recheck, overdue);
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = listed.get(&name) else {
            continue;
        };
        let expected = at.0.checked_add(DELETION_TIMEOUT).unwrap_or(at.0);
        if expected < now {
            overdue.push(name);
        } else {
            recheck = Some(recheck.map_or(expected, |r| r.min(expected)));
            kept.insert(name, at.clone());
        }
    }
    (kept, recheck, overdue)
}

/// `countHealthyPods`.
pub fn count_healthy(
    pods: &[&CachedPod],
    disrupted: &BTreeMap<String, Time>,
    now: Timestamp,
) -> i32 {
    let mut n = 0;
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if let Some(at) = disrupted.get(name) {
            if at.0.checked_add(DELETION_TIMEOUT).is_ok_and(|d| d > now) {
                continue;
            }
        }
        if is_pod_ready(pod) {
            n += 1;
        }
    }
    n
}

/// `apimeta.SetStatusCondition`: add or update the condition of `c.type_`; the transition time
/// moves only when the status changes (or the condition is new).
pub fn set_condition(conditions: &mut Vec<Condition>, c: Condition) {
    match conditions.iter_mut().find(|x| x.type_ == c.type_) {
        None => conditions.push(c),
        Some(x) => {
            if x.status != c.status {
                x.status = c.status;
                x.last_transition_time = c.last_transition_time;
            }
            x.reason = c.reason;
            x.message = c.message;
            x.observed_generation = c.observed_generation;
        }
    }
}

fn allowed_condition(status: &PodDisruptionBudgetStatus, now: Timestamp) -> Condition {
    let ok = status.disruptions_allowed > 0;
    Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: if ok {
            SUFFICIENT_PODS
        } else {
            INSUFFICIENT_PODS
        }
        .into(),
        message: String::new(),
        observed_generation: status.observed_generation,
        last_transition_time: Time(now),
    }
}

/// `pdbhelper.ConditionsAreUpToDate`.
fn conditions_up_to_date(pdb: &PodDisruptionBudget) -> bool {
    let Some(status) = pdb.status.as_ref() else {
        return false;
    };
    let Some(c) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    else {
        return false;
    };
    if status.observed_generation != pdb.metadata.generation {
        return false;
    }
    if status.disruptions_allowed > 0 {
        c.status == "True" && c.reason == SUFFICIENT_PODS
    } else {
        c.status == "False" && c.reason == INSUFFICIENT_PODS
    }
}

/// The counts a sync computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// `currentHealthy`.
    pub current_healthy: i32,
    /// `desiredHealthy`.
    pub desired_healthy: i32,
    /// `expectedPods`.
    pub expected_pods: i32,
}

/// `updatePdbStatus`: the new status, or `None` if the stored one is already it.
pub fn next_status(
    pdb: &PodDisruptionBudget,
    counts: Counts,
    disrupted: BTreeMap<String, Time>,
    now: Timestamp,
) -> Option<PodDisruptionBudgetStatus> {
    let mut allowed = counts.current_healthy - counts.desired_healthy;
    if counts.expected_pods <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let cur = pdb.status.clone().unwrap_or_default();
    let same_disrupted = cur.disrupted_pods.clone().unwrap_or_default() == disrupted;
    if cur.current_healthy == counts.current_healthy
        && cur.desired_healthy == counts.desired_healthy
        && cur.expected_pods == counts.expected_pods
        && cur.disruptions_allowed == allowed
        && same_disrupted
        && cur.observed_generation == pdb.metadata.generation
        && conditions_up_to_date(pdb)
    {
        return None;
    }
    let mut next = PodDisruptionBudgetStatus {
        current_healthy: counts.current_healthy,
        desired_healthy: counts.desired_healthy,
        expected_pods: counts.expected_pods,
        disruptions_allowed: allowed,
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: cur.conditions,
    };
    let c = allowed_condition(&next, now);
    set_condition(next.conditions.get_or_insert_with(Vec::new), c);
    Some(next)
}

/// `failSafe`: the stored status with `disruptionsAllowed = 0` and `DisruptionAllowed=False`
/// (`SyncFailed`, `message` = the error).
pub fn fail_safe_status(
    pdb: &PodDisruptionBudget,
    message: &str,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut next = pdb.status.clone().unwrap_or_default();
    next.disruptions_allowed = 0;
    let c = Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: "False".into(),
        reason: SYNC_FAILED.into(),
        message: message.into(),
        observed_generation: next.observed_generation,
        last_transition_time: Time(now),
    };
    set_condition(next.conditions.get_or_insert_with(Vec::new), c);
    next
}

/// `nonTerminatingPodHasStaleDisruptionCondition`: for a pod not being deleted and not terminal
/// whose `DisruptionTarget` condition is True (and not set by the kubelet), how long until it is
/// stale (zero: now); `None` if there is nothing to clean.
pub fn stale_disruption_after(pod: &CachedPod, now: Timestamp) -> Option<SignedDuration> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    let c = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")?;
    if c.status != "True" || c.reason.as_deref() == Some("TerminationByKubelet") {
        return None;
    }
    let since = c.last_transition_time.as_ref().map_or(now, |t| t.0);
    let wait = STALE_POD_DISRUPTION_TIMEOUT - now.duration_since(since);
    Some(wait.max(SignedDuration::ZERO))
}

/// `syncStalePodDisruption`'s write: `DisruptionTarget` False since `now`, at the pod's
/// `resourceVersion` (a changed pod is decided again). Upstream applies it to `/status` with
/// server-side apply; a strategic merge patch merges it the same way, into the condition of that
/// type, so what others set of it (its reason, its message) stays, and the rest of the status is
/// not sent.
pub fn stale_disruption_reset(pod: &CachedPod, now: Timestamp) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"resourceVersion": pod.metadata.resource_version},
        "status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "False",
            "lastTransitionTime": Time(now),
        }]},
    })
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
