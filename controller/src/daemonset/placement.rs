//! Where a DaemonSet's pods belong, and what they look like (upstream `daemon_controller.go`'s
//! `NodeShouldRunDaemonPod` / `predicates` / `NewPod` and `pkg/controller/daemon/util`).
//!
//! * [`node_should_run_daemon_pod`]: `(shouldRun, shouldContinueRunning)` for one node: the
//!   template's `nodeName`, its required node affinity and nodeSelector, and the node's
//!   `NoSchedule`/`NoExecute` taints against the template's tolerations plus the automatic
//!   DaemonSet ones ([`add_or_update_daemon_pod_tolerations`]). A node whose only untolerated
//!   taints are `NoSchedule` keeps a pod it already runs but gets no new one.
//! * [`create_pod_template`]: the template a pod is created from: the automatic tolerations and
//!   the `controller-revision-hash` / `pod-template-generation` labels; each pod is then pinned to
//!   its node with [`replace_node_name_affinity`] (required affinity `matchFields metadata.name In
//!   [node]`) and bound by the scheduler.
//! * [`is_pod_updated`] tells a current pod from an old one; [`target_node_name`] says which node
//!   a pod (bound or not yet) belongs to.
//!
//! Pure functions of the objects given.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
    PodTemplateSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::cached_pod::CachedPod;
use crate::scheduler::filter::tolerated_by;
use crate::scheduler::nodeaffinity::{RequiredNodeAffinity, OBJECT_NAME_FIELD};

/// Pod label with the hash of the DaemonSet's current ControllerRevision
/// (`DefaultDaemonSetUniqueLabelKey` = `ControllerRevisionHashLabelKey`).
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// Pod label with the template generation (`DaemonSetTemplateGenerationKey`, deprecated).
pub const POD_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// Where apps/v1 keeps the DaemonSet's template generation.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

pub use api::taints::{
    TAINT_DISK_PRESSURE, TAINT_MEMORY_PRESSURE, TAINT_NETWORK_UNAVAILABLE, TAINT_NOT_READY,
    TAINT_PID_PRESSURE, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE,
};

fn exists(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    }
}

/// `Toleration.MatchToleration`: same key, operator, value and effect.
fn same_toleration(a: &Toleration, b: &Toleration) -> bool {
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    s(&a.key) == s(&b.key)
        && s(&a.operator) == s(&b.operator)
        && s(&a.value) == s(&b.value)
        && s(&a.effect) == s(&b.effect)
}

/// `AddOrUpdateTolerationInPodSpec`: replace a matching toleration, else append.
fn add_or_update_toleration(spec: &mut PodSpec, t: Toleration) {
    let list = spec.tolerations.get_or_insert_with(Vec::new);
    match list.iter_mut().find(|x| same_toleration(x, &t)) {
        Some(x) => *x = t,
        None => list.push(t),
    }
}

/// `AddOrUpdateDaemonPodTolerations`: DaemonSet pods tolerate not-ready and unreachable
/// (`NoExecute`, no `tolerationSeconds`: they are never evicted for them), disk, memory and pid
/// pressure and unschedulable (`NoSchedule`), and, with host networking, network-unavailable.
pub fn add_or_update_daemon_pod_tolerations(spec: &mut PodSpec) {
    add_or_update_toleration(spec, exists(TAINT_NOT_READY, "NoExecute"));
    add_or_update_toleration(spec, exists(TAINT_UNREACHABLE, "NoExecute"));
    add_or_update_toleration(spec, exists(TAINT_DISK_PRESSURE, "NoSchedule"));
    add_or_update_toleration(spec, exists(TAINT_MEMORY_PRESSURE, "NoSchedule"));
    add_or_update_toleration(spec, exists(TAINT_PID_PRESSURE, "NoSchedule"));
    add_or_update_toleration(spec, exists(TAINT_UNSCHEDULABLE, "NoSchedule"));
    if spec.host_network == Some(true) {
        add_or_update_toleration(spec, exists(TAINT_NETWORK_UNAVAILABLE, "NoSchedule"));
    }
}

/// The template's pod spec with the automatic tolerations (`NewPod`'s spec, without node name).
pub fn daemon_pod_spec(ds: &DaemonSet) -> PodSpec {
    let mut spec = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .unwrap_or_default();
    add_or_update_daemon_pod_tolerations(&mut spec);
    spec
}

/// What placement reads of a DaemonSet, computed once per sync rather than once per node.
#[derive(Debug, Clone)]
pub struct DaemonPlacement {
    node_name: Option<String>,
    affinity: RequiredNodeAffinity,
    tolerations: Vec<Toleration>,
}

impl DaemonPlacement {
    /// Prepare the checks for `ds`.
    pub fn of(ds: &DaemonSet) -> Self {
        let spec = daemon_pod_spec(ds);
        Self {
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            affinity: RequiredNodeAffinity::of_spec(&spec),
            tolerations: spec.tolerations.unwrap_or_default(),
        }
    }

    /// `NodeShouldRunDaemonPod`: `(shouldRun, shouldContinueRunning)`.
    pub fn should_run(&self, node: &Node) -> (bool, bool) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if self.node_name.as_deref().is_some_and(|n| n != name) {
            return (false, false);
        }
        if !self.affinity.matches(node) {
            return (false, false);
        }
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        let untolerated = |effects: &[&str]| {
            taints.iter().any(|t: &Taint| {
                effects.contains(&t.effect.as_str()) && !tolerated_by(&self.tolerations, t)
            })
        };
        if untolerated(&["NoSchedule", "NoExecute"]) {
            // A running pod stays unless a NoExecute taint is untolerated.
            return (false, !untolerated(&["NoExecute"]));
        }
        (true, true)
    }
}

/// [`DaemonPlacement::should_run`] for one node (`NodeShouldRunDaemonPod`).
pub fn node_should_run_daemon_pod(node: &Node, ds: &DaemonSet) -> (bool, bool) {
    DaemonPlacement::of(ds).should_run(node)
}

/// `GetTemplateGeneration`: the annotation's value; `None` when absent or unparsable.
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

/// `CreatePodTemplate`: the automatic tolerations, and the generation and hash labels.
pub fn create_pod_template(
    template: &PodTemplateSpec,
    generation: Option<i64>,
    hash: &str,
) -> PodTemplateSpec {
    let mut t = template.clone();
    add_or_update_daemon_pod_tolerations(t.spec.get_or_insert_with(Default::default));
    let labels = t
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(Default::default);
    if let Some(g) = generation {
        labels.insert(POD_TEMPLATE_GENERATION_LABEL.into(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.into());
    }
    t
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes exactly one term
/// `matchFields metadata.name In [node]` (the other terms were already checked against the
/// node); preferred affinity and pod (anti-)affinity are kept.
pub fn replace_node_name_affinity(affinity: Option<Affinity>, node: &str) -> Affinity {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: OBJECT_NAME_FIELD.into(),
            operator: "In".into(),
            values: Some(vec![node.into()]),
        }]),
        ..Default::default()
    };
    let mut affinity = affinity.unwrap_or_default();
    let na = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![term],
    });
    affinity
}

/// `IsPodUpdated`: the pod carries the current hash, or the current template generation.
pub fn is_pod_updated(pod: &CachedPod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k));
    let template_matches =
        generation.is_some_and(|g| label(POD_TEMPLATE_GENERATION_LABEL) == Some(&g.to_string()));
    let hash_matches =
        !hash.is_empty() && label(CONTROLLER_REVISION_HASH_LABEL).map(String::as_str) == Some(hash);
    hash_matches || template_matches
}

/// `GetTargetNodeName`: `spec.nodeName`, or for a pod not bound yet the node its required
/// affinity pins it to (`matchFields metadata.name In [node]`); `None` if neither.
pub fn target_node_name(pod: &CachedPod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(n.to_string());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == OBJECT_NAME_FIELD && r.operator == "In")
        .and_then(|r| match r.values.as_deref() {
            Some([v]) => Some(v.clone()),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cached_pod::CachedPodSpec;
    use k8s_openapi::api::apps::v1::DaemonSetSpec;
    use k8s_openapi::api::core::v1::NodeSpec;

    pub(crate) fn ds_with(spec: PodSpec) -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                name: Some("ds".into()),
                namespace: Some("default".into()),
                annotations: Some(
                    [(TEMPLATE_GENERATION_ANNOTATION.to_string(), "3".to_string())].into(),
                ),
                ..Default::default()
            },
            spec: Some(DaemonSetSpec {
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".to_string(), "d".to_string())].into()),
                        ..Default::default()
                    }),
                    spec: Some(spec),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    fn node(name: &str, taints: Vec<Taint>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("disk".to_string(), "ssd".to_string())].into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(taints),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Default::default()
        }
    }

    #[test]
    fn automatic_tolerations_cover_node_conditions_and_cordon() {
        let ds = ds_with(PodSpec::default());
        for t in [
            taint(TAINT_NOT_READY, "NoExecute"),
            taint(TAINT_UNREACHABLE, "NoExecute"),
            taint(TAINT_DISK_PRESSURE, "NoSchedule"),
            taint(TAINT_MEMORY_PRESSURE, "NoSchedule"),
            taint(TAINT_PID_PRESSURE, "NoSchedule"),
            taint(TAINT_UNSCHEDULABLE, "NoSchedule"),
        ] {
            assert_eq!(
                node_should_run_daemon_pod(&node("n", vec![t]), &ds),
                (true, true)
            );
        }
        let net = node("n", vec![taint(TAINT_NETWORK_UNAVAILABLE, "NoSchedule")]);
        assert_eq!(node_should_run_daemon_pod(&net, &ds), (false, true));
        let host = ds_with(PodSpec {
            host_network: Some(true),
            ..Default::default()
        });
        assert_eq!(node_should_run_daemon_pod(&net, &host), (true, true));
        // Not tolerationSeconds-limited, and the template's own matching toleration is replaced.
        let spec = daemon_pod_spec(&ds);
        let t = spec.tolerations.unwrap_or_default();
        assert_eq!(t.len(), 6);
        assert!(t.iter().all(|t| t.toleration_seconds.is_none()));
    }

    #[test]
    fn taints_no_schedule_keeps_running_pods_no_execute_evicts() {
        let ds = ds_with(PodSpec::default());
        let ns = node("n", vec![taint("dedicated", "NoSchedule")]);
        assert_eq!(node_should_run_daemon_pod(&ns, &ds), (false, true));
        let ne = node("n", vec![taint("dedicated", "NoExecute")]);
        assert_eq!(node_should_run_daemon_pod(&ne, &ds), (false, false));
        let soft = node("n", vec![taint("dedicated", "PreferNoSchedule")]);
        assert_eq!(node_should_run_daemon_pod(&soft, &ds), (true, true));
        let tolerant = ds_with(PodSpec {
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert_eq!(node_should_run_daemon_pod(&ne, &tolerant), (true, true));
    }

    #[test]
    fn node_name_and_selector_exclude_nodes() {
        let pinned = ds_with(PodSpec {
            node_name: Some("other".into()),
            ..Default::default()
        });
        assert_eq!(
            node_should_run_daemon_pod(&node("n", vec![]), &pinned),
            (false, false)
        );
        let selective = ds_with(PodSpec {
            node_selector: Some([("disk".to_string(), "hdd".to_string())].into()),
            ..Default::default()
        });
        assert_eq!(
            node_should_run_daemon_pod(&node("n", vec![]), &selective),
            (false, false)
        );
    }

    #[test]
    fn template_labels_affinity_and_target_node() {
        let ds = ds_with(PodSpec::default());
        let gen = template_generation(&ds);
        assert_eq!(gen, Some(3));
        let spec = ds.spec.clone().unwrap_or_default();
        let mut t = create_pod_template(&spec.template, gen, "abc");
        let labels = t
            .metadata
            .clone()
            .unwrap_or_default()
            .labels
            .unwrap_or_default();
        assert_eq!(
            labels
                .get(CONTROLLER_REVISION_HASH_LABEL)
                .map(String::as_str),
            Some("abc")
        );
        assert_eq!(
            labels
                .get(POD_TEMPLATE_GENERATION_LABEL)
                .map(String::as_str),
            Some("3")
        );
        let pod_spec = t.spec.get_or_insert_with(Default::default);
        pod_spec.affinity = Some(replace_node_name_affinity(pod_spec.affinity.take(), "n7"));
        let pod = CachedPod {
            metadata: t.metadata.clone().unwrap_or_default(),
            spec: t.spec.clone().map(CachedPodSpec::from),
            status: None,
        };
        assert_eq!(target_node_name(&pod).as_deref(), Some("n7"));
        assert!(RequiredNodeAffinity::of(&pod).matches(&node("n7", vec![])));
        assert!(!RequiredNodeAffinity::of(&pod).matches(&node("n8", vec![])));
        assert!(is_pod_updated(&pod, "abc", None));
        assert!(is_pod_updated(&pod, "zzz", Some(3)));
        assert!(!is_pod_updated(&pod, "zzz", Some(4)));
        assert!(!is_pod_updated(&pod, "", None));
    }
}
