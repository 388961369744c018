//! Building blocks of `meta.k8s.io/v1` Table responses: column definitions and common cells.

use serde_json::{json, Value};

/// A TableColumnDefinition (`type`: string/integer/number/boolean/date; `priority` 1 = `-o wide`).
pub fn column(name: &str, ty: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({
        "name": name,
        "type": ty,
        "format": format,
        "description": description,
        "priority": priority,
    })
}

/// The `Name` column as every printer defines it.
pub fn name_column() -> Value {
    column(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        0,
    )
}

/// The `Age` column.
pub fn age_column() -> Value {
    column(
        "Age",
        "string",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        0,
    )
}

/// The `Created At` column of upstream's default table convertor (`rest.NewDefaultTableConvertor`:
/// kinds without a printer, such as Roles and ClusterRoles, show NAME and CREATED AT).
pub fn created_at_column() -> Value {
    let mut c = age_column();
    c["name"] = Value::from("Created At");
    c["type"] = Value::from("date");
    c
}

/// The Created At cell: `creationTimestamp` in RFC 3339, UTC (Go's zero time when absent).
pub fn created_at_cell(obj: &Value) -> Value {
    let t = api::meta::creation_timestamp(obj).and_then(api::meta::parse_time);
    Value::from(t.map_or_else(
        || "0001-01-01T00:00:00Z".to_string(),
        api::meta::format_time,
    ))
}

/// `HumanDuration(now - t)` of a timestamp string, `<unknown>` when absent or unparsable.
pub fn since_cell(ts: Option<&str>, now: jiff::Timestamp) -> Value {
    match ts.and_then(api::meta::parse_time) {
        Some(t) => Value::from(api::human_duration_since(t, now)),
        None => Value::from("<unknown>"),
    }
}

/// The Age cell of an object.
pub fn age_cell(obj: &Value, now: jiff::Timestamp) -> Value {
    since_cell(api::meta::creation_timestamp(obj), now)
}

/// `PartialObjectMetadata` for a Table row's `object` (includeObject=Metadata) or metadata-only APIs.
pub fn to_partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The container names and images of a pod template spec, for CONTAINERS/IMAGES wide columns.
pub fn containers_and_images(pod_spec: Option<&Value>) -> (String, String) {
    let containers = pod_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<String> = containers
        .iter()
        .map(|c| {
            c.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let images: Vec<String> = containers
        .iter()
        .map(|c| {
            c.get("image")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect();
    (names.join(","), images.join(","))
}

/// An integer cell (JSON number), 0 when absent.
pub fn int_cell(v: Option<&Value>) -> Value {
    Value::from(v.and_then(Value::as_i64).unwrap_or(0))
}
