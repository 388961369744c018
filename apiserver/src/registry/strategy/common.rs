//! Rules shared by every kind: the spec/status split, generation tracking, metadata field selectors,
//! and the generic strategy for kinds without rules of their own.

use super::table::{age_cell, column, name_column};
use super::Strategy;
use api::validation::{self, FieldError, NameValidator};
use api::ResourceInfo;
use serde_json::{Map, Value};

/// Whether `spec` differs between the two objects (deep compare; absent = null).
pub fn spec_changed(new: &Value, old: &Value) -> bool {
    new.get("spec") != old.get("spec")
}

/// `metadata.name` / `metadata.namespace` values for field selectors.
pub fn meta_field_value(info: &ResourceInfo, obj: &Value, field: &str) -> Option<String> {
    match field {
        "metadata.name" => Some(api::meta::name(obj).unwrap_or("").to_string()),
        "metadata.namespace" if info.namespaced => {
            Some(api::meta::namespace(obj).unwrap_or("").to_string())
        }
        _ => None,
    }
}

/// String at a dotted path, `""` when absent; non-strings render as JSON text (booleans, numbers).
pub fn field_text(obj: &Value, path: &str) -> String {
    match api::meta::value_at(obj, path) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

/// Sets `obj[key] = value` when `obj` is an object.
pub fn set_field(obj: &mut Value, key: &str, value: Value) {
    if let Some(o) = obj.as_object_mut() {
        o.insert(key.to_string(), value);
    }
}

/// The object map at `obj[key]`, created (or replaced when mistyped) if needed.
pub fn object_at<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    let v = o
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut()
}

/// Inserts `key: value` into `map` when the key is absent or null.
pub fn default_field(map: &mut Map<String, Value>, key: &str, value: Value) {
    match map.get(key) {
        None | Some(Value::Null) => {
            map.insert(key.to_string(), value);
        }
        Some(_) => {}
    }
}

/// Defaults `status.phase` to `phase` (the status made if absent), as the scheme's defaults of
/// kinds whose status is a value, not a pointer, in Go (`SetDefaults_NamespaceStatus`, ...).
pub fn default_status_phase(obj: &mut Value, phase: &str) {
    let Some(o) = obj.as_object_mut() else { return };
    let status = o
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(s) = status.as_object_mut() {
        default_field(s, "phase", Value::String(phase.to_string()));
    }
}

/// `ValidateNonnegativeField` of the integer at `key` of `map` (absent = nothing to check):
/// `<path>: Invalid value: -1: must be greater than or equal to 0`.
pub fn validate_nonnegative(
    map: Option<&Value>,
    key: &str,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(v) = map.and_then(|m| m.get(key)).filter(|v| !v.is_null()) {
        if v.as_i64().is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid_value(
                path,
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// `apiequality.Semantic.DeepEqual` on the JSON form: absent, null and empty lists compare equal
/// (nil and empty slices are equal there); everything else must match exactly.
pub fn semantically_equal(a: Option<&Value>, b: Option<&Value>) -> bool {
    fn blank(v: Option<&Value>) -> bool {
        match v {
            None | Some(Value::Null) => true,
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        }
    }
    match (a, b) {
        _ if blank(a) && blank(b) => true,
        (Some(Value::Object(x)), Some(Value::Object(y))) => x
            .keys()
            .chain(y.keys())
            .all(|k| semantically_equal(x.get(k), y.get(k))),
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| semantically_equal(Some(p), Some(q)))
        }
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// Update-time handling: keep `old.status` (when the kind splits status), recompute generation.
pub fn prepare_update_common(
    new: &mut Value,
    old: &Value,
    has_status: bool,
    track_generation: bool,
) {
    if has_status {
        match old.get("status") {
            Some(st) => set_field(new, "status", st.clone()),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
    if track_generation {
        let old_gen = api::meta::generation(old).unwrap_or(1);
        let g = if spec_changed(new, old) {
            old_gen + 1
        } else {
            old_gen
        };
        api::meta::set_generation(new, g);
    } else if let Some(g) = api::meta::generation(old) {
        api::meta::set_generation(new, g);
    } else {
        api::meta::remove(new, "generation");
    }
}

/// `/status` handling: everything but `status` from `old` (metadata too, except resourceVersion,
/// which the generic flow checks for optimistic concurrency, and managedFields, which the
/// managed-fields step carries over from `old`: a subresource write never sets them).
pub fn prepare_status_common(new: &mut Value, old: &Value) {
    let status = new.as_object_mut().and_then(|o| o.remove("status"));
    let rv = api::meta::resource_version(new).map(str::to_string);
    let mut body = into_map(Some(std::mem::take(new)));
    // `old` without its status (never copied: it is replaced), taking the body's equal parts
    // (a writer usually sends back the spec it read) instead of copying them.
    let mut merged = match old.as_object() {
        Some(o) => {
            let mut merged = fields_of(&mut body, o, &["status", "metadata"], 1);
            if let Some(meta) = o.get("metadata") {
                let mine = body.remove("metadata");
                let meta = match meta {
                    Value::Object(meta) => {
                        Value::Object(fields_of(&mut into_map(mine), meta, &["managedFields"], 0))
                    }
                    other => equal_or_copy(mine, other, 1),
                };
                merged.insert("metadata".to_string(), meta);
            }
            Value::Object(merged)
        }
        None => old.clone(),
    };
    if let Some(st) = status {
        set_field(&mut merged, "status", st);
    }
    match rv {
        Some(rv) => api::meta::set_resource_version(&mut merged, &rv),
        None => api::meta::remove(&mut merged, "resourceVersion"),
    }
    *new = merged;
}

fn into_map(v: Option<Value>) -> Map<String, Value> {
    match v {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// `old`'s fields but `except`, each taken out of `mine` when equal (see [`equal_or_copy`]).
fn fields_of(
    mine: &mut Map<String, Value>,
    old: &Map<String, Value>,
    except: &[&str],
    depth: usize,
) -> Map<String, Value> {
    old.iter()
        .filter(|(k, _)| !except.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), equal_or_copy(mine.remove(k), v, depth)))
        .collect()
}

/// `old`: `mine` itself if equal to it, else a copy of `old` made of `mine`'s equal parts (down to
/// `depth` levels of objects) and copies of the rest.
fn equal_or_copy(mine: Option<Value>, old: &Value, depth: usize) -> Value {
    match (mine, old) {
        (Some(m), _) if m == *old => m,
        (Some(Value::Object(mut m)), Value::Object(o)) if depth > 0 => {
            Value::Object(fields_of(&mut m, o, &[], depth - 1))
        }
        _ => old.clone(),
    }
}

/// Metadata validation for a create.
pub fn validate_meta(info: &ResourceInfo, obj: &Value, names: NameValidator) -> Vec<FieldError> {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    validation::validate_object_meta(meta, info.namespaced, names)
}

/// Metadata validation for an update: create rules plus immutability of name, namespace, uid and
/// creationTimestamp, and no new finalizers while being deleted.
pub fn validate_meta_update(
    info: &ResourceInfo,
    new: &Value,
    old: &Value,
    names: NameValidator,
) -> Vec<FieldError> {
    let mut errs = validate_meta(info, new, names);
    for (field, label) in [
        ("name", "metadata.name"),
        ("namespace", "metadata.namespace"),
        ("uid", "metadata.uid"),
    ] {
        let a = new
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or("");
        let b = old
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or("");
        if !a.is_empty() && a != b {
            errs.push(FieldError::invalid(label, a, "field is immutable"));
        }
    }
    if api::meta::deletion_timestamp(old).is_some() {
        let before = api::meta::finalizers(old);
        let added: Vec<String> = api::meta::finalizers(new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!("no new finalizers can be added if the object is being deleted, found new finalizers {}", go_list(&added)),
            ));
        }
    }
    errs
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
pub fn go_list(items: &[String]) -> String {
    let q: Vec<String> = items.iter().map(|s| validation::go_quote(s)).collect();
    format!("[{}]", q.join(" "))
}

/// The default table (name + age) for kinds without a printer.
pub struct DefaultTable;

impl DefaultTable {
    pub fn columns() -> Vec<Value> {
        vec![
            name_column(),
            column("Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0),
        ]
    }

    pub fn cells(obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            age_cell(obj, now),
        ]
    }
}

/// The strategy of a kind with no rules of its own: object-meta validation, the NAME/AGE table
/// (custom resources without a schema, resources registered at run time).
pub struct GenericStrategy;

impl Strategy for GenericStrategy {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_write_keeps_everything_but_status_from_the_stored_object() {
        let old = json!({
            "metadata": {"name": "p", "resourceVersion": "5", "labels": {"a": "1"}, "managedFields": [{"manager": "m"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Pending"},
        });
        for body in [
            // What a kubelet sends: the object it read (no managedFields), a new status.
            json!({"metadata": {"name": "p", "resourceVersion": "5", "labels": {"a": "1"}},
                   "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
                   "status": {"phase": "Running"}}),
            // Other metadata and spec are ignored.
            json!({"metadata": {"name": "p", "resourceVersion": "5", "labels": {"b": "2"}},
                   "spec": {"nodeName": "elsewhere"}, "extra": 1,
                   "status": {"phase": "Running"}}),
            json!({"metadata": {"name": "p", "resourceVersion": "5"}, "spec": 7, "status": {"phase": "Running"}}),
        ] {
            let mut new = body;
            prepare_status_common(&mut new, &old);
            let mut want = old.clone();
            want["status"] = json!({"phase": "Running"});
            want["metadata"]
                .as_object_mut()
                .map(|m| m.remove("managedFields"));
            assert_eq!(new, want);
        }
        // No resourceVersion in the body: none in the result (no precondition).
        let mut new = json!({"status": {}});
        prepare_status_common(&mut new, &old);
        assert_eq!(new["metadata"].get("resourceVersion"), None);
        assert_eq!(new["spec"], old["spec"]);
    }
}
