//! Node scoring and selection (`NodeResourcesFit` with the `LeastAllocated` strategy).
//!
//! score = mean over CPU and memory of `(allocatable − requested) × 100 / allocatable`, where requested
//! includes the pod being placed and uses the non-zero scoring defaults; 0 when over capacity or when
//! allocatable is 0. The highest score wins; ties go to the lexically first node name so that the
//! choice is deterministic (the pod just placed changes the next pod's scores, which spreads pods).

use k8s_openapi::api::core::v1::Node;

use super::filter::{allocatable, fits, FitFailure, NodeUsage, PodInfo};
use super::resources::{pod_requests, Resources};
use crate::cached_pod::CachedPod;

/// Maximum node score (`MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

fn least_allocated(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested > capacity {
        return 0;
    }
    ((capacity - requested) as i128 * MAX_NODE_SCORE as i128 / capacity as i128) as i64
}

/// Score one (feasible) node for the pod.
pub fn score(pod: &CachedPod, node: &Node, usage: &NodeUsage) -> i64 {
    score_with(pod_requests(pod, true), allocatable(node).0, usage)
}

/// [`score`] from the pod's non-zero requests and the node's allocatable.
fn score_with(non_zero_requests: Resources, alloc: Resources, usage: &NodeUsage) -> i64 {
    let want = usage.non_zero_requested.plus(non_zero_requests);
    let cpu = least_allocated(want.milli_cpu, alloc.milli_cpu);
    let mem = least_allocated(want.memory, alloc.memory);
    (cpu + mem) / 2
}

/// The outcome of scheduling one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Bind to this node.
    Node(String),
    /// Nothing fits; one entry of reasons per rejected node.
    Unschedulable(Vec<Vec<FitFailure>>),
}

/// Filter then score `nodes` (each with its current usage) and pick one.
pub fn select_node<'a>(
    pod: &CachedPod,
    nodes: impl IntoIterator<Item = (&'a Node, NodeUsage)>,
) -> Placement {
    select_node_with(
        pod,
        nodes
            .into_iter()
            .map(|(node, usage)| (node, usage, allocatable(node))),
    )
}

/// [`select_node`] with each node's [`allocatable`] already parsed (the scheduler's cache keeps
/// it per node version, as upstream's `NodeInfo`).
pub fn select_node_with<'a>(
    pod: &CachedPod,
    nodes: impl IntoIterator<Item = (&'a Node, NodeUsage, (Resources, i64))>,
) -> Placement {
    let mut best: Option<(i64, &str)> = None;
    let mut failures = Vec::new();
    let info = PodInfo::new(pod);
    for (node, usage, alloc) in nodes {
        let Some(name) = node.metadata.name.as_deref() else {
            continue;
        };
        match fits(&info, node, alloc, &usage) {
            Err(f) => failures.push(f),
            Ok(()) => {
                let s = score_with(info.non_zero_requests, alloc.0, &usage);
                let better = match best {
                    None => true,
                    Some((bs, bn)) => s > bs || (s == bs && name < bn),
                };
                if better {
                    best = Some((s, name));
                }
            }
        }
    }
    match best {
        Some((_, name)) => Placement::Node(name.to_string()),
        None => Placement::Unschedulable(failures),
    }
}

/// The usage a pod adds to its node.
pub fn usage_of(pod: &CachedPod) -> (Resources, Resources) {
    (pod_requests(pod, false), pod_requests(pod, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::filter::tests::{node, pod_req};

    #[test]
    fn least_allocated_prefers_emptier_node() {
        let a = node("a", "4", "8Gi", "110");
        let b = node("b", "4", "8Gi", "110");
        let p = pod_req("1", "1Gi");
        let busy = NodeUsage {
            requested: Resources {
                milli_cpu: 2000,
                memory: 1 << 30,
            },
            non_zero_requested: Resources {
                milli_cpu: 2000,
                memory: 1 << 30,
            },
            pods: 2,
        };
        let placed = select_node(&p, [(&a, busy), (&b, NodeUsage::default())]);
        assert_eq!(placed, Placement::Node("b".into()));
        assert!(score(&p, &b, &NodeUsage::default()) > score(&p, &a, &busy));
    }

    #[test]
    fn ties_break_by_name_and_nothing_fits_reports_reasons() {
        let a = node("a", "1", "1Gi", "110");
        let b = node("b", "1", "1Gi", "110");
        let p = pod_req("100m", "1Mi");
        assert_eq!(
            select_node(&p, [(&b, NodeUsage::default()), (&a, NodeUsage::default())]),
            Placement::Node("a".into())
        );
        let big = pod_req("2", "1Mi");
        assert_eq!(
            select_node(
                &big,
                [(&a, NodeUsage::default()), (&b, NodeUsage::default())]
            ),
            Placement::Unschedulable(vec![vec![FitFailure::InsufficientCpu]; 2])
        );
    }

    #[test]
    fn score_is_zero_when_over_capacity() {
        assert_eq!(least_allocated(11, 10), 0);
        assert_eq!(least_allocated(0, 0), 0);
        assert_eq!(least_allocated(5, 10), 50);
    }
}
