//! `metadata` of the resource root and of embedded resources (upstream `schema/objectmeta`):
//! coercion into `ObjectMeta` (unknown fields dropped, ill-typed fields refused or, when
//! reading stored objects, dropped) and validation of embedded `apiVersion`, `kind` and
//! `metadata`.
//!
//! Coercion re-encodes metadata the way a decode into `metav1.ObjectMeta` and back does: known
//! fields with their Go types, empty values omitted (`omitempty`), timestamps normalized to UTC
//! seconds (`metav1.Time`), a zero `creationTimestamp` removed.

use crate::gofmt::{child, index, key, or_nil};
use crate::node::Node;
use api::validation::FieldError;
use serde_json::{Map, Value};

/// Go types of `ObjectMeta`'s fields.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
    Time,
    StrMap,
    StrList,
    /// Any JSON object (`fieldsV1`).
    Object,
    Owners,
    Managed,
}

fn object_meta_field(k: &str) -> Option<Ty> {
    Some(match k {
        "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => Ty::Str,
        "generation" | "deletionGracePeriodSeconds" => Ty::Int,
        "creationTimestamp" | "deletionTimestamp" => Ty::Time,
        "labels" | "annotations" => Ty::StrMap,
        "finalizers" => Ty::StrList,
        "ownerReferences" => Ty::Owners,
        "managedFields" => Ty::Managed,
        _ => return None,
    })
}

fn owner_field(k: &str) -> Option<Ty> {
    Some(match k {
        "apiVersion" | "kind" | "name" | "uid" => Ty::Str,
        "controller" | "blockOwnerDeletion" => Ty::Bool,
        _ => return None,
    })
}

fn managed_field(k: &str) -> Option<Ty> {
    Some(match k {
        "manager" | "operation" | "apiVersion" | "fieldsType" | "subresource" => Ty::Str,
        "time" => Ty::Time,
        "fieldsV1" => Ty::Object,
        _ => return None,
    })
}

fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

fn go_type(t: Ty) -> &'static str {
    match t {
        Ty::Str => "string",
        Ty::Int => "int64",
        Ty::Bool => "bool",
        Ty::Time => "v1.Time",
        Ty::StrMap => "map[string]string",
        Ty::StrList => "[]string",
        Ty::Object => "v1.FieldsV1",
        Ty::Owners => "[]v1.OwnerReference",
        Ty::Managed => "[]v1.ManagedFieldsEntry",
    }
}

/// A decode failure: Go's message.
fn type_error(v: &Value, field: &str, t: Ty) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field ObjectMeta.{field} of type {}",
        go_kind(v),
        go_type(t)
    )
}

/// `metav1.Time` of a string: RFC 3339, re-encoded in UTC with seconds.
fn coerce_time(s: &str) -> Option<Value> {
    let ts: jiff::Timestamp = s.parse().ok()?;
    Some(Value::String(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

/// Decodes `v` as `t` and re-encodes it; `Ok(None)` is a zero value (omitted). Unknown nested
/// fields are reported in `unknown` under `path`.
fn coerce_typed(
    v: &Value,
    t: Ty,
    field: &str,
    path: &str,
    unknown: &mut Vec<String>,
) -> Result<Option<Value>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let bad = || type_error(v, field, t);
    Ok(match t {
        Ty::Str => {
            let s = v.as_str().ok_or_else(bad)?;
            (!s.is_empty()).then(|| v.clone())
        }
        Ty::Int => {
            let i = v.as_i64().ok_or_else(bad)?;
            (i != 0).then(|| Value::from(i))
        }
        Ty::Bool => Some(Value::Bool(v.as_bool().ok_or_else(bad)?)),
        Ty::Time => {
            let s = v.as_str().ok_or_else(bad)?;
            if s.is_empty() {
                None
            } else {
                Some(coerce_time(s).ok_or_else(|| {
                    format!(
                        "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse",
                        crate::gofmt::quote(s)
                    )
                })?)
            }
        }
        Ty::StrMap => {
            let m = v.as_object().ok_or_else(bad)?;
            let mut out = Map::new();
            for (k, x) in m {
                match x {
                    Value::String(_) => {
                        out.insert(k.clone(), x.clone());
                    }
                    Value::Null => {
                        out.insert(k.clone(), Value::String(String::new()));
                    }
                    _ => return Err(bad()),
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Ty::StrList => {
            let a = v.as_array().ok_or_else(bad)?;
            let mut out = Vec::with_capacity(a.len());
            for x in a {
                match x {
                    Value::String(_) => out.push(x.clone()),
                    Value::Null => out.push(Value::String(String::new())),
                    _ => return Err(bad()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        Ty::Object => {
            v.as_object().ok_or_else(bad)?;
            Some(v.clone())
        }
        Ty::Owners | Ty::Managed => {
            let a = v.as_array().ok_or_else(bad)?;
            let fields = if matches!(t, Ty::Owners) {
                owner_field
            } else {
                managed_field
            };
            let mut out = Vec::with_capacity(a.len());
            for (i, item) in a.iter().enumerate() {
                let item_path = index(path, i);
                match item {
                    Value::Null => out.push(Value::Object(Map::new())),
                    Value::Object(m) => out.push(Value::Object(coerce_struct(
                        m, fields, &item_path, unknown,
                    )?)),
                    _ => return Err(bad()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
    })
}

fn coerce_struct(
    m: &Map<String, Value>,
    fields: fn(&str) -> Option<Ty>,
    path: &str,
    unknown: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (k, v) in m {
        let p = child(path, k);
        match fields(k) {
            Some(t) => {
                if let Some(x) = coerce_typed(v, t, k, &p, unknown)? {
                    out.insert(k.clone(), x);
                }
            }
            None => unknown.push(p),
        }
    }
    Ok(out)
}

/// `GetObjectMeta` + `SetObjectMeta` of the `metadata` value at `path`: the coerced metadata,
/// or the decode error. With `drop_invalid`, ill-typed fields are dropped one by one instead.
pub(crate) fn coerce_meta(
    meta: &Value,
    path: &str,
    drop_invalid: bool,
    unknown: &mut Vec<String>,
) -> Result<Value, String> {
    let Some(m) = meta.as_object() else {
        if meta.is_null() {
            return Ok(Value::Object(Map::new()));
        }
        return Err(if drop_invalid {
            format!(
                "invalid metadata: expected object, got {}",
                go_go_type(meta)
            )
        } else {
            format!(
                "json: cannot unmarshal {} into Go value of type v1.ObjectMeta",
                go_kind(meta)
            )
        });
    };
    let mut out = Map::new();
    for (k, v) in m {
        let p = child(path, k);
        let Some(t) = object_meta_field(k) else {
            unknown.push(p);
            continue;
        };
        match coerce_typed(v, t, k, &p, unknown) {
            Ok(Some(x)) => {
                out.insert(k.clone(), x);
            }
            Ok(None) => {}
            Err(e) if !drop_invalid => return Err(e),
            Err(_) => {}
        }
    }
    Ok(Value::Object(out))
}

fn go_go_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "int64",
        Value::Bool(_) => "bool",
        Value::Array(_) => "[]interface {}",
        _ => "map[string]interface {}",
    }
}

/// `objectmeta.CoerceWithOptions`: coerces `apiVersion`, `kind` and `metadata` of every embedded
/// resource under `s` (and of the root when `is_resource_root`), collecting unknown metadata
/// fields' paths. The first ill-typed field is an error unless `drop_invalid`.
pub(crate) fn coerce(
    x: &mut Value,
    s: &Node,
    is_resource_root: bool,
    drop_invalid: bool,
) -> Result<Vec<String>, FieldError> {
    let mut unknown = Vec::new();
    coerce_at(
        x,
        Some(s),
        is_resource_root || s.embedded,
        "",
        drop_invalid,
        &mut unknown,
        0,
    )?;
    Ok(unknown)
}

fn coerce_at(
    x: &mut Value,
    s: Option<&Node>,
    embedded: bool,
    path: &str,
    drop_invalid: bool,
    unknown: &mut Vec<String>,
    depth: usize,
) -> Result<(), FieldError> {
    let Some(s) = s else { return Ok(()) };
    if depth > crate::MAX_DEPTH {
        return Ok(());
    }
    match x {
        Value::Object(map) => {
            if embedded {
                for k in ["apiVersion", "kind"] {
                    if let Some(v) = map.get(k) {
                        if !v.is_string() {
                            if drop_invalid {
                                map.shift_remove(k);
                            } else {
                                return Err(FieldError::invalid_value(
                                    or_nil(&child(path, k)),
                                    v,
                                    "must be a string",
                                ));
                            }
                        }
                    }
                }
                if let Some(meta) = map.get("metadata") {
                    let mpath = child(path, "metadata");
                    match coerce_meta(meta, &mpath, drop_invalid, unknown) {
                        Ok(m) => {
                            map.insert("metadata".to_string(), m);
                        }
                        Err(e) if !drop_invalid => {
                            return Err(FieldError::invalid_value(mpath, meta, e));
                        }
                        Err(_) => {}
                    }
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    coerce_at(
                        v,
                        Some(prop),
                        prop.embedded,
                        &child(path, k),
                        drop_invalid,
                        unknown,
                        depth + 1,
                    )?;
                } else if let Some(a) = s.additional_schema() {
                    coerce_at(
                        v,
                        Some(a),
                        a.embedded,
                        &key(path, k),
                        drop_invalid,
                        unknown,
                        depth + 1,
                    )?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    coerce_at(
                        v,
                        Some(item),
                        item.embedded,
                        &index(path, i),
                        drop_invalid,
                        unknown,
                        depth + 1,
                    )?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `objectmeta.Validate(nil, obj, s, isResourceRoot)`: embedded resources need a string
/// `apiVersion` that parses as a group version, a `kind` that is a DNS-1035 label up to case,
/// and metadata that passes `ValidateObjectMeta` (names as path segments).
pub(crate) fn validate(x: &Value, s: &Node, is_resource_root: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_at(x, Some(s), is_resource_root || s.embedded, "", &mut errs, 0);
    errs
}

fn validate_at(
    x: &Value,
    s: Option<&Node>,
    embedded: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    let Some(s) = s else { return };
    if depth > crate::MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            if embedded {
                errs.extend(validate_embedded(path, map));
            }
            for (k, v) in map {
                if let Some(prop) = s.properties.get(k) {
                    validate_at(
                        v,
                        Some(prop),
                        prop.embedded,
                        &child(path, k),
                        errs,
                        depth + 1,
                    );
                } else if let Some(a) = s.additional_schema() {
                    validate_at(v, Some(a), a.embedded, &key(path, k), errs, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                validate_at(
                    v,
                    s.items.as_deref(),
                    s.items.as_ref().is_some_and(|n| n.embedded),
                    &index(path, i),
                    errs,
                    depth + 1,
                );
            }
        }
        _ => {}
    }
}

fn validate_embedded(path: &str, map: &Map<String, Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for k in ["apiVersion", "kind"] {
        if !map.contains_key(k) {
            errs.push(FieldError::required(or_nil(&child(path, k)), ""));
        }
    }
    for (k, v) in map {
        let p = or_nil(&child(path, k));
        match k.as_str() {
            "apiVersion" => match v.as_str() {
                None => errs.push(FieldError::invalid_value(p, v, "must be a string")),
                Some("") => errs.push(FieldError::invalid(p, "", "must not be empty")),
                Some(gv) if gv.matches('/').count() > 1 => errs.push(FieldError::invalid(
                    p,
                    gv,
                    format!("unexpected GroupVersion string: {gv}"),
                )),
                Some(_) => {}
            },
            "kind" => match v.as_str() {
                None => errs.push(FieldError::invalid_value(p, v, "must be a string")),
                Some("") => errs.push(FieldError::invalid(p, "", "must not be empty")),
                Some(kind) => {
                    let problems = api::validation::is_dns1035_label(&kind.to_lowercase());
                    if !problems.is_empty() {
                        errs.push(FieldError::invalid(
                            p,
                            kind,
                            format!(
                                "may have mixed case, but should otherwise match: {}",
                                problems.join(",")
                            ),
                        ));
                    }
                }
            },
            "metadata" => {
                let mut ignored = Vec::new();
                match coerce_meta(v, &p, false, &mut ignored) {
                    Err(e) => errs.push(FieldError::invalid_value(p, v, e)),
                    Ok(mut meta) => {
                        let namespaced = meta
                            .get("namespace")
                            .and_then(Value::as_str)
                            .is_some_and(|n| !n.is_empty());
                        if let Some(m) = meta.as_object_mut() {
                            if m.get("name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .is_empty()
                            {
                                // Upstream sets a name so that a missing one is no error.
                                m.insert("name".into(), Value::String("fakename".into()));
                            }
                        }
                        for mut e in api::validation::validate_object_meta(
                            &meta,
                            namespaced,
                            api::validation::name_is_path_segment,
                        ) {
                            e.field = e.field.replacen("metadata", &p, 1);
                            errs.push(e);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    errs
}
