//! The Job controller's I/O: informers, the two work queues (Jobs, orphan pods), expectations,
//! requests and events (see [`super`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Api, Client, DeleteParams, DeletedObject,
    HandlerRegistration, Lister, Patch, RateLimitingQueue, ResourceEventHandler, Runner,
    SharedIndexInformer,
};
use futures::future::join_all;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::decide::{self, BackoffRecord, CountInput, JOB_TRACKING_FINALIZER};
use super::indexes::Intervals;
use crate::clock::Clock;
use crate::pod_util::{controller_of, is_pod_ready};
use crate::replication::claim::{controller_ref, decide as claim, ClaimAction, ClaimOwner};
use crate::replication::expectations::UidTrackingExpectations;
use crate::replication::manage::{batch_sizes, SLOW_START_INITIAL_BATCH_SIZE};
use crate::replication::ranking::pods_to_delete;
use crate::{Error, Result};

/// Pod events are batched into one sync per Job per second (`syncJobBatchPeriod`).
pub const SYNC_JOB_BATCH_PERIOD: Duration = Duration::from_secs(1);

struct Inner {
    client: Client,
    jobs: Lister<Job>,
    pods: Lister<Pod>,
    queue: RateLimitingQueue<String>,
    // Pods with the tracking finalizer whose Job is gone or finished: their own queue, as
    // upstream's `orphanQueue`, so a flood of them never delays Job syncs.
    orphans: RateLimitingQueue<String>,
    expectations: UidTrackingExpectations,
    // Per Job key, the pod UIDs whose finalizer removal was sent but not yet seen: such pods are
    // not counted again meanwhile (`uidTrackingExpectations`).
    finalizer_expectations: Mutex<HashMap<String, BTreeSet<String>>>,
    // Per Job key, pod failures since the last success (`backoffStore`).
    backoff: Mutex<HashMap<String, BackoffRecord>>,
    recorder: EventRecorder,
    clock: Arc<dyn Clock>,
}

/// The Job controller.
pub struct JobController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 2],
}

impl JobController {
    /// Build on the shared Job and Pod informers.
    pub fn new(
        client: Client,
        jobs: SharedIndexInformer<Job>,
        pods: SharedIndexInformer<Pod>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            jobs: jobs.lister(),
            pods: pods.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("job"),
            orphans: RateLimitingQueue::with_default_controller_rate_limiter("job_orphan_pod"),
            expectations: UidTrackingExpectations::new(clock.clone()),
            finalizer_expectations: Mutex::new(HashMap::new()),
            backoff: Mutex::new(HashMap::new()),
            recorder,
            clock,
        });
        let registrations = [
            jobs.add_event_handler(JobHandler(inner.clone())),
            pods.add_event_handler(PodHandler(inner.clone())),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The Job work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then run `workers` Job workers and one orphan-pod worker until
    /// `shutdown` (`--concurrent-job-syncs`, 5).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let [a, b] = &self.registrations;
        let synced: [&dyn client::HasSynced; 2] = [a, b];
        let jobs = {
            let inner = self.inner.clone();
            Runner::new("job").workers(workers).run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        Ok::<_, Error>(match inner.sync(&key).await? {
                            Some(after) => Action::RequeueAfter(after),
                            None => Action::AwaitChange,
                        })
                    }
                },
            )
        };
        let orphans = {
            let inner = self.inner.clone();
            Runner::new("job_orphan_pod").workers(1).run_workers(
                self.inner.orphans.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        inner
                            .sync_orphan_pod(&key)
                            .await
                            .map(|()| Action::AwaitChange)
                    }
                },
            )
        };
        tokio::join!(jobs, orphans);
    }
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        namespace: job.metadata.namespace.clone(),
        name: job.metadata.name.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

fn owner_ref(job: &Job) -> OwnerReference {
    controller_ref(
        "batch/v1",
        "Job",
        job.metadata.name.as_deref().unwrap_or_default(),
        job.metadata.uid.as_deref().unwrap_or_default(),
    )
}

fn to_std(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

/// Strategic-merge patch removing the tracking finalizer (`removeTrackingFinalizerPatch`).
fn remove_finalizer_patch() -> Patch {
    Patch::Strategic(json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}
    }))
}

/// Everything one sync knows about its Job (`syncJobCtx`).
struct SyncCtx {
    key: String,
    job: Job,
    pods: Vec<Arc<Pod>>,
    active_pods: Vec<Arc<Pod>>,
    succeeded: i32,
    failed: i32,
    ready: i32,
    terminating: i32,
    uncounted_succeeded: BTreeSet<String>,
    uncounted_failed: BTreeSet<String>,
    expected_rm: BTreeSet<String>,
    finished: Option<JobCondition>,
    backoff: BackoffRecord,
    prev_succeeded: Intervals,
    succeeded_indexes: Intervals,
    failed_indexes: Option<Intervals>,
    delayed: BTreeMap<i32, Arc<Pod>>,
    requeue: Option<Duration>,
}

impl SyncCtx {
    fn requeue_after(&mut self, d: Duration) {
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }
}

impl Inner {
    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn event(&self, job: &Job, type_: EventType, reason: &str, message: &str) {
        self.recorder.event(&job_ref(job), type_, reason, message);
    }

    fn failure_condition(&self, reason: &str, message: &str) -> JobCondition {
        decide::new_condition("FailureTarget", "True", reason, message, self.now())
    }

    /// `syncJob`: returns when to look again, if the Job asked for it.
    async fn sync(&self, key: &str) -> Result<Option<Duration>> {
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
            return Ok(None);
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

    fn forget_job(&self, key: &str) {
        self.expectations.delete_expectations(key);
        self.finalizer_expectations.lock().remove(key);
        self.backoff.lock().remove(key);
    }

    fn new_ctx(&self, key: &str, mut job: Job, pods: Vec<Arc<Pod>>) -> SyncCtx {
        let now = self.now();
        let active_pods = decide::active_pods(&pods);
        let status = job.status.clone().unwrap_or_default();
        let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        let uncounted_succeeded = decide::uid_set(uncounted.succeeded.as_ref());
        let uncounted_failed = decide::uid_set(uncounted.failed.as_ref());
        let expected_rm = self
            .finalizer_expectations
            .lock()
            .get(key)
            .cloned()
            .unwrap_or_default();
        let (new_succeeded, new_failed) = decide::new_finished_pods(
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
            + decide::counted_failures(&job, &new_failed)
            + n(uncounted_failed.len());
        if status.start_time.is_none() && !decide::is_suspended(&job) {
            job.status.get_or_insert_with(Default::default).start_time = Some(Time(now));
        }
        let old = self.backoff.lock().get(key).copied().unwrap_or_default();
        let backoff = decide::new_backoff_record(old, &new_succeeded, &new_failed);
        SyncCtx {
            key: key.to_string(),
            ready: decide::count_ready(&active_pods),
            terminating: decide::count_terminating(&pods),
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
    fn decide_finished(&self, ctx: &mut SyncCtx) {
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
        let (prev, all) = decide::succeeded_indexes(&ctx.job, &ctx.pods);
        ctx.prev_succeeded = prev;
        ctx.succeeded_indexes = all;
        ctx.succeeded = i32::try_from(ctx.succeeded_indexes.total()).unwrap_or(i32::MAX);
        if decide::backoff_limit_per_index(&ctx.job).is_some() {
            let failed = decide::failed_indexes(&ctx.job, &ctx.pods, &ctx.expected_rm);
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
            ctx.delayed = decide::pods_with_delayed_deletion(
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
                decide::match_success_policy(policy, completions, &ctx.succeeded_indexes)
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
    fn ensure_suspend_condition(&self, job: &mut Job) -> bool {
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
    async fn pods_for_job(&self, job: &Job) -> Result<Vec<Arc<Pod>>> {
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
                        Ok(p) => claimed.push(Arc::new(p)),
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(Error::api("adopt pod", e)),
                    }
                }
            }
        }
        Ok(claimed)
    }

    /// The uncached recheck before adopting (`RecheckDeletionTimestamp`).
    async fn can_adopt(&self, job: &Job) -> bool {
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

    /// `deleteActivePods`: delete (keeping finalizers; counting removes them). Returns
    /// (ready deleted, deleted, first error).
    async fn delete_active_pods(&self, ctx: &SyncCtx) -> (i32, i32, Option<Error>) {
        let ns = ctx.job.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = self.client.api(Some(&ns));
        let results = join_all(ctx.active_pods.iter().map(|p| {
            let api = api.clone();
            async move {
                let name = p.metadata.name.clone().unwrap_or_default();
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(()) => {
                        self.event(
                            &ctx.job,
                            EventType::Normal,
                            "SuccessfulDelete",
                            &format!("Deleted pod: {name}"),
                        );
                        Ok(is_pod_ready(p))
                    }
                    Err(e) if e.is_not_found() => Ok(is_pod_ready(p)),
                    Err(e) => Err(Error::api("delete pod", e)),
                }
            }
        }))
        .await;
        tally(results)
    }

    /// `deleteJobPods`: remove the finalizer, then delete, lowering expectations on failure.
    async fn delete_job_pods(
        &self,
        ctx: &SyncCtx,
        victims: &[Arc<Pod>],
    ) -> (i32, i32, Option<Error>) {
        let ns = ctx.job.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = self.client.api(Some(&ns));
        let keys = victims.iter().map(|p| key_of_meta(&p.metadata)).collect();
        self.expectations.expect_deletions(&ctx.key, keys);
        let results = join_all(victims.iter().map(|p| {
            let api = api.clone();
            async move {
                let name = p.metadata.name.clone().unwrap_or_default();
                let failed = |e: client::Error| {
                    self.expectations
                        .deletion_observed(&ctx.key, &key_of_meta(&p.metadata));
                    if e.is_not_found() {
                        Ok(is_pod_ready(p))
                    } else {
                        self.event(
                            &ctx.job,
                            EventType::Warning,
                            "FailedDelete",
                            &format!("Error deleting: {e}"),
                        );
                        Err(Error::api("delete pod", e))
                    }
                };
                if decide::has_tracking_finalizer(p) {
                    if let Err(e) = api.patch(&name, &remove_finalizer_patch()).await {
                        return failed(e);
                    }
                }
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(()) => {
                        self.event(
                            &ctx.job,
                            EventType::Normal,
                            "SuccessfulDelete",
                            &format!("Deleted pod: {name}"),
                        );
                        Ok(is_pod_ready(p))
                    }
                    Err(e) => failed(e),
                }
            }
        }))
        .await;
        tally(results)
    }

    /// `manageJob`: delete what is too many (or everything, suspended), else create what is
    /// missing once the back-off allows. Returns the active count after it (also on error).
    async fn manage_job(&self, ctx: &mut SyncCtx) -> std::result::Result<i32, (i32, Error)> {
        let job = ctx.job.clone();
        let mut active = i32::try_from(ctx.active_pods.len()).unwrap_or(i32::MAX);
        let completions = decide::completions(&job).unwrap_or(0);
        let now = self.now();
        let settle =
            |ctx: &mut SyncCtx, active: i32, (ready, removed, err): (i32, i32, Option<Error>)| {
                ctx.terminating += removed;
                ctx.ready -= ready;
                match err {
                    Some(e) => Err((active - removed, e)),
                    None => Ok(active - removed),
                }
            };
        if decide::is_suspended(&job) {
            let victims = ctx.active_pods.clone();
            let r = self.delete_job_pods(ctx, &victims).await;
            return settle(ctx, active, r);
        }
        let want = decide::want_active(&job, ctx.succeeded, active);
        let rm_at_least = usize::try_from(active - want).unwrap_or(0);
        let mut victims = if decide::is_indexed(&job) {
            decide::duplicated_index_pods(&ctx.active_pods, completions).0
        } else {
            Vec::new()
        };
        if victims.len() < rm_at_least {
            let kept: Vec<Arc<Pod>> = ctx
                .active_pods
                .iter()
                .filter(|p| !victims.iter().any(|v| v.metadata.uid == p.metadata.uid))
                .cloned()
                .collect();
            victims.extend(pods_to_delete(&kept, &[], rm_at_least - victims.len(), now));
        }
        victims.truncate(decide::MAX_POD_CREATE_DELETE_PER_SYNC);
        if !victims.is_empty() {
            let r = self.delete_job_pods(ctx, &victims).await;
            return settle(ctx, active, r);
        }
        let terminating = if decide::only_replace_failed_pods(&job) {
            ctx.terminating
        } else {
            0
        };
        let diff = want - terminating - active;
        if diff <= 0 {
            return Ok(active);
        }
        let mut diff = usize::try_from(diff)
            .unwrap_or(0)
            .min(decide::MAX_POD_CREATE_DELETE_PER_SYNC);
        if decide::backoff_limit_per_index(&job).is_none() {
            let left = decide::remaining_backoff(
                ctx.backoff.failures_after_last_success,
                ctx.backoff.last_failure_time,
                now,
            );
            if left > SignedDuration::ZERO {
                ctx.requeue_after(to_std(left));
                return Ok(active);
            }
        }
        let mut indexes: Vec<Option<i32>> = vec![None; diff];
        if decide::is_indexed(&job) {
            let mut busy = decide::active_indexes(&ctx.active_pods, completions);
            if decide::only_replace_failed_pods(&job) {
                let terminating: Vec<Arc<Pod>> = ctx
                    .pods
                    .iter()
                    .filter(|p| crate::pod_util::is_pod_terminating(p))
                    .cloned()
                    .collect();
                busy.extend(decide::active_indexes(&terminating, completions));
            }
            let mut pending = decide::first_pending_indexes(
                diff,
                completions,
                &ctx.succeeded_indexes,
                ctx.failed_indexes.as_ref(),
                &busy,
            );
            if decide::backoff_limit_per_index(&job).is_some() {
                let (ready, waits): (Vec<i32>, Vec<i32>) = pending.iter().partition(|ix| {
                    decide::remaining_backoff_for_index(
                        ctx.delayed.get(ix).map(|p| p.as_ref()),
                        now,
                    ) <= SignedDuration::ZERO
                });
                if ready.is_empty() {
                    if let Some(min) = waits
                        .iter()
                        .map(|ix| {
                            decide::remaining_backoff_for_index(
                                ctx.delayed.get(ix).map(|p| p.as_ref()),
                                now,
                            )
                        })
                        .min()
                    {
                        ctx.requeue_after(to_std(min));
                    }
                    return Ok(active);
                }
                pending = ready;
            }
            diff = pending.len();
            indexes = pending.into_iter().map(Some).collect();
        }
        if diff == 0 {
            return Ok(active);
        }
        let (created, err) = self.create_pods(ctx, &indexes).await;
        active += created;
        match err {
            Some(e) => Err((active, e)),
            None => Ok(active),
        }
    }

    /// Create one pod per entry of `indexes` in slow-start batches; returns how many were
    /// created and the first error.
    async fn create_pods(&self, ctx: &SyncCtx, indexes: &[Option<i32>]) -> (i32, Option<Error>) {
        let job = &ctx.job;
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = self.client.api(Some(&ns));
        let owner = owner_ref(job);
        let with_counts = decide::backoff_limit_per_index(job).is_some();
        self.expectations
            .expect_creations(&ctx.key, i64::try_from(indexes.len()).unwrap_or(i64::MAX));
        let mut created = 0i32;
        let mut rest = indexes;
        for size in batch_sizes(indexes.len(), SLOW_START_INITIAL_BATCH_SIZE) {
            let (batch, tail) = rest.split_at(size.min(rest.len()));
            rest = tail;
            let results = join_all(batch.iter().map(|ix| {
                let counts = with_counts.then(|| {
                    let last = ix.and_then(|i| ctx.delayed.get(&i)).map(|p| p.as_ref());
                    decide::index_failure_annotations(job, last)
                });
                let pod = decide::pod_for_job(job, owner.clone(), *ix, counts);
                let api = api.clone();
                async move {
                    match api.create_metadata(&pod).await {
                        Ok(meta) => {
                            let name = meta.name.unwrap_or_default();
                            self.event(
                                job,
                                EventType::Normal,
                                "SuccessfulCreate",
                                &format!("Created pod: {name}"),
                            );
                            Ok(true)
                        }
                        Err(e) => {
                            // This creation will never be observed.
                            self.expectations.creation_observed(&ctx.key);
                            if namespace_terminating(&e) {
                                return Ok(false);
                            }
                            self.event(
                                job,
                                EventType::Warning,
                                "FailedCreate",
                                &format!("Error creating: {e}"),
                            );
                            Err(e)
                        }
                    }
                }
            }))
            .await;
            let mut first_err = None;
            for r in results {
                match r {
                    Ok(true) => created += 1,
                    Ok(false) => {}
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = first_err {
                for _ in 0..rest.len() {
                    self.expectations.creation_observed(&ctx.key);
                }
                return (created, Some(Error::api("create pod", e)));
            }
        }
        (created, None)
    }

    // ---- counting

    /// `trackJobStatusAndRemoveFinalizers`: record finished pods as uncounted, remove their
    /// finalizers, move them into the counters, add the interim and then the terminal
    /// condition, writing the status whenever it must precede the next step.
    async fn track_status_and_remove_finalizers(
        &self,
        ctx: &mut SyncCtx,
        mut needs_flush: bool,
    ) -> Result<()> {
        let mut with_finalizer: BTreeSet<String> = ctx
            .pods
            .iter()
            .filter(|p| decide::has_tracking_finalizer(p))
            .filter_map(|p| p.metadata.uid.clone())
            .filter(|u| !ctx.expected_rm.contains(u))
            .collect();
        needs_flush |= decide::clean_uncounted(&mut ctx.job, &with_finalizer);
        let finishing = ctx.finished.is_some();
        let failing = ctx
            .finished
            .as_ref()
            .is_some_and(|c| c.type_ != "SuccessCriteriaMet");
        let plan = decide::plan_counting(&CountInput {
            job: &ctx.job,
            pods: &ctx.pods,
            uncounted_succeeded: &ctx.uncounted_succeeded,
            uncounted_failed: &ctx.uncounted_failed,
            expected_rm: &ctx.expected_rm,
            failing,
            finishing,
            prev_succeeded: &ctx.prev_succeeded,
            delayed: &ctx.delayed,
        });
        let indexed = decide::is_indexed(&ctx.job);
        let now = self.now();
        {
            let status = ctx.job.status.get_or_insert_with(Default::default);
            let uncounted = status
                .uncounted_terminated_pods
                .get_or_insert_with(Default::default);
            if !plan.succeeded.is_empty() {
                uncounted
                    .succeeded
                    .get_or_insert_with(Vec::new)
                    .extend(plan.succeeded.iter().cloned());
                needs_flush = true;
            }
            if !plan.failed.is_empty() {
                uncounted
                    .failed
                    .get_or_insert_with(Vec::new)
                    .extend(plan.failed.iter().cloned());
                needs_flush = true;
            }
            if indexed {
                ctx.succeeded_indexes = ctx
                    .succeeded_indexes
                    .with(plan.succeeded_indexes.iter().copied());
                let completed = ctx.succeeded_indexes.to_string();
                if status.completed_indexes.as_deref().unwrap_or("") != completed {
                    needs_flush = true;
                }
                status.succeeded =
                    Some(i32::try_from(ctx.succeeded_indexes.total()).unwrap_or(i32::MAX));
                status.completed_indexes = Some(completed);
                let failed = ctx.failed_indexes.as_ref().map(Intervals::to_string);
                if status.failed_indexes != failed {
                    status.failed_indexes = failed;
                    needs_flush = true;
                }
            }
            // The interim condition first, then (after the finalizers) the terminal one.
            if let Some(cond) = ctx.finished.take() {
                let conditions = status.conditions.get_or_insert_with(Vec::new);
                let terminal = match cond.type_.as_str() {
                    "FailureTarget" => {
                        conditions.push(cond.clone());
                        needs_flush = true;
                        decide::new_condition(
                            "Failed",
                            "True",
                            cond.reason.as_deref().unwrap_or(""),
                            cond.message.as_deref().unwrap_or(""),
                            now,
                        )
                    }
                    "SuccessCriteriaMet" => {
                        if !conditions.iter().any(|c| c.type_ == "SuccessCriteriaMet") {
                            conditions.push(cond.clone());
                            needs_flush = true;
                        }
                        decide::new_condition(
                            "Complete",
                            "True",
                            cond.reason.as_deref().unwrap_or(""),
                            cond.message.as_deref().unwrap_or(""),
                            now,
                        )
                    }
                    _ => cond,
                };
                ctx.finished = Some(terminal);
            }
        }
        // 1. Flush the uncounted pods (and the interim condition) before touching finalizers.
        if needs_flush {
            ctx.job = self.write_status(&ctx.job).await?;
            self.backoff.lock().insert(ctx.key.clone(), ctx.backoff);
            needs_flush = false;
        }
        // 2. Remove the finalizers.
        let mut rm_err = None;
        if !plan.unfinalize.is_empty() {
            let (removed, err) = self.remove_finalizers(&ctx.key, &plan.unfinalize).await;
            for u in removed {
                with_finalizer.remove(&u);
            }
            rm_err = err;
        }
        // 3. Count what lost its finalizer.
        if decide::clean_uncounted(&mut ctx.job, &with_finalizer) {
            needs_flush = true;
        }
        if let Some(e) = rm_err {
            if needs_flush {
                self.write_status(&ctx.job).await?;
            }
            return Err(e);
        }
        // 4. Finished once nothing is uncounted or terminating any more.
        let finished = !plan.capped && self.enact_finished(ctx);
        if finished || needs_flush {
            ctx.job = self.write_status(&ctx.job).await?;
            if finished {
                self.record_finished(ctx);
            }
        }
        Ok(())
    }

    /// `enactJobFinished`: add the terminal condition (and `completionTime`) if nothing is left
    /// uncounted or terminating.
    fn enact_finished(&self, ctx: &mut SyncCtx) -> bool {
        let Some(cond) = ctx.finished.clone() else {
            return false;
        };
        let status = ctx.job.status.get_or_insert_with(Default::default);
        let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        let left =
            uncounted.succeeded.map_or(0, |v| v.len()) + uncounted.failed.map_or(0, |v| v.len());
        if left > 0 || ctx.terminating > 0 {
            return false;
        }
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        decide::ensure_condition(
            conditions,
            &cond.type_,
            &cond.status,
            cond.reason.as_deref().unwrap_or(""),
            cond.message.as_deref().unwrap_or(""),
            self.now(),
        );
        if cond.type_ == "Complete" {
            status.completion_time = conditions
                .iter()
                .find(|c| c.type_ == "Complete")
                .and_then(|c| c.last_transition_time.clone());
        }
        true
    }

    /// `recordJobFinished`: the `Completed` event, or a warning with the failure's reason.
    fn record_finished(&self, ctx: &SyncCtx) {
        let Some(cond) = &ctx.finished else {
            return;
        };
        let job = &ctx.job;
        if cond.type_ == "Complete" {
            let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
            if decide::completions(job).is_some_and(|c| succeeded > c) {
                self.event(
                    job,
                    EventType::Warning,
                    "TooManySucceededPods",
                    "Too many succeeded pods running after completion count reached",
                );
            }
            self.event(job, EventType::Normal, "Completed", "Job completed");
        } else {
            self.event(
                job,
                EventType::Warning,
                cond.reason.as_deref().unwrap_or(""),
                cond.message.as_deref().unwrap_or(""),
            );
        }
    }

    /// Remove the tracking finalizer from `pods`, expecting to see it go; returns the UIDs
    /// it is gone from (already-deleted pods included) and the first error.
    async fn remove_finalizers(
        &self,
        key: &str,
        pods: &[Arc<Pod>],
    ) -> (Vec<String>, Option<Error>) {
        self.finalizer_expectations
            .lock()
            .entry(key.to_string())
            .or_default()
            .extend(pods.iter().filter_map(|p| p.metadata.uid.clone()));
        let results = join_all(pods.iter().map(|p| async move {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let name = p.metadata.name.clone().unwrap_or_default();
            let uid = p.metadata.uid.clone().unwrap_or_default();
            let api: Api<Pod> = self.client.api(Some(&ns));
            match api.patch(&name, &remove_finalizer_patch()).await {
                Ok(_) => Ok(uid),
                Err(e) => {
                    self.finalizer_removal_observed(key, &uid);
                    if e.is_not_found() {
                        Ok(uid)
                    } else {
                        Err(e)
                    }
                }
            }
        }))
        .await;
        let mut removed = Vec::new();
        let mut err = None;
        for r in results {
            match r {
                Ok(u) => removed.push(u),
                Err(e) => {
                    err.get_or_insert(Error::api("remove tracking finalizer", e));
                }
            }
        }
        (removed, err)
    }

    fn finalizer_removal_observed(&self, key: &str, uid: &str) {
        let mut map = self.finalizer_expectations.lock();
        if let Some(set) = map.get_mut(key) {
            set.remove(uid);
            if set.is_empty() {
                map.remove(key);
            }
        }
    }

    /// Write the status subresource; returns the written Job (keeping this sync's view of
    /// fields the write may not echo).
    async fn write_status(&self, job: &Job) -> Result<Job> {
        let api: Api<Job> = self.client.api(job.metadata.namespace.as_deref());
        let name = job.metadata.name.as_deref().unwrap_or_default();
        api.replace_status(name, job)
            .await
            .map_err(|e| Error::api("update job status", e))
    }

    // ---- orphan pods

    /// `syncOrphanPod`: remove the finalizer of a pod no unfinished Job of ours controls.
    async fn sync_orphan_pod(&self, key: &str) -> Result<()> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(());
        };
        let Some(pod) = self.pods.namespace(ns).get(name) else {
            return Ok(());
        };
        if let Some(r) = controller_of(&pod.metadata) {
            if r.kind != "Job" || r.api_version != "batch/v1" {
                return Ok(());
            }
            if let Some(job) = self.resolve(ns, r) {
                if decide::managed_elsewhere(&job) || decide::finished(&job).is_none() {
                    return Ok(());
                }
            }
        }
        if !decide::has_tracking_finalizer(&pod) {
            return Ok(());
        }
        let api: Api<Pod> = self.client.api(Some(ns));
        match api.patch(name, &remove_finalizer_patch()).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("remove orphan pod finalizer", e)),
        }
    }

    // ---- event handlers

    /// `resolveControllerRef`.
    fn resolve(&self, ns: &str, r: &OwnerReference) -> Option<Arc<Job>> {
        if r.kind != "Job" {
            return None;
        }
        let job = self.jobs.namespace(ns).get(&r.name)?;
        (job.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(job)
    }

    /// Jobs whose selector matches an orphan pod (`getPodJobs`).
    fn matching_jobs(&self, pod: &Pod) -> Vec<Arc<Job>> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
            return Vec::new();
        }
        self.jobs
            .namespace(ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|j| {
                api::labels::label_selector_as_selector(
                    j.spec.as_ref().and_then(|s| s.selector.as_ref()),
                )
                .is_ok_and(|s| !s.is_empty() && s.matches(pod.metadata.labels.as_ref()))
            })
            .collect()
    }

    fn enqueue(&self, job: &Job, immediate: bool) {
        if decide::managed_elsewhere(job) {
            return;
        }
        let key = key_of_meta(&job.metadata);
        if immediate {
            self.queue.add(key);
        } else {
            self.queue.add_after(key, SYNC_JOB_BATCH_PERIOD);
        }
    }

    fn enqueue_orphan(&self, pod: &Pod) {
        self.orphans.add(key_of_meta(&pod.metadata));
    }

    fn pod_added(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.pod_deleted(pod, false);
            return;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(r) = controller_of(&pod.metadata) {
            match self.resolve(ns, r) {
                Some(job) => {
                    self.expectations
                        .creation_observed(&key_of_meta(&job.metadata));
                    self.enqueue(&job, false);
                }
                None if decide::has_tracking_finalizer(pod) => self.enqueue_orphan(pod),
                None => {}
            }
            return;
        }
        if decide::has_tracking_finalizer(pod) {
            self.enqueue_orphan(pod);
        }
        for job in self.matching_jobs(pod) {
            self.enqueue(&job, false);
        }
    }

    fn pod_updated(&self, old: &Pod, new: &Pod) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        if new.metadata.deletion_timestamp.is_some() {
            self.pod_deleted(new, false);
            return;
        }
        // Back-off applies from a pod's first failure: that sync is batched, others are not.
        let phase = |p: &Pod| crate::pod_util::phase(p).to_string();
        let immediate = !(phase(new) == "Failed" && phase(old) != "Failed");
        let finalizer_gone = !decide::has_tracking_finalizer(new);
        let ns = new.metadata.namespace.as_deref().unwrap_or_default();
        let (old_ref, new_ref) = (controller_of(&old.metadata), controller_of(&new.metadata));
        let uid = new.metadata.uid.as_deref().unwrap_or_default();
        if old_ref != new_ref {
            if let Some(job) = old_ref.and_then(|r| self.resolve(ns, r)) {
                if finalizer_gone {
                    self.finalizer_removal_observed(&key_of_meta(&job.metadata), uid);
                }
                self.enqueue(&job, immediate);
            }
        }
        if let Some(r) = new_ref {
            match self.resolve(ns, r) {
                Some(job) => {
                    if finalizer_gone {
                        self.finalizer_removal_observed(&key_of_meta(&job.metadata), uid);
                    }
                    self.enqueue(&job, immediate);
                }
                None if decide::has_tracking_finalizer(new) => self.enqueue_orphan(new),
                None => {}
            }
            return;
        }
        if decide::has_tracking_finalizer(new) {
            self.enqueue_orphan(new);
        }
        if old.metadata.labels != new.metadata.labels || old_ref != new_ref {
            for job in self.matching_jobs(new) {
                self.enqueue(&job, false);
            }
        }
    }

    fn pod_deleted(&self, pod: &Pod, is_final: bool) {
        let has_finalizer = decide::has_tracking_finalizer(pod);
        let Some(r) = controller_of(&pod.metadata) else {
            if has_finalizer {
                self.enqueue_orphan(pod);
            }
            return;
        };
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let job = self.resolve(ns, r);
        let Some(job) = job.filter(|j| decide::finished(j).is_none()) else {
            if has_finalizer && !is_final {
                self.enqueue_orphan(pod);
            }
            return;
        };
        let key = key_of_meta(&job.metadata);
        self.expectations
            .deletion_observed(&key, &key_of_meta(&pod.metadata));
        if is_final || !has_finalizer {
            self.finalizer_removal_observed(&key, pod.metadata.uid.as_deref().unwrap_or_default());
        }
        self.enqueue(&job, false);
    }

    fn job_updated(&self, old: &Job, new: &Job) {
        if old.metadata.uid != new.metadata.uid {
            self.job_deleted(old);
        }
        self.enqueue(new, true);
        // A new or changed deadline: look again when it passes.
        let old_deadline = old.spec.as_ref().and_then(|s| s.active_deadline_seconds);
        if let Some(left) = decide::until_active_deadline(new, self.now()) {
            let deadline = new.spec.as_ref().and_then(|s| s.active_deadline_seconds);
            if deadline != old_deadline {
                self.queue
                    .add_after(key_of_meta(&new.metadata), to_std(left));
            }
        }
    }

    /// A deleted Job: forget it, and free its pods of their finalizers.
    fn job_deleted(&self, job: &Job) {
        let key = key_of_meta(&job.metadata);
        self.forget_job(&key);
        self.queue.add(key);
        let ns = job.metadata.namespace.as_deref().unwrap_or_default();
        for pod in self.pods.namespace(ns).list(&Selector::everything()) {
            let ours = controller_of(&pod.metadata)
                .is_some_and(|r| Some(&r.uid) == job.metadata.uid.as_ref());
            if ours && decide::has_tracking_finalizer(&pod) {
                self.enqueue_orphan(&pod);
            }
        }
    }
}

/// (ready removed, removed, first error) of a batch of pod removals.
fn tally(results: Vec<Result<bool>>) -> (i32, i32, Option<Error>) {
    let (mut ready, mut removed, mut err) = (0, 0, None);
    for r in results {
        match r {
            Ok(was_ready) => {
                removed += 1;
                ready += i32::from(was_ready);
            }
            Err(e) => {
                err.get_or_insert(e);
            }
        }
    }
    (ready, removed, err)
}

/// A create refused because the namespace is being deleted (`NamespaceTerminating` cause).
fn namespace_terminating(e: &client::Error) -> bool {
    e.status()
        .and_then(|s| s.details.as_ref())
        .and_then(|d| d.causes.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.reason.as_deref() == Some("NamespaceTerminating"))
        })
}

struct JobHandler(Arc<Inner>);

impl ResourceEventHandler<Job> for JobHandler {
    fn on_add(&self, obj: &Arc<Job>, _in_initial_list: bool) {
        self.0.enqueue(obj, true);
        if let Some(left) = decide::until_active_deadline(obj, self.0.now()) {
            self.0
                .queue
                .add_after(key_of_meta(&obj.metadata), to_std(left));
        }
    }

    fn on_update(&self, old: &Arc<Job>, new: &Arc<Job>) {
        self.0.job_updated(old, new);
    }

    fn on_delete(&self, obj: DeletedObject<Job>) {
        self.0.job_deleted(obj.object());
    }
}

struct PodHandler(Arc<Inner>);

impl ResourceEventHandler<Pod> for PodHandler {
    fn on_add(&self, obj: &Arc<Pod>, _in_initial_list: bool) {
        self.0.pod_added(obj);
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.0.pod_updated(old, new);
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.0.pod_deleted(obj.object(), true);
    }
}
