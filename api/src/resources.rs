//! Descriptions of served resources: what discovery lists and routing needs for one
//! (group, version, resource).
//!
//! A [`ResourceInfo`] is plain data (owned strings), so the apiserver can serve resources that are only
//! known at run time (CustomResourceDefinitions) the same way as built-in kinds. [`builtin`] lists the
//! built-in kinds in discovery order; the apiserver's resource registry registers them at start-up. Core
//! `v1` events and `events.k8s.io/v1` events share the storage segment `"events"` and therefore the same
//! objects.

/// A subresource such as `pods/status` or `replicationcontrollers/scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subresource {
    /// Subresource name: `status`, `scale`, `binding`.
    pub name: String,
    /// Group of the kind the subresource speaks (`autoscaling` for `scale`).
    pub group: String,
    /// Version of that kind.
    pub version: String,
    /// Kind the subresource accepts and returns (`Scale`, `Binding`, or the parent kind for `status`).
    pub kind: String,
    /// Verbs as discovery lists them.
    pub verbs: Vec<String>,
}

impl Subresource {
    /// A subresource speaking `group/version` `kind` with `verbs`.
    pub fn new(name: &str, (group, version, kind): (&str, &str, &str), verbs: &[&str]) -> Self {
        Subresource {
            name: name.to_string(),
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            verbs: strings(verbs),
        }
    }

    /// `status` of a kind: the kind itself, `get`/`patch`/`update`.
    pub fn status_of(group: &str, version: &str, kind: &str) -> Self {
        Self::new("status", (group, version, kind), SUBRESOURCE_VERBS)
    }

    /// `scale`: `autoscaling/v1` `Scale`, `get`/`patch`/`update`.
    pub fn scale() -> Self {
        Self::new("scale", ("autoscaling", "v1", "Scale"), SUBRESOURCE_VERBS)
    }
}

/// One served resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; `""` for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// URL segment, lower-case plural (`replicationcontrollers`).
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<String>,
    pub subresources: Vec<Subresource>,
    /// Kind of the collection (`PodList`).
    pub list_kind: String,
    /// Storage key prefix segment. Equal for kinds that share storage (both `Event` kinds: `"events"`).
    pub storage: String,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl ResourceInfo {
    /// A namespaced resource with the standard verbs, singular `kind` in lower case, list kind
    /// `<Kind>List` and storage segment `plural`; the builder methods change the rest.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        ResourceInfo {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
            singular: kind.to_ascii_lowercase(),
            namespaced: true,
            short_names: Vec::new(),
            categories: Vec::new(),
            verbs: strings(STANDARD_VERBS),
            subresources: Vec::new(),
            list_kind: format!("{kind}List"),
            storage: plural.to_string(),
        }
    }

    /// Cluster-scoped.
    pub fn cluster_scoped(mut self) -> Self {
        self.namespaced = false;
        self
    }

    /// Short names (`po`).
    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = strings(names);
        self
    }

    /// Categories (`all`).
    pub fn categories(mut self, categories: &[&str]) -> Self {
        self.categories = strings(categories);
        self
    }

    /// Verbs other than the standard ones.
    pub fn verbs(mut self, verbs: &[&str]) -> Self {
        self.verbs = strings(verbs);
        self
    }

    /// Adds a subresource.
    pub fn subresource(mut self, sub: Subresource) -> Self {
        self.subresources.push(sub);
        self
    }

    /// Adds the `status` subresource (the kind itself).
    pub fn with_status(self) -> Self {
        let status = Subresource::status_of(&self.group, &self.version, &self.kind);
        self.subresource(status)
    }

    /// Stores objects under another segment than the plural (resources sharing storage).
    pub fn storage(mut self, segment: &str) -> Self {
        self.storage = segment.to_string();
        self
    }

    /// `apiVersion` of objects of this kind: `"v1"` for core, `"apps/v1"` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `api_version` is this kind's [`api_version`](Self::api_version), without
    /// building it.
    pub fn is_api_version(&self, api_version: &str) -> bool {
        match api_version.split_once('/') {
            Some((group, version)) => self.group == group && self.version == version,
            None => self.group.is_empty() && self.version == api_version,
        }
    }

    /// Same as [`api_version`](Self::api_version): the group-version string.
    pub fn group_version(&self) -> String {
        self.api_version()
    }

    /// `pods` or `replicasets.apps`: the group-resource used in error messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Pod` or `Deployment.apps`: the group-kind used in 422 Invalid messages.
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The subresource called `name`, if served.
    pub fn subresource_named(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether the kind has a `status` subresource (spec/status split).
    pub fn has_status_subresource(&self) -> bool {
        self.subresource_named("status").is_some()
    }

    /// Whether this is `plural` of `group` (the same resource in any version).
    pub fn is(&self, group: &str, plural: &str) -> bool {
        self.group == group && self.plural == plural
    }
}

/// Verbs of an ordinary collection + object resource.
pub const STANDARD_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Verbs of `status` and `scale` subresources.
pub const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// Verbs of the streaming `exec`, `attach` and `portforward` subresources (connect: GET and POST).
pub const CONNECT_VERBS: &[&str] = &["create", "get"];

/// Verbs of the `proxy` subresources (connect with every method).
pub const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];

/// Every built-in resource, in discovery order: the core group, then the named groups.
pub fn builtin() -> Vec<ResourceInfo> {
    [
        core(),
        autoscaling(),
        flowcontrol(),
        admissionregistration(),
        apiregistration(),
        apiextensions(),
        apps(),
        batch(),
        coordination(),
        discovery(),
        events(),
        authentication(),
        authorization(),
        certificates(),
        rbac(),
        scheduling(),
        networking(),
        node(),
        storage(),
        policy(),
    ]
    .concat()
}

/// Core `v1`.
fn core() -> Vec<ResourceInfo> {
    vec![
        ResourceInfo::new("", "v1", "Namespace", "namespaces")
            .cluster_scoped()
            .short_names(&["ns"])
            .verbs(&[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ])
            .subresource(Subresource::new(
                "finalize",
                ("", "v1", "Namespace"),
                &["update"],
            ))
            .with_status(),
        ResourceInfo::new("", "v1", "Pod", "pods")
            .short_names(&["po"])
            .categories(&["all"])
            .with_status()
            .subresource(Subresource::new(
                "binding",
                ("", "v1", "Binding"),
                &["create"],
            ))
            .subresource(Subresource::new(
                "eviction",
                ("policy", "v1", "Eviction"),
                &["create"],
            ))
            .subresource(Subresource::new(
                "ephemeralcontainers",
                ("", "v1", "Pod"),
                SUBRESOURCE_VERBS,
            ))
            .subresource(Subresource::new(
                "resize",
                ("", "v1", "Pod"),
                SUBRESOURCE_VERBS,
            ))
            .subresource(Subresource::new("log", ("", "v1", "Pod"), &["get"]))
            .subresource(Subresource::new(
                "exec",
                ("", "v1", "PodExecOptions"),
                CONNECT_VERBS,
            ))
            .subresource(Subresource::new(
                "attach",
                ("", "v1", "PodAttachOptions"),
                CONNECT_VERBS,
            ))
            .subresource(Subresource::new(
                "portforward",
                ("", "v1", "PodPortForwardOptions"),
                CONNECT_VERBS,
            ))
            .subresource(Subresource::new(
                "proxy",
                ("", "v1", "PodProxyOptions"),
                PROXY_VERBS,
            )),
        ResourceInfo::new("", "v1", "ReplicationController", "replicationcontrollers")
            .short_names(&["rc"])
            .categories(&["all"])
            .with_status()
            .subresource(Subresource::scale()),
        ResourceInfo::new("", "v1", "Node", "nodes")
            .cluster_scoped()
            .short_names(&["no"])
            .with_status()
            .subresource(Subresource::new(
                "proxy",
                ("", "v1", "NodeProxyOptions"),
                PROXY_VERBS,
            )),
        ResourceInfo::new("", "v1", "Event", "events").short_names(&["ev"]),
        ResourceInfo::new("", "v1", "Service", "services")
            .short_names(&["svc"])
            .categories(&["all"])
            .with_status()
            .subresource(Subresource::new(
                "proxy",
                ("", "v1", "ServiceProxyOptions"),
                PROXY_VERBS,
            )),
        ResourceInfo::new("", "v1", "ConfigMap", "configmaps").short_names(&["cm"]),
        ResourceInfo::new("", "v1", "Secret", "secrets"),
        ResourceInfo::new("", "v1", "ServiceAccount", "serviceaccounts")
            .short_names(&["sa"])
            .subresource(Subresource::new(
                "token",
                ("authentication.k8s.io", "v1", "TokenRequest"),
                &["create"],
            )),
        ResourceInfo::new("", "v1", "PersistentVolume", "persistentvolumes")
            .cluster_scoped()
            .short_names(&["pv"])
            .with_status(),
        ResourceInfo::new("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
            .short_names(&["pvc"])
            .with_status(),
        ResourceInfo::new("", "v1", "PodTemplate", "podtemplates"),
        ResourceInfo::new("", "v1", "LimitRange", "limitranges").short_names(&["limits"]),
        ResourceInfo::new("", "v1", "ResourceQuota", "resourcequotas")
            .short_names(&["quota"])
            .with_status(),
        ResourceInfo::new("", "v1", "Endpoints", "endpoints").short_names(&["ep"]),
        // Not stored: the health of the control plane's components, computed per request.
        ResourceInfo::new("", "v1", "ComponentStatus", "componentstatuses")
            .cluster_scoped()
            .short_names(&["cs"])
            .verbs(&["get", "list"]),
        // Not stored: a POST binds the pod the Binding names (as `pods/binding`).
        ResourceInfo::new("", "v1", "Binding", "bindings").verbs(&["create"]),
    ]
}

/// `discovery.k8s.io/v1`.
fn discovery() -> Vec<ResourceInfo> {
    vec![ResourceInfo::new(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
    )]
}

/// `apps/v1`.
fn apps() -> Vec<ResourceInfo> {
    vec![
        ResourceInfo::new("apps", "v1", "ControllerRevision", "controllerrevisions"),
        ResourceInfo::new("apps", "v1", "DaemonSet", "daemonsets")
            .short_names(&["ds"])
            .categories(&["all"])
            .with_status(),
        ResourceInfo::new("apps", "v1", "ReplicaSet", "replicasets")
            .short_names(&["rs"])
            .categories(&["all"])
            .with_status()
            .subresource(Subresource::scale()),
        ResourceInfo::new("apps", "v1", "Deployment", "deployments")
            .short_names(&["deploy"])
            .categories(&["all"])
            .with_status()
            .subresource(Subresource::scale()),
        ResourceInfo::new("apps", "v1", "StatefulSet", "statefulsets")
            .short_names(&["sts"])
            .categories(&["all"])
            .with_status()
            .subresource(Subresource::scale()),
    ]
}

/// `batch/v1`.
fn batch() -> Vec<ResourceInfo> {
    vec![
        ResourceInfo::new("batch", "v1", "CronJob", "cronjobs")
            .short_names(&["cj"])
            .categories(&["all"])
            .with_status(),
        ResourceInfo::new("batch", "v1", "Job", "jobs")
            .categories(&["all"])
            .with_status(),
    ]
}

/// `coordination.k8s.io/v1`.
fn coordination() -> Vec<ResourceInfo> {
    vec![ResourceInfo::new(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
    )]
}

/// `events.k8s.io/v1`: the core events, another version of the same storage.
fn events() -> Vec<ResourceInfo> {
    vec![ResourceInfo::new("events.k8s.io", "v1", "Event", "events")
        .short_names(&["ev"])
        .storage("events")]
}

/// `rbac.authorization.k8s.io/v1`: roles and their bindings, none with status or short names.
fn rbac() -> Vec<ResourceInfo> {
    const G: &str = "rbac.authorization.k8s.io";
    vec![
        ResourceInfo::new(G, "v1", "ClusterRoleBinding", "clusterrolebindings").cluster_scoped(),
        ResourceInfo::new(G, "v1", "ClusterRole", "clusterroles").cluster_scoped(),
        ResourceInfo::new(G, "v1", "RoleBinding", "rolebindings"),
        ResourceInfo::new(G, "v1", "Role", "roles"),
    ]
}

/// `scheduling.k8s.io/v1`.
fn scheduling() -> Vec<ResourceInfo> {
    vec![ResourceInfo::new(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
    )
    .cluster_scoped()
    .short_names(&["pc"])]
}

/// `networking.k8s.io/v1`.
fn networking() -> Vec<ResourceInfo> {
    const G: &str = "networking.k8s.io";
    vec![
        ResourceInfo::new(G, "v1", "IngressClass", "ingressclasses").cluster_scoped(),
        ResourceInfo::new(G, "v1", "Ingress", "ingresses")
            .short_names(&["ing"])
            .with_status(),
        ResourceInfo::new(G, "v1", "IPAddress", "ipaddresses")
            .cluster_scoped()
            .short_names(&["ip"]),
        ResourceInfo::new(G, "v1", "NetworkPolicy", "networkpolicies").short_names(&["netpol"]),
        ResourceInfo::new(G, "v1", "ServiceCIDR", "servicecidrs")
            .cluster_scoped()
            .with_status(),
    ]
}

/// `node.k8s.io/v1`.
fn node() -> Vec<ResourceInfo> {
    vec![ResourceInfo::new("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses").cluster_scoped()]
}

/// `storage.k8s.io/v1`.
fn storage() -> Vec<ResourceInfo> {
    const G: &str = "storage.k8s.io";
    vec![
        ResourceInfo::new(G, "v1", "CSIDriver", "csidrivers").cluster_scoped(),
        ResourceInfo::new(G, "v1", "CSINode", "csinodes").cluster_scoped(),
        ResourceInfo::new(G, "v1", "CSIStorageCapacity", "csistoragecapacities"),
        ResourceInfo::new(G, "v1", "StorageClass", "storageclasses")
            .cluster_scoped()
            .short_names(&["sc"]),
        ResourceInfo::new(G, "v1", "VolumeAttachment", "volumeattachments")
            .cluster_scoped()
            .with_status(),
    ]
}

/// `policy/v1`: PodDisruptionBudgets (the `Eviction` kind is `pods/eviction`).
fn policy() -> Vec<ResourceInfo> {
    vec![ResourceInfo::new(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    )
    .short_names(&["pdb"])
    .with_status()]
}

/// `apiregistration.k8s.io/v1`: APIServices (one `Local` per served group-version).
fn apiregistration() -> Vec<ResourceInfo> {
    vec![
        ResourceInfo::new("apiregistration.k8s.io", "v1", "APIService", "apiservices")
            .cluster_scoped()
            .categories(&["api-extensions"])
            .with_status(),
    ]
}

/// `apiextensions.k8s.io/v1`: CustomResourceDefinitions.
fn apiextensions() -> Vec<ResourceInfo> {
    vec![ResourceInfo::new(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
    .cluster_scoped()
    .short_names(&["crd", "crds"])
    .categories(&["api-extensions"])
    .with_status()]
}

/// `authentication.k8s.io/v1`: the create-only review kinds.
fn authentication() -> Vec<ResourceInfo> {
    const G: &str = "authentication.k8s.io";
    vec![
        ResourceInfo::new(G, "v1", "SelfSubjectReview", "selfsubjectreviews")
            .cluster_scoped()
            .verbs(&["create"]),
        ResourceInfo::new(G, "v1", "TokenReview", "tokenreviews")
            .cluster_scoped()
            .verbs(&["create"]),
    ]
}

/// `authorization.k8s.io/v1`: the create-only access reviews.
fn authorization() -> Vec<ResourceInfo> {
    const G: &str = "authorization.k8s.io";
    vec![
        ResourceInfo::new(
            G,
            "v1",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
        )
        .verbs(&["create"]),
        ResourceInfo::new(
            G,
            "v1",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
        )
        .cluster_scoped()
        .verbs(&["create"]),
        ResourceInfo::new(G, "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews")
            .cluster_scoped()
            .verbs(&["create"]),
        ResourceInfo::new(G, "v1", "SubjectAccessReview", "subjectaccessreviews")
            .cluster_scoped()
            .verbs(&["create"]),
    ]
}

/// `certificates.k8s.io/v1`: CertificateSigningRequests with `approval` and `status`.
fn certificates() -> Vec<ResourceInfo> {
    const G: &str = "certificates.k8s.io";
    vec![ResourceInfo::new(
        G,
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
    )
    .cluster_scoped()
    .short_names(&["csr"])
    .subresource(Subresource::new(
        "approval",
        (G, "v1", "CertificateSigningRequest"),
        SUBRESOURCE_VERBS,
    ))
    .with_status()]
}

/// Whether a resource is one of the create-only reviews, answered without being stored.
pub fn is_review(info: &ResourceInfo) -> bool {
    matches!(
        info.group.as_str(),
        "authentication.k8s.io" | "authorization.k8s.io"
    )
}

/// `autoscaling/v2` and `autoscaling/v1`: one HorizontalPodAutoscaler storage (the v2 form, as
/// upstream stores it) served at both versions, v2 first (the preferred version).
fn autoscaling() -> Vec<ResourceInfo> {
    ["v2", "v1"]
        .into_iter()
        .map(|v| {
            ResourceInfo::new(
                "autoscaling",
                v,
                "HorizontalPodAutoscaler",
                "horizontalpodautoscalers",
            )
            .short_names(&["hpa"])
            .categories(&["all"])
            .with_status()
            .storage("horizontalpodautoscalers")
        })
        .collect()
}

/// `flowcontrol.apiserver.k8s.io/v1`: API Priority and Fairness configuration.
fn flowcontrol() -> Vec<ResourceInfo> {
    const G: &str = "flowcontrol.apiserver.k8s.io";
    vec![
        ResourceInfo::new(G, "v1", "FlowSchema", "flowschemas")
            .cluster_scoped()
            .with_status(),
        ResourceInfo::new(
            G,
            "v1",
            "PriorityLevelConfiguration",
            "prioritylevelconfigurations",
        )
        .cluster_scoped()
        .with_status(),
    ]
}

/// `admissionregistration.k8s.io/v1`: webhook configurations and validating admission policies.
fn admissionregistration() -> Vec<ResourceInfo> {
    const G: &str = "admissionregistration.k8s.io";
    vec![
        ResourceInfo::new(
            G,
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        )
        .cluster_scoped()
        .categories(&["api-extensions"]),
        ResourceInfo::new(
            G,
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
        )
        .cluster_scoped()
        .categories(&["api-extensions"])
        .with_status(),
        ResourceInfo::new(
            G,
            "v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        )
        .cluster_scoped()
        .categories(&["api-extensions"]),
        ResourceInfo::new(
            G,
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        )
        .cluster_scoped()
        .categories(&["api-extensions"]),
    ]
}

/// Splits an `apiVersion` (`"apps/v1"`, `"v1"`) into (group, version).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(all: &'a [ResourceInfo], g: &str, v: &str, p: &str) -> Option<&'a ResourceInfo> {
        all.iter()
            .find(|r| r.group == g && r.version == v && r.plural == p)
    }

    #[test]
    fn builtin_entries_are_distinct() {
        let all = builtin();
        for r in &all {
            assert_eq!(find(&all, &r.group, &r.version, &r.plural), Some(r));
            let by_kind = all
                .iter()
                .find(|x| x.group == r.group && x.version == r.version && x.kind == r.kind);
            assert_eq!(by_kind, Some(r));
        }
        assert!(find(&all, "", "v1", "foos").is_none());
    }

    #[test]
    fn events_share_storage_and_api_versions_render() {
        let all = builtin();
        let core = find(&all, "", "v1", "events").map(|r| r.storage.clone());
        let new = find(&all, "events.k8s.io", "v1", "events").map(|r| r.storage.clone());
        assert_eq!(core, new);
        let d = find(&all, "apps", "v1", "deployments");
        assert_eq!(d.map(|d| d.api_version()), Some("apps/v1".to_string()));
        assert_eq!(
            d.map(|d| d.group_resource()),
            Some("deployments.apps".to_string())
        );
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(split_api_version("v1"), ("", "v1"));
    }

    #[test]
    fn scale_subresources_speak_autoscaling() {
        let all = builtin();
        for (g, p) in [
            ("", "replicationcontrollers"),
            ("apps", "deployments"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
        ] {
            let r = find(&all, g, "v1", p);
            let s = r.and_then(|r| r.subresource_named("scale"));
            assert_eq!(
                s.map(|s| (s.group.as_str(), s.kind.as_str())),
                Some(("autoscaling", "Scale"))
            );
        }
    }
}
