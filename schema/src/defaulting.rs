//! Structural defaulting (upstream `schema/defaulting/algorithm.go`).
//!
//! A property's default is set when the property is missing, or `null` while the schema is not
//! nullable; the same for `null` items and `additionalProperties` values. Defaults are deep
//! copies; the walk then descends into the value (so defaults inside a default apply too, as
//! upstream). Idempotent: a second run finds nothing missing. Recursion stops at
//! [`crate::MAX_DEPTH`].

use crate::node::Node;
use serde_json::Value;

fn is_non_nullable_null(x: &Value, s: Option<&Node>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable)
}

/// `Default(x, s)`.
pub(crate) fn apply(x: &mut Value, s: &Node, depth: usize) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                let missing = match map.get(k) {
                    None => true,
                    Some(v) => is_non_nullable_null(v, Some(prop)),
                };
                if missing {
                    map.insert(k.clone(), d.clone());
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply(v, prop, depth + 1);
                } else if s.has_additional() {
                    let a = s.additional_schema();
                    if is_non_nullable_null(v, a) {
                        if let Some(d) = a.and_then(|a| a.default.as_ref()) {
                            *v = d.clone();
                        }
                    }
                    if let Some(a) = a {
                        apply(v, a, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(item) = s.items.as_deref() else {
                return;
            };
            for v in items.iter_mut() {
                if is_non_nullable_null(v, Some(item)) {
                    if let Some(d) = &item.default {
                        *v = d.clone();
                    }
                }
                apply(v, item, depth + 1);
            }
        }
        _ => {}
    }
}
