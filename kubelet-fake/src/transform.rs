//! What the fake kubelets' shared pod informer keeps of a pod: its metadata and status whole,
//! and of its spec only what a kubelet here reads (client-go's `SetTransform`, which is meant for
//! this: an informer that keeps every pod of every node for its life holds less of each; issue 17
//! item 7).
//!
//! The spec kept: `nodeName` (routing, the node index), `restartPolicy`, `readinessGates`, and
//! of each container and init container its `name`, `image`, `imagePullPolicy` (the image events),
//! `resources` (the QoS class) and `restartPolicy` (sidecars); pod-level `resources` too. Everything else of the spec — volumes,
//! tolerations, affinity, environment, mounts, probes, ... — is dropped: nothing in this crate
//! reads it. A status write sends the cached pod back, and the apiserver takes every field but
//! `status` from the stored pod (`/status` resets the rest, as upstream), so a smaller spec
//! writes nothing different. Metadata is kept whole (events reference the pod, deletes carry its
//! UID precondition).
//!
//! Guarantees: [`kubelet_pod`] keeps every field listed above equal; a kubelet that starts
//! reading another spec field must add it here (the test compares what [`crate::pod_status`]
//! makes of a full and a projected pod). Every list kept is at its exact length
//! ([`client::transform::shrink_pod`]).

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

/// `pod` as the kubelets' informer keeps it (see the module docs).
pub fn kubelet_pod(mut pod: Pod) -> Pod {
    pod.spec = pod.spec.map(kubelet_spec);
    client::transform::shrink_pod(pod)
}

fn kubelet_spec(spec: PodSpec) -> PodSpec {
    PodSpec {
        node_name: spec.node_name,
        restart_policy: spec.restart_policy,
        readiness_gates: spec.readiness_gates,
        resources: spec.resources,
        containers: spec.containers.into_iter().map(kubelet_container).collect(),
        init_containers: spec
            .init_containers
            .map(|cs| cs.into_iter().map(kubelet_container).collect()),
        ..PodSpec::default()
    }
}

fn kubelet_container(c: Container) -> Container {
    Container {
        name: c.name,
        image: c.image,
        image_pull_policy: c.image_pull_policy,
        resources: c.resources,
        restart_policy: c.restart_policy,
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;
    use crate::config::LifecycleConfig;
    use crate::events::PodMarks;
    use crate::plan::PodPlan;
    use crate::pod_status::{add, evaluate, Evaluation, PodFacts};

    /// A pod with most of a spec: every part the kubelet reads and many it does not.
    fn full_pod() -> Pod {
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
        let text = serde_json::to_vec(&json!({
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1",
                "labels": {"app": "web"}, "annotations": {"a": "b"}, "resourceVersion": "7",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                    "name": "web", "uid": "rc", "controller": true}]},
            "spec": {
                "nodeName": "node-3", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                "readinessGates": [{"conditionType": "example.com/ready"}],
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
        .unwrap_or_default();
        serde_json::from_slice(&text).unwrap_or_else(|e| panic!("bad pod: {e}"))
    }

    fn config() -> LifecycleConfig {
        let yaml = "podStartDelay: 1s\ninitContainerDuration: 2s\ncontainerReadyDelay: 1s\n\
                    terminationDelay: 1s\nsatisfyReadinessGates: true\n";
        LifecycleConfig::from_yaml(yaml).unwrap_or_else(|e| panic!("bad config: {e}"))
    }

    fn evaluations(pod: &Pod) -> Vec<Evaluation> {
        let t0 = Timestamp::from_second(1_700_000_000).unwrap_or_else(|e| panic!("{e}"));
        let cfg = config();
        let facts = PodFacts {
            accepted: t0,
            pod_ip: Some(Ipv4Addr::new(10, 244, 3, 7)),
            host_ip: Ipv4Addr::new(172, 16, 0, 5),
            deletion_seen: None,
        };
        let plan = PodPlan::resolve(&cfg, pod);
        (0..8)
            .map(|s| evaluate(pod, &plan, &facts, add(t0, Duration::from_secs(s))))
            .collect()
    }

    #[test]
    fn the_kubelet_makes_the_same_status_of_the_projected_pod() {
        let full = full_pod();
        let projected = kubelet_pod(full.clone());
        let (a, b) = (evaluations(&full), evaluations(&projected));
        assert_eq!(a, b);
        let last = a.last().and_then(|e| e.status.phase.as_deref());
        assert_eq!(last, Some("Running"), "the pod went through its stages");
        assert_eq!(
            a.last().and_then(|e| e.status.qos_class.as_deref()),
            Some("Burstable"),
            "resources were read"
        );
    }

    #[test]
    fn the_kubelet_records_the_same_events_of_the_projected_pod() {
        let full = full_pod();
        let projected = kubelet_pod(full.clone());
        let events = |pod: &Pod| {
            let mut marks = PodMarks::of(pod);
            // Images already on the node: the pull policy decides between pulling and not.
            let mut present = |_: &str, _: bool| true;
            let evaluations = evaluations(pod);
            let mut out = Vec::new();
            for (i, e) in evaluations.iter().enumerate() {
                let deleting = i + 1 == evaluations.len();
                out.extend(marks.advance(pod, &e.status, deleting, &mut present));
            }
            out
        };
        let (a, b) = (events(&full), events(&projected));
        assert!(a.iter().any(|e| e.reason == "Pulled"), "{a:?}");
        assert_eq!(a, b);
    }

    #[test]
    fn metadata_and_status_are_kept_and_the_rest_of_the_spec_dropped() {
        let full = full_pod();
        let projected = kubelet_pod(full.clone());
        assert_eq!(projected.metadata, full.metadata);
        assert_eq!(projected.status, full.status);
        let (spec, full_spec) = (
            projected.spec.unwrap_or_default(),
            full.spec.unwrap_or_default(),
        );
        assert_eq!(spec.node_name, full_spec.node_name);
        assert_eq!(spec.readiness_gates, full_spec.readiness_gates);
        assert_eq!(spec.restart_policy, full_spec.restart_policy);
        assert!(spec.volumes.is_none() && spec.tolerations.is_none() && spec.affinity.is_none());
        assert_eq!(spec.termination_grace_period_seconds, None);
        let names = |cs: &[Container]| cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&spec.containers), names(&full_spec.containers));
        let (c, full_c) = (&spec.containers[0], &full_spec.containers[0]);
        assert_eq!((&c.image, &c.resources), (&full_c.image, &full_c.resources));
        assert_eq!(c.image_pull_policy, full_c.image_pull_policy);
        assert!(c.env.is_none() && c.volume_mounts.is_none() && c.readiness_probe.is_none());
        let init = spec.init_containers.unwrap_or_default();
        assert_eq!(init[1].restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.containers.capacity(), spec.containers.len());
    }

    #[test]
    fn a_pod_without_a_spec_is_kept() {
        let pod = Pod::default();
        assert_eq!(kubelet_pod(pod.clone()), pod);
    }
}
