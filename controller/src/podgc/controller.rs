//! `PodGcController`: the passes of upstream's `PodGCController.gc`, run every `check_period` on
//! the shared pod and node informers (a [`Runner::run_periodic`]).
//!
//! One pass lists both caches once and runs, in upstream's order:
//! 1. `gcTerminated` (only with a threshold > 0): terminated pods beyond the threshold, evicted
//!    first then oldest first;
//! 2. `gcTerminating`: terminating pods on nodes that are not Ready and carry the
//!    `node.kubernetes.io/out-of-service` taint;
//! 3. `gcOrphaned`: pods bound to a node missing from the node cache. Each such node goes into a
//!    delaying queue for the quarantine time (an item already waiting keeps its earlier time); once
//!    due it is taken off and GET: only a 404 confirms it deleted (an error or a found node leaves
//!    its pods alone, and the next pass quarantines it again). Non-terminal orphans first get
//!    `DisruptionTarget=True` (`DeletionByPodGC`);
//! 4. `gcUnscheduledTerminating`: terminating pods that were never bound.
//!
//! Every pod is deleted the same way (`markFailedAndDeletePod`): a pod not yet Succeeded/Failed is
//! patched to `Failed` through `pods/status` (UID precondition), then deleted with
//! `gracePeriodSeconds=0` (a force delete: no kubelet is left to finish it). Upstream deletes the
//! first two passes' pods concurrently without a bound; here at most [`MAX_CONCURRENT_DELETES`]
//! are in flight. A failed request is logged and the pod is picked up again by a later pass.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::{Client, DeleteParams, HasSynced, Lister, Patch, Runner, SharedIndexInformer};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};

use super::decide::{
    fail_patch, missing_nodes, node_gone_condition, orphaned, terminated_to_delete,
    terminating_on_out_of_service, unscheduled_terminating, DEFAULT_TERMINATED_POD_GC_THRESHOLD,
    GC_CHECK_PERIOD, QUARANTINE_TIME,
};
use super::quarantine::Quarantine;
use crate::cached_pod::CachedPod;
use crate::clock::Clock;

/// Deletes in flight at once in one pass: the pod GC's share of the apiserver's mutating
/// in-flight limit in an in-process control plane, as the other controllers' (8).
pub const MAX_CONCURRENT_DELETES: usize = 8;

/// Settings of the pod GC (`PodGCControllerConfiguration` and upstream's test hooks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodGcConfig {
    /// `--terminated-pod-gc-threshold` (12500); 0 keeps every terminated pod.
    pub terminated_pod_gc_threshold: usize,
    /// `gcCheckPeriod` (20 s): time between the end of one pass and the start of the next.
    pub check_period: Duration,
    /// `quarantineTime` (40 s): how long a node may be missing from the cache before its GET.
    pub quarantine: Duration,
}

impl Default for PodGcConfig {
    fn default() -> Self {
        Self {
            terminated_pod_gc_threshold: DEFAULT_TERMINATED_POD_GC_THRESHOLD,
            check_period: GC_CHECK_PERIOD,
            quarantine: QUARANTINE_TIME,
        }
    }
}

/// Which pass deleted a pod (upstream's metric `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Terminated,
    OutOfService,
    Orphaned,
    Unscheduled,
}

impl Reason {
    fn label(self) -> &'static str {
        match self {
            Reason::Terminated => "terminated",
            Reason::OutOfService => "out-of-service",
            Reason::Orphaned => "orphaned",
            Reason::Unscheduled => "unscheduled",
        }
    }
}

/// The pod garbage collector (`pod-garbage-collector-controller`, alias `podgc`).
pub struct PodGcController {
    client: Client,
    pods: SharedIndexInformer<CachedPod>,
    nodes: SharedIndexInformer<Node>,
    pod_lister: Lister<CachedPod>,
    node_lister: Lister<Node>,
    /// Nodes missing from the cache, each due once its quarantine passed.
    quarantine: Quarantine,
    clock: Arc<dyn Clock>,
    cfg: PodGcConfig,
}

impl PodGcController {
    /// Build on the shared pod and node informers.
    pub fn new(
        client: Client,
        pods: SharedIndexInformer<CachedPod>,
        nodes: SharedIndexInformer<Node>,
        clock: Arc<dyn Clock>,
        cfg: PodGcConfig,
    ) -> Self {
        Self {
            client,
            pod_lister: pods.lister(),
            node_lister: nodes.lister(),
            pods,
            nodes,
            quarantine: Quarantine::new(cfg.quarantine),
            clock,
            cfg,
        }
    }

    /// Wait for both caches, then run a pass every `check_period` until `shutdown`.
    pub async fn run(self, shutdown: tokio_util::sync::CancellationToken) {
        let synced: [&dyn HasSynced; 2] = [&self.pods, &self.nodes];
        Runner::new("podgc")
            .run_periodic(self.cfg.check_period, &synced, &shutdown, || async {
                self.gc().await;
                Ok::<_, Infallible>(())
            })
            .await;
        self.quarantine.shut_down();
    }

    /// One pass (`gc`): the four collections over one listing of the caches.
    pub async fn gc(&self) {
        let pods = self.pod_lister.list(&Selector::everything());
        let nodes = self.node_lister.list(&Selector::everything());
        if self.cfg.terminated_pod_gc_threshold > 0 {
            let surplus = terminated_to_delete(&pods, self.cfg.terminated_pod_gc_threshold);
            if !surplus.is_empty() {
                tracing::info!(pods = surplus.len(), "garbage collecting terminated pods");
            }
            self.delete_concurrently(surplus, Reason::Terminated).await;
        }
        let stranded = terminating_on_out_of_service(&pods, |n| self.node_lister.get(n));
        self.delete_concurrently(stranded, Reason::OutOfService)
            .await;
        self.gc_orphaned(&pods, &nodes).await;
        for pod in unscheduled_terminating(&pods) {
            self.mark_failed_and_delete(&pod, None, Reason::Unscheduled)
                .await;
        }
    }

    /// `gcOrphaned`: quarantine the missing nodes, confirm the due ones gone, delete their pods.
    async fn gc_orphaned(&self, pods: &[Arc<CachedPod>], nodes: &[Arc<Node>]) {
        let existing: HashSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.quarantine.admit(missing_nodes(pods, &existing));
        let deleted = self.discover_deleted_nodes(&existing).await;
        for pod in orphaned(pods, &deleted) {
            self.mark_failed_and_delete(&pod, Some(node_gone_condition()), Reason::Orphaned)
                .await;
        }
    }

    /// `discoverDeletedNodes`: every node whose quarantine has passed and that is still missing
    /// from the cache, confirmed by a GET answering 404.
    async fn discover_deleted_nodes(&self, existing: &HashSet<&str>) -> HashSet<String> {
        let api = self.client.api::<Node>(None);
        let mut deleted = HashSet::new();
        for node in self.quarantine.due() {
            if existing.contains(node.as_str()) {
                continue;
            }
            match api.get_opt(&node).await {
                Ok(None) => {
                    deleted.insert(node);
                }
                Ok(Some(_)) => {}
                // Quarantined again by the next pass if its pods are still there.
                Err(e) => {
                    tracing::warn!(node = %node, error = %e, "could not check whether a node exists")
                }
            }
        }
        deleted
    }

    async fn delete_concurrently(&self, pods: Vec<Arc<CachedPod>>, reason: Reason) {
        futures::stream::iter(pods)
            .for_each_concurrent(MAX_CONCURRENT_DELETES, |pod| async move {
                self.mark_failed_and_delete(&pod, None, reason).await;
            })
            .await;
    }

    /// `markFailedAndDeletePodWithCondition`: `Failed` (and `condition`) unless already terminal,
    /// then a delete with `gracePeriodSeconds=0`. Failures are logged; a later pass retries.
    async fn mark_failed_and_delete(
        &self,
        pod: &CachedPod,
        condition: Option<PodCondition>,
        reason: Reason,
    ) {
        let key = client::key_of_meta(&pod.metadata);
        tracing::info!(pod = %key, reason = reason.label(), "PodGC is force deleting Pod");
        let api = self.client.api::<Pod>(pod.metadata.namespace.as_deref());
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if let Some(patch) = fail_patch(pod, condition, self.clock.now()) {
            if let Err(e) = api.patch_status(name, &Patch::Strategic(patch)).await {
                log_failure(&key, reason, "mark pod failed", &e);
                return;
            }
        }
        let force = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        match api.delete(name, &force).await {
            Ok(()) => {
                tracing::info!(pod = %key, reason = reason.label(), "forced deletion of pod succeeded")
            }
            Err(e) => log_failure(&key, reason, "delete pod", &e),
        }
    }
}

fn log_failure(key: &str, reason: Reason, op: &str, e: &client::Error) {
    if e.is_not_found() {
        // Gone meanwhile (its kubelet, or an earlier pass of ours, finished it).
        tracing::debug!(pod = %key, reason = reason.label(), op, "pod already gone");
    } else {
        tracing::warn!(pod = %key, reason = reason.label(), op, error = %e, "pod GC request failed");
    }
}
