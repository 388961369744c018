//! apps/v1 ControllerRevisions (the history StatefulSets and DaemonSets keep): `data` required
//! and immutable, `revision` non-negative, kubectl's printer (the controlling owner as
//! `kind.group/name`).

use super::common::{semantically_equal, validate_nonnegative};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::FieldError;
use serde_json::Value;

/// apps/v1 ControllerRevision.
pub struct ControllerRevisionStrategy;

fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if obj.get("data").is_none_or(Value::is_null) {
        errs.push(FieldError::required("data", "data is mandatory"));
    }
    validate_nonnegative(Some(obj), "revision", "revision", &mut errs);
    errs
}

/// `formatResourceName(groupKind, name, true)` of the controller reference, `<none>` without one.
fn controller_cell(obj: &Value) -> String {
    let Some(owner) = api::meta::controller_ref(obj) else {
        return "<none>".to_string();
    };
    let text = |k: &str| owner.get(k).and_then(Value::as_str).unwrap_or("");
    let (group, _) = api::resources::split_api_version(text("apiVersion"));
    let kind = text("kind");
    let group_kind = match (kind, group) {
        ("", "") => return text("name").to_string(),
        (k, "") => k.to_string(),
        (k, g) => format!("{k}.{g}"),
    };
    format!("{}/{}", group_kind.to_lowercase(), text("name"))
}

impl Strategy for ControllerRevisionStrategy {
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate(new);
        if !semantically_equal(new.get("data"), old.get("data")) {
            errs.push(FieldError::invalid_value(
                "data",
                new.get("data").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Controller", "string", "", "Controller of the object", 0),
            column(
                "Revision",
                "string",
                "",
                "Revision indicates the revision of the state represented by Data.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(controller_cell(obj)),
            Value::from(obj.get("revision").and_then(Value::as_i64).unwrap_or(0)),
            age_cell(obj, now),
        ]
    }
}
