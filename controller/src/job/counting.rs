//! Counting finished pods (the pure half of `trackJobStatusAndRemoveFinalizers`): which pods
//! are new, which get counted and unfinalized now, and moving uncounted UIDs into the counters.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;

use super::decide::*;
use super::indexes::Intervals;
use crate::cached_pod::CachedPod;
use crate::pod_util::{is_pod_active, phase};

// ---- counting finished pods

/// What one sync counts (`trackJobStatusAndRemoveFinalizers`' loop).
#[derive(Debug, Default, Clone)]
pub struct CountPlan {
    /// Pods whose finalizer is to be removed, in order.
    pub unfinalize: Vec<Arc<CachedPod>>,
    /// UIDs to add to `uncountedTerminatedPods.succeeded`.
    pub succeeded: Vec<String>,
    /// UIDs to add to `uncountedTerminatedPods.failed`.
    pub failed: Vec<String>,
    /// Indexes newly succeeded (Indexed Jobs count indexes, not UIDs).
    pub succeeded_indexes: Vec<i32>,
    /// Stopped at [`MAX_UNCOUNTED_PODS`]: the rest waits for the next sync.
    pub capped: bool,
}

/// The Job as a counting sync sees it.
pub struct CountInput<'a> {
    /// The Job (with this sync's status so far).
    pub job: &'a Job,
    /// Its pods.
    pub pods: &'a [Arc<CachedPod>],
    /// UIDs already in `uncountedTerminatedPods`.
    pub uncounted_succeeded: &'a BTreeSet<String>,
    /// Ditto, failed.
    pub uncounted_failed: &'a BTreeSet<String>,
    /// Pods whose finalizer removal is in flight.
    pub expected_rm: &'a BTreeSet<String>,
    /// The Job is finishing (not by success): every pod left counts as failed.
    pub failing: bool,
    /// The Job is finishing (any way): every finalizer may go.
    pub finishing: bool,
    /// The indexes recorded before this sync.
    pub prev_succeeded: &'a Intervals,
    /// Indexes whose last failed pod keeps its finalizer for now.
    pub delayed: &'a BTreeMap<i32, Arc<CachedPod>>,
}

/// Which pods get counted and unfinalized now.
pub fn plan_counting(input: &CountInput<'_>) -> CountPlan {
    let job = input.job;
    let indexed = is_indexed(job);
    let completions = completions(job).unwrap_or(0);
    let policy = pod_failure_policy(job);
    let mut pods: Vec<Arc<CachedPod>> = input.pods.to_vec();
    if indexed {
        pods.sort_by_key(|p| completion_index(p).unwrap_or(-1));
    }
    let mut plan = CountPlan::default();
    for pod in pods {
        let pod_uid = uid(&pod).to_string();
        if !has_tracking_finalizer(&pod) || input.expected_rm.contains(&pod_uid) {
            continue;
        }
        let failed = is_pod_failed(&pod, job);
        let removable = job.metadata.deletion_timestamp.is_some()
            || input.finishing
            || phase(&pod) == "Succeeded"
            || (failed
                && !completion_index(&pod).is_some_and(|ix| {
                    input
                        .delayed
                        .get(&ix)
                        .is_some_and(|d| d.metadata.uid == pod.metadata.uid)
                }));
        if !removable {
            continue;
        }
        plan.unfinalize.push(pod.clone());
        if phase(&pod) == "Succeeded" && !input.uncounted_failed.contains(&pod_uid) {
            if indexed {
                if let Some(ix) = valid_index(&pod, completions) {
                    if !input.prev_succeeded.has(ix) {
                        plan.succeeded_indexes.push(ix);
                    }
                }
            } else if !input.uncounted_succeeded.contains(&pod_uid) {
                plan.succeeded.push(pod_uid);
            }
        } else if failed || input.failing {
            let index_ok = !indexed || valid_index(&pod, completions).is_some();
            if !input.uncounted_failed.contains(&pod_uid)
                && index_ok
                && match_pod_failure_policy(policy, &pod).count_failed
            {
                plan.failed.push(pod_uid);
            }
        }
        if plan.succeeded_indexes.len() + plan.succeeded.len() + plan.failed.len()
            >= MAX_UNCOUNTED_PODS
        {
            plan.capped = true;
            break;
        }
    }
    plan
}

/// Newly finished pods not yet in the status (`getNewFinishedPods`): (succeeded, failed).
pub fn new_finished_pods<'a>(
    job: &Job,
    pods: &'a [Arc<CachedPod>],
    uncounted_succeeded: &BTreeSet<String>,
    uncounted_failed: &BTreeSet<String>,
    expected_rm: &BTreeSet<String>,
) -> (Vec<&'a CachedPod>, Vec<&'a CachedPod>) {
    let completions = completions(job).unwrap_or(0);
    let valid = |p: &CachedPod, uncounted: &BTreeSet<String>| {
        has_tracking_finalizer(p)
            && !uncounted.contains(uid(p))
            && !expected_rm.contains(uid(p))
            && (!is_indexed(job) || valid_index(p, completions).is_some())
    };
    let succeeded = pods
        .iter()
        .filter(|p| valid(p, uncounted_succeeded) && phase(p) == "Succeeded")
        .map(|p| p.as_ref())
        .collect();
    let failed = pods
        .iter()
        .filter(|p| valid(p, uncounted_failed) && is_pod_failed(p, job))
        .map(|p| p.as_ref())
        .collect();
    (succeeded, failed)
}

/// How many of `failed` count under the pod failure policy (`nonIgnoredFailedPodsCount`).
pub fn counted_failures(job: &Job, failed: &[&CachedPod]) -> i32 {
    let policy = pod_failure_policy(job);
    let n = failed
        .iter()
        .filter(|p| match_pod_failure_policy(policy, p).count_failed)
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Move the uncounted UIDs whose pods no longer hold the finalizer into the counters
/// (`cleanUncountedPodsWithoutFinalizers`). Returns whether anything moved.
pub fn clean_uncounted(job: &mut Job, with_finalizer: &BTreeSet<String>) -> bool {
    let status = job.status.get_or_insert_with(Default::default);
    let uncounted = status
        .uncounted_terminated_pods
        .get_or_insert_with(Default::default);
    let mut changed = false;
    for (list, counter) in [
        (&mut uncounted.succeeded, &mut status.succeeded),
        (&mut uncounted.failed, &mut status.failed),
    ] {
        let before = list.as_ref().map_or(0, Vec::len);
        let kept: Vec<String> = list
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|u| with_finalizer.contains(u))
            .collect();
        let moved = before - kept.len();
        if moved > 0 {
            changed = true;
            *counter = Some(counter.unwrap_or(0) + i32::try_from(moved).unwrap_or(i32::MAX));
        }
        *list = (!kept.is_empty()).then_some(kept);
    }
    changed
}

/// Active pods of the Job that are ready (for `status.ready`).
pub fn count_ready(active: &[Arc<CachedPod>]) -> i32 {
    let n = active
        .iter()
        .filter(|p| crate::pod_util::is_pod_ready(p))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Terminating pods: being deleted, not yet terminal (`CountTerminatingPods`).
pub fn count_terminating(pods: &[Arc<CachedPod>]) -> i32 {
    let n = pods
        .iter()
        .filter(|p| crate::pod_util::is_pod_terminating(p))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The active pods of a Job (`FilterActivePods`).
pub fn active_pods(pods: &[Arc<CachedPod>]) -> Vec<Arc<CachedPod>> {
    pods.iter().filter(|p| is_pod_active(p)).cloned().collect()
}

/// UIDs (as a set) of a status list.
pub fn uid_set(list: Option<&Vec<String>>) -> BTreeSet<String> {
    list.into_iter().flatten().cloned().collect()
}
