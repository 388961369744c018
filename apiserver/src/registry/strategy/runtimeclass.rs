//! `node.k8s.io/v1` RuntimeClasses, as upstream's `pkg/apis/node/validation` and
//! `pkg/registry/node/runtimeclass` define them: the `handler` is a DNS label and never changes;
//! `overhead.podFixed` quantities are non-negative; `scheduling` has a valid node selector and
//! tolerations (`ValidateTolerations`). Table: NAME HANDLER AGE.

use super::netvalid::{items, set, text};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, go_quote, FieldError, FieldErrorKind};
use serde_json::Value;

const OPERATORS: &[&str] = &["Equal", "Exists"];
const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Go's `%#v` of a `core.Toleration`.
fn go_toleration(t: &Value) -> String {
    let seconds = match set(t, "tolerationSeconds") {
        Some(_) => "(*int64)(0xc000000000)",
        None => "(*int64)(nil)",
    };
    format!(
        "core.Toleration{{Key:{}, Operator:{}, Value:{}, Effect:{}, TolerationSeconds:{seconds}}}",
        go_quote(text(t, "key")),
        go_quote(text(t, "operator")),
        go_quote(text(t, "value")),
        go_quote(text(t, "effect")),
    )
}

/// `ValidateTolerations` at `path`.
pub fn validate_tolerations(tolerations: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let key = text(t, "key");
        let operator = text(t, "operator");
        let effect = text(t, "effect");
        if !key.is_empty() {
            for m in validation::is_qualified_name(key) {
                errs.push(FieldError::invalid(format!("{p}.key"), key, m));
            }
        }
        if key.is_empty() && operator != "Exists" {
            errs.push(FieldError::invalid(
                format!("{p}.operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if set(t, "tolerationSeconds").is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                format!("{p}.effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        let value = text(t, "value");
        match operator {
            "Equal" | "" => {
                let msgs = validation::is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{p}.operator"),
                        value,
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError {
                        field: format!("{p}.operator"),
                        kind: FieldErrorKind::Invalid,
                        message: "value must be empty when `operator` is 'Exists'".into(),
                        value: Some(go_toleration(t)),
                    });
                }
            }
            other => errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                &Value::from(other),
                OPERATORS,
            )),
        }
        if !effect.is_empty() && !EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(
                format!("{p}.effect"),
                &Value::from(effect),
                EFFECTS,
            ));
        }
    }
    errs
}

/// `ValidateRuntimeClass` without its object meta.
fn validate_runtime_class(obj: &Value) -> Vec<FieldError> {
    let handler = text(obj, "handler");
    let mut errs: Vec<FieldError> = validation::is_dns1123_label(handler)
        .into_iter()
        .map(|m| FieldError::invalid("handler", handler, m))
        .collect();
    if let Some(fixed) = obj.pointer("/overhead/podFixed").and_then(Value::as_object) {
        for (name, q) in fixed {
            // Upstream validates them as the limits of a ResourceRequirements at `overhead`.
            let path = format!("overhead.limits[{name}]");
            let q = q.as_str().unwrap_or("");
            if api::quantity::Amount::parse(q).is_ok_and(|a| a < api::quantity::Amount::ZERO) {
                errs.push(FieldError::invalid(
                    path,
                    q,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    if let Some(s) = set(obj, "scheduling") {
        if let Some(sel) = set(s, "nodeSelector") {
            errs.extend(validation::validate_labels(sel, "scheduling.nodeSelector"));
        }
        errs.extend(validate_tolerations(
            items(s, "tolerations"),
            "scheduling.tolerations",
        ));
    }
    errs
}

/// node.k8s.io/v1 RuntimeClass.
pub struct RuntimeClassStrategy;

impl Strategy for RuntimeClassStrategy {
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_runtime_class(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_runtime_class(new);
        let handler = text(new, "handler");
        if handler != text(old, "handler") {
            errs.push(FieldError::invalid(
                "handler",
                handler,
                "field is immutable",
            ));
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Handler", "string", "", "", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(text(obj, "handler")),
            age_cell(obj, now),
        ]
    }
}
