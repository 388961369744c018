//! Objects as the watch cache keeps them: every map and array of the JSON tree at exactly its
//! length.
//!
//! A tree that a parser or a mutation built grows its maps and arrays by doubling, so up to half
//! of each one's slots are empty; the cache keeps its objects for as long as they exist, and with
//! `serde_json`'s order-preserving map (a 104-byte slot per entry plus a hash index) that slack
//! was a quarter of a pod's decoded size (issue 17: 48 KB → 36 KB for a running pod). Rebuilding
//! the tree once, when an object enters the cache, moves every string and number without copying
//! it and gives each map and array an allocation of its exact length.
//!
//! Guarantees: the result equals the input, keys in the same order. The top-level `metadata` map
//! keeps one spare slot, for the `resourceVersion` the cache sets on every object it stores.

use serde_json::{Map, Value};

/// `v` with every map and array at its exact length (see the module docs).
pub(super) fn compact(v: Value) -> Value {
    match v {
        Value::Object(top) => {
            let mut out = Map::with_capacity(top.len());
            for (k, v) in top {
                let v = match v {
                    Value::Object(meta) if k == "metadata" => Value::Object(compact_map(meta, 1)),
                    v => compact(v),
                };
                out.insert(k, v);
            }
            Value::Object(out)
        }
        v => compact_nested(v),
    }
}

/// Below the top level: no spare slots.
fn compact_nested(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(compact_map(m, 0)),
        Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            out.extend(a.into_iter().map(compact_nested));
            Value::Array(out)
        }
        v => v,
    }
}

/// `m` rebuilt with room for exactly `spare` more entries.
fn compact_map(m: Map<String, Value>, spare: usize) -> Map<String, Value> {
    if m.is_empty() && spare == 0 {
        // An empty map owns no allocation (most managedFields leaves are `{}`).
        return m;
    }
    let mut out = Map::with_capacity(m.len() + spare);
    for (k, v) in m {
        out.insert(k, compact_nested(v));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::compact;

    #[test]
    fn a_compacted_object_is_equal_and_in_the_same_order() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"b": "1", "a": "2"},
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": []}], "priority": 0},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let got = compact(pod.clone());
        assert_eq!(got, pod);
        assert_eq!(
            serde_json::to_string(&got).unwrap(),
            serde_json::to_string(&pod).unwrap(),
            "keys keep their order"
        );
    }

    #[test]
    fn scalars_and_arrays_at_the_top_are_kept() {
        for v in [
            json!(null),
            json!(1),
            json!("s"),
            json!([{"b": 1, "a": [2, {}]}]),
        ] {
            assert_eq!(compact(v.clone()), v);
        }
    }

    #[test]
    fn a_resource_version_set_after_compaction_goes_to_its_place() {
        let mut obj = compact(json!({"metadata": {"name": "n", "uid": "u"}, "spec": {}}));
        api::wire::set_resource_version(&mut obj, "7".into());
        assert_eq!(
            serde_json::to_string(&obj["metadata"]).unwrap(),
            r#"{"name":"n","uid":"u","resourceVersion":"7"}"#
        );
    }
}
