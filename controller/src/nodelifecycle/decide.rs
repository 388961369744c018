//! Node lifecycle decisions (kubernetes `nodelifecycle/node_lifecycle_controller.go`), free of I/O
//! and driven by an explicit `now`.
//!
//! Health is judged like upstream: the controller records, **on its own clock**, when it last saw a
//! node's Lease `renewTime` (or Ready heartbeat) change; a node is stale when that local observation is
//! older than the grace period (40 s by default). This makes the judgement immune to clock skew between
//! the node and the controller. A node first seen gets a full grace period.
//!
//! A stale node gets every standard condition set to `Unknown` (reason `NodeStatusUnknown`) and the
//! `node.kubernetes.io/unreachable` taints with effects `NoSchedule` and `NoExecute`; the taint
//! eviction controller (`crate::tainteviction`) then evicts the pods that do not tolerate the latter.
//! A node whose lease is fresh again loses the taints and the conditions this controller set.

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use api::taints::TAINT_UNREACHABLE;
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

fn is_unreachable_taint(t: &Taint) -> bool {
    t.key == TAINT_UNREACHABLE
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

/// Decide for one node given whether it is stale.
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
    let has_taints = taints.iter().filter(|t| is_unreachable_taint(t)).count() == 2;
    let marked = conditions.iter().any(|c| {
        c.type_ == "Ready" && c.status == "Unknown" && c.reason.as_deref() == Some(REASON_UNKNOWN)
    });
    if stale {
        let all_unknown = CONDITIONS.iter().all(|ty| {
            conditions
                .iter()
                .any(|c| c.type_ == *ty && c.status == "Unknown")
        });
        if all_unknown && has_taints {
            return NodeDecision::Nothing;
        }
        let mut new = conditions.clone();
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
        let mut new_taints: Vec<Taint> = taints
            .iter()
            .filter(|t| !is_unreachable_taint(t))
            .cloned()
            .collect();
        for effect in ["NoSchedule", "NoExecute"] {
            let existing = taints
                .iter()
                .find(|t| is_unreachable_taint(t) && t.effect == effect)
                .cloned();
            new_taints.push(existing.unwrap_or(Taint {
                key: TAINT_UNREACHABLE.into(),
                effect: effect.into(),
                value: None,
                time_added: Some(Time(now)),
            }));
        }
        return NodeDecision::Update {
            conditions: new,
            taints: new_taints,
        };
    }
    let any_taint = taints.iter().any(is_unreachable_taint);
    if !any_taint && !marked {
        return NodeDecision::Nothing;
    }
    let mut new = conditions;
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
    NodeDecision::Update {
        conditions: new,
        taints: taints
            .into_iter()
            .filter(|t| !is_unreachable_taint(t))
            .collect(),
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
        assert_eq!(taints.len(), 2);
        assert!(taints
            .iter()
            .all(|t| t.key == TAINT_UNREACHABLE && t.time_added == Some(Time(ts(500)))));

        let mut marked = n.clone();
        marked
            .status
            .get_or_insert_with(Default::default)
            .conditions = Some(conditions);
        marked.spec.get_or_insert_with(Default::default).taints = Some(taints);
        assert_eq!(decide_node(&marked, true, ts(600)), NodeDecision::Nothing);

        // Recovery: taints removed, Ready back to True.
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
}
