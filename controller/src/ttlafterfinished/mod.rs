//! The TTL-after-finished controller (`ttl-after-finished-controller`, alias
//! `ttl-after-finished`; upstream `pkg/controller/ttlafterfinished`, 1.33).
//!
//! A Job with `spec.ttlSecondsAfterFinished` whose `Complete` or `Failed` condition is True is
//! deleted once that condition's transition time plus the TTL has passed on the injected clock;
//! until then its key is queued again after the remaining time. Before deleting, the Job is read
//! again from the apiserver (not the cache), so a TTL just extended or a Job just restarted is
//! respected, and the delete carries the Job's UID as a precondition (a new Job under the same
//! name is never touched) with foreground propagation, as upstream, so the Job goes only after its
//! pods.

use std::sync::Arc;
use std::time::Duration;

use client::{
    key_of_meta, split_meta_namespace_key, Action, Api, Client, DeleteParams, DeletedObject,
    HandlerRegistration, Lister, Preconditions, PropagationPolicy, RateLimitingQueue,
    ResourceEventHandler, Runner, SharedIndexInformer,
};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::{Error, Result};

/// What the TTL says about a Job now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No TTL, not finished, or already being deleted.
    NotApplicable,
    /// Expired: delete it.
    Expired,
    /// Look again after this long.
    After(SignedDuration),
}

/// When the Job finished: the transition time of its True `Complete` or `Failed` condition
/// (`jobFinishTime`).
pub fn finish_time(job: &Job) -> Option<Timestamp> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// The TTL verdict at `now` (`processTTL` / `timeLeft`). A finish time in the future (clock
/// skew) just defers the deletion.
pub fn verdict(job: &Job, now: Timestamp) -> Verdict {
    if job.metadata.deletion_timestamp.is_some() {
        return Verdict::NotApplicable;
    }
    let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
        return Verdict::NotApplicable;
    };
    let Some(finished) = finish_time(job) else {
        return Verdict::NotApplicable;
    };
    let expire_at = finished
        .checked_add(SignedDuration::from_secs(i64::from(ttl)))
        .unwrap_or(finished);
    let left = expire_at.duration_since(now);
    if left <= SignedDuration::ZERO {
        Verdict::Expired
    } else {
        Verdict::After(left)
    }
}

struct Inner {
    client: Client,
    jobs: Lister<Job>,
    queue: RateLimitingQueue<String>,
    clock: Arc<dyn Clock>,
}

/// The TTL-after-finished controller.
pub struct TtlAfterFinishedController {
    inner: Arc<Inner>,
    registration: HandlerRegistration,
}

impl TtlAfterFinishedController {
    /// Build on the shared Job informer.
    pub fn new(client: Client, jobs: SharedIndexInformer<Job>, clock: Arc<dyn Clock>) -> Self {
        let inner = Arc::new(Inner {
            client,
            jobs: jobs.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("ttl_jobs_to_delete"),
            clock,
        });
        let registration = jobs.add_event_handler(Handler(inner.clone()));
        Self {
            inner,
            registration,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the cache, then run `workers` workers until `shutdown`
    /// (`--concurrent-ttl-after-finished-syncs`, 5).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let inner = self.inner.clone();
        Runner::new("ttl_after_finished")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &[&self.registration],
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        Ok::<_, Error>(match inner.process(&key).await? {
                            Some(after) => Action::RequeueAfter(after),
                            None => Action::AwaitChange,
                        })
                    }
                },
            )
            .await;
    }
}

fn to_std(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

impl Inner {
    /// `processJob`: delete the Job if its TTL expired (checked on the cache, then on a fresh
    /// read); `Some(d)`: look again after `d`.
    async fn process(&self, key: &str) -> Result<Option<Duration>> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(None);
        };
        let Some(cached) = self.jobs.namespace(ns).get(name) else {
            return Ok(None);
        };
        match verdict(&cached, self.clock.now()) {
            Verdict::NotApplicable => return Ok(None),
            Verdict::After(d) => return Ok(Some(to_std(d))),
            Verdict::Expired => {}
        }
        let api: Api<Job> = self.client.api(Some(ns));
        let fresh = match api.get(name).await {
            Ok(j) => j,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(Error::api("get job", e)),
        };
        match verdict(&fresh, self.clock.now()) {
            Verdict::NotApplicable => return Ok(None),
            Verdict::After(d) => return Ok(Some(to_std(d))),
            Verdict::Expired => {}
        }
        tracing::info!(
            job = key,
            "cleaning up job whose TTL after finished expired"
        );
        let opts = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &opts).await {
            Ok(()) => Ok(None),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(None),
            Err(e) => Err(Error::api("delete job", e)),
        }
    }

    fn enqueue_if_due(&self, job: &Job) {
        if verdict(job, self.clock.now()) != Verdict::NotApplicable {
            self.queue.add(key_of_meta(&job.metadata));
        }
    }
}

struct Handler(Arc<Inner>);

impl ResourceEventHandler<Job> for Handler {
    fn on_add(&self, obj: &Arc<Job>, _in_initial_list: bool) {
        self.0.enqueue_if_due(obj);
    }

    fn on_update(&self, _old: &Arc<Job>, new: &Arc<Job>) {
        self.0.enqueue_if_due(new);
    }

    fn on_delete(&self, _obj: DeletedObject<Job>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(ttl: Option<i32>, finished_at: Option<&str>) -> Job {
        let mut v = json!({"metadata": {"name": "pi", "namespace": "default", "uid": "u"},
                           "spec": {"template": {}}});
        if let Some(t) = ttl {
            v["spec"]["ttlSecondsAfterFinished"] = json!(t);
        }
        if let Some(at) = finished_at {
            v["status"] = json!({"conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": at},
                {"type": "Complete", "status": "True", "lastTransitionTime": at}
            ]});
        }
        serde_json::from_value(v).unwrap_or_default()
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn only_finished_jobs_with_a_ttl_expire() {
        let now = ts("2026-12-04T10:00:00Z");
        assert_eq!(
            verdict(&job(None, Some("2026-12-04T09:00:00Z")), now),
            Verdict::NotApplicable
        );
        assert_eq!(verdict(&job(Some(0), None), now), Verdict::NotApplicable);
        assert_eq!(
            verdict(&job(Some(0), Some("2026-12-04T10:00:00Z")), now),
            Verdict::Expired
        );
        assert_eq!(
            verdict(&job(Some(100), Some("2026-12-04T09:59:00Z")), now),
            Verdict::After(SignedDuration::from_secs(40))
        );
        let mut deleting = job(Some(0), Some("2026-12-04T09:00:00Z"));
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
        assert_eq!(verdict(&deleting, now), Verdict::NotApplicable);
    }

    #[test]
    fn a_finish_in_the_future_defers() {
        let now = ts("2026-12-04T10:00:00Z");
        assert_eq!(
            verdict(&job(Some(10), Some("2026-12-04T10:00:30Z")), now),
            Verdict::After(SignedDuration::from_secs(40))
        );
    }

    #[test]
    fn a_failed_condition_also_finishes() {
        let mut j = job(Some(5), None);
        j.status = serde_json::from_value(json!({"conditions": [
            {"type": "Failed", "status": "True", "lastTransitionTime": "2026-12-04T10:00:00Z"}
        ]}))
        .ok();
        assert_eq!(finish_time(&j), Some(ts("2026-12-04T10:00:00Z")));
    }
}
