//! The `LimitRanger` admission plugin (`plugin/pkg/admission/limitranger`): the LimitRanges of the
//! request's namespace, each in turn (in name order), on pod creates and on claim creates and
//! updates (never on subresources or on objects being deleted).
//!
//! Mutating (pods only, `PodMutateLimitFunc`): a container or init container that lacks a resource
//! in its limits (requests) gets it from the `default` (`defaultRequest`) of the LimitRange's
//! `Container` items, and the pod is annotated `kubernetes.io/limit-ranger: LimitRanger plugin
//! set: cpu, memory request for container web; cpu limit for container web` (requests then
//! limits per container, containers then init containers, names sorted). The QoS class is then
//! computed again: upstream's `PrepareForCreate` computes it after mutating admission, here the
//! kind's create rules run first.
//!
//! Validating (`PodValidateLimitFunc`, `PersistentVolumeClaimValidateLimitFunc`): the constraints
//! of [`limit_constraints`](super::limit_constraints); the first LimitRange with a failure refuses
//! the request with all of its failures (403 `pods "p" is forbidden: maximum cpu usage per
//! Container is 1, but limit is 2`).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::limit_constraints::{aggregate, validate_claim, validate_pod};
use super::{Attributes, Operation, Plugin, LIMIT_RANGER};
use crate::registry::{Forbidden, Objects};

/// `limitRangerAnnotation`.
pub const LIMIT_RANGER_ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The plugin.
pub struct LimitRanger;

/// What the request is, for this plugin (`SupportsAttributes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    Pod,
    Claim,
}

fn subject(attrs: &Attributes<'_>) -> Option<Subject> {
    let being_deleted = attrs
        .old
        .is_some_and(|o| api::meta::deletion_timestamp(o).is_some());
    // Subresource writes are never LimitRanger's (`SupportsAttributes`): a claim's `/status`
    // stays writable after a LimitRange narrower than its request appears.
    if being_deleted || !attrs.subresource.is_empty() {
        return None;
    }
    match (attrs.resource, attrs.operation) {
        _ if !attrs.group.is_empty() => None,
        // Containers cannot change after create, so pod updates are not checked.
        ("pods", Operation::Create) => Some(Subject::Pod),
        ("persistentvolumeclaims", _) => Some(Subject::Claim),
        _ => None,
    }
}

/// The LimitRanges of `namespace`, in name order.
fn limit_ranges(objects: &dyn Objects, namespace: &str) -> Vec<std::sync::Arc<Value>> {
    objects
        .list("", "limitranges")
        .into_iter()
        .filter(|lr| api::meta::namespace(lr) == Some(namespace))
        .collect()
}

/// `defaultContainerResourceRequirements`: (requests, limits) from the `Container` items.
fn container_defaults(limit_range: &Value) -> (Map<String, Value>, Map<String, Value>) {
    let mut requests = Map::new();
    let mut limits = Map::new();
    let items = limit_range
        .pointer("/spec/limits")
        .and_then(Value::as_array);
    for item in items.into_iter().flatten() {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        for (field, into) in [("defaultRequest", &mut requests), ("default", &mut limits)] {
            if let Some(m) = item.get(field).and_then(Value::as_object) {
                into.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
    }
    (requests, limits)
}

/// `mergeContainerResources`: fills what `container` lacks; returns its annotation parts.
fn merge_container(
    container: &mut Map<String, Value>,
    defaults: &(Map<String, Value>, Map<String, Value>),
    kind: &str,
) -> Vec<String> {
    let name = container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let resources = container
        .entry("resources")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(resources) = resources.as_object_mut() else {
        return Vec::new();
    };
    let mut parts = Vec::new();
    for (field, from, what) in [
        ("requests", &defaults.0, "request"),
        ("limits", &defaults.1, "limit"),
    ] {
        let mut set = BTreeSet::new();
        for (k, v) in from {
            let have = resources.get(field).and_then(|l| l.get(k)).is_some();
            if have {
                continue;
            }
            let list = resources
                .entry(field)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(list) = list.as_object_mut() {
                list.insert(k.clone(), v.clone());
                set.insert(k.as_str());
            }
        }
        if !set.is_empty() {
            let names: Vec<&str> = set.into_iter().collect();
            parts.push(format!("{} {what} for {kind} {name}", names.join(", ")));
        }
    }
    parts
}

/// `mergePodResourceRequirements`; whether anything was set.
fn merge_pod(pod: &mut Value, defaults: &(Map<String, Value>, Map<String, Value>)) -> bool {
    let mut parts = Vec::new();
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        for (key, kind) in [
            ("containers", "container"),
            ("initContainers", "init container"),
        ] {
            let containers = spec.get_mut(key).and_then(Value::as_array_mut);
            for c in containers
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                parts.extend(merge_container(c, defaults, kind));
            }
        }
    }
    if parts.is_empty() {
        return false;
    }
    let value = format!("LimitRanger plugin set: {}", parts.join("; "));
    if let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        if let Some(a) = annotations.as_object_mut() {
            a.insert(LIMIT_RANGER_ANNOTATION.into(), Value::from(value));
        }
    }
    true
}

impl Plugin for LimitRanger {
    fn name(&self) -> &'static str {
        LIMIT_RANGER
    }

    fn admit(
        &self,
        attrs: &Attributes<'_>,
        obj: &mut Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if subject(attrs) != Some(Subject::Pod) {
            return Ok(());
        }
        let mut changed = false;
        for lr in limit_ranges(objects, attrs.namespace()) {
            changed |= merge_pod(obj, &container_defaults(&lr));
        }
        if changed {
            let qos = api::qos::qos_class(obj.get("spec").unwrap_or(&Value::Null));
            if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
                status.insert("qosClass".into(), Value::from(qos));
            }
        }
        Ok(())
    }

    fn validate(
        &self,
        attrs: &Attributes<'_>,
        obj: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        let Some(subject) = subject(attrs) else {
            return Ok(());
        };
        for lr in limit_ranges(objects, attrs.namespace()) {
            let errs = match subject {
                Subject::Pod => validate_pod(&lr, obj),
                Subject::Claim => validate_claim(&lr, obj),
            };
            if let Some(message) = aggregate(errs) {
                return Err(Forbidden(message));
            }
        }
        Ok(())
    }
}
