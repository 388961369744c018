//! The DaemonSet controller's decisions as values (upstream `daemon_controller.go`'s
//! `podsShouldBeOnNode`, `getUnscheduledPodsWithoutNode`, `updateDaemonSetStatus`'s counting,
//! and `update.go`'s `rollingUpdate` / `findUpdatedPodsOnNode` / `updatedDesiredNodeCounts`).
//!
//! Input is a snapshot: the nodes, each with its `(shouldRun, shouldContinueRunning)`, and the
//! DaemonSet's claimed pods grouped by target node ([`NodeToPods`]). Output is what to create
//! (node names), what to delete (pod names), the events to record and when to look again. The
//! only state touched is the failed-pod back-off table passed in; nothing here does I/O.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::backoff::FailedPodsBackoff;
use super::placement::{is_pod_updated, CONTROLLER_REVISION_HASH_LABEL};
use crate::cached_pod::CachedPod;
use crate::deployment::util::scaled_value;
use crate::pod_util::{is_pod_available, is_pod_ready, phase};

/// Claimed pods by the node they belong to.
pub type NodeToPods = BTreeMap<String, Vec<Arc<CachedPod>>>;

/// `FailedDaemonPodReason`.
pub const FAILED_DAEMON_POD: &str = "FailedDaemonPod";
/// `SucceededDaemonPodReason`.
pub const SUCCEEDED_DAEMON_POD: &str = "SucceededDaemonPod";

/// An event to record on the DaemonSet: (warning?, reason, message).
pub type DaemonEvent = (bool, &'static str, String);

/// What the DaemonSet's sync reads besides nodes and pods.
#[derive(Debug, Clone)]
pub struct DecideCtx<'a> {
    /// The current revision's hash.
    pub hash: &'a str,
    /// The template generation (`deprecated.daemonset.template.generation`).
    pub generation: Option<i64>,
    /// `spec.minReadySeconds`.
    pub min_ready_seconds: i32,
    /// RollingUpdate with a non-zero maxSurge (`AllowsSurge`).
    pub allows_surge: bool,
    /// The back-off key prefix `<uid>/<observedGeneration>` (`failedPodsBackoffKey`).
    pub backoff_prefix: String,
    /// The clock's now.
    pub now: Timestamp,
}

/// One node's outcome of [`pods_should_be_on_node`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeDecision {
    /// Create a pod on this node.
    pub create: bool,
    /// Pods to delete.
    pub delete: Vec<String>,
    /// Events to record.
    pub events: Vec<DaemonEvent>,
    /// A failed pod waits out its back-off: look again after this.
    pub retry_after: Option<Duration>,
}

fn name(p: &CachedPod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// `podByCreationTimestampAndPhase`: bound pods first, then oldest, then by name.
pub fn sort_pods(pods: &mut [Arc<CachedPod>]) {
    pods.sort_by(|a, b| {
        let bound = |p: &CachedPod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty())
        };
        bound(b)
            .cmp(&bound(a))
            .then_with(|| {
                let t = |p: &CachedPod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
                t(a).cmp(&t(b))
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// `podsShouldBeOnNode`.
pub fn pods_should_be_on_node(
    node: &str,
    (should_run, should_continue): (bool, bool),
    pods: Option<&[Arc<CachedPod>]>,
    ctx: &DecideCtx<'_>,
    backoff: &mut FailedPodsBackoff,
) -> NodeDecision {
    let mut out = NodeDecision::default();
    match pods {
        None if should_run => out.create = true,
        None => {}
        Some(pods) if should_continue => {
            let mut running: Vec<Arc<CachedPod>> = Vec::new();
            for pod in pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
            {
                let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
                match phase(pod) {
                    "Failed" => {
                        // The DaemonSet often fights a kubelet that rejects its pods: back off.
                        let key = format!("{}/{node}", ctx.backoff_prefix);
                        if backoff.in_backoff_since_update(&key, ctx.now) {
                            let delay = backoff.get(&key);
                            out.retry_after =
                                Some(out.retry_after.map_or(delay, |d: Duration| d.min(delay)));
                            continue;
                        }
                        backoff.next(&key, ctx.now);
                        out.events.push((
                            true,
                            FAILED_DAEMON_POD,
                            format!(
                                "Found failed daemon pod {ns}/{} on node {node}, will try to kill it",
                                name(pod)
                            ),
                        ));
                        out.delete.push(name(pod));
                    }
                    "Succeeded" => {
                        out.events.push((
                            false,
                            SUCCEEDED_DAEMON_POD,
                            format!(
                                "Found succeeded daemon pod {ns}/{} on node {node}, will try to delete it",
                                name(pod)
                            ),
                        ));
                        out.delete.push(name(pod));
                    }
                    _ => running.push(pod.clone()),
                }
            }
            sort_pods(&mut running);
            if !ctx.allows_surge {
                // Keep the oldest, delete the rest.
                out.delete.extend(running.iter().skip(1).map(|p| name(p)));
                return out;
            }
            if running.len() <= 1 {
                out.create = running.is_empty() && should_run;
                return out;
            }
            // Surging: at most the oldest new pod and the oldest old pod.
            let (mut oldest_new, mut oldest_old): (
                Option<&Arc<CachedPod>>,
                Option<&Arc<CachedPod>>,
            ) = (None, None);
            for pod in &running {
                let current = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL))
                    .is_some_and(|h| h == ctx.hash);
                let slot = if current {
                    &mut oldest_new
                } else {
                    &mut oldest_old
                };
                if slot.is_none() {
                    *slot = Some(pod);
                } else {
                    out.delete.push(name(pod));
                }
            }
            if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
                if !is_pod_ready(old) || is_pod_available(new, ctx.min_ready_seconds, ctx.now) {
                    out.delete.push(name(old));
                }
            }
        }
        Some(pods) => {
            // Should not run here any more: delete every pod of ours on the node.
            out.delete.extend(
                pods.iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(|p| name(p)),
            );
        }
    }
    out
}

/// `getUnscheduledPodsWithoutNode`: pods not bound yet whose target node does not exist (the pod
/// GC never sees them, so the DaemonSet deletes them).
pub fn unscheduled_pods_without_node(
    node_exists: impl Fn(&str) -> bool,
    node_to_pods: &NodeToPods,
) -> Vec<String> {
    node_to_pods
        .iter()
        .filter(|(n, _)| !node_exists(n))
        .flat_map(|(_, pods)| pods.iter())
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty)
        })
        .map(|p| name(p))
        .collect()
}

fn rolling(ds: &DaemonSet) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateDaemonSet> {
    let s = ds.spec.as_ref()?.update_strategy.as_ref()?;
    if s.type_.as_deref().unwrap_or("RollingUpdate") != "RollingUpdate" {
        return None;
    }
    s.rolling_update.as_ref()
}

fn scaled(v: Option<&IntOrString>, total: usize) -> Option<usize> {
    let total = i32::try_from(total).unwrap_or(i32::MAX);
    scaled_value(v, total, true).map(|n| usize::try_from(n).unwrap_or(0))
}

/// `SurgeCount`: maxSurge against `desired` (rounded up); 0 unless RollingUpdate.
pub fn surge_count(ds: &DaemonSet, desired: usize) -> Option<usize> {
    rolling(ds).map_or(Some(0), |r| scaled(r.max_surge.as_ref(), desired))
}

/// `UnavailableCount`: maxUnavailable against `desired` (rounded up); 0 unless RollingUpdate.
pub fn unavailable_count(ds: &DaemonSet, desired: usize) -> Option<usize> {
    rolling(ds).map_or(Some(0), |r| scaled(r.max_unavailable.as_ref(), desired))
}

/// `AllowsSurge`.
pub fn allows_surge(ds: &DaemonSet) -> bool {
    surge_count(ds, 1).is_some_and(|n| n != 0)
}

/// A node's live pod of the current revision and live pod of an older one, each if any.
pub type NewAndOld<'p> = (Option<&'p Arc<CachedPod>>, Option<&'p Arc<CachedPod>>);

/// `findUpdatedPodsOnNode`: the node's one new and one old live pod; `None` if it has more.
pub fn find_updated_pods_on_node<'p>(
    pods: &'p [Arc<CachedPod>],
    hash: &str,
    generation: Option<i64>,
) -> Option<NewAndOld<'p>> {
    let (mut new, mut old) = (None, None);
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let slot = if is_pod_updated(pod, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

/// What a rolling-update step does: pods to delete, nodes to create a pod on.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RollingStep {
    /// Old pods to delete.
    pub delete: Vec<String>,
    /// Nodes to create a new pod on (surge).
    pub create: Vec<String>,
}

/// `rollingUpdate`. `node_to_pods` must hold an entry (maybe empty) for every node that should
/// run a pod (`updatedDesiredNodeCounts`); `should_run` says whether a node still should.
pub fn rolling_update(
    ds: &DaemonSet,
    node_to_pods: &NodeToPods,
    desired: usize,
    should_run: impl Fn(&str) -> bool,
    ctx: &DecideCtx<'_>,
) -> RollingStep {
    let max_surge = surge_count(ds, desired).unwrap_or(0);
    let mut max_unavailable = unavailable_count(ds, desired).unwrap_or(0);
    if max_surge == 0 && max_unavailable == 0 {
        // An impossible configuration: obey the default of one unavailable.
        max_unavailable = 1;
    }
    let available = |p: &CachedPod| is_pod_available(p, ctx.min_ready_seconds, ctx.now);
    let mut step = RollingStep::default();
    if max_surge == 0 {
        let mut num_unavailable = 0usize;
        let mut candidates = Vec::new();
        for pods in node_to_pods.values() {
            let Some((new, old)) = find_updated_pods_on_node(pods, ctx.hash, ctx.generation) else {
                num_unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => num_unavailable += 1,
                (Some(new), None) => {
                    if !available(new) {
                        num_unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(old) {
                        step.delete.push(name(old));
                        num_unavailable += 1;
                    } else if num_unavailable < max_unavailable {
                        candidates.push(name(old));
                    }
                }
            }
        }
        let remaining = max_unavailable
            .saturating_sub(num_unavailable)
            .min(candidates.len());
        step.delete.extend(candidates.into_iter().take(remaining));
        return step;
    }
    let (mut num_surge, mut num_available) = (0usize, 0usize);
    let (mut allowed_new, mut candidate_new, mut should_not_run) = (vec![], vec![], vec![]);
    for (node, pods) in node_to_pods {
        let Some((new, old)) = find_updated_pods_on_node(pods, ctx.hash, ctx.generation) else {
            num_surge += 1;
            continue;
        };
        if let Some(p) = old.or(new) {
            if available(p) {
                num_available += 1;
            }
        }
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !available(old) {
                    if should_run(node) {
                        allowed_new.push(node.clone());
                    } else {
                        step.delete.push(name(old));
                    }
                } else if !should_run(node) {
                    should_not_run.push(name(old));
                } else if num_surge < max_surge {
                    candidate_new.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if available(new) {
                    step.delete.push(name(old));
                } else {
                    num_surge += 1;
                }
            }
        }
    }
    // Pods on nodes the DaemonSet left go only once enough pods elsewhere are available.
    let deletable = num_available
        .saturating_sub(desired)
        .min(should_not_run.len());
    step.delete
        .extend(should_not_run.into_iter().take(deletable));
    let remaining = max_surge.saturating_sub(num_surge).min(candidate_new.len());
    step.create = allowed_new;
    step.create
        .extend(candidate_new.into_iter().take(remaining));
    step
}

/// The counts of a DaemonSet's status.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StatusCounts {
    /// `desiredNumberScheduled`.
    pub desired: i32,
    /// `currentNumberScheduled`.
    pub current: i32,
    /// `numberMisscheduled`.
    pub misscheduled: i32,
    /// `numberReady`.
    pub ready: i32,
    /// `updatedNumberScheduled`.
    pub updated: i32,
    /// `numberAvailable`.
    pub available: i32,
    /// `numberUnavailable`.
    pub unavailable: i32,
}

/// `updateDaemonSetStatus`'s counting: per node (`should_run`), the oldest pod decides.
pub fn status_counts<'n>(
    nodes: impl Iterator<Item = (&'n str, bool)>,
    node_to_pods: &NodeToPods,
    ctx: &DecideCtx<'_>,
) -> StatusCounts {
    let mut c = StatusCounts::default();
    for (node, should_run) in nodes {
        let pods = node_to_pods.get(node).filter(|p| !p.is_empty());
        if !should_run {
            if pods.is_some() {
                c.misscheduled += 1;
            }
            continue;
        }
        c.desired += 1;
        let Some(pods) = pods else { continue };
        c.current += 1;
        let mut sorted = pods.clone();
        sort_pods(&mut sorted);
        let Some(pod) = sorted.first() else { continue };
        if is_pod_ready(pod) {
            c.ready += 1;
            if is_pod_available(pod, ctx.min_ready_seconds, ctx.now) {
                c.available += 1;
            }
        }
        if is_pod_updated(pod, ctx.hash, ctx.generation) {
            c.updated += 1;
        }
    }
    c.unavailable = c.desired - c.available;
    c
}
