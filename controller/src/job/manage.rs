//! Creating and deleting a Job's pods (`manageJob`, `deleteJobPods`, `deleteActivePods`).

use std::sync::Arc;

use client::record::EventType;
use client::{key_of_meta, Api, DeleteParams};
use futures::future::join_all;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::Pod;

use super::controller::{owner_ref, remove_finalizer_patch, to_std, Inner};
use super::decide;
use super::indexed;
use super::sync::SyncCtx;
use crate::cached_pod::CachedPod;
use crate::pod_util::is_pod_ready;
use crate::replication::manage::{batch_sizes, SLOW_START_INITIAL_BATCH_SIZE};
use crate::replication::ranking::pods_to_delete;
use crate::{Error, Result};

impl Inner {
    /// `deleteActivePods`: delete (keeping finalizers; counting removes them). Returns
    /// (ready deleted, deleted, first error).
    pub(super) async fn delete_active_pods(&self, ctx: &SyncCtx) -> (i32, i32, Option<Error>) {
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
    pub(super) async fn delete_job_pods(
        &self,
        ctx: &SyncCtx,
        victims: &[Arc<CachedPod>],
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
    pub(super) async fn manage_job(
        &self,
        ctx: &mut SyncCtx,
    ) -> std::result::Result<i32, (i32, Error)> {
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
            indexed::duplicated_index_pods(&ctx.active_pods, completions).0
        } else {
            Vec::new()
        };
        if victims.len() < rm_at_least {
            let kept: Vec<Arc<CachedPod>> = ctx
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
            let mut busy = indexed::active_indexes(&ctx.active_pods, completions);
            if decide::only_replace_failed_pods(&job) {
                let terminating: Vec<Arc<CachedPod>> = ctx
                    .pods
                    .iter()
                    .filter(|p| crate::pod_util::is_pod_terminating(p))
                    .cloned()
                    .collect();
                busy.extend(indexed::active_indexes(&terminating, completions));
            }
            let mut pending = indexed::first_pending_indexes(
                diff,
                completions,
                &ctx.succeeded_indexes,
                ctx.failed_indexes.as_ref(),
                &busy,
            );
            if decide::backoff_limit_per_index(&job).is_some() {
                let (ready, waits): (Vec<i32>, Vec<i32>) = pending.iter().partition(|ix| {
                    indexed::remaining_backoff_for_index(
                        ctx.delayed.get(ix).map(|p| p.as_ref()),
                        now,
                    ) <= SignedDuration::ZERO
                });
                if ready.is_empty() {
                    if let Some(min) = waits
                        .iter()
                        .map(|ix| {
                            indexed::remaining_backoff_for_index(
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
    pub(super) async fn create_pods(
        &self,
        ctx: &SyncCtx,
        indexes: &[Option<i32>],
    ) -> (i32, Option<Error>) {
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
                    indexed::index_failure_annotations(job, last)
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
                                &format!("Error creating: {}", e.api_message()),
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
