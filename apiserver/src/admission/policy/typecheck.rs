//! The type check of a policy's expressions (upstream's `validatingadmissionpolicy.TypeChecker`,
//! run by the `validatingadmissionpolicy-status-controller`).
//!
//! As upstream: the kinds checked against are those `matchConstraints.resourceRules` name
//! explicitly (a `*` group, version or resource, or a subresource, checks nothing); for each kind
//! with a schema, each `validations[i].expression` and `messageExpression` is compiled with
//! `object`/`oldObject` typed by the kind's OpenAPI schema and `params` by the param kind's. Each
//! expression with issues gets one warning, `fieldRef` `spec.validations[i].expression`, the
//! text one line per kind: `<group>/<version>, Kind=<Kind>: <issues>`.
//!
//! Depth, given a CEL crate without a type checker: syntax errors, references to undeclared
//! identifiers, fields the kind's schema does not define (`undefined field 'x'`), field selection
//! on scalars, and results visibly not of the wanted type; not overload or operand type
//! mismatches. Schemas are built-in kinds' generated OpenAPI (references inlined up to
//! [`MAX_DEPTH`] levels, deeper is `dyn`) and CRDs' `openAPIV3Schema`; an object schema without
//! properties (a CRD's `metadata`, `RawExtension`) is open.

use std::sync::Arc;

use k8s_cel::admission::Composition;
use k8s_cel::compile::Want;
use k8s_cel::schema::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::{json, Map, Value};

use crate::registry::resources::Served;
use crate::registry::Resource;

/// How many levels of references are inlined (deeper nodes are `dyn`).
pub const MAX_DEPTH: usize = 24;

/// A served kind's schema as the CEL checker's node.
pub fn kind_node(resource: &Resource) -> Option<Arc<Node>> {
    let schema = match (resource.kind_schema(), &resource.openapi) {
        (Some(k), _) => inline(&k.root, &k.definitions, 0),
        (None, Some(openapi)) => inline(openapi, &Map::new(), 0),
        (None, None) => return None,
    };
    let props: JSONSchemaProps = serde_json::from_value(schema).ok()?;
    Some(k8s_cel::schema::node(&props, false))
}

/// The structural part of an OpenAPI schema with `#/components/schemas/` references resolved
/// against `defs`.
fn inline(v: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    let open = || json!({"x-kubernetes-preserve-unknown-fields": true});
    if depth > MAX_DEPTH {
        return open();
    }
    let Some(m) = v.as_object() else {
        return open();
    };
    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or("");
        return defs
            .get(name)
            .map_or_else(open, |d| inline(d, defs, depth + 1));
    }
    if let Some([only]) = m.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        return inline(only, defs, depth + 1);
    }
    let mut out = Map::new();
    let ty = match m.get("type") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .map(str::to_string),
        _ => None,
    };
    for key in [
        "format",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
    ] {
        if let Some(x) = m.get(key) {
            out.insert(key.into(), x.clone());
        }
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let props: Map<String, Value> = props
            .iter()
            .map(|(k, p)| (k.clone(), inline(p, defs, depth + 1)))
            .collect();
        out.insert("properties".into(), Value::Object(props));
    }
    if let Some(items) = m.get("items") {
        out.insert("items".into(), inline(items, defs, depth + 1));
    }
    match m.get("additionalProperties") {
        Some(a @ Value::Object(_)) => {
            out.insert("additionalProperties".into(), inline(a, defs, depth + 1));
        }
        Some(Value::Bool(true)) => {
            out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
        _ => {}
    }
    let is_object = ty.as_deref() == Some("object") || ty.is_none();
    if is_object && !out.contains_key("properties") && !out.contains_key("additionalProperties") {
        out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
    }
    if let Some(t) = ty {
        out.insert("type".into(), Value::String(t));
    }
    Value::Object(out)
}

/// The served resources a policy's `resourceRules` name explicitly.
fn matched<'s>(policy: &Value, served: &'s Served) -> Vec<&'s Arc<Resource>> {
    let rules = policy
        .pointer("/spec/matchConstraints/resourceRules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let strings = |r: &Value, f: &str| -> Vec<String> {
        r.get(f)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out: Vec<&Arc<Resource>> = Vec::new();
    for rule in &rules {
        for group in strings(rule, "apiGroups") {
            for version in strings(rule, "apiVersions") {
                for resource in strings(rule, "resources") {
                    let wildcard = [&group, &version, &resource].iter().any(|s| *s == "*");
                    if wildcard || resource.contains('/') {
                        continue;
                    }
                    if let Some(r) = served.find(&group, &version, &resource) {
                        if !out.iter().any(|o| Arc::ptr_eq(o, r)) {
                            out.push(r);
                        }
                    }
                }
            }
        }
    }
    out
}

/// The param kind's schema, when it is served.
fn param_node(policy: &Value, served: &Served) -> Option<Arc<Node>> {
    let kind = policy.pointer("/spec/paramKind")?;
    let api_version = kind.get("apiVersion")?.as_str()?;
    let name = kind.get("kind")?.as_str()?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let r = served
        .resources
        .iter()
        .find(|r| r.info.group == group && r.info.version == version && r.info.kind == name)?;
    kind_node(r)
}

/// upstream's `GroupVersionKind.String()`.
fn gvk(r: &Resource) -> String {
    format!("{}/{}, Kind={}", r.info.group, r.info.version, r.info.kind)
}

/// The `status.typeChecking.expressionWarnings` of `policy` against the served kinds.
pub fn check(policy: &Value, served: &Served) -> Vec<Value> {
    let kinds: Vec<(String, Arc<Node>)> = matched(policy, served)
        .into_iter()
        .filter_map(|r| Some((gvk(r), kind_node(r)?)))
        .collect();
    if kinds.is_empty() {
        return Vec::new();
    }
    let params = param_node(policy, served);
    let vars: Vec<(String, String)> = policy
        .pointer("/spec/variables")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .map(|v| {
                    let s = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or("").to_string();
                    (s("name"), s("expression"))
                })
                .collect()
        })
        .unwrap_or_default();
    let check_one = |src: &str, want: Want| -> Option<String> {
        let lines: Vec<String> = kinds
            .iter()
            .filter_map(|(gvk, node)| {
                let declared = [
                    ("object", Some(node.clone())),
                    ("oldObject", Some(node.clone())),
                    ("params", params.clone()),
                ];
                let composition = Composition::new(&vars, &declared);
                let err = composition.compile(src, Some(want), &declared).err()?;
                Some(format!("{gvk}: {err}"))
            })
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    };
    let mut warnings = Vec::new();
    let validations = policy
        .pointer("/spec/validations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, v) in validations.iter().enumerate() {
        for (field, want) in [
            ("expression", Want::Bool),
            ("messageExpression", Want::String),
        ] {
            let Some(src) = v
                .get(field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            else {
                continue;
            };
            if let Some(warning) = check_one(src, want) {
                warnings.push(json!({
                    "fieldRef": format!("spec.validations[{i}].{field}"),
                    "warning": warning,
                }));
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_inlined_and_bare_objects_are_open() {
        let defs: Map<String, Value> = match json!({
            "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"},
                "meta": {"type": "object"}, "tags": {"type": "object",
                "additionalProperties": {"type": "string"}}}},
            "B": {"type": ["string", "null"], "format": "date-time"},
        }) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let got = inline(&json!({"$ref": "#/components/schemas/A"}), &defs, 0);
        assert_eq!(
            got["properties"]["b"],
            json!({"type": "string", "format": "date-time"})
        );
        assert_eq!(
            got["properties"]["meta"]["x-kubernetes-preserve-unknown-fields"],
            json!(true)
        );
        assert_eq!(
            got["properties"]["tags"]["additionalProperties"],
            json!({"type": "string"})
        );
        // A reference cycle ends in an open node.
        let cyclic: Map<String, Value> = match json!({"C": {"type": "object",
            "properties": {"c": {"$ref": "#/components/schemas/C"}}}})
        {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let deep = inline(&json!({"$ref": "#/components/schemas/C"}), &cyclic, 0);
        assert!(serde_json::from_value::<JSONSchemaProps>(deep).is_ok());
    }
}
