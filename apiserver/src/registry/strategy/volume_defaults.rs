//! The pod-spec defaults of `pkg/apis/core/v1/defaults.go` (and the declarative defaults of
//! `zz_generated.defaults.go`) beyond the container basics in `pod.rs`: volumes
//! (`SetDefaults_Volume`: a volume with no source is an `emptyDir: {}`; the mode, path-type and
//! plugin defaults of each source), probes (`SetDefaults_Probe`, `SetDefaults_HTTPGetAction`, a
//! gRPC probe's `service: ""`), lifecycle HTTP handlers, `fieldRef.apiVersion` (`SetDefaults_
//! ObjectFieldSelector`), ephemeral containers, and the pod-only rules of `SetDefaults_Pod`
//! (requests default to limits; with host networking, host ports to container ports).
//!
//! [`default_pod_spec_extras`] runs wherever a pod spec is defaulted (pods and every pod template),
//! [`default_pod_extras`] only on pods, as upstream.

use super::common::default_field;
use serde_json::{json, Map, Value};

/// Every volume source a pod volume may name (`VolumeSource`'s fields).
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// `0644`, the default mode of secret, configMap, downwardAPI and projected volumes.
const DEFAULT_MODE: i64 = 0o644;

/// `SetDefaults_HostPathVolumeSource`: `type` is `""` (HostPathUnset) when not given.
pub fn default_host_path(src: &mut Value) {
    if let Some(m) = src.as_object_mut() {
        default_field(m, "type", json!(""));
    }
}

fn default_field_ref(item: &mut Value) {
    if let Some(fr) = item.get_mut("fieldRef").and_then(Value::as_object_mut) {
        default_field(fr, "apiVersion", json!("v1"));
    }
}

fn default_downward_items(src: &mut Map<String, Value>) {
    if let Some(items) = src.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(default_field_ref);
    }
}

/// The defaults of one volume source.
fn default_source(key: &str, src: &mut Value) {
    let Some(m) = src.as_object_mut() else { return };
    match key {
        "hostPath" => default_field(m, "type", json!("")),
        "secret" | "configMap" => default_field(m, "defaultMode", json!(DEFAULT_MODE)),
        "downwardAPI" => {
            default_field(m, "defaultMode", json!(DEFAULT_MODE));
            default_downward_items(m);
        }
        "projected" => {
            default_field(m, "defaultMode", json!(DEFAULT_MODE));
            let sources = m.get_mut("sources").and_then(Value::as_array_mut);
            for s in sources.into_iter().flatten() {
                if let Some(t) = s
                    .get_mut("serviceAccountToken")
                    .and_then(Value::as_object_mut)
                {
                    default_field(t, "expirationSeconds", json!(3600));
                }
                if let Some(d) = s.get_mut("downwardAPI").and_then(Value::as_object_mut) {
                    default_downward_items(d);
                }
            }
        }
        "iscsi" => default_field(m, "iscsiInterface", json!("default")),
        "rbd" => {
            default_field(m, "pool", json!("rbd"));
            default_field(m, "user", json!("admin"));
            default_field(m, "keyring", json!("/etc/ceph/keyring"));
        }
        "azureDisk" => {
            default_field(m, "cachingMode", json!("ReadWrite"));
            default_field(m, "fsType", json!("ext4"));
            default_field(m, "readOnly", json!(false));
            default_field(m, "kind", json!("Shared"));
        }
        "scaleIO" => {
            default_field(m, "storageMode", json!("ThinProvisioned"));
            default_field(m, "fsType", json!("xfs"));
        }
        "ephemeral" => {
            if let Some(spec) = m
                .get_mut("volumeClaimTemplate")
                .and_then(|t| t.get_mut("spec"))
                .and_then(Value::as_object_mut)
            {
                super::claim::default_claim_spec(spec);
            }
        }
        _ => {}
    }
}

/// `SetDefaults_Volume` and the per-source defaults of one pod volume.
pub fn default_volume(vol: &mut Value) {
    let Some(m) = vol.as_object_mut() else { return };
    let has_source = VOLUME_SOURCES
        .iter()
        .any(|k| m.get(*k).is_some_and(|v| !v.is_null()));
    if !has_source {
        m.insert("emptyDir".into(), json!({}));
    }
    for key in VOLUME_SOURCES {
        if let Some(src) = m.get_mut(*key) {
            default_source(key, src);
        }
    }
}

fn default_http_get(handler: &mut Value) {
    if let Some(h) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        for (k, v) in [("path", "/"), ("scheme", "HTTP")] {
            if h.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
                h.insert(k.into(), json!(v));
            }
        }
    }
}

/// `SetDefaults_Probe` with its handler's defaults.
fn default_probe(probe: &mut Value) {
    default_http_get(probe);
    if let Some(g) = probe.get_mut("grpc").and_then(Value::as_object_mut) {
        default_field(g, "service", json!(""));
    }
    let Some(m) = probe.as_object_mut() else {
        return;
    };
    for (k, v) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        if m.get(k).and_then(Value::as_i64).is_none_or(|n| n == 0) {
            m.insert(k.into(), json!(v));
        }
    }
}

/// Probe, lifecycle and env defaults of one container (any of the three lists).
fn default_container_extras(c: &mut Value) {
    let Some(m) = c.as_object_mut() else { return };
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = m.get_mut(key).filter(|p| p.is_object()) {
            default_probe(p);
        }
    }
    if let Some(l) = m.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for key in ["postStart", "preStop"] {
            if let Some(h) = l.get_mut(key) {
                default_http_get(h);
            }
        }
    }
    if let Some(env) = m.get_mut("env").and_then(Value::as_array_mut) {
        for e in env.iter_mut() {
            if let Some(from) = e.get_mut("valueFrom") {
                default_field_ref(from);
            }
        }
    }
}

/// The pod-spec defaults beyond `pod.rs`'s, for pods and pod templates alike.
pub fn default_pod_spec_extras(spec: &mut Map<String, Value>) {
    if let Some(vols) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        vols.iter_mut().for_each(default_volume);
    }
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = spec.get_mut(key).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(default_container_extras);
        }
    }
}

/// `SetDefaults_Pod`'s rules that apply to pods only, not templates: container requests default
/// to their limits, and with `hostNetwork` every container port's `hostPort` to its
/// `containerPort`.
pub fn default_pod_extras(spec: &mut Map<String, Value>) {
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for key in ["containers", "initContainers"] {
        let Some(cs) = spec.get_mut(key).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs.iter_mut().filter_map(Value::as_object_mut) {
            requests_from_limits(c);
            if host_network {
                let ports = c.get_mut("ports").and_then(Value::as_array_mut);
                for p in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                    let zero = p
                        .get("hostPort")
                        .and_then(Value::as_i64)
                        .is_none_or(|n| n == 0);
                    if zero {
                        if let Some(cp) = p.get("containerPort").cloned() {
                            p.insert("hostPort".into(), cp);
                        }
                    }
                }
            }
        }
    }
}

fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let requests = res.entry("requests").or_insert_with(|| json!({}));
    if !requests.is_object() {
        *requests = json!({});
    }
    if let Some(r) = requests.as_object_mut() {
        for (k, v) in limits {
            r.entry(k).or_insert(v);
        }
    }
}
