//! Indexed Jobs' decisions (upstream `indexed_job_utils.go`, `success_policy.go`): which
//! indexes are done, failed, pending or duplicated, per-index back-off and failure counts, and the
//! success policy.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, SuccessPolicy};

use super::decide::*;
use super::indexes::Intervals;
use crate::cached_pod::CachedPod;
use crate::pod_util::phase;

/// The indexes of the active pods (valid ones only).
pub fn active_indexes(pods: &[Arc<CachedPod>], completions: i32) -> BTreeSet<i32> {
    pods.iter()
        .filter_map(|p| valid_index(p, completions))
        .collect()
}

/// The lowest `count` indexes that are neither done, failed, nor held by a pod in `busy`
/// (`firstPendingIndexes`). It hops over whole intervals of done and failed indexes, as
/// upstream walks them, so its cost is in the intervals, the busy pods and `count`, never in
/// `completions`.
pub fn first_pending_indexes(
    count: usize,
    completions: i32,
    succeeded: &Intervals,
    failed: Option<&Intervals>,
    busy: &BTreeSet<i32>,
) -> Vec<i32> {
    let mut pending = Vec::new();
    let mut ix = 0;
    while pending.len() < count && ix < completions {
        // Past every done or failed interval holding `ix`, until neither does.
        let outside = failed.map_or_else(
            || succeeded.next_outside(ix),
            |f| f.next_outside(succeeded.next_outside(ix)),
        );
        if outside != ix {
            ix = outside;
            continue;
        }
        if !busy.contains(&ix) {
            pending.push(ix);
        }
        ix = ix.saturating_add(1);
    }
    pending
}

/// Active pods of an Indexed Job that must go: those with no valid index, and all but one pod per
/// index (`appendDuplicatedIndexPodsForRemoval`, keeping the first as upstream's sort does);
/// returns (to remove, the rest).
pub fn duplicated_index_pods(
    pods: &[Arc<CachedPod>],
    completions: i32,
) -> (Vec<Arc<CachedPod>>, Vec<Arc<CachedPod>>) {
    let mut sorted: Vec<Arc<CachedPod>> = pods.to_vec();
    sorted.sort_by_key(|p| completion_index(p).unwrap_or(-1));
    let mut seen = BTreeSet::new();
    let (mut rm, mut left) = (Vec::new(), Vec::new());
    for p in sorted {
        match valid_index(&p, completions) {
            Some(i) if seen.insert(i) => left.push(p),
            _ => rm.push(p),
        }
    }
    (rm, left)
}

/// Succeeded indexes: the recorded ones (`status.completedIndexes`), and with those of the
/// succeeded pods still holding the finalizer added (`calculateSucceededIndexes`).
pub fn succeeded_indexes(job: &Job, pods: &[Arc<CachedPod>]) -> (Intervals, Intervals) {
    let completions = completions(job).unwrap_or(0);
    let prev = Intervals::parse(
        job.status
            .as_ref()
            .and_then(|s| s.completed_indexes.as_deref())
            .unwrap_or(""),
        completions,
    );
    let new = pods
        .iter()
        .filter(|p| phase(p) == "Succeeded" && has_tracking_finalizer(p))
        .filter_map(|p| valid_index(p, completions));
    let all = prev.with(new);
    (prev, all)
}

fn annotation_count(pod: &CachedPod, key: &str) -> i32 {
    annotation(pod, key)
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|v| *v >= 0)
        .unwrap_or(0)
}

/// The index failure count the pod was created with.
pub fn index_failure_count(pod: &CachedPod) -> i32 {
    annotation_count(pod, INDEX_FAILURE_COUNT_ANNOTATION)
}

fn index_absolute_failure_count(pod: &CachedPod) -> i32 {
    index_failure_count(pod) + annotation_count(pod, INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)
}

/// The pod's failure made its index fail (`isIndexFailed`).
pub fn is_index_failed(job: &Job, pod: &CachedPod) -> bool {
    let Some(limit) = backoff_limit_per_index(job) else {
        return false;
    };
    if !is_pod_failed(pod, job) {
        return false;
    }
    let m = match_pod_failure_policy(pod_failure_policy(job), pod);
    if m.action.as_deref() == Some("FailIndex") {
        return true;
    }
    m.count_failed && index_failure_count(pod) >= limit
}

/// Failed indexes: the recorded ones with those whose last pod just failed them
/// (`calculateFailedIndexes`).
pub fn failed_indexes(
    job: &Job,
    pods: &[Arc<CachedPod>],
    expected_rm: &BTreeSet<String>,
) -> Intervals {
    let completions = completions(job).unwrap_or(0);
    let prev = Intervals::parse(
        job.status
            .as_ref()
            .and_then(|s| s.failed_indexes.as_deref())
            .unwrap_or(""),
        completions,
    );
    let new = pods
        .iter()
        .filter(|p| has_tracking_finalizer(p) && !expected_rm.contains(uid(p)))
        .filter(|p| is_index_failed(job, p))
        .filter_map(|p| valid_index(p, completions));
    prev.with(new)
}

/// Per index still to be retried, its latest failed pod: its finalizer stays until the
/// replacement carries its failure count (`getPodsWithDelayedDeletionPerIndex`).
pub fn pods_with_delayed_deletion(
    job: &Job,
    pods: &[Arc<CachedPod>],
    active: &[Arc<CachedPod>],
    succeeded: &Intervals,
    failed: &Intervals,
    expected_rm: &BTreeSet<String>,
) -> BTreeMap<i32, Arc<CachedPod>> {
    let completions = completions(job).unwrap_or(0);
    let busy = active_indexes(active, completions);
    let mut out: BTreeMap<i32, Arc<CachedPod>> = BTreeMap::new();
    for p in pods {
        if !has_tracking_finalizer(p) || expected_rm.contains(uid(p)) || !is_pod_failed(p, job) {
            continue;
        }
        let Some(ix) = valid_index(p, completions) else {
            continue;
        };
        if succeeded.has(ix) || failed.has(ix) || busy.contains(&ix) {
            continue;
        }
        let replace = match out.get(&ix) {
            None => true,
            Some(last) => {
                index_absolute_failure_count(last) <= index_absolute_failure_count(p)
                    && finished_time(p) >= finished_time(last)
            }
        };
        if replace {
            out.insert(ix, p.clone());
        }
    }
    out
}

/// The failure-count annotations of the pod replacing `last_failed` in its index
/// (`addIndexFailureCountAnnotation`).
pub fn index_failure_annotations(job: &Job, last_failed: Option<&CachedPod>) -> (i32, i32) {
    let Some(pod) = last_failed else {
        return (0, 0);
    };
    let counted = index_failure_count(pod);
    let ignored = annotation_count(pod, INDEX_IGNORED_FAILURE_COUNT_ANNOTATION);
    if match_pod_failure_policy(pod_failure_policy(job), pod).count_failed {
        (counted + 1, ignored)
    } else {
        (counted, ignored + 1)
    }
}

/// The remaining back-off of an index whose last pod failed (`getRemainingTimePerIndex`).
pub fn remaining_backoff_for_index(
    last_failed: Option<&CachedPod>,
    now: Timestamp,
) -> SignedDuration {
    let Some(pod) = last_failed else {
        return SignedDuration::ZERO;
    };
    remaining_backoff(
        index_absolute_failure_count(pod) + 1,
        Some(finished_time(pod)),
        now,
    )
}

/// The success policy's verdict on the succeeded indexes (`matchSuccessPolicy`): the message of
/// the first rule met.
pub fn match_success_policy(
    policy: Option<&SuccessPolicy>,
    completions: i32,
    succeeded: &Intervals,
) -> Option<String> {
    let policy = policy?;
    if succeeded.is_empty() {
        return None;
    }
    for (i, rule) in policy.rules.iter().enumerate() {
        let met = match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(ixs), count) => {
                let want = Intervals::parse(ixs, completions);
                let have = want.count_in(succeeded);
                match count {
                    None => have == want.total() && have > 0,
                    Some(n) => i64::try_from(have).unwrap_or(i64::MAX) >= i64::from(n),
                }
            }
            (None, Some(n)) => i64::try_from(succeeded.total()).unwrap_or(i64::MAX) >= i64::from(n),
            (None, None) => false,
        };
        if met {
            return Some(format!("Matched rules at index {i}"));
        }
    }
    None
}
