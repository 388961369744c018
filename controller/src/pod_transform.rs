//! What the controller manager's shared pod informer keeps of a pod (client-go's `SetTransform`;
//! issue 17 item 7): everything but the parts of the spec that only a kubelet reads.
//!
//! Dropped: the volumes that carry API data into the container — `projected` (the
//! `kube-api-access-*` volume the ServiceAccount admission adds to nearly every pod), `configMap`,
//! `secret`, `downwardAPI` — and of each container, init container and ephemeral container its
//! `volumeMounts`, `volumeDevices`, `env`, `envFrom`, `command`, `args`, `workingDir`, probes,
//! `lifecycle`, `securityContext` and termination-message settings. No controller of this crate
//! reads them: the scheduler's volume plugins, the StatefulSet's claims, the PVC protection and
//! the volume binder look only at `persistentVolumeClaim` and `ephemeral` volumes, which stay;
//! ports (endpoints, host ports), images (image locality), resources, tolerations, affinity and
//! the rest of the spec stay. A typed `Volume` is 3.2 KB before its contents, so the service
//! account's one volume was about a third of a cached pod.
//!
//! Controllers never write a pod back whole (they patch, delete, bind, or write `/status`, which
//! takes nothing but the status), so the cached pod's missing parts are never sent as an update.
//!
//! Guarantees: [`controller_pod`] changes nothing but the fields listed above (the test compares
//! a full pod with its projection field by field), and every list kept is at its exact length
//! ([`client::transform::shrink_pod`]). A controller that starts reading a dropped field must keep
//! it here.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, Volume};

/// `pod` as the controller manager's pod informer keeps it (see the module docs).
pub fn controller_pod(mut pod: Pod) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        if let Some(volumes) = spec.volumes.as_mut() {
            volumes.retain(|v| !carries_api_data(v));
        }
        spec.containers.iter_mut().for_each(trim_container);
        if let Some(cs) = spec.init_containers.as_mut() {
            cs.iter_mut().for_each(trim_container);
        }
        if let Some(cs) = spec.ephemeral_containers.as_mut() {
            cs.iter_mut().for_each(trim_ephemeral_container);
        }
    }
    client::transform::shrink_pod(pod)
}

/// A volume whose only reader is the kubelet that fills it.
fn carries_api_data(v: &Volume) -> bool {
    v.projected.is_some()
        || v.config_map.is_some()
        || v.secret.is_some()
        || v.downward_api.is_some()
}

/// What a kubelet alone reads of a container; `Container` and `EphemeralContainer` share the
/// field names.
macro_rules! trim_container_fields {
    ($c:expr) => {{
        let c = $c;
        c.volume_mounts = None;
        c.volume_devices = None;
        c.env = None;
        c.env_from = None;
        c.command = None;
        c.args = None;
        c.working_dir = None;
        c.liveness_probe = None;
        c.readiness_probe = None;
        c.startup_probe = None;
        c.lifecycle = None;
        c.security_context = None;
        c.termination_message_path = None;
        c.termination_message_policy = None;
    }};
}

fn trim_container(c: &mut Container) {
    trim_container_fields!(c);
}

fn trim_ephemeral_container(c: &mut EphemeralContainer) {
    trim_container_fields!(c);
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// A running pod as the ServiceAccount admission and a kubelet leave it, with a claim.
    fn full_pod() -> Pod {
        let container = json!({"name": "c", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
            "command": ["sh"], "args": ["-c", "serve"], "workingDir": "/srv",
            "env": [{"name": "A", "value": "1"}], "envFrom": [{"configMapRef": {"name": "cm"}}],
            "ports": [{"name": "http", "containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            "volumeMounts": [{"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
                {"name": "data", "mountPath": "/data"}],
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}},
            "securityContext": {"runAsNonRoot": true},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"});
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                    "name": "web", "uid": "u", "controller": true}]},
            "spec": {"nodeName": "n", "schedulerName": "default-scheduler", "priority": 0,
                "serviceAccountName": "default", "hostname": "h", "subdomain": "s",
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
                "initContainers": [container.clone()],
                "containers": [container],
                "volumes": [
                    {"name": "kube-api-access-x", "projected": {"sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}},
                    {"name": "cfg", "configMap": {"name": "cm"}},
                    {"name": "tls", "secret": {"secretName": "s"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-p"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "nginx:1.27", "imageID": "", "ready": true,
                    "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2026-12-07T00:00:00Z"}}}]}
        }))
        .unwrap()
    }

    /// Every leaf of `v` as (path, value).
    fn leaves(v: &Value, path: String, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, v) in m {
                    leaves(v, format!("{path}/{k}"), out);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, v) in a.iter().enumerate() {
                    leaves(v, format!("{path}/{i}"), out);
                }
            }
            v => out.push((path, v.clone())),
        }
    }

    #[test]
    fn only_what_a_kubelet_alone_reads_is_dropped() {
        let full = full_pod();
        let kept = controller_pod(full.clone());
        let (full, kept) = (
            serde_json::to_value(&full).unwrap(),
            serde_json::to_value(&kept).unwrap(),
        );
        let mut kept_leaves = Vec::new();
        leaves(&kept, String::new(), &mut kept_leaves);
        let mut full_leaves = Vec::new();
        leaves(&full, String::new(), &mut full_leaves);

        // Container fields a kubelet alone reads, of both container lists.
        let dropped_field = [
            "volumeMounts",
            "env",
            "envFrom",
            "command",
            "args",
            "workingDir",
            "readinessProbe",
            "lifecycle",
            "securityContext",
            "terminationMessagePath",
            "terminationMessagePolicy",
        ];
        let is_dropped = |path: &str| {
            ["/spec/containers/0/", "/spec/initContainers/0/"]
                .iter()
                .any(|p| {
                    path.strip_prefix(p).is_some_and(|rest| {
                        dropped_field
                            .iter()
                            .any(|f| rest.split('/').next() == Some(f))
                    })
                })
        };
        // Volumes are compared whole below.
        let outside_volumes = |leaves: Vec<(String, Value)>| -> Vec<(String, Value)> {
            leaves
                .into_iter()
                .filter(|(p, _)| !p.starts_with("/spec/volumes/"))
                .collect()
        };
        let expected: Vec<(String, Value)> = outside_volumes(full_leaves)
            .into_iter()
            .filter(|(p, _)| !is_dropped(p))
            .collect();
        assert_eq!(
            outside_volumes(kept_leaves),
            expected,
            "every other field is kept as it was"
        );
        // The projected, configMap and secret volumes go; the claims stay.
        let volumes = &full["spec"]["volumes"];
        assert_eq!(kept["spec"]["volumes"], json!([volumes[3], volumes[4]]));
        // The fields the controllers read are there.
        let c = &kept["spec"]["containers"][0];
        assert_eq!(c["ports"][0]["hostPort"], 8080);
        assert_eq!(c["resources"]["requests"]["cpu"], "10m");
        assert_eq!(kept["spec"]["tolerations"][0]["tolerationSeconds"], 300);
    }

    #[test]
    fn a_pod_without_a_spec_is_kept() {
        assert_eq!(controller_pod(Pod::default()), Pod::default());
    }
}
