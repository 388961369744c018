//! The Job controller's wiring (see [`super`]): informers, the two work queues (Jobs, orphan
//! pods), the expectations and back-off records, the event handlers that feed them, and the
//! orphan-pod sync. A Job sync's steps live in the sibling modules `sync`, `manage`, `tracking`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Api, Client, DeletedObject, HandlerRegistration,
    Lister, Patch, RateLimitingQueue, ResourceEventHandler, Runner, SharedIndexInformer,
};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::decide::{self, BackoffRecord, JOB_TRACKING_FINALIZER};
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::pod_util::controller_of;
use crate::replication::claim::controller_ref;
use crate::replication::expectations::UidTrackingExpectations;
use crate::{Error, Result};

/// Pod events are batched into one sync per Job per second (`syncJobBatchPeriod`).
pub const SYNC_JOB_BATCH_PERIOD: Duration = Duration::from_secs(1);

/// How long a sync waits for the informer to deliver the controller's own status write before it
/// goes on with what it has (a store restored to older revisions would otherwise hold the Job).
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(10);

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) jobs: Lister<Job>,
    pub(super) pods: Lister<CachedPod>,
    pub(super) queue: RateLimitingQueue<String>,
    // Pods with the tracking finalizer whose Job is gone or finished: their own queue, as
    // upstream's `orphanQueue`, so a flood of them never delays Job syncs.
    pub(super) orphans: RateLimitingQueue<String>,
    pub(super) expectations: UidTrackingExpectations,
    // Per Job key, the pod UIDs whose finalizer removal was sent but not yet seen: such pods are
    // not counted again meanwhile (`uidTrackingExpectations`).
    pub(super) finalizer_expectations: Mutex<HashMap<String, BTreeSet<String>>>,
    // Per Job key, pod failures since the last success (`backoffStore`).
    pub(super) backoff: Mutex<HashMap<String, BackoffRecord>>,
    // Per Job key, the resourceVersion of this controller's last status write and when it was made:
    // a sync whose cached Job is older has not seen its own counting yet and waits for the Job's
    // update event (at most OWN_WRITE_WAIT).
    pub(super) written: Mutex<HashMap<String, (u64, std::time::Instant)>>,
    pub(super) recorder: EventRecorder,
    pub(super) clock: Arc<dyn Clock>,
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
        pods: SharedIndexInformer<CachedPod>,
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
            written: Mutex::new(HashMap::new()),
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

pub(super) fn job_ref(job: &Job) -> ObjectReference {
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

pub(super) fn owner_ref(job: &Job) -> OwnerReference {
    controller_ref(
        "batch/v1",
        "Job",
        job.metadata.name.as_deref().unwrap_or_default(),
        job.metadata.uid.as_deref().unwrap_or_default(),
    )
}

pub(super) fn to_std(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

/// Strategic-merge patch removing the tracking finalizer (`removeTrackingFinalizerPatch`).
pub(super) fn remove_finalizer_patch() -> Patch {
    Patch::Strategic(json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}
    }))
}

impl Inner {
    pub(super) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    pub(super) fn event(&self, job: &Job, type_: EventType, reason: &str, message: &str) {
        self.recorder.event(&job_ref(job), type_, reason, message);
    }

    pub(super) fn failure_condition(&self, reason: &str, message: &str) -> JobCondition {
        decide::new_condition("FailureTarget", "True", reason, message, self.now())
    }

    // ---- orphan pods

    /// `syncOrphanPod`: remove the finalizer of a pod no unfinished Job of ours controls.
    pub(super) async fn sync_orphan_pod(&self, key: &str) -> Result<()> {
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
    pub(super) fn resolve(&self, ns: &str, r: &OwnerReference) -> Option<Arc<Job>> {
        if r.kind != "Job" {
            return None;
        }
        let job = self.jobs.namespace(ns).get(&r.name)?;
        (job.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(job)
    }

    /// Jobs whose selector matches an orphan pod (`getPodJobs`).
    pub(super) fn matching_jobs(&self, pod: &CachedPod) -> Vec<Arc<Job>> {
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

    pub(super) fn enqueue(&self, job: &Job, immediate: bool) {
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

    pub(super) fn enqueue_orphan(&self, pod: &CachedPod) {
        self.orphans.add(key_of_meta(&pod.metadata));
    }

    pub(super) fn pod_added(&self, pod: &CachedPod) {
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

    pub(super) fn pod_updated(&self, old: &CachedPod, new: &CachedPod) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        if new.metadata.deletion_timestamp.is_some() {
            self.pod_deleted(new, false);
            return;
        }
        // Back-off applies from a pod's first failure: that sync is batched, others are not.
        let phase = |p: &CachedPod| crate::pod_util::phase(p).to_string();
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

    pub(super) fn pod_deleted(&self, pod: &CachedPod, is_final: bool) {
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

    pub(super) fn job_updated(&self, old: &Job, new: &Job) {
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
    pub(super) fn job_deleted(&self, job: &Job) {
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

impl ResourceEventHandler<CachedPod> for PodHandler {
    fn on_add(&self, obj: &Arc<CachedPod>, _in_initial_list: bool) {
        self.0.pod_added(obj);
    }

    fn on_update(&self, old: &Arc<CachedPod>, new: &Arc<CachedPod>) {
        self.0.pod_updated(old, new);
    }

    fn on_delete(&self, obj: DeletedObject<CachedPod>) {
        self.0.pod_deleted(obj.object(), true);
    }
}
