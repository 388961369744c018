//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`), upstream's
//! `apiextensions-apiserver/pkg/registry/customresourcedefinition` strategy and REST:
//!
//! - v1 defaults (`SetDefaults_CustomResourceDefinitionSpec`): `names.singular` = lower-case kind,
//!   `names.listKind` = `<Kind>List`, `conversion.strategy: None`, webhook service port 443;
//! - create resets status to `acceptedNames` empty and `storedVersions` = the storage version;
//!   an update keeps status and appends a new storage version to `storedVersions`; generation
//!   follows `spec`;
//! - validation is [`super::crd_validation`]'s (of a new CRD, of an update, of a status update);
//! - the first DELETE marks the CRD (deletion timestamp, the `customresourcecleanup` finalizer and
//!   `Terminating=True` `InstanceDeletionPending`, as upstream's REST `Delete`); the CRD
//!   controller ([`crate::registry::customresource`]) removes the instances and then the finalizer.

use api::validation::FieldError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Map, Value};

use super::table::{created_at_cell, created_at_column, name_column};
use super::{crd_validation, Strategy};

/// The finalizer that deletes a CRD's instances before the CRD goes.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The storage version of a CRD object (the version with `storage: true`).
pub fn storage_version(obj: &Value) -> Option<&str> {
    obj.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .get("name")?
        .as_str()
}

/// Sets (or replaces, keeping `lastTransitionTime` when the status is unchanged) the condition
/// `cond` (with `type`, `status`, `reason`, `message`) in `obj.status.conditions`
/// (`SetCRDCondition`).
pub fn set_condition(obj: &mut Value, mut cond: Value) {
    let Some(status) = super::common::object_at(obj, "status") else {
        return;
    };
    let conditions = status
        .entry("conditions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    let ty = cond.get("type").cloned();
    let now = api::meta::now_rfc3339();
    match list.iter_mut().find(|c| c.get("type") == ty.as_ref()) {
        Some(existing) => {
            let same = existing.get("status") == cond.get("status");
            let time = match existing.get("lastTransitionTime") {
                Some(t) if same => t.clone(),
                _ => Value::from(now),
            };
            cond["lastTransitionTime"] = time;
            *existing = cond;
        }
        None => {
            cond["lastTransitionTime"] = Value::from(now);
            list.push(cond);
        }
    }
}

/// The condition of `type` in a CRD object's status, if any.
pub fn condition<'a>(obj: &'a Value, ty: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

/// Whether a CRD object's condition `ty` is `True`.
pub fn condition_true(obj: &Value, ty: &str) -> bool {
    condition(obj, ty)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True")
}

fn default_spec(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let empty = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
        if empty(names.get("singular")) {
            names.insert("singular".into(), Value::from(kind.to_ascii_lowercase()));
        }
        if empty(names.get("listKind")) && !kind.is_empty() {
            names.insert("listKind".into(), Value::from(format!("{kind}List")));
        }
    }
    match spec.get_mut("conversion") {
        None | Some(Value::Null) => {
            spec.insert("conversion".into(), json!({ "strategy": "None" }));
        }
        Some(conversion) => {
            let service = conversion.pointer_mut("/webhook/clientConfig/service");
            if let Some(service) = service.and_then(Value::as_object_mut) {
                if service.get("port").is_none_or(Value::is_null) {
                    service.insert("port".into(), Value::from(443));
                }
            }
        }
    }
}

/// Appends the storage version of `obj` to its `status.storedVersions` if missing.
fn record_storage_version(obj: &mut Value) {
    let Some(v) = storage_version(obj).map(String::from) else {
        return;
    };
    let Some(status) = super::common::object_at(obj, "status") else {
        return;
    };
    let stored = status
        .entry("storedVersions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !stored.is_array() {
        *stored = Value::Array(Vec::new());
    }
    if let Some(list) = stored.as_array_mut() {
        if !list.iter().any(|s| s.as_str() == Some(v.as_str())) {
            list.push(Value::from(v));
        }
    }
}

/// The typed CRD, or the decoding error as a field error (the body's shape is wrong).
fn typed(obj: &Value) -> Result<CustomResourceDefinition, Vec<FieldError>> {
    serde_json::from_value(obj.clone()).map_err(|e| {
        vec![FieldError::invalid(
            "",
            "",
            format!("the object provided is unrecognized: {e}"),
        )]
    })
}

/// The CustomResourceDefinition strategy.
pub struct CustomResourceDefinitionStrategy;

impl Strategy for CustomResourceDefinitionStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_spec(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_spec)
    }

    fn initial_status(&self, obj: &Value) -> Option<Value> {
        let mut with_status = json!({ "spec": obj.get("spec").cloned().unwrap_or(Value::Null) });
        with_status["status"] = json!({
            "acceptedNames": { "plural": "", "kind": "" },
            "storedVersions": [],
        });
        record_storage_version(&mut with_status);
        with_status.get("status").cloned()
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        match typed(obj) {
            Ok(crd) => crd_validation::validate_crd(&crd),
            Err(errs) => errs,
        }
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_spec(new);
    }

    fn finish_update(&self, new: &mut Value, _old: &Value) {
        record_storage_version(new);
    }

    /// A write that leaves the spec as stored is a status write (`/status` copies everything but
    /// status from the stored object): it gets upstream's status-update validation.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let (new_crd, old_crd) = match (typed(new), typed(old)) {
            (Ok(n), Ok(o)) => (n, o),
            (Err(errs), _) | (_, Err(errs)) => return errs,
        };
        if new.get("spec") == old.get("spec") {
            crd_validation::validate_crd_status_update(&new_crd, &old_crd)
        } else {
            crd_validation::validate_crd_update(&new_crd, &old_crd)
        }
    }

    fn pending_finalization(&self, obj: &Value) -> bool {
        // The first delete always marks (the cleanup finalizer is added then); once marked, only
        // `metadata.finalizers` hold it.
        api::meta::deletion_timestamp(obj).is_none()
    }

    fn prepare_for_delete(&self, obj: &mut Value) {
        let mut finalizers = api::meta::finalizers(obj);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_string());
            api::meta::set_finalizers(obj, &finalizers);
        }
        set_condition(
            obj,
            json!({
                "type": "Terminating",
                "status": "True",
                "reason": "InstanceDeletionPending",
                "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            }),
        );
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![name_column(), created_at_column()]
    }

    fn table_cells(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            created_at_cell(obj),
        ]
    }
}

/// `status.acceptedNames` of a CRD object as a map (empty when absent).
pub fn accepted_names(obj: &Value) -> Map<String, Value> {
    obj.pointer("/status/acceptedNames")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_defaults_and_initial_status() {
        let s = CustomResourceDefinitionStrategy;
        let mut crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": false},
                             {"name": "v2", "served": true, "storage": true}]},
        });
        s.prepare_for_create(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "widget");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        let status = s.initial_status(&crd);
        assert_eq!(
            status,
            Some(json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v2"]}))
        );
    }

    #[test]
    fn an_update_records_a_new_storage_version_and_a_delete_adds_the_finalizer() {
        let s = CustomResourceDefinitionStrategy;
        let old = json!({"spec": {"versions": [{"name": "v1", "storage": true}]},
                         "status": {"storedVersions": ["v1"]}});
        let mut new = json!({"spec": {"versions": [{"name": "v1", "storage": false},
                                                   {"name": "v2", "storage": true}]}});
        new["status"] = old["status"].clone();
        s.finish_update(&mut new, &old);
        assert_eq!(new["status"]["storedVersions"], json!(["v1", "v2"]));
        assert!(s.pending_finalization(&old));
        let mut marked = old.clone();
        s.prepare_for_delete(&mut marked);
        assert_eq!(api::meta::finalizers(&marked), [CLEANUP_FINALIZER]);
        assert!(condition_true(&marked, "Terminating"));
        assert_eq!(
            condition(&marked, "Terminating").map(|c| c["reason"].clone()),
            Some(json!("InstanceDeletionPending"))
        );
    }
}
