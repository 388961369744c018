//! The bounds of patch application, with kube-apiserver's values, so that no patch can take more
//! than a bounded amount of memory and time.
//!
//! - A JSON patch has at most [`MAX_JSON_PATCH_OPERATIONS`] operations (more: 413, upstream's
//!   `maxJSONPatchOperations` in `endpoints/handlers/patch.go`).
//! - Its `copy` operations together copy at most [`JSON_PATCH_MAX_COPY_BYTES`] (the JSON size of
//!   each copied value is counted before it is copied; over the limit: 422, upstream's
//!   `jsonpatch.AccumulatedCopySizeLimit`, set from `JSONPatchMaxCopyBytes`). Every other
//!   operation adds at most the size of a value from the patch body, itself bounded by the body
//!   limit, so a JSON patch result is bounded by the original + body + copy limit.
//! - A patch result of any type (JSON, merge, strategic merge, apply) must serialise to at most
//!   [`MAX_RESULT_BYTES`] and nest at most [`MAX_RESULT_DEPTH`] levels (413 / 422): the result is
//!   stored and read back, and the store's parser has a recursion limit. The check is one walk of
//!   the result that stops as soon as either bound is passed; nothing is serialised.
//!
//! The sizes are counted as compact JSON (strings without their escapes), as upstream counts
//! the marshalled copy.

use json_patch::jsonptr::Pointer;
use serde_json::Value;

use super::PatchError;

/// Most operations in one JSON patch (upstream `maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Most bytes the `copy` operations of one JSON patch may copy together (upstream
/// `JSONPatchMaxCopyBytes`, 3 MiB by default).
pub const JSON_PATCH_MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Largest patch result (upstream `MaxRequestBodyBytes`, 3 MiB by default: what a create or
/// update body may be).
pub const MAX_RESULT_BYTES: usize = 3 * 1024 * 1024;

/// Deepest nesting of a patch result: what serde_json's recursion limit lets the store read back
/// (128 nested arrays and objects; a scalar at the bottom counts as one more level here).
pub const MAX_RESULT_DEPTH: usize = 129;

/// The compact-JSON size of `v`, or `None` as soon as it exceeds `limit` (the walk stops there,
/// so its cost is bounded by `limit`, not by the size of `v`).
pub fn json_size(v: &Value, limit: usize) -> Option<usize> {
    bounds(v, limit, usize::MAX).map(|(size, _)| size)
}

/// Size and depth of `v`; `None` as soon as either exceeds its limit. Iterative, so deep input
/// cannot overflow the stack.
fn bounds(v: &Value, size_limit: usize, depth_limit: usize) -> Option<(usize, usize)> {
    let mut size = 0usize;
    let mut depth = 0usize;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        depth = depth.max(d);
        size = size.saturating_add(scalar_or_frame_size(v));
        if size > size_limit || depth > depth_limit {
            return None;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(m) => {
                // `"key":` per member.
                let keys: usize = m.keys().map(|k| k.len() + 3).sum();
                size = size.saturating_add(keys);
                stack.extend(m.values().map(|x| (x, d + 1)));
            }
            _ => {}
        }
    }
    Some((size, depth))
}

/// A scalar's size, or a container's brackets and separators.
fn scalar_or_frame_size(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_size(n),
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.len().saturating_sub(1),
        Value::Object(m) => 2 + m.len().saturating_sub(1),
    }
}

fn number_size(n: &serde_json::Number) -> usize {
    fn digits(mut u: u64) -> usize {
        let mut d = 1;
        while u >= 10 {
            u /= 10;
            d += 1;
        }
        d
    }
    if let Some(u) = n.as_u64() {
        digits(u)
    } else if let Some(i) = n.as_i64() {
        1 + digits(i.unsigned_abs())
    } else {
        n.to_string().len()
    }
}

/// Refuses a patch result larger than [`MAX_RESULT_BYTES`] (413) or nested deeper than
/// [`MAX_RESULT_DEPTH`] (422).
pub fn check_result(v: &Value) -> Result<(), PatchError> {
    if bounds(v, MAX_RESULT_BYTES, MAX_RESULT_DEPTH).is_some() {
        return Ok(());
    }
    // Which bound was passed: the depth walk alone stops at the depth limit.
    if bounds(v, usize::MAX, MAX_RESULT_DEPTH).is_none() {
        return Err(too_deep());
    }
    Err(PatchError::TooLarge(format!("limit is {MAX_RESULT_BYTES}")))
}

/// Applies the operations of a JSON patch to `doc` in order, within the bounds of the module
/// docs. `doc` is a copy the caller discards on error, so a failed operation need not be undone.
///
/// Depth is bounded as the patch goes, before anything is cloned deeper: an upper bound of the
/// document's depth is kept (one walk of the original), and each operation that places a value
/// adds its destination's depth to the value's (`add`/`replace`: a walk of a value from the body;
/// `copy`: the walk that counts its bytes; `move`: the bound itself, so moves cost no walk).
pub fn apply_json_patch(
    doc: &mut Value,
    ops: &[json_patch::PatchOperation],
) -> Result<(), PatchError> {
    use json_patch::PatchOperation as Op;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let mut copied = 0usize;
    let mut depth = depth_of(doc);
    for (i, op) in ops.iter().enumerate() {
        let placed = match op {
            Op::Add(add) => Some(depth_of(&add.value)),
            Op::Replace(replace) => Some(depth_of(&replace.value)),
            Op::Copy(copy) => {
                let (total, source_depth) = count_copy(doc, &copy.from, copied)?;
                copied = total;
                Some(source_depth)
            }
            Op::Move(mv) => Some(depth.saturating_sub(mv.from.count())),
            Op::Remove(_) | Op::Test(_) => None,
        };
        if let Some(value_depth) = placed {
            let placed_depth = op.path().count() + value_depth;
            if placed_depth > MAX_RESULT_DEPTH {
                return Err(too_deep());
            }
            depth = depth.max(placed_depth);
        }
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            PatchError::Invalid(format!(
                "the server rejected our request due to an error in our request: {e}"
            ))
        })?;
    }
    Ok(())
}

fn too_deep() -> PatchError {
    PatchError::Invalid(format!(
        "the patched object is nested more than {MAX_RESULT_DEPTH} levels deep"
    ))
}

/// Depth of `v` (a scalar is 1), iterative.
fn depth_of(v: &Value) -> usize {
    bounds(v, usize::MAX, usize::MAX).map_or(usize::MAX, |(_, d)| d)
}

/// Adds the size of the value at `from` to the bytes copied so far and returns the new total
/// with the value's depth; refuses (422, upstream's `AccumulatedCopySizeError` text) once the
/// total passes [`JSON_PATCH_MAX_COPY_BYTES`]. A missing `from` counts nothing: the operation
/// itself then fails with its own error.
fn count_copy(doc: &Value, from: &Pointer, copied: usize) -> Result<(usize, usize), PatchError> {
    let Ok(source) = from.resolve(doc) else {
        return Ok((copied, 0));
    };
    let budget = JSON_PATCH_MAX_COPY_BYTES.saturating_sub(copied);
    match bounds(source, budget, MAX_RESULT_DEPTH) {
        Some((size, depth)) => Ok((copied + size, depth)),
        None if bounds(source, usize::MAX, MAX_RESULT_DEPTH).is_none() => Err(too_deep()),
        None => {
            // The source is within the document's bounds, so this second walk is bounded too.
            let total = json_size(source, usize::MAX).map_or(usize::MAX, |s| copied + s);
            Err(PatchError::Invalid(format!(
                "Unable to complete the copy, the accumulated size increase of copy is {total}, exceeding the limit {JSON_PATCH_MAX_COPY_BYTES}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ops(v: Value) -> json_patch::Patch {
        match serde_json::from_value(v) {
            Ok(p) => p,
            Err(e) => panic!("a valid patch: {e}"),
        }
    }

    #[test]
    fn json_size_is_the_compact_serialisation_length() {
        let v = json!({"a": [1, -20, 3.5, null, true, false], "b": {"c": "dé"}, "e": {}, "f": []});
        let text = serde_json::to_string(&v).unwrap_or_default();
        assert_eq!(json_size(&v, usize::MAX), Some(text.len()));
        assert_eq!(json_size(&v, text.len() - 1), None);
    }

    #[test]
    fn the_copy_bomb_is_refused_with_upstreams_message() {
        let mut list =
            vec![json!({"op": "add", "path": "/metadata/annotations/a", "value": "x".repeat(32)})];
        for i in 0..22 {
            list.push(json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/c{i}")}));
        }
        let mut doc = json!({"metadata": {"name": "p", "annotations": {}}});
        let refused = apply_json_patch(&mut doc, &ops(Value::Array(list)));
        let Err(PatchError::Invalid(msg)) = refused else {
            panic!("refused as invalid: {refused:?}")
        };
        assert!(
            msg.starts_with(
                "Unable to complete the copy, the accumulated size increase of copy is "
            ) && msg.ends_with(", exceeding the limit 3145728"),
            "{msg}"
        );
        // Nothing near the limit was ever built: the document is bounded by the limit.
        assert!(json_size(&doc, 2 * JSON_PATCH_MAX_COPY_BYTES).is_some());
    }

    #[test]
    fn too_many_operations_are_413() {
        let list: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/a", "value": 1}))
            .collect();
        let mut doc = json!({"a": 1});
        let refused = apply_json_patch(&mut doc, &ops(Value::Array(list)));
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err("Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001".to_string())
        );
    }

    #[test]
    fn nesting_built_by_copies_is_refused_before_it_is_cloned() {
        // Each copy puts the chain inside itself: depth doubles while size stays small.
        let mut list = vec![json!({"op": "add", "path": "/a", "value": {"a": {}}})];
        let mut path = "/a".to_string();
        for _ in 0..40 {
            let deepest = format!("{path}/a");
            list.push(json!({"op": "copy", "from": "/a", "path": format!("{deepest}/a")}));
            path = deepest;
        }
        let mut doc = json!({});
        let refused = apply_json_patch(&mut doc, &ops(Value::Array(list)));
        assert!(
            matches!(&refused, Err(PatchError::Invalid(m)) if m.contains("nested more than 129 levels")),
            "{refused:?}"
        );
    }

    #[test]
    fn results_over_the_limits_are_refused() {
        let big = json!({"data": {"a": "x".repeat(MAX_RESULT_BYTES)}});
        assert!(
            matches!(check_result(&big), Err(PatchError::TooLarge(m)) if m == "limit is 3145728")
        );
        let mut deep = json!(1);
        for _ in 0..MAX_RESULT_DEPTH {
            deep = json!([deep]);
        }
        assert!(matches!(check_result(&deep), Err(PatchError::Invalid(_))));
        assert!(check_result(&json!({"metadata": {"name": "ok"}})).is_ok());
    }
}
