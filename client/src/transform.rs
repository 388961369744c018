//! Transforms for [`SharedIndexInformer::set_transform`](crate::SharedIndexInformer::set_transform)
//! that make an informer's cache smaller without changing what it holds.
//!
//! A typed object decoded from JSON holds its lists in vectors grown by doubling (the decoder
//! cannot know a JSON array's length before reading it): a pod's one `ContainerStatus` (752
//! bytes) sits in room for four, its five conditions in room for eight. A cache keeps every object
//! for as long as it exists, so [`shrink_pod`] gives each list of a pod its exact length; a
//! running pod decoded from the watch shrinks from about 19.3 KB to about 14.4 KB (issue 17).
//!
//! Guarantee: the result equals the input (`==`); only capacities change.

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, EphemeralContainer, Pod, PodStatus, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `pod` with every list at its exact length (see the module docs).
pub fn shrink_pod(mut pod: Pod) -> Pod {
    shrink_meta(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        fit(&mut spec.containers);
        spec.containers.iter_mut().for_each(shrink_container);
        if let Some(cs) = spec.init_containers.as_mut() {
            fit(cs);
            cs.iter_mut().for_each(shrink_container);
        }
        if let Some(cs) = spec.ephemeral_containers.as_mut() {
            fit(cs);
            cs.iter_mut().for_each(shrink_ephemeral_container);
        }
        if let Some(vs) = spec.volumes.as_mut() {
            fit(vs);
            vs.iter_mut().for_each(shrink_volume);
        }
        fit_opt(&mut spec.tolerations);
        fit_opt(&mut spec.host_aliases);
        fit_opt(&mut spec.image_pull_secrets);
        fit_opt(&mut spec.readiness_gates);
        fit_opt(&mut spec.resource_claims);
        fit_opt(&mut spec.scheduling_gates);
        fit_opt(&mut spec.topology_spread_constraints);
    }
    if let Some(status) = pod.status.as_mut() {
        shrink_pod_status(status);
    }
    pod
}

/// A pod's status with every list at its exact length.
pub fn shrink_pod_status(status: &mut PodStatus) {
    fit_opt(&mut status.conditions);
    for statuses in [
        &mut status.container_statuses,
        &mut status.init_container_statuses,
        &mut status.ephemeral_container_statuses,
    ] {
        if let Some(ss) = statuses.as_mut() {
            fit(ss);
            ss.iter_mut().for_each(shrink_container_status);
        }
    }
    fit_opt(&mut status.host_ips);
    fit_opt(&mut status.pod_ips);
    fit_opt(&mut status.resource_claim_statuses);
}

/// An object's metadata with every list at its exact length.
pub fn shrink_meta(m: &mut ObjectMeta) {
    fit_opt(&mut m.owner_references);
    fit_opt(&mut m.finalizers);
    fit_opt(&mut m.managed_fields);
}

/// The lists of a container; `Container` and `EphemeralContainer` share their field names.
macro_rules! shrink_container_lists {
    ($c:expr) => {{
        let c = $c;
        fit_opt(&mut c.args);
        fit_opt(&mut c.command);
        fit_opt(&mut c.env);
        fit_opt(&mut c.env_from);
        fit_opt(&mut c.ports);
        fit_opt(&mut c.resize_policy);
        fit_opt(&mut c.volume_devices);
        fit_opt(&mut c.volume_mounts);
    }};
}

fn shrink_container(c: &mut Container) {
    shrink_container_lists!(c);
}

fn shrink_ephemeral_container(c: &mut EphemeralContainer) {
    shrink_container_lists!(c);
}

fn shrink_container_status(s: &mut ContainerStatus) {
    fit_opt(&mut s.allocated_resources_status);
    fit_opt(&mut s.volume_mounts);
}

fn shrink_volume(v: &mut Volume) {
    if let Some(cm) = v.config_map.as_mut() {
        fit_opt(&mut cm.items);
    }
    if let Some(s) = v.secret.as_mut() {
        fit_opt(&mut s.items);
    }
    if let Some(d) = v.downward_api.as_mut() {
        fit_opt(&mut d.items);
    }
    let Some(sources) = v.projected.as_mut().and_then(|p| p.sources.as_mut()) else {
        return;
    };
    fit(sources);
    for p in sources {
        if let Some(cm) = p.config_map.as_mut() {
            fit_opt(&mut cm.items);
        }
        if let Some(s) = p.secret.as_mut() {
            fit_opt(&mut s.items);
        }
        if let Some(d) = p.downward_api.as_mut() {
            fit_opt(&mut d.items);
        }
    }
}

fn fit<T>(v: &mut Vec<T>) {
    v.shrink_to_fit();
}

/// An optional list at its exact length.
pub fn fit_opt<T>(v: &mut Option<Vec<T>>) {
    if let Some(v) = v {
        v.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decoded from text, as the watch decodes it (a value would give exact lengths already).
    fn running_pod() -> Pod {
        let text = serde_json::to_vec(&serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                    "name": "web", "uid": "u", "controller": true}]},
            "spec": {"nodeName": "n",
                "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                    "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
                "volumes": [{"name": "v", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"},
                    {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "", "ready": true,
                    "restartCount": 0}],
                "podIPs": [{"ip": "10.0.0.1"}]}
        }))
        .unwrap();
        serde_json::from_slice(&text).unwrap()
    }

    #[test]
    fn a_shrunk_pod_is_equal_and_its_lists_are_exact() {
        let pod = running_pod();
        let decoded = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .unwrap();
        assert!(
            decoded.capacity() > decoded.len(),
            "the decoder leaves room to spare (else this test proves nothing)"
        );
        // Moved, not cloned: a clone would already be exact whatever `shrink_pod` did.
        let expected = pod.clone();
        let shrunk = shrink_pod(pod);
        assert_eq!(shrunk, expected);
        let status = shrunk.status.as_ref().unwrap();
        let statuses = status.container_statuses.as_ref().unwrap();
        assert_eq!(statuses.capacity(), statuses.len());
        let conditions = status.conditions.as_ref().unwrap();
        assert_eq!(conditions.capacity(), conditions.len());
        let spec = shrunk.spec.as_ref().unwrap();
        let tolerations = spec.tolerations.as_ref().unwrap();
        assert_eq!(tolerations.capacity(), tolerations.len());
        let sources = spec.volumes.as_ref().unwrap()[0]
            .projected
            .as_ref()
            .unwrap()
            .sources
            .as_ref()
            .unwrap();
        assert_eq!(sources.capacity(), sources.len());
    }

    #[test]
    fn an_empty_pod_is_kept() {
        assert_eq!(shrink_pod(Pod::default()), Pod::default());
    }
}
