//! NodeRestriction's rules for a node's own Node object (`admitNode` and its label policy,
//! `getForbiddenLabels` with `kubeletapis.IsKubeletLabel`), and the pod reference scan its
//! mirror-pod rule uses.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{
    refuse, NodeOperation, NodeRequest, Referenced, KUBELET_LABELS, KUBELET_LABEL_NAMESPACES,
    NODE_RESTRICTION_LABEL_NAMESPACE,
};
use crate::registry::Forbidden;

/// `admitNode`: only its own Node; on a create no forbidden label nor `configSource`; on an
/// update no new `configSource`, no taint change, no forbidden label change.
pub(super) fn admit_node(node: &str, r: &NodeRequest<'_>) -> Result<(), Forbidden> {
    // A create names the node in its body (upstream's attributes take the object's name).
    let requested = match (r.operation, r.name) {
        (NodeOperation::Create, "") => r.object.and_then(api::meta::name).unwrap_or(""),
        (_, name) => name,
    };
    if requested != node {
        return refuse(format!(
            "node {node:?} is not allowed to modify node {requested:?}"
        ));
    }
    match r.operation {
        NodeOperation::Create => {
            let Some(obj) = r.object else {
                return refuse("unexpected type <nil>".into());
            };
            if !obj["spec"]["configSource"].is_null() {
                return refuse(format!(
                    "node {node:?} is not allowed to create pods with a non-nil configSource"
                ));
            }
            let forbidden = forbidden_labels(&modified_labels(obj, &Value::Null));
            if !forbidden.is_empty() {
                return refuse(format!(
                    "node {node:?} is not allowed to set the following labels: {}",
                    joined(&forbidden)
                ));
            }
            Ok(())
        }
        NodeOperation::Update => {
            let (Some(obj), Some(old)) = (r.object, r.old) else {
                return refuse("unexpected type <nil>".into());
            };
            let source = &obj["spec"]["configSource"];
            if !source.is_null() && *source != old["spec"]["configSource"] {
                return refuse(format!(
                    "node {node:?} is not allowed to update configSource to a new non-nil configSource"
                ));
            }
            if taints(obj) != taints(old) {
                return refuse(format!("node {node:?} is not allowed to modify taints"));
            }
            let forbidden = forbidden_labels(&modified_labels(obj, old));
            if !forbidden.is_empty() {
                return refuse(format!(
                    "is not allowed to modify labels: {}",
                    joined(&forbidden)
                ));
            }
            Ok(())
        }
        NodeOperation::Delete => Ok(()),
    }
}

/// The taints, none and an empty list alike (`apiequality.Semantic`).
fn taints(node: &Value) -> &[Value] {
    node["spec"]["taints"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn joined(labels: &BTreeSet<String>) -> String {
    labels
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The keys whose values differ between the labels of `a` and `b` (`getModifiedLabels`).
fn modified_labels(a: &Value, b: &Value) -> BTreeSet<String> {
    let empty = serde_json::Map::new();
    let la = a["metadata"]["labels"].as_object().unwrap_or(&empty);
    let lb = b["metadata"]["labels"].as_object().unwrap_or(&empty);
    let mut out = BTreeSet::new();
    for (k, v) in la {
        if lb.get(k) != Some(v) {
            out.insert(k.clone());
        }
    }
    for (k, v) in lb {
        if la.get(k) != Some(v) {
            out.insert(k.clone());
        }
    }
    out
}

/// The prefix of a label key (`getLabelNamespace`), `""` without one.
fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or("")
}

/// `ns` is `domain` or a subdomain of it.
fn in_domain(ns: &str, domain: &str) -> bool {
    ns == domain
        || ns
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// `isKubernetesLabel`: under `kubernetes.io` or `k8s.io`.
fn is_kubernetes_label(key: &str) -> bool {
    let ns = label_namespace(key);
    in_domain(ns, "kubernetes.io") || in_domain(ns, "k8s.io")
}

/// `kubeletapis.IsKubeletLabel`: a label a kubelet may set on its own Node.
fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key) || {
        let ns = label_namespace(key);
        KUBELET_LABEL_NAMESPACES.iter().any(|d| in_domain(ns, d))
    }
}

/// `getForbiddenLabels`: node-restriction labels, and Kubernetes labels the kubelet does not own.
fn forbidden_labels(modified: &BTreeSet<String>) -> BTreeSet<String> {
    modified
        .iter()
        .filter(|k| {
            in_domain(label_namespace(k), NODE_RESTRICTION_LABEL_NAMESPACE)
                || (is_kubernetes_label(k) && !is_kubelet_label(k))
        })
        .cloned()
        .collect()
}

/// Whether the pod spec names any object of `kind` (`VisitPodSecretNames`,
/// `VisitPodConfigmapNames` over all containers).
pub(super) fn references_any(spec: &Value, kind: Referenced) -> bool {
    let some = |v: &Value| !v.is_null();
    let volumes = spec["volumes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for v in volumes {
        let direct = match kind {
            Referenced::Secret => {
                some(&v["secret"])
                    || some(&v["azureFile"])
                    || some(&v["cephfs"]["secretRef"])
                    || some(&v["cinder"]["secretRef"])
                    || some(&v["flexVolume"]["secretRef"])
                    || some(&v["iscsi"]["secretRef"])
                    || some(&v["rbd"]["secretRef"])
                    || some(&v["scaleIO"]["secretRef"])
                    || some(&v["storageos"]["secretRef"])
                    || some(&v["csi"]["nodePublishSecretRef"])
            }
            Referenced::ConfigMap => some(&v["configMap"]),
        };
        if direct {
            return true;
        }
        let key = match kind {
            Referenced::Secret => "secret",
            Referenced::ConfigMap => "configMap",
        };
        let sources = v["projected"]["sources"].as_array().into_iter().flatten();
        if sources.into_iter().any(|s| some(&s[key])) {
            return true;
        }
    }
    if kind == Referenced::Secret
        && spec["imagePullSecrets"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    {
        return true;
    }
    let (key_ref, from) = match kind {
        Referenced::Secret => ("secretKeyRef", "secretRef"),
        Referenced::ConfigMap => ("configMapKeyRef", "configMapRef"),
    };
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| spec[*k].as_array().into_iter().flatten());
    for c in containers {
        let env = c["env"].as_array().into_iter().flatten();
        if env.into_iter().any(|e| some(&e["valueFrom"][key_ref])) {
            return true;
        }
        let env_from = c["envFrom"].as_array().into_iter().flatten();
        if env_from.into_iter().any(|e| some(&e[from])) {
            return true;
        }
    }
    false
}
