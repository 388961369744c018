//! Replica status (informer.md §6.8–§6.9): what the status should be, and whether writing it is needed.
//!
//! `calculate_status` starts from the current status and recounts `replicas`, `fullyLabeledReplicas`,
//! `readyReplicas` and `availableReplicas` (honouring `minReadySeconds`) over the claimed active pods,
//! and maintains the `ReplicaFailure` condition from the manage error. `needs_update` implements the
//! "write only when changed" rule: counts, conditions and `observedGeneration == generation`.

use std::sync::Arc;

use api::labels::matches_set;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cached_pod::CachedPod;
use crate::pod_util::{is_pod_available, is_pod_ready};

/// Condition type set when creating or deleting pods failed.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// The status the owner should have (`calculateStatus`). `manage_err` is the text of the error returned
/// by manageReplicas, if any.
pub fn calculate_status(
    rs: &ReplicaSet,
    claimed: &[Arc<CachedPod>],
    manage_err: Option<&str>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let mut status = rs.status.clone().unwrap_or_default();
    let spec = rs.spec.as_ref();
    let template_labels = spec
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let desired = spec.and_then(|s| s.replicas).unwrap_or(1);

    let mut fully_labeled = 0;
    let mut ready = 0;
    let mut available = 0;
    for pod in claimed {
        // fullyLabeledReplicas: `SelectorFromSet(template labels).Matches(pod labels)`.
        if template_labels.is_none_or(|t| matches_set(t, pod.metadata.labels.as_ref())) {
            fully_labeled += 1;
        }
        if is_pod_ready(pod) {
            ready += 1;
            if is_pod_available(pod, min_ready, now) {
                available += 1;
            }
        }
    }
    let count = i32::try_from(claimed.len()).unwrap_or(i32::MAX);
    status.replicas = count;
    status.fully_labeled_replicas = Some(fully_labeled);
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);

    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let existing = conditions.iter().position(|c| c.type_ == REPLICA_FAILURE);
    match (manage_err, existing) {
        (Some(msg), None) => {
            let reason = match count.cmp(&desired) {
                std::cmp::Ordering::Less => "FailedCreate",
                std::cmp::Ordering::Greater => "FailedDelete",
                std::cmp::Ordering::Equal => "",
            };
            conditions.push(ReplicaSetCondition {
                type_: REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(msg.into()),
                last_transition_time: Some(Time(now)),
            });
        }
        (None, Some(i)) => {
            conditions.remove(i);
        }
        // Error with the condition already present: unchanged (message not refreshed).
        _ => {}
    }
    if conditions.is_empty() {
        status.conditions = None;
    }
    status
}

fn normalized_conditions(s: &ReplicaSetStatus) -> &[ReplicaSetCondition] {
    s.conditions.as_deref().unwrap_or(&[])
}

/// Whether `new` differs from what the server holds (`updateReplicaSetStatus` no-op rule).
pub fn needs_update(rs: &ReplicaSet, new: &ReplicaSetStatus) -> bool {
    let default = ReplicaSetStatus::default();
    let cur = rs.status.as_ref().unwrap_or(&default);
    let z = |v: Option<i32>| v.unwrap_or(0);
    let generation = rs.metadata.generation.unwrap_or(0);
    !(cur.replicas == new.replicas
        && z(cur.fully_labeled_replicas) == z(new.fully_labeled_replicas)
        && z(cur.ready_replicas) == z(new.ready_replicas)
        && z(cur.available_replicas) == z(new.available_replicas)
        && cur.terminating_replicas == new.terminating_replicas
        && cur.observed_generation.unwrap_or(0) == generation
        && normalized_conditions(cur) == normalized_conditions(new))
}

/// The status to write: `new` stamped with the generation of the object the sync acted on.
pub fn with_observed_generation(rs: &ReplicaSet, new: &ReplicaSetStatus) -> ReplicaSetStatus {
    let mut s = new.clone();
    s.observed_generation = rs.metadata.generation;
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_util::testing::*;
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                generation: Some(2),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: Some(min_ready),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(
                            [
                                ("app".to_string(), "web".to_string()),
                                ("v".to_string(), "1".to_string()),
                            ]
                            .into(),
                        ),
                        ..Default::default()
                    }),
                    spec: None,
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn counts_fully_labeled_ready_and_available() {
        let now = ts(1000);
        let pods: Vec<Arc<CachedPod>> = vec![
            Arc::new(ready_at(
                with_labels(pod("a"), &[("app", "web"), ("v", "1")]),
                Some(ts(900)),
            )),
            Arc::new(ready_at(
                with_labels(pod("b"), &[("app", "web")]),
                Some(ts(995)),
            )),
            Arc::new(with_labels(
                pod("c"),
                &[("app", "web"), ("v", "1"), ("x", "y")],
            )),
        ];
        let s = calculate_status(&rs(3, 10), &pods, None, now);
        assert_eq!(s.replicas, 3);
        assert_eq!(s.fully_labeled_replicas, Some(2));
        assert_eq!(s.ready_replicas, Some(2));
        assert_eq!(
            s.available_replicas,
            Some(1),
            "b is ready for 5 s < minReadySeconds 10"
        );
        assert_eq!(s.conditions, None);
    }

    #[test]
    fn replica_failure_condition_added_kept_and_removed() {
        let now = ts(50);
        let owner = rs(3, 0);
        let s = calculate_status(&owner, &[], Some("quota exceeded"), now);
        let conds = s.conditions.clone().unwrap_or_default();
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].reason.as_deref(), Some("FailedCreate"));
        assert_eq!(conds[0].message.as_deref(), Some("quota exceeded"));

        // A second error keeps the original message and time.
        let mut owner2 = owner.clone();
        owner2.status = Some(s.clone());
        let s2 = calculate_status(&owner2, &[], Some("other"), ts(60));
        assert_eq!(s2.conditions, s.conditions);

        // Success removes it.
        let mut owner3 = owner.clone();
        owner3.status = Some(s2);
        assert_eq!(
            calculate_status(&owner3, &[], None, ts(70)).conditions,
            None
        );
    }

    #[test]
    fn failed_delete_reason_when_over_replicas() {
        let pods: Vec<Arc<CachedPod>> = vec![Arc::new(pod("a")), Arc::new(pod("b"))];
        let s = calculate_status(&rs(1, 0), &pods, Some("boom"), ts(0));
        let c = s.conditions.unwrap_or_default();
        assert_eq!(c[0].reason.as_deref(), Some("FailedDelete"));
    }

    #[test]
    fn write_only_when_changed() {
        let mut owner = rs(0, 0);
        let s = calculate_status(&owner, &[], None, ts(0));
        assert!(
            needs_update(&owner, &s),
            "observedGeneration 0 != generation 2"
        );
        owner.status = Some(with_observed_generation(&owner, &s));
        let again = calculate_status(&owner, &[], None, ts(1));
        assert!(!needs_update(&owner, &again));
        owner.metadata.generation = Some(3);
        assert!(needs_update(&owner, &again), "spec change bumps generation");
    }
}
