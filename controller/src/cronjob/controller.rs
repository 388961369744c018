//! The CronJob controller's I/O: informers, work queue, requests, events (see [`super`]).

use std::sync::Arc;
use std::time::Duration;

use client::record::{EventRecorder, EventType};
use client::{
    meta_namespace_key, split_meta_namespace_key, Action, Api, Client, DeleteParams, DeletedObject,
    HandlerRegistration, Lister, PropagationPolicy, RateLimitingQueue, ResourceEventHandler,
    Runner, SharedIndexInformer,
};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio_util::sync::CancellationToken;

use super::decide;
use crate::clock::Clock;
use crate::pod_util::controller_of;
use crate::{Error, Result};

struct Inner {
    client: Client,
    cronjobs: Lister<CronJob>,
    jobs: Lister<Job>,
    queue: RateLimitingQueue<String>,
    recorder: EventRecorder,
    clock: Arc<dyn Clock>,
}

/// The CronJob controller.
pub struct CronJobController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 2],
}

impl CronJobController {
    /// Build on the shared CronJob and Job informers.
    pub fn new(
        client: Client,
        cronjobs: SharedIndexInformer<CronJob>,
        jobs: SharedIndexInformer<Job>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            cronjobs: cronjobs.lister(),
            jobs: jobs.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("cronjob"),
            recorder,
            clock,
        });
        let registrations = [
            cronjobs.add_event_handler(CronJobHandler(inner.queue.clone())),
            jobs.add_event_handler(JobHandler(inner.clone())),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then run `workers` workers until `shutdown`
    /// (`--concurrent-cron-job-syncs`, 5).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let inner = self.inner.clone();
        let [a, b] = &self.registrations;
        Runner::new("cronjob")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &[a, b],
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
            .await;
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

fn cronjob_ref(cj: &CronJob) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("CronJob".into()),
        namespace: cj.metadata.namespace.clone(),
        name: cj.metadata.name.clone(),
        uid: cj.metadata.uid.clone(),
        resource_version: cj.metadata.resource_version.clone(),
        field_path: None,
    }
}

fn active(cj: &CronJob) -> &[ObjectReference] {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_deref())
        .unwrap_or_default()
}

fn in_active_list(cj: &CronJob, uid: Option<&str>) -> bool {
    active(cj).iter().any(|r| r.uid.as_deref() == uid)
}

fn remove_from_active(cj: &mut CronJob, uid: Option<&str>) {
    if let Some(list) = cj
        .status
        .get_or_insert_with(Default::default)
        .active
        .as_mut()
    {
        list.retain(|r| r.uid.as_deref() != uid);
    }
}

impl Inner {
    fn event(&self, cj: &CronJob, type_: EventType, reason: &str, message: &str) {
        self.recorder
            .event(&cronjob_ref(cj), type_, reason, message);
    }

    /// Reconciles one CronJob; `Some(d)`: look again after `d` (the next schedule time).
    async fn sync(&self, key: &str) -> Result<Option<Duration>> {
        let Some(cached) = self.cronjobs.get(key) else {
            return Ok(None);
        };
        let Ok((ns, _)) = split_meta_namespace_key(key) else {
            return Ok(None);
        };
        let ns = ns.to_string();
        let uid = cached.metadata.uid.clone();
        let jobs: Vec<Arc<Job>> = self
            .jobs
            .namespace(&ns)
            .list(&api::labels::Selector::everything())
            .into_iter()
            .filter(|j| controller_of(&j.metadata).is_some_and(|r| Some(&r.uid) == uid.as_ref()))
            .collect();
        let mut cj = (*cached).clone();
        let (requeue, mut changed) = self.sync_cronjob(&mut cj, &jobs).await?;
        let refs: Vec<&Job> = jobs.iter().map(|j| j.as_ref()).collect();
        for job in decide::jobs_over_history_limits(&cj, &refs) {
            changed |= self.delete_job(&mut cj, job).await;
        }
        if changed {
            let api: Api<CronJob> = self.client.api(Some(&ns));
            let name = cj.metadata.name.clone().unwrap_or_default();
            match api.replace_status(&name, &cj).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => return Ok(None),
                Err(e) => return Err(Error::api("update cronjob status", e)),
            }
        }
        Ok(requeue)
    }

    /// `syncCronJob`: returns when to look again and whether the status changed.
    async fn sync_cronjob(
        &self,
        cj: &mut CronJob,
        jobs: &[Arc<Job>],
    ) -> Result<(Option<Duration>, bool)> {
        let now = self.clock.now();
        let ns = cj.metadata.namespace.clone().unwrap_or_default();
        let jobs_api: Api<Job> = self.client.api(Some(&ns));
        let mut changed = false;

        for job in jobs {
            let juid = job.metadata.uid.as_deref();
            let found = in_active_list(cj, juid);
            let job_name = job.metadata.name.as_deref().unwrap_or_default();
            match decide::finished(job) {
                None if !found => {
                    // Maybe our status update is not in the cache yet: ask the apiserver.
                    let api: Api<CronJob> = self.client.api(Some(&ns));
                    let name = cj.metadata.name.clone().unwrap_or_default();
                    if let Ok(fresh) = api.get(&name).await {
                        if in_active_list(&fresh, juid) {
                            *cj = fresh;
                            continue;
                        }
                    }
                    self.event(
                        cj,
                        EventType::Warning,
                        "UnexpectedJob",
                        &format!(
                            "Saw a job that the controller did not create or forgot: {job_name}"
                        ),
                    );
                }
                None => {}
                Some(condition) => {
                    if found {
                        remove_from_active(cj, juid);
                        self.event(
                            cj,
                            EventType::Normal,
                            "SawCompletedJob",
                            &format!("Saw completed job: {job_name}, condition: {condition}"),
                        );
                        changed = true;
                    }
                    if condition == "Complete" {
                        let completed = job.status.as_ref().and_then(|s| s.completion_time.clone());
                        let status = cj.status.get_or_insert_with(Default::default);
                        let newer = match (&status.last_successful_time, &completed) {
                            (None, Some(_)) => true,
                            (Some(last), Some(c)) => c.0 > last.0,
                            _ => false,
                        };
                        if newer {
                            status.last_successful_time = completed;
                            changed = true;
                        }
                    }
                }
            }
        }
        // Active references whose Job is gone (asked of the apiserver, not the cache).
        let children: Vec<Option<&str>> = jobs.iter().map(|j| j.metadata.uid.as_deref()).collect();
        let missing: Vec<ObjectReference> = active(cj)
            .iter()
            .filter(|r| !children.contains(&r.uid.as_deref()))
            .cloned()
            .collect();
        for r in missing {
            let name = r.name.clone().unwrap_or_default();
            match jobs_api.get(&name).await {
                Err(e) if e.is_not_found() => {
                    self.event(
                        cj,
                        EventType::Normal,
                        "MissingJob",
                        &format!("Active job went missing: {name}"),
                    );
                    remove_from_active(cj, r.uid.as_deref());
                    changed = true;
                }
                Err(e) => return Err(Error::api("get job", e)),
                Ok(_) => {}
            }
        }

        if cj.metadata.deletion_timestamp.is_some() {
            return Ok((None, changed));
        }
        let tz = match decide::time_zone(cj) {
            Ok(tz) => tz,
            Err(e) => {
                let zone = cj
                    .spec
                    .as_ref()
                    .and_then(|s| s.time_zone.clone())
                    .unwrap_or_default();
                self.event(
                    cj,
                    EventType::Warning,
                    "UnknownTimeZone",
                    &format!("invalid timeZone: {zone:?}: {e}"),
                );
                return Ok((None, changed));
            }
        };
        let spec = cj.spec.clone().unwrap_or_default();
        if spec.suspend == Some(true) {
            return Ok((None, changed));
        }
        if spec.schedule.contains("TZ") {
            self.event(
                cj,
                EventType::Warning,
                "UnsupportedSchedule",
                &format!(
                    "CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
                    spec.schedule
                ),
            );
        }
        let sched = match api::cron::parse(&spec.schedule) {
            Ok(s) => s,
            Err(e) => {
                self.event(
                    cj,
                    EventType::Warning,
                    "UnparseableSchedule",
                    &format!("unparseable schedule: {:?} : {e}", spec.schedule),
                );
                return Ok((None, changed));
            }
        };
        let earliest = decide::earliest_time(cj, now);
        let (scheduled, missed) = decide::most_recent_schedule(&sched, &tz, earliest, now);
        if missed > decide::MAX_MISSED {
            self.event(
                cj,
                EventType::Warning,
                "TooManyMissedTimes",
                &format!("too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"),
            );
        }
        let next_after = |from| decide::until_next(&sched, &tz, from, now);
        let Some(scheduled) = scheduled else {
            return Ok((next_after(earliest), changed));
        };
        if decide::too_late(cj, scheduled, now) {
            self.event(
                cj,
                EventType::Warning,
                "MissSchedule",
                &format!(
                    "Missed scheduled time to start a job: {}",
                    decide::rfc1123z(scheduled)
                ),
            );
            return Ok((next_after(scheduled), changed));
        }
        let name = decide::job_name(cj.metadata.name.as_deref().unwrap_or_default(), scheduled);
        let last = cj
            .status
            .as_ref()
            .and_then(|s| s.last_schedule_time.as_ref())
            .map(|t| t.0);
        if active(cj)
            .iter()
            .any(|r| r.name.as_deref() == Some(name.as_str()))
            || last == Some(scheduled)
        {
            return Ok((next_after(scheduled), changed));
        }
        match spec.concurrency_policy.as_deref() {
            Some("Forbid") if !active(cj).is_empty() => {
                self.event(
                    cj,
                    EventType::Normal,
                    "JobAlreadyActive",
                    "Not starting job because prior execution is running and concurrency policy is Forbid",
                );
                return Ok((next_after(scheduled), changed));
            }
            Some("Replace") => {
                for r in active(cj).to_vec() {
                    let job_name = r.name.clone().unwrap_or_default();
                    let job = match jobs_api.get(&job_name).await {
                        Ok(j) => j,
                        Err(e) => {
                            self.event(
                                cj,
                                EventType::Warning,
                                "FailedGet",
                                &format!("Get job: {e}"),
                            );
                            return Err(Error::api("get job", e));
                        }
                    };
                    if !self.delete_job(cj, &job).await {
                        return Err(Error::Start(format!(
                            "could not replace job {ns}/{job_name}"
                        )));
                    }
                    changed = true;
                }
            }
            _ => {}
        }

        let want = decide::job_from_template(cj, scheduled, &tz);
        let created = match jobs_api.create(&want).await {
            Ok(job) => {
                self.event(
                    cj,
                    EventType::Normal,
                    "SuccessfulCreate",
                    &format!("Created job {name}"),
                );
                job
            }
            Err(e) if e.is_already_exists() => {
                let job = jobs_api
                    .get(&name)
                    .await
                    .map_err(|e| Error::api("get job", e))?;
                let ours = controller_of(&job.metadata)
                    .is_some_and(|r| Some(&r.uid) == cj.metadata.uid.as_ref());
                if !ours || in_active_list(cj, job.metadata.uid.as_deref()) {
                    return Ok((None, changed));
                }
                job
            }
            Err(e) => {
                self.event(
                    cj,
                    EventType::Warning,
                    "FailedCreate",
                    &format!("Error creating job: {e}"),
                );
                return Err(Error::api("create job", e));
            }
        };
        let status = cj.status.get_or_insert_with(Default::default);
        status
            .active
            .get_or_insert_with(Vec::new)
            .push(job_ref(&created));
        status.last_schedule_time = Some(Time(scheduled));
        Ok((next_after(scheduled), true))
    }

    /// `deleteJob`: the Job (background propagation) and its active reference; `false` if the
    /// delete failed (a `FailedDelete` event says why).
    async fn delete_job(&self, cj: &mut CronJob, job: &Job) -> bool {
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let api: Api<Job> = self.client.api(Some(&ns));
        let opts = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        match api.delete(&name, &opts).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                self.event(
                    cj,
                    EventType::Warning,
                    "FailedDelete",
                    &format!("Deleted job: {e}"),
                );
                return false;
            }
        }
        remove_from_active(cj, job.metadata.uid.as_deref());
        self.event(
            cj,
            EventType::Normal,
            "SuccessfulDelete",
            &format!("Deleted job {name}"),
        );
        true
    }

    /// Queues the CronJob controlling `job`, if any.
    fn enqueue_owner(&self, job: &Job) {
        let Some(owner) = controller_of(&job.metadata) else {
            return;
        };
        if owner.kind != "CronJob" {
            return;
        }
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let key = format!("{ns}/{}", owner.name);
        if let Some(cj) = self.cronjobs.get(&key) {
            if cj.metadata.uid.as_deref() == Some(owner.uid.as_str()) {
                self.queue.add(key);
            }
        }
    }
}

struct CronJobHandler(RateLimitingQueue<String>);

impl ResourceEventHandler<CronJob> for CronJobHandler {
    fn on_add(&self, obj: &Arc<CronJob>, _in_initial_list: bool) {
        self.0.add(meta_namespace_key(obj.as_ref()));
    }

    fn on_update(&self, _old: &Arc<CronJob>, new: &Arc<CronJob>) {
        self.0.add(meta_namespace_key(new.as_ref()));
    }

    fn on_delete(&self, _obj: DeletedObject<CronJob>) {}
}

struct JobHandler(Arc<Inner>);

impl ResourceEventHandler<Job> for JobHandler {
    fn on_add(&self, obj: &Arc<Job>, _in_initial_list: bool) {
        self.0.enqueue_owner(obj);
    }

    fn on_update(&self, _old: &Arc<Job>, new: &Arc<Job>) {
        self.0.enqueue_owner(new);
    }

    fn on_delete(&self, obj: DeletedObject<Job>) {
        self.0.enqueue_owner(obj.object());
    }
}
