//! The shared steps of a sync (upstream `sync.go`): find or create the new ReplicaSet and keep
//! revisions in step, scale ReplicaSets (proportionally while paused or resized mid-rollout), clean
//! up old revisions, and compute and write the Deployment's status.

use std::time::Duration;

use client::record::EventType;
use client::{Api, DeleteParams};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::controller::{object_ref, owner_ref, Inner, Rollout};
use super::progress::{self, calculate_status, rollout_status, status_differs};
use super::util::*;
use crate::pod_util::controller_of;
use crate::{Error, Result};

impl Inner {
    /// `getAllReplicaSetsAndSyncRevision`: (new RS, old RSs), creating the new one if asked, and
    /// bringing revision annotations of the new RS and the Deployment up to date.
    pub(super) async fn get_all(
        &self,
        ro: &mut Rollout,
        mut rss: Vec<ReplicaSet>,
        create: bool,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>)> {
        let new_idx = find_new_index(&ro.d, &rss);
        let existing = new_idx.map(|i| rss.remove(i));
        let mut old = rss;
        old.sort_by_key(by_creation);
        let new_revision = max_revision(&old) + 1;
        let new_rs = match existing {
            Some(rs) => Some(self.sync_existing_new_rs(ro, rs, new_revision).await?),
            None if create => Some(self.create_new_rs(ro, &old, new_revision).await?),
            None => None,
        };
        if let Some(rs) = new_rs.as_ref() {
            let rev = revision_of(rs.metadata.annotations.as_ref());
            if revision_of(ro.d.metadata.annotations.as_ref()) != rev {
                let mut d = ro.d.clone();
                d.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(REVISION_ANNOTATION.into(), rev.to_string());
                let name = d.metadata.name.clone().unwrap_or_default();
                ro.d = self
                    .deployments_api(&ro.d)
                    .replace(&name, &d)
                    .await
                    .map_err(|e| Error::api("update deployment revision", e))?;
            }
        }
        Ok((new_rs, old))
    }

    async fn sync_existing_new_rs(
        &self,
        ro: &mut Rollout,
        rs: ReplicaSet,
        revision: i64,
    ) -> Result<ReplicaSet> {
        let annotations = rs_annotations(&ro.d, rs.metadata.annotations.as_ref(), revision);
        let min_ready = ro.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
        let rs_min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds);
        let mut rs = rs;
        if rs.metadata.annotations.as_ref() != Some(&annotations)
            || min_ready.unwrap_or(0) != rs_min_ready.unwrap_or(0)
        {
            rs.metadata.annotations = Some(annotations);
            if let Some(s) = rs.spec.as_mut() {
                s.min_ready_seconds = min_ready;
            }
            rs = self.replace_rs(&rs).await?;
        }
        let st = ro.d.status.clone().unwrap_or_default();
        if progress::progress_deadline(&ro.d).is_some()
            && progress::get_condition(&st, progress::PROGRESSING).is_none()
        {
            let mut st = st;
            let msg = format!(
                "Found new replica set \"{}\"",
                rs.metadata.name.as_deref().unwrap_or_default()
            );
            progress::set_condition(
                &mut st,
                progress::condition(
                    progress::PROGRESSING,
                    "True",
                    progress::FOUND_NEW_RS,
                    msg,
                    self.now(),
                ),
            );
            self.write_status(ro, st).await?;
        }
        Ok(rs)
    }

    async fn create_new_rs(
        &self,
        ro: &mut Rollout,
        old: &[ReplicaSet],
        revision: i64,
    ) -> Result<ReplicaSet> {
        let d = &ro.d;
        let spec = d.spec.clone().unwrap_or_default();
        let collision = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = compute_hash(&spec.template, collision);
        let mut template = spec.template.clone();
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let mut selector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let dname = d.metadata.name.clone().unwrap_or_default();
        let name = format!("{dname}-{hash}");
        let all_total: i32 = old.iter().map(rs_pods_bound).sum();
        let replicas = new_rs_new_replicas(d, all_total, 0);
        let mut annotations = rs_annotations(d, None, revision);
        set_replicas_annotations(d, &mut annotations);
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: d.metadata.namespace.clone(),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: Some(annotations),
                owner_references: Some(vec![owner_ref(d)]),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let api = self
            .client
            .api::<ReplicaSet>(d.metadata.namespace.as_deref());
        let created = match api.create(&rs).await {
            Ok(c) => c,
            Err(e) if e.is_already_exists() => {
                let existing = api
                    .get(&name)
                    .await
                    .map_err(|e| Error::api("get existing replica set", e))?;
                let ours = controller_of(&existing.metadata)
                    .is_some_and(|r| Some(r.uid.as_str()) == d.metadata.uid.as_deref());
                let same = existing
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|t| equal_ignore_hash(t, &spec.template));
                if ours && same {
                    // Our own earlier create that the cache had not shown yet.
                    return Ok(existing);
                }
                // A hash collision: bump collisionCount so the next attempt gets a new name.
                let mut st = d.status.clone().unwrap_or_default();
                st.collision_count = Some(collision.unwrap_or(0) + 1);
                tracing::info!(rs = %name, "pod-template hash collision; bumping collisionCount");
                self.write_status(ro, st).await?;
                return Err(Error::Claim(format!(
                    "hash collision on replica set {name}"
                )));
            }
            Err(e) => return Err(Error::api("create replica set", e)),
        };
        if replicas > 0 {
            self.recorder.event(
                &object_ref(&ro.d),
                EventType::Normal,
                "ScalingReplicaSet",
                &format!("Scaled up replica set {name} from 0 to {replicas}"),
            );
        }
        if progress::progress_deadline(&ro.d).is_some() {
            let mut st = ro.d.status.clone().unwrap_or_default();
            progress::set_condition(
                &mut st,
                progress::condition(
                    progress::PROGRESSING,
                    "True",
                    progress::NEW_RS_CREATED,
                    format!("Created new replica set \"{name}\""),
                    self.now(),
                ),
            );
            self.write_status(ro, st).await?;
        }
        Ok(created)
    }

    /// `scaleReplicaSet`: set replicas and the desired/max annotations; event on a size change.
    pub(super) async fn scale_rs(
        &self,
        ro: &Rollout,
        rs: &ReplicaSet,
        to: i32,
    ) -> Result<(bool, ReplicaSet)> {
        let from = rs_replicas(rs);
        let mut next = rs.clone();
        let ann_changed = set_replicas_annotations(
            &ro.d,
            next.metadata
                .annotations
                .get_or_insert_with(Default::default),
        );
        if from == to && !ann_changed {
            return Ok((false, next));
        }
        next.spec.get_or_insert_with(Default::default).replicas = Some(to);
        let written = self.replace_rs(&next).await?;
        if from != to {
            let dir = if to > from { "up" } else { "down" };
            let name = rs.metadata.name.as_deref().unwrap_or_default();
            self.recorder.event(
                &object_ref(&ro.d),
                EventType::Normal,
                "ScalingReplicaSet",
                &format!("Scaled {dir} replica set {name} from {from} to {to}"),
            );
        }
        Ok((from != to, written))
    }

    async fn replace_rs(&self, rs: &ReplicaSet) -> Result<ReplicaSet> {
        let api = self
            .client
            .api::<ReplicaSet>(rs.metadata.namespace.as_deref());
        api.replace(rs.metadata.name.as_deref().unwrap_or_default(), rs)
            .await
            .map_err(|e| Error::api("update replica set", e))
    }

    fn deployments_api(&self, d: &Deployment) -> Api<Deployment> {
        self.client
            .api::<Deployment>(d.metadata.namespace.as_deref())
    }

    pub(super) async fn write_status(&self, ro: &mut Rollout, st: DeploymentStatus) -> Result<()> {
        let mut d = ro.d.clone();
        d.status = Some(st);
        let name = d.metadata.name.clone().unwrap_or_default();
        ro.d = self
            .deployments_api(&ro.d)
            .replace_status(&name, &d)
            .await
            .map_err(|e| Error::api("update deployment status", e))?;
        Ok(())
    }

    /// `sync`: scaling (paused or a replicas change mid-rollout) without rollout progress.
    pub(super) async fn sync_scale(&self, ro: &mut Rollout, rss: Vec<ReplicaSet>) -> Result<()> {
        let (new_rs, mut old) = self.get_all(ro, rss, false).await?;
        let mut new_rs = new_rs;
        self.scale(ro, &mut new_rs, &mut old).await?;
        let paused = ro.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        if paused {
            self.cleanup(ro, &old).await?;
        }
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.extend(new_rs.as_ref());
        let st = calculate_status(&ro.d, &all, new_rs.as_ref(), self.now());
        if status_differs(ro.d.status.as_ref(), &st) {
            self.write_status(ro, st).await?;
        }
        Ok(())
    }

    /// `scale` (`sync.go`): runs on a scaling event or while paused, never as a rollout step.
    ///
    /// - one active RS (or none: the newest) takes the whole `spec.replicas`;
    /// - a saturated new RS (full size, scaled for this size, all available) zeroes the old ones;
    /// - otherwise, for `RollingUpdate`, the change is spread over the active RSs in proportion to
    ///   their size ([`proportional_scale`]), so a resize neither speeds up nor slows down the
    ///   rollout; every active RS is written with its new size and `desired`/`max-replicas`
    ///   annotations, largest first.
    ///
    /// `Recreate` never has two active RSs for long; if it does (a strategy switch mid-rollout),
    /// upstream leaves them as they are. Here their annotations are still brought up to date, which
    /// ends the scaling event so the Recreate rollout can proceed instead of stalling on it.
    pub(super) async fn scale(
        &self,
        ro: &Rollout,
        new_rs: &mut Option<ReplicaSet>,
        old: &mut [ReplicaSet],
    ) -> Result<()> {
        let desired = replicas(&ro.d);
        let active_old: Vec<usize> = (0..old.len())
            .filter(|i| rs_replicas(&old[*i]) > 0)
            .collect();
        let new_active = new_rs.as_ref().is_some_and(|r| rs_replicas(r) > 0);
        let n_active = active_old.len() + usize::from(new_active);
        if n_active <= 1 {
            // FindActiveOrLatest. Unlike upstream, an RS already at the right size is still
            // written when its annotations are stale, which ends the scaling event.
            if let Some(i) = active_old.first().copied().filter(|_| !new_active) {
                let (_, w) = self.scale_rs(ro, &old[i], desired).await?;
                old[i] = w;
            } else if let Some(rs) = new_rs.as_ref() {
                let (_, w) = self.scale_rs(ro, rs, desired).await?;
                *new_rs = Some(w);
            } else if let Some(last) = old.last_mut() {
                let (_, w) = self.scale_rs(ro, last, desired).await?;
                *last = w;
            }
            return Ok(());
        }
        if new_rs.as_ref().is_some_and(|rs| is_saturated(&ro.d, rs)) {
            for i in active_old {
                let (_, w) = self.scale_rs(ro, &old[i], 0).await?;
                old[i] = w;
            }
            return Ok(());
        }
        // Every RS of the Deployment, oldest first (the tie-break of the proportional order).
        // `None` stands for the new RS.
        let mut by_age: Vec<(Option<usize>, &ReplicaSet)> = old
            .iter()
            .enumerate()
            .map(|(i, rs)| (Some(i), rs))
            .chain(new_rs.as_ref().map(|rs| (None, rs)))
            .collect();
        by_age.sort_by_key(|(_, rs)| by_creation(rs));
        let sized: Vec<SizedRs> = by_age
            .iter()
            .map(|(_, rs)| SizedRs {
                replicas: rs_replicas(rs),
                max_replicas: max_replicas_annotation(rs),
            })
            .collect();
        let slots: Vec<Option<usize>> = by_age.into_iter().map(|(slot, _)| slot).collect();
        let sizes: Vec<(Option<usize>, i32)> = if is_recreate(&ro.d) {
            sized
                .iter()
                .enumerate()
                .filter(|(_, r)| r.replicas > 0)
                .map(|(k, r)| (slots[k], r.replicas))
                .collect()
        } else {
            let (max_surge, _) = surge_and_unavailable(&ro.d);
            let target = ScaleTarget {
                replicas: desired,
                max_surge,
                status_replicas: ro.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0),
            };
            proportional_scale(&sized, target)
                .into_iter()
                .map(|(k, n)| (slots[k], n))
                .collect()
        };
        for (slot, to) in sizes {
            match slot {
                Some(i) => {
                    let (_, w) = self.scale_rs(ro, &old[i], to).await?;
                    old[i] = w;
                }
                None => {
                    if let Some(rs) = new_rs.as_ref() {
                        let (_, w) = self.scale_rs(ro, rs, to).await?;
                        *new_rs = Some(w);
                    }
                }
            }
        }
        Ok(())
    }

    /// `cleanupDeployment`: delete the oldest fully scaled-down RSs beyond `revisionHistoryLimit`.
    pub(super) async fn cleanup(&self, ro: &Rollout, old: &[ReplicaSet]) -> Result<()> {
        let limit =
            ro.d.spec
                .as_ref()
                .and_then(|s| s.revision_history_limit)
                .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
                .max(0) as usize;
        let mut cleanable: Vec<&ReplicaSet> = old
            .iter()
            .filter(|r| r.metadata.deletion_timestamp.is_none())
            .collect();
        if cleanable.len() <= limit {
            return Ok(());
        }
        let diff = cleanable.len() - limit;
        cleanable.sort_by_key(|r| (revision_of(r.metadata.annotations.as_ref()), by_creation(r)));
        for rs in cleanable.into_iter().take(diff) {
            let st = rs.status.clone().unwrap_or_default();
            if st.replicas != 0
                || rs_replicas(rs) != 0
                || rs.metadata.generation > st.observed_generation
            {
                continue;
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            tracing::debug!(rs = %name, "cleaning up old replica set");
            let api = self
                .client
                .api::<ReplicaSet>(rs.metadata.namespace.as_deref());
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Error::api("delete old replica set", e)),
            }
        }
        Ok(())
    }

    /// `syncStatusOnly` (Deployment being deleted).
    pub(super) async fn sync_status_only(
        &self,
        ro: &mut Rollout,
        rss: &[ReplicaSet],
    ) -> Result<()> {
        let new_idx = find_new_index(&ro.d, rss);
        let all: Vec<&ReplicaSet> = rss.iter().collect();
        let st = calculate_status(&ro.d, &all, new_idx.map(|i| &rss[i]), self.now());
        if status_differs(ro.d.status.as_ref(), &st) {
            self.write_status(ro, st).await?;
        }
        Ok(())
    }

    pub(super) async fn sync_status_opt(
        &self,
        ro: &mut Rollout,
        new_rs: Option<&ReplicaSet>,
        old: &[ReplicaSet],
    ) -> Result<()> {
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.extend(new_rs);
        self.write_rollout_status(ro, &all, new_rs).await
    }

    pub(super) async fn sync_rollout_status(
        &self,
        ro: &mut Rollout,
        new_rs: &ReplicaSet,
        old: &[ReplicaSet],
    ) -> Result<()> {
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.push(new_rs);
        self.write_rollout_status(ro, &all, Some(new_rs)).await
    }

    /// `syncRolloutStatus`: write status when it changed; requeue for the progress deadline.
    async fn write_rollout_status(
        &self,
        ro: &mut Rollout,
        all: &[&ReplicaSet],
        new_rs: Option<&ReplicaSet>,
    ) -> Result<()> {
        let (st, requeue) = rollout_status(&ro.d, all, new_rs, self.now());
        if status_differs(ro.d.status.as_ref(), &st) {
            let timed_out = progress::get_condition(&st, progress::PROGRESSING)
                .is_some_and(|c| c.reason.as_deref() == Some(progress::TIMED_OUT));
            let was =
                ro.d.status
                    .as_ref()
                    .and_then(|s| progress::get_condition(s, progress::PROGRESSING))
                    .is_some_and(|c| c.reason.as_deref() == Some(progress::TIMED_OUT));
            if timed_out && !was {
                let name = new_rs
                    .and_then(|r| r.metadata.name.clone())
                    .unwrap_or_default();
                self.recorder.event(
                    &object_ref(&ro.d),
                    EventType::Warning,
                    progress::TIMED_OUT,
                    &format!("ReplicaSet \"{name}\" has timed out progressing."),
                );
            }
            self.write_status(ro, st).await?;
        }
        if let Some(after) = requeue {
            let after = Duration::try_from(after).unwrap_or(Duration::from_secs(1));
            self.queue.add_after(ro.key.clone(), after);
        }
        Ok(())
    }
}
