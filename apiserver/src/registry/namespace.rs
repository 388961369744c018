//! Namespaces: `spec.finalizers: [kubernetes]`, `status.phase: Active`, the
//! `kubernetes.io/metadata.name` label, DNS-1123 label names, `status.phase` field selector.

use super::common::{self, object_at};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, FieldError};
use api::ResourceInfo;
use serde_json::{json, Value};

pub struct NamespaceStrategy;

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
    fn resource(&self) -> &'static ResourceInfo {
        crate::registry::info("", "namespaces")
    }
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
        common::set_field(obj, "status", json!({"phase": "Active"}));
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
        common::prepare_update_common(new, old, true, false);
    }
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        common::prepare_status_common(new, old);
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        common::validate_meta(self.resource(), obj, validation::name_is_dns1123_label)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        common::validate_meta_update(self.resource(), new, old, validation::name_is_dns1123_label)
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
            _ => common::meta_field_value(self.resource(), obj, field),
        }
    }
}
