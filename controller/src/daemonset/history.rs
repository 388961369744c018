//! A DaemonSet's history through the API (upstream `update.go`: `constructHistory`,
//! `controlledHistories`, `snapshot`, `dedupCurHistories`).
//!
//! Each sync finds the revisions the DaemonSet controls (adopting matching orphans, releasing
//! its own that stopped matching), splits them into the one matching the current template and
//! the old ones, and makes sure the current one exists with the highest revision number:
//! created if missing (a name taken by another template bumps `status.collisionCount` and fails
//! the sync, to be retried with the new hash), renumbered if an older one became current again
//! (a rollback), deduplicated if several match (pods relabelled to the kept one's hash first).
//! Pure choices are in [`super::revisions`]; adoption, release, renumbering and deletion go
//! through the shared [`crate::history::History`] (upstream's `crControl` and
//! `ControllerRevisionControllerRefManager`). Creation is the DaemonSet's own (`snapshot`): its
//! name hashes the pod template, and a collision is counted in the DaemonSet's status.

use std::sync::Arc;

use api::labels::Selector;
use client::{Api, Patch};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::Pod;

use super::controller::{owner_ref, Inner};
use super::placement::CONTROLLER_REVISION_HASH_LABEL;
use super::revisions::{keep_of_duplicates, matches, new_revision};
use crate::cached_pod::CachedPod;
use crate::history::next_revision;
use crate::pod_util::controller_of;
use crate::{Error, Result};

impl Inner {
    fn revisions_api(&self, ns: &str) -> Api<ControllerRevision> {
        self.client.api(Some(ns))
    }

    /// `controlledHistories`: ClaimControllerRevisions over every revision in the namespace.
    async fn controlled_histories(
        &self,
        ds: &DaemonSet,
        selector: &Selector,
    ) -> Result<Vec<ControllerRevision>> {
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let mut out = Vec::new();
        let mut rechecked = false;
        for cr in self.revisions.namespace(&ns).list(&Selector::everything()) {
            let matching = selector.matches(cr.metadata.labels.as_ref());
            match controller_of(&cr.metadata) {
                Some(r) if r.uid != uid => {}
                Some(_) if matching => out.push((*cr).clone()),
                Some(_) => {
                    self.history.release(&uid, &cr).await?;
                }
                None if !matching || cr.metadata.deletion_timestamp.is_some() => {}
                None => {
                    if !rechecked {
                        self.recheck_not_deleted(ds).await?;
                        rechecked = true;
                    }
                    match self.history.adopt(&owner_ref(ds), &cr).await {
                        Ok(adopted) => out.push(adopted),
                        Err(crate::history::Error::Api { source, .. }) if source.is_not_found() => {
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Ok(out)
    }

    /// `constructHistory`: the current revision and the old ones.
    pub(super) async fn construct_history(
        &self,
        ds: &DaemonSet,
        selector: &Selector,
    ) -> Result<(ControllerRevision, Vec<ControllerRevision>)> {
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let api = self.revisions_api(&ns);
        let (mut current, mut old) = (Vec::new(), Vec::new());
        for mut cr in self.controlled_histories(ds, selector).await? {
            let labelled = cr
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(CONTROLLER_REVISION_HASH_LABEL));
            if !labelled {
                // Revisions of old controllers: the name stands in for the hash.
                let name = cr.metadata.name.clone().unwrap_or_default();
                cr.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert(CONTROLLER_REVISION_HASH_LABEL.into(), name.clone());
                cr = api
                    .replace(&name, &cr)
                    .await
                    .map_err(|e| Error::api("label controller revision", e))?;
            }
            if matches(ds, &cr) {
                current.push(cr);
            } else {
                old.push(cr);
            }
        }
        let next = next_revision(&old);
        let cur = match current.len() {
            0 => self.snapshot(ds, next).await?,
            _ => {
                let cur = self.dedup_current(ds, &current).await?;
                if cur.revision < next {
                    self.history.update(&cur, next).await?
                } else {
                    cur
                }
            }
        };
        Ok((cur, old))
    }

    /// `snapshot`: create the current revision; on a name collision with another template bump
    /// `status.collisionCount` and fail (the next sync hashes anew).
    async fn snapshot(&self, ds: &DaemonSet, revision: i64) -> Result<ControllerRevision> {
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let api = self.revisions_api(&ns);
        let cr = new_revision(ds, revision, owner_ref(ds));
        let name = cr.metadata.name.clone().unwrap_or_default();
        let err = match api.create(&cr).await {
            Ok(created) => return Ok(created),
            Err(e) if e.is_already_exists() => e,
            Err(e) => return Err(Error::api("create controller revision", e)),
        };
        let existing = api
            .get(&name)
            .await
            .map_err(|e| Error::api("get controller revision", e))?;
        if matches(ds, &existing) {
            return Ok(existing);
        }
        let ds_name = ds.metadata.name.as_deref().unwrap_or_default();
        let ds_api: Api<DaemonSet> = self.client.api(Some(&ns));
        let mut fresh = ds_api
            .get(ds_name)
            .await
            .map_err(|e| Error::api("get daemon set", e))?;
        let count = |d: &DaemonSet| d.status.as_ref().and_then(|s| s.collision_count);
        if count(&fresh) != count(ds) {
            // Our collision count was stale: no bump, just retry.
            return Err(Error::api("create controller revision", err));
        }
        let status = fresh.status.get_or_insert_with(Default::default);
        status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
        ds_api
            .replace_status(ds_name, &fresh)
            .await
            .map_err(|e| Error::api("update collision count", e))?;
        tracing::info!(daemonset = ds_name, "hash collision: bumped collisionCount");
        Err(Error::api("create controller revision", err))
    }

    /// `dedupCurHistories`: keep the highest-numbered matching revision; relabel pods of the
    /// others to its hash, then delete the others.
    async fn dedup_current(
        &self,
        ds: &DaemonSet,
        current: &[ControllerRevision],
    ) -> Result<ControllerRevision> {
        let Some(keep) = keep_of_duplicates(current).cloned() else {
            return Err(Error::Claim("no current revision".into()));
        };
        if current.len() == 1 {
            return Ok(keep);
        }
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let keep_hash = keep
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL))
            .cloned()
            .unwrap_or_default();
        let pods_api: Api<Pod> = self.client.api(Some(&ns));
        let uid = ds.metadata.uid.clone();
        let ours: Vec<Arc<CachedPod>> = self
            .pods
            .namespace(&ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|p| controller_of(&p.metadata).is_some_and(|r| Some(&r.uid) == uid.as_ref()))
            .collect();
        for dup in current
            .iter()
            .filter(|c| c.metadata.name != keep.metadata.name)
        {
            for pod in &ours {
                let hash = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL));
                if hash != Some(&keep_hash) {
                    let patch = Patch::Merge(serde_json::json!({
                        "metadata": {"labels": {CONTROLLER_REVISION_HASH_LABEL: keep_hash}}
                    }));
                    let name = pod.metadata.name.as_deref().unwrap_or_default();
                    match pods_api.patch(name, &patch).await {
                        Ok(_) => {}
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(Error::api("relabel daemon pod", e)),
                    }
                }
            }
            self.history.delete(dup).await?;
        }
        Ok(keep)
    }
}
