//! Core v1 PersistentVolumeClaims, as kube-apiserver 1.33
//! (`pkg/registry/core/persistentvolumeclaim/strategy.go`, `SetDefaults_PersistentVolumeClaim*`,
//! `ValidatePersistentVolumeClaim{,Update}`, kubectl's printer); the rules shared with
//! PersistentVolumes (and the module's guarantees) are in `storage.rs`.

use super::common::{default_field, object_at, semantically_equal};
use super::resource_list::{self as rl, access_modes_text, quantity_text};
use super::storage::{
    drop_volume_attributes_class, immutable, phase_cell, spec_diff, spec_map, storage_class, text,
    unset_or, validate_access_modes, validate_class_name, validate_volume_mode,
    STORAGE_CLASS_ANNOTATION,
};
use super::table::{age_cell, age_column, column, name_column};
use super::{Forbidden, Objects, Strategy};
use api::quantity::Amount;
use api::validation::{self, FieldError};
use serde_json::{json, Map, Value};

/// `ValidatePersistentVolumeClaimSpec`.
fn validate_claim_spec(spec: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_access_modes(spec, "at least 1 access mode is required", &mut errs);
    if let Some(sel) = spec
        .and_then(|s| s.get("selector"))
        .filter(|v| !v.is_null())
    {
        errs.extend(validation::validate_label_selector(
            sel,
            "spec.selector",
            false,
        ));
    }
    let path = "spec.resources[storage]";
    match spec.and_then(|s| s.pointer("/resources/requests/storage")) {
        None => errs.push(FieldError::required(path, "")),
        Some(q) => {
            let positive = rl::validate_positive(q, path);
            if positive.is_empty() {
                errs.extend(rl::validate_quantity_value("storage", q, path));
            } else {
                errs.extend(positive);
            }
        }
    }
    validate_class_name(spec, "storageClassName", &mut errs);
    validate_volume_mode(spec, &mut errs);
    for key in ["dataSource", "dataSourceRef"] {
        let Some(ds) = spec.and_then(|s| s.get(key)).filter(|v| !v.is_null()) else {
            continue;
        };
        let p = format!("spec.{key}");
        if text(Some(ds), "name").is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        }
        let kind = text(Some(ds), "kind");
        if kind.is_empty() {
            errs.push(FieldError::required(format!("{p}.kind"), ""));
        }
        let group = text(Some(ds), "apiGroup");
        if group.is_empty() && kind != "PersistentVolumeClaim" {
            errs.push(FieldError::invalid(
                &p,
                kind,
                "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
            ));
        }
        if !group.is_empty() {
            for m in validation::is_dns1123_subdomain(group) {
                errs.push(FieldError::invalid(format!("{p}.apiGroup"), group, m));
            }
        }
    }
    let source = spec
        .and_then(|s| s.get("dataSource"))
        .filter(|v| !v.is_null());
    let reference = spec
        .and_then(|s| s.get("dataSourceRef"))
        .filter(|v| !v.is_null());
    let namespaced = reference
        .and_then(|r| r.get("namespace"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if let (Some(s), Some(r)) = (source, reference) {
        if namespaced {
            errs.push(FieldError::invalid(
                "spec",
                "spec.dataSource",
                "may not be specified when dataSourceRef.namespace is specified",
            ));
        } else if ["apiGroup", "kind", "name"]
            .iter()
            .any(|k| s.get(*k) != r.get(*k))
        {
            errs.push(FieldError::invalid(
                "spec",
                "spec.dataSource",
                "must match dataSourceRef",
            ));
        }
    }
    errs
}

pub(super) fn storage_request(obj: &Value) -> Amount {
    obj.pointer("/spec/resources/requests/storage")
        .and_then(|q| rl::parse(q, "").ok())
        .unwrap_or(Amount::ZERO)
}

/// core v1 PersistentVolumeClaim.
pub struct PersistentVolumeClaimStrategy;

impl PersistentVolumeClaimStrategy {
    /// `ValidatePersistentVolumeClaimUpdate` after the create rules.
    fn update_rules(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
        let (mut new_spec, mut old_spec) = (spec_map(new), spec_map(old));
        if text(old.get("spec"), "volumeName").is_empty() {
            match new_spec.get("volumeName") {
                Some(v) => old_spec.insert("volumeName".into(), v.clone()),
                None => old_spec.remove("volumeName"),
            };
        }
        let old_ann = api::meta::annotations(old);
        let new_ann = api::meta::annotations(new);
        let old_class_ann = old_ann.get(STORAGE_CLASS_ANNOTATION);
        let new_class = new_spec.get("storageClassName").and_then(Value::as_str);
        let old_class_unset = !old_spec.contains_key("storageClassName");
        let upgrade_from_annotation = old_class_ann.is_some()
            && old_class_unset
            && new_class.is_some()
            && new_class == old_class_ann.map(String::as_str)
            && new_ann.get(STORAGE_CLASS_ANNOTATION) == old_class_ann;
        if upgrade_from_annotation {
            new_spec.remove("storageClassName");
        } else {
            let (n, o) = (
                new_ann.get(STORAGE_CLASS_ANNOTATION),
                old_ann.get(STORAGE_CLASS_ANNOTATION),
            );
            if n != o {
                errs.push(FieldError::invalid(
                    format!("metadata.annotations[{STORAGE_CLASS_ANNOTATION}]"),
                    n.map_or("", String::as_str),
                    "field is immutable",
                ));
            }
            // RetroactiveDefaultStorageClass (GA): a class may be set once on a claim without one.
            if old_class_ann.is_none() && old_class_unset && new_class.is_some() {
                new_spec.remove("storageClassName");
            }
        }
        let bound = new.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
        if bound {
            let old_storage = old.pointer("/spec/resources/requests/storage").cloned();
            if let Some(reqs) = new_spec
                .get_mut("resources")
                .and_then(|r| r.get_mut("requests"))
                .and_then(Value::as_object_mut)
            {
                match old_storage {
                    Some(s) => reqs.insert("storage".into(), s),
                    None => reqs.remove("storage"),
                };
            }
        }
        match old_spec.get("volumeAttributesClassName") {
            Some(v) => new_spec.insert("volumeAttributesClassName".into(), v.clone()),
            None => new_spec.remove("volumeAttributesClassName"),
        };
        if !semantically_equal(
            Some(&Value::Object(new_spec.clone())),
            Some(&Value::Object(old_spec.clone())),
        ) {
            errs.push(FieldError::forbidden(
                "spec",
                format!(
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}",
                    spec_diff(&old_spec, &new_spec)
                ),
            ));
        }
        let (old_size, new_size) = (storage_request(old), storage_request(new));
        if new_size < old_size {
            // RecoverVolumeExpansionFailure is on by default in 1.33: a claim may shrink back
            // to no less than what was provisioned.
            let capacity = old
                .pointer("/status/capacity/storage")
                .and_then(|q| rl::parse(q, "").ok())
                .unwrap_or(Amount::ZERO);
            if new_size <= capacity {
                errs.push(FieldError::forbidden(
                    "spec.resources.requests.storage",
                    "field can not be less than status.capacity",
                ));
            }
        }
        immutable(
            new.pointer("/spec/volumeMode"),
            old.pointer("/spec/volumeMode"),
            "volumeMode",
            errs,
        );
        if !semantically_equal(
            new.pointer("/spec/volumeAttributesClassName"),
            old.pointer("/spec/volumeAttributesClassName"),
        ) {
            errs.push(FieldError::forbidden(
                "spec.volumeAttributesClassName",
                "update is forbidden when the VolumeAttributesClass feature gate is disabled",
            ));
        }
    }
}

/// `NormalizeDataSources` (AnyVolumeDataSource, on by default): `dataSource` and `dataSourceRef`
/// mirror each other when only one is given (a namespaced ref is not copied back).
fn normalize_data_sources(spec: &mut Map<String, Value>) {
    let set = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    let (source, reference) = (set(spec.get("dataSource")), set(spec.get("dataSourceRef")));
    let local = |r: &Value| {
        let mut m = Map::new();
        for k in ["apiGroup", "kind", "name"] {
            if let Some(v) = r.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
        Value::Object(m)
    };
    match (source, reference) {
        (None, Some(r))
            if r.get("namespace")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty) =>
        {
            spec.insert("dataSource".into(), local(&r));
        }
        (Some(s), None) => {
            spec.insert("dataSourceRef".into(), local(&s));
        }
        _ => {}
    }
}

impl Strategy for PersistentVolumeClaimStrategy {
    /// DefaultStorageClass on a create (`claim_admission.rs`); PersistentVolumeClaimResize is a
    /// validating plugin of the chain (`admission/claim_resize.rs`).
    fn admit(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        // DefaultStorageClass; PersistentVolumeClaimResize is a validating plugin
        // (`admission/claim_resize.rs`), after validation.
        if old.is_none() {
            super::claim_admission::set_default_class(obj, objects);
        }
        Ok(())
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        drop_volume_attributes_class(obj, None);
        if let Some(spec) = object_at(obj, "spec") {
            default_claim_spec(spec);
            normalize_data_sources(spec);
        }
    }

    /// `SetDefaults_PersistentVolumeClaim` and `SetDefaults_PersistentVolumeClaimSpec` (not the
    /// strategy's field drops and data-source normalisation).
    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, |obj| {
            if let Some(spec) = object_at(obj, "spec") {
                default_claim_spec(spec);
            }
            super::common::default_status_phase(obj, "Pending");
        })
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Pending"}))
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        drop_volume_attributes_class(new, Some(old));
        if let Some(spec) = object_at(new, "spec") {
            default_claim_spec(spec);
        }
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_claim_spec(obj.get("spec"))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_claim_spec(new.get("spec"));
        Self::update_rules(new, old, &mut errs);
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Status", "string", "", "phase represents the current phase of PersistentVolumeClaim.", 0),
            column("Volume", "string", "", "volumeName is the binding reference to the PersistentVolume backing this claim.", 0),
            column("Capacity", "string", "", "capacity represents the actual resources of the underlying volume.", 0),
            column("Access Modes", "string", "", "accessModes contains the desired access modes the volume should have. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1", 0),
            column("StorageClass", "string", "", "storageClassName is the name of the StorageClass required by the claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#class-1", 0),
            column("VolumeAttributesClass", "string", "", "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.", 0),
            age_column(),
            column("VolumeMode", "string", "", "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.", 1),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let volume = text(obj.get("spec"), "volumeName");
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            (
                obj.pointer("/status/capacity/storage")
                    .map(quantity_text)
                    .unwrap_or_else(|| "0".into()),
                access_modes_text(obj.pointer("/status/accessModes")),
            )
        };
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            json!(phase_cell(obj)),
            json!(volume),
            json!(capacity),
            json!(modes),
            json!(storage_class(obj)),
            json!(unset_or(obj.pointer("/spec/volumeAttributesClassName"))),
            age_cell(obj, now),
            json!(unset_or(obj.pointer("/spec/volumeMode"))),
        ]
    }
}

/// `SetDefaults_PersistentVolumeClaimSpec` (claims, ephemeral volume templates, StatefulSet
/// claim templates).
pub fn default_claim_spec(spec: &mut Map<String, Value>) {
    default_field(spec, "volumeMode", json!("Filesystem"));
}
