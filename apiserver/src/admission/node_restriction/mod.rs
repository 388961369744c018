//! NodeRestriction (`plugin/pkg/admission/noderestriction`): what a kubelet
//! (`system:node:<name>` in `system:nodes`) may write, beyond what the Node authorizer lets it
//! attempt.
//!
//! | resource | a node may |
//! |---|---|
//! | `nodes` | create, update and delete only its own Node; not register with or change labels in `node-restriction.kubernetes.io`, nor `kubernetes.io`/`k8s.io` labels other than the kubelet's own (`kubernetes.io/hostname`, the topology, instance-type, os and arch labels, anything under `kubelet.kubernetes.io` or `node.kubernetes.io`); not change its taints; not set a new `configSource` |
//! | `pods` | create only mirror pods bound to itself, owned by its Node (controller, UID checked), referencing no service account, secret, configmap, cluster trust bundle or claim; delete only pods bound to itself; no other operation |
//! | `pods/status` | update only its own pods' status, never their labels or resource-claim statuses |
//! | `pods/eviction` | evict only its own pods |
//! | `persistentvolumeclaims` | update only `status.capacity`, `status.conditions` (and the allocated resources, as upstream with `RecoverVolumeExpansionFailure`) |
//! | `serviceaccounts/token` | request only tokens bound to a pod (by name and UID) bound to itself |
//! | `leases` | only its own Lease in `kube-node-lease` |
//! | `csinodes` | only its own CSINode |
//!
//! Other users' requests and other resources pass. Refusals carry upstream's messages. The
//! decision is a pure function of the request and the objects read from the watch cache (the
//! informer listers upstream reads): a pod missing there lets the request through to the store,
//! which answers the same 404 upstream's lister miss does; the Node a mirror pod names is not
//! something the store looks up, so its absence is this plugin's own 404 (`node "n1" not found`,
//! the lister's NotFound upstream returns as it is), a [`Refusal::NotFound`].

mod nodes;

use serde_json::Value;

use crate::authn::UserInfo;
use crate::registry::{Forbidden, Objects};

/// `NodeRestriction`.
pub const NODE_RESTRICTION: &str = "NodeRestriction";

/// `api.MirrorPodAnnotationKey`.
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// `v1.LabelNamespaceNodeRestriction`.
const NODE_RESTRICTION_LABEL_NAMESPACE: &str = "node-restriction.kubernetes.io";
/// `kubeletapis.KubeletLabels()`.
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];
/// `kubeletapis.KubeletLabelNamespaces()`.
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// What the request does (`admission.Operation`, as upstream spells it in messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOperation {
    Create,
    Update,
    Delete,
}

impl NodeOperation {
    fn as_str(self) -> &'static str {
        match self {
            NodeOperation::Create => "CREATE",
            NodeOperation::Update => "UPDATE",
            NodeOperation::Delete => "DELETE",
        }
    }
}

/// A write as NodeRestriction sees it.
#[derive(Debug, Clone, Copy)]
pub struct NodeRequest<'a> {
    pub user: &'a UserInfo,
    pub operation: NodeOperation,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    /// The name in the request's path (empty for a create).
    pub name: &'a str,
    /// The new object (a create or update; the Eviction or TokenRequest of a subresource create).
    pub object: Option<&'a Value>,
    /// The stored object an update replaces.
    pub old: Option<&'a Value>,
}

/// The node `user` is (`nodeidentifier.NodeIdentity`): a user named `system:node:<name>` in
/// `system:nodes` is node `<name>` (`Some("")` for the bare prefix, which names no node);
/// anybody else, including another member of `system:nodes`, is not a node.
pub fn node_of(user: &UserInfo) -> Option<&str> {
    crate::authz::node::node_identity(user)
}

/// Why NodeRestriction refuses a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 403 with upstream's message.
    Forbidden(Forbidden),
    /// An object the decision needs is missing: upstream returns its informer lister's error,
    /// a 404 naming the resource in the singular (`node "n1" not found`).
    NotFound {
        resource: &'static str,
        name: String,
    },
}

impl Refusal {
    /// The answer to the client: 403 naming `name` of `group_resource`, or the missing object's
    /// 404.
    pub fn into_error(self, group_resource: &str, name: &str) -> crate::error::ApiError {
        match self {
            Refusal::Forbidden(Forbidden(reason)) => {
                api::status::forbidden(group_resource, name, &reason).into()
            }
            Refusal::NotFound { resource, name } => {
                crate::error::ApiError::not_found(resource, &name)
            }
        }
    }
}

impl From<Forbidden> for Refusal {
    fn from(f: Forbidden) -> Self {
        Refusal::Forbidden(f)
    }
}

fn refuse<E: From<Forbidden>>(reason: String) -> Result<(), E> {
    Err(Forbidden(reason).into())
}

/// The plugin's decision on `r`.
pub fn admit(r: &NodeRequest<'_>, objects: &dyn Objects) -> Result<(), Refusal> {
    let Some(node) = node_of(r.user) else {
        return Ok(());
    };
    if node.is_empty() {
        return refuse(format!(
            "could not determine node from user {:?}",
            r.user.username
        ));
    }
    match (r.group, r.resource) {
        ("", "pods") => match r.subresource {
            "" => pod(node, r, objects),
            "status" => Ok(pod_status(node, r)?),
            "eviction" => Ok(eviction(node, r, objects)?),
            other => refuse(format!(
                "unexpected pod subresource {other:?}, only 'status' and 'eviction' are allowed"
            )),
        },
        ("", "nodes") => Ok(nodes::admit_node(node, r)?),
        ("", "persistentvolumeclaims") => match r.subresource {
            "status" => Ok(claim_status(node, r)?),
            _ => refuse("may only update PVC status".into()),
        },
        ("", "serviceaccounts") => Ok(service_account_token(node, r, objects)?),
        ("coordination.k8s.io", "leases") => {
            if r.namespace != "kube-node-lease" {
                return refuse(
                    "can only access leases in the \"kube-node-lease\" system namespace".into(),
                );
            }
            Ok(own_named(
                node,
                r,
                "can only access node lease with the same name as the requesting node",
            )?)
        }
        ("storage.k8s.io", "csinodes") => Ok(own_named(
            node,
            r,
            "can only access CSINode with the same name as the requesting node",
        )?),
        _ => Ok(()),
    }
}

/// Leases and CSINodes: the object (on a create) or the path (otherwise) names the node.
fn own_named(node: &str, r: &NodeRequest<'_>, message: &str) -> Result<(), Forbidden> {
    let name = match r.operation {
        NodeOperation::Create => r.object.and_then(api::meta::name).unwrap_or(""),
        _ => r.name,
    };
    if name != node {
        return refuse(message.to_string());
    }
    Ok(())
}

fn pod(node: &str, r: &NodeRequest<'_>, objects: &dyn Objects) -> Result<(), Refusal> {
    match r.operation {
        NodeOperation::Create => match r.object {
            Some(pod) => mirror_pod(node, pod, objects),
            None => refuse("unexpected type <nil>".into()),
        },
        NodeOperation::Delete => {
            let Some(existing) = objects.get("", "pods", Some(r.namespace), r.name) else {
                return Ok(());
            };
            if existing["spec"]["nodeName"] != node {
                return refuse(format!(
                    "node {node:?} can only delete pods with spec.nodeName set to itself"
                ));
            }
            Ok(())
        }
        NodeOperation::Update => refuse(format!(
            "unexpected operation {:?}, node {node:?} can only create and delete mirror pods",
            r.operation.as_str()
        )),
    }
}

fn mirror_pod(node: &str, pod: &Value, objects: &dyn Objects) -> Result<(), Refusal> {
    if pod["metadata"]["annotations"][MIRROR_POD_ANNOTATION].is_null() {
        return refuse(format!(
            "pod does not have {MIRROR_POD_ANNOTATION:?} annotation, node {node:?} can only create mirror pods"
        ));
    }
    if pod["spec"]["nodeName"] != node {
        return refuse(format!(
            "node {node:?} can only create pods with spec.nodeName set to itself"
        ));
    }
    let owners = pod["metadata"]["ownerReferences"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    match owners {
        [] => {
            return refuse(format!(
                "node {node:?} can only create pods with an owner reference set to itself"
            ))
        }
        [owner] => {
            if owner["apiVersion"] != "v1" || owner["kind"] != "Node" || owner["name"] != node {
                return refuse(format!(
                    "node {node:?} can only create pods with an owner reference set to itself"
                ));
            }
            if owner["controller"] != true {
                return refuse(format!(
                    "node {node:?} can only create pods with a controller owner reference set to itself"
                ));
            }
            if owner["blockOwnerDeletion"] == true {
                return refuse(format!(
                    "node {node:?} must not set blockOwnerDeletion on an owner reference"
                ));
            }
            // The Node's UID is verified; a missing Node is the lister's 404.
            let Some(n) = objects.get("", "nodes", None, node) else {
                return Err(Refusal::NotFound {
                    resource: "node",
                    name: node.to_string(),
                });
            };
            let (want, got) = (
                owner["uid"].as_str().unwrap_or(""),
                n["metadata"]["uid"].as_str().unwrap_or(""),
            );
            if want != got {
                return refuse(format!(
                    "node {node} UID mismatch: expected {want} got {got}"
                ));
            }
        }
        _ => {
            return refuse(format!(
                "node {node:?} can only create pods with a single owner reference set to itself"
            ))
        }
    }
    let spec = &pod["spec"];
    if spec["serviceAccountName"]
        .as_str()
        .is_some_and(|s| !s.is_empty())
    {
        return refuse(format!(
            "node {node:?} can not create pods that reference a service account"
        ));
    }
    if nodes::references_any(spec, Referenced::Secret) {
        return refuse(format!(
            "node {node:?} can not create pods that reference secrets"
        ));
    }
    if nodes::references_any(spec, Referenced::ConfigMap) {
        return refuse(format!(
            "node {node:?} can not create pods that reference configmaps"
        ));
    }
    let volumes = spec["volumes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let bundles = volumes.iter().any(|v| {
        v["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| !s["clusterTrustBundle"].is_null())
    });
    if bundles {
        return refuse(format!(
            "node {node:?} can not create pods that reference clustertrustbundles"
        ));
    }
    if volumes
        .iter()
        .any(|v| !v["persistentVolumeClaim"].is_null())
    {
        return refuse(format!(
            "node {node:?} can not create pods that reference persistentvolumeclaims"
        ));
    }
    Ok(())
}

/// What a pod may reference (`VisitPodSecretNames`, `VisitPodConfigmapNames`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Referenced {
    Secret,
    ConfigMap,
}

fn pod_status(node: &str, r: &NodeRequest<'_>) -> Result<(), Forbidden> {
    if r.operation != NodeOperation::Update {
        return refuse(format!("unexpected operation {:?}", r.operation.as_str()));
    }
    let (Some(old), Some(new)) = (r.old, r.object) else {
        return refuse("unexpected type <nil>".into());
    };
    if old["spec"]["nodeName"] != node {
        return refuse(format!(
            "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
        ));
    }
    if labels(old) != labels(new) {
        return refuse(format!(
            "node {node:?} cannot update labels through pod status"
        ));
    }
    if !claim_statuses_equal(old, new) {
        return refuse(format!(
            "node {node:?} cannot update resource claim statues"
        ));
    }
    Ok(())
}

/// The labels of `obj`, an absent map equal to an empty one (`labels.Equals`).
fn labels(obj: &Value) -> serde_json::Map<String, Value> {
    obj["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// `resourceClaimStatusesEqual`: the same names and claim names, in order.
fn claim_statuses_equal(old: &Value, new: &Value) -> bool {
    let list = |o: &Value| {
        o["status"]["resourceClaimStatuses"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| (s["name"].clone(), s["resourceClaimName"].clone()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    list(old) == list(new)
}

fn eviction(node: &str, r: &NodeRequest<'_>, objects: &dyn Objects) -> Result<(), Forbidden> {
    if r.operation != NodeOperation::Create {
        return refuse(format!("unexpected operation {}", r.operation.as_str()));
    }
    let mut pod_name = r.name;
    if pod_name.is_empty() {
        pod_name = r.object.and_then(api::meta::name).unwrap_or("");
        if pod_name.is_empty() {
            return refuse("could not determine pod from request data".into());
        }
    }
    let Some(existing) = objects.get("", "pods", Some(r.namespace), pod_name) else {
        return Ok(());
    };
    if existing["spec"]["nodeName"] != node {
        return refuse(format!(
            "node {node} can only evict pods with spec.nodeName set to itself"
        ));
    }
    Ok(())
}

fn claim_status(node: &str, r: &NodeRequest<'_>) -> Result<(), Forbidden> {
    if r.operation != NodeOperation::Update {
        return refuse(format!("unexpected operation {:?}", r.operation.as_str()));
    }
    let (Some(old), Some(new)) = (r.old, r.object) else {
        return refuse("unexpected type <nil>".into());
    };
    let comparable = |c: &Value| {
        let mut c = c.clone();
        if let Some(meta) = c.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        if let Some(status) = c.get_mut("status").and_then(Value::as_object_mut) {
            for field in [
                "capacity",
                "conditions",
                "allocatedResourceStatuses",
                "allocatedResources",
            ] {
                status.remove(field);
            }
        }
        c
    };
    if comparable(old) != comparable(new) {
        // Upstream appends a Go-structure diff; the sentence before it is the same.
        return refuse(format!(
            "node {node:?} is not allowed to update fields other than status.capacity and status.conditions"
        ));
    }
    Ok(())
}

fn service_account_token(
    node: &str,
    r: &NodeRequest<'_>,
    objects: &dyn Objects,
) -> Result<(), Forbidden> {
    if r.operation != NodeOperation::Create || r.subresource != "token" {
        return Ok(());
    }
    let reference = r
        .object
        .map(|t| &t["spec"]["boundObjectRef"])
        .unwrap_or(&Value::Null);
    let nonempty = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
    if reference["apiVersion"] != "v1"
        || reference["kind"] != "Pod"
        || !nonempty(&reference["name"])
    {
        return refuse("node requested token not bound to a pod".into());
    }
    if !nonempty(&reference["uid"]) {
        return refuse("node requested token with a pod binding without a uid".into());
    }
    let name = reference["name"].as_str().unwrap_or("");
    let Some(pod) = objects.get("", "pods", Some(r.namespace), name) else {
        return Ok(());
    };
    if pod["metadata"]["uid"] != reference["uid"] {
        return refuse(format!(
            "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
            reference["uid"].as_str().unwrap_or("")
        ));
    }
    if pod["spec"]["nodeName"] != node {
        return refuse("node requested token bound to a pod scheduled on a different node".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
