//! `meta.k8s.io/v1` Table rendering (spec §10), for lists, single objects and watch events.
//!
//! Columns and cells come from the kind's strategy (kubectl's own printer columns); this module
//! only assembles the Table and the per-row object as `includeObject` asks (`None`, `Metadata` →
//! `PartialObjectMetadata`, `Object` → the full object).

use serde_json::{json, Value};

use crate::http::query::IncludeObject;
use crate::registry::Resource;

/// `PartialObjectMetadata` of an object.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// `objects` in the order the kind's printer lists them (FlowSchemas by matching precedence);
/// as given for every other kind, without collecting them.
fn in_row_order<'a, I>(resource: &Resource, objects: I) -> Box<dyn Iterator<Item = &'a Value> + 'a>
where
    I: IntoIterator<Item = &'a Value>,
    I::IntoIter: 'a,
{
    match resource.strategy.table_row_order() {
        Some(cmp) => {
            let mut sorted: Vec<&Value> = objects.into_iter().collect();
            sorted.sort_by(|a, b| cmp(a, b));
            Box::new(sorted.into_iter())
        }
        None => Box::new(objects.into_iter()),
    }
}

fn row(resource: &Resource, obj: &Value, include: IncludeObject, now: jiff::Timestamp) -> Value {
    let cells = resource.strategy.table_cells(obj, now);
    let mut row = json!({ "cells": cells });
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => row["object"] = partial_metadata(obj),
        IncludeObject::Object => row["object"] = obj.clone(),
    }
    row
}

/// A Table of `objects`. `with_columns = false` leaves `columnDefinitions` empty (watch events
/// after the first, as the apiserver does).
pub fn table<'a, I>(
    resource: &Resource,
    objects: I,
    include: IncludeObject,
    list_meta: Value,
    with_columns: bool,
) -> Value
where
    I: IntoIterator<Item = &'a Value>,
    I::IntoIter: 'a,
{
    let columns = if with_columns {
        Value::Array(resource.strategy.table_columns())
    } else {
        json!([])
    };
    let now = jiff::Timestamp::now();
    let rows: Vec<Value> = in_row_order(resource, objects)
        .map(|o| row(resource, o, include, now))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// A Table rendering a `Status` (watch ERROR events with a Table `Accept`).
pub fn status_table(status: &Value) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {"name": "Status", "type": "string", "format": "", "description": "", "priority": 0},
            {"name": "Reason", "type": "string", "format": "", "description": "", "priority": 0},
            {"name": "Message", "type": "string", "format": "", "description": "", "priority": 0},
        ],
        "rows": [{ "cells": [
            status.get("status").cloned().unwrap_or(Value::Null),
            status.get("reason").cloned().unwrap_or(Value::Null),
            status.get("message").cloned().unwrap_or(Value::Null),
        ]}],
    })
}

/// Streams a Table of `objects` into `out` without copying the objects: the same document as
/// [`table`], for large lists.
pub fn write_table<'a, I>(
    out: &mut Vec<u8>,
    resource: &Resource,
    objects: I,
    include: IncludeObject,
    list_meta: &Value,
) where
    I: IntoIterator<Item = &'a Value>,
    I::IntoIter: 'a,
{
    let strategy = &resource.strategy;
    let now = jiff::Timestamp::now();
    out.extend_from_slice(br#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":"#);
    let _ = api::wire::to_writer(&mut *out, list_meta);
    out.extend_from_slice(br#","columnDefinitions":"#);
    let _ = api::wire::to_writer(&mut *out, &strategy.table_columns());
    out.extend_from_slice(br#","rows":["#);
    for (i, obj) in in_row_order(resource, objects).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"cells":"#);
        let _ = api::wire::to_writer(&mut *out, &strategy.table_cells(obj, now));
        match include {
            IncludeObject::None => {}
            IncludeObject::Metadata => {
                out.extend_from_slice(
                    br#","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
                );
                match obj.get("metadata") {
                    Some(m) => {
                        let _ = api::wire::to_writer(&mut *out, m);
                    }
                    None => out.extend_from_slice(b"{}"),
                }
                out.push(b'}');
            }
            IncludeObject::Object => {
                out.extend_from_slice(br#","object":"#);
                let _ = api::wire::to_writer(&mut *out, obj);
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_table_equals_built_table() {
        let Some(info) = crate::registry::builtin::find("", "pods") else {
            panic!("pods are served")
        };
        let info = &info;
        let pods: Vec<Value> = (0..3)
            .map(|i| {
                json!({"apiVersion":"v1","kind":"Pod",
                       "metadata":{"name":format!("p{i}"),"namespace":"default","creationTimestamp":"2026-01-01T00:00:00Z"},
                       "spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Pending"}})
            })
            .collect();
        for include in [
            IncludeObject::None,
            IncludeObject::Metadata,
            IncludeObject::Object,
        ] {
            let meta = json!({"resourceVersion":"7"});
            let built = table(info, pods.iter(), include, meta.clone(), true);
            let mut out = Vec::new();
            write_table(&mut out, info, pods.iter(), include, &meta);
            let streamed: Value = serde_json::from_slice(&out).unwrap_or_default();
            assert_eq!(streamed, built);
        }
    }
}
