//! `x-kubernetes-list-type` uniqueness (upstream `schema/listtype/validation.go`,
//! `ValidateListSetsAndMaps`): a `set` has no duplicate items, a `map` no two items with the same
//! key values; duplicates are reported once each (at the second occurrence). Hash-based, so a
//! long list costs linear time.

use crate::gofmt::{child, go_float, index, key, quote, Num};
use crate::node::Node;
use crate::validator::canonical;
use api::validation::{FieldError, FieldErrorKind};
use serde_json::{Map, Value};
use std::collections::HashMap;

pub(crate) fn validate(x: &Value, s: &Node) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(x, s, "", &mut errs, 0);
    errs
}

fn walk(x: &Value, s: &Node, path: &str, errs: &mut Vec<FieldError>, depth: usize) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            for (k, v) in m {
                if let Some(p) = s.properties.get(k) {
                    walk(v, p, &child(path, k), errs, depth + 1);
                } else if let Some(a) = s.additional_schema() {
                    walk(v, a, &key(path, k), errs, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            match s.list_type.as_deref() {
                Some("set") => errs.extend(validate_set(path, items)),
                Some("map") => errs.extend(validate_map(path, items, &s.list_map_keys)),
                _ => {}
            }
            if let Some(item) = s.items.as_deref() {
                for (i, v) in items.iter().enumerate() {
                    walk(v, item, &index(path, i), errs, depth + 1);
                }
            }
        }
        _ => {}
    }
}

fn duplicate(path: String, shown: String) -> FieldError {
    FieldError {
        field: crate::gofmt::or_nil(&path),
        kind: FieldErrorKind::Duplicate,
        message: String::new(),
        value: Some(shown),
    }
}

fn validate_set(path: &str, items: &[Value]) -> Vec<FieldError> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut errs = Vec::new();
    for (i, x) in items.iter().enumerate() {
        let n = seen.entry(canonical(x)).or_insert(0);
        *n += 1;
        if *n == 2 {
            errs.push(duplicate(index(path, i), go_sharp_v(x)));
        }
    }
    errs
}

fn validate_map(path: &str, items: &[Value], keys: &[String]) -> Vec<FieldError> {
    for (i, x) in items.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            return vec![FieldError::invalid_value(
                index(path, i),
                x,
                "must be an object for an array of list-type map",
            )];
        }
    }
    if items.len() <= 1 {
        return Vec::new();
    }
    let mut key_maps = Vec::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        let Some(m) = x.as_object() else {
            key_maps.push(None);
            continue;
        };
        let mut km = Map::new();
        for k in keys {
            if let Some(v) = m.get(k) {
                if v.is_object() || v.is_array() {
                    return vec![FieldError::invalid_value(
                        child(&index(path, i), k),
                        v,
                        "must be of scalar type",
                    )];
                }
                km.insert(k.clone(), v.clone());
            }
        }
        key_maps.push(Some(km));
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut errs = Vec::new();
    for (i, km) in key_maps.into_iter().enumerate() {
        let Some(km) = km else { continue };
        let v = Value::Object(km);
        let n = seen.entry(canonical(&v)).or_insert(0);
        *n += 1;
        if *n == 2 {
            errs.push(duplicate(index(path, i), go_sharp_v(&v)));
        }
    }
    errs
}

/// Go `%#v` of a decoded JSON value, as `field.Duplicate` prints compound values.
pub(crate) fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        },
        Value::Bool(b) => b.to_string(),
        Value::Null => "interface {}(nil)".to_string(),
        Value::Array(a) => format!(
            "[]interface {{}}{{{}}}",
            a.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        quote(k),
                        m.get(*k).map(go_sharp_v).unwrap_or_default()
                    )
                })
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
    }
}
