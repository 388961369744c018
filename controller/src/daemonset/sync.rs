//! One DaemonSet sync (`syncDaemonSet`): construct the history (current revision and its hash),
//! then, once earlier creates and deletes have been observed, `manage` (one pod on every node
//! that should run one, none elsewhere, failed pods replaced after their back-off), a rolling
//! update step (`RollingUpdate`; `OnDelete` waits for the user's deletions) and the history
//! clean-up; finally the status. Pods are claimed first (adopting matching orphans, releasing
//! ours that stopped matching), with an uncached re-read of the DaemonSet before any adoption.

use std::collections::BTreeSet;
use std::sync::Arc;

use client::{split_meta_namespace_key, Api, DeleteParams, Patch};
use futures::future::join_all;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};

use super::controller::{owner_ref, Inner, BURST_REPLICAS};
use super::decide::{
    allows_surge, pods_should_be_on_node, rolling_update, status_counts,
    unscheduled_pods_without_node, DecideCtx, NodeToPods,
};
use super::placement::{
    create_pod_template, replace_node_name_affinity, target_node_name, template_generation,
    DaemonPlacement, CONTROLLER_REVISION_HASH_LABEL,
};
use super::revisions::revisions_to_delete;
use crate::cached_pod::CachedPod;
use crate::pod_util::phase;
use crate::replication::claim::{adopt_patch, decide, release_patch, ClaimAction, ClaimOwner};
use crate::replication::manage::{
    pod_from_template, slow_start_batch, SLOW_START_INITIAL_BATCH_SIZE,
};
use crate::{Error, Result};

/// `SelectingAllReason`.
pub const SELECTING_ALL: &str = "SelectingAll";

impl Inner {
    /// `syncDaemonSet`.
    pub(super) async fn sync(&self, key: &str) -> Result<()> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(());
        };
        let Some(ds) = self.daemonsets.namespace(ns).get(name) else {
            self.expectations.delete_expectations(key);
            return Ok(());
        };
        let nodes = self.nodes.list(&api::labels::Selector::everything());
        let selector =
            api::labels::label_selector_as_selector(ds.spec.as_ref().map(|s| &s.selector))?;
        if selector.is_empty() {
            self.event(
                &ds,
                true,
                SELECTING_ALL,
                "This daemon set is selecting all pods. A non-empty selector is required.",
            );
            return Ok(());
        }
        // Being deleted: its revisions may be gone already, so neither act nor report.
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let (cur, old) = self.construct_history(&ds, &selector).await?;
        let hash = cur
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL))
            .cloned()
            .unwrap_or_default();
        if !self.expectations.satisfied_expectations(key) {
            // Only the status; observedGeneration stays, this generation was not processed.
            return self
                .update_status(&ds, &selector, &nodes, &hash, false)
                .await;
        }
        let result = self
            .update_daemon_set(&ds, &selector, &nodes, &hash, key, &old)
            .await;
        let status = self
            .update_status(&ds, &selector, &nodes, &hash, true)
            .await;
        match (result, status) {
            (Err(e), Err(s)) => {
                tracing::warn!(daemonset = key, error = %s, "failed to update status");
                Err(e)
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    pub(super) fn ctx<'a>(&self, ds: &DaemonSet, hash: &'a str) -> DecideCtx<'a> {
        let observed = ds
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0);
        DecideCtx {
            hash,
            generation: template_generation(ds),
            min_ready_seconds: ds
                .spec
                .as_ref()
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0),
            allows_surge: allows_surge(ds),
            backoff_prefix: format!(
                "{}/{observed}",
                ds.metadata.uid.as_deref().unwrap_or_default()
            ),
            now: self.clock.now(),
        }
    }

    /// `updateDaemonSet`: manage, a rolling-update step, history clean-up.
    async fn update_daemon_set(
        &self,
        ds: &DaemonSet,
        selector: &api::labels::Selector,
        nodes: &[Arc<Node>],
        hash: &str,
        key: &str,
        old: &[k8s_openapi::api::apps::v1::ControllerRevision],
    ) -> Result<()> {
        self.manage(ds, selector, nodes, hash).await?;
        let strategy = ds
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|s| s.type_.as_deref())
            .unwrap_or("RollingUpdate");
        if self.expectations.satisfied_expectations(key) && strategy == "RollingUpdate" {
            self.rolling_update(ds, selector, nodes, hash).await?;
        }
        self.cleanup_history(ds, selector, old).await
    }

    /// `manage`.
    async fn manage(
        &self,
        ds: &DaemonSet,
        selector: &api::labels::Selector,
        nodes: &[Arc<Node>],
        hash: &str,
    ) -> Result<()> {
        // Terminal pods already being deleted do not hold their node (upstream passes `false`).
        let node_to_pods = self.nodes_to_daemon_pods(ds, selector, false).await?;
        let placement = DaemonPlacement::of(ds);
        let ctx = self.ctx(ds, hash);
        let (mut create, mut delete, mut events, mut retry) = (vec![], vec![], vec![], None);
        {
            let mut backoff = self.failed_pods_backoff.lock();
            for node in nodes {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                let d = pods_should_be_on_node(
                    name,
                    placement.should_run(node),
                    node_to_pods.get(name).map(Vec::as_slice),
                    &ctx,
                    &mut backoff,
                );
                if d.create {
                    create.push(name.to_string());
                }
                delete.extend(d.delete);
                events.extend(d.events);
                retry = match (retry, d.retry_after) {
                    (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
                    (a, b) => a.or(b),
                };
            }
        }
        for (warning, reason, message) in events {
            self.event(ds, warning, reason, &message);
        }
        if let Some(after) = retry {
            self.enqueue_after(ds, after);
        }
        let exists: BTreeSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        delete.extend(unscheduled_pods_without_node(
            |n| exists.contains(n),
            &node_to_pods,
        ));
        self.sync_nodes(ds, delete, create, hash).await
    }

    /// `rollingUpdate`.
    async fn rolling_update(
        &self,
        ds: &DaemonSet,
        selector: &api::labels::Selector,
        nodes: &[Arc<Node>],
        hash: &str,
    ) -> Result<()> {
        let mut node_to_pods = self.nodes_to_daemon_pods(ds, selector, false).await?;
        let placement = DaemonPlacement::of(ds);
        let mut should_run = BTreeSet::new();
        for node in nodes {
            if placement.should_run(node).0 {
                let name = node.metadata.name.clone().unwrap_or_default();
                node_to_pods.entry(name.clone()).or_default();
                should_run.insert(name);
            }
        }
        let ctx = self.ctx(ds, hash);
        let step = rolling_update(
            ds,
            &node_to_pods,
            should_run.len(),
            |n| should_run.contains(n),
            &ctx,
        );
        self.sync_nodes(ds, step.delete, step.create, hash).await
    }

    /// `syncNodes`: set expectations, create pods pinned to their nodes in slow-start batches,
    /// delete pods; at most [`BURST_REPLICAS`] of each.
    pub(super) async fn sync_nodes(
        &self,
        ds: &DaemonSet,
        mut delete: Vec<String>,
        mut create: Vec<String>,
        hash: &str,
    ) -> Result<()> {
        let key = client::key_of_meta(&ds.metadata);
        create.truncate(BURST_REPLICAS);
        delete.truncate(BURST_REPLICAS);
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.expectations
            .set_expectations(&key, as_i64(create.len()), as_i64(delete.len()));
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = self.client.api(Some(&ns));
        let spec = ds.spec.clone().unwrap_or_default();
        let template = create_pod_template(&spec.template, template_generation(ds), hash);
        let mut errors: Vec<Error> = Vec::new();

        let mut targets = create.iter();
        let mut attempted = 0usize;
        let (_, err) = slow_start_batch(create.len(), SLOW_START_INITIAL_BATCH_SIZE, || {
            let node = targets.next().cloned().unwrap_or_default();
            attempted += 1;
            let mut t = template.clone();
            if let Some(s) = t.spec.as_mut() {
                s.affinity = Some(replace_node_name_affinity(s.affinity.take(), &node));
            }
            let api = api.clone();
            let name = ds.metadata.name.clone().unwrap_or_default();
            let owner = owner_ref(ds);
            let ns = ns.clone();
            let key = &key;
            async move {
                let pod = pod_from_template(&t, &ns, &name, owner)?;
                match api.create_metadata(&pod).await {
                    Ok(meta) => {
                        let pod_name = meta.name.unwrap_or_default();
                        self.event(
                            ds,
                            false,
                            "SuccessfulCreate",
                            &format!("Created pod: {pod_name}"),
                        );
                        Ok(())
                    }
                    Err(e) => {
                        self.expectations.creation_observed(key);
                        self.event(
                            ds,
                            true,
                            "FailedCreate",
                            &format!("Error creating: {}", e.api_message()),
                        );
                        Err(Error::api("create daemon pod", e))
                    }
                }
            }
        })
        .await;
        if let Some(e) = err {
            // Pods of batches never attempted are not expected.
            let skipped = create.len().saturating_sub(attempted);
            if skipped > 0 {
                self.expectations
                    .lower_expectations(&key, as_i64(skipped), 0);
            }
            errors.push(e);
        }

        let results = join_all(delete.iter().map(|pod_name| {
            let api = api.clone();
            let key = key.clone();
            async move {
                match api.delete(pod_name, &DeleteParams::default()).await {
                    Ok(()) => {
                        self.event(
                            ds,
                            false,
                            "SuccessfulDelete",
                            &format!("Deleted pod: {pod_name}"),
                        );
                        Ok(())
                    }
                    Err(e) => {
                        self.expectations.deletion_observed(&key);
                        if e.is_not_found() {
                            return Ok(());
                        }
                        self.event(ds, true, "FailedDelete", &format!("Error deleting: {e}"));
                        Err(Error::api("delete daemon pod", e))
                    }
                }
            }
        }))
        .await;
        errors.extend(results.into_iter().filter_map(|r| r.err()));
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// `getNodesToDaemonPods`: claimed pods by target node; without `include_deleted_terminal`,
    /// terminal pods already being deleted are left out.
    pub(super) async fn nodes_to_daemon_pods(
        &self,
        ds: &DaemonSet,
        selector: &api::labels::Selector,
        include_deleted_terminal: bool,
    ) -> Result<NodeToPods> {
        let mut out = NodeToPods::new();
        for pod in self.claim_pods(ds, selector).await? {
            let terminal = matches!(phase(&pod), "Succeeded" | "Failed");
            if !include_deleted_terminal && terminal && pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if let Some(node) = target_node_name(&pod) {
                out.entry(node).or_default().push(pod);
            }
        }
        Ok(out)
    }

    /// `getDaemonPods` / `ClaimPods`.
    async fn claim_pods(
        &self,
        ds: &DaemonSet,
        selector: &api::labels::Selector,
    ) -> Result<Vec<Arc<CachedPod>>> {
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let owner = ClaimOwner {
            uid: &uid,
            deleting: ds.metadata.deletion_timestamp.is_some(),
            selector,
        };
        let api: Api<Pod> = self.client.api(Some(&ns));
        let mut claimed = Vec::new();
        let mut rechecked = false;
        for pod in self
            .pods
            .namespace(&ns)
            .list(&api::labels::Selector::everything())
        {
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
            match decide(owner, &pod) {
                ClaimAction::Claimed => claimed.push(pod),
                ClaimAction::Ignore => {}
                ClaimAction::Release => {
                    let patch = Patch::Strategic(release_patch(&uid, &pod_uid));
                    match api.patch(&pod_name, &patch).await {
                        Ok(_) => {}
                        Err(e) if e.is_not_found() || e.is_invalid() => {}
                        Err(e) => return Err(Error::api("release daemon pod", e)),
                    }
                }
                ClaimAction::Adopt => {
                    if !rechecked {
                        self.recheck_not_deleted(ds).await?;
                        rechecked = true;
                    }
                    let patch = Patch::Strategic(adopt_patch(&owner_ref(ds), &pod_uid));
                    match api.patch(&pod_name, &patch).await {
                        Ok(adopted) => claimed.push(Arc::new(CachedPod::from(adopted))),
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(Error::api("adopt daemon pod", e)),
                    }
                }
            }
        }
        Ok(claimed)
    }

    /// `RecheckDeletionTimestamp`: an uncached read before the first adoption.
    pub(super) async fn recheck_not_deleted(&self, ds: &DaemonSet) -> Result<()> {
        let ns = ds.metadata.namespace.as_deref().unwrap_or_default();
        let name = ds.metadata.name.as_deref().unwrap_or_default();
        let fresh = self
            .client
            .api::<DaemonSet>(Some(ns))
            .get(name)
            .await
            .map_err(|e| Error::api("recheck daemon set", e))?;
        if fresh.metadata.uid != ds.metadata.uid {
            return Err(Error::Claim(format!(
                "original DaemonSet {ns}/{name} is gone: got uid {}, wanted {}",
                fresh.metadata.uid.unwrap_or_default(),
                ds.metadata.uid.as_deref().unwrap_or_default()
            )));
        }
        if fresh.metadata.deletion_timestamp.is_some() {
            return Err(Error::Claim(format!("{ns}/{name} has just been deleted")));
        }
        Ok(())
    }

    /// `cleanupHistory`: keep `revisionHistoryLimit` old revisions, and any a live pod uses.
    async fn cleanup_history(
        &self,
        ds: &DaemonSet,
        selector: &api::labels::Selector,
        old: &[k8s_openapi::api::apps::v1::ControllerRevision],
    ) -> Result<()> {
        let limit = ds
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let limit = usize::try_from(limit).unwrap_or(0);
        if old.len() <= limit {
            return Ok(());
        }
        let live: BTreeSet<String> = self
            .nodes_to_daemon_pods(ds, selector, true)
            .await?
            .values()
            .flatten()
            .filter_map(|p| {
                p.metadata
                    .labels
                    .as_ref()?
                    .get(CONTROLLER_REVISION_HASH_LABEL)
                    .cloned()
            })
            .collect();
        for revision in revisions_to_delete(old, limit, &live) {
            self.history.delete(revision).await?;
        }
        Ok(())
    }

    /// `updateDaemonSetStatus` / `storeDaemonSetStatus` (one retry after a fresh read).
    async fn update_status(
        &self,
        ds: &DaemonSet,
        selector: &api::labels::Selector,
        nodes: &[Arc<Node>],
        hash: &str,
        update_observed_generation: bool,
    ) -> Result<()> {
        let node_to_pods = self.nodes_to_daemon_pods(ds, selector, false).await?;
        let placement = DaemonPlacement::of(ds);
        let ctx = self.ctx(ds, hash);
        let c = status_counts(
            nodes.iter().map(|n| {
                (
                    n.metadata.name.as_deref().unwrap_or_default(),
                    placement.should_run(n).0,
                )
            }),
            &node_to_pods,
            &ctx,
        );
        if ctx.min_ready_seconds > 0 && c.ready != c.available {
            // A last line of defence against clock skew.
            let secs = u64::try_from(ctx.min_ready_seconds).unwrap_or(0);
            self.enqueue_after(ds, std::time::Duration::from_secs(secs));
        }
        let st = ds.status.clone().unwrap_or_default();
        let generation = ds.metadata.generation.unwrap_or(0);
        let same = st.desired_number_scheduled == c.desired
            && st.current_number_scheduled == c.current
            && st.number_misscheduled == c.misscheduled
            && st.number_ready == c.ready
            && st.updated_number_scheduled.unwrap_or(0) == c.updated
            && st.number_available.unwrap_or(0) == c.available
            && st.number_unavailable.unwrap_or(0) == c.unavailable
            && st.observed_generation.unwrap_or(0) >= generation;
        if same {
            return Ok(());
        }
        let ns = ds.metadata.namespace.as_deref().unwrap_or_default();
        let name = ds.metadata.name.as_deref().unwrap_or_default();
        let api: Api<DaemonSet> = self.client.api(Some(ns));
        let apply = |mut obj: DaemonSet| {
            let s: &mut DaemonSetStatus = obj.status.get_or_insert_with(Default::default);
            if update_observed_generation {
                s.observed_generation = Some(generation);
            }
            s.desired_number_scheduled = c.desired;
            s.current_number_scheduled = c.current;
            s.number_misscheduled = c.misscheduled;
            s.number_ready = c.ready;
            s.updated_number_scheduled = Some(c.updated);
            s.number_available = Some(c.available);
            s.number_unavailable = Some(c.unavailable);
            obj
        };
        match api.replace_status(name, &apply(ds.clone())).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_conflict() => {
                let fresh = api
                    .get(name)
                    .await
                    .map_err(|e| Error::api("get daemon set", e))?;
                api.replace_status(name, &apply(fresh))
                    .await
                    .map(|_| ())
                    .map_err(|e| Error::api("update daemon set status", e))
            }
            Err(e) => Err(Error::api("update daemon set status", e)),
        }
    }
}
