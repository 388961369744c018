//! Which nodes can run a pod (the scheduler's filter plugins).
//!
//! A node passes when it is Ready, schedulable (`kubectl cordon` sets `spec.unschedulable`; a pod may
//! tolerate `node.kubernetes.io/unschedulable`), it satisfies the pod's `nodeSelector` and required
//! node affinity ([`super::nodeaffinity`]: `matchExpressions` and `matchFields`), every
//! `NoSchedule`/`NoExecute` taint is tolerated (`PreferNoSchedule` never filters), and the pod's
//! requests fit the node's allocatable CPU, memory and pod count next to the pods already on it
//! (including pods the scheduler assumed but the cache has not seen bound yet).
//! Failures come back as [`FitFailure`] values and are summarised as kube-scheduler does:
//! `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable.`

use std::collections::BTreeMap;

use api::quantity::Amount;
use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

use super::nodeaffinity::RequiredNodeAffinity;
use super::resources::{from_list, pod_requests, Resources};
use crate::cached_pod::CachedPod;

pub use api::taints::TAINT_UNSCHEDULABLE;

/// What is already committed to a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// Sum of requests of pods on the node.
    pub requested: Resources,
    /// Same, with scoring defaults for unset requests.
    pub non_zero_requested: Resources,
    /// Number of pods on the node.
    pub pods: i64,
}

/// Why a node was rejected.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum FitFailure {
    /// Ready condition not True.
    NotReady,
    /// Cordoned.
    Unschedulable,
    /// nodeSelector does not match.
    NodeSelectorMismatch,
    /// A taint the pod does not tolerate.
    UntoleratedTaint(String),
    /// Not enough CPU.
    InsufficientCpu,
    /// Not enough memory.
    InsufficientMemory,
    /// Pod count at allocatable.
    TooManyPods,
    /// The VolumeBinding filter's reason (`volumebinding.rs`).
    Volume(&'static str),
}

impl std::fmt::Display for FitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotReady => f.write_str("node(s) were not ready"),
            Self::Unschedulable => f.write_str("node(s) were unschedulable"),
            Self::NodeSelectorMismatch => {
                f.write_str("node(s) didn't match Pod's node affinity/selector")
            }
            Self::UntoleratedTaint(t) => write!(f, "node(s) had untolerated taint {{{t}}}"),
            Self::InsufficientCpu => f.write_str("Insufficient cpu"),
            Self::InsufficientMemory => f.write_str("Insufficient memory"),
            Self::TooManyPods => f.write_str("Too many pods"),
            Self::Volume(reason) => f.write_str(reason),
        }
    }
}

/// `Toleration.ToleratesTaint`.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty()) {
        if e != taint.effect {
            return false;
        }
    }
    if let Some(k) = t.key.as_deref().filter(|k| !k.is_empty()) {
        if k != taint.key {
            return false;
        }
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    }
}

/// Whether some toleration tolerates the taint.
pub fn tolerated_by(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// Node has condition Ready=True.
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The node's allocatable CPU/memory and pod count.
pub fn allocatable(node: &Node) -> (Resources, i64) {
    let status = node.status.as_ref();
    let alloc = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    let pods = alloc
        .and_then(|m| m.get("pods"))
        .and_then(|q| Amount::parse(&q.0).ok())
        .map(Amount::milli_value)
        .map(|m| i64::try_from(m / 1000).unwrap_or(i64::MAX))
        .unwrap_or(0);
    (from_list(alloc), pods)
}

/// What filtering and scoring read of a pod, computed once per scheduling attempt rather than
/// once per node (upstream's PreFilter state).
pub struct PodInfo<'a> {
    tolerations: &'a [Toleration],
    affinity: RequiredNodeAffinity,
    /// Requests as declared.
    pub requests: Resources,
    /// Requests with the scoring defaults for unset ones.
    pub non_zero_requests: Resources,
}

impl<'a> PodInfo<'a> {
    pub fn new(pod: &'a CachedPod) -> Self {
        let spec = pod.spec.as_ref();
        PodInfo {
            tolerations: spec.and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]),
            affinity: RequiredNodeAffinity::of(pod),
            requests: pod_requests(pod, false),
            non_zero_requests: pod_requests(pod, true),
        }
    }
}

/// Check one node; every failing reason is returned (kube-scheduler reports them all).
pub fn node_fits(pod: &CachedPod, node: &Node, usage: &NodeUsage) -> Result<(), Vec<FitFailure>> {
    fits(&PodInfo::new(pod), node, allocatable(node), usage)
}

/// [`node_fits`] with the pod's and the node's parsed figures (`alloc`: [`allocatable`]).
pub fn fits(
    pod: &PodInfo<'_>,
    node: &Node,
    (alloc, max_pods): (Resources, i64),
    usage: &NodeUsage,
) -> Result<(), Vec<FitFailure>> {
    let mut failures = Vec::new();
    let tolerations = pod.tolerations;
    if !node_ready(node) {
        failures.push(FitFailure::NotReady);
    }
    let node_spec = node.spec.as_ref();
    if node_spec.and_then(|s| s.unschedulable) == Some(true) {
        let cordon = Taint {
            key: TAINT_UNSCHEDULABLE.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        if !tolerated_by(tolerations, &cordon) {
            failures.push(FitFailure::Unschedulable);
        }
    }
    if !pod.affinity.matches(node) {
        failures.push(FitFailure::NodeSelectorMismatch);
    }
    for taint in node_spec.and_then(|s| s.taints.as_deref()).unwrap_or(&[]) {
        let filters = taint.effect == "NoSchedule" || taint.effect == "NoExecute";
        if filters && !tolerated_by(tolerations, taint) {
            let t = match taint.value.as_deref() {
                Some(v) if !v.is_empty() => format!("{}: {v}", taint.key),
                _ => taint.key.clone(),
            };
            failures.push(FitFailure::UntoleratedTaint(t));
            break;
        }
    }
    let req = pod.requests;
    if usage.pods + 1 > max_pods {
        failures.push(FitFailure::TooManyPods);
    }
    if req.milli_cpu > 0 && usage.requested.milli_cpu + req.milli_cpu > alloc.milli_cpu {
        failures.push(FitFailure::InsufficientCpu);
    }
    if req.memory > 0 && usage.requested.memory + req.memory > alloc.memory {
        failures.push(FitFailure::InsufficientMemory);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures)
    }
}

/// `0/N nodes are available: <count> <reason>, …` (reasons sorted, as kube-scheduler's `FitError`).
pub fn fit_error_message(total_nodes: usize, failures: &[Vec<FitFailure>]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for f in failures.iter().flatten() {
        *counts.entry(f.to_string()).or_default() += 1;
    }
    let reasons: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    if reasons.is_empty() {
        format!("0/{total_nodes} nodes are available.")
    } else {
        format!(
            "0/{total_nodes} nodes are available: {}.",
            reasons.join(", ")
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cached_pod::{CachedContainer, CachedPodSpec};
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    pub fn node(name: &str, cpu: &str, mem: &str, pods: &str) -> Node {
        let alloc: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(mem.into())),
            ("pods".to_string(), Quantity(pods.into())),
        ]
        .into();
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(alloc),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    pub fn pod_req(cpu: &str, mem: &str) -> CachedPod {
        CachedPod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(CachedPodSpec {
                containers: vec![CachedContainer {
                    resources: Some(
                        ResourceRequirements {
                            requests: Some(
                                [
                                    ("cpu".to_string(), Quantity(cpu.into())),
                                    ("memory".to_string(), Quantity(mem.into())),
                                ]
                                .into(),
                            ),
                            ..Default::default()
                        }
                        .into(),
                    ),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn resources_and_pod_count() {
        let n = node("n1", "2", "4Gi", "2");
        let p = pod_req("1500m", "1Gi");
        assert_eq!(node_fits(&p, &n, &NodeUsage::default()), Ok(()));
        let busy = NodeUsage {
            requested: Resources {
                milli_cpu: 1000,
                memory: 3 * 1024 * 1024 * 1024 + 1,
            },
            pods: 2,
            ..Default::default()
        };
        let err = node_fits(&p, &n, &busy).err().unwrap_or_default();
        assert_eq!(
            err,
            [
                FitFailure::TooManyPods,
                FitFailure::InsufficientCpu,
                FitFailure::InsufficientMemory
            ]
        );
    }

    #[test]
    fn not_ready_and_cordoned_nodes_rejected_unless_tolerated() {
        let mut n = node("n1", "2", "4Gi", "110");
        n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        let mut p = pod_req("1m", "1");
        assert_eq!(
            node_fits(&p, &n, &NodeUsage::default()),
            Err(vec![FitFailure::Unschedulable])
        );
        p.spec.get_or_insert_with(Default::default).tolerations = Some(
            vec![Toleration {
                key: Some(TAINT_UNSCHEDULABLE.into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            }]
            .into(),
        );
        assert_eq!(node_fits(&p, &n, &NodeUsage::default()), Ok(()));
        let mut nr = node("n2", "2", "4Gi", "110");
        if let Some(cs) = nr.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            cs[0].status = "Unknown".into();
        }
        assert_eq!(
            node_fits(&p, &nr, &NodeUsage::default()),
            Err(vec![FitFailure::NotReady])
        );
    }

    #[test]
    fn node_selector_and_taints() {
        let mut n = node("n1", "2", "4Gi", "110");
        n.spec.get_or_insert_with(Default::default).taints = Some(vec![
            Taint {
                key: "soft".into(),
                effect: "PreferNoSchedule".into(),
                ..Default::default()
            },
            Taint {
                key: "gpu".into(),
                value: Some("yes".into()),
                effect: "NoSchedule".into(),
                ..Default::default()
            },
        ]);
        let mut p = pod_req("1m", "1");
        assert_eq!(
            node_fits(&p, &n, &NodeUsage::default()),
            Err(vec![FitFailure::UntoleratedTaint("gpu: yes".into())])
        );
        let spec = p.spec.get_or_insert_with(Default::default);
        spec.tolerations = Some(
            vec![Toleration {
                key: Some("gpu".into()),
                operator: Some("Equal".into()),
                value: Some("yes".into()),
                ..Default::default()
            }]
            .into(),
        );
        spec.node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
        assert_eq!(
            node_fits(&p, &n, &NodeUsage::default()),
            Err(vec![FitFailure::NodeSelectorMismatch])
        );
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("disk".into(), "ssd".into());
        assert_eq!(node_fits(&p, &n, &NodeUsage::default()), Ok(()));
    }

    #[test]
    fn toleration_matching_rules() {
        let taint = Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoExecute".into(),
            ..Default::default()
        };
        let t = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| {
            Toleration {
                key: key.map(Into::into),
                operator: op.map(Into::into),
                value: value.map(Into::into),
                effect: effect.map(Into::into),
                toleration_seconds: None,
            }
        };
        assert!(
            tolerates(&t(None, Some("Exists"), None, None), &taint),
            "wildcard"
        );
        assert!(tolerates(&t(Some("k"), None, Some("v"), None), &taint));
        assert!(!tolerates(&t(Some("k"), None, Some("w"), None), &taint));
        assert!(!tolerates(
            &t(Some("k"), Some("Exists"), None, Some("NoSchedule")),
            &taint
        ));
        assert!(!tolerates(
            &t(Some("other"), Some("Exists"), None, None),
            &taint
        ));
    }

    #[test]
    fn fit_error_message_counts_reasons() {
        let msg = fit_error_message(
            3,
            &[
                vec![FitFailure::InsufficientCpu],
                vec![FitFailure::Unschedulable],
                vec![FitFailure::Unschedulable],
            ],
        );
        assert_eq!(
            msg,
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable."
        );
        assert_eq!(fit_error_message(0, &[]), "0/0 nodes are available.");
    }
}
