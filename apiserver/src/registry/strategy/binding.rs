//! `pods/binding`: assigning a pod to a node (the scheduler's write).

use api::validation::FieldError;
use serde_json::{json, Value};

/// Why a binding was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    /// The pod already has `spec.nodeName` (409 Conflict).
    #[error("pod {pod} is already assigned to node {node:?}")]
    AlreadyBound { pod: String, node: String },
    /// The pod has a `deletionTimestamp` (409 Conflict).
    #[error("pod {pod} is being deleted, cannot be assigned to a host")]
    BeingDeleted { pod: String },
    /// The Binding body is malformed (422 Invalid on kind `Binding`).
    #[error("invalid binding")]
    Invalid(Vec<FieldError>),
}

impl BindingError {
    /// The Status the HTTP side returns.
    pub fn to_status(
        &self,
        pod_name: &str,
    ) -> api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
        match self {
            Self::AlreadyBound { .. } | Self::BeingDeleted { .. } => {
                api::status::conflict("pods/binding", pod_name, &self.to_string())
            }
            Self::Invalid(errs) => api::status::invalid("Binding", pod_name, errs),
        }
    }
}

/// Applies a `Binding` (`{target: {kind: Node, name}}`) to a pod: sets `spec.nodeName`, copies the
/// binding's annotations, and sets the `PodScheduled` condition to True.
pub fn apply_binding(pod: &mut Value, binding: &Value) -> Result<(), BindingError> {
    let pod_name = api::meta::name(pod).unwrap_or("").to_string();
    let target = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if target.is_empty() {
        return Err(BindingError::Invalid(vec![FieldError::required(
            "target.name",
            "",
        )]));
    }
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("Node");
    if !kind.is_empty() && kind != "Node" {
        return Err(BindingError::Invalid(vec![FieldError::not_supported(
            "target.kind",
            &json!(kind),
            &["Node"],
        )]));
    }
    if api::meta::deletion_timestamp(pod).is_some() {
        return Err(BindingError::BeingDeleted { pod: pod_name });
    }
    let current = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !current.is_empty() {
        return Err(BindingError::AlreadyBound {
            pod: pod_name,
            node: current.to_string(),
        });
    }
    if let Some(spec) = super::common::object_at(pod, "spec") {
        spec.insert("nodeName".to_string(), json!(target));
    }
    let annotations = api::meta::annotations(binding);
    if !annotations.is_empty() {
        if let Some(m) = api::meta::metadata_mut(pod) {
            let a = m.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = a.as_object_mut() {
                for (k, v) in annotations {
                    a.insert(k, json!(v));
                }
            }
        }
    }
    let cond = json!({
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": api::meta::now_rfc3339(),
    });
    if let Some(status) = super::common::object_at(pod, "status") {
        let conds = status.entry("conditions").or_insert_with(|| json!([]));
        if !conds.is_array() {
            *conds = json!([]);
        }
        if let Some(list) = conds.as_array_mut() {
            match list
                .iter_mut()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))
            {
                Some(c) => *c = cond,
                None => list.push(cond),
            }
        }
    }
    Ok(())
}
