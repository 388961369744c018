//! One StatefulSet sync (upstream `StatefulSetController.sync` and
//! `defaultStatefulSetControl.UpdateStatefulSet`), in its steps:
//!
//! 1. adopt orphan ControllerRevisions that match the selector;
//! 2. claim pods: adopt matching orphans named `<set>-<n>`, release ours that no longer match;
//! 3. revisions: the update revision is the set's template (an equal older revision is renumbered
//!    to the top, as a rollback; otherwise a new one is created, bumping `collisionCount` on
//!    name clashes); the current one is `status.currentRevision` (or the update one at first);
//! 4. plan ([`super::plan`]) and perform the steps, stopping at the first failure;
//! 5. write the status if it changed (completing a finished rolling update);
//! 6. delete non-live revisions beyond `revisionHistoryLimit` (default 10), oldest first.
//!
//! With `minReadySeconds` and pods not yet available, the key comes back that much later.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::{split_meta_namespace_key, Api, Patch};
use futures::future::join_all;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;

use super::controller::Inner;
use super::identity::{
    apply_revision, is_member_of, min_ready_seconds, new_revision, owner_ref, pod_revision,
    replicas,
};
use super::plan::{self, complete_rolling_update, inconsistent_status, Plan, Snapshot, Step};
use crate::cached_pod::CachedPod;
use crate::history::{equal_revision, find_equal_revisions, next_revision, sort_revisions};
use crate::pod_util::controller_of;
use crate::replication::claim::{self, adopt_patch, release_patch, ClaimAction, ClaimOwner};
use crate::{Error, Result};

/// Default `spec.revisionHistoryLimit` (apps/v1).
const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// Tries of a status write on conflict (`retry.DefaultRetry.Steps`... `DefaultBackoff`: 4).
const STATUS_TRIES: usize = 4;
/// Largest burst of concurrent pod requests (`MaxBatchSize`).
const MAX_BATCH_SIZE: usize = 500;

impl Inner {
    /// Sync one key; `Some(d)`: look again after `d`.
    pub(super) async fn sync(&self, key: &str) -> Result<Option<Duration>> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(None);
        };
        let Some(set) = self.sets.namespace(ns).get(name) else {
            return Ok(None);
        };
        let selector =
            match api::labels::label_selector_as_selector(set.spec.as_ref().map(|s| &s.selector)) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(statefulset = key, error = %e, "invalid selector");
                    return Ok(None);
                }
            };
        self.adopt_orphan_revisions(&set, &selector).await?;
        let pods = self.claim_pods(&set, &selector).await?;
        let status = self.update_stateful_set(&set, &selector, pods).await?;
        let min_ready = min_ready_seconds(&set);
        let unavailable = status.available_replicas.unwrap_or(0) != replicas(&set);
        Ok((min_ready > 0 && unavailable)
            .then(|| Duration::from_secs(u64::try_from(min_ready).unwrap_or(0))))
    }

    /// `canAdoptFunc`: a fresh read says the set is still this one and not being deleted.
    async fn can_adopt(&self, set: &StatefulSet) -> Result<()> {
        let (ns, name) = (
            set_ns(set),
            set.metadata.name.as_deref().unwrap_or_default(),
        );
        let fresh = self
            .client
            .api::<StatefulSet>(Some(ns))
            .get(name)
            .await
            .map_err(|e| Error::api("get statefulset", e))?;
        if fresh.metadata.uid != set.metadata.uid {
            return Err(Error::Claim(format!(
                "original StatefulSet {ns}/{name} is gone: got uid {}, wanted {}",
                fresh.metadata.uid.unwrap_or_default(),
                set.metadata.uid.clone().unwrap_or_default()
            )));
        }
        if fresh.metadata.deletion_timestamp.is_some() {
            return Err(Error::Claim(format!(
                "{ns}/{name} has just been deleted at {:?}",
                fresh.metadata.deletion_timestamp
            )));
        }
        Ok(())
    }

    /// `adoptOrphanRevisions`.
    async fn adopt_orphan_revisions(&self, set: &StatefulSet, selector: &Selector) -> Result<()> {
        let uid = set.metadata.uid.as_deref().unwrap_or_default();
        let orphans: Vec<_> = self
            .history
            .list(set_ns(set), uid, selector)
            .into_iter()
            .filter(|r| controller_of(&r.metadata).is_none())
            .collect();
        if orphans.is_empty() {
            return Ok(());
        }
        self.can_adopt(set).await?;
        let owner = owner_ref(set);
        for r in orphans {
            self.history.adopt(&owner, &r).await?;
        }
        Ok(())
    }

    /// `getPodsForStatefulSet`: the set's pods after adoption and release.
    async fn claim_pods(
        &self,
        set: &StatefulSet,
        selector: &Selector,
    ) -> Result<Vec<Arc<CachedPod>>> {
        let ns = set_ns(set);
        let uid = set.metadata.uid.as_deref().unwrap_or_default();
        let owner = ClaimOwner {
            uid,
            deleting: set.metadata.deletion_timestamp.is_some(),
            selector,
        };
        let api: Api<Pod> = self.client.api(Some(ns));
        let mut claimed = Vec::new();
        let mut checked = false;
        for pod in self.pods.namespace(ns).list(&Selector::everything()) {
            let action = if is_member_of(set, &pod) {
                claim::decide(owner, &pod)
            } else {
                // Not named for this set: never adopted; released if it is ours.
                match controller_of(&pod.metadata) {
                    Some(r) if r.uid == uid && !owner.deleting => ClaimAction::Release,
                    _ => ClaimAction::Ignore,
                }
            };
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
            match action {
                ClaimAction::Claimed => claimed.push(pod),
                ClaimAction::Ignore => {}
                ClaimAction::Adopt | ClaimAction::Release if !checked => {
                    self.can_adopt(set).await?;
                    checked = true;
                    if let Some(p) = self
                        .claim_one(&api, set, &pod_name, &pod_uid, action)
                        .await?
                    {
                        claimed.push(p);
                    }
                }
                ClaimAction::Adopt | ClaimAction::Release => {
                    if let Some(p) = self
                        .claim_one(&api, set, &pod_name, &pod_uid, action)
                        .await?
                    {
                        claimed.push(p);
                    }
                }
            }
        }
        Ok(claimed)
    }

    /// Adopt (returns the adopted pod) or release one pod.
    async fn claim_one(
        &self,
        api: &Api<Pod>,
        set: &StatefulSet,
        pod_name: &str,
        pod_uid: &str,
        action: ClaimAction,
    ) -> Result<Option<Arc<CachedPod>>> {
        let patch = if action == ClaimAction::Adopt {
            adopt_patch(&owner_ref(set), pod_uid)
        } else {
            release_patch(set.metadata.uid.as_deref().unwrap_or_default(), pod_uid)
        };
        match api.patch(pod_name, &Patch::Strategic(patch)).await {
            Ok(p) if action == ClaimAction::Adopt => Ok(Some(Arc::new(CachedPod::from(p)))),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() || (action == ClaimAction::Release && e.is_invalid()) => {
                Ok(None)
            }
            Err(e) => Err(Error::api("claim pod", e)),
        }
    }

    /// `getStatefulSetRevisions`: (current, update, collisionCount).
    async fn revisions(
        &self,
        set: &StatefulSet,
        revisions: &[Arc<ControllerRevision>],
    ) -> Result<(ControllerRevision, ControllerRevision, i32)> {
        let mut collisions = set
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let wanted = new_revision(set, next_revision(revisions), collisions);
        let equal = find_equal_revisions(revisions, &wanted);
        let update = match (equal.last(), revisions.last()) {
            (Some(eq), Some(last)) if equal_revision(last, eq) => (**last).clone(),
            (Some(eq), _) => self.history.update(eq, wanted.revision).await?,
            (None, _) => {
                let name = set.metadata.name.as_deref().unwrap_or_default();
                self.history
                    .create(name, set_ns(set), &wanted, &mut collisions)
                    .await?
            }
        };
        let current_name = set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.as_deref());
        let current = revisions
            .iter()
            .find(|r| r.metadata.name.as_deref() == current_name && current_name.is_some())
            .map_or_else(|| update.clone(), |r| (**r).clone());
        Ok((current, update, collisions))
    }

    /// `UpdateStatefulSet`: revisions, plan, steps, status, history.
    async fn update_stateful_set(
        &self,
        set: &StatefulSet,
        selector: &Selector,
        pods: Vec<Arc<CachedPod>>,
    ) -> Result<StatefulSetStatus> {
        let uid = set.metadata.uid.as_deref().unwrap_or_default();
        let mut revisions = self.history.list(set_ns(set), uid, selector);
        sort_revisions(&mut revisions);
        let (current, update, collisions) = self.revisions(set, &revisions).await?;
        let bad = || {
            Error::Claim(format!(
                "controller revision {:?} holds no pod template",
                update.metadata.name
            ))
        };
        let current_set = apply_revision(set, &current).ok_or_else(bad)?;
        let update_set = apply_revision(set, &update).ok_or_else(bad)?;
        let (current_name, update_name) = (
            current.metadata.name.clone().unwrap_or_default(),
            update.metadata.name.clone().unwrap_or_default(),
        );
        let ns = set_ns(set).to_string();
        let lookup = |name: &str| self.claims.namespace(&ns).get(name);
        let plan = plan::plan(&Snapshot {
            set,
            current_set: &current_set,
            update_set: &update_set,
            current_revision: &current_name,
            update_revision: &update_name,
            collision_count: collisions,
            pods: &pods,
            claim: &lookup,
            now: self.clock.now(),
        });
        let (mut status, steps_result) = self.perform(set, &update_set, plan).await;
        let status_result = self.write_status(set, &mut status).await;
        let history_result = self
            .truncate_history(set, &pods, &revisions, &current_name, &update_name)
            .await;
        steps_result.and(status_result).and(history_result)?;
        Ok(status)
    }

    /// Perform the plan's steps in order, stopping at the first failure. In burst mode the
    /// replica steps go in slow-start batches (1, 2, 4, … up to 500).
    async fn perform(
        &self,
        set: &StatefulSet,
        update_set: &StatefulSet,
        plan: Plan,
    ) -> (StatefulSetStatus, Result<()>) {
        let Plan {
            mut status,
            steps,
            monotonic,
        } = plan;
        let mut steps = steps.into_iter().peekable();
        if !monotonic {
            let mut batch = 1;
            loop {
                let mut group = Vec::new();
                while group.len() < batch {
                    match steps.peek() {
                        Some(s) if is_replica_step(s) => group.extend(steps.next()),
                        _ => break,
                    }
                }
                if group.is_empty() {
                    break;
                }
                let results = join_all(group.iter().map(|s| self.step(set, update_set, s))).await;
                if let Some(e) = results.into_iter().find_map(|r| r.err()) {
                    return (status, Err(e));
                }
                batch = (batch * 2).min(MAX_BATCH_SIZE);
            }
        }
        for step in steps {
            let rolling = matches!(step, Step::Delete(_, plan::DeleteReason::Update));
            match self.step(set, update_set, &step).await {
                Ok(()) if rolling => {
                    let c = status.current_replicas.unwrap_or(0);
                    status.current_replicas = Some(c - 1);
                }
                Ok(()) => {}
                Err(e) => return (status, Err(e)),
            }
        }
        (status, Ok(()))
    }

    async fn step(&self, set: &StatefulSet, update_set: &StatefulSet, step: &Step) -> Result<()> {
        match step {
            Step::Create { pod, view } => self.create_pod(set, pod, view).await,
            Step::CreateClaims(pod) => self.create_missing_claims(set, pod).await,
            Step::Update(pod) => self.update_pod(update_set, pod).await,
            Step::FixClaims(pod) => self.fix_condemned_claims(update_set, pod).await,
            Step::Delete(pod, why) => {
                tracing::debug!(pod = ?pod.metadata.name, ?why, "deleting stateful pod");
                self.delete_pod(set, pod).await.map(|_| ())
            }
        }
    }

    /// `updateStatefulSetStatus`: complete a finished rolling update; write if changed.
    async fn write_status(&self, set: &StatefulSet, status: &mut StatefulSetStatus) -> Result<()> {
        complete_rolling_update(set, status);
        if !inconsistent_status(set, status) {
            return Ok(());
        }
        let name = set.metadata.name.as_deref().unwrap_or_default();
        let api: Api<StatefulSet> = self.client.api(Some(set_ns(set)));
        let mut obj = set.clone();
        for attempt in 1..=STATUS_TRIES {
            obj.status = Some(status.clone());
            match api.replace_status(name, &obj).await {
                Ok(_) => return Ok(()),
                Err(e) if e.is_conflict() && attempt < STATUS_TRIES => {
                    match self.sets.namespace(set_ns(set)).get(name) {
                        Some(fresh)
                            if fresh.metadata.resource_version != obj.metadata.resource_version =>
                        {
                            obj = (*fresh).clone();
                        }
                        _ => {
                            obj = api
                                .get(name)
                                .await
                                .map_err(|e| Error::api("get statefulset", e))?
                        }
                    }
                }
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(Error::api("update statefulset status", e)),
            }
        }
        Ok(())
    }

    /// `truncateHistory`.
    async fn truncate_history(
        &self,
        set: &StatefulSet,
        pods: &[Arc<CachedPod>],
        revisions: &[Arc<ControllerRevision>],
        current: &str,
        update: &str,
    ) -> Result<()> {
        let mut live: BTreeSet<&str> = pods.iter().map(|p| pod_revision(p)).collect();
        live.insert(current);
        live.insert(update);
        let old: Vec<_> = revisions
            .iter()
            .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or_default()))
            .collect();
        let limit = set
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT);
        let Ok(limit) = usize::try_from(limit) else {
            return Ok(());
        };
        for r in old.iter().take(old.len().saturating_sub(limit)) {
            self.history.delete(r).await?;
        }
        Ok(())
    }
}

fn set_ns(set: &StatefulSet) -> &str {
    set.metadata.namespace.as_deref().unwrap_or_default()
}

/// Steps of the replicas phase (run in slow-start batches with `Parallel`).
fn is_replica_step(s: &Step) -> bool {
    !matches!(
        s,
        Step::FixClaims(_)
            | Step::Delete(
                _,
                plan::DeleteReason::ScaleDown | plan::DeleteReason::Update
            )
    )
}
