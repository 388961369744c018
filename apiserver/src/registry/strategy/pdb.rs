//! `policy/v1` PodDisruptionBudgets, as `pkg/registry/policy/poddisruptionbudget/strategy.go`
//! and `pkg/apis/policy/validation` of Kubernetes 1.33: no defaults (policy/v1 has none), status
//! reset on create and kept by spec writes, generation tracking, `ValidatePodDisruptionBudget`
//! (minAvailable and maxUnavailable exclusive, each a non-negative int or a percent ≤ 100%, the
//! selector, `unhealthyPodEvictionPolicy`) on create and update (updates are allowed since 1.15),
//! `ValidatePodDisruptionBudgetStatusUpdate` on status writes, and kubectl's printer (MIN
//! AVAILABLE, MAX UNAVAILABLE, ALLOWED DISRUPTIONS, AGE).

use super::common::validate_nonnegative;
use super::daemonset::{validate_not_more_than_100_percent, validate_positive_int_or_percent};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{FieldError, FieldErrorKind};
use serde_json::{json, Value};

pub struct PodDisruptionBudgetStrategy;

/// `supportedUnhealthyPodEvictionPolicies`, sorted as `sets.List` prints them.
pub const UNHEALTHY_POD_EVICTION_POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];

/// A pointer field of the internal spec as `%#v` prints it: a fixed address stands in for a set
/// pointer (upstream prints the real one), `nil` for an unset one.
fn go_pointer(go_type: &str, v: Option<&Value>) -> String {
    match v {
        Some(v) if !v.is_null() => format!("(*{go_type})(0xc000000000)"),
        _ => format!("(*{go_type})(nil)"),
    }
}

/// `policy.PodDisruptionBudgetSpec` as `field.Invalid(fldPath, spec, …)` prints it.
fn go_spec(spec: &Value) -> String {
    format!(
        "policy.PodDisruptionBudgetSpec{{MinAvailable:{}, Selector:{}, MaxUnavailable:{}, UnhealthyPodEvictionPolicy:{}}}",
        go_pointer("intstr.IntOrString", spec.get("minAvailable")),
        go_pointer("v1.LabelSelector", spec.get("selector")),
        go_pointer("intstr.IntOrString", spec.get("maxUnavailable")),
        go_pointer("policy.UnhealthyPodEvictionPolicyType", spec.get("unhealthyPodEvictionPolicy")),
    )
}

/// Whether a selector has a `matchExpressions` value that is no valid label value (such a stored
/// PDB may still be updated: `AllowInvalidLabelValueInSelector` of the update options).
fn has_invalid_label_values(pdb: &Value) -> bool {
    let exprs = pdb
        .pointer("/spec/selector/matchExpressions")
        .and_then(Value::as_array);
    exprs.into_iter().flatten().any(|e| {
        e.get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|v| !api::validation::is_valid_label_value(v.as_str().unwrap_or("")).is_empty())
    })
}

/// `ValidatePodDisruptionBudgetSpec` at `spec`.
pub fn validate_pdb_spec(pdb: &Value, allow_invalid_label_values: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = json!({});
    let spec = pdb.get("spec").filter(|s| s.is_object()).unwrap_or(&empty);
    let present = |k: &str| spec.get(k).filter(|v| !v.is_null());
    let (min, max) = (present("minAvailable"), present("maxUnavailable"));
    if min.is_some() && max.is_some() {
        errs.push(FieldError {
            field: "spec".into(),
            kind: FieldErrorKind::Invalid,
            message: "minAvailable and maxUnavailable cannot be both set".into(),
            value: Some(go_spec(spec)),
        });
    }
    for (key, v) in [("minAvailable", min), ("maxUnavailable", max)] {
        if let Some(v) = v {
            let path = format!("spec.{key}");
            errs.extend(validate_positive_int_or_percent(v, &path));
            errs.extend(validate_not_more_than_100_percent(v, &path));
        }
    }
    if let Some(sel) = present("selector") {
        errs.extend(api::validation::validate_label_selector(
            sel,
            "spec.selector",
            allow_invalid_label_values,
        ));
    }
    if let Some(p) = present("unhealthyPodEvictionPolicy") {
        if !p
            .as_str()
            .is_some_and(|s| UNHEALTHY_POD_EVICTION_POLICIES.contains(&s))
        {
            errs.push(FieldError::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                p,
                UNHEALTHY_POD_EVICTION_POLICIES,
            ));
        }
    }
    errs
}

/// `ValidatePodDisruptionBudgetStatusUpdate` for policy/v1: conditions, non-negative counts.
fn validate_pdb_status(pdb: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let status = pdb.get("status");
    for key in [
        "disruptionsAllowed",
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
    ] {
        validate_nonnegative(status, key, &format!("status.{key}"), &mut errs);
    }
    let conditions = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array);
    let mut types: Vec<&str> = Vec::new();
    for (i, c) in conditions.into_iter().flatten().enumerate() {
        let path = format!("status.conditions[{i}]");
        let ty = c.get("type").and_then(Value::as_str).unwrap_or("");
        // `ValidateLabelName`.
        for m in api::validation::is_qualified_name(ty) {
            errs.push(FieldError::invalid(format!("{path}.type"), ty, m));
        }
        if types.contains(&ty) {
            errs.push(FieldError::duplicate(format!("{path}.type"), &json!(ty)));
        }
        types.push(ty);
        if c.get("observedGeneration")
            .and_then(Value::as_i64)
            .is_some_and(|g| g < 0)
        {
            errs.push(FieldError::invalid_value(
                format!("{path}.observedGeneration"),
                c.get("observedGeneration").unwrap_or(&Value::Null),
                "must be greater than or equal to zero",
            ));
        }
        let st = c.get("status").cloned().unwrap_or(json!(""));
        if !st
            .as_str()
            .is_some_and(|s| ["True", "False", "Unknown"].contains(&s))
        {
            errs.push(FieldError::not_supported(
                format!("{path}.status"),
                &st,
                &["False", "True", "Unknown"],
            ));
        }
        if c.get("lastTransitionTime").is_none_or(Value::is_null) {
            errs.push(FieldError::required(
                format!("{path}.lastTransitionTime"),
                "must be set",
            ));
        }
        if c.get("reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errs.push(FieldError::required(
                format!("{path}.reason"),
                "must be set",
            ));
        }
    }
    errs
}

/// An int-or-string as `IntOrString.String()` prints it, `N/A` when unset.
fn int_or_string_cell(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => Value::from(s.clone()),
        Some(Value::Number(n)) => Value::from(n.to_string()),
        _ => Value::from("N/A"),
    }
}

impl Strategy for PodDisruptionBudgetStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        // `PodDisruptionBudgetStatus{}` as policy/v1 serialises it (the counts are not omitempty).
        Some(
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
        )
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_pdb_spec(obj, false)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_pdb_spec(new, has_invalid_label_values(old));
        if new.get("status") != old.get("status") {
            errs.extend(validate_pdb_status(new));
        }
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Min Available",
                "string",
                "",
                "The minimum number of pods that must be available.",
                0,
            ),
            column(
                "Max Unavailable",
                "string",
                "",
                "The maximum number of pods that may be unavailable.",
                0,
            ),
            column(
                "Allowed Disruptions",
                "integer",
                "",
                "Calculated number of pods that may be disrupted at this time.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            int_or_string_cell(obj.pointer("/spec/minAvailable")),
            int_or_string_cell(obj.pointer("/spec/maxUnavailable")),
            Value::from(
                obj.pointer("/status/disruptionsAllowed")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
            ),
            age_cell(obj, now),
        ]
    }
}

/// Whether the budget's `spec.selector` matches `labels`: a missing, empty or invalid selector
/// matches no pod (`getPodDisruptionBudgets` of the eviction subresource).
pub fn pdb_selects(pdb: &Value, labels: &std::collections::BTreeMap<String, String>) -> bool {
    let Some(sel) = pdb.pointer("/spec/selector").filter(|s| s.is_object()) else {
        return false;
    };
    let Ok(selector) = api::labels::from_label_selector_json(sel) else {
        return false;
    };
    !selector.is_empty() && selector.matches(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(spec: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "d"}, "spec": spec})
    }

    fn bodies(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn validates_like_upstream() {
        let s = PodDisruptionBudgetStrategy;
        assert!(s
            .validate_create(&pdb(
                json!({"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}})
            ))
            .is_empty());
        assert!(s
            .validate_create(&pdb(json!({"maxUnavailable": "50%"})))
            .is_empty());
        assert_eq!(
            bodies(&s.validate_create(&pdb(json!({"minAvailable": 1, "maxUnavailable": 1})))),
            ["spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0xc000000000), Selector:(*v1.LabelSelector)(nil), MaxUnavailable:(*intstr.IntOrString)(0xc000000000), UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}: minAvailable and maxUnavailable cannot be both set"]
        );
        assert_eq!(
            bodies(&s.validate_create(&pdb(json!({"minAvailable": -1})))),
            ["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            bodies(&s.validate_create(&pdb(json!({"maxUnavailable": "120%"})))),
            ["spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"120%\"}: must not be greater than 100%"]
        );
        assert_eq!(
            bodies(&s.validate_create(&pdb(json!({"minAvailable": "x"})))),
            ["spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"x\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"]
        );
        assert_eq!(
            bodies(&s.validate_create(&pdb(json!({"unhealthyPodEvictionPolicy": "Never"})))),
            ["spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""]
        );
        let bad_sel = pdb(
            json!({"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["-x-"]}]}}),
        );
        assert_eq!(s.validate_create(&bad_sel).len(), 1);
        // An update of a stored PDB whose selector already has the invalid value is allowed.
        assert!(s.validate_update(&bad_sel, &bad_sel).is_empty());
    }

    #[test]
    fn status_counts_are_non_negative_and_printer_cells() {
        let s = PodDisruptionBudgetStrategy;
        let old = pdb(json!({"minAvailable": 1}));
        let mut new = old.clone();
        new["status"] = json!({"disruptionsAllowed": -1});
        assert_eq!(
            bodies(&s.validate_update(&new, &old)),
            ["status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0"]
        );
        new["status"] = json!({"conditions": [
            {"type": "DisruptionAllowed", "status": "Maybe", "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "X", "message": ""},
            {"type": "DisruptionAllowed", "status": "True", "reason": ""}]});
        assert_eq!(
            bodies(&s.validate_update(&new, &old)),
            [
                "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "status.conditions[1].type: Duplicate value: \"DisruptionAllowed\"",
                "status.conditions[1].lastTransitionTime: Required value: must be set",
                "status.conditions[1].reason: Required value: must be set",
            ]
        );
        new["status"] = json!({"disruptionsAllowed": 2});
        let cells = s.table_cells(&new, jiff::Timestamp::now());
        assert_eq!(cells[1..4], [json!("1"), json!("N/A"), json!(2)]);
    }

    #[test]
    fn empty_or_missing_selectors_match_nothing() {
        let labels = [("app".to_string(), "web".to_string())].into();
        assert!(!pdb_selects(&pdb(json!({})), &labels));
        assert!(!pdb_selects(&pdb(json!({"selector": {}})), &labels));
        assert!(pdb_selects(
            &pdb(json!({"selector": {"matchLabels": {"app": "web"}}})),
            &labels
        ));
        assert!(!pdb_selects(
            &pdb(json!({"selector": {"matchLabels": {"app": "db"}}})),
            &labels
        ));
    }
}
