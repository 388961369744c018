//! The `TaintNodesByCondition` admission plugin (`plugin/pkg/admission/nodetaint`): every new
//! Node (a create of the node itself, not of a subresource) gets the
//! `node.kubernetes.io/not-ready:NoSchedule` taint unless it already has a taint of that key and
//! effect, so no pod is scheduled to a node before its kubelet reported Ready. The node lifecycle
//! controller removes the taint once the node's `Ready` condition is `True`
//! (`controller::nodelifecycle::no_schedule`). Mutating; updates are not looked at. The taint has
//! no `timeAdded`, as upstream's.

use serde_json::{json, Value};

use super::{Attributes, Operation, Plugin, TAINT_NODES_BY_CONDITION};
use crate::registry::{Forbidden, Objects};

pub use api::taints::TAINT_NOT_READY;

/// The plugin.
pub struct TaintNodesByCondition;

/// Whether `taint` is the taint `key` with `effect` (`Taint.MatchTaint`: key and effect).
fn matches(taint: &Value, key: &str, effect: &str) -> bool {
    let field = |f: &str| taint.get(f).and_then(Value::as_str).unwrap_or("");
    field("key") == key && field("effect") == effect
}

impl Plugin for TaintNodesByCondition {
    fn name(&self) -> &'static str {
        TAINT_NODES_BY_CONDITION
    }

    fn admit(
        &self,
        attrs: &Attributes<'_>,
        node: &mut Value,
        _objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if !attrs.is("", "nodes") || !attrs.subresource.is_empty() {
            return Ok(());
        }
        if attrs.operation != Operation::Create {
            return Ok(());
        }
        let Some(obj) = node.as_object_mut() else {
            return Ok(());
        };
        let spec = obj.entry("spec").or_insert_with(|| json!({}));
        if spec.is_null() {
            *spec = json!({});
        }
        let Some(spec) = spec.as_object_mut() else {
            // Not an object: validation refuses it.
            return Ok(());
        };
        let taints = spec.entry("taints").or_insert_with(|| json!([]));
        if taints.is_null() {
            *taints = json!([]);
        }
        let Some(list) = taints.as_array_mut() else {
            return Ok(());
        };
        if !list
            .iter()
            .any(|t| matches(t, TAINT_NOT_READY, "NoSchedule"))
        {
            list.push(json!({"key": TAINT_NOT_READY, "effect": "NoSchedule"}));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::admission::tests_support::{attrs, Nothing};

    #[test]
    fn a_new_node_gets_the_not_ready_taint_once() {
        let p = TaintNodesByCondition;
        let create = attrs(Operation::Create, "", "nodes", "");
        let mut node = json!({"metadata": {"name": "n1"}});
        p.admit(&create, &mut node, &Nothing).unwrap();
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
        );
        // Already there (with a value): not added again.
        let mut tainted = json!({"spec": {"taints": [
            {"key": "a", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/not-ready", "value": "x", "effect": "NoSchedule"},
        ]}});
        let before = tainted.clone();
        p.admit(&create, &mut tainted, &Nothing).unwrap();
        assert_eq!(tainted, before);
        // The same key with another effect does not count.
        let mut other = json!({"spec": {"taints": [
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        ]}});
        p.admit(&create, &mut other, &Nothing).unwrap();
        assert_eq!(other["spec"]["taints"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn updates_subresources_and_other_kinds_are_left_alone() {
        let p = TaintNodesByCondition;
        for a in [
            attrs(Operation::Update, "", "nodes", ""),
            attrs(Operation::Create, "", "nodes", "status"),
            attrs(Operation::Create, "", "pods", ""),
        ] {
            let mut obj = json!({"spec": {}});
            p.admit(&a, &mut obj, &Nothing).unwrap();
            assert_eq!(obj, json!({"spec": {}}));
        }
    }
}
