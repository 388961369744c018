//! `storage.k8s.io/v1` StorageClasses and VolumeAttachments, as upstream's
//! `pkg/apis/storage/validation`, `pkg/apis/storage/v1/defaults.go` and
//! `pkg/registry/storage/{storageclass,volumeattachment}` define them.
//!
//! - StorageClass: `reclaimPolicy` defaults to `Delete` and `volumeBindingMode` to `Immediate`; a
//!   provisioner (a qualified name) is required; parameters are bounded (512 entries, 256 KiB);
//!   allowed topologies are label requirements with values, no duplicates. Provisioner,
//!   parameters, reclaim policy and binding mode never change. The table marks the default class
//!   (`storageclass.kubernetes.io/is-default-class: "true"`, or the beta annotation) `(default)`.
//! - VolumeAttachment: an attacher (a CSI driver name), exactly one source, a node name; the spec
//!   is immutable; status is a subresource (reset on create to `attached: false`). An inline
//!   volume spec is stored as sent: upstream's PersistentVolumeSpec rules are not re-implemented
//!   here.

use std::collections::{BTreeMap, BTreeSet};

use super::common::default_field;
use super::netvalid::{items, set, text};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, go_quote, FieldError, FieldErrorKind};
use serde_json::{json, Value};

const MAX_PARAMETERS: usize = 512;
const MAX_PARAMETERS_SIZE: usize = 256 * (1 << 10);
const MAX_ATTACHED_METADATA_SIZE: usize = 256 * (1 << 10);
const MAX_VOLUME_ERROR_MESSAGE_SIZE: usize = 1024;
/// `supportedReclaimPolicy.List()` and `supportedVolumeBindingModes.List()`: sorted.
const RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
const DEFAULT_CLASS_ANNOTATIONS: &[&str] = &[
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

fn too_long(field: impl Into<String>, max: usize) -> FieldError {
    FieldError::too_long(field, format!("may not be more than {max} bytes"))
}

/// `SetDefaults_StorageClass`.
fn default_storage_class(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        default_field(o, "reclaimPolicy", json!("Delete"));
        default_field(o, "volumeBindingMode", json!("Immediate"));
    }
}

/// `validateProvisioner` (also a VolumeAttributesClass's driver).
fn validate_provisioner(p: &str, path: &str) -> Vec<FieldError> {
    if p.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let lower = p.to_lowercase();
    validation::is_qualified_name(&lower)
        .into_iter()
        .map(|m| FieldError::invalid(path, &lower, m))
        .collect()
}

/// `validateParameters` (empty allowed).
fn validate_parameters(params: Option<&Value>) -> Vec<FieldError> {
    let Some(map) = params.and_then(Value::as_object) else {
        return Vec::new();
    };
    if map.len() > MAX_PARAMETERS {
        return vec![too_long("parameters", MAX_PARAMETERS)];
    }
    let mut errs = Vec::new();
    let mut size = 0;
    for (k, v) in map {
        if k.is_empty() {
            errs.push(FieldError::invalid(
                "parameters",
                k,
                "field can not be empty.",
            ));
        }
        size += k.len() + v.as_str().map_or(0, str::len);
    }
    if size > MAX_PARAMETERS_SIZE {
        errs.push(too_long("parameters", MAX_PARAMETERS_SIZE));
    }
    errs
}

/// `ValidateTopologySelectorTerm` of each allowed topology, and duplicate terms (as upstream
/// compares them, a term without requirements always counts as a duplicate).
fn validate_allowed_topologies(terms: &[Value]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: Vec<BTreeMap<String, BTreeSet<String>>> = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        let path = format!("allowedTopologies[{i}]");
        let mut exprs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (j, req) in items(term, "matchLabelExpressions").iter().enumerate() {
            let rpath = format!("{path}.matchLabelExpressions[{j}]");
            let values = items(req, "values");
            if values.is_empty() {
                errs.push(FieldError::required(format!("{rpath}.values"), ""));
            }
            let mut set = BTreeSet::new();
            for (k, v) in values.iter().enumerate() {
                let v = v.as_str().unwrap_or("");
                if !set.insert(v.to_string()) {
                    errs.push(FieldError::duplicate(
                        format!("{rpath}.values[{k}]"),
                        &json!(v),
                    ));
                }
            }
            let key = text(req, "key");
            for m in validation::is_qualified_name(key) {
                errs.push(FieldError::invalid(format!("{rpath}.key"), key, m));
            }
            if exprs.contains_key(key) {
                errs.push(FieldError::duplicate(format!("{rpath}.key"), &json!(key)));
            }
            exprs.insert(key.to_string(), set);
        }
        if exprs.is_empty() || seen.contains(&exprs) {
            errs.push(FieldError::duplicate(
                format!("{path}.matchLabelExpressions"),
                &json!(""),
            ));
        }
        seen.push(exprs);
    }
    errs
}

fn validate_storage_class(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_provisioner(text(obj, "provisioner"), "provisioner");
    errs.extend(validate_parameters(obj.get("parameters")));
    if let Some(p) = set(obj, "reclaimPolicy") {
        let empty = p.as_str() == Some("");
        if !empty && !p.as_str().is_some_and(|s| RECLAIM_POLICIES.contains(&s)) {
            errs.push(FieldError::not_supported(
                "reclaimPolicy",
                p,
                RECLAIM_POLICIES,
            ));
        }
    }
    match set(obj, "volumeBindingMode") {
        None => errs.push(FieldError::required("volumeBindingMode", "")),
        Some(m) if !m.as_str().is_some_and(|s| BINDING_MODES.contains(&s)) => {
            errs.push(FieldError::not_supported(
                "volumeBindingMode",
                m,
                BINDING_MODES,
            ));
        }
        Some(_) => {}
    }
    errs.extend(validate_allowed_topologies(items(obj, "allowedTopologies")));
    errs
}

/// `ValidateStorageClassUpdate`: the immutable fields.
fn validate_storage_class_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if set(new, "parameters") != set(old, "parameters") {
        errs.push(FieldError::forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    for key in ["provisioner", "reclaimPolicy"] {
        if text(new, key) != text(old, key) {
            errs.push(FieldError::forbidden(
                key,
                format!("updates to {key} are forbidden."),
            ));
        }
    }
    let mode = set(new, "volumeBindingMode");
    if mode != set(old, "volumeBindingMode") {
        errs.push(FieldError::invalid_value(
            "volumeBindingMode",
            mode.unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
    errs
}

/// `storageutil.IsDefaultAnnotation`.
pub fn is_default_class(obj: &Value) -> bool {
    let annotations = obj.pointer("/metadata/annotations");
    DEFAULT_CLASS_ANNOTATIONS
        .iter()
        .any(|a| annotations.and_then(|m| m.get(*a)).and_then(Value::as_str) == Some("true"))
}

/// storage.k8s.io/v1 StorageClass.
pub struct StorageClassStrategy;

impl Strategy for StorageClassStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_storage_class(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_storage_class)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_storage_class(new);
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_storage_class(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_storage_class(new);
        errs.extend(validate_storage_class_update(new, old));
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Provisioner", "string", "", "provisioner indicates the type of the provisioner.", 0),
            column("ReclaimPolicy", "string", "", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.", 0),
            column("VolumeBindingMode", "string", "", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.", 0),
            column("AllowVolumeExpansion", "string", "", "allowVolumeExpansion shows whether the storage class allow volume expand.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let mut name = api::meta::name(obj).unwrap_or("").to_string();
        if is_default_class(obj) {
            name.push_str(" (default)");
        }
        let or = |key: &str, dflt: &'static str| {
            set(obj, key)
                .and_then(Value::as_str)
                .map_or_else(|| dflt.to_string(), String::from)
        };
        let expansion = obj
            .get("allowVolumeExpansion")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        vec![
            Value::from(name),
            Value::from(text(obj, "provisioner")),
            Value::from(or("reclaimPolicy", "Delete")),
            Value::from(or("volumeBindingMode", "Immediate")),
            Value::from(expansion),
            age_cell(obj, now),
        ]
    }
}

/// `ValidateCSIDriverName` of core validation (a driver name in another object).
pub fn validate_csi_driver_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if name.len() > 63 {
        errs.push(too_long(path, 63));
    }
    for m in validation::is_dns1123_subdomain(&name.to_lowercase()) {
        errs.push(FieldError::invalid(path, name, m));
    }
    errs
}

/// `validateVolumeAttachmentSpec`.
fn validate_attachment_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if text(spec, "attacher").is_empty() {
        errs.push(FieldError::required("spec.attacher", ""));
    }
    let null = Value::Null;
    let source = spec.get("source").unwrap_or(&null);
    let pv = set(source, "persistentVolumeName");
    let inline = set(source, "inlineVolumeSpec");
    const EXACTLY_ONE: &str =
        "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (pv, inline) {
        (None, None) => errs.push(FieldError::required("spec.source", EXACTLY_ONE)),
        (Some(_), Some(_)) => errs.push(FieldError::forbidden("spec.source", EXACTLY_ONE)),
        (Some(pv), None) if pv.as_str().is_none_or(str::is_empty) => {
            errs.push(FieldError::required(
                "spec.source.persistentVolumeName",
                "must specify non empty persistentVolumeName",
            ));
        }
        _ => {}
    }
    let node = text(spec, "nodeName");
    for m in validation::is_dns1123_subdomain(node) {
        errs.push(FieldError::invalid("spec.nodeName", node, m));
    }
    errs
}

/// `validateVolumeAttachmentStatus`.
fn validate_attachment_status(status: Option<&Value>) -> Vec<FieldError> {
    let Some(status) = status.filter(|s| s.is_object()) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if let Some(meta) = status.get("attachmentMetadata").and_then(Value::as_object) {
        let size: usize = meta
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if size > MAX_ATTACHED_METADATA_SIZE {
            errs.push(too_long(
                "status.attachmentMetadata",
                MAX_ATTACHED_METADATA_SIZE,
            ));
        }
    }
    for key in ["attachError", "detachError"] {
        let Some(e) = set(status, key) else { continue };
        if text(e, "message").len() > MAX_VOLUME_ERROR_MESSAGE_SIZE {
            // Upstream reports the metadata bound here, not the message bound.
            errs.push(too_long(
                format!("status.{key}.message"),
                MAX_ATTACHED_METADATA_SIZE,
            ));
        }
        if let Some(code) = set(e, "errorCode") {
            if code.as_i64().is_some_and(|c| c < 0) {
                errs.push(FieldError::invalid_value(
                    format!("status.{key}.errorCode"),
                    code,
                    "must be between 0 and 2147483647, inclusive",
                ));
            }
        }
    }
    errs
}

/// `ValidateVolumeAttachment`.
fn validate_attachment(obj: &Value) -> Vec<FieldError> {
    let null = Value::Null;
    let mut errs = validate_attachment_spec(obj.get("spec").unwrap_or(&null));
    errs.extend(validate_attachment_status(obj.get("status")));
    errs
}

/// Go's `%#v` of a `storage.VolumeAttachmentSpec` (pointers that are set print as an address).
fn go_attachment_spec(spec: Option<&Value>) -> String {
    let null = Value::Null;
    let spec = spec.unwrap_or(&null);
    let source = spec.get("source").unwrap_or(&null);
    let ptr = |key: &str, ty: &str| match set(source, key) {
        Some(_) => format!("(*{ty})(0xc000000000)"),
        None => format!("(*{ty})(nil)"),
    };
    format!(
        "storage.VolumeAttachmentSpec{{Attacher:{}, Source:storage.VolumeAttachmentSource{{PersistentVolumeName:{}, InlineVolumeSpec:{}}}, NodeName:{}}}",
        go_quote(text(spec, "attacher")),
        ptr("persistentVolumeName", "string"),
        ptr("inlineVolumeSpec", "core.PersistentVolumeSpec"),
        go_quote(text(spec, "nodeName")),
    )
}

/// storage.k8s.io/v1 VolumeAttachment.
pub struct VolumeAttachmentStrategy;

impl Strategy for VolumeAttachmentStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"attached": false}))
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_attachment(obj);
        // `ValidateVolumeAttachmentV1`: the tighter rules of newly created v1 attachments.
        errs.extend(validate_csi_driver_name(
            obj.pointer("/spec/attacher")
                .and_then(Value::as_str)
                .unwrap_or(""),
            "spec.attacher",
        ));
        if let Some(pv) = obj
            .pointer("/spec/source/persistentVolumeName")
            .and_then(Value::as_str)
        {
            for m in validation::is_dns1123_subdomain(pv) {
                errs.push(FieldError::invalid(
                    "spec.source.persistentVolumeName",
                    pv,
                    m,
                ));
            }
        }
        errs
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_attachment(new);
        if !super::common::semantically_equal(new.get("spec"), old.get("spec")) {
            errs.push(FieldError {
                field: "spec".into(),
                kind: FieldErrorKind::Invalid,
                message: "field is immutable".into(),
                value: Some(go_attachment_spec(new.get("spec"))),
            });
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Attacher", "string", "name", "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().", 0),
            column("PV", "string", "", "persistentVolumeName represents the name of the persistent volume to attach.", 0),
            column("Node", "string", "", "nodeName represents the node that the volume should be attached to.", 0),
            column("Attached", "boolean", "", "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let pv = obj
            .pointer("/spec/source/persistentVolumeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let attached = obj
            .pointer("/status/attached")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(
                obj.pointer("/spec/attacher")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
            Value::from(pv),
            Value::from(
                obj.pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
            Value::from(attached),
            age_cell(obj, now),
        ]
    }
}
