//! The pod GC's decisions as values (upstream `pkg/controller/podgc/gc_controller.go`, 1.33): which
//! pods each pass deletes, in which order, and the status patch that marks a pod `Failed` first.
//! No I/O: the controller lists its caches, calls these, and issues the requests.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Value};

use crate::cached_pod::CachedPod;
use crate::pod_util::phase;
use crate::scheduler::filter::node_ready;

/// `gcCheckPeriod`: how often the GC passes run (20 s).
pub const GC_CHECK_PERIOD: Duration = Duration::from_secs(20);
/// `quarantineTime`: how long a node missing from the cache is given to show up before a GET
/// checks that it is really gone (40 s).
pub const QUARANTINE_TIME: Duration = Duration::from_secs(40);
/// `--terminated-pod-gc-threshold` default (`RecommendedDefaultPodGCControllerConfiguration`):
/// terminated pods kept before the oldest are deleted; 0 disables that pass (12500).
pub const DEFAULT_TERMINATED_POD_GC_THRESHOLD: usize = 12500;
/// `v1.TaintNodeOutOfService`: a node an operator declared shut down.
pub const TAINT_NODE_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// `v1.DisruptionTarget`: the condition saying why a pod is being disrupted.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// `isPodTerminated`: any phase other than Pending, Running or Unknown (an unset phase counts, as
/// upstream's comparison makes it).
pub fn is_pod_terminated(pod: &CachedPod) -> bool {
    !matches!(phase(pod), "Pending" | "Running" | "Unknown")
}

/// `isPodTerminating`: the pod has a deletionTimestamp.
pub fn is_pod_terminating(pod: &CachedPod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `eviction.PodIsEvicted`: Failed with reason `Evicted`.
fn is_evicted(pod: &CachedPod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Failed")
        && status.and_then(|s| s.reason.as_deref()) == Some("Evicted")
}

/// `byEvictionAndCreationTimestamp`: evicted pods first, then oldest first, then by name (so the
/// pods controllers still count on go last).
pub fn by_eviction_and_creation(a: &CachedPod, b: &CachedPod) -> Ordering {
    is_evicted(b)
        .cmp(&is_evicted(a))
        .then_with(|| {
            let t = |p: &CachedPod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            t(a).cmp(&t(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

fn node_name(pod: &CachedPod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// `gcTerminated`: with more than `threshold` terminated pods, the surplus, in deletion order.
/// `threshold == 0` disables the pass (`gc` skips it).
pub fn terminated_to_delete(pods: &[Arc<CachedPod>], threshold: usize) -> Vec<Arc<CachedPod>> {
    if threshold == 0 {
        return Vec::new();
    }
    let mut terminated: Vec<Arc<CachedPod>> = pods
        .iter()
        .filter(|p| is_pod_terminated(p))
        .cloned()
        .collect();
    let surplus = terminated.len().saturating_sub(threshold);
    if surplus == 0 {
        return Vec::new();
    }
    terminated.sort_by(|a, b| by_eviction_and_creation(a, b));
    terminated.truncate(surplus);
    terminated
}

/// `gcTerminating`: terminating pods on a node that is not Ready and carries the out-of-service
/// taint (any effect), in deletion order. `node(name)` looks the node up in the cache; a pod whose
/// node is not there is skipped (upstream logs the lookup error).
pub fn terminating_on_out_of_service(
    pods: &[Arc<CachedPod>],
    node: impl Fn(&str) -> Option<Arc<Node>>,
) -> Vec<Arc<CachedPod>> {
    let mut out: Vec<Arc<CachedPod>> = pods
        .iter()
        .filter(|p| is_pod_terminating(p))
        .filter(|p| node(node_name(p)).is_some_and(|n| out_of_service(&n)))
        .cloned()
        .collect();
    out.sort_by(|a, b| by_eviction_and_creation(a, b));
    out
}

fn out_of_service(node: &Node) -> bool {
    !node_ready(node)
        && node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| t.key == TAINT_NODE_OUT_OF_SERVICE))
}

/// `gcOrphaned`, step 1: the nodes pods are bound to that the node cache does not have; each goes
/// into quarantine.
pub fn missing_nodes(pods: &[Arc<CachedPod>], existing: &HashSet<&str>) -> BTreeSet<String> {
    pods.iter()
        .map(|p| node_name(p))
        .filter(|n| !n.is_empty() && !existing.contains(n))
        .map(str::to_string)
        .collect()
}

/// `gcOrphaned`, step 3: the pods bound to a node confirmed deleted (quarantine passed, GET 404).
pub fn orphaned(pods: &[Arc<CachedPod>], deleted_nodes: &HashSet<String>) -> Vec<Arc<CachedPod>> {
    pods.iter()
        .filter(|p| deleted_nodes.contains(node_name(p)))
        .cloned()
        .collect()
}

/// `gcUnscheduledTerminating`: terminating pods never bound to a node.
pub fn unscheduled_terminating(pods: &[Arc<CachedPod>]) -> Vec<Arc<CachedPod>> {
    pods.iter()
        .filter(|p| is_pod_terminating(p) && node_name(p).is_empty())
        .cloned()
        .collect()
}

/// The condition an orphaned pod gets before it is deleted.
pub fn node_gone_condition() -> PodCondition {
    PodCondition {
        type_: DISRUPTION_TARGET.into(),
        status: "True".into(),
        reason: Some("DeletionByPodGC".into()),
        message: Some("PodGC: node no longer exists".into()),
        ..Default::default()
    }
}

/// `markFailedAndDeletePodWithCondition`'s status patch: phase `Failed` and, when given and not
/// already there, `condition` (`UpdatePodCondition`: a new transition time unless the status stays
/// the same). `None` for a pod already Succeeded or Failed, which is deleted without a patch. The
/// strategic-merge patch carries `metadata.uid` as a precondition (`PatchPodStatus`), so a pod
/// replaced under the same name is never marked.
pub fn fail_patch(
    pod: &CachedPod,
    condition: Option<PodCondition>,
    now: Timestamp,
) -> Option<Value> {
    if matches!(phase(pod), "Succeeded" | "Failed") {
        return None;
    }
    let mut status = json!({"phase": "Failed"});
    if let Some(mut c) = condition {
        let old = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|o| o.type_ == c.type_));
        c.last_transition_time = match old {
            Some(o) if o.status == c.status => o.last_transition_time.clone(),
            _ => Some(Time(now)),
        };
        let unchanged = old.is_some_and(|o| {
            o.status == c.status
                && o.reason == c.reason
                && o.message == c.message
                && o.last_probe_time == c.last_probe_time
                && o.last_transition_time == c.last_transition_time
        });
        if !unchanged {
            status["conditions"] = json!([c]);
        }
    }
    Some(json!({
        "metadata": {"uid": pod.metadata.uid},
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_util::testing::{on_node, pod, ts, with_phase};
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint};

    fn arc(p: CachedPod) -> Arc<CachedPod> {
        Arc::new(p)
    }

    fn created(mut p: CachedPod, secs: i64) -> CachedPod {
        p.metadata.creation_timestamp = Some(Time(ts(secs)));
        p
    }

    fn deleting(mut p: CachedPod) -> CachedPod {
        p.metadata.deletion_timestamp = Some(Time(ts(500)));
        p
    }

    fn evicted(p: CachedPod) -> CachedPod {
        let mut p = with_phase(p, "Failed");
        if let Some(s) = p.status.as_mut() {
            s.reason = Some("Evicted".into());
        }
        p
    }

    fn names(pods: &[Arc<CachedPod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    fn node(name: &str, ready: bool, taints: &[&str]) -> Arc<Node> {
        Arc::new(Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|k| Taint {
                            key: (*k).into(),
                            effect: "NoExecute".into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn terminated_means_not_pending_running_or_unknown() {
        for (phase, terminated) in [
            ("Pending", false),
            ("Running", false),
            ("Unknown", false),
            ("Succeeded", true),
            ("Failed", true),
        ] {
            assert_eq!(
                is_pod_terminated(&with_phase(pod("p"), phase)),
                terminated,
                "{phase}"
            );
        }
        // Upstream compares against the three live phases: no phase at all counts as terminated.
        assert!(is_pod_terminated(&pod("p")));
    }

    #[test]
    fn terminated_surplus_goes_evicted_first_then_oldest_then_by_name() {
        let pods = vec![
            arc(created(with_phase(pod("new"), "Succeeded"), 300)),
            arc(created(with_phase(pod("old"), "Failed"), 100)),
            arc(created(evicted(pod("evicted-young")), 400)),
            arc(created(with_phase(pod("b-tie"), "Succeeded"), 200)),
            arc(created(with_phase(pod("a-tie"), "Succeeded"), 200)),
            arc(created(with_phase(pod("running"), "Running"), 1)),
        ];
        // Five terminated, threshold 2: three go.
        assert_eq!(
            names(&terminated_to_delete(&pods, 2)),
            ["evicted-young", "old", "a-tie"]
        );
        assert!(
            terminated_to_delete(&pods, 5).is_empty(),
            "at the threshold"
        );
        assert!(
            terminated_to_delete(&pods, 0).is_empty(),
            "0 disables the pass"
        );
        assert_eq!(terminated_to_delete(&pods, 4).len(), 1);
    }

    #[test]
    fn terminating_pods_go_only_from_not_ready_out_of_service_nodes() {
        let nodes = [
            node("oos", false, &[TAINT_NODE_OUT_OF_SERVICE]),
            node("oos-but-ready", true, &[TAINT_NODE_OUT_OF_SERVICE]),
            node("not-ready", false, &["node.kubernetes.io/unreachable"]),
        ];
        let lookup = |n: &str| {
            nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == Some(n))
                .cloned()
        };
        let pods = vec![
            arc(created(deleting(on_node(pod("b"), "oos")), 20)),
            arc(created(deleting(on_node(pod("a"), "oos")), 10)),
            arc(on_node(pod("live"), "oos")),
            arc(deleting(on_node(pod("ready-node"), "oos-but-ready"))),
            arc(deleting(on_node(pod("untainted"), "not-ready"))),
            arc(deleting(on_node(pod("unknown-node"), "gone"))),
            arc(deleting(pod("unscheduled"))),
        ];
        assert_eq!(
            names(&terminating_on_out_of_service(&pods, lookup)),
            ["a", "b"]
        );
    }

    #[test]
    fn orphans_are_the_pods_of_confirmed_deleted_nodes() {
        let pods = vec![
            arc(on_node(pod("a"), "n1")),
            arc(on_node(pod("b"), "gone")),
            arc(on_node(with_phase(pod("c"), "Succeeded"), "gone")),
            arc(on_node(pod("d"), "late")),
            arc(pod("unscheduled")),
        ];
        let existing: HashSet<&str> = ["n1"].into();
        let missing: Vec<String> = missing_nodes(&pods, &existing).into_iter().collect();
        assert_eq!(missing, ["gone", "late"], "unbound pods name no node");
        // Only "gone" was confirmed by its GET ("late" showed up, or its quarantine is running).
        let deleted: HashSet<String> = ["gone".to_string()].into();
        assert_eq!(names(&orphaned(&pods, &deleted)), ["b", "c"]);
    }

    #[test]
    fn unscheduled_terminating_pods() {
        let pods = vec![
            arc(deleting(pod("gone-before-binding"))),
            arc(pod("pending")),
            arc(deleting(on_node(pod("kubelet-finishes"), "n1"))),
        ];
        assert_eq!(
            names(&unscheduled_terminating(&pods)),
            ["gone-before-binding"]
        );
    }

    #[test]
    fn fail_patch_marks_failed_with_the_condition_and_the_uid_precondition() {
        let mut p = with_phase(on_node(pod("p"), "gone"), "Running");
        p.metadata.uid = Some("u1".into());
        let now = ts(1_000);
        let patch = fail_patch(&p, Some(node_gone_condition()), now);
        assert_eq!(
            patch,
            Some(json!({
                "metadata": {"uid": "u1"},
                "status": {
                    "phase": "Failed",
                    "conditions": [{
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "DeletionByPodGC",
                        "message": "PodGC: node no longer exists",
                        "lastTransitionTime": Time(now),
                    }],
                },
            }))
        );
        // Without a condition (terminated, terminating, unscheduled passes): the phase only.
        assert_eq!(
            fail_patch(&p, None, now),
            Some(json!({"metadata": {"uid": "u1"}, "status": {"phase": "Failed"}}))
        );
    }

    #[test]
    fn fail_patch_skips_terminal_pods_and_keeps_a_standing_condition() {
        for phase in ["Succeeded", "Failed"] {
            let p = with_phase(pod("p"), phase);
            assert_eq!(fail_patch(&p, Some(node_gone_condition()), ts(1)), None);
        }
        // Already DisruptionTarget=True (the taint manager's): the transition time stays; the
        // reason changes, so the condition is written.
        let mut p = with_phase(pod("p"), "Running");
        let since = Time(ts(10));
        if let Some(s) = p.status.as_mut() {
            s.conditions = Some(vec![PodCondition {
                type_: DISRUPTION_TARGET.into(),
                status: "True".into(),
                reason: Some("DeletionByTaintManager".into()),
                last_transition_time: Some(since.clone()),
                ..Default::default()
            }]);
        }
        let patch = fail_patch(&p, Some(node_gone_condition()), ts(99)).unwrap_or_default();
        assert_eq!(
            patch["status"]["conditions"][0]["lastTransitionTime"],
            json!(since)
        );
        assert_eq!(
            patch["status"]["conditions"][0]["reason"],
            json!("DeletionByPodGC")
        );
        // The very same condition already there: only the phase is patched.
        if let Some(s) = p.status.as_mut() {
            let mut c = node_gone_condition();
            c.last_transition_time = Some(since.clone());
            s.conditions = Some(vec![c]);
        }
        let patch = fail_patch(&p, Some(node_gone_condition()), ts(99)).unwrap_or_default();
        assert_eq!(patch["status"], json!({"phase": "Failed"}));
    }
}
