//! What the fake kubelets' shared pod informer keeps of a pod: its metadata whole, and of its
//! spec and status only what a kubelet here reads, as a type of its own ([`KubeletPod`]) that the
//! informer decodes the watch into (client-go's `SetTransform` is meant for the same: an informer
//! that keeps every pod of every node for its life holds less of each; issue 17 item 7).
//!
//! A type rather than a `Pod` with fields emptied: k8s-openapi's `Container` is 2,120 bytes and
//! `PodSpec` 1,416 before their contents, every field present or not, so a pod kept as a `Pod`
//! costs that much whatever is dropped; these are ~220 and ~210 bytes.
//!
//! The spec kept: `nodeName` (routing, the node index), `restartPolicy`, `readinessGates`,
//! pod-level `resources`, and of each container and init container its `name`, `image`,
//! `imagePullPolicy` (the image events), the cpu and memory of its `resources` (the QoS class:
//! decoded into [`ContainerResources`], not kept as written) and `restartPolicy` (sidecars). A
//! status write sends only the pod's identity and the new status (the apiserver takes every
//! other field from the stored pod, as upstream's status strategy), so nothing
//! the type leaves out is ever written. Metadata is kept whole (events reference the pod,
//! deletes carry its UID precondition) but for the labels no lifecycle rule matches on
//! ([`ReadLabels`]).
//!
//! The status is kept as [`KubeletPodStatus`]: what the kubelet reads of it and a digest of the
//! whole, which is all a kubelet compares its computed status with.
//!
//! Guarantees: decoding a pod's JSON as a [`KubeletPod`] keeps every field listed above equal
//! to the `Pod`'s (a test); a kubelet cannot read a field the type does not have, so one that
//! starts reading another spec field adds it here. Every list kept is at its exact length
//! ([`shrink`]).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use api::qos::ContainerResources;
use k8s_openapi::api::core::v1::{
    ContainerStatus, PodCondition, PodReadinessGate, PodResourceClaimStatus, PodStatus,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::config::LifecycleConfig;
use crate::events::ContainerMark;
use crate::pod_status::KUBELET_CONDITIONS;
use serde::{Deserialize, Serialize};

/// A pod as the kubelets' informer keeps it (see the module docs); JSON names as `core/v1` Pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeletPod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<KubeletPodSpec>,
    /// Decoded from the API's status; never written back (a status write sends a `PodStatus`).
    #[serde(default, deserialize_with = "kubelet_status", skip_serializing)]
    pub status: Option<KubeletPodStatus>,
}

/// What a kubelet here reads of a `PodSpec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletPodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_gates: Option<Vec<PodReadinessGate>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default)]
    pub containers: Vec<KubeletContainer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<KubeletContainer>>,
}

/// What a kubelet here reads of a `Container`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletContainer {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// The cpu and memory the container requests and limits, all the QoS class reads of its
    /// `resources`: decoded from them, never written (a typed `ResourceRequirements` holds a
    /// 640-byte map for each of its lists, however few quantities they have).
    #[serde(default, deserialize_with = "qos_resources", skip_serializing)]
    pub resources: ContainerResources,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

fn kubelet_status<'de, D: serde::Deserializer<'de>>(
    decoder: D,
) -> Result<Option<KubeletPodStatus>, D::Error> {
    let status = Option::<PodStatus>::deserialize(decoder)?;
    Ok(status.as_ref().map(KubeletPodStatus::of))
}

/// What a kubelet here reads of a pod's status as the API shows it, and a digest of the whole.
///
/// The kubelet compares the status it computes with the one shown (a write only when they
/// differ: [`status_digest`]), keeps the transition times of conditions and running
/// containers that did not change, carries the conditions others own into what it writes, and
/// keeps a terminal phase and its reason. The rest (addresses, images, IDs, states) it computes.
/// A running pod's status with one container takes 2,616 bytes as a typed `PodStatus` (decoded,
/// lists fitted) and 912 as this (jemalloc's counts, each boxed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KubeletPodStatus {
    /// [`status_digest`] of the whole status.
    pub digest: u64,
    pub phase: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub pod_ip: Option<String>,
    pub start_time: Option<Time>,
    pub nominated_node_name: Option<String>,
    pub resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
    /// The conditions the kubelet owns ([`KUBELET_CONDITIONS`]), as (type, status, since).
    pub own_conditions: Vec<SeenCondition>,
    /// Every other condition, whole: the scheduler's `PodScheduled`, readiness gates', others'.
    pub other_conditions: Vec<PodCondition>,
    pub containers: Vec<SeenContainer>,
    pub init_containers: Vec<SeenContainer>,
}

/// A condition the kubelet owns, as shown.
#[derive(Clone, Debug, PartialEq)]
pub struct SeenCondition {
    pub type_: &'static str,
    pub status: String,
    pub last_transition_time: Option<Time>,
}

/// A container's status, as shown: what the event diff and the kept start time read.
#[derive(Clone, Debug, PartialEq)]
pub struct SeenContainer {
    pub name: String,
    /// [`id_digest`] of its `containerID`: the same instance or not.
    pub id: Option<u64>,
    /// `state.running.startedAt`.
    pub running_since: Option<Time>,
    /// What the events recorded for it say.
    pub mark: ContainerMark,
}

impl KubeletPodStatus {
    /// The parts of `status` a kubelet reads (see the type's docs).
    pub fn of(status: &PodStatus) -> Self {
        let (mut own_conditions, mut other_conditions) = (Vec::new(), Vec::new());
        for c in status.conditions.iter().flatten() {
            match KUBELET_CONDITIONS.iter().find(|t| **t == c.type_) {
                Some(type_) => own_conditions.push(SeenCondition {
                    type_,
                    status: c.status.clone(),
                    last_transition_time: c.last_transition_time.clone(),
                }),
                None => other_conditions.push(c.clone()),
            }
        }
        own_conditions.shrink_to_fit();
        other_conditions.shrink_to_fit();
        let seen = |list: &Option<Vec<ContainerStatus>>| -> Vec<SeenContainer> {
            let mut seen: Vec<SeenContainer> = list
                .iter()
                .flatten()
                .map(|c| SeenContainer {
                    name: c.name.clone(),
                    id: c.container_id.as_deref().map(id_digest),
                    running_since: c
                        .state
                        .as_ref()
                        .and_then(|s| s.running.as_ref())
                        .and_then(|r| r.started_at.clone()),
                    mark: ContainerMark::of(c),
                })
                .collect();
            seen.shrink_to_fit();
            seen
        };
        KubeletPodStatus {
            digest: status_digest(status),
            phase: status.phase.clone(),
            reason: status.reason.clone(),
            message: status.message.clone(),
            pod_ip: status.pod_ip.clone(),
            start_time: status.start_time.clone(),
            nominated_node_name: status.nominated_node_name.clone(),
            resource_claim_statuses: status.resource_claim_statuses.clone(),
            own_conditions,
            other_conditions,
            containers: seen(&status.container_statuses),
            init_containers: seen(&status.init_container_statuses),
        }
    }

    /// The shown container of that name, of the init or the regular list.
    pub fn container(&self, name: &str, init: bool) -> Option<&SeenContainer> {
        let list = if init {
            &self.init_containers
        } else {
            &self.containers
        };
        list.iter().find(|c| c.name == name)
    }
}

/// A digest of a whole status: two statuses serialize the same exactly when their digests are
/// equal (but for a 64-bit collision). The JSON goes straight into the hasher, never a buffer:
/// every pod the informer decodes and every status a node computes is digested.
pub fn status_digest(status: &PodStatus) -> u64 {
    struct Digest(DefaultHasher);
    impl std::io::Write for Digest {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut digest = Digest(DefaultHasher::new());
    // Writing into a hasher cannot fail, nor can serialising a typed status.
    let _ = serde_json::to_writer(&mut digest, status);
    digest.0.finish()
}

/// A digest of a `containerID`.
pub fn id_digest(id: &str) -> u64 {
    let mut h = DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

fn qos_resources<'de, D: serde::Deserializer<'de>>(
    decoder: D,
) -> Result<ContainerResources, D::Error> {
    let resources = Option::<ResourceRequirements>::deserialize(decoder)?;
    Ok(ContainerResources::of(resources.as_ref()))
}

/// The QoS class reads every container's resources, as of a `PodSpec`.
impl api::qos::PodResources for KubeletPodSpec {
    fn containers(&self) -> impl Iterator<Item = ContainerResources> + '_ {
        self.containers
            .iter()
            .chain(self.init_containers.iter().flatten())
            .map(|c| c.resources)
    }
}

impl client::Object for KubeletPod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The pod labels a kubelet here reads: the keys its lifecycle rules match pods on (a one-label
/// map costs a ~560-byte tree node, and the default configuration reads none).
#[derive(Debug, Clone, Default)]
pub struct ReadLabels(BTreeSet<String>);

impl ReadLabels {
    pub fn of(lifecycle: &LifecycleConfig) -> Self {
        let rules = lifecycle.rules.iter();
        ReadLabels(
            rules
                .flat_map(|r| r.selector.labels.keys().cloned())
                .collect(),
        )
    }

    /// Drops from `labels` every label no rule reads.
    fn keep(&self, labels: &mut Option<BTreeMap<String, String>>) {
        if let Some(map) = labels.as_mut() {
            map.retain(|k, _| self.0.contains(k));
            if map.is_empty() {
                *labels = None;
            }
        }
    }
}

/// `pod` with every list at its exact length (the informer's transform: a decoder grows lists
/// by doubling) and only the labels `read` names.
pub fn shrink(mut pod: KubeletPod, read: &ReadLabels) -> KubeletPod {
    read.keep(&mut pod.metadata.labels);
    client::transform::shrink_meta(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.shrink_to_fit();
        client::transform::fit_opt(&mut spec.init_containers);
        client::transform::fit_opt(&mut spec.readiness_gates);
    }
    pod
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;
    use crate::config::LifecycleConfig;
    use crate::events::PodMarks;
    use crate::plan::PodPlan;
    use crate::pod_status::{add, evaluate, Evaluation, PodFacts};

    /// The JSON of a pod with most of a spec: every part the kubelet reads and many it does not.
    fn full_pod() -> Vec<u8> {
        let container = |name: &str, image: &str| {
            json!({"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                "command": ["sh"], "args": ["-c", "sleep 1"],
                "env": [{"name": "A", "value": "1"}],
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets", "readOnly": true}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
        };
        let mut sidecar = container("log", "busybox");
        sidecar["restartPolicy"] = json!("Always");
        serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1",
                "labels": {"app": "web"}, "annotations": {"a": "b"}, "resourceVersion": "7",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                    "name": "web", "uid": "rc", "controller": true}]},
            "spec": {
                "nodeName": "node-3", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                "readinessGates": [{"conditionType": "example.com/ready"}],
                "resources": {"limits": {"cpu": "2"}},
                "initContainers": [container("setup", "busybox"), sidecar],
                "containers": [container("app", "nginx:1.25"), container("side", "busybox")],
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}},
                "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]
            },
            "status": {"phase": "Pending", "qosClass": "Burstable", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:10Z"}]}
        }))
        .unwrap_or_default()
    }

    fn decode<T: serde::de::DeserializeOwned>(text: &[u8]) -> T {
        serde_json::from_slice(text).unwrap_or_else(|e| panic!("bad pod: {e}"))
    }

    fn config() -> LifecycleConfig {
        let yaml = "podStartDelay: 1s\ninitContainerDuration: 2s\ncontainerReadyDelay: 1s\n\
                    terminationDelay: 1s\nsatisfyReadinessGates: true\n";
        LifecycleConfig::from_yaml(yaml).unwrap_or_else(|e| panic!("bad config: {e}"))
    }

    fn evaluations(pod: &KubeletPod) -> Vec<Evaluation> {
        let t0 = Timestamp::from_second(1_700_000_000).unwrap_or_else(|e| panic!("{e}"));
        let cfg = config();
        let facts = PodFacts {
            accepted: t0,
            pod_ip: Some(Ipv4Addr::new(10, 244, 3, 7)),
            host_ip: Ipv4Addr::new(172, 16, 0, 5),
            deletion_seen: None,
            terminal_seen: None,
        };
        let plan = PodPlan::resolve(&cfg, pod);
        (0..8)
            .map(|s| evaluate(pod, &plan, &facts, add(t0, Duration::from_secs(s))))
            .collect()
    }

    /// What the kubelet reads, decoded as its type, equals the `Pod`'s; everything else of the
    /// spec is not held.
    #[test]
    fn a_decoded_pod_keeps_what_the_kubelet_reads() {
        let text = full_pod();
        let cfg = LifecycleConfig::from_yaml(
            "rules: [{name: web, match: {labels: {app: web}}, notReady: {after: 1s}}]",
        )
        .unwrap();
        let read = ReadLabels::of(&cfg);
        let (full, kept): (Pod, KubeletPod) = (decode(&text), shrink(decode(&text), &read));
        assert_eq!(kept.metadata, full.metadata);
        assert_eq!(kept.status, full.status.as_ref().map(KubeletPodStatus::of));
        let (spec, full_spec) = (kept.spec.unwrap_or_default(), full.spec.unwrap_or_default());
        assert_eq!(spec.node_name, full_spec.node_name);
        assert_eq!(spec.readiness_gates, full_spec.readiness_gates);
        assert_eq!(spec.restart_policy, full_spec.restart_policy);
        assert_eq!(spec.resources, full_spec.resources);
        let init = spec.init_containers.unwrap_or_default();
        let full_init = full_spec.init_containers.unwrap_or_default();
        for (cs, full_cs) in [
            (&spec.containers, &full_spec.containers),
            (&init, &full_init),
        ] {
            assert_eq!(cs.len(), full_cs.len());
            for (c, f) in cs.iter().zip(full_cs) {
                assert_eq!(c.name, f.name);
                assert_eq!(
                    (&c.image, &c.image_pull_policy),
                    (&f.image, &f.image_pull_policy)
                );
                assert_eq!(c.resources, ContainerResources::of(f.resources.as_ref()));
                assert_eq!(c.restart_policy, f.restart_policy);
            }
        }
        assert_eq!(init[1].restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.containers.capacity(), spec.containers.len());
        assert!(
            std::mem::size_of::<KubeletContainer>() * 8
                < std::mem::size_of::<k8s_openapi::api::core::v1::Container>(),
            "the point of the type"
        );
    }

    #[test]
    fn the_kubelet_runs_the_kept_pod_through_its_stages_and_events() {
        let pod: KubeletPod = decode(&full_pod());
        let evaluations = evaluations(&pod);
        let last = evaluations.last().map(|e| &e.status);
        assert_eq!(last.and_then(|s| s.phase.as_deref()), Some("Running"));
        assert_eq!(
            last.and_then(|s| s.qos_class.as_deref()),
            Some("Burstable"),
            "resources were read"
        );
        let mut marks = PodMarks::of(&pod);
        // Images already on the node: the pull policy decides between pulling and not.
        let mut present = |_: &str, _: bool| true;
        let mut events = Vec::new();
        for (i, e) in evaluations.iter().enumerate() {
            let deleting = i + 1 == evaluations.len();
            events.extend(marks.advance(&pod, &e.status, deleting, &mut present));
        }
        let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
        for want in ["Pulled", "Created", "Started", "Killing"] {
            assert!(reasons.contains(&want), "{want}: {reasons:?}");
        }
    }

    /// The status the kubelet wrote, read back through the API's JSON, digests as written (no
    /// write again), and what a later evaluation reads of it is there: own conditions with their
    /// times, others' whole, the running containers' instances and start times, their marks.
    #[test]
    fn a_shown_status_keeps_what_the_kubelet_reads_and_digests_as_written() {
        let mut pod: KubeletPod = decode(&full_pod());
        let written = evaluations(&pod)
            .pop()
            .map(|e| e.status)
            .unwrap_or_default();
        let mut text: serde_json::Value = decode(&full_pod());
        text["status"] = serde_json::to_value(&written).unwrap_or_default();
        let mut disrupted = written.clone();
        disrupted.conditions.get_or_insert_with(Vec::new).push(
            k8s_openapi::api::core::v1::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                ..Default::default()
            },
        );
        pod = decode(&serde_json::to_vec(&text).unwrap_or_default());
        let shown = pod.status.clone().unwrap_or_default();
        assert_eq!(shown.digest, status_digest(&written));
        assert_ne!(shown.digest, status_digest(&disrupted));
        assert_eq!(shown.phase.as_deref(), Some("Running"));
        assert_eq!(shown.start_time, written.start_time);
        assert_eq!(shown.pod_ip, written.pod_ip);
        let own: Vec<&str> = shown.own_conditions.iter().map(|c| c.type_).collect();
        assert_eq!(
            own,
            [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady"
            ]
        );
        let others: Vec<&str> = shown
            .other_conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(others, ["PodScheduled", "example.com/ready"]);
        for c in written.container_statuses.iter().flatten() {
            let seen = shown
                .container(&c.name, false)
                .unwrap_or_else(|| panic!("{}", c.name));
            assert_eq!(seen.id, c.container_id.as_deref().map(id_digest));
            let started = c.state.as_ref().and_then(|s| s.running.as_ref());
            assert_eq!(
                seen.running_since,
                started.and_then(|r| r.started_at.clone())
            );
            assert!(seen.running_since.is_some());
            assert_eq!(seen.mark, ContainerMark::of(c));
        }
        assert_eq!(shown.init_containers.len(), 2);
        // Re-evaluated later, the merge keeps every time as shown: the same status, no write.
        let mut again = evaluations(&pod)
            .pop()
            .map(|e| e.status)
            .unwrap_or_default();
        crate::pod_status::merge_with_previous(&mut again, Some(&shown));
        assert_eq!(status_digest(&again), shown.digest);
    }

    #[test]
    fn a_pod_without_a_spec_is_kept() {
        let pod: KubeletPod = decode(br#"{"metadata": {"name": "p"}}"#);
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(shrink(pod.clone(), &ReadLabels::default()), pod);
        assert_eq!(pod.spec, None);
    }

    /// Only the labels a rule matches on are kept: none with no rules (the default), and the
    /// pod still matches every rule it matched.
    #[test]
    fn only_the_labels_a_rule_reads_are_kept() {
        let pod: KubeletPod = decode(
            br#"{"metadata": {"name": "p", "labels": {"app": "web", "tier": "front", "x": "y"}}}"#,
        );
        let kept = shrink(pod.clone(), &ReadLabels::default());
        assert_eq!(kept.metadata.labels, None);
        assert_eq!(kept.metadata.name.as_deref(), Some("p"));

        let cfg = LifecycleConfig::from_yaml(
            "rules: [{name: a, match: {labels: {app: web}}, notReady: {after: 1s}},
                     {name: b, match: {labels: {tier: back}}, notReady: {after: 1s}},
                     {name: c, match: {namespace: prod}, notReady: {after: 1s}}]",
        )
        .unwrap();
        let kept = shrink(pod.clone(), &ReadLabels::of(&cfg));
        let labels = kept.metadata.labels.as_ref().unwrap();
        assert_eq!(labels.keys().collect::<Vec<_>>(), ["app", "tier"]);
        for rule in &cfg.rules {
            assert_eq!(
                rule.selector
                    .matches_pod("default", kept.metadata.labels.as_ref()),
                rule.selector
                    .matches_pod("default", pod.metadata.labels.as_ref()),
                "{}",
                rule.name
            );
        }
    }
}
