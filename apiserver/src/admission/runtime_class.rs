//! The `RuntimeClass` admission plugin (`plugin/pkg/admission/runtimeclass`): a new pod naming a
//! `spec.runtimeClassName` takes the class's `overhead.podFixed` as its `spec.overhead` and the
//! class's `scheduling` (node selector merged into the pod's, tolerations added); a class that does
//! not exist refuses the pod (`pod rejected: RuntimeClass "x" not found`), as does a pod whose
//! own overhead differs from its class's or whose node selector conflicts with it. The validating
//! phase refuses a pod whose overhead does not match its class (or that sets one without a class
//! defining one), so a mutating webhook cannot slip one in.
//!
//! Only pod creates are looked at (class, overhead and scheduling fields are immutable after).
//! Overheads compare as quantities (`100m` equals `0.1`). Tolerations already present (equal
//! as objects) are not added again.

use serde_json::{Map, Value};

use super::{Attributes, Operation, Plugin, RUNTIME_CLASS};
use crate::registry::{Forbidden, Objects};

/// The plugin.
pub struct RuntimeClass;

fn applies(attrs: &Attributes<'_>) -> bool {
    attrs.is("", "pods") && attrs.subresource.is_empty() && attrs.operation == Operation::Create
}

/// The class the pod names: `Ok(None)` without one.
fn runtime_class(
    pod: &Value,
    objects: &dyn Objects,
) -> Result<Option<std::sync::Arc<Value>>, Forbidden> {
    let Some(name) = pod
        .pointer("/spec/runtimeClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        return Ok(None);
    };
    objects
        .get("node.k8s.io", "runtimeclasses", None, name)
        .map(Some)
        .ok_or_else(|| Forbidden(format!("pod rejected: RuntimeClass \"{name}\" not found")))
}

/// Whether two resource lists hold the same quantities.
fn same_quantities(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let amount = |v: &Value| {
        v.as_str()
            .and_then(|s| api::quantity::Amount::parse(s).ok())
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| {
            b.get(k)
                .is_some_and(|w| amount(v).is_some() && amount(v) == amount(w))
        })
}

const MISMATCH: &str = "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead";

fn class_overhead(class: Option<&Value>) -> Option<&Value> {
    class
        .and_then(|c| c.pointer("/overhead/podFixed"))
        .filter(|o| !o.is_null())
}

fn pod_overhead(pod: &Value) -> Option<&Value> {
    pod.pointer("/spec/overhead").filter(|o| !o.is_null())
}

/// `setScheduling`: the class's node selector and tolerations onto the pod's spec.
fn set_scheduling(spec: &mut Map<String, Value>, scheduling: &Value) -> Result<(), Forbidden> {
    if let Some(selector) = scheduling.get("nodeSelector").and_then(Value::as_object) {
        let pod_selector = spec
            .entry("nodeSelector")
            .or_insert_with(|| Value::Object(Map::new()));
        if pod_selector.is_null() {
            *pod_selector = Value::Object(Map::new());
        }
        if let Some(pod_selector) = pod_selector.as_object_mut() {
            for (key, class_value) in selector {
                let class_value = class_value.as_str().unwrap_or("");
                if let Some(pod_value) = pod_selector.get(key).and_then(Value::as_str) {
                    if pod_value != class_value {
                        return Err(Forbidden(format!(
                            "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {class_value}; pod.spec.nodeSelector[{key}] = {pod_value}"
                        )));
                    }
                }
                pod_selector.insert(key.clone(), Value::String(class_value.to_string()));
            }
        }
    }
    if let Some(tolerations) = scheduling.get("tolerations").and_then(Value::as_array) {
        let pod_tolerations = spec
            .entry("tolerations")
            .or_insert_with(|| Value::Array(Vec::new()));
        if pod_tolerations.is_null() {
            *pod_tolerations = Value::Array(Vec::new());
        }
        if let Some(list) = pod_tolerations.as_array_mut() {
            for t in tolerations {
                if !list.contains(t) {
                    list.push(t.clone());
                }
            }
        }
    }
    Ok(())
}

impl Plugin for RuntimeClass {
    fn name(&self) -> &'static str {
        RUNTIME_CLASS
    }

    fn admit(
        &self,
        attrs: &Attributes<'_>,
        pod: &mut Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if !applies(attrs) {
            return Ok(());
        }
        let Some(class) = runtime_class(pod, objects)? else {
            return Ok(());
        };
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        if let Some(overhead) = class_overhead(Some(&class)) {
            match spec.get("overhead").filter(|o| !o.is_null()) {
                Some(own) if !same_quantities(own, overhead) => {
                    return Err(Forbidden(MISMATCH.into()))
                }
                _ => {
                    spec.insert("overhead".into(), overhead.clone());
                }
            }
        }
        match class.get("scheduling").filter(|s| !s.is_null()) {
            Some(scheduling) => set_scheduling(spec, scheduling),
            None => Ok(()),
        }
    }

    fn validate(
        &self,
        attrs: &Attributes<'_>,
        pod: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if !applies(attrs) {
            return Ok(());
        }
        let class = runtime_class(pod, objects)?;
        match (class_overhead(class.as_deref()), pod_overhead(pod)) {
            (Some(want), Some(own)) if same_quantities(want, own) => Ok(()),
            (Some(_), _) => Err(Forbidden(MISMATCH.into())),
            (None, Some(_)) => Err(Forbidden(
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
                    .into(),
            )),
            (None, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    struct Classes(Vec<Value>);

    impl Objects for Classes {
        fn list(&self, _g: &str, _p: &str) -> Vec<Arc<Value>> {
            Vec::new()
        }
        fn get(&self, g: &str, p: &str, _ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
            (g == "node.k8s.io" && p == "runtimeclasses")
                .then(|| self.0.iter().find(|c| api::meta::name(c) == Some(name)))
                .flatten()
                .map(|c| Arc::new(c.clone()))
        }
    }

    fn attrs() -> Attributes<'static> {
        Attributes {
            operation: Operation::Create,
            group: "",
            resource: "pods",
            namespace: Some("ns"),
            old: None,
            subresource: "",
            warnings: None,
            audit: None,
            user: None,
            authorizes: false,
        }
    }

    fn classes() -> Classes {
        Classes(vec![json!({
            "metadata": {"name": "kata"}, "handler": "kata",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
            "scheduling": {"nodeSelector": {"runtime": "kata"},
                "tolerations": [{"key": "kata", "operator": "Exists", "effect": "NoSchedule"}]},
        })])
    }

    #[test]
    fn a_pod_takes_its_classes_overhead_and_scheduling() {
        let mut pod = json!({"spec": {"runtimeClassName": "kata", "nodeSelector": {"zone": "a"},
            "containers": [{"name": "c"}]}});
        assert_eq!(RuntimeClass.admit(&attrs(), &mut pod, &classes()), Ok(()));
        assert_eq!(
            pod["spec"]["overhead"],
            json!({"cpu": "250m", "memory": "120Mi"})
        );
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"zone": "a", "runtime": "kata"})
        );
        assert_eq!(pod["spec"]["tolerations"][0]["key"], "kata");
        assert_eq!(RuntimeClass.validate(&attrs(), &pod, &classes()), Ok(()));
        // Admitting again adds nothing twice.
        assert_eq!(RuntimeClass.admit(&attrs(), &mut pod, &classes()), Ok(()));
        assert_eq!(pod["spec"]["tolerations"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn refusals_in_upstreams_words() {
        let mut missing = json!({"spec": {"runtimeClassName": "gvisor"}});
        assert_eq!(
            RuntimeClass.admit(&attrs(), &mut missing, &classes()),
            Err(Forbidden(
                "pod rejected: RuntimeClass \"gvisor\" not found".into()
            ))
        );
        let mut conflict =
            json!({"spec": {"runtimeClassName": "kata", "nodeSelector": {"runtime": "runc"}}});
        assert_eq!(
            RuntimeClass.admit(&attrs(), &mut conflict, &classes()),
            Err(Forbidden("conflict: runtimeClass.scheduling.nodeSelector[runtime] = kata; pod.spec.nodeSelector[runtime] = runc".into()))
        );
        let mut other = json!({"spec": {"runtimeClassName": "kata", "overhead": {"cpu": "1"}}});
        assert_eq!(
            RuntimeClass.admit(&attrs(), &mut other, &classes()),
            Err(Forbidden(MISMATCH.into()))
        );
        // The same overhead written differently is the same.
        let mut same = json!({"spec": {"runtimeClassName": "kata", "overhead": {"cpu": "0.25", "memory": "120Mi"}}});
        assert_eq!(RuntimeClass.admit(&attrs(), &mut same, &classes()), Ok(()));
        let no_class = json!({"spec": {"overhead": {"cpu": "1"}}});
        assert_eq!(
            RuntimeClass.validate(&attrs(), &no_class, &classes()),
            Err(Forbidden("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead".into()))
        );
        // Updates are not looked at.
        let old = json!({});
        let update = Attributes {
            operation: Operation::Update,
            old: Some(&old),
            ..attrs()
        };
        assert_eq!(
            RuntimeClass.validate(&update, &no_class, &classes()),
            Ok(())
        );
    }
}
