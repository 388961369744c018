//! `meta.k8s.io/v1` Table rendering (spec §10), for lists, single objects and watch events.
//!
//! Columns and cells come from the kind's strategy (kubectl's own printer columns); this module
//! only assembles the Table and the per-row object as `includeObject` asks (`None`, `Metadata` →
//! `PartialObjectMetadata`, `Object` → the full object).

use serde_json::{json, Value};

use crate::http::query::IncludeObject;
use crate::registry::strategy_for;

/// `PartialObjectMetadata` of an object.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn row(
    info: &api::ResourceInfo,
    obj: &Value,
    include: IncludeObject,
    now: jiff::Timestamp,
) -> Value {
    let cells = strategy_for(info).table_cells(obj, now);
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
pub fn table<'a>(
    info: &api::ResourceInfo,
    objects: impl IntoIterator<Item = &'a Value>,
    include: IncludeObject,
    list_meta: Value,
    with_columns: bool,
) -> Value {
    let columns = if with_columns {
        Value::Array(strategy_for(info).table_columns())
    } else {
        json!([])
    };
    let now = jiff::Timestamp::now();
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|o| row(info, o, include, now))
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
