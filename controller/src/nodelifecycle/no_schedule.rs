//! The `NoSchedule` taints of a node's conditions (upstream `doNoScheduleTaintingPass` of
//! `node_lifecycle_controller.go`), free of I/O and driven by an explicit `now`.
//!
//! Each condition maps to a taint as upstream's `nodeConditionToTaintKeyStatusMap`: `Ready`
//! `False` → `node.kubernetes.io/not-ready`, `Ready` `Unknown` → `node.kubernetes.io/unreachable`,
//! `MemoryPressure`/`DiskPressure`/`PIDPressure`/`NetworkUnavailable` `True` → the matching
//! pressure taint; `spec.unschedulable` → `node.kubernetes.io/unschedulable`. The node's
//! `NoSchedule` taints of those keys are made exactly that set: missing ones are added with
//! `timeAdded` now (`SwapNodeControllerTaint`), others removed; every other taint is kept in
//! place. So the `not-ready` taint the `TaintNodesByCondition` admission plugin puts on a new
//! node goes as soon as its kubelet reports `Ready` `True`. Taints are compared by key and effect
//! (`MatchTaint`).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use api::taints::{
    TAINT_DISK_PRESSURE, TAINT_MEMORY_PRESSURE, TAINT_NETWORK_UNAVAILABLE, TAINT_NOT_READY,
    TAINT_PID_PRESSURE, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE,
};

const NO_SCHEDULE: &str = "NoSchedule";

/// `nodeConditionToTaintKeyStatusMap`: (condition type, status, taint key).
const CONDITION_TAINTS: [(&str, &str, &str); 6] = [
    ("Ready", "False", TAINT_NOT_READY),
    ("Ready", "Unknown", TAINT_UNREACHABLE),
    ("MemoryPressure", "True", TAINT_MEMORY_PRESSURE),
    ("DiskPressure", "True", TAINT_DISK_PRESSURE),
    ("NetworkUnavailable", "True", TAINT_NETWORK_UNAVAILABLE),
    ("PIDPressure", "True", TAINT_PID_PRESSURE),
];

/// Whether this pass owns `taint`: a `NoSchedule` taint of a condition key or `unschedulable`.
fn owned(taint: &Taint) -> bool {
    taint.effect == NO_SCHEDULE
        && (taint.key == TAINT_UNSCHEDULABLE
            || CONDITION_TAINTS.iter().any(|(_, _, key)| *key == taint.key))
}

/// The keys of the `NoSchedule` taints `node`'s conditions and `spec.unschedulable` call for.
pub fn wanted_keys(node: &Node) -> Vec<&'static str> {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    let mut keys: Vec<&'static str> = Vec::new();
    for c in conditions {
        for (ty, status, key) in CONDITION_TAINTS {
            if c.type_ == ty && c.status == status && !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        keys.push(TAINT_UNSCHEDULABLE);
    }
    keys
}

/// The node's new taint list when its condition taints must change; `None` when they are right.
pub fn no_schedule_taints(node: &Node, now: Timestamp) -> Option<Vec<Taint>> {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[]);
    let wanted = wanted_keys(node);
    let has = |key: &str| {
        taints
            .iter()
            .any(|t| owned(t) && t.key == key && t.effect == NO_SCHEDULE)
    };
    let to_add: Vec<&str> = wanted.iter().copied().filter(|k| !has(k)).collect();
    let stale = |t: &Taint| owned(t) && !wanted.contains(&t.key.as_str());
    if to_add.is_empty() && !taints.iter().any(stale) {
        return None;
    }
    let mut next: Vec<Taint> = taints.iter().filter(|t| !stale(t)).cloned().collect();
    next.extend(to_add.into_iter().map(|key| Taint {
        key: key.to_string(),
        effect: NO_SCHEDULE.to_string(),
        value: None,
        time_added: Some(Time(now)),
    }));
    Some(next)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    use super::*;
    use crate::pod_util::testing::ts;

    fn node(conditions: &[(&str, &str)], taints: &[(&str, &str)], unschedulable: bool) -> Node {
        Node {
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, e)| Taint {
                            key: k.to_string(),
                            effect: e.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                unschedulable: unschedulable.then_some(true),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| NodeCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn keys(taints: &[Taint]) -> Vec<(&str, &str)> {
        taints
            .iter()
            .map(|t| (t.key.as_str(), t.effect.as_str()))
            .collect()
    }

    #[test]
    fn a_ready_node_loses_the_not_ready_taint_of_its_creation() {
        let n = node(
            &[("Ready", "True"), ("MemoryPressure", "False")],
            &[
                ("example.com/x", "NoSchedule"),
                (TAINT_NOT_READY, "NoSchedule"),
            ],
            false,
        );
        let next = no_schedule_taints(&n, ts(10)).unwrap();
        assert_eq!(keys(&next), vec![("example.com/x", "NoSchedule")]);
        let mut done = n.clone();
        done.spec.as_mut().unwrap().taints = Some(next);
        assert_eq!(no_schedule_taints(&done, ts(11)), None);
    }

    #[test]
    fn conditions_map_to_taints_as_upstream() {
        let n = node(
            &[
                ("Ready", "False"),
                ("DiskPressure", "True"),
                ("PIDPressure", "True"),
                ("NetworkUnavailable", "True"),
            ],
            &[(TAINT_NOT_READY, "NoExecute")],
            true,
        );
        let next = no_schedule_taints(&n, ts(10)).unwrap();
        assert_eq!(
            keys(&next),
            vec![
                (TAINT_NOT_READY, "NoExecute"),
                (TAINT_NOT_READY, "NoSchedule"),
                (TAINT_DISK_PRESSURE, "NoSchedule"),
                (TAINT_PID_PRESSURE, "NoSchedule"),
                (TAINT_NETWORK_UNAVAILABLE, "NoSchedule"),
                (TAINT_UNSCHEDULABLE, "NoSchedule"),
            ]
        );
        assert!(next[1..].iter().all(|t| t.time_added == Some(Time(ts(10)))));
        // Unknown: unreachable replaces not-ready; the NoExecute taint is not this pass's.
        let unknown = node(
            &[("Ready", "Unknown")],
            &[
                (TAINT_NOT_READY, "NoSchedule"),
                (TAINT_NOT_READY, "NoExecute"),
            ],
            false,
        );
        assert_eq!(
            keys(&no_schedule_taints(&unknown, ts(1)).unwrap()),
            vec![
                (TAINT_NOT_READY, "NoExecute"),
                (TAINT_UNREACHABLE, "NoSchedule")
            ]
        );
        // Uncordoned: the unschedulable taint goes.
        let uncordoned = node(
            &[("Ready", "True")],
            &[(TAINT_UNSCHEDULABLE, "NoSchedule")],
            false,
        );
        assert_eq!(
            keys(&no_schedule_taints(&uncordoned, ts(1)).unwrap()),
            vec![]
        );
        assert_eq!(
            no_schedule_taints(&node(&[("Ready", "True")], &[], false), ts(1)),
            None
        );
    }
}
