//! The quota controller's decisions, without I/O: which quotas to (re)calculate and a quota's
//! next status (`syncResourceQuota`, `addQuota`, `replenishQuota` and the quota monitor's update
//! filters of upstream's `pkg/controller/resourcequota`).

use api::quota::evaluator::{calculate_usage, Evaluator};
use api::quota::scope::quota_scopes;
use api::quota::{self as q, ResourceList};
use serde_json::{json, Value};

/// Which queue a quota goes to (`addQuota`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// `missingUsageQueue`: its status does not yet reflect its spec, or a tracked resource has
    /// no usage yet — admission refuses writes until it is synced.
    MissingUsage,
    /// The normal recalculation queue.
    Normal,
}

fn hard(quota: &Value) -> ResourceList {
    q::from_json(quota.pointer("/spec/hard"))
}

fn status_hard(quota: &Value) -> Option<ResourceList> {
    quota
        .pointer("/status/hard")
        .filter(|h| h.is_object())
        .map(|h| q::from_json(Some(h)))
}

fn status_used(quota: &Value) -> Option<ResourceList> {
    quota
        .pointer("/status/used")
        .filter(|u| u.is_object())
        .map(|u| q::from_json(Some(u)))
}

/// `addQuota`: the queue a new or re-specified quota goes to.
pub fn priority(quota: &Value, evaluators: &[Evaluator]) -> Priority {
    let status = status_hard(quota).unwrap_or_default();
    if !q::equals(&hard(quota), &status) {
        return Priority::MissingUsage;
    }
    let used = status_used(quota).unwrap_or_default();
    let missing = status.keys().any(|k| {
        !used.contains_key(k)
            && evaluators
                .iter()
                .any(|e| !e.matching_resources([k]).is_empty())
    });
    if missing {
        Priority::MissingUsage
    } else {
        Priority::Normal
    }
}

/// The quota resource update filter: only a change of `spec.hard` re-queues a quota (its status
/// is this controller's and admission's to change).
pub fn spec_hard_changed(old: &Value, new: &Value) -> bool {
    !q::equals(&hard(old), &hard(new))
}

/// `replenishQuota`'s filter: whether `quota` tracks a resource `evaluator` measures.
pub fn tracks(quota: &Value, evaluator: &Evaluator) -> bool {
    let hard = status_hard(quota).unwrap_or_default();
    !evaluator.matching_resources(hard.keys()).is_empty()
}

/// `QuotaV1Pod` over the fields it reads: whether a pod in `phase`, deleted at `deletion` with
/// `grace` seconds, is charged compute quota at `now`.
pub fn pod_counts(
    phase: Option<&str>,
    deletion: Option<jiff::Timestamp>,
    grace: Option<i64>,
    now: jiff::Timestamp,
) -> bool {
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return false;
    }
    match (deletion, grace) {
        (Some(at), Some(grace)) => at
            .checked_add(jiff::SignedDuration::from_secs(grace))
            .map_or(true, |end| now <= end),
        _ => true,
    }
}

/// `GetQuotaServiceType`: `NodePort`, `LoadBalancer`, or `""` for types quota does not price.
pub fn quota_service_type(service_type: Option<&str>) -> &'static str {
    match service_type {
        Some("NodePort") => "NodePort",
        Some("LoadBalancer") => "LoadBalancer",
        _ => "",
    }
}

/// The status a sync writes, or `None` when the stored one is current (`syncResourceQuota`):
/// `status.hard` is `spec.hard`; `status.used` is the recalculated usage of the resources the
/// evaluators measure (`list` gives an evaluator's objects in the quota's namespace), the old
/// usage of the others (kept where their recount failed), masked to `spec.hard`. Also the errors
/// of the recounts that failed.
pub fn next_status<L>(
    quota: &Value,
    evaluators: &[Evaluator],
    list: L,
    now: jiff::Timestamp,
) -> (Option<Value>, Vec<String>)
where
    L: FnMut(&Evaluator) -> Result<Vec<std::sync::Arc<Value>>, String>,
{
    let hard = hard(quota);
    let old_hard = status_hard(quota);
    let old_used = status_used(quota);
    let limits_dirty = !q::equals(&hard, &old_hard.clone().unwrap_or_default());
    let mut dirty = limits_dirty || old_hard.is_none() || old_used.is_none();
    let (usage, errors) = calculate_usage(&hard, &quota_scopes(quota), evaluators, list, now);
    let mut used = old_used.clone().unwrap_or_default();
    used.extend(usage);
    let used = q::mask(&used, hard.keys().map(String::as_str));
    dirty |= !q::equals(&used, &old_used.unwrap_or_default());
    let status = dirty.then(|| json!({"hard": q::to_json(&hard), "used": q::to_json(&used)}));
    (status, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::UNIX_EPOCH
    }

    fn pod(cpu: &str) -> Arc<Value> {
        Arc::new(json!({"spec": {"containers": [{"name": "a",
            "resources": {"requests": {"cpu": cpu}}}]}}))
    }

    #[test]
    fn a_new_quota_gets_hard_and_the_namespaces_usage() {
        let quota =
            json!({"spec": {"hard": {"pods": "5", "requests.cpu": "1000m", "secrets": "3"}}});
        let evaluators = Evaluator::registry();
        assert_eq!(priority(&quota, &evaluators), Priority::MissingUsage);
        let (status, errors) = next_status(
            &quota,
            &evaluators,
            |e| {
                Ok(match e.resource() {
                    "pods" => vec![pod("100m"), pod("250m")],
                    _ => Vec::new(),
                })
            },
            now(),
        );
        assert!(errors.is_empty());
        assert_eq!(
            status,
            Some(
                json!({"hard": {"pods": "5", "requests.cpu": "1", "secrets": "3"},
                "used": {"pods": "2", "requests.cpu": "350m", "secrets": "0"}})
            )
        );
    }

    #[test]
    fn an_up_to_date_quota_is_not_written_and_failed_recounts_keep_old_usage() {
        let quota = json!({"spec": {"hard": {"pods": "5", "services": "2"}},
            "status": {"hard": {"pods": "5", "services": "2"}, "used": {"pods": "1", "services": "1"}}});
        let evaluators = Evaluator::registry();
        assert_eq!(priority(&quota, &evaluators), Priority::Normal);
        let (status, errors) = next_status(
            &quota,
            &evaluators,
            |e| match e.resource() {
                "pods" => Ok(vec![pod("1")]),
                "services" => Err("boom".into()),
                _ => Ok(Vec::new()),
            },
            now(),
        );
        assert_eq!(status, None);
        assert_eq!(errors, ["boom"]);
        // A deleted pod lowers the usage.
        let (status, _) = next_status(&quota, &evaluators, |_| Ok(Vec::new()), now());
        assert_eq!(
            status.map(|s| s["used"].clone()),
            Some(json!({"pods": "0", "services": "0"}))
        );
    }

    #[test]
    fn only_spec_changes_requeue_and_replenishment_needs_a_tracked_resource() {
        let a = json!({"spec": {"hard": {"pods": "1"}}, "status": {"hard": {"pods": "1"}}});
        let mut b = a.clone();
        b["status"]["used"] = json!({"pods": "1"});
        assert!(!spec_hard_changed(&a, &b));
        b["spec"]["hard"]["pods"] = json!("2");
        assert!(spec_hard_changed(&a, &b));
        assert!(tracks(&a, &Evaluator::for_resource("", "pods")));
        assert!(!tracks(&a, &Evaluator::for_resource("", "services")));
        let missing =
            json!({"spec": {"hard": {"pods": "1"}}, "status": {"hard": {"pods": "1"}, "used": {}}});
        assert_eq!(
            priority(&missing, &Evaluator::registry()),
            Priority::MissingUsage
        );
    }

    #[test]
    fn pods_stop_counting_when_terminal_or_past_their_grace_period() {
        let at: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap_or(now());
        let later = at + jiff::SignedDuration::from_secs(31);
        assert!(pod_counts(Some("Running"), None, None, later));
        assert!(!pod_counts(Some("Succeeded"), None, None, later));
        assert!(pod_counts(Some("Running"), Some(at), Some(60), later));
        assert!(!pod_counts(Some("Running"), Some(at), Some(30), later));
        assert_eq!(quota_service_type(Some("ClusterIP")), "");
        assert_eq!(quota_service_type(Some("NodePort")), "NodePort");
    }
}
