//! What the fake kubelets' shared pod informer keeps of a pod: its metadata and status whole,
//! and of its spec only what a kubelet here reads, as a type of its own ([`KubeletPod`]) that the
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
//! deletes carry its UID precondition).
//!
//! Guarantees: decoding a pod's JSON as a [`KubeletPod`] keeps every field listed above equal
//! to the `Pod`'s (a test); a kubelet cannot read a field the type does not have, so one that
//! starts reading another spec field adds it here. Every list kept is at its exact length
//! ([`shrink`]).

use api::qos::ContainerResources;
use k8s_openapi::api::core::v1::{PodReadinessGate, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// A pod as the kubelets' informer keeps it (see the module docs); JSON names as `core/v1` Pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeletPod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<KubeletPodSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
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

/// `pod` with every list at its exact length (the informer's transform: a decoder grows lists
/// by doubling).
pub fn shrink(mut pod: KubeletPod) -> KubeletPod {
    client::transform::shrink_meta(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.shrink_to_fit();
        client::transform::fit_opt(&mut spec.init_containers);
        client::transform::fit_opt(&mut spec.readiness_gates);
    }
    if let Some(status) = pod.status.as_mut() {
        client::transform::shrink_pod_status(status);
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
        let (full, kept): (Pod, KubeletPod) = (decode(&text), shrink(decode(&text)));
        assert_eq!(kept.metadata, full.metadata);
        assert_eq!(kept.status, full.status);
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

    #[test]
    fn a_pod_without_a_spec_is_kept() {
        let pod: KubeletPod = decode(br#"{"metadata": {"name": "p"}}"#);
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(shrink(pod.clone()), pod);
        assert_eq!(pod.spec, None);
    }
}
