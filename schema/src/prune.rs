//! Pruning (upstream `schema/pruning/algorithm.go`, `PruneWithOptions` with unknown-field paths)
//! and `defaulting.PruneNonNullableNullsWithoutDefaults`.
//!
//! Guarantees: after [`prune`], every object field of the value is declared by the schema
//! (`properties` or `additionalProperties`) unless a `x-kubernetes-preserve-unknown-fields`
//! schema covers it; `apiVersion`, `kind` and `metadata` of the resource root and of embedded
//! resources are left alone (object-meta coercion handles metadata). The removed fields' paths
//! are returned sorted, in upstream's form (`spec.foo`, `spec.list[0].bar`). Key order of what
//! stays is kept. Recursion stops at [`crate::MAX_DEPTH`] (deeper values are left as they are;
//! validation refuses them).

use crate::node::Node;
use serde_json::Value;

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

struct Pruner {
    /// Upstream's `ParentPath`, joined.
    path: String,
    pruned: Vec<String>,
}

impl Pruner {
    fn record(&mut self, key: &str) {
        let l = self.path.len();
        self.append_key(key);
        self.pruned.push(self.path.clone());
        self.path.truncate(l);
    }
    fn append_key(&mut self, key: &str) {
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
    }
    fn append_index(&mut self, i: usize) {
        self.path.push_str(&format!("[{i}]"));
    }
}

/// `PruneWithOptions(obj, s, isResourceRoot, ReturnPruned)`.
pub(crate) fn prune(obj: &mut Value, s: &Node, is_resource_root: bool) -> Vec<String> {
    let mut p = Pruner {
        path: String::new(),
        pruned: Vec::new(),
    };
    if is_resource_root && !s.embedded {
        // Upstream clones the root with XEmbeddedResource set; only that flag is read here.
        prune_value(obj, Some(s), true, &mut p, 0);
    } else {
        prune_value(obj, Some(s), s.embedded, &mut p, 0);
    }
    p.pruned.sort();
    p.pruned
}

/// `prune(x, s)`; `embedded` is `s.XEmbeddedResource` (overridden at the resource root).
fn prune_value(x: &mut Value, s: Option<&Node>, embedded: bool, p: &mut Pruner, depth: usize) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    if let Some(s) = s {
        if s.preserve_unknown {
            skip_prune(x, s, embedded, p, depth);
            return;
        }
    }
    let orig = p.path.len();
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    p.record(&k);
                }
                map.clear();
                return;
            };
            map.retain(|k, v| {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                if let Some(prop) = s.properties.get(k) {
                    p.append_key(k);
                    prune_value(v, Some(prop), prop.embedded, p, depth + 1);
                    p.path.truncate(orig);
                    true
                } else if s.has_additional() {
                    let a = s.additional_schema();
                    p.append_key(k);
                    prune_value(v, a, a.is_some_and(|a| a.embedded), p, depth + 1);
                    p.path.truncate(orig);
                    true
                } else {
                    if !META_FIELDS.contains(&k.as_str()) || !p.path.is_empty() {
                        p.record(k);
                    }
                    false
                }
            });
        }
        Value::Array(items) => {
            let item = s.and_then(|s| s.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                p.append_index(i);
                prune_value(v, item, item.is_some_and(|n| n.embedded), p, depth + 1);
                p.path.truncate(orig);
            }
        }
        _ => {}
    }
}

/// `skipPrune`: under `x-kubernetes-preserve-unknown-fields`, declared fields are still pruned.
fn skip_prune(x: &mut Value, s: &Node, embedded: bool, p: &mut Pruner, depth: usize) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    let orig = p.path.len();
    match x {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.properties.get(k) {
                    p.append_key(k);
                    prune_value(v, Some(prop), prop.embedded, p, depth + 1);
                    p.path.truncate(orig);
                } else if s.has_additional() {
                    let a = s.additional_schema();
                    p.append_key(k);
                    prune_value(v, a, a.is_some_and(|a| a.embedded), p, depth + 1);
                    p.path.truncate(orig);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    p.append_index(i);
                    skip_prune(v, item, item.embedded, p, depth + 1);
                    p.path.truncate(orig);
                }
            }
        }
        _ => {}
    }
}

/// `PruneNonNullableNullsWithoutDefaults`: drops `null` fields whose schema is neither nullable
/// nor defaulted (defaulting replaces the defaulted ones).
pub(crate) fn prune_nulls(x: &mut Value, s: Option<&Node>, depth: usize) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => map.retain(|k, v| {
            let schema = s.and_then(|s| s.field(k));
            if v.is_null() && schema.is_some_and(|s| !s.nullable && s.default.is_none()) {
                return false;
            }
            prune_nulls(v, schema, depth + 1);
            true
        }),
        Value::Array(items) => {
            let item = s.and_then(|s| s.items.as_deref());
            for v in items {
                prune_nulls(v, item, depth + 1);
            }
        }
        _ => {}
    }
}
