//! coordination.k8s.io/v1 Leases (node heartbeats, leader election): no status, HOLDER printer column.

use super::common::field_text;
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::FieldError;
use serde_json::Value;

pub struct LeaseStrategy;

fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (key, min) in [("leaseDurationSeconds", 1), ("leaseTransitions", 0)] {
        if let Some(v) = obj.pointer(&format!("/spec/{key}")) {
            if v.as_i64().is_none_or(|n| n < min) {
                let msg = if min == 1 {
                    "must be greater than 0"
                } else {
                    "must be greater than or equal to 0"
                };
                errs.push(FieldError::invalid_value(format!("spec.{key}"), v, msg));
            }
        }
    }
    errs
}

impl Strategy for LeaseStrategy {
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }
    fn validate_update(&self, new: &Value, __old: &Value) -> Vec<FieldError> {
        validate_spec(new)
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Holder", "string", "", "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(field_text(obj, "spec.holderIdentity")),
            age_cell(obj, now),
        ]
    }
}
