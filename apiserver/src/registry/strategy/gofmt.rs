//! Go's `%#v` of the values upstream's validation messages print (`field.Invalid` with a map, a
//! label selector or an `[]int32`), rendered from the JSON form so a 422 reads
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
        assert_eq!(int32_slice(Some(&json!([3, 1]))), "[]int32{3, 1}");
        assert_eq!(int32_slice(None), "[]int32(nil)");
    }
}
