//! Strategic merge patch (apimachinery `strategicpatch`), driven by [`schema`](super::schema).
//!
//! Maps merge recursively and `null` deletes a key. Lists follow the field's strategy: keyed lists
//! merge element-wise by their merge key, primitive sets take the union, all other lists are replaced.
//! Directives: `$patch: replace|merge|delete` on maps and inside list elements, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`. Directives are consumed, never
//! copied into the result.

use super::schema::{same_key, ListKind, PatchKind};
use super::PatchError;
use api::ResourceInfo;
use serde_json::{Map, Value};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// Applies `patch` to `original` with the schema of `kind`.
pub fn strategic_merge(
    kind: &ResourceInfo,
    original: &Value,
    patch: &Value,
) -> Result<Value, PatchError> {
    let kind = &PatchKind::from(kind);
    let Some(p) = patch.as_object() else {
        return Err(PatchError::Malformed(
            "error decoding patch: a strategic merge patch must be a JSON object".into(),
        ));
    };
    let orig = original.as_object().cloned().unwrap_or_default();
    let mut path = Vec::new();
    let merged = merge_map(kind, orig, p, &mut path)?;
    Ok(Value::Object(merged))
}

/// Merges `patch` into `original` (used by server-side apply too, with applied config as patch).
pub(crate) fn merge_map(
    kind: &PatchKind<'_>,
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Map<String, Value>, PatchError> {
    match patch.get(PATCH) {
        None => {}
        Some(Value::String(d)) if d == "replace" => return strip_directives(kind, patch, path),
        Some(Value::String(d)) if d == "delete" => return Ok(Map::new()),
        Some(Value::String(d)) if d == "merge" => {}
        Some(other) => {
            return Err(PatchError::Malformed(format!(
                "Unknown patch type: {other}"
            )))
        }
    }
    if let Some(keys) = patch.get(RETAIN_KEYS) {
        let Some(keys) = keys.as_array() else {
            return Err(PatchError::Malformed(
                "$retainKeys must be a list of strings".into(),
            ));
        };
        let keep: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        original.retain(|k, _| keep.contains(&k.as_str()));
    }
    // $deleteFromPrimitiveList first, so that additions in the same patch survive.
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(DELETE_FROM) {
            let Some(remove) = v.as_array() else {
                return Err(PatchError::Malformed(format!("{k} must be a list")));
            };
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|x| !remove.contains(x));
            }
        }
    }
    for (k, v) in patch {
        if k.starts_with('$') {
            continue;
        }
        path.push(k.clone());
        let result = merge_field(kind, original.remove(k), v, path);
        path.pop();
        if let Some(nv) = result? {
            original.insert(k.clone(), nv);
        }
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(SET_ORDER) {
            path.push(field.to_string());
            let lk = kind.list_kind(&as_strs(path));
            path.pop();
            if let (Some(Value::Array(list)), Some(order)) = (original.get_mut(field), v.as_array())
            {
                reorder(list, order, lk);
            }
        }
    }
    Ok(original)
}

fn as_strs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}

/// The merged value of one field, or None to delete it.
fn merge_field(
    kind: &PatchKind<'_>,
    orig: Option<Value>,
    patch: &Value,
    path: &mut Vec<String>,
) -> Result<Option<Value>, PatchError> {
    match (orig, patch) {
        (_, Value::Null) => Ok(None),
        (Some(Value::Object(o)), Value::Object(p)) => {
            if p.get(PATCH).and_then(Value::as_str) == Some("delete") {
                return Ok(None);
            }
            Ok(Some(Value::Object(merge_map(kind, o, p, path)?)))
        }
        (Some(Value::Array(o)), Value::Array(p)) => {
            Ok(Some(Value::Array(merge_list(kind, o, p, path)?)))
        }
        (_, Value::Object(p)) => {
            if p.get(PATCH).and_then(Value::as_str) == Some("delete") {
                return Ok(None);
            }
            Ok(Some(Value::Object(merge_map(kind, Map::new(), p, path)?)))
        }
        (_, Value::Array(p)) => Ok(Some(Value::Array(merge_list(kind, Vec::new(), p, path)?))),
        (_, scalar) => Ok(Some(scalar.clone())),
    }
}

/// A patch map with every directive consumed (for `$patch: replace` and new keys).
fn strip_directives(
    kind: &PatchKind<'_>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Map<String, Value>, PatchError> {
    let mut p = patch.clone();
    p.remove(PATCH);
    merge_map(kind, Map::new(), &p, path)
}

fn merge_list(
    kind: &PatchKind<'_>,
    original: Vec<Value>,
    patch: &[Value],
    path: &mut Vec<String>,
) -> Result<Vec<Value>, PatchError> {
    let lk = kind.list_kind(&as_strs(path));
    // `{"$patch": "replace"}` as an element replaces the whole list with the other elements.
    let replace = patch.iter().any(|e| {
        e.get(PATCH).and_then(Value::as_str) == Some("replace")
            && e.as_object().is_some_and(|m| m.len() == 1)
    });
    if replace {
        let rest: Vec<Value> = patch
            .iter()
            .filter(|e| !(e.get(PATCH).is_some() && e.as_object().is_some_and(|m| m.len() == 1)))
            .cloned()
            .collect();
        return clean_elements(kind, &rest, path);
    }
    match lk {
        ListKind::Atomic => clean_elements(kind, patch, path),
        ListKind::Set => {
            let mut out = original;
            for e in patch {
                if e.is_object() || e.is_array() {
                    return Err(PatchError::Malformed(format!(
                        "unable to find api field in struct for the primitive list {}",
                        path.join(".")
                    )));
                }
                if !out.contains(e) {
                    out.push(e.clone());
                }
            }
            Ok(out)
        }
        ListKind::Keyed(keys) => {
            let mut out = original;
            for e in patch {
                let Some(em) = e.as_object() else {
                    // A scalar in a keyed list: upstream treats the list as replaced.
                    return clean_elements(kind, patch, path);
                };
                if !keys.iter().any(|k| em.contains_key(k.as_ref())) {
                    return Err(PatchError::Malformed(format!(
                        "map: {} does not contain declared merge key: {}",
                        Value::Object(em.clone()),
                        keys.first().map(|k| k.as_ref()).unwrap_or("")
                    )));
                }
                let pos = out.iter().position(|o| same_key(&keys, e, o));
                match em.get(PATCH).and_then(Value::as_str) {
                    Some("delete") => {
                        out.retain(|o| !same_key(&keys, e, o));
                    }
                    Some("replace") => {
                        let clean = strip_directives(kind, em, path)?;
                        match pos {
                            Some(i) => out[i] = Value::Object(clean),
                            None => out.push(Value::Object(clean)),
                        }
                    }
                    _ => {
                        let base = match pos {
                            Some(i) => out[i].as_object().cloned().unwrap_or_default(),
                            None => Map::new(),
                        };
                        let merged = Value::Object(merge_map(kind, base, em, path)?);
                        match pos {
                            Some(i) => out[i] = merged,
                            None => out.push(merged),
                        }
                    }
                }
            }
            Ok(out)
        }
    }
}

/// Elements of a replaced list, with directives consumed inside maps.
fn clean_elements(
    kind: &PatchKind<'_>,
    elems: &[Value],
    path: &mut Vec<String>,
) -> Result<Vec<Value>, PatchError> {
    elems
        .iter()
        .filter(|e| e.get(PATCH).and_then(Value::as_str) != Some("delete"))
        .map(|e| match e {
            Value::Object(m) => merge_map(kind, Map::new(), m, path).map(Value::Object),
            other => Ok(other.clone()),
        })
        .collect()
}

/// `$setElementOrder`: listed elements first, in the given order; the rest keep their relative order.
fn reorder(list: &mut Vec<Value>, order: &[Value], lk: ListKind) {
    let lk = &lk;
    let rank = |e: &Value| -> Option<usize> {
        order.iter().position(|o| match lk {
            ListKind::Keyed(keys) => same_key(keys, o, e),
            _ => o == e,
        })
    };
    let mut ranked: Vec<(usize, Value)> = Vec::new();
    let mut rest = Vec::new();
    for e in list.drain(..) {
        match rank(&e) {
            Some(r) => ranked.push((r, e)),
            None => rest.push(e),
        }
    }
    ranked.sort_by_key(|(r, _)| *r);
    list.extend(ranked.into_iter().map(|(_, e)| e));
    list.extend(rest);
}
