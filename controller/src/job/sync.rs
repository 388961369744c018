//! One Job sync (`syncJob`): the context it builds, the finishing decision, the
//! suspend condition, and claiming the Job's pods.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::record::EventType;
use client::{split_meta_namespace_key, Api, Patch};
use jiff::SignedDuration;
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::controller::{owner_ref, to_std, Inner, OWN_WRITE_WAIT};
use super::counting;
use super::decide::{self, BackoffRecord, JOB_TRACKING_FINALIZER};
use super::indexed;
use super::indexes::Intervals;
use crate::cached_pod::CachedPod;
use crate::replication::claim::{decide as claim, ClaimAction, ClaimOwner};
use crate::{Error, Result};

/// Everything one sync knows about its Job (`syncJobCtx`).
pub(super) struct SyncCtx {
    pub(super) key: String,
    pub(super) job: Job,
    pub(super) pods: Vec<Arc<CachedPod>>,
    pub(super) active_pods: Vec<Arc<CachedPod>>,
    pub(super) succeeded: i32,
    pub(super) failed: i32,
    pub(super) ready: i32,
    pub(super) terminating: i32,
    pub(super) uncounted_succeeded: BTreeSet<String>,
    pub(super) uncounted_failed: BTreeSet<String>,
    pub(super) expected_rm: BTreeSet<String>,
    pub(super) finished: Option<JobCondition>,
    pub(super) backoff: BackoffRecord,
    pub(super) prev_succeeded: Intervals,
    pub(super) succeeded_indexes: Intervals,
    pub(super) failed_indexes: Option<Intervals>,
    pub(super) delayed: BTreeMap<i32, Arc<CachedPod>>,
    pub(super) requeue: Option<Duration>,
}

impl SyncCtx {
    pub(super) fn requeue_after(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }
}

impl Inner {
    /// `syncJob`: returns when to look again, if the Job asked for it.
    pub(super) async fn sync(&self, key: &str) -> Result<Option<Duration>> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(None);
        };
        let Some(cached) = self.jobs.namespace(ns).get(name) else {
            self.forget_job(key);
            return Ok(None);
        };
        if decide::managed_elsewhere(&cached) {
            return Ok(None);
        }
        if decide::finished(&cached).is_some() {
            self.backoff.lock().remove(key);
            self.written.lock().remove(key);
            return Ok(None);
        }
        if let Some(left) = self.behind_own_write(key, &cached) {
            // The informer has not yet delivered this controller's last status write: counted
            // failures and conditions would be missing from this view, and a pod created from it
            // would be one too many. The write's update event syncs the Job again (or the wait
            // ends).
            return Ok(Some(left));
        }
        let mut job = (*cached).clone();
        let mode = job.spec.as_ref().and_then(|s| s.completion_mode.as_deref());
        if !matches!(mode, None | Some("NonIndexed") | Some("Indexed")) {
            self.event(
                &job,
                EventType::Warning,
                "UnknownCompletionMode",
                "Skipped Job sync because completion mode is unknown",
            );
            return Ok(None);
        }
        job.status
            .get_or_insert_with(Default::default)
            .uncounted_terminated_pods
            .get_or_insert_with(Default::default);
        // Expectations before listing pods: a pod added after this check waits for the next sync.
        let satisfied = self.expectations.satisfied_expectations(key);
        let pods = self.pods_for_job(&job).await?;
        let mut ctx = self.new_ctx(key, job, pods);
        self.decide_finished(&mut ctx);

        let mut manage_err = None;
        let mut suspend_changed = false;
        let mut active = i32::try_from(ctx.active_pods.len()).unwrap_or(i32::MAX);
        if ctx.finished.is_some() {
            let (deleted_ready, deleted, err) = self.delete_active_pods(&ctx).await;
            if deleted != active || !satisfied {
                // Pods still to go, or not yet in the cache: not finished yet.
                ctx.finished = None;
            }
            active -= deleted;
            ctx.terminating += deleted;
            ctx.ready -= deleted_ready;
            manage_err = err;
        } else {
            let managed = satisfied && ctx.job.metadata.deletion_timestamp.is_none();
            if managed {
                match self.manage_job(&mut ctx).await {
                    Ok(a) => active = a,
                    Err((a, e)) => {
                        active = a;
                        manage_err = Some(e);
                    }
                }
            }
            let complete = match decide::completions(&ctx.job) {
                None => ctx.succeeded > 0 && active == 0,
                Some(c) => ctx.succeeded >= c && active == 0,
            };
            if complete {
                ctx.finished = Some(decide::new_condition(
                    "SuccessCriteriaMet",
                    "True",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    self.now(),
                ));
            } else if managed {
                suspend_changed = self.ensure_suspend_condition(&mut ctx.job);
            }
        }

        let status = ctx.job.status.get_or_insert_with(Default::default);
        let needs_update = suspend_changed
            || status.active.unwrap_or(0) != active
            || status.ready != Some(ctx.ready)
            || status.terminating != Some(ctx.terminating);
        status.active = Some(active);
        status.ready = Some(ctx.ready);
        status.terminating = Some(ctx.terminating);
        self.track_status_and_remove_finalizers(&mut ctx, needs_update)
            .await?;
        match manage_err {
            Some(e) => Err(e),
            None => Ok(ctx.requeue),
        }
    }

    pub(super) fn forget_job(&self, key: &str) {
        self.expectations.delete_expectations(key);
        self.written.lock().remove(key);
        self.finalizer_expectations.lock().remove(key);
        self.backoff.lock().remove(key);
    }

    /// If `cached` is older than this controller's last status write of the Job at `key`, how
    /// much longer to wait for that write ([`OWN_WRITE_WAIT`] from it). resourceVersions are the
    /// store's revisions; one that is not a number never holds a sync.
    fn behind_own_write(&self, key: &str, cached: &Job) -> Option<Duration> {
        let (written, at) = self.written.lock().get(key).copied()?;
        let cached_rv = cached.metadata.resource_version.as_deref();
        let behind = cached_rv
            .and_then(|rv| rv.parse::<u64>().ok())
            .is_some_and(|rv| rv < written);
        let left = OWN_WRITE_WAIT.checked_sub(at.elapsed())?;
        behind.then_some(left)
    }

    pub(super) fn new_ctx(&self, key: &str, mut job: Job, pods: Vec<Arc<CachedPod>>) -> SyncCtx {
        let now = self.now();
        let active_pods = counting::active_pods(&pods);
        let status = job.status.clone().unwrap_or_default();
        let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        let uncounted_succeeded = counting::uid_set(uncounted.succeeded.as_ref());
        let uncounted_failed = counting::uid_set(uncounted.failed.as_ref());
        let expected_rm = self
            .finalizer_expectations
            .lock()
            .get(key)
            .cloned()
            .unwrap_or_default();
        let (new_succeeded, new_failed) = counting::new_finished_pods(
            &job,
            &pods,
            &uncounted_succeeded,
            &uncounted_failed,
            &expected_rm,
        );
        let n = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
        let succeeded =
            status.succeeded.unwrap_or(0) + n(new_succeeded.len()) + n(uncounted_succeeded.len());
        let failed = status.failed.unwrap_or(0)
            + counting::counted_failures(&job, &new_failed)
            + n(uncounted_failed.len());
        if status.start_time.is_none() && !decide::is_suspended(&job) {
            job.status.get_or_insert_with(Default::default).start_time = Some(Time(now));
        }
        let old = self.backoff.lock().get(key).copied().unwrap_or_default();
        let backoff = decide::new_backoff_record(old, &new_succeeded, &new_failed);
        SyncCtx {
            key: key.to_string(),
            ready: counting::count_ready(&active_pods),
            terminating: counting::count_terminating(&pods),
            job,
            pods,
            active_pods,
            succeeded,
            failed,
            uncounted_succeeded,
            uncounted_failed,
            expected_rm,
            finished: None,
            backoff,
            prev_succeeded: Intervals::default(),
            succeeded_indexes: Intervals::default(),
            failed_indexes: None,
            delayed: BTreeMap::new(),
            requeue: None,
        }
    }

    /// The finishing condition, if any: an earlier interim condition, the pod failure policy,
    /// the back-off limit, the deadline, failed indexes, the success policy.
    pub(super) fn decide_finished(&self, ctx: &mut SyncCtx) {
        let now = self.now();
        let job = &ctx.job;
        ctx.finished = decide::find_condition(job, "SuccessCriteriaMet")
            .filter(|c| c.status == "True")
            .cloned();
        if ctx.finished.is_none() {
            if let Some(ft) =
                decide::find_condition(job, "FailureTarget").filter(|c| c.status == "True")
            {
                ctx.finished = Some(decide::new_condition(
                    "Failed",
                    "True",
                    ft.reason.as_deref().unwrap_or(""),
                    ft.message.as_deref().unwrap_or(""),
                    now,
                ));
            } else if let Some(msg) = decide::fail_job_message(job, &ctx.pods) {
                ctx.finished = Some(self.failure_condition("PodFailurePolicy", &msg));
            }
        }
        if ctx.finished.is_none() {
            if ctx.failed > decide::backoff_limit(job)
                || decide::past_backoff_limit_on_failure(job, &ctx.pods)
            {
                ctx.finished = Some(self.failure_condition(
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                ));
            } else if let Some(left) = decide::until_active_deadline(job, now) {
                if left <= SignedDuration::ZERO {
                    ctx.finished = Some(self.failure_condition(
                        "DeadlineExceeded",
                        "Job was active longer than specified deadline",
                    ));
                } else {
                    ctx.requeue_after(to_std(left));
                }
            }
        }
        if !decide::is_indexed(&ctx.job) {
            return;
        }
        let completions = decide::completions(&ctx.job).unwrap_or(0);
        let (prev, all) = indexed::succeeded_indexes(&ctx.job, &ctx.pods);
        ctx.prev_succeeded = prev;
        ctx.succeeded_indexes = all;
        ctx.succeeded = i32::try_from(ctx.succeeded_indexes.total()).unwrap_or(i32::MAX);
        if decide::backoff_limit_per_index(&ctx.job).is_some() {
            let failed = indexed::failed_indexes(&ctx.job, &ctx.pods, &ctx.expected_rm);
            if ctx.finished.is_none() {
                let max = ctx.job.spec.as_ref().and_then(|s| s.max_failed_indexes);
                let total = failed.total();
                if max.is_some_and(|m| total > usize::try_from(m).unwrap_or(0)) {
                    ctx.finished = Some(self.failure_condition(
                        "MaxFailedIndexesExceeded",
                        "Job has exceeded the specified maximal number of failed indexes",
                    ));
                } else if total > 0
                    && total + ctx.succeeded_indexes.total()
                        >= usize::try_from(completions).unwrap_or(0)
                {
                    ctx.finished =
                        Some(self.failure_condition("FailedIndexes", "Job has failed indexes"));
                }
            }
            ctx.delayed = indexed::pods_with_delayed_deletion(
                &ctx.job,
                &ctx.pods,
                &ctx.active_pods,
                &ctx.succeeded_indexes,
                &failed,
                &ctx.expected_rm,
            );
            ctx.failed_indexes = Some(failed);
        }
        if ctx.finished.is_none() {
            let policy = ctx
                .job
                .spec
                .as_ref()
                .and_then(|s| s.success_policy.as_ref());
            if let Some(msg) =
                indexed::match_success_policy(policy, completions, &ctx.succeeded_indexes)
            {
                ctx.finished = Some(decide::new_condition(
                    "SuccessCriteriaMet",
                    "True",
                    "SuccessPolicy",
                    &msg,
                    now,
                ));
            }
        }
    }

    /// The `Suspended` condition after a managing sync, with its event; resuming resets
    /// `startTime` (the deadline counts continuous activity).
    pub(super) fn ensure_suspend_condition(&self, job: &mut Job) -> bool {
        let now = self.now();
        let suspended = decide::is_suspended(job);
        let status = job.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let changed = if suspended {
            decide::ensure_condition(
                conditions,
                "Suspended",
                "True",
                "JobSuspended",
                "Job suspended",
                now,
            )
        } else {
            decide::ensure_condition(
                conditions,
                "Suspended",
                "False",
                "JobResumed",
                "Job resumed",
                now,
            )
        };
        if conditions.is_empty() {
            status.conditions = None;
        }
        if changed {
            if suspended {
                self.event(job, EventType::Normal, "Suspended", "Job suspended");
            } else {
                job.status.get_or_insert_with(Default::default).start_time = Some(Time(now));
                self.event(job, EventType::Normal, "Resumed", "Job resumed");
            }
        }
        changed
    }

    // ---- pods

    /// `getPodsForJob`: every pod in the namespace the Job controls or adopts (with the
    /// finalizer added on adoption); releases the ones that no longer match.
    pub(super) async fn pods_for_job(&self, job: &Job) -> Result<Vec<Arc<CachedPod>>> {
        let selector = api::labels::label_selector_as_selector(
            job.spec.as_ref().and_then(|s| s.selector.as_ref()),
        )?;
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let owner = ClaimOwner {
            uid: &uid,
            deleting: job.metadata.deletion_timestamp.is_some(),
            selector: &selector,
        };
        let api: Api<Pod> = self.client.api(Some(&ns));
        let mut claimed = Vec::new();
        let mut can_adopt: Option<bool> = None;
        for pod in self.pods.namespace(&ns).list(&Selector::everything()) {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
            match claim(owner, &pod) {
                ClaimAction::Claimed => claimed.push(pod),
                ClaimAction::Ignore => {}
                ClaimAction::Release => {
                    let patch = Patch::Strategic(json!({"metadata": {
                        "ownerReferences": [{"$patch": "delete", "uid": uid}],
                        "$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER],
                        "uid": pod_uid,
                    }}));
                    match api.patch(&name, &patch).await {
                        Ok(_) => {}
                        Err(e) if e.is_not_found() || e.is_invalid() => {}
                        Err(e) => return Err(Error::api("release pod", e)),
                    }
                }
                ClaimAction::Adopt => {
                    if can_adopt.is_none() {
                        can_adopt = Some(self.can_adopt(job).await);
                    }
                    if can_adopt != Some(true) {
                        continue;
                    }
                    let patch = Patch::Strategic(json!({"metadata": {
                        "ownerReferences": [owner_ref(job)],
                        "finalizers": [JOB_TRACKING_FINALIZER],
                        "uid": pod_uid,
                    }}));
                    match api.patch(&name, &patch).await {
                        Ok(p) => claimed.push(Arc::new(CachedPod::from(p))),
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(Error::api("adopt pod", e)),
                    }
                }
            }
        }
        Ok(claimed)
    }

    /// The uncached recheck before adopting (`RecheckDeletionTimestamp`).
    pub(super) async fn can_adopt(&self, job: &Job) -> bool {
        let api: Api<Job> = self.client.api(job.metadata.namespace.as_deref());
        let name = job.metadata.name.as_deref().unwrap_or_default();
        match api.get(name).await {
            Ok(fresh) => {
                fresh.metadata.uid == job.metadata.uid
                    && fresh.metadata.deletion_timestamp.is_none()
            }
            Err(_) => false,
        }
    }
}
