//! The Job controller's decisions as values (upstream `job_controller.go`, `backoff_utils.go`,
//! `pod_failure_policy.go`): the Job's conditions and settings, which pods count as failed, what
//! a pod failure policy says about a pod, when a pod finished, how long pod creation backs off,
//! how many pods a Job wants, and the pod a Job creates. Indexed Jobs' decisions are in
//! [`indexed`](super::indexed), the counting of finished pods in [`counting`](super::counting).
//!
//! Nothing here does I/O or reads a clock: `now` is always an argument.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobCondition, PodFailurePolicy};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::cached_pod::{CachedContainerStatus, CachedPod, CachedPodStatus};
use crate::pod_util::phase;

/// The finalizer that keeps a Job's finished pod until the Job counted it.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Annotation (and, `PodIndexLabel`, label) carrying an Indexed Job pod's index.
pub const COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// Annotation: counted failures of the pod's index before this pod (`backoffLimitPerIndex`).
pub const INDEX_FAILURE_COUNT_ANNOTATION: &str = "batch.kubernetes.io/job-index-failure-count";
/// Annotation: failures of the pod's index that a pod failure policy ignored.
pub const INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";
/// The environment variable an Indexed Job's containers read their index from.
pub const JOB_COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// `spec.managedBy` of Jobs this controller manages.
pub const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";

/// First pod-failure back-off (`DefaultJobPodFailureBackOff`, 10 s).
pub const DEFAULT_POD_FAILURE_BACKOFF: SignedDuration = SignedDuration::from_secs(10);
/// Longest pod-failure back-off (`MaxJobPodFailureBackOff`, 10 min in 1.33).
pub const MAX_POD_FAILURE_BACKOFF: SignedDuration = SignedDuration::from_secs(600);
/// Most pods counted per status write (`MaxUncountedPods`, keeps the UID lists under ~20 KB).
pub const MAX_UNCOUNTED_PODS: usize = 500;
/// Most pods created or deleted in one sync (`MaxPodCreateDeletePerSync`).
pub const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;
/// Longest generated-name prefix (63 minus the 5 random characters).
const MAX_GENERATED_NAME_PREFIX: usize = 58;

// ---- the Job

/// The condition of `type_` (any status).
pub fn find_condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn condition_true(job: &Job, type_: &str) -> bool {
    find_condition(job, type_).is_some_and(|c| c.status == "True")
}

/// `Complete` or `Failed` is True (`IsJobFinished`): the type of the terminal condition.
pub fn finished(job: &Job) -> Option<&'static str> {
    ["Complete", "Failed"]
        .into_iter()
        .find(|t| condition_true(job, t))
}

/// A condition stamped `now`.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: status.into(),
        reason: (!reason.is_empty()).then(|| reason.into()),
        message: (!message.is_empty()).then(|| message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Set the condition of `type_` to `status` (`ensureJobConditionStatus`): replaced when status,
/// reason or message differ, added when missing unless `False`. Returns whether anything changed.
pub fn ensure_condition(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let same = c.status == status
            && c.reason.as_deref().unwrap_or("") == reason
            && c.message.as_deref().unwrap_or("") == message;
        if !same {
            *c = new_condition(type_, status, reason, message, now);
        }
        return !same;
    }
    if status != "False" {
        conditions.push(new_condition(type_, status, reason, message, now));
        return true;
    }
    false
}

/// `completionMode: Indexed`.
pub fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// `spec.suspend`.
pub fn is_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

/// `spec.completions` (None: the "work queue" kind, done at the first success).
pub fn completions(job: &Job) -> Option<i32> {
    job.spec.as_ref().and_then(|s| s.completions)
}

/// `spec.backoffLimit` (defaulted to 6 by the apiserver).
pub fn backoff_limit(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.backoff_limit).unwrap_or(6)
}

/// `spec.backoffLimitPerIndex` on an Indexed Job.
pub fn backoff_limit_per_index(job: &Job) -> Option<i32> {
    if !is_indexed(job) {
        return None;
    }
    job.spec.as_ref().and_then(|s| s.backoff_limit_per_index)
}

pub(super) fn pod_failure_policy(job: &Job) -> Option<&PodFailurePolicy> {
    job.spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
}

/// Replacement pods wait for the old ones to be fully `Failed` (`onlyReplaceFailedPods`).
pub fn only_replace_failed_pods(job: &Job) -> bool {
    let spec = job.spec.as_ref();
    spec.and_then(|s| s.pod_replacement_policy.as_deref()) == Some("Failed")
        || pod_failure_policy(job).is_some()
}

/// `spec.managedBy` names another controller: this one leaves the Job alone.
pub fn managed_elsewhere(job: &Job) -> bool {
    job.spec
        .as_ref()
        .and_then(|s| s.managed_by.as_deref())
        .is_some_and(|m| m != JOB_CONTROLLER_NAME)
}

// ---- pods

/// The pod carries [`JOB_TRACKING_FINALIZER`].
pub fn has_tracking_finalizer(pod: &CachedPod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == JOB_TRACKING_FINALIZER)
}

pub(super) fn uid(pod: &CachedPod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

pub(super) fn annotation<'a>(pod: &'a CachedPod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The pod's completion index (`getCompletionIndex`), if it has a valid one.
pub fn completion_index(pod: &CachedPod) -> Option<i32> {
    annotation(pod, COMPLETION_INDEX_ANNOTATION)
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|i| *i >= 0)
}

/// The index is valid for a Job of `completions`.
pub(super) fn valid_index(pod: &CachedPod, completions: i32) -> Option<i32> {
    completion_index(pod).filter(|i| *i < completions)
}

/// The pod counts as failed (`isPodFailed`): `Failed`, or (unless only failed pods are
/// replaced) deleted before it succeeded.
pub fn is_pod_failed(pod: &CachedPod, job: &Job) -> bool {
    if phase(pod) == "Failed" {
        return true;
    }
    if only_replace_failed_pods(job) {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase(pod) != "Succeeded"
}

/// What a pod failure policy makes of a failed pod (`matchPodFailurePolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyMatch {
    /// `FailJob`: the Job fails with this message.
    pub fail_job: Option<String>,
    /// The failure counts towards the back-off limits (false only for `Ignore`).
    pub count_failed: bool,
    /// The action of the matching rule.
    pub action: Option<String>,
}

impl PolicyMatch {
    fn no_rule() -> Self {
        Self {
            fail_job: None,
            count_failed: true,
            action: None,
        }
    }
}

fn exit_code_rule_matches(
    statuses: &[CachedContainerStatus],
    container: Option<&str>,
    operator: &str,
    values: &[i32],
) -> Option<(String, i32)> {
    statuses.iter().find_map(|cs| {
        if container.is_some_and(|n| n != cs.name) {
            return None;
        }
        let code = cs.state.as_ref()?.terminated.as_ref()?.exit_code;
        let hit = code != 0
            && match operator {
                "In" => values.contains(&code),
                "NotIn" => !values.contains(&code),
                _ => false,
            };
        hit.then(|| (cs.name.clone(), code))
    })
}

/// Match `pod` against the policy's rules, first match wins.
pub fn match_pod_failure_policy(policy: Option<&PodFailurePolicy>, pod: &CachedPod) -> PolicyMatch {
    let Some(policy) = policy else {
        return PolicyMatch::no_rule();
    };
    let status = pod.status.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (i, rule) in policy.rules.iter().enumerate() {
        let what = if let Some(req) = &rule.on_exit_codes {
            let find = |list: &Option<Vec<CachedContainerStatus>>| {
                exit_code_rule_matches(
                    list.as_deref().unwrap_or_default(),
                    req.container_name.as_deref(),
                    &req.operator,
                    &req.values,
                )
            };
            match find(&status.container_statuses).or_else(|| find(&status.init_container_statuses)) {
                Some((container, code)) => format!(
                    "Container {container} for pod {ns}/{name} failed with exit code {code} matching {} rule at index {i}",
                    rule.action
                ),
                None => continue,
            }
        } else if let Some(patterns) = &rule.on_pod_conditions {
            let hit = status.conditions.iter().flatten().find(|c| {
                patterns
                    .iter()
                    .any(|p| p.type_ == c.type_ && p.status == c.status)
            });
            match hit {
                Some(c) => format!(
                    "Pod {ns}/{name} has condition {} matching {} rule at index {i}",
                    c.type_, rule.action
                ),
                None => continue,
            }
        } else {
            continue;
        };
        let action = Some(rule.action.clone());
        return match rule.action.as_str() {
            "Ignore" => PolicyMatch {
                fail_job: None,
                count_failed: false,
                action,
            },
            "FailJob" => PolicyMatch {
                fail_job: Some(what),
                count_failed: true,
                action,
            },
            // Count, FailIndex.
            _ => PolicyMatch {
                fail_job: None,
                count_failed: true,
                action,
            },
        };
    }
    PolicyMatch::no_rule()
}

/// The first `FailJob` message among the failed pods (`getFailJobMessage`).
pub fn fail_job_message(job: &Job, pods: &[Arc<CachedPod>]) -> Option<String> {
    let policy = pod_failure_policy(job)?;
    pods.iter()
        .filter(|p| is_pod_failed(p, job))
        .find_map(|p| match_pod_failure_policy(Some(policy), p).fail_job)
}

/// When the pod finished (`getFinishedTime`): its containers' last exit, else its `Ready=False`
/// transition, else its deletion (minus the grace period), else its creation.
pub fn finished_time(pod: &CachedPod) -> Timestamp {
    let status = pod.status.as_ref();
    let containers = status.and_then(|s| s.container_statuses.as_deref());
    if let Some(cs) = containers.filter(|cs| !cs.is_empty()) {
        let times: Option<Vec<Timestamp>> = cs
            .iter()
            .map(|c| {
                c.state
                    .as_ref()?
                    .terminated
                    .as_ref()?
                    .finished_at
                    .as_ref()
                    .map(|t| t.0)
            })
            .collect();
        if let Some(latest) = times.and_then(|t| t.into_iter().max()) {
            return latest;
        }
    }
    let ready_false = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .filter(|c| c.status == "False")
        .and_then(|c| c.last_transition_time.as_ref());
    if let Some(t) = ready_false {
        return t.0;
    }
    if let Some(d) = &pod.metadata.deletion_timestamp {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return d
            .0
            .checked_sub(SignedDuration::from_secs(grace))
            .unwrap_or(d.0);
    }
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Container restarts of running or pending pods reached the back-off limit
/// (`pastBackoffLimitOnFailure`, `restartPolicy: OnFailure` only).
pub fn past_backoff_limit_on_failure(job: &Job, pods: &[Arc<CachedPod>]) -> bool {
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.restart_policy.as_deref());
    if policy != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = pods
        .iter()
        .filter(|p| matches!(phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .map(|s: &CachedPodStatus| {
            s.init_container_statuses
                .iter()
                .chain(s.container_statuses.iter())
                .flatten()
                .map(|c| c.restart_count)
                .sum::<i32>()
        })
        .sum();
    let limit = backoff_limit(job);
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}

/// How long until `activeDeadlineSeconds` passes (`None`: no deadline or suspended); zero or
/// negative once past it.
pub fn until_active_deadline(job: &Job, now: Timestamp) -> Option<SignedDuration> {
    let deadline = job.spec.as_ref()?.active_deadline_seconds?;
    let start = job.status.as_ref()?.start_time.as_ref()?.0;
    if is_suspended(job) {
        return None;
    }
    Some(SignedDuration::from_secs(deadline) - now.duration_since(start))
}

// ---- pod-failure back-off

/// Failures since the last success and when the last one happened (`backoffRecord`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    /// Consecutive failures after the last success.
    pub failures_after_last_success: i32,
    /// The finish time of the latest of them.
    pub last_failure_time: Option<Timestamp>,
}

/// The record after newly finished pods (`newBackoffRecord`).
pub fn new_backoff_record(
    old: BackoffRecord,
    succeeded: &[&CachedPod],
    failed: &[&CachedPod],
) -> BackoffRecord {
    let mut failed_times: Vec<Timestamp> = failed.iter().map(|p| finished_time(p)).collect();
    failed_times.sort_unstable();
    let last_success = succeeded.iter().map(|p| finished_time(p)).max();
    match last_success {
        None if failed_times.is_empty() => old,
        None => BackoffRecord {
            failures_after_last_success: old.failures_after_last_success
                + i32::try_from(failed_times.len()).unwrap_or(i32::MAX),
            last_failure_time: failed_times.last().copied(),
        },
        Some(success) => {
            let after: Vec<&Timestamp> = failed_times.iter().filter(|t| **t > success).collect();
            BackoffRecord {
                failures_after_last_success: i32::try_from(after.len()).unwrap_or(i32::MAX),
                last_failure_time: after.last().map(|t| **t),
            }
        }
    }
}

/// The back-off for `failures` consecutive failures: 10 s doubling, capped at 10 min.
pub fn backoff_for(failures: i32) -> SignedDuration {
    let mut d = DEFAULT_POD_FAILURE_BACKOFF;
    for _ in 1..failures {
        d *= 2;
        if d >= MAX_POD_FAILURE_BACKOFF {
            return MAX_POD_FAILURE_BACKOFF;
        }
    }
    d
}

/// How long pod creation still waits (`getRemainingTimeForFailuresCount`); zero when it may go.
pub fn remaining_backoff(
    failures: i32,
    last_failure: Option<Timestamp>,
    now: Timestamp,
) -> SignedDuration {
    let Some(last) = last_failure.filter(|_| failures > 0) else {
        return SignedDuration::ZERO;
    };
    let backoff = backoff_for(failures);
    let elapsed = now.duration_since(last);
    if backoff < elapsed {
        SignedDuration::ZERO
    } else {
        backoff - elapsed
    }
}

// ---- how many pods

/// How many pods should be active (`manageJob`'s `wantActive`).
pub fn want_active(job: &Job, succeeded: i32, active: i32) -> i32 {
    let parallelism = job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
    match completions(job) {
        None if succeeded > 0 => active,
        None => parallelism,
        Some(c) => (c - succeeded).min(parallelism).max(0),
    }
}

// ---- the pod a Job creates

/// `<job>-` or, for an index, `<job>-<index>-`, the job name cut so the prefix stays short enough
/// (`podGenerateNameWithIndex`).
pub fn generate_name(job_name: &str, index: Option<i32>) -> String {
    match index {
        None => crate::replication::manage::generate_name_prefix(job_name),
        Some(i) => {
            let suffix = format!("-{i}-");
            let keep = MAX_GENERATED_NAME_PREFIX.saturating_sub(suffix.len());
            let base: String = job_name.chars().take(keep).collect();
            format!("{base}{suffix}")
        }
    }
}

/// The Job's pod for `index` (`None` for NonIndexed): the template with the tracking finalizer,
/// the controller reference, and for an index its annotation, label, host name, the
/// `JOB_COMPLETION_INDEX` variable and (per-index back-off) its failure counts.
pub fn pod_for_job(
    job: &Job,
    owner: OwnerReference,
    index: Option<i32>,
    failure_counts: Option<(i32, i32)>,
) -> Pod {
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    let mut finalizers = tmeta.finalizers.unwrap_or_default();
    if !finalizers.iter().any(|f| f == JOB_TRACKING_FINALIZER) {
        finalizers.push(JOB_TRACKING_FINALIZER.into());
    }
    let mut spec = template.spec.unwrap_or_default();
    if let Some(i) = index {
        annotations.insert(COMPLETION_INDEX_ANNOTATION.into(), i.to_string());
        labels.insert(COMPLETION_INDEX_ANNOTATION.into(), i.to_string());
        if let Some((counted, ignored)) = failure_counts {
            annotations.insert(INDEX_FAILURE_COUNT_ANNOTATION.into(), counted.to_string());
            if ignored > 0 {
                annotations.insert(
                    INDEX_IGNORED_FAILURE_COUNT_ANNOTATION.into(),
                    ignored.to_string(),
                );
            }
        }
        spec.hostname = Some(format!("{name}-{i}"));
        let env = EnvVar {
            name: JOB_COMPLETION_INDEX_ENV.into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: None,
                    field_path: format!("metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"),
                }),
                ..Default::default()
            }),
        };
        let containers = spec
            .init_containers
            .iter_mut()
            .flatten()
            .chain(spec.containers.iter_mut());
        for c in containers {
            let vars = c.env.get_or_insert_with(Vec::new);
            if !vars.iter().any(|v| v.name == JOB_COMPLETION_INDEX_ENV) {
                vars.push(env.clone());
            }
        }
    }
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name(name, index)),
            namespace: job.metadata.namespace.clone(),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            finalizers: Some(finalizers),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
