//! The static table of served resources.
//!
//! One [`ResourceInfo`] per (group, version, resource). The table drives discovery (verbs, short names,
//! categories, subresources), URL routing (plural, scope) and storage (the `storage` key segment; core
//! `v1` events and `events.k8s.io/v1` events share the segment `"events"` and therefore the same objects).
//! The order of [`resources`] is the order discovery lists them.

/// A subresource such as `pods/status` or `replicationcontrollers/scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource {
    /// Subresource name: `status`, `scale`, `binding`.
    pub name: &'static str,
    /// Group of the kind the subresource speaks (`autoscaling` for `scale`).
    pub group: &'static str,
    /// Version of that kind.
    pub version: &'static str,
    /// Kind the subresource accepts and returns (`Scale`, `Binding`, or the parent kind for `status`).
    pub kind: &'static str,
    /// Verbs as discovery lists them.
    pub verbs: &'static [&'static str],
}

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// URL segment, lower-case plural (`replicationcontrollers`).
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub subresources: &'static [Subresource],
    /// Kind of the collection (`PodList`).
    pub list_kind: &'static str,
    /// Storage key prefix segment. Equal for kinds that share storage (both `Event` kinds: `"events"`).
    pub storage: &'static str,
}

impl ResourceInfo {
    /// `apiVersion` of objects of this kind: `"v1"` for core, `"apps/v1"` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Same as [`api_version`](Self::api_version): the group-version string.
    pub fn group_version(&self) -> String {
        self.api_version()
    }

    /// `pods` or `replicasets.apps`: the group-resource used in error messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Pod` or `Deployment.apps`: the group-kind used in 422 Invalid messages.
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The subresource called `name`, if served.
    pub fn subresource(&self, name: &str) -> Option<&'static Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether the kind has a `status` subresource (spec/status split).
    pub fn has_status_subresource(&self) -> bool {
        self.subresource("status").is_some()
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

const fn status_of(group: &'static str, version: &'static str, kind: &'static str) -> Subresource {
    Subresource {
        name: "status",
        group,
        version,
        kind,
        verbs: SUBRESOURCE_VERBS,
    }
}

const SCALE: Subresource = Subresource {
    name: "scale",
    group: "autoscaling",
    version: "v1",
    kind: "Scale",
    verbs: SUBRESOURCE_VERBS,
};

const BINDING: Subresource = Subresource {
    name: "binding",
    group: "",
    version: "v1",
    kind: "Binding",
    verbs: &["create"],
};

static POD_SUB: [Subresource; 2] = [status_of("", "v1", "Pod"), BINDING];
static RC_SUB: [Subresource; 2] = [status_of("", "v1", "ReplicationController"), SCALE];
static NODE_SUB: [Subresource; 1] = [status_of("", "v1", "Node")];
static NS_SUB: [Subresource; 1] = [status_of("", "v1", "Namespace")];
static SVC_SUB: [Subresource; 1] = [status_of("", "v1", "Service")];
static RS_SUB: [Subresource; 2] = [status_of("apps", "v1", "ReplicaSet"), SCALE];
static DEPLOY_SUB: [Subresource; 2] = [status_of("apps", "v1", "Deployment"), SCALE];

static RESOURCES: [ResourceInfo; 13] = [
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        subresources: &NS_SUB,
        list_kind: "NamespaceList",
        storage: "namespaces",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        verbs: STANDARD_VERBS,
        subresources: &POD_SUB,
        list_kind: "PodList",
        storage: "pods",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        namespaced: true,
        short_names: &["rc"],
        categories: &["all"],
        verbs: STANDARD_VERBS,
        subresources: &RC_SUB,
        list_kind: "ReplicationControllerList",
        storage: "replicationcontrollers",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        verbs: STANDARD_VERBS,
        subresources: &NODE_SUB,
        list_kind: "NodeList",
        storage: "nodes",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        verbs: STANDARD_VERBS,
        subresources: &[],
        list_kind: "EventList",
        storage: "events",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        namespaced: true,
        short_names: &["svc"],
        categories: &["all"],
        verbs: STANDARD_VERBS,
        subresources: &SVC_SUB,
        list_kind: "ServiceList",
        storage: "services",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        namespaced: true,
        short_names: &["cm"],
        categories: &[],
        verbs: STANDARD_VERBS,
        subresources: &[],
        list_kind: "ConfigMapList",
        storage: "configmaps",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: STANDARD_VERBS,
        subresources: &[],
        list_kind: "SecretList",
        storage: "secrets",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        namespaced: true,
        short_names: &["sa"],
        categories: &[],
        verbs: STANDARD_VERBS,
        subresources: &[],
        list_kind: "ServiceAccountList",
        storage: "serviceaccounts",
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        namespaced: true,
        short_names: &["rs"],
        categories: &["all"],
        verbs: STANDARD_VERBS,
        subresources: &RS_SUB,
        list_kind: "ReplicaSetList",
        storage: "replicasets",
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        namespaced: true,
        short_names: &["deploy"],
        categories: &["all"],
        verbs: STANDARD_VERBS,
        subresources: &DEPLOY_SUB,
        list_kind: "DeploymentList",
        storage: "deployments",
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: STANDARD_VERBS,
        subresources: &[],
        list_kind: "LeaseList",
        storage: "leases",
    },
    ResourceInfo {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        verbs: STANDARD_VERBS,
        subresources: &[],
        list_kind: "EventList",
        storage: "events",
    },
];

/// Every served resource, in discovery order (core first, then `apps`, `coordination.k8s.io`,
/// `events.k8s.io`).
pub fn resources() -> &'static [ResourceInfo] {
    &RESOURCES
}

/// The resource served at `/{group}/{version}/{plural}`.
pub fn find_resource(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource whose objects have this group, version and kind.
pub fn find_by_kind(group: &str, version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
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

    #[test]
    fn lookups_find_every_entry() {
        for r in resources() {
            assert_eq!(find_resource(r.group, r.version, r.plural), Some(r));
            assert_eq!(find_by_kind(r.group, r.version, r.kind), Some(r));
        }
        assert!(find_resource("", "v1", "foos").is_none());
    }

    #[test]
    fn events_share_storage_and_api_versions_render() {
        let core = find_resource("", "v1", "events").map(|r| r.storage);
        let new = find_resource("events.k8s.io", "v1", "events").map(|r| r.storage);
        assert_eq!(core, new);
        let d = find_resource("apps", "v1", "deployments");
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
        for (g, p) in [
            ("", "replicationcontrollers"),
            ("apps", "deployments"),
            ("apps", "replicasets"),
        ] {
            let r = find_resource(g, "v1", p);
            let s = r.and_then(|r| r.subresource("scale"));
            assert_eq!(s.map(|s| (s.group, s.kind)), Some(("autoscaling", "Scale")));
        }
    }
}
