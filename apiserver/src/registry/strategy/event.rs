//! Events, served both as core `v1` and as `events.k8s.io/v1` over one storage.
//!
//! Storage form is the core `v1` Event; [`to_storage`](super::Strategy::to_storage) and
//! [`from_storage`](super::Strategy::from_storage) of the `events.k8s.io/v1` strategy convert with the
//! field mapping of spec §13 (`note ↔ message`, `regarding ↔ involvedObject`, `reportingController ↔
//! reportingComponent`, `deprecatedSource ↔ source`, `deprecated{First,Last}Timestamp ↔
//! {first,last}Timestamp`, `deprecatedCount ↔ count`). Events may be created by PUT.

use super::common::field_text;
use super::table::{column, name_column, since_cell};
use super::Strategy;
use api::validation::FieldError;
use serde_json::{json, Map, Value};

pub struct EventStrategy {
    /// true for `events.k8s.io/v1`.
    pub new_api: bool,
}

/// (events.k8s.io/v1 name, core v1 name) of renamed fields.
const RENAMES: &[(&str, &str)] = &[
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: Value, to_core: bool, api_version: &str) -> Value {
    let Value::Object(mut m) = obj else {
        return obj;
    };
    let mut out = Map::new();
    for (new_name, core_name) in RENAMES {
        let (from, to) = if to_core {
            (*new_name, *core_name)
        } else {
            (*core_name, *new_name)
        };
        if let Some(v) = m.remove(from) {
            out.insert(to.to_string(), v);
        }
    }
    for (k, v) in m {
        out.entry(k).or_insert(v);
    }
    out.insert("apiVersion".to_string(), json!(api_version));
    out.insert("kind".to_string(), json!("Event"));
    Value::Object(out)
}

/// events.k8s.io/v1 → core v1 (storage form).
pub fn events_v1_to_core(obj: Value) -> Value {
    rename(obj, true, "v1")
}

/// core v1 (storage form) → events.k8s.io/v1.
pub fn core_to_events_v1(obj: Value) -> Value {
    rename(obj, false, "events.k8s.io/v1")
}

/// A field of the involved object in either form.
fn involved(obj: &Value, key: &str) -> String {
    let o = obj.get("involvedObject").or_else(|| obj.get("regarding"));
    o.map(|o| field_text(o, key)).unwrap_or_default()
}

fn either(obj: &Value, core: &str, new: &str) -> String {
    let a = field_text(obj, core);
    if a.is_empty() {
        field_text(obj, new)
    } else {
        a
    }
}

impl Strategy for EventStrategy {
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(t) = obj.get("type") {
            let ok = ["Normal", "Warning"];
            if !t.as_str().is_some_and(|s| s.is_empty() || ok.contains(&s)) {
                errs.push(FieldError::not_supported("type", t, &ok));
            }
        }
        if self.new_api {
            // Validated in the events.k8s.io/v1 form (before to_storage).
            for f in [
                "eventTime",
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
            ] {
                if field_text(obj, f).is_empty() && field_text(obj, events_core_name(f)).is_empty()
                {
                    errs.push(FieldError::required(f, ""));
                }
            }
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            column("Last Seen", "string", "", "The time at which the most recent occurrence of this event was recorded.", 0),
            column("Type", "string", "", "Type of this event (Normal, Warning), new types could be added in the future", 0),
            column("Reason", "string", "", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0),
            column("Object", "string", "", "The object that this event is about.", 0),
            column("Subobject", "string", "", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].", 1),
            column("Source", "string", "", "The component reporting this event. Should be a short machine understandable string.", 1),
            column("Message", "string", "", "A human-readable description of the status of this operation.", 0),
            column("First Seen", "string", "", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1),
            column("Count", "string", "", "The number of times this event has occurred.", 1),
            {
                let mut n = name_column();
                if let Some(m) = n.as_object_mut() {
                    m.insert("priority".to_string(), json!(1));
                }
                n
            },
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let first_ts = either(obj, "firstTimestamp", "deprecatedFirstTimestamp");
        let first = if first_ts.is_empty() {
            since_cell(obj.get("eventTime").and_then(Value::as_str), now)
        } else {
            since_cell(Some(&first_ts), now)
        };
        let last_ts = either(obj, "lastTimestamp", "deprecatedLastTimestamp");
        let mut last = if last_ts.is_empty() {
            first.clone()
        } else {
            since_cell(Some(&last_ts), now)
        };
        let mut count = obj
            .get("count")
            .or_else(|| obj.get("deprecatedCount"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
            last = since_cell(series.get("lastObservedTime").and_then(Value::as_str), now);
            count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
        } else if count == 0 {
            count = 1;
        }
        let kind = involved(obj, "kind").to_lowercase();
        let name = involved(obj, "name");
        let target = if name.is_empty() {
            kind
        } else {
            format!("{kind}/{name}")
        };
        let source = obj.get("source").or_else(|| obj.get("deprecatedSource"));
        let component = source
            .map(|s| field_text(s, "component"))
            .filter(|s| !s.is_empty());
        let host = source
            .map(|s| field_text(s, "host"))
            .filter(|s| !s.is_empty());
        let component =
            component.unwrap_or_else(|| either(obj, "reportingComponent", "reportingController"));
        let instance = host.unwrap_or_else(|| field_text(obj, "reportingInstance"));
        let source_text = if instance.is_empty() {
            component
        } else {
            format!("{component}, {instance}")
        };
        vec![
            last,
            Value::from(field_text(obj, "type")),
            Value::from(field_text(obj, "reason")),
            Value::from(target),
            Value::from(involved(obj, "fieldPath")),
            Value::from(source_text),
            Value::from(either(obj, "message", "note").trim().to_string()),
            first,
            Value::from(count),
            Value::from(api::meta::name(obj).unwrap_or("")),
        ]
    }
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        if let Some(k) = field
            .strip_prefix("involvedObject.")
            .or_else(|| field.strip_prefix("regarding."))
        {
            return match k {
                "kind" | "namespace" | "name" | "uid" | "apiVersion" | "resourceVersion"
                | "fieldPath" => Some(involved(obj, k)),
                _ => None,
            };
        }
        match field {
            "reason" | "type" | "reportingInstance" | "action" => Some(field_text(obj, field)),
            "reportingComponent" | "reportingController" => {
                Some(either(obj, "reportingComponent", "reportingController"))
            }
            "source" | "deprecatedSource" => Some(
                obj.get("source")
                    .or_else(|| obj.get("deprecatedSource"))
                    .map(|s| field_text(s, "component"))
                    .unwrap_or_default(),
            ),
            _ => None,
        }
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn to_storage(&self, obj: Value) -> Value {
        if self.new_api {
            events_v1_to_core(obj)
        } else {
            obj
        }
    }
    fn from_storage(&self, obj: Value) -> Value {
        if self.new_api {
            core_to_events_v1(obj)
        } else {
            obj
        }
    }
}

fn events_core_name(f: &str) -> &str {
    RENAMES
        .iter()
        .find(|(n, _)| *n == f)
        .map(|(_, c)| *c)
        .unwrap_or(f)
}
