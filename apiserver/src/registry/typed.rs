//! Typed decoding of built-in objects: every write of a built-in kind is decoded into its
//! `k8s-openapi` type, as kube-apiserver decodes every body into its Go type, so that an
//! ill-typed object (`"spec": "x"`, a ConfigMap's `"data": 5`, a Secret value that is not base64)
//! is refused and never stored.
//!
//! The table is [`super::builtin`]'s: each built-in kind is registered with a [`DecodeFn`]
//! ([`decode::<T>`](decode) of its type) beside its schema. The store calls it on the object a
//! write would store, in the endpoint's version, for every verb (create, update, every patch
//! type, `/status` and the other subresources that carry the object); custom resources are
//! checked by their own schema instead.
//!
//! Guarantees: decoding only judges, the object is never changed; the check borrows the object
//! (no copy of it) and tracks no path while it succeeds; the path and the message are only
//! built for a refused object. Absent required fields are not decoding errors (Go decoding
//! leaves them zero and validation reports them with a field path), so serde's `missing field`
//! is not one either.
//!
//! [`go_message`] is the one place that words a refusal as Go's `encoding/json` does: `json:
//! cannot unmarshal number into Go struct field PodSpec.spec.tolerations of type
//! []v1.Toleration` (the innermost struct, the JSON field path without list indices or map
//! keys, the Go type read from the kind's schema), `illegal base64 data at input byte 4` for
//! `[]byte` fields and `parsing time …` for times.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::openapi::schemas::KindSchema;

/// Decodes an object into its Kubernetes type; only the verdict is kept.
pub type DecodeFn = fn(&Value) -> Result<(), DecodeError>;

/// One step of the path to the value that did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A field or map key.
    Key(String),
    /// A list index.
    Index(usize),
}

/// Why an object does not decode into its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Where: from the object's root to the value that did not decode.
    pub path: Vec<Step>,
    /// serde's reason (`invalid type: integer `5`, expected a sequence`).
    pub reason: String,
}

/// Decodes `v` as a `T`, borrowing it. The fast path keeps no path; a failure is decoded again
/// with the path tracked to say where.
pub fn decode<T: DeserializeOwned>(v: &Value) -> Result<(), DecodeError> {
    if T::deserialize(v).is_ok() {
        return Ok(());
    }
    match serde_path_to_error::deserialize::<_, T>(v) {
        Ok(_) => Ok(()),
        Err(e) => {
            let reason = e.inner().to_string();
            if reason.starts_with("missing field") {
                return Ok(());
            }
            let path = e
                .path()
                .iter()
                .filter_map(|s| match s {
                    serde_path_to_error::Segment::Map { key } => Some(Step::Key(key.clone())),
                    serde_path_to_error::Segment::Seq { index } => Some(Step::Index(*index)),
                    _ => None,
                })
                .collect();
            Err(DecodeError { path, reason })
        }
    }
}

/// A schema node with the definition it was reached through (`io.k8s.api.core.v1.PodSpec`).
#[derive(Clone, Copy)]
struct Node<'a> {
    /// The schema after following references.
    resolved: &'a Value,
    /// The definition `raw` references, if any.
    definition: Option<&'a str>,
}

fn node<'a>(defs: &'a Map<String, Value>, raw: &'a Value) -> Node<'a> {
    let mut resolved = raw;
    let mut definition = None;
    for _ in 0..8 {
        let target = resolved.get("$ref").and_then(Value::as_str).or_else(|| {
            resolved
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].get("$ref"))
                .and_then(Value::as_str)
        });
        let Some(name) = target.and_then(|r| r.rsplit('/').next()) else {
            break;
        };
        match defs.get(name) {
            Some(s) => {
                resolved = s;
                definition = Some(name);
            }
            None => break,
        }
    }
    Node {
        resolved,
        definition,
    }
}

/// `io.k8s.api.core.v1.PodSpec` → (`v1`, `PodSpec`).
fn go_package_and_name(definition: &str) -> (&str, &str) {
    let mut parts = definition.rsplit('.');
    let name = parts.next().unwrap_or(definition);
    (parts.next().unwrap_or(""), name)
}

/// The Go type a schema node decodes into, as `reflect.Type.String()` prints it.
fn go_type(defs: &Map<String, Value>, n: Node<'_>) -> String {
    if let Some(d) = n.definition {
        let (package, name) = go_package_and_name(d);
        return format!("{package}.{name}");
    }
    let s = n.resolved;
    let format = s.get("format").and_then(Value::as_str).unwrap_or("");
    match s.get("type").and_then(Value::as_str).unwrap_or("") {
        "string" if format == "byte" => "[]uint8".into(),
        "string" => "string".into(),
        "integer" if format == "int32" => "int32".into(),
        "integer" => "int64".into(),
        "number" => "float64".into(),
        "boolean" => "bool".into(),
        "array" => match s.get("items") {
            Some(items) => format!("[]{}", go_type(defs, node(defs, items))),
            None => "[]interface {}".into(),
        },
        _ => match s.get("additionalProperties").filter(|a| a.is_object()) {
            Some(values) => format!("map[string]{}", go_type(defs, node(defs, values))),
            None => "map[string]interface {}".into(),
        },
    }
}

/// What Go's decoder calls the JSON value it could not store: `string`, `number`, `bool`,
/// `array`, `object`, or `number 1.5` where a number does not fit an integer type.
fn json_kind(v: &Value, go_type: &str) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Number(n) if go_type.starts_with("int") || go_type.starts_with("uint") => {
            format!("number {n}")
        }
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

/// Go's `base64.CorruptInputError` for a string that does not decode: the offset of the first
/// bad byte (or of the incomplete last quantum).
fn base64_message(s: &str) -> String {
    use base64::Engine as _;
    let offset = match base64::engine::general_purpose::STANDARD.decode(s) {
        Ok(_) => 0,
        Err(base64::DecodeError::InvalidByte(at, _))
        | Err(base64::DecodeError::InvalidLastSymbol(at, _)) => at,
        Err(base64::DecodeError::InvalidLength(len)) => len - len % 4,
        Err(base64::DecodeError::InvalidPadding) => s.find('=').unwrap_or(s.len()),
    };
    format!("illegal base64 data at input byte {offset}")
}

/// The message Go's `encoding/json` (as kube-apiserver runs it) gives for `err` in `obj`, an
/// object of the kind `schema` describes. See the module docs.
pub fn go_message(schema: &KindSchema, obj: &Value, err: &DecodeError) -> String {
    let defs = &schema.definitions;
    let mut at = node(defs, &schema.root);
    let mut value = Some(obj);
    let mut in_struct = at.definition.map(|d| go_package_and_name(d).1);
    let mut fields: Vec<&str> = Vec::new();
    for step in &err.path {
        match step {
            Step::Key(k) => {
                value = value.and_then(|v| v.get(k));
                let props = at.resolved.get("properties").and_then(|p| p.get(k));
                if let Some(prop) = props {
                    in_struct = at.definition.map(|d| go_package_and_name(d).1);
                    fields.push(k);
                    at = node(defs, prop);
                } else if let Some(values) = at.resolved.get("additionalProperties") {
                    at = node(defs, values);
                } else {
                    break;
                }
            }
            Step::Index(i) => {
                value = value.and_then(|v| v.get(i));
                match at.resolved.get("items") {
                    Some(items) => at = node(defs, items),
                    None => break,
                }
            }
        }
    }
    let ty = go_type(defs, at);
    let format = at.resolved.get("format").and_then(Value::as_str);
    match value {
        Some(Value::String(s)) if format == Some("byte") => return base64_message(s),
        Some(Value::String(s)) if format == Some("date-time") => {
            return format!(
                "parsing time \"{s}\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"{s}\" as \"2006\""
            )
        }
        _ => {}
    }
    let kind = value.map_or_else(|| "value".into(), |v| json_kind(v, &ty));
    match (in_struct, fields.is_empty()) {
        (Some(s), false) => format!(
            "json: cannot unmarshal {kind} into Go struct field {s}.{} of type {ty}",
            fields.join(".")
        ),
        _ => format!("json: cannot unmarshal {kind} into Go value of type {ty}"),
    }
}

/// A JSON value as Go's `%+v` prints its `interface{}` decoding: `map[a:1 b:[x y]]` (keys
/// sorted), strings bare, `<nil>` for null.
pub fn go_print(v: &Value) -> String {
    let mut out = String::new();
    print_into(v, &mut out);
    out
}

fn print_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => out.push_str(s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                if let Some(x) = m.get(k) {
                    print_into(x, out);
                }
            }
            out.push(']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The message for `obj` of the built-in (group, plural), or `None` when it decodes.
    fn refusal(group: &str, plural: &str, obj: Value) -> Option<String> {
        let Some(resource) = crate::registry::builtin::find(group, plural) else {
            panic!("{plural} are served")
        };
        resource.decodes(&obj).err()
    }

    #[test]
    fn ill_typed_objects_are_refused_with_gos_message() {
        let cases = [
            (
                "",
                "nodes",
                json!({"metadata": {"name": "n"}, "spec": "x"}),
                "json: cannot unmarshal string into Go struct field Node.spec of type v1.NodeSpec",
            ),
            (
                "",
                "nodes",
                json!({"spec": {"podCIDR": 5}}),
                "json: cannot unmarshal number into Go struct field NodeSpec.spec.podCIDR of type string",
            ),
            (
                "",
                "pods",
                json!({"spec": {"containers": [{"name": "c"}], "tolerations": 5}}),
                "json: cannot unmarshal number into Go struct field PodSpec.spec.tolerations of type []v1.Toleration",
            ),
            (
                "",
                "pods",
                json!({"spec": {"containers": [{"name": "c", "ports": "x"}]}}),
                "json: cannot unmarshal string into Go struct field Container.spec.containers.ports of type []v1.ContainerPort",
            ),
            (
                "",
                "configmaps",
                json!({"data": 5}),
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type map[string]string",
            ),
            (
                "",
                "configmaps",
                json!({"data": {"a": 5}}),
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
            ),
            (
                "",
                "secrets",
                json!({"data": {"a": "YWJj", "b": "ab!d"}}),
                "illegal base64 data at input byte 2",
            ),
            (
                "apps",
                "deployments",
                json!({"spec": {"replicas": 1.5}}),
                "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                "coordination.k8s.io",
                "leases",
                json!({"spec": {"renewTime": "yesterday"}}),
                "parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\"",
            ),
            (
                "",
                "pods",
                json!({"metadata": {"labels": ["a"]}}),
                "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string",
            ),
        ];
        for (group, plural, obj, message) in cases {
            assert_eq!(
                refusal(group, plural, obj.clone()).as_deref(),
                Some(message),
                "{plural} {obj}"
            );
        }
    }

    #[test]
    fn well_typed_objects_and_absent_required_fields_decode() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"image": "i", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]},
        });
        assert_eq!(refusal("", "pods", pod), None);
        // metav1.Condition's lastTransitionTime is required in k8s-openapi, zero in Go.
        let pdb =
            json!({"status": {"conditions": [{"type": "DisruptionAllowed", "status": "True"}]}});
        assert_eq!(refusal("policy", "poddisruptionbudgets", pdb), None);
        assert_eq!(refusal("", "secrets", json!({"data": {"a": "YWJj"}})), None);
    }

    #[test]
    fn go_print_is_gos_plus_v_of_the_decoded_patch() {
        let p = json!({"spec": {"tolerations": 5, "b": [true, null, "x"]}});
        assert_eq!(
            go_print(&p),
            "map[spec:map[b:[true <nil> x] tolerations:5]]"
        );
    }
}
