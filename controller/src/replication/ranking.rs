//! Which pods a scale-down deletes first (informer.md §6.11, `ActivePodsWithRanks.Less`).
//!
//! The order, first = deleted first: unscheduled; Pending < Unknown < Running; not ready; lower
//! `controller.kubernetes.io/pod-deletion-cost`; more co-located related pods on the node (rank); more
//! recently ready; more container restarts; newer. Times are compared in logarithmic buckets
//! (`LogarithmicScaleDown`, GA in 1.31) with the pod UID as a stable pseudo-random tie-break.
//! The sort is deterministic for a given `now`.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::pod_util::{is_pod_active, is_pod_ready, phase, ready_since};

/// Annotation read by step 4 (`PodDeletionCost`, on by default since 1.22).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

fn node_name(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn phase_ordinal(p: &Pod) -> u8 {
    match phase(p) {
        "Unknown" => 1,
        "Running" => 2,
        // Pending, and (as upstream's map lookup default) anything else.
        _ => 0,
    }
}

fn deletion_cost(p: &Pod) -> i32 {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0)
}

fn max_restarts(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

fn uid(p: &Pod) -> &str {
    p.metadata.uid.as_deref().unwrap_or("")
}

/// floor(log2(now − t in ns)), −1 when t is not in the past (`logarithmicRankDiff`).
fn log_bucket(t: Timestamp, now: Timestamp) -> i64 {
    let d = now.as_nanosecond() - t.as_nanosecond();
    if d <= 0 {
        -1
    } else {
        (d as f64).log2() as i64
    }
}

/// "Newer first" for two optional times: empty first, then (log-bucketed) more recent, then UID.
fn newer_first(
    a: (Option<Timestamp>, &Pod),
    b: (Option<Timestamp>, &Pod),
    now: Timestamp,
) -> Option<bool> {
    let (ta, tb) = (a.0, b.0);
    if ta == tb {
        return None;
    }
    match (ta, tb) {
        (None, _) => Some(true),
        (_, None) => Some(false),
        (Some(x), Some(y)) => {
            let diff = log_bucket(x, now) - log_bucket(y, now);
            if diff == 0 {
                Some(uid(a.1) < uid(b.1))
            } else {
                Some(diff < 0)
            }
        }
    }
}

/// Pods with their co-location ranks, sortable into deletion order.
#[derive(Debug, Clone)]
pub struct ActivePodsWithRanks {
    /// The candidate pods.
    pub pods: Vec<Arc<Pod>>,
    /// `rank[i]` = number of active related pods on `pods[i]`'s node.
    pub rank: Vec<i32>,
    /// The instant time buckets are measured from.
    pub now: Timestamp,
}

impl ActivePodsWithRanks {
    /// Whether pod `i` should be deleted before pod `j`.
    pub fn less(&self, i: usize, j: usize) -> bool {
        let (a, b) = (&self.pods[i], &self.pods[j]);
        // 1. Unassigned < assigned.
        let (na, nb) = (node_name(a), node_name(b));
        if na.is_empty() != nb.is_empty() {
            return na.is_empty();
        }
        // 2. Pending < Unknown < Running.
        let (pa, pb) = (phase_ordinal(a), phase_ordinal(b));
        if pa != pb {
            return pa < pb;
        }
        // 3. Not ready < ready.
        let (ra, rb) = (is_pod_ready(a), is_pod_ready(b));
        if ra != rb {
            return !ra;
        }
        // 4. Lower deletion cost first.
        let (ca, cb) = (deletion_cost(a), deletion_cost(b));
        if ca != cb {
            return ca < cb;
        }
        // 5. Doubled up (higher rank) first.
        if self.rank[i] != self.rank[j] {
            return self.rank[i] > self.rank[j];
        }
        // 6. Both ready: more recently ready first.
        if ra && rb {
            let ta = ready_since(a).flatten();
            let tb = ready_since(b).flatten();
            if let Some(r) = newer_first((ta, a), (tb, b), self.now) {
                return r;
            }
        }
        // 7. More restarts first.
        let (xa, xb) = (max_restarts(a), max_restarts(b));
        if xa != xb {
            return xa > xb;
        }
        // 8. Newer first.
        let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
        newer_first((ta, a), (tb, b), self.now).unwrap_or(false)
    }

    /// Sort into deletion order (stable).
    pub fn sort(&mut self) {
        let mut idx: Vec<usize> = (0..self.pods.len()).collect();
        idx.sort_by(|&i, &j| {
            if self.less(i, j) {
                Ordering::Less
            } else if self.less(j, i) {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        });
        self.pods = idx.iter().map(|&i| self.pods[i].clone()).collect();
        self.rank = idx.iter().map(|&i| self.rank[i]).collect();
    }
}

/// The `n` pods to delete from `filtered` (`getPodsToDelete`): when `n < filtered.len()`, rank each pod
/// by the number of active pods of `related` on its node and take the first `n` in deletion order.
pub fn pods_to_delete(
    filtered: &[Arc<Pod>],
    related: &[Arc<Pod>],
    n: usize,
    now: Timestamp,
) -> Vec<Arc<Pod>> {
    if n >= filtered.len() {
        return filtered.to_vec();
    }
    let mut per_node: HashMap<&str, i32> = HashMap::new();
    for p in related.iter().filter(|p| is_pod_active(p)) {
        let node = node_name(p);
        if !node.is_empty() {
            *per_node.entry(node).or_default() += 1;
        }
    }
    let rank = filtered
        .iter()
        .map(|p| per_node.get(node_name(p)).copied().unwrap_or(0))
        .collect();
    let mut ranked = ActivePodsWithRanks {
        pods: filtered.to_vec(),
        rank,
        now,
    };
    ranked.sort();
    ranked.pods.truncate(n);
    ranked.pods
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_util::testing::*;
    use k8s_openapi::api::core::v1::ContainerStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn running_ready(name: &str, node: &str, ready: i64) -> Pod {
        ready_at(
            on_node(with_phase(pod(name), "Running"), node),
            Some(ts(ready)),
        )
    }

    #[test]
    fn unscheduled_pending_notready_before_running_ready() {
        let pods: Vec<Arc<Pod>> = vec![
            Arc::new(running_ready("ready", "n1", 0)),
            Arc::new(on_node(
                with_phase(pod("running-notready"), "Running"),
                "n1",
            )),
            Arc::new(on_node(with_phase(pod("pending"), "Pending"), "n1")),
            Arc::new(on_node(with_phase(pod("unknown"), "Unknown"), "n1")),
            Arc::new(with_phase(pod("unscheduled"), "Pending")),
        ];
        let out = pods_to_delete(&pods, &[], 4, ts(10_000));
        assert_eq!(
            names(&out),
            ["unscheduled", "pending", "unknown", "running-notready"]
        );
    }

    #[test]
    fn deletion_cost_then_rank() {
        let mut cheap = running_ready("cheap", "n1", 0);
        cheap.metadata.annotations = Some(
            [(POD_DELETION_COST.to_string(), "-5".to_string())]
                .into_iter()
                .collect(),
        );
        let mut bad = running_ready("bad-cost", "n2", 0);
        bad.metadata.annotations = Some(
            [(POD_DELETION_COST.to_string(), "x".to_string())]
                .into_iter()
                .collect(),
        );
        let crowded = running_ready("crowded", "n3", 0);
        let pods: Vec<Arc<Pod>> = vec![Arc::new(bad), Arc::new(crowded), Arc::new(cheap)];
        let related: Vec<Arc<Pod>> = vec![
            pods[0].clone(),
            pods[1].clone(),
            Arc::new(running_ready("other", "n3", 0)),
        ];
        let out = pods_to_delete(&pods, &related, 2, ts(10_000));
        assert_eq!(names(&out), ["cheap", "crowded"]);
    }

    #[test]
    fn recently_ready_first_with_log_buckets_and_uid_tiebreak() {
        let now = ts(100_000);
        // Ready 10 s ago vs 5000 s ago: different buckets, recent first.
        let pods: Vec<Arc<Pod>> = vec![
            Arc::new(running_ready("old", "n1", 100_000 - 5000)),
            Arc::new(running_ready("recent", "n2", 100_000 - 10)),
        ];
        assert_eq!(names(&pods_to_delete(&pods, &[], 1, now)), ["recent"]);
        // 1000 s and 1001 s ago share a log2 bucket → UID decides ("uid-a" < "uid-b").
        let pods: Vec<Arc<Pod>> = vec![
            Arc::new(running_ready("b", "n1", 100_000 - 1000)),
            Arc::new(running_ready("a", "n2", 100_000 - 1001)),
        ];
        assert_eq!(names(&pods_to_delete(&pods, &[], 1, now)), ["a"]);
    }

    #[test]
    fn restarts_then_newer() {
        let mut crashy = running_ready("crashy", "n1", 0);
        crashy
            .status
            .get_or_insert_with(Default::default)
            .container_statuses = Some(vec![ContainerStatus {
            restart_count: 3,
            ..Default::default()
        }]);
        let mut young = running_ready("young", "n2", 0);
        young.metadata.creation_timestamp = Some(Time(ts(90_000)));
        let mut old = running_ready("old", "n3", 0);
        old.metadata.creation_timestamp = Some(Time(ts(10)));
        let pods: Vec<Arc<Pod>> = vec![Arc::new(old), Arc::new(young), Arc::new(crashy)];
        let out = pods_to_delete(&pods, &[], 2, ts(100_000));
        assert_eq!(names(&out), ["crashy", "young"]);
    }

    #[test]
    fn deleting_all_skips_sorting() {
        let pods: Vec<Arc<Pod>> = vec![Arc::new(pod("x")), Arc::new(pod("y"))];
        assert_eq!(pods_to_delete(&pods, &[], 5, ts(0)).len(), 2);
    }
}
