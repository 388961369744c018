//! The rules of `pods/ephemeralcontainers` and `pods/resize` (Kubernetes 1.33's
//! `podEphemeralContainersStrategy` and `podResizeStrategy` in `pkg/registry/core/pod/strategy.go`,
//! `ValidatePodEphemeralContainersUpdate` and `ValidatePodResize` in
//! `pkg/apis/core/validation/validation.go`), as values without I/O.
//!
//! Both subresources take a whole Pod and keep only their part of it: the stored pod with the
//! body's `spec.ephemeralContainers` (defaulted like containers), or with the body's
//! `resources` and `resizePolicy` of the containers (and init containers) it names. Then:
//! - ephemeral containers: the pod spec stays valid, names are unique across every container
//!   kind, `targetContainerName` names a container or init container, the fields an ephemeral
//!   container may not have (ports, resources, resizePolicy, restartPolicy, probes, lifecycle,
//!   volume subPaths) are forbidden, existing ones may be neither removed nor changed, and static
//!   (mirror) pods have none;
//! - resize (in-place vertical scaling, beta and on by default in 1.33): not for pods with
//!   pod-level resources, static or Windows pods; the QoS class may not change; requests and
//!   limits may not be removed; only cpu and memory may change.

use super::common::{semantically_equal, set_field};
use super::pod::{default_container, validate_container, validate_pod_spec};
use api::validation::FieldError;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The annotation of static (mirror) pods.
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Fields of `EphemeralContainerCommon` an ephemeral container may not set, in struct order.
const FORBIDDEN_EPHEMERAL_FIELDS: &[&str] = &[
    "ports",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
];

const EPHEMERAL_FORBIDDEN_MSG: &str = "cannot be set for an Ephemeral Container";

fn is_mirror_pod(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
}

fn list<'a>(pod: &'a Value, key: &str) -> &'a [Value] {
    pod.get("spec")
        .and_then(|s| s.get(key))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn container_name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

/// A set value: not absent, null, or an empty object, list or string (Go's zero value).
fn is_set(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Object(m)) => !m.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// `dropNonEphemeralContainerUpdates`: the stored pod with the body's ephemeral containers,
/// defaulted.
pub fn prepare_ephemeral_containers(body: &Value, old: &Value) -> Value {
    let mut new = old.clone();
    let mut ecs = body
        .pointer("/spec/ephemeralContainers")
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(items) = ecs.as_array_mut() {
        items.iter_mut().for_each(default_container);
    }
    if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
        if ecs.is_null() {
            spec.remove("ephemeralContainers");
        } else {
            spec.insert("ephemeralContainers".into(), ecs);
        }
    }
    new
}

/// `ValidatePodEphemeralContainersUpdate` (after [`prepare_ephemeral_containers`]).
pub fn validate_ephemeral_containers_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_pod_spec(new.get("spec"), "spec");
    if is_mirror_pod(old) {
        return vec![FieldError::forbidden(
            "",
            "static pods do not support ephemeral containers",
        )];
    }
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut others: BTreeSet<&str> = BTreeSet::new();
    for c in list(new, "containers")
        .iter()
        .chain(list(new, "initContainers"))
    {
        names.insert(container_name(c).to_string());
        others.insert(container_name(c));
    }
    let ecs = list(new, "ephemeralContainers");
    for (i, ec) in ecs.iter().enumerate() {
        let path = format!("spec.ephemeralContainers[{i}]");
        validate_container(ec, &path, &mut names, &mut errs, true);
        let target = ec
            .get("targetContainerName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !target.is_empty() && !others.contains(target) {
            errs.push(FieldError::not_found(
                format!("{path}.targetContainerName"),
                &json!(target),
            ));
        }
        for key in FORBIDDEN_EPHEMERAL_FIELDS {
            if is_set(ec.get(*key)) {
                errs.push(FieldError::forbidden(
                    format!("{path}.{key}"),
                    EPHEMERAL_FORBIDDEN_MSG,
                ));
            }
        }
        let mounts = ec.get("volumeMounts").and_then(Value::as_array);
        for (j, m) in mounts.into_iter().flatten().enumerate() {
            for key in ["subPath", "subPathExpr"] {
                if is_set(m.get(key)) {
                    errs.push(FieldError::forbidden(
                        format!("{path}.volumeMounts[{j}].{key}"),
                        EPHEMERAL_FORBIDDEN_MSG,
                    ));
                }
            }
        }
    }
    for old_ec in list(old, "ephemeralContainers") {
        let name = container_name(old_ec);
        match ecs.iter().find(|ec| container_name(ec) == name) {
            None => errs.push(FieldError::forbidden(
                "spec.ephemeralContainers",
                format!(
                    "existing ephemeral containers {} may not be removed\n",
                    api::validation::go_quote(name)
                ),
            )),
            Some(new_ec) if !semantically_equal(Some(old_ec), Some(new_ec)) => {
                errs.push(FieldError::forbidden(
                    "spec.ephemeralContainers",
                    format!(
                        "existing ephemeral containers {} may not be changed\n",
                        api::validation::go_quote(name)
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    errs
}

/// `dropNonResizeUpdates`: the stored pod with the `resources` and `resizePolicy` the body gives
/// for the containers and init containers it names (others are ignored).
pub fn prepare_resize(body: &Value, old: &Value) -> Value {
    let mut new = old.clone();
    for key in ["containers", "initContainers"] {
        let wanted = list(body, key);
        let Some(items) = new
            .get_mut("spec")
            .and_then(|s| s.get_mut(key))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in items.iter_mut() {
            let name = container_name(c).to_string();
            let Some(w) = wanted.iter().find(|w| container_name(w) == name) else {
                continue;
            };
            for field in ["resources", "resizePolicy"] {
                match w.get(field) {
                    Some(v) => set_field(c, field, v.clone()),
                    None => {
                        if let Some(m) = c.as_object_mut() {
                            m.remove(field);
                        }
                    }
                }
            }
            // Resources are a struct upstream: never absent.
            if let Some(m) = c.as_object_mut() {
                m.entry("resources").or_insert_with(|| json!({}));
            }
        }
    }
    new
}

fn resource_names(c: &Value, kind: &str) -> Vec<String> {
    c.get("resources")
        .and_then(|r| r.get(kind))
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The spec with the cpu and memory requests and limits of every resizable container taken from
/// `old_spec` (what may change), for the "only cpu and memory" comparison.
fn without_cpu_memory_changes(new_spec: &Value, old_spec: &Value) -> Value {
    let mut spec = new_spec.clone();
    for key in ["containers", "initContainers"] {
        let old_items = old_spec.get(key).and_then(Value::as_array);
        let Some(items) = spec.get_mut(key).and_then(Value::as_array_mut) else {
            continue;
        };
        for (i, c) in items.iter_mut().enumerate() {
            let sidecar = c.get("restartPolicy") == Some(&json!("Always"));
            if key == "initContainers" && !sidecar {
                continue;
            }
            let old_c = old_items.and_then(|o| o.get(i));
            for kind in ["requests", "limits"] {
                for res in ["cpu", "memory"] {
                    let old_v = old_c
                        .and_then(|o| o.get("resources"))
                        .and_then(|r| r.get(kind))
                        .and_then(|m| m.get(res))
                        .cloned();
                    let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) else {
                        continue;
                    };
                    let m = r.entry(kind).or_insert_with(|| json!({}));
                    let Some(m) = m.as_object_mut() else { continue };
                    match old_v {
                        Some(v) => {
                            m.insert(res.to_string(), v);
                        }
                        None => {
                            m.remove(res);
                        }
                    }
                }
                let empty = r_is_empty(c, kind);
                if empty {
                    if let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) {
                        r.remove(kind);
                    }
                }
            }
            // The resize policy may change too.
            match old_c.and_then(|o| o.get("resizePolicy")) {
                Some(p) => set_field(c, "resizePolicy", p.clone()),
                None => {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("resizePolicy");
                    }
                }
            }
        }
    }
    spec
}

fn r_is_empty(c: &Value, kind: &str) -> bool {
    c.get("resources")
        .and_then(|r| r.get(kind))
        .and_then(Value::as_object)
        .is_some_and(|m| m.is_empty())
}

/// `ValidatePodResize` (after [`prepare_resize`]).
pub fn validate_resize(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_pod_spec(new.get("spec"), "spec");
    let pod_level = |p: &Value| is_set(p.pointer("/spec/resources"));
    if pod_level(old) || pod_level(new) {
        return vec![FieldError::forbidden(
            "",
            "pods with pod-level resources cannot be resized",
        )];
    }
    if is_mirror_pod(old) {
        return vec![FieldError::forbidden("", "static pods cannot be resized")];
    }
    if old.pointer("/spec/os/name").and_then(Value::as_str) == Some("windows") {
        return vec![FieldError::forbidden("", "windows pods cannot be resized")];
    }
    let null = Value::Null;
    let (new_spec, old_spec) = (
        new.get("spec").unwrap_or(&null),
        old.get("spec").unwrap_or(&null),
    );
    let old_qos = old
        .pointer("/status/qosClass")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| api::qos::qos_class(old_spec).to_string());
    if api::qos::qos_class(new_spec) != old_qos {
        let shown = new
            .pointer("/status/qosClass")
            .and_then(Value::as_str)
            .unwrap_or("");
        errs.push(FieldError::invalid(
            "spec",
            shown,
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    for key in ["initContainers", "containers"] {
        let new_items = list(new, key);
        for (i, old_c) in list(old, key).iter().enumerate() {
            if key == "initContainers" && old_c.get("restartPolicy") != Some(&json!("Always")) {
                continue;
            }
            let Some(new_c) = new_items.get(i) else {
                continue;
            };
            for kind in ["requests", "limits"] {
                let kept = resource_names(new_c, kind);
                for r in resource_names(old_c, kind) {
                    if !kept.contains(&r) {
                        errs.push(FieldError::forbidden(
                            format!("spec.{key}[{i}].resources.{kind}[{r}]"),
                            "resource removal is not supported",
                        ));
                    }
                }
            }
        }
    }
    let masked = without_cpu_memory_changes(new_spec, old_spec);
    let mut old_norm = old_spec.clone();
    normalize_empty_resource_maps(&mut old_norm);
    let mut masked_norm = masked;
    normalize_empty_resource_maps(&mut masked_norm);
    if !semantically_equal(Some(&masked_norm), Some(&old_norm)) {
        errs.push(FieldError::forbidden(
            "spec",
            "only cpu and memory resources are mutable",
        ));
    }
    errs
}

/// Drops empty `requests`/`limits` maps (nil and empty resource lists are equal upstream).
fn normalize_empty_resource_maps(spec: &mut Value) {
    for key in ["containers", "initContainers"] {
        if let Some(items) = spec.get_mut(key).and_then(Value::as_array_mut) {
            for c in items {
                for kind in ["requests", "limits"] {
                    if r_is_empty(c, kind) {
                        if let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) {
                            r.remove(kind);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        let mut p = json!({
            "metadata": {"name": "web", "namespace": "d"},
            "spec": {"containers": [{"name": "app", "image": "nginx:1",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}}}]},
            "status": {"phase": "Running", "qosClass": "Burstable"}
        });
        if let Some(spec) = p.get_mut("spec") {
            super::super::pod::default_pod_spec(spec);
        }
        p
    }

    fn bodies(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn ephemeral_containers_are_added_defaulted_and_then_frozen() {
        let old = pod();
        let body = json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox:1", "targetContainerName": "app"}]}});
        let new = prepare_ephemeral_containers(&body, &old);
        assert_eq!(
            new.pointer("/spec/ephemeralContainers/0/terminationMessagePolicy"),
            Some(&json!("File"))
        );
        assert!(validate_ephemeral_containers_update(&new, &old).is_empty());
        // Only the ephemeral containers are taken from the body.
        let mut sneaky = body.clone();
        sneaky["spec"]["containers"] = json!([{"name": "app", "image": "evil"}]);
        let n2 = prepare_ephemeral_containers(&sneaky, &old);
        assert_eq!(
            n2.pointer("/spec/containers/0/image"),
            Some(&json!("nginx:1"))
        );
        // Removing or changing it afterwards is forbidden.
        let removed = prepare_ephemeral_containers(&json!({"spec": {}}), &new);
        assert_eq!(
            bodies(&validate_ephemeral_containers_update(&removed, &new)),
            ["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug\" may not be removed\n"]
        );
        let changed = prepare_ephemeral_containers(
            &json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox:2", "targetContainerName": "app"}]}}),
            &new,
        );
        assert_eq!(
            bodies(&validate_ephemeral_containers_update(&changed, &new)),
            ["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug\" may not be changed\n"]
        );
    }

    #[test]
    fn ephemeral_container_rules() {
        let old = pod();
        let body = json!({"spec": {"ephemeralContainers": [
            {"name": "app", "image": "busybox:1", "targetContainerName": "nope",
             "ports": [{"containerPort": 80}], "readinessProbe": {"exec": {"command": ["true"]}},
             "volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "x"}]}]}});
        let new = prepare_ephemeral_containers(&body, &old);
        assert_eq!(
            bodies(&validate_ephemeral_containers_update(&new, &old)),
            [
                "spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
                "spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\"",
                "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container",
            ]
        );
    }

    #[test]
    fn resize_changes_only_cpu_and_memory() {
        let old = pod();
        let body = json!({"spec": {"containers": [{"name": "app", "image": "ignored",
            "resources": {"requests": {"cpu": "150m", "memory": "64Mi"}, "limits": {"cpu": "300m", "memory": "64Mi"}}}]}});
        let new = prepare_resize(&body, &old);
        assert_eq!(
            new.pointer("/spec/containers/0/image"),
            Some(&json!("nginx:1"))
        );
        assert_eq!(
            new.pointer("/spec/containers/0/resources/requests/cpu"),
            Some(&json!("150m"))
        );
        assert!(validate_resize(&new, &old).is_empty());
        let gpu = prepare_resize(
            &json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"}, "limits": {"cpu": "200m", "memory": "64Mi", "nvidia.com/gpu": "1"}}}]}}),
            &old,
        );
        assert_eq!(
            bodies(&validate_resize(&gpu, &old)),
            ["spec: Forbidden: only cpu and memory resources are mutable"]
        );
        let removed = prepare_resize(
            &json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "64Mi"}}}]}}),
            &old,
        );
        assert_eq!(
            bodies(&validate_resize(&removed, &old)),
            ["spec.containers[0].resources.requests[memory]: Forbidden: resource removal is not supported"]
        );
        // Burstable → Guaranteed changes the QoS class.
        let guaranteed = prepare_resize(
            &json!({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}}}]}}),
            &old,
        );
        assert_eq!(
            bodies(&validate_resize(&guaranteed, &old)),
            ["spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"]
        );
    }
}
