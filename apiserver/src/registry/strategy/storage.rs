//! Core v1 PersistentVolumes (and the rules they share with claims, `claim.rs`), as kube-apiserver 1.33
//! (`pkg/registry/core/persistentvolume{,claim}/strategy.go`, `SetDefaults_PersistentVolume*`,
//! `ValidatePersistentVolume*`, kubectl's printers).
//!
//! - Defaults: a PV's `persistentVolumeReclaimPolicy` is `Retain` and its `volumeMode`
//!   `Filesystem`; a claim's `volumeMode` is `Filesystem`; a hostPath source gets `type: ""`.
//! - Status is a subresource: a new PV starts `Pending` with `lastPhaseTransitionTime` now, a new
//!   claim `Pending`; main-resource writes keep the stored status.
//! - `volumeAttributesClassName` is dropped from specs that did not already carry one (the
//!   VolumeAttributesClass feature is off by default in 1.33, so upstream drops the field).
//! - A PV's volume source and volume mode are immutable; a claim's spec is immutable after
//!   creation except the storage request of a bound claim (which may grow, or shrink no lower than
//!   `status.capacity`) and a first `volumeName`.
//! - A claim's `dataSource` and `dataSourceRef` mirror each other at create when only one is set.
//!
//! The `spec is immutable` messages carry upstream's first line; the `cmp.Diff` rendering that
//! follows it upstream is replaced by the changed fields as JSON.

use super::common::{default_field, object_at, semantically_equal};
use super::resource_list::{self as rl, access_modes_text, quantity_text};
use super::table::{age_cell, age_column, column, name_column};
use super::volume_defaults::default_host_path;
use super::Strategy;
use api::validation::{self, FieldError};
use serde_json::{json, Map, Value};

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];
pub(super) const STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The volume sources of a PV spec (`PersistentVolumeSource`), with the field name upstream's
/// "more than 1 volume type" error names.
const PV_SOURCES: &[(&str, &str)] = &[
    ("hostPath", "hostPath"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("nfs", "nfs"),
    ("rbd", "rbd"),
    ("quobyte", "quobyte"),
    ("cephfs", "cephFS"),
    ("iscsi", "iscsi"),
    ("cinder", "cinder"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("scaleIO", "scaleIO"),
    ("local", "local"),
    ("storageos", "storageos"),
    ("csi", "csi"),
];

pub(super) fn text<'a>(v: Option<&'a Value>, key: &str) -> &'a str {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn present(v: Option<&Value>, key: &str) -> bool {
    v.and_then(|v| v.get(key)).is_some_and(|x| !x.is_null())
}

/// Access modes: required (with `required_msg`), each supported, RWOP alone.
pub(super) fn validate_access_modes(
    spec: Option<&Value>,
    required_msg: &str,
    errs: &mut Vec<FieldError>,
) {
    let modes = spec
        .and_then(|s| s.get("accessModes"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if modes.is_empty() {
        errs.push(FieldError::required("spec.accessModes", required_msg));
    }
    let (mut rwop, mut other) = (false, false);
    for m in &modes {
        let s = m.as_str().unwrap_or("");
        if !ACCESS_MODES.contains(&s) {
            errs.push(FieldError::not_supported(
                "spec.accessModes",
                m,
                ACCESS_MODES,
            ));
        } else if s == "ReadWriteOncePod" {
            rwop = true;
        } else {
            other = true;
        }
    }
    if rwop && other {
        errs.push(FieldError::forbidden(
            "spec.accessModes",
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

pub(super) fn validate_class_name(spec: Option<&Value>, key: &str, errs: &mut Vec<FieldError>) {
    let name = text(spec, key);
    if !name.is_empty() {
        for m in validation::is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid(format!("spec.{key}"), name, m));
        }
    }
}

pub(super) fn validate_volume_mode(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    if let Some(m) = spec
        .and_then(|s| s.get("volumeMode"))
        .filter(|v| !v.is_null())
    {
        if !m.as_str().is_some_and(|s| VOLUME_MODES.contains(&s)) {
            errs.push(FieldError::not_supported(
                "spec.volumeMode",
                m,
                VOLUME_MODES,
            ));
        }
    }
}

/// `validatePathNoBacksteps`.
fn no_backsteps(path_value: &str, path: &str, errs: &mut Vec<FieldError>) {
    if path_value.split(['/', '\\']).any(|p| p == "..") {
        errs.push(FieldError::invalid(
            path,
            path_value,
            "must not contain '..'",
        ));
    }
}

/// The checks of the commonly used sources (hostPath, nfs, local, csi); other sources are
/// stored as sent.
fn validate_source(key: &str, src: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let s = Some(src);
    match key {
        "hostPath" => {
            let p = text(s, "path");
            if p.is_empty() {
                errs.push(FieldError::required(format!("{path}.path"), ""));
                return;
            }
            no_backsteps(p, &format!("{path}.path"), errs);
            if let Some(t) = src.get("type").filter(|t| !t.is_null()) {
                if !t.as_str().is_some_and(|t| HOST_PATH_TYPES.contains(&t)) {
                    errs.push(FieldError::not_supported(
                        format!("{path}.type"),
                        t,
                        HOST_PATH_TYPES,
                    ));
                }
            }
        }
        "nfs" => {
            if text(s, "server").is_empty() {
                errs.push(FieldError::required(format!("{path}.server"), ""));
            }
            let p = text(s, "path");
            if p.is_empty() {
                errs.push(FieldError::required(format!("{path}.path"), ""));
            }
            if !p.starts_with('/') {
                errs.push(FieldError::invalid(
                    format!("{path}.path"),
                    p,
                    "must be an absolute path",
                ));
            }
        }
        "local" => {
            let p = text(s, "path");
            if p.is_empty() {
                errs.push(FieldError::required(format!("{path}.path"), ""));
            } else {
                no_backsteps(p, &format!("{path}.path"), errs);
            }
        }
        "csi" => {
            if text(s, "driver").is_empty() {
                errs.push(FieldError::required(format!("{path}.driver"), ""));
            }
            if text(s, "volumeHandle").is_empty() {
                errs.push(FieldError::required(format!("{path}.volumeHandle"), ""));
            }
        }
        _ => {}
    }
}

/// `ValidatePersistentVolumeSpec` (not inline).
fn validate_pv_spec(spec: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_access_modes(spec, "", &mut errs);
    let capacity = rl::entries(spec.and_then(|s| s.get("capacity")));
    if capacity.is_empty() {
        errs.push(FieldError::required("spec.capacity", ""));
    }
    if !capacity.contains_key("storage") || capacity.len() > 1 {
        let shown = format!(
            "core.ResourceList{{{}}}",
            capacity
                .iter()
                .map(|(k, v)| format!("{}:{}", validation::go_quote(k), quantity_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut e = FieldError::not_supported("spec.capacity", &Value::Null, &["storage"]);
        e.value = Some(shown);
        errs.push(e);
    }
    for (k, q) in &capacity {
        let p = format!("spec.capacity[{k}]");
        match rl::parse(q, &p) {
            Ok(a) if a.value() < 0 => errs.push(FieldError::invalid_value(
                &p,
                &json!(a.value() as i64),
                "must be a valid resource quantity",
            )),
            Ok(_) => {}
            Err(e) => {
                errs.push(e);
                continue;
            }
        }
        errs.extend(rl::validate_positive(q, &p));
    }
    if let Some(p) = spec
        .and_then(|s| s.get("persistentVolumeReclaimPolicy"))
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    {
        if !p.as_str().is_some_and(|s| RECLAIM_POLICIES.contains(&s)) {
            errs.push(FieldError::not_supported(
                "spec.persistentVolumeReclaimPolicy",
                p,
                RECLAIM_POLICIES,
            ));
        }
    }
    let affinity = present(spec, "nodeAffinity");
    if affinity {
        validate_node_affinity(spec.and_then(|s| s.get("nodeAffinity")), &mut errs);
    }
    let mut count = 0;
    for (key, err_name) in PV_SOURCES {
        let Some(src) = spec.and_then(|s| s.get(*key)).filter(|v| !v.is_null()) else {
            continue;
        };
        if count > 0 && *key != "flexVolume" {
            errs.push(FieldError::forbidden(
                format!("spec.{err_name}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        count += 1;
        validate_source(key, src, &format!("spec.{key}"), &mut errs);
        if *key == "local" && !affinity {
            errs.push(FieldError::required(
                "spec.nodeAffinity",
                "Local volume requires node affinity",
            ));
        }
    }
    if count == 0 {
        errs.push(FieldError::required("spec", "must specify a volume type"));
    }
    let host_path = spec
        .and_then(|s| s.pointer("/hostPath/path"))
        .and_then(Value::as_str);
    if host_path.is_some_and(|p| p.trim_end_matches('/').is_empty() && !p.is_empty())
        && text(spec, "persistentVolumeReclaimPolicy") == "Recycle"
    {
        errs.push(FieldError::forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
    validate_class_name(spec, "storageClassName", &mut errs);
    validate_volume_mode(spec, &mut errs);
    errs
}

/// `validateVolumeNodeAffinity`: `required` must be set and have node selector terms.
fn validate_node_affinity(affinity: Option<&Value>, errs: &mut Vec<FieldError>) {
    let Some(required) = affinity
        .and_then(|a| a.get("required"))
        .filter(|v| !v.is_null())
    else {
        errs.push(FieldError::required(
            "spec.nodeAffinity.required",
            "must specify required node constraints",
        ));
        return;
    };
    let terms = required
        .get("nodeSelectorTerms")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if terms == 0 {
        errs.push(FieldError::required(
            "spec.nodeAffinity.required.nodeSelectorTerms",
            "must have at least one node selector term",
        ));
    }
}

/// `ValidateImmutableField` of `spec.<key>` reported at `path` (upstream's paths for PV and claim
/// volume modes are the bare `volumeMode`).
pub(super) fn immutable(
    new: Option<&Value>,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if !semantically_equal(new, old) {
        errs.push(FieldError::invalid_value(
            path,
            new.unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
}

/// The fields of two specs that differ, as `-key: old` / `+key: new` lines.
pub(super) fn spec_diff(old: &Map<String, Value>, new: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::new();
    for k in keys {
        if semantically_equal(old.get(k), new.get(k)) {
            continue;
        }
        if let Some(v) = old.get(k) {
            out.push_str(&format!("-\t{k}: {v}\n"));
        }
        if let Some(v) = new.get(k) {
            out.push_str(&format!("+\t{k}: {v}\n"));
        }
    }
    out
}

pub(super) fn spec_map(obj: &Value) -> Map<String, Value> {
    obj.get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Drops `spec.volumeAttributesClassName` unless `old` already has one (feature off in 1.33).
pub(super) fn drop_volume_attributes_class(new: &mut Value, old: Option<&Value>) {
    let in_use = old
        .and_then(|o| o.pointer("/spec/volumeAttributesClassName"))
        .is_some_and(|v| !v.is_null());
    if !in_use {
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("volumeAttributesClassName");
        }
    }
}

/// The storage class of a PV or claim: the beta annotation wins, as kubectl's helper.
pub(super) fn storage_class(obj: &Value) -> String {
    if let Some(c) = api::meta::annotations(obj).get(STORAGE_CLASS_ANNOTATION) {
        return c.clone();
    }
    obj.pointer("/spec/storageClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

pub(super) fn unset_or(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or("<unset>").to_string()
}

pub(super) fn phase_cell(obj: &Value) -> String {
    if api::meta::deletion_timestamp(obj).is_some() {
        return "Terminating".to_string();
    }
    obj.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// core v1 PersistentVolume (cluster-scoped).
pub struct PersistentVolumeStrategy;

impl Strategy for PersistentVolumeStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        drop_volume_attributes_class(obj, None);
        if let Some(spec) = object_at(obj, "spec") {
            default_field(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            default_field(spec, "volumeMode", json!("Filesystem"));
            if let Some(hp) = spec.get_mut("hostPath") {
                default_host_path(hp);
            }
        }
    }

    /// `SetDefaults_PersistentVolume` (not the strategy's feature-gated field drop).
    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, |obj| {
            if let Some(spec) = object_at(obj, "spec") {
                default_field(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
                default_field(spec, "volumeMode", json!("Filesystem"));
                if let Some(hp) = spec.get_mut("hostPath") {
                    default_host_path(hp);
                }
            }
            super::common::default_status_phase(obj, "Pending");
        })
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({
            "phase": "Pending",
            "lastPhaseTransitionTime": api::meta::now_rfc3339(),
        }))
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        drop_volume_attributes_class(new, Some(old));
        if let Some(hp) = new.pointer_mut("/spec/hostPath") {
            default_host_path(hp);
        }
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        // A phase change without a new transition time gets now (PV strategy's status update).
        let phase = |o: &Value| o.pointer("/status/phase").cloned();
        let time = |o: &Value| o.pointer("/status/lastPhaseTransitionTime").cloned();
        let stale = time(new).is_none_or(|t| t.is_null() || Some(&t) == time(old).as_ref());
        if phase(new) != phase(old) && stale {
            if let Some(st) = object_at(new, "status") {
                st.insert(
                    "lastPhaseTransitionTime".into(),
                    json!(api::meta::now_rfc3339()),
                );
            }
        }
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_pv_spec(obj.get("spec"))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_pv_spec(new.get("spec"));
        let source = |obj: &Value| {
            let spec = spec_map(obj);
            PV_SOURCES
                .iter()
                .filter_map(|(k, _)| spec.get(*k).map(|v| (k.to_string(), v.clone())))
                .collect::<Map<String, Value>>()
        };
        let (mut old_src, new_src) = (source(old), source(new));
        // A CSI source may gain a controllerExpandSecretRef.
        let old_has_ref = old_src
            .get("csi")
            .is_some_and(|c| c.get("controllerExpandSecretRef").is_some());
        if !old_has_ref {
            if let (Some(c), Some(n)) = (old_src.get_mut("csi"), new_src.get("csi")) {
                if let (Some(c), Some(r)) = (c.as_object_mut(), n.get("controllerExpandSecretRef"))
                {
                    c.insert("controllerExpandSecretRef".into(), r.clone());
                }
            }
        }
        if !semantically_equal(
            Some(&Value::Object(old_src.clone())),
            Some(&Value::Object(new_src.clone())),
        ) {
            errs.push(FieldError::forbidden(
                "spec.persistentvolumesource",
                format!(
                    "spec.persistentvolumesource is immutable after creation\n{}",
                    spec_diff(&old_src, &new_src)
                ),
            ));
        }
        immutable(
            new.pointer("/spec/volumeMode"),
            old.pointer("/spec/volumeMode"),
            "volumeMode",
            &mut errs,
        );
        if let Some(old_aff) = old.pointer("/spec/nodeAffinity").filter(|v| !v.is_null()) {
            let new_aff = new.pointer("/spec/nodeAffinity");
            if !semantically_equal(new_aff, Some(old_aff)) {
                errs.push(FieldError::invalid_value(
                    "nodeAffinity",
                    new_aff.unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
        }
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Capacity", "string", "", "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity", 0),
            column("Access Modes", "string", "", "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes", 0),
            column("Reclaim Policy", "string", "", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming", 0),
            column("Status", "string", "", "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase", 0),
            column("Claim", "string", "", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding", 0),
            column("StorageClass", "string", "", "storageClassName is the name of StorageClass to which this persistent volume belongs. Empty value means that this volume does not belong to any StorageClass.", 0),
            column("VolumeAttributesClass", "string", "", "Name of VolumeAttributesClass to which this persistent volume belongs. Empty value is not allowed. When this field is not set, it indicates that this volume does not belong to any VolumeAttributesClass. This field is mutable and can be changed by the CSI driver after a volume has been updated successfully to a new class. For an unbound PersistentVolume, the volumeAttributesClassName will be matched with unbound PersistentVolumeClaims during the binding process.", 0),
            column("Reason", "string", "", "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.", 0),
            age_column(),
            column("VolumeMode", "string", "", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.", 1),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let claim = match obj.pointer("/spec/claimRef") {
            Some(r) if !r.is_null() => {
                format!("{}/{}", text(Some(r), "namespace"), text(Some(r), "name"))
            }
            _ => String::new(),
        };
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            json!(obj
                .pointer("/spec/capacity/storage")
                .map(quantity_text)
                .unwrap_or_else(|| "0".into())),
            json!(access_modes_text(obj.pointer("/spec/accessModes"))),
            json!(text(obj.get("spec"), "persistentVolumeReclaimPolicy")),
            json!(phase_cell(obj)),
            json!(claim),
            json!(storage_class(obj)),
            json!(unset_or(obj.pointer("/spec/volumeAttributesClassName"))),
            json!(text(obj.get("status"), "reason")),
            age_cell(obj, now),
            json!(unset_or(obj.pointer("/spec/volumeMode"))),
        ]
    }
}
