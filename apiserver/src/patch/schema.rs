//! The patch schema of the built-in kinds: for each list field, how strategic merge and server-side
//! apply treat it (Kubernetes' `patchStrategy`/`patchMergeKey` and `listType`/`listMapKeys` tags), and
//! which maps are atomic. Paths are the field names from the object root, list positions omitted
//! (`["spec", "containers", "ports"]`).

use api::ResourceInfo;

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole (`atomic`; no patch strategy).
    Atomic,
    /// Merged element-wise by this key (`patchStrategy: merge`, `patchMergeKey`).
    Keyed(&'static str),
    /// A set of primitives (`patchStrategy: merge` on a scalar list, e.g. `finalizers`).
    Set,
}

/// Lists inside a PodSpec, relative to the pod spec.
fn pod_spec_list(rel: &[&str]) -> ListKind {
    match rel {
        ["containers" | "initContainers" | "ephemeralContainers"] => ListKind::Keyed("name"),
        ["containers" | "initContainers" | "ephemeralContainers", rest @ ..] => match rest {
            ["ports"] => ListKind::Keyed("containerPort"),
            ["env"] => ListKind::Keyed("name"),
            ["volumeMounts"] => ListKind::Keyed("mountPath"),
            ["volumeDevices"] => ListKind::Keyed("devicePath"),
            ["resizePolicy"] => ListKind::Keyed("resourceName"),
            ["resources", "claims"] => ListKind::Keyed("name"),
            _ => ListKind::Atomic,
        },
        ["volumes"] => ListKind::Keyed("name"),
        ["imagePullSecrets"] => ListKind::Keyed("name"),
        ["hostAliases"] => ListKind::Keyed("ip"),
        ["topologySpreadConstraints"] => ListKind::Keyed("topologyKey"),
        ["schedulingGates"] => ListKind::Keyed("name"),
        ["resourceClaims"] => ListKind::Keyed("name"),
        _ => ListKind::Atomic,
    }
}

/// The list kind of the field at `path` in an object of `kind`.
pub fn list_kind(kind: &ResourceInfo, path: &[&str]) -> ListKind {
    // Object metadata, at the root or in a template.
    let meta_rel = match path {
        ["metadata", rest @ ..] => Some(rest),
        ["spec", "template", "metadata", rest @ ..] => Some(rest),
        _ => None,
    };
    if let Some(rest) = meta_rel {
        return match rest {
            ["ownerReferences"] => ListKind::Keyed("uid"),
            ["finalizers"] => ListKind::Set,
            _ => ListKind::Atomic,
        };
    }
    match (kind.group.as_str(), kind.kind.as_str(), path) {
        ("", "Pod", ["spec", rest @ ..]) => pod_spec_list(rest),
        ("", "ReplicationController", ["spec", "template", "spec", rest @ ..])
        | ("apps", "ReplicaSet" | "Deployment", ["spec", "template", "spec", rest @ ..]) => {
            pod_spec_list(rest)
        }
        ("", "Pod", ["status", "podIPs" | "hostIPs"]) => ListKind::Keyed("ip"),
        (
            "",
            "Pod" | "ReplicationController" | "Namespace" | "Node" | "Service",
            ["status", "conditions"],
        ) => ListKind::Keyed("type"),
        ("apps", "ReplicaSet" | "Deployment", ["status", "conditions"]) => ListKind::Keyed("type"),
        ("", "Node", ["status", "addresses"]) => ListKind::Keyed("type"),
        ("", "Node", ["status", "volumesAttached"]) => ListKind::Keyed("name"),
        ("", "Node", ["spec", "podCIDRs"]) => ListKind::Set,
        ("", "Service", ["spec", "ports"]) => ListKind::Keyed("port"),
        ("", "ServiceAccount", ["secrets"]) => ListKind::Keyed("name"),
        ("networking.k8s.io", "ServiceCIDR", ["status", "conditions"]) => ListKind::Keyed("type"),
        ("storage.k8s.io", "CSINode", ["spec", "drivers"]) => ListKind::Keyed("name"),
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
            ["webhooks"],
        )
        | (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
            ["webhooks", "matchConditions"],
        )
        | (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy",
            ["spec", "matchConditions"],
        ) => ListKind::Keyed("name"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", ["status", "conditions"])
        | ("autoscaling", "HorizontalPodAutoscaler", ["status", "conditions"])
        | (
            "flowcontrol.apiserver.k8s.io",
            "FlowSchema" | "PriorityLevelConfiguration",
            ["status", "conditions"],
        ) => ListKind::Keyed("type"),
        _ => ListKind::Atomic,
    }
}

/// Whether the map at `path` is atomic for server-side apply (`mapType=atomic`/`structType=atomic`).
pub fn map_is_atomic(kind: &ResourceInfo, path: &[&str]) -> bool {
    match (kind.group.as_str(), kind.kind.as_str(), path) {
        ("", "ReplicationController" | "Service", ["spec", "selector"]) => true,
        ("apps", "ReplicaSet" | "Deployment", ["spec", "selector"]) => true,
        (_, _, [.., "resources", "limits" | "requests"]) => false,
        _ => false,
    }
}

/// Whether the field at `path` has the `retainKeys` strategy (`spec.volumes` entries).
pub fn retain_keys(kind: &ResourceInfo, path: &[&str]) -> bool {
    matches!(
        (kind.kind.as_str(), path),
        ("Pod", ["spec", "volumes"]) | (_, ["spec", "template", "spec", "volumes"])
    )
}
