//! Helpers over JSON objects' `metadata`, and the apiserver's timestamp formats.
//!
//! Readers return `None`/empty for absent or mistyped fields; writers create `metadata` when absent and
//! do nothing when the object is not a JSON object. None of them panic.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn meta_str<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(key)).and_then(Value::as_str)
}

/// `metadata` as a mutable map, created if absent. `None` only when `obj` is not an object.
pub fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    let m = o
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut()
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name")
}

pub fn generate_name(obj: &Value) -> Option<&str> {
    meta_str(obj, "generateName")
}

pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace")
}

pub fn uid(obj: &Value) -> Option<&str> {
    meta_str(obj, "uid")
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion")
}

pub fn creation_timestamp(obj: &Value) -> Option<&str> {
    meta_str(obj, "creationTimestamp")
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    meta_str(obj, "deletionTimestamp")
}

pub fn deletion_grace_period_seconds(obj: &Value) -> Option<i64> {
    meta(obj)
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
}

pub fn generation(obj: &Value) -> Option<i64> {
    meta(obj)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.labels` (non-string values skipped).
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    string_map(meta(obj).and_then(|m| m.get("labels")))
}

/// `metadata.annotations` (non-string values skipped).
pub fn annotations(obj: &Value) -> BTreeMap<String, String> {
    string_map(meta(obj).and_then(|m| m.get("annotations")))
}

/// A `map[string]string` at an arbitrary JSON value (selectors, nodeSelector).
pub fn as_string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    string_map(v)
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn owner_references(obj: &Value) -> Vec<Value> {
    meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The owner reference with `controller: true`, if any.
pub fn controller_ref(obj: &Value) -> Option<Value> {
    owner_references(obj)
        .into_iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

fn set(obj: &mut Value, key: &str, v: Value) {
    if let Some(m) = metadata_mut(obj) {
        crate::wire::insert_meta_field(m, key, v);
    }
}

pub fn set_name(obj: &mut Value, name: &str) {
    set(obj, "name", Value::String(name.to_string()));
}

pub fn set_namespace(obj: &mut Value, ns: &str) {
    set(obj, "namespace", Value::String(ns.to_string()));
}

pub fn set_uid(obj: &mut Value, uid: &str) {
    set(obj, "uid", Value::String(uid.to_string()));
}

pub fn set_resource_version(obj: &mut Value, rv: &str) {
    set(obj, "resourceVersion", Value::String(rv.to_string()));
}

pub fn set_creation_timestamp(obj: &mut Value, ts: &str) {
    set(obj, "creationTimestamp", Value::String(ts.to_string()));
}

pub fn set_generation(obj: &mut Value, g: i64) {
    set(obj, "generation", Value::from(g));
}

pub fn set_deletion(obj: &mut Value, timestamp: &str, grace_seconds: i64) {
    set(
        obj,
        "deletionTimestamp",
        Value::String(timestamp.to_string()),
    );
    set(
        obj,
        "deletionGracePeriodSeconds",
        Value::from(grace_seconds),
    );
}

pub fn set_finalizers(obj: &mut Value, f: &[String]) {
    if f.is_empty() {
        remove(obj, "finalizers");
    } else {
        set(obj, "finalizers", Value::from(f.to_vec()));
    }
}

/// Removes `metadata.<key>`.
pub fn remove(obj: &mut Value, key: &str) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        // Keeps the other fields' order (the wire order, see `wire`).
        m.shift_remove(key);
    }
}

/// `metav1.Time` text: `YYYY-MM-DDTHH:MM:SSZ` (seconds, UTC).
pub fn format_time(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `metav1.MicroTime` text: `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub fn format_micro_time(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

/// Now as `metav1.Time`.
pub fn now_rfc3339() -> String {
    format_time(jiff::Timestamp::now())
}

/// Now as `metav1.MicroTime`.
pub fn micro_time() -> String {
    format_micro_time(jiff::Timestamp::now())
}

/// Parses any RFC 3339 timestamp with offset (`Z`, `+00:00`, fractional seconds).
pub fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    s.parse::<jiff::Timestamp>().ok()
}

/// Reads a string at a dotted path (`spec.nodeName`) from an object.
pub fn str_at<'a>(obj: &'a Value, path: &str) -> Option<&'a str> {
    value_at(obj, path).and_then(Value::as_str)
}

/// Value at a dotted path.
pub fn value_at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(obj, |v, k| v.get(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn readers_and_writers() {
        let mut o = json!({"kind":"Pod"});
        assert_eq!(name(&o), None);
        set_name(&mut o, "p");
        set_namespace(&mut o, "default");
        set_resource_version(&mut o, "7");
        set_finalizers(&mut o, &["a".to_string()]);
        assert_eq!(name(&o), Some("p"));
        assert_eq!(namespace(&o), Some("default"));
        assert_eq!(resource_version(&o), Some("7"));
        assert_eq!(finalizers(&o), vec!["a".to_string()]);
        set_finalizers(&mut o, &[]);
        assert!(finalizers(&o).is_empty());
        let mut not_obj = json!(3);
        set_name(&mut not_obj, "x");
        assert_eq!(not_obj, json!(3));
        let o = json!({"metadata":{"labels":{"a":"b","n":1}}});
        assert_eq!(labels(&o).len(), 1);
    }

    #[test]
    fn time_formats() {
        let ts = parse_time("2026-12-02T14:53:42+00:00");
        assert!(ts.is_some());
        let ts = ts.unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        assert_eq!(format_time(ts), "2026-12-02T14:53:42Z");
        assert_eq!(format_micro_time(ts), "2026-12-02T14:53:42.000000Z");
        assert_eq!(now_rfc3339().len(), 20);
        assert_eq!(micro_time().len(), 27);
    }
}
