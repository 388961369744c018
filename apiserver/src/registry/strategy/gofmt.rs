//! Go's `%#v` of the values upstream's validation messages print (`field.Invalid` with a map, a
//! label selector, an int-or-string or an `[]int32`), rendered from the JSON form so a 422 reads
//! exactly as kube-apiserver's. Structs whose rendering would need the full internal Go type
//! (pod templates, policies) are not rendered here: callers print their JSON instead.

use api::validation::go_quote;
use serde_json::Value;
use std::collections::BTreeMap;

/// `map[string]string{"a":"b", "c":"d"}` (keys sorted, as `fmt` prints maps).
pub fn go_map(m: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v)))
        .collect();
    format!("map[string]string{{{}}}", parts.join(", "))
}

/// A JSON string map, or `map[string]string(nil)` when absent or null.
pub fn go_map_value(v: Option<&Value>) -> String {
    match v {
        Some(Value::Object(_)) => go_map(&api::meta::as_string_map(v)),
        _ => "map[string]string(nil)".to_string(),
    }
}

/// `[]string{"a", "b"}`, or `[]string(nil)` when absent or null.
fn go_strings(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        Some(items) => {
            let q: Vec<String> = items
                .iter()
                .map(|s| go_quote(s.as_str().unwrap_or("")))
                .collect();
            format!("[]string{{{}}}", q.join(", "))
        }
        None => "[]string(nil)".to_string(),
    }
}

/// A `metav1.LabelSelector` as `%#v` prints it (the struct, after `field.Invalid` dereferences
/// the pointer): `v1.LabelSelector{MatchLabels:map[string]string{…}, MatchExpressions:[]…(nil)}`.
pub fn label_selector(sel: &Value) -> String {
    let exprs = match sel.get("matchExpressions").and_then(Value::as_array) {
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|r| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        go_quote(r.get("key").and_then(Value::as_str).unwrap_or("")),
                        go_quote(r.get("operator").and_then(Value::as_str).unwrap_or("")),
                        go_strings(r.get("values")),
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{}}}",
        go_map_value(sel.get("matchLabels")),
        exprs
    )
}

/// An `intstr.IntOrString` (JSON number or string) as `%#v` prints it.
pub fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            go_quote(s)
        ),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

/// An `[]int32` as `%#v` prints it; `[]int32(nil)` when absent.
pub fn int32_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        Some(items) => {
            let n: Vec<String> = items
                .iter()
                .map(|i| i.as_i64().unwrap_or(0).to_string())
                .collect();
            format!("[]int32{{{}}}", n.join(", "))
        }
        None => "[]int32(nil)".to_string(),
    }
}

/// An update-strategy struct with a `Type` and a `RollingUpdate` pointer (`go_type` is the
/// internal type name, e.g. `apps.DaemonSetUpdateStrategy`). A set pointer prints as an address
/// upstream; a fixed one stands in for it.
pub fn update_strategy(go_type: &str, rolling_type: &str, strategy: Option<&Value>) -> String {
    let ty = strategy
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let ru = match strategy.and_then(|s| s.get("rollingUpdate")) {
        Some(v) if !v.is_null() => "0xc000000000",
        _ => "nil",
    };
    format!(
        "{go_type}{{Type:{}, RollingUpdate:(*{rolling_type})({ru})}}",
        go_quote(ty)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_as_go_prints() {
        assert_eq!(
            label_selector(&json!({"matchLabels": {"b": "2", "a": "1"}})),
            "v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"1\", \"b\":\"2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
        );
        assert_eq!(
            label_selector(&json!({"matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}, {"key": "e", "operator": "Exists"}]})),
            "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"k\", Operator:\"In\", Values:[]string{\"x\", \"y\"}}, v1.LabelSelectorRequirement{Key:\"e\", Operator:\"Exists\", Values:[]string(nil)}}}"
        );
        assert_eq!(
            int_or_string(&json!("120%")),
            "intstr.IntOrString{Type:1, IntVal:0, StrVal:\"120%\"}"
        );
        assert_eq!(
            int_or_string(&json!(2)),
            "intstr.IntOrString{Type:0, IntVal:2, StrVal:\"\"}"
        );
        assert_eq!(int32_slice(Some(&json!([3, 1]))), "[]int32{3, 1}");
        assert_eq!(int32_slice(None), "[]int32(nil)");
        assert_eq!(
            update_strategy(
                "apps.DaemonSetUpdateStrategy",
                "apps.RollingUpdateDaemonSet",
                Some(&json!({"type": "Sometimes"}))
            ),
            "apps.DaemonSetUpdateStrategy{Type:\"Sometimes\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}"
        );
    }
}
