//! Objects that do not decode into their type, met in a LIST or a WATCH: each is reported (a
//! WARN line naming it and the reason) and counted. A list skips it and delivers the rest, so one
//! bad object in the store cannot wedge an informer (the reflector would otherwise fail every
//! relist on it and never sync). A watch ends at it, as client-go's decoder error does: the
//! reflector relists, so its cache loses the object rather than keeping a stale version of it.
//!
//! The count is process-wide ([`undecodable_objects`]): the controller manager exposes it as
//! `informer_undecodable_objects_total`. The fast paths are unchanged: a list is decoded item by
//! item only after decoding it whole failed.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Undecodable objects skipped so far by this process.
static UNDECODABLE: AtomicU64 = AtomicU64::new(0);

/// How many undecodable objects lists and watches of this process have skipped.
pub fn undecodable_objects() -> u64 {
    UNDECODABLE.load(Ordering::Relaxed)
}

/// Reports one undecodable object (`namespace/name` when its metadata can be read) and counts it.
pub(crate) fn report(kind: &str, object: Option<&Value>, during: &str, error: &serde_json::Error) {
    UNDECODABLE.fetch_add(1, Ordering::Relaxed);
    let meta = object.and_then(|o| o.get("metadata"));
    let field = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let (namespace, name) = (field("namespace"), field("name"));
    let key = if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    };
    tracing::warn!(kind, object = %key, during, error = %error, "skipping an object that does not decode");
}

/// Decodes the items of a list one by one, skipping (and reporting) those that do not decode.
pub(crate) fn decode_items<K: DeserializeOwned>(kind: &str, items: Vec<Value>) -> Vec<K> {
    items
        .into_iter()
        .filter_map(|item| match K::deserialize(&item) {
            Ok(k) => Some(k),
            Err(e) => {
                report(kind, Some(&item), "list", &e);
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    #[test]
    fn bad_items_are_skipped_and_counted() {
        let before = undecodable_objects();
        let items = vec![
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"name": "poison"}, "spec": {"tolerations": 5}}),
            json!({"metadata": {"name": "b"}}),
        ];
        let pods: Vec<Pod> = decode_items("Pod", items);
        let names: Vec<_> = pods
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert!(undecodable_objects() > before);
    }
}
