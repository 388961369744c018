//! Resource quota: apiserver's `pkg/quota/v1` (resource-list arithmetic) and the usage evaluators
//! of `pkg/quota/v1/evaluator/core`, shared by the ResourceQuota admission plugin (apiserver) and
//! the `resourcequota` controller.
//!
//! * [`ResourceList`] is a `corev1.ResourceList` of [`Quantity`]s keyed by resource name, sorted
//!   (so printing and JSON are in Go's map order); [`add`], [`subtract`], [`mask`],
//!   [`less_than_or_equal`], [`remove_zeros`] are `quota.Add`, `Subtract`, `Mask`,
//!   `LessThanOrEqual`, `RemoveZeros`; [`pretty_print`] is the admission plugin's rendering in
//!   its messages (`pods=1,requests.cpu=500m`).
//! * [`Evaluator`] ([`evaluator`]) knows, for one group-resource, which quota resources it
//!   measures, whether an operation can change usage, which quotas match an object (scopes,
//!   [`scope`]), the pod constraints (`must specify limits.cpu for: …`) and an object's usage
//!   (pods in [`pods`]).
//!
//! Everything works on objects as JSON, as stored. Guarantees: nothing here panics on any input;
//! a quantity that does not parse counts as absent (the API refuses such objects).

pub mod evaluator;
pub mod pods;
pub mod quantity;
pub mod scope;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

pub use evaluator::{Evaluator, Operation};
pub use quantity::{Format, Quantity};

/// `corev1.ResourceList`: quantities by resource name, in name order.
pub type ResourceList = BTreeMap<String, Quantity>;

/// A resource list from JSON (`spec.hard`, `status.used`); entries that do not parse are skipped.
pub fn from_json(v: Option<&Value>) -> ResourceList {
    let Some(map) = v.and_then(Value::as_object) else {
        return ResourceList::new();
    };
    map.iter()
        .filter_map(|(k, v)| {
            let q = match v {
                Value::String(s) => Quantity::parse(s).ok(),
                Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
                _ => None,
            }?;
            Some((k.clone(), q))
        })
        .collect()
}

/// A resource list as JSON (canonical quantity strings).
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, q)| (k.clone(), Value::String(q.to_string())))
            .collect::<Map<String, Value>>(),
    )
}

/// `quota.Add`: every key of either, summed where both have it.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, q) in b {
        let sum = out.get(k).map_or(*q, |have| *have + *q);
        out.insert(k.clone(), sum);
    }
    out
}

/// `quota.Subtract`: `a − b` for every key of either (a key only in `b` is negated).
pub fn subtract(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, q) in b {
        let diff = out.get(k).copied().unwrap_or_default() - *q;
        out.insert(k.clone(), diff);
    }
    out
}

/// `quota.SubtractWithNonNegativeResult`: `a − b` for `a`'s keys, never below zero.
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    a.iter()
        .map(|(k, q)| {
            let diff = match b.get(k) {
                Some(other) => *q - *other,
                None => *q,
            };
            let diff = if diff.is_negative() {
                Quantity::default()
            } else {
                diff
            };
            (k.clone(), diff)
        })
        .collect()
}

/// `quota.Mask`: only the entries named in `names`.
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a str>) -> ResourceList {
    names
        .into_iter()
        .filter_map(|n| list.get(n).map(|q| (n.to_string(), *q)))
        .collect()
}

/// `quota.LessThanOrEqual`: whether every entry of `a` that `b` has is at most `b`'s, and the
/// names of those that are not (sorted).
pub fn less_than_or_equal(a: &ResourceList, b: &ResourceList) -> (bool, Vec<String>) {
    let exceeded: Vec<String> = a
        .iter()
        .filter(|(k, q)| b.get(*k).is_some_and(|limit| *q > limit))
        .map(|(k, _)| k.clone())
        .collect();
    (exceeded.is_empty(), exceeded)
}

/// `quota.RemoveZeros`.
pub fn remove_zeros(list: &ResourceList) -> ResourceList {
    list.iter()
        .filter(|(_, q)| !q.is_zero())
        .map(|(k, q)| (k.clone(), *q))
        .collect()
}

/// `quota.IsNegative`: the names of negative entries.
pub fn negative(list: &ResourceList) -> Vec<String> {
    list.iter()
        .filter(|(_, q)| q.is_negative())
        .map(|(k, _)| k.clone())
        .collect()
}

/// `quota.Equals`: the same keys with equal values.
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len() && a.iter().all(|(k, q)| b.get(k) == Some(q))
}

/// The admission plugin's `prettyPrint`: `name=value` pairs in name order, comma-separated.
pub fn pretty_print(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, q)| format!("{k}={q}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `prettyPrintResourceNames`: sorted, comma-separated.
pub fn pretty_print_names(names: &[String]) -> String {
    let mut names = names.to_vec();
    names.sort();
    names.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(v: Value) -> ResourceList {
        from_json(Some(&v))
    }

    #[test]
    fn arithmetic_is_quotas() {
        let a = list(json!({"cpu": "100m", "memory": "1Gi"}));
        let b = list(json!({"cpu": "200m", "pods": "1"}));
        assert_eq!(
            to_json(&add(&a, &b)),
            json!({"cpu": "300m", "memory": "1Gi", "pods": "1"})
        );
        assert_eq!(
            to_json(&subtract(&a, &b)),
            json!({"cpu": "-100m", "memory": "1Gi", "pods": "-1"})
        );
        assert_eq!(
            to_json(&subtract_non_negative(&a, &b)),
            json!({"cpu": "0", "memory": "1Gi"})
        );
        assert_eq!(to_json(&mask(&a, ["cpu", "x"])), json!({"cpu": "100m"}));
        let (ok, exceeded) = less_than_or_equal(&b, &list(json!({"cpu": "100m", "pods": "1"})));
        assert!(!ok);
        assert_eq!(exceeded, ["cpu"]);
        assert!(less_than_or_equal(&a, &list(json!({"cpu": "1"}))).0);
        assert_eq!(
            pretty_print(&list(json!({"requests.cpu": "1", "pods": 2}))),
            "pods=2,requests.cpu=1"
        );
        assert!(equals(
            &list(json!({"cpu": "1"})),
            &list(json!({"cpu": "1000m"}))
        ));
        assert_eq!(negative(&subtract(&a, &b)), ["cpu", "pods"]);
        assert_eq!(remove_zeros(&list(json!({"a": "0", "b": "1"}))).len(), 1);
    }
}
