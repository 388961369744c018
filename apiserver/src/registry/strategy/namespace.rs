//! Namespaces: `spec.finalizers: [kubernetes]`, `status.phase: Active`, the
//! `kubernetes.io/metadata.name` label, DNS-1123 label names, `status.phase` field selector; deletion
//! turns a namespace `Terminating` and it is removed only once its `spec.finalizers` are empty too (the
//! namespace controller empties it and finalizes it); `default`, `kube-system` and `kube-public` may
//! not be deleted.

use super::common::{self, object_at};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self};
use serde_json::{json, Value};

pub struct NamespaceStrategy;

/// Namespaces that may not be deleted (upstream's namespace lifecycle admission).
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Label the apiserver keeps equal to the namespace name.
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn default_namespace(obj: &mut Value) {
    let name = api::meta::name(obj).unwrap_or("").to_string();
    if !name.is_empty() {
        if let Some(m) = api::meta::metadata_mut(obj) {
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert(NAME_LABEL.to_string(), json!(name));
            }
        }
    }
}

impl Strategy for NamespaceStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_namespace(obj);
        if let Some(spec) = object_at(obj, "spec") {
            let mut f: Vec<Value> = spec
                .get("finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !f.contains(&json!("kubernetes")) {
                f.push(json!("kubernetes"));
            }
            spec.insert("finalizers".to_string(), Value::Array(f));
        }
    }

    /// `SetDefaults_Namespace` (the `kubernetes.io/metadata.name` label) and
    /// `SetDefaults_NamespaceStatus` (phase `Active`); the `kubernetes` finalizer is the
    /// strategy's, at create only.
    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, |obj| {
            default_namespace(obj);
            common::default_status_phase(obj, "Active");
        })
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"phase": "Active"}))
    }
    fn name_validation(&self) -> validation::NameValidator {
        validation::name_is_dns1123_label
    }
    fn protected_from_deletion(&self, name: &str) -> Option<&'static str> {
        IMMORTAL_NAMESPACES
            .contains(&name)
            .then_some("this namespace may not be deleted")
    }
    fn prepare_for_delete(&self, obj: &mut Value) {
        if let Some(status) = object_at(obj, "status") {
            status.insert("phase".into(), json!("Terminating"));
        }
    }
    fn pending_finalization(&self, obj: &Value) -> bool {
        obj.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        default_namespace(new);
        // spec.finalizers change only through /finalize.
        if let Some(spec) = object_at(new, "spec") {
            match old.pointer("/spec/finalizers") {
                Some(f) => {
                    spec.insert("finalizers".to_string(), f.clone());
                }
                None => {
                    spec.remove("finalizers");
                }
            }
        }
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Status", "string", "", "The status of the namespace", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(common::field_text(obj, "status.phase")),
            age_cell(obj, now),
        ]
    }
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "status.phase" => Some(common::field_text(obj, "status.phase")),
            // Upstream keeps this for backward compatibility (NamespaceToSelectableFields).
            "name" => Some(api::meta::name(obj).unwrap_or("").to_string()),
            _ => None,
        }
    }
}
