//! Which pods a scale-down deletes first (informer.md §6.11, `ActivePodsWithRanks.Less`).
//!
//! The order, first = deleted first: unscheduled; Pending < Unknown < Running; not ready; lower
//! `controller.kubernetes.io/pod-deletion-cost`; more co-located related pods on the node (rank); more
//! recently ready; more container restarts; newer. Times are compared in logarithmic buckets
//! (`LogarithmicScaleDown`, GA in 1.31) with the pod UID as a stable pseudo-random tie-break.
//! The sort is deterministic for a given `now`.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;

use crate::cached_pod::CachedPod;
use crate::pod_util::{is_pod_active, is_pod_ready, phase, ready_since};

/// Annotation read by step 4 (`PodDeletionCost`, on by default since 1.22).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

fn node_name(p: &CachedPod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

fn phase_ordinal(p: &CachedPod) -> u8 {
    match phase(p) {
        "Unknown" => 1,
        "Running" => 2,
        // Pending, and (as upstream's map lookup default) anything else.
        _ => 0,
    }
}

fn deletion_cost(p: &CachedPod) -> i32 {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0)
}

fn max_restarts(p: &CachedPod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

fn uid(p: &CachedPod) -> &str {
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

/// Sort key of one pod: lexicographic order of the key = deletion order (first = deleted first).
///
/// Upstream's `Less` is not a strict weak order once times are log-bucketed with a UID tie-break
/// (a~b and b~c by bucket while a<c), which Go's sort tolerates but Rust's sort rejects (it may
/// panic). Precomputing each criterion as a key component gives a total order that agrees with
/// upstream on every criterion; the only difference is the tie-break inside one time bucket, where
/// restarts and creation time are consulted before the UID.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct DeletionKey {
    assigned: bool,
    phase: u8,
    ready: bool,
    cost: i32,
    neg_rank: i32,
    ready_bucket: i64,
    neg_restarts: i32,
    created_bucket: i64,
    uid: String,
}

/// Bucket of a time for "more recent first": absent → first; else floor(log2(age)).
fn recency_bucket(t: Option<Timestamp>, now: Timestamp) -> i64 {
    match t {
        None => i64::MIN,
        Some(t) => log_bucket(t, now),
    }
}

fn deletion_key(p: &CachedPod, rank: i32, now: Timestamp) -> DeletionKey {
    let ready = is_pod_ready(p);
    DeletionKey {
        assigned: !node_name(p).is_empty(),
        phase: phase_ordinal(p),
        ready,
        cost: deletion_cost(p),
        neg_rank: rank.saturating_neg(),
        ready_bucket: if ready {
            recency_bucket(ready_since(p).flatten(), now)
        } else {
            0
        },
        neg_restarts: max_restarts(p).saturating_neg(),
        created_bucket: recency_bucket(p.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
        uid: uid(p).to_string(),
    }
}

/// Pods with their co-location ranks, sortable into deletion order.
#[derive(Debug, Clone)]
pub struct ActivePodsWithRanks {
    /// The candidate pods.
    pub pods: Vec<Arc<CachedPod>>,
    /// `rank[i]` = number of active related pods on `pods[i]`'s node.
    pub rank: Vec<i32>,
    /// The instant time buckets are measured from.
    pub now: Timestamp,
}

impl ActivePodsWithRanks {
    /// Whether pod `i` should be deleted before pod `j`.
    pub fn less(&self, i: usize, j: usize) -> bool {
        deletion_key(&self.pods[i], self.rank[i], self.now)
            < deletion_key(&self.pods[j], self.rank[j], self.now)
    }

    /// Sort into deletion order (a total order: never panics, deterministic for a given `now`).
    pub fn sort(&mut self) {
        let mut keyed: Vec<(DeletionKey, Arc<CachedPod>, i32)> = self
            .pods
            .iter()
            .zip(&self.rank)
            .map(|(p, &r)| (deletion_key(p, r, self.now), p.clone(), r))
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        self.pods = keyed.iter().map(|k| k.1.clone()).collect();
        self.rank = keyed.iter().map(|k| k.2).collect();
    }
}

/// The `n` pods to delete from `filtered` (`getPodsToDelete`): when `n < filtered.len()`, rank each pod
/// by the number of active pods of `related` on its node and take the first `n` in deletion order.
pub fn pods_to_delete(
    filtered: &[Arc<CachedPod>],
    related: &[Arc<CachedPod>],
    n: usize,
    now: Timestamp,
) -> Vec<Arc<CachedPod>> {
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
    use crate::cached_pod::{CachedContainerStatus, CachedPod};
    use crate::pod_util::testing::*;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn names(pods: &[Arc<CachedPod>]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn running_ready(name: &str, node: &str, ready: i64) -> CachedPod {
        ready_at(
            on_node(with_phase(pod(name), "Running"), node),
            Some(ts(ready)),
        )
    }

    #[test]
    fn unscheduled_pending_notready_before_running_ready() {
        let pods: Vec<Arc<CachedPod>> = vec![
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
        let pods: Vec<Arc<CachedPod>> = vec![Arc::new(bad), Arc::new(crowded), Arc::new(cheap)];
        let related: Vec<Arc<CachedPod>> = vec![
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
        let pods: Vec<Arc<CachedPod>> = vec![
            Arc::new(running_ready("old", "n1", 100_000 - 5000)),
            Arc::new(running_ready("recent", "n2", 100_000 - 10)),
        ];
        assert_eq!(names(&pods_to_delete(&pods, &[], 1, now)), ["recent"]);
        // 1000 s and 1001 s ago share a log2 bucket → UID decides ("uid-a" < "uid-b").
        let pods: Vec<Arc<CachedPod>> = vec![
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
            .container_statuses = Some(vec![CachedContainerStatus {
            restart_count: 3,
            ..Default::default()
        }]);
        let mut young = running_ready("young", "n2", 0);
        young.metadata.creation_timestamp = Some(Time(ts(90_000)));
        let mut old = running_ready("old", "n3", 0);
        old.metadata.creation_timestamp = Some(Time(ts(10)));
        let pods: Vec<Arc<CachedPod>> = vec![Arc::new(old), Arc::new(young), Arc::new(crashy)];
        let out = pods_to_delete(&pods, &[], 2, ts(100_000));
        assert_eq!(names(&out), ["crashy", "young"]);
    }

    #[test]
    fn recently_ready_before_long_ready_within_same_restart_class() {
        // Same bucket for 1000 s and 1001 s ago: restarts, then creation, then UID decide.
        let now = ts(100_000);
        let mut a = running_ready("a", "n1", 100_000 - 1001);
        a.status
            .get_or_insert_with(Default::default)
            .container_statuses = Some(vec![CachedContainerStatus {
            restart_count: 1,
            ..Default::default()
        }]);
        let b = running_ready("b", "n2", 100_000 - 1000);
        let pods: Vec<Arc<CachedPod>> = vec![Arc::new(b), Arc::new(a)];
        assert_eq!(names(&pods_to_delete(&pods, &[], 1, now)), ["a"]);
    }

    /// Regression: sorting 2000 pods with mixed ready times panicked ("comparison function does not
    /// correctly implement a total order") with a pairwise `Less` over log buckets + UID tie-break.
    #[test]
    fn sorting_many_mixed_pods_is_total_and_deterministic() {
        let now = ts(1_000_000);
        let mut pods = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ready_at_secs = 1_000_000 - (x % 100_000) as i64;
            let mut p = running_ready(&format!("p{i:04}"), &format!("n{}", x % 7), ready_at_secs);
            p.metadata.uid = Some(format!("{:016x}", x.rotate_left(7)));
            if x.is_multiple_of(5) {
                p.metadata.creation_timestamp = Some(Time(ts(ready_at_secs - (x % 977) as i64)));
            }
            if x.is_multiple_of(3) {
                p.status.get_or_insert_with(Default::default).conditions = None;
            }
            pods.push(Arc::new(p));
        }
        let first = pods_to_delete(&pods, &pods, 1000, now);
        let mut reversed = pods.clone();
        reversed.reverse();
        let second = pods_to_delete(&reversed, &pods, 1000, now);
        assert_eq!(
            names(&first),
            names(&second),
            "order independent of input order"
        );
    }

    #[test]
    fn deleting_all_skips_sorting() {
        let pods: Vec<Arc<CachedPod>> = vec![Arc::new(pod("x")), Arc::new(pod("y"))];
        assert_eq!(pods_to_delete(&pods, &[], 5, ts(0)).len(), 2);
    }
}
