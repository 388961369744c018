//! Schemas of the served kinds for `components.schemas`, generated from the `k8s-openapi` types
//! (their `schemars` implementations carry upstream's descriptions and names such as
//! `io.k8s.api.core.v1.PodSpec`), in OpenAPI 3 form (`#/components/schemas/` references). This
//! is what `kubectl explain` walks.

use schemars::generate::SchemaSettings;

use crate::registry::resources::SchemaFn;
use crate::registry::Resource;
use serde_json::{Map, Value};

/// The definitions of `kinds`' typed schemas and everything they reference, keyed by schema name,
/// with the root schema of each kind (a `$ref`; `None` for a kind without a typed schema, to which
/// the caller gives an open object schema).
pub fn definitions(kinds: &[&Resource]) -> (Map<String, Value>, Vec<Option<Value>>) {
    let mut gen = SchemaSettings::openapi3().into_generator();
    let roots = kinds
        .iter()
        .map(|r| r.schema.map(|f| f(&mut gen).to_value()))
        .collect();
    let mut defs = gen.take_definitions(true);
    // OpenAPI 3.0 ignores siblings of `$ref`; upstream wraps references that carry a description
    // in `allOf`, which is what kubectl explain expects.
    for (name, v) in defs.iter_mut() {
        wrap_refs(v);
        add_extensions(name, v);
    }
    (defs, roots)
}

/// One kind's typed schema: its root and every definition it references.
#[derive(Debug)]
pub struct KindSchema {
    /// The kind's schema (a `$ref` into `definitions`).
    pub root: Value,
    /// Referenced definitions by name.
    pub definitions: Map<String, Value>,
}

/// The typed schema of one kind.
pub fn kind_schema(schema: SchemaFn) -> KindSchema {
    let mut gen = SchemaSettings::openapi3().into_generator();
    let root = schema(&mut gen).to_value();
    let mut definitions = gen.take_definitions(true);
    for (name, v) in definitions.iter_mut() {
        wrap_refs(v);
        add_extensions(name, v);
    }
    KindSchema { root, definitions }
}

/// The extensions upstream's OpenAPI carries on the properties of definition `name`, from the Go
/// comment tags of its fields (`api::wire`): `x-kubernetes-patch-strategy`,
/// `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
/// `x-kubernetes-map-type` (kubectl's client-side strategic merge reads the first two).
pub fn add_extensions(name: &str, def: &mut Value) {
    let Some(ty) = api::wire::Type::named(name) else {
        return;
    };
    let Some(props) = def.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (field, schema) in props.iter_mut() {
        let Some(tags) = ty.field(field).map(|f| f.tags) else {
            continue;
        };
        let Some(s) = schema.as_object_mut() else {
            continue;
        };
        let mut put = |k: &str, v: Value| {
            s.insert(k.to_string(), v);
        };
        if let Some(v) = tags.list_type {
            put("x-kubernetes-list-type", Value::from(v));
        }
        if !tags.list_map_keys.is_empty() {
            put(
                "x-kubernetes-list-map-keys",
                Value::from(tags.list_map_keys.to_vec()),
            );
        }
        if let Some(v) = tags.map_type {
            put("x-kubernetes-map-type", Value::from(v));
        }
        if let Some(v) = tags.patch_merge_key {
            put("x-kubernetes-patch-merge-key", Value::from(v));
        }
        if let Some(v) = tags.patch_strategy {
            put("x-kubernetes-patch-strategy", Value::from(v));
        }
    }
}

fn wrap_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.len() > 1 {
                if let Some(r) = m.remove("$ref") {
                    m.insert(
                        "allOf".into(),
                        Value::Array(vec![serde_json::json!({ "$ref": r })]),
                    );
                }
            }
            for child in m.values_mut() {
                wrap_refs(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(wrap_refs),
        _ => {}
    }
}

/// An open object schema for a kind without a typed schema.
pub fn open_schema(info: &api::ResourceInfo) -> Value {
    serde_json::json!({
        "type": "object",
        "description": format!("{} ({}).", info.kind, info.api_version()),
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Most unknown fields reported for one object.
const MAX_UNKNOWN: usize = 32;

/// Resolves `$ref` and single-`allOf` wrappers to the referenced definition.
fn resolve<'a>(defs: &'a Map<String, Value>, mut schema: &'a Value) -> &'a Value {
    for _ in 0..8 {
        let target = schema.get("$ref").and_then(Value::as_str).or_else(|| {
            schema
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].get("$ref"))
                .and_then(Value::as_str)
        });
        match target
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .and_then(|n| defs.get(n))
        {
            Some(s) => schema = s,
            None => break,
        }
    }
    schema
}

/// `path` is the dotted path of `v`, extended in place for each child and restored after it: a
/// path is only copied out when a field turns out to be unknown.
fn walk(
    defs: &Map<String, Value>,
    schema: &Value,
    v: &Value,
    path: &mut String,
    out: &mut Vec<String>,
) {
    if out.len() >= MAX_UNKNOWN {
        return;
    }
    let schema = resolve(defs, schema);
    let len = path.len();
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) => walk(defs, s, child, path, out),
                    (None, Some(a)) => walk(defs, a, child, path, out),
                    (None, None) if props.is_some() => out.push(path.clone()),
                    (None, None) => {}
                }
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, child) in items.iter().enumerate() {
                    use std::fmt::Write as _;
                    let _ = write!(path, "[{i}]");
                    walk(defs, item_schema, child, path, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// [`walk`] over a Go type of [`api::wire`]: an object's keys are its type's fields, a map's
/// values and a list's items are the field's child type; leaves (scalars, `Time`, `Quantity`,
/// `IntOrString`, `RawExtension`, `FieldsV1`) hold anything.
fn walk_typed(ty: api::wire::Type, v: &Value, path: &mut String, out: &mut Vec<String>) {
    let Value::Object(m) = v else {
        return;
    };
    let len = path.len();
    for (k, child) in m {
        if out.len() >= MAX_UNKNOWN {
            return;
        }
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(k);
        match ty.field(k) {
            None => out.push(path.clone()),
            Some(f) => walk_child(f.child, child, path, out),
        }
        path.truncate(len);
    }
}

/// The value of a field: a list's items each as the field's child.
fn walk_child(child: api::wire::Child, v: &Value, path: &mut String, out: &mut Vec<String>) {
    use api::wire::Child;
    if let Value::Array(items) = v {
        let len = path.len();
        for (i, item) in items.iter().enumerate() {
            use std::fmt::Write as _;
            let _ = write!(path, "[{i}]");
            walk_child(child, item, path, out);
            path.truncate(len);
        }
        return;
    }
    match child {
        Child::Leaf => {}
        Child::Struct(i) => {
            if let Some(t) = api::wire::at(i) {
                walk_typed(t, v, path, out);
            }
        }
        Child::Map(i) => {
            let (Some(t), Value::Object(m)) = (api::wire::at(i), v) else {
                return;
            };
            let len = path.len();
            for (k, value) in m {
                path.push('.');
                path.push_str(k);
                walk_typed(t, value, path, out);
                path.truncate(len);
            }
        }
    }
}

/// Fields of `obj` that the kind's schema does not define (`spec.foo`,
/// `spec.containers[0].bar`), as upstream's strict decoding reports them. Kinds without a typed
/// schema have none.
pub fn unknown_fields(resource: &Resource, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    // A built-in kind walks its Go type's field table (the same fields as its schema, which
    // `api::wire`'s tests check): no schema resolution and no hashing per key.
    if resource.decode.is_some() {
        if let Some(ty) =
            api::wire::Type::of_kind(&resource.info.api_version(), &resource.info.kind)
        {
            walk_typed(ty, obj, &mut String::new(), &mut out);
            return out;
        }
    }
    let Some(schema) = resource.kind_schema() else {
        return Vec::new();
    };
    walk(
        &schema.definitions,
        &schema.root,
        obj,
        &mut String::new(),
        &mut out,
    );
    out
}

/// Removes the given dotted/indexed paths from `obj` (what typed decoding does to unknown fields).
pub fn prune(obj: &mut Value, paths: &[String]) {
    for p in paths {
        let mut segs: Vec<String> = Vec::new();
        for part in p.split('.') {
            match part.split_once('[') {
                Some((name, rest)) => {
                    segs.push(name.to_string());
                    for idx in rest.split('[') {
                        segs.push(format!("[{}", idx.trim_end_matches(']')));
                    }
                }
                None => segs.push(part.to_string()),
            }
        }
        remove_at(obj, &segs);
    }
}

fn remove_at(v: &mut Value, segs: &[String]) {
    match segs {
        [] => {}
        [last] => {
            if let Some(m) = v.as_object_mut() {
                m.remove(last.as_str());
            }
        }
        [first, rest @ ..] => {
            let next = match first.strip_prefix('[') {
                Some(i) => i.parse::<usize>().ok().and_then(|i| v.get_mut(i)),
                None => v.get_mut(first.as_str()),
            };
            if let Some(n) = next {
                remove_at(n, rest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_and_prunes_unknown_fields() {
        let pods = crate::registry::builtin::find("", "pods");
        let Some(info) = pods.as_deref() else {
            panic!("pods are served")
        };
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always", "nope": true}],
                     "foo": "bar", "nodeSelector": {"x": "y"}},
            "status": {"phase": "Running"},
        });
        let unknown = unknown_fields(info, &pod);
        assert_eq!(
            unknown,
            ["metadata.bogus", "spec.containers[0].nope", "spec.foo"]
        );
        prune(&mut pod, &unknown);
        assert!(unknown_fields(info, &pod).is_empty());
        assert_eq!(pod["spec"]["nodeSelector"]["x"], "y");
    }

    /// The built-in kinds' table walk finds what the schema walk finds.
    #[test]
    fn the_type_table_walk_agrees_with_the_schema_walk() {
        let by_schema = |r: &Resource, obj: &Value| {
            let schema = r.kind_schema().expect("typed");
            let mut out = Vec::new();
            walk(
                &schema.definitions,
                &schema.root,
                obj,
                &mut String::new(),
                &mut out,
            );
            out
        };
        let cases = [
            (
                "",
                "pods",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"x": 1,
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}, "y": 2}]},
                "spec": {"volumes": [{"name": "v", "emptyDir": {"z": 1}}],
                    "containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}},
                        "ports": [{"containerPort": 1, "bad": 2}]}],
                    "overhead": {"cpu": "1"}, "affinity": {"nodeAffinity": {"w": 1}}}}),
            ),
            (
                "apps",
                "deployments",
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "spec": {"selector": {"matchLabels": {"a": "b"}, "q": 1},
                    "template": {"spec": {"containers": [{"name": "c", "env": [{"name": "e", "valueFrom": {"k": 1}}]}]}},
                    "strategy": {"rollingUpdate": {"maxSurge": "25%", "m": 1}}}}),
            ),
            (
                "",
                "secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "Yg=="},
                "stringData": {"b": "c"}, "extra": true}),
            ),
            (
                "batch",
                "jobs",
                json!({"apiVersion": "batch/v1", "kind": "Job",
                "spec": {"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "x", "n": 1}]}]},
                    "template": {"metadata": {"annotations": {"a": "b"}}, "spec": {}}},
                "status": {"conditions": [{"type": "Complete", "zz": 1}]}}),
            ),
        ];
        for (group, plural, obj) in cases {
            let r = crate::registry::builtin::find(group, plural).expect("served");
            let typed = unknown_fields(&r, &obj);
            assert!(!typed.is_empty(), "{plural}: nothing found");
            assert_eq!(typed, by_schema(&r, &obj), "{plural}");
        }
    }
}
