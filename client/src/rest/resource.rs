//! What a REST path is built from: a resource's group, version, kind, plural and scope
//! ([`ApiResource`], kube-rs's type of that name; apimachinery's `RESTMapping`), and a kind's
//! [`GroupVersionKind`].
//!
//! A typed [`Api<K>`](crate::Api) takes its `ApiResource` from `K`'s k8s-openapi constants; a
//! dynamic one from discovery ([`RestMapper`](crate::dynamic::RestMapper)) or from the caller.

use std::any::TypeId;
use std::fmt;

/// apimachinery's `schema.GroupVersionKind`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl GroupVersionKind {
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// From an object's `apiVersion` (`v1`, `group/version`) and `kind`
    /// (`schema.FromAPIVersionAndKind`).
    pub fn from_api_version(api_version: &str, kind: impl Into<String>) -> Self {
        let (group, version) = split_api_version(api_version);
        GroupVersionKind::new(group, version, kind)
    }

    /// `apiVersion`: `version` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        join_api_version(&self.group, &self.version)
    }
}

impl fmt::Display for GroupVersionKind {
    /// As apimachinery prints it: `apps/v1, Kind=Deployment`, `/v1, Kind=Pod`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// `("", "v1")` for `v1`, `("apps", "v1")` for `apps/v1`.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

fn join_api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// One served resource: everything a REST path and a typed object header need.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ApiResource {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    /// `version` or `group/version`.
    pub api_version: String,
    pub kind: String,
    /// The URL segment, e.g. `configmaps`.
    pub plural: String,
    /// Whether objects live in namespaces (`false`: cluster-scoped).
    pub namespaced: bool,
    /// Served subresources, e.g. `status`, `scale` (from discovery; empty when not known).
    pub subresources: Vec<String>,
}

impl ApiResource {
    /// A resource from its parts (e.g. a CRD's group, version, kind, plural and scope).
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
        plural: impl Into<String>,
        namespaced: bool,
    ) -> Self {
        let group = group.into();
        let version = version.into();
        ApiResource {
            api_version: join_api_version(&group, &version),
            group,
            version,
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
            subresources: Vec::new(),
        }
    }

    /// The resource of a k8s-openapi type.
    pub fn of<K: k8s_openapi::Resource>() -> Self
    where
        K::Scope: 'static,
    {
        ApiResource {
            group: K::GROUP.to_string(),
            version: K::VERSION.to_string(),
            api_version: K::API_VERSION.to_string(),
            kind: K::KIND.to_string(),
            plural: K::URL_PATH_SEGMENT.to_string(),
            namespaced: TypeId::of::<K::Scope>()
                == TypeId::of::<k8s_openapi::NamespaceResourceScope>(),
            subresources: Vec::new(),
        }
    }

    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new(&self.group, &self.version, &self.kind)
    }

    /// Whether discovery listed `name` (e.g. `status`) as a subresource.
    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s == name)
    }

    /// `/api/v1[/namespaces/{ns}]/{plural}` or `/apis/{group}/{version}[/namespaces/{ns}]/{plural}`.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let mut p = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if let Some(ns) = namespace {
            p.push_str("/namespaces/");
            p.push_str(ns);
        }
        p.push('/');
        p.push_str(&self.plural);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Node};

    #[test]
    fn typed_resources_and_paths() {
        let cm = ApiResource::of::<ConfigMap>();
        assert!(cm.namespaced);
        assert_eq!(
            cm.collection_path(Some("ns")),
            "/api/v1/namespaces/ns/configmaps"
        );
        assert!(!ApiResource::of::<Node>().namespaced);
        let d = ApiResource::of::<Deployment>();
        assert_eq!(d.collection_path(None), "/apis/apps/v1/deployments");
        assert_eq!(d.gvk().to_string(), "apps/v1, Kind=Deployment");
        let crd = ApiResource::new("example.com", "v1", "Widget", "widgets", true);
        assert_eq!(crd.api_version, "example.com/v1");
        assert_eq!(
            GroupVersionKind::from_api_version("v1", "Pod"),
            GroupVersionKind::new("", "v1", "Pod")
        );
        assert_eq!(
            GroupVersionKind::new("a.io", "v2", "X").api_version(),
            "a.io/v2"
        );
    }
}
