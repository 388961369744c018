//! Counting finished pods (`trackJobStatusAndRemoveFinalizers`): uncounted UIDs, finalizer
//! removal, counters, and the terminal condition, each step written before the next.

use std::collections::BTreeSet;
use std::sync::Arc;

use client::record::EventType;
use client::Api;
use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use super::controller::{remove_finalizer_patch, Inner};
use super::counting::{self, CountInput, CountPlan};
use super::decide;
use super::indexes::Intervals;
use super::sync::SyncCtx;
use crate::cached_pod::CachedPod;
use crate::{Error, Result};

impl Inner {
    // ---- counting

    /// `trackJobStatusAndRemoveFinalizers`: record finished pods as uncounted, remove their
    /// finalizers, move them into the counters, add the interim and then the terminal
    /// condition, writing the status whenever it must precede the next step.
    pub(super) async fn track_status_and_remove_finalizers(
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
        needs_flush |= counting::clean_uncounted(&mut ctx.job, &with_finalizer);
        let finishing = ctx.finished.is_some();
        let failing = ctx
            .finished
            .as_ref()
            .is_some_and(|c| c.type_ != "SuccessCriteriaMet");
        let plan = counting::plan_counting(&CountInput {
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
        needs_flush |= record_plan(ctx, &plan, self.now());
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
        if counting::clean_uncounted(&mut ctx.job, &with_finalizer) {
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
    pub(super) fn enact_finished(&self, ctx: &mut SyncCtx) -> bool {
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
    pub(super) fn record_finished(&self, ctx: &SyncCtx) {
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
    pub(super) async fn remove_finalizers(
        &self,
        key: &str,
        pods: &[Arc<CachedPod>],
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

    pub(super) fn finalizer_removal_observed(&self, key: &str, uid: &str) {
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
    pub(super) async fn write_status(&self, job: &Job) -> Result<Job> {
        let api: Api<Job> = self.client.api(job.metadata.namespace.as_deref());
        let name = job.metadata.name.as_deref().unwrap_or_default();
        let written = api
            .replace_status(name, job)
            .await
            .map_err(|e| Error::api("update job status", e))?;
        if let Some(rv) = written.metadata.resource_version.as_deref() {
            if let Ok(rv) = rv.parse::<u64>() {
                let key = client::key_of_meta(&written.metadata);
                self.written
                    .lock()
                    .insert(key, (rv, std::time::Instant::now()));
            }
        }
        Ok(written)
    }
}

/// Put the plan into the status: the new uncounted UIDs, the indexes, and the interim
/// condition (turning `ctx.finished` into the terminal one to add later). Returns whether the
/// status must be written before any finalizer goes.
fn record_plan(ctx: &mut SyncCtx, plan: &CountPlan, now: Timestamp) -> bool {
    let mut needs_flush = false;
    let indexed = decide::is_indexed(&ctx.job);
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
        status.succeeded = Some(i32::try_from(ctx.succeeded_indexes.total()).unwrap_or(i32::MAX));
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
    needs_flush
}
