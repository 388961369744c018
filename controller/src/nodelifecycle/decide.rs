//! Node lifecycle decisions (kubernetes `nodelifecycle/node_lifecycle_controller.go`), free of I/O
//! and driven by an explicit `now`.
//!
//! Health is judged like upstream: the controller records, **on its own clock**, when it last saw a
//! node's Lease `renewTime` (or Ready heartbeat) change; a node is stale when that local observation is
//! older than the grace period (40 s by default). This makes the judgement immune to clock skew between
//! the node and the controller. A node first seen gets a full grace period.
//!
//! A stale node gets every standard condition set to `Unknown` (reason `NodeStatusUnknown`). Every
//! node then carries the `NoExecute` taint of its Ready condition, as upstream's
//! `processTaintBaseEviction` and `doNoExecuteTaintingPass`: `node.kubernetes.io/not-ready` while
//! Ready is `False` (the kubelet reports NotReady), `node.kubernetes.io/unreachable` while it is
//! `Unknown`, none while it is `True`; the taint eviction controller (`crate::tainteviction`)
//! evicts the pods that do not tolerate it. A node whose lease is fresh again gets back the
//! conditions this controller set, and so loses the taint. The `NoSchedule` taints of the same
//! conditions are the condition tainting pass's ([`super::no_schedule`]).
//!
//! Deviation: upstream adds `NoExecute` taints through a rate-limited queue per zone
//! (`--node-eviction-rate`, 0.1 nodes/s, slower or stopped when a zone is largely unhealthy);
//! here they are added on the monitoring pass that sees the condition.

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use api::taints::{TAINT_NOT_READY, TAINT_UNREACHABLE};
/// Reason written on conditions of a node that stopped reporting.
pub const REASON_UNKNOWN: &str = "NodeStatusUnknown";
/// `nodeMonitorGracePeriod` default (kube-controller-manager `--node-monitor-grace-period`): 40 s.
pub const DEFAULT_NODE_MONITOR_GRACE_PERIOD: SignedDuration = SignedDuration::from_secs(40);

const CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Probe {
    renew: Option<Timestamp>,
    heartbeat: Option<Timestamp>,
    observed_at: Timestamp,
}

/// Local record of when each node last showed a sign of life.
#[derive(Debug, Default)]
pub struct HealthTracker {
    probes: HashMap<String, Probe>,
}

impl HealthTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record the node's current lease renew time and Ready heartbeat as seen at `now`.
    pub fn observe(
        &mut self,
        node: &str,
        renew: Option<Timestamp>,
        heartbeat: Option<Timestamp>,
        now: Timestamp,
    ) {
        let entry = self.probes.entry(node.to_string()).or_insert(Probe {
            renew,
            heartbeat,
            observed_at: now,
        });
        if entry.renew != renew || entry.heartbeat != heartbeat {
            *entry = Probe {
                renew,
                heartbeat,
                observed_at: now,
            };
        }
    }

    /// Whether the node's last sign of life is older than `grace` (unknown nodes are not stale).
    pub fn is_stale(&self, node: &str, now: Timestamp, grace: SignedDuration) -> bool {
        self.probes
            .get(node)
            .is_some_and(|p| now.duration_since(p.observed_at) > grace)
    }

    /// Forget a deleted node.
    pub fn forget(&mut self, node: &str) {
        self.probes.remove(node);
    }

    /// Keep only the nodes for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.probes.retain(|n, _| keep(n));
    }
}

/// The Ready heartbeat in the node's status.
pub fn ready_heartbeat(node: &Node) -> Option<Timestamp> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_heartbeat_time
        .as_ref()
        .map(|t| t.0)
}

/// Whether this controller owns `taint`: the `NoExecute` taints of the Ready condition. Their
/// `NoSchedule` counterparts are the condition tainting pass's ([`super::no_schedule`]).
fn managed(taint: &Taint) -> bool {
    taint.effect == NO_EXECUTE && (taint.key == TAINT_UNREACHABLE || taint.key == TAINT_NOT_READY)
}

const NO_EXECUTE: &str = "NoExecute";

/// The `NoExecute` taint a Ready status calls for (`processTaintBaseEviction`): `False` →
/// `not-ready`, `Unknown` → `unreachable`, anything else (`True`) → none. The two are mutually
/// exclusive, as upstream's `SwapNodeControllerTaint` keeps them.
fn no_execute_key(ready: &str) -> Option<&'static str> {
    match ready {
        "False" => Some(TAINT_NOT_READY),
        "Unknown" => Some(TAINT_UNREACHABLE),
        _ => None,
    }
}

/// What to change on a node.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeDecision {
    /// Nothing to do.
    Nothing,
    /// Write these conditions (status) and these taints (spec).
    Update {
        /// The full new condition list.
        conditions: Vec<NodeCondition>,
        /// The full new taint list.
        taints: Vec<Taint>,
    },
}

/// Every standard condition `Unknown`, as upstream's `tryUpdateNodeHealth` marks a node whose
/// kubelet went silent.
fn marked_unknown(conditions: &[NodeCondition], now: Timestamp) -> Vec<NodeCondition> {
    let mut new = conditions.to_vec();
    for ty in CONDITIONS {
        match new.iter_mut().find(|c| c.type_ == ty) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => {
                c.status = "Unknown".into();
                c.reason = Some(REASON_UNKNOWN.into());
                c.message = Some("Kubelet stopped posting node status.".into());
                c.last_transition_time = Some(Time(now));
            }
            None => new.push(NodeCondition {
                type_: ty.into(),
                status: "Unknown".into(),
                reason: Some(REASON_UNKNOWN.into()),
                message: Some("Kubelet never posted node status.".into()),
                last_transition_time: Some(Time(now)),
                last_heartbeat_time: None,
            }),
        }
    }
    new
}

/// The conditions this controller marked `Unknown` back to what a renewing kubelet reports.
fn restored(conditions: &[NodeCondition], now: Timestamp) -> Vec<NodeCondition> {
    let mut new = conditions.to_vec();
    for c in new.iter_mut() {
        if c.status == "Unknown" && c.reason.as_deref() == Some(REASON_UNKNOWN) {
            let ready = c.type_ == "Ready";
            c.status = if ready { "True" } else { "False" }.into();
            c.reason = Some(
                if ready {
                    "KubeletReady"
                } else {
                    "NodeLeaseRenewed"
                }
                .into(),
            );
            c.message = Some(
                if ready {
                    "node lease renewed; kubelet is posting ready status"
                } else {
                    "node lease renewed"
                }
                .into(),
            );
            c.last_transition_time = Some(Time(now));
        }
    }
    new
}

/// Decide for one node given whether it is stale: its conditions (marked `Unknown` when stale,
/// restored when it renews again), then the `NoExecute` taint of its Ready status (kept with
/// its `timeAdded` while it stays, added with `timeAdded` now, the other one removed; none when
/// Ready is `True`; left alone while the node has no Ready condition).
pub fn decide_node(node: &Node, stale: bool, now: Timestamp) -> NodeDecision {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let new_conditions = if stale {
        marked_unknown(&conditions, now)
    } else {
        restored(&conditions, now)
    };
    let ready = new_conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str());
    // The wanted taint stays where it is (an unchanged list is no write); the other goes; a
    // missing one is appended.
    let mut new_taints = taints.clone();
    if let Some(status) = ready {
        let wanted = no_execute_key(status);
        new_taints.retain(|t| !managed(t) || Some(t.key.as_str()) == wanted);
        if let Some(key) = wanted.filter(|k| !new_taints.iter().any(|t| managed(t) && t.key == *k))
        {
            new_taints.push(Taint {
                key: key.into(),
                effect: NO_EXECUTE.into(),
                value: None,
                time_added: Some(Time(now)),
            });
        }
    }
    if new_conditions == conditions && new_taints == taints {
        return NodeDecision::Nothing;
    }
    NodeDecision::Update {
        conditions: new_conditions,
        taints: new_taints,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_util::testing::ts;
    use crate::scheduler::filter::tests::node;

    #[test]
    fn staleness_uses_local_observation_time() {
        let mut h = HealthTracker::new();
        let grace = DEFAULT_NODE_MONITOR_GRACE_PERIOD;
        // The node's clock is far in the past; only changes matter.
        h.observe("n1", Some(ts(5)), None, ts(1000));
        assert!(!h.is_stale("n1", ts(1040), grace));
        assert!(h.is_stale("n1", ts(1041), grace));
        h.observe("n1", Some(ts(6)), None, ts(1041));
        assert!(!h.is_stale("n1", ts(1080), grace));
        // Same renew time seen again: no sign of life.
        h.observe("n1", Some(ts(6)), None, ts(1100));
        assert!(h.is_stale("n1", ts(1100), grace));
        assert!(!h.is_stale("unknown", ts(99_999), grace));
    }

    #[test]
    fn stale_node_marked_unknown_and_tainted_once() {
        let n = node("n1", "1", "1Gi", "110");
        let NodeDecision::Update { conditions, taints } = decide_node(&n, true, ts(500)) else {
            panic!("a stale ready node must be updated");
        };
        assert_eq!(conditions.len(), 4);
        assert!(conditions.iter().all(|c| c.status == "Unknown"));
        assert_eq!(
            taints,
            vec![Taint {
                key: TAINT_UNREACHABLE.into(),
                effect: "NoExecute".into(),
                value: None,
                time_added: Some(Time(ts(500))),
            }]
        );

        let marked = with(&n, conditions, taints);
        assert_eq!(decide_node(&marked, true, ts(600)), NodeDecision::Nothing);

        // Recovery: the taint removed, Ready back to True.
        let NodeDecision::Update { conditions, taints } = decide_node(&marked, false, ts(700))
        else {
            panic!("a recovered node must be updated");
        };
        assert!(taints.is_empty());
        assert!(conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"));
        assert!(conditions
            .iter()
            .any(|c| c.type_ == "DiskPressure" && c.status == "False"));
        assert_eq!(decide_node(&n, false, ts(700)), NodeDecision::Nothing);
    }

    fn with(n: &Node, conditions: Vec<NodeCondition>, taints: Vec<Taint>) -> Node {
        let mut n = n.clone();
        n.status.get_or_insert_with(Default::default).conditions = Some(conditions);
        n.spec.get_or_insert_with(Default::default).taints = Some(taints);
        n
    }

    fn ready(n: &Node, status: &str) -> Node {
        let mut n = n.clone();
        let conditions = n
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new);
        conditions.retain(|c| c.type_ != "Ready");
        conditions.push(NodeCondition {
            type_: "Ready".into(),
            status: status.into(),
            reason: Some("KubeletNotReady".into()),
            ..Default::default()
        });
        n
    }

    fn no_execute(n: &NodeDecision) -> Vec<(String, Option<Time>)> {
        match n {
            NodeDecision::Update { taints, .. } => taints
                .iter()
                .filter(|t| t.effect == "NoExecute")
                .map(|t| (t.key.clone(), t.time_added.clone()))
                .collect(),
            NodeDecision::Nothing => panic!("expected an update"),
        }
    }

    #[test]
    fn a_not_ready_node_gets_the_not_ready_no_execute_taint_and_swaps_it_when_unreachable() {
        let other = Taint {
            key: "example.com/keep".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        };
        let base = node("n1", "1", "1Gi", "110");
        let n = with(
            &ready(&base, "False"),
            ready(&base, "False")
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default(),
            vec![other.clone()],
        );
        // The kubelet reports NotReady, its lease fresh: not-ready, NoExecute, added now.
        let d = decide_node(&n, false, ts(100));
        assert_eq!(
            no_execute(&d),
            vec![
                ("example.com/keep".to_string(), None),
                (TAINT_NOT_READY.to_string(), Some(Time(ts(100))))
            ]
        );
        let NodeDecision::Update { conditions, taints } = d else {
            unreachable!()
        };
        let tainted = with(&n, conditions, taints);
        // Kept as it is while the node stays NotReady.
        assert_eq!(decide_node(&tainted, false, ts(200)), NodeDecision::Nothing);
        // The lease goes stale: Ready Unknown, the taint swapped for unreachable.
        let d = decide_node(&tainted, true, ts(300));
        assert_eq!(
            no_execute(&d),
            vec![
                ("example.com/keep".to_string(), None),
                (TAINT_UNREACHABLE.to_string(), Some(Time(ts(300))))
            ]
        );
        // Ready again: no NoExecute taint of this controller's left.
        let back = ready(&tainted, "True");
        assert_eq!(
            no_execute(&decide_node(&back, false, ts(400))),
            vec![("example.com/keep".to_string(), None)]
        );
        // No Ready condition yet (a node just registered): left alone.
        let mut unreported = tainted.clone();
        if let Some(c) = unreported
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
        {
            c.retain(|c| c.type_ != "Ready");
        }
        assert_eq!(
            decide_node(&unreported, false, ts(500)),
            NodeDecision::Nothing
        );
        // The taint kept where it is: a later taint of another (the condition tainting pass's
        // NoSchedule one) does not make the list differ.
        let NodeDecision::Update { conditions, taints } = d else {
            unreachable!()
        };
        let mut taints = taints;
        taints.push(Taint {
            key: TAINT_UNREACHABLE.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
        let stale = with(&tainted, conditions, taints);
        assert_eq!(decide_node(&stale, true, ts(600)), NodeDecision::Nothing);
    }
}
