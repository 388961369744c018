//! The patch schema of the built-in kinds: for each list field, how strategic merge and server-side
//! apply treat it (Kubernetes' `patchStrategy`/`patchMergeKey` and `listType`/`listMapKeys` tags), and
//! which maps are atomic. Paths are the field names from the object root, list positions omitted
//! (`["spec", "containers", "ports"]`).

use std::borrow::Cow;

use api::ResourceInfo;
use serde_json::Value;

/// How a list field merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole (`atomic`; no patch strategy).
    Atomic,
    /// Merged element-wise by these keys (`patchStrategy: merge`, `patchMergeKey`; a custom
    /// resource's `x-kubernetes-list-type: map` with its `x-kubernetes-list-map-keys`).
    Keyed(Vec<Cow<'static, str>>),
    /// A set of primitives (`patchStrategy: merge` on a scalar list, e.g. `finalizers`).
    Set,
}

impl ListKind {
    /// A list merged by one key of a built-in kind.
    pub fn keyed(key: &'static str) -> ListKind {
        ListKind::Keyed(vec![Cow::Borrowed(key)])
    }
}

/// The key of a list element under `keys`, as managed fields name it (`k:{"name":"c"}`), from
/// the keys the element has; `None` when it has none of them.
pub fn key_segment(keys: &[Cow<'static, str>], item: &Value) -> Option<String> {
    let mut km = serde_json::Map::new();
    for k in keys {
        if let Some(v) = item.get(k.as_ref()) {
            km.insert(k.to_string(), v.clone());
        }
    }
    (!km.is_empty()).then(|| format!("k:{}", Value::Object(km)))
}

/// Whether two list elements have the same key under `keys` (each has at least one of them).
pub fn same_key(keys: &[Cow<'static, str>], a: &Value, b: &Value) -> bool {
    keys.iter().any(|k| a.get(k.as_ref()).is_some())
        && keys.iter().all(|k| a.get(k.as_ref()) == b.get(k.as_ref()))
}

/// What the patch code knows of a kind: its description, and for a custom resource the
/// structural schema its list and map types come from. Dereferences to the [`ResourceInfo`].
#[derive(Clone, Copy)]
pub struct PatchKind<'a> {
    info: &'a ResourceInfo,
    custom: Option<&'a schema::Structural>,
}

impl std::ops::Deref for PatchKind<'_> {
    type Target = ResourceInfo;
    fn deref(&self) -> &ResourceInfo {
        self.info
    }
}

impl<'a> From<&'a ResourceInfo> for PatchKind<'a> {
    fn from(info: &'a ResourceInfo) -> Self {
        PatchKind { info, custom: None }
    }
}

impl<'a> From<&PatchKind<'a>> for PatchKind<'a> {
    fn from(kind: &PatchKind<'a>) -> Self {
        *kind
    }
}

impl<'a> PatchKind<'a> {
    /// A custom resource's kind with its schema.
    pub fn custom(info: &'a ResourceInfo, schema: Option<&'a schema::Structural>) -> Self {
        PatchKind {
            info,
            custom: schema,
        }
    }

    /// The list kind at `path` (object metadata as for every kind).
    pub fn list_kind(&self, path: &[&str]) -> ListKind {
        match (self.custom, path) {
            (Some(s), [first, ..]) if *first != "metadata" => match s.list_type(path) {
                Some(schema::ListType::Set) => ListKind::Set,
                Some(schema::ListType::Map(keys)) if !keys.is_empty() => {
                    ListKind::Keyed(keys.into_iter().map(Cow::Owned).collect())
                }
                _ => ListKind::Atomic,
            },
            _ => list_kind(self.info, path),
        }
    }

    /// Whether the map at `path` is atomic.
    pub fn map_is_atomic(&self, path: &[&str]) -> bool {
        match (self.custom, path) {
            (Some(s), [first, ..]) if *first != "metadata" => s.map_is_atomic(path),
            _ => map_is_atomic(self.info, path),
        }
    }
}

/// Lists inside a PodSpec, relative to the pod spec.
fn pod_spec_list(rel: &[&str]) -> ListKind {
    match rel {
        ["containers" | "initContainers" | "ephemeralContainers"] => ListKind::keyed("name"),
        ["containers" | "initContainers" | "ephemeralContainers", rest @ ..] => match rest {
            ["ports"] => ListKind::keyed("containerPort"),
            ["env"] => ListKind::keyed("name"),
            ["volumeMounts"] => ListKind::keyed("mountPath"),
            ["volumeDevices"] => ListKind::keyed("devicePath"),
            ["resizePolicy"] => ListKind::keyed("resourceName"),
            ["resources", "claims"] => ListKind::keyed("name"),
            _ => ListKind::Atomic,
        },
        ["volumes"] => ListKind::keyed("name"),
        ["imagePullSecrets"] => ListKind::keyed("name"),
        ["hostAliases"] => ListKind::keyed("ip"),
        ["topologySpreadConstraints"] => ListKind::keyed("topologyKey"),
        ["schedulingGates"] => ListKind::keyed("name"),
        ["resourceClaims"] => ListKind::keyed("name"),
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
            ["ownerReferences"] => ListKind::keyed("uid"),
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
        ("", "Pod", ["status", "podIPs" | "hostIPs"]) => ListKind::keyed("ip"),
        (
            "",
            "Pod" | "ReplicationController" | "Namespace" | "Node" | "Service",
            ["status", "conditions"],
        ) => ListKind::keyed("type"),
        ("apps", "ReplicaSet" | "Deployment", ["status", "conditions"]) => ListKind::keyed("type"),
        ("", "Node", ["status", "addresses"]) => ListKind::keyed("type"),
        ("", "Node", ["status", "volumesAttached"]) => ListKind::keyed("name"),
        ("", "Node", ["spec", "podCIDRs"]) => ListKind::Set,
        ("", "Service", ["spec", "ports"]) => ListKind::keyed("port"),
        ("", "ServiceAccount", ["secrets"]) => ListKind::keyed("name"),
        ("networking.k8s.io", "ServiceCIDR", ["status", "conditions"]) => ListKind::keyed("type"),
        ("storage.k8s.io", "CSINode", ["spec", "drivers"]) => ListKind::keyed("name"),
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
        ) => ListKind::keyed("name"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", ["status", "conditions"])
        | ("autoscaling", "HorizontalPodAutoscaler", ["status", "conditions"])
        | (
            "flowcontrol.apiserver.k8s.io",
            "FlowSchema" | "PriorityLevelConfiguration",
            ["status", "conditions"],
        ) => ListKind::keyed("type"),
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
