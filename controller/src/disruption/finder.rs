//! The pods' controllers and their scale (`getExpectedScale` and the `podControllerFinder`s of
//! upstream's disruption controller).
//!
//! A pod's controller (its `controller: true` ownerReference) is looked up, in upstream's order,
//! as a ReplicationController, as a ReplicaSet owned by a Deployment (the Deployment's replicas
//! count), as a ReplicaSet that is not, as a StatefulSet — all from informer caches — and
//! otherwise (a kind without a lister, such as a custom resource with a scale subresource, or an
//! object not in a cache yet) through the `scale` subresource of the kind it names, found through
//! discovery. A cached or fetched controller counts only
//! if its UID is the reference's. Each controller is counted once however many pods it has.
//! A pod without a controller is "unmanaged" (reported, not counted); a pod whose controller
//! cannot be found, or whose kind has no scale subresource, fails the computation.

use std::collections::HashMap;

use client::{Client, GroupVersionKind, Lister, RestMapper};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::cached_pod::CachedPod;
use crate::pod_util::controller_of;

/// A controller found for a pod: its UID and desired replicas.
type ControllerScale = (String, i32);

/// The caches and clients the finders read.
pub struct Finders {
    pub(super) replicasets: Lister<ReplicaSet>,
    pub(super) deployments: Lister<Deployment>,
    pub(super) replication_controllers: Lister<ReplicationController>,
    pub(super) statefulsets: Lister<StatefulSet>,
    pub(super) mapper: RestMapper,
    pub(super) client: Client,
}

/// `(group, version)` of an `apiVersion`.
fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// `verifyGroupKind`.
fn is_kind(r: &OwnerReference, kind: &str, groups: &[&str]) -> bool {
    r.kind == kind && groups.contains(&group_version(&r.api_version).0)
}

impl Finders {
    /// `getExpectedScale`: the sum of the scales of the pods' controllers, and the names of the
    /// pods without a controller.
    pub async fn expected_scale(&self, pods: &[&CachedPod]) -> Result<(i32, Vec<String>), String> {
        let mut scales: HashMap<String, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(cref) = controller_of(&pod.metadata) else {
                unmanaged.push(name);
                continue;
            };
            if scales.contains_key(&cref.uid) {
                continue;
            }
            let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
            match self.find(cref, ns).await? {
                Some((uid, n)) => {
                    scales.insert(uid, n);
                }
                None => return Err(format!("found no controllers for pod \"{name}\"")),
            }
        }
        // Saturating: two controllers near `i32::MAX` replicas must not overflow the sum.
        let expected = scales.values().fold(0i32, |a, n| a.saturating_add(*n));
        Ok((expected, unmanaged))
    }

    async fn find(
        &self,
        cref: &OwnerReference,
        ns: &str,
    ) -> Result<Option<ControllerScale>, String> {
        if let Some(found) = self.cached(cref, ns) {
            return Ok(Some(found));
        }
        // Not cached (yet), or another UID: ask the scale subresource, as upstream's last finder.
        self.scale(cref, ns).await
    }

    /// The lister-backed finders, in upstream's order.
    fn cached(&self, cref: &OwnerReference, ns: &str) -> Option<ControllerScale> {
        let uid_ok = |uid: &Option<String>| uid.as_deref() == Some(cref.uid.as_str());
        if is_kind(cref, "ReplicationController", &[""]) {
            let rc = self.replication_controllers.namespace(ns).get(&cref.name)?;
            let n = rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            return uid_ok(&rc.metadata.uid).then(|| (cref.uid.clone(), n));
        }
        if is_kind(cref, "ReplicaSet", &["apps", "extensions"]) {
            let rs = self.replicasets.namespace(ns).get(&cref.name)?;
            if !uid_ok(&rs.metadata.uid) {
                return None;
            }
            return match controller_of(&rs.metadata) {
                // `getPodDeployment`.
                Some(d) if is_kind(d, "Deployment", &["apps", "extensions"]) => {
                    let dep = self.deployments.namespace(ns).get(&d.name)?;
                    let n = dep.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    (dep.metadata.uid.as_deref() == Some(d.uid.as_str()))
                        .then(|| (d.uid.clone(), n))
                }
                // A ReplicaSet controlled by some other Deployment-kind owner is skipped.
                Some(d) if d.kind == "Deployment" => None,
                // `getPodReplicaSet`.
                _ => {
                    let n = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    Some((cref.uid.clone(), n))
                }
            };
        }
        if is_kind(cref, "StatefulSet", &["apps"]) {
            let ss = self.statefulsets.namespace(ns).get(&cref.name)?;
            let n = ss.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            return uid_ok(&ss.metadata.uid).then(|| (cref.uid.clone(), n));
        }
        None
    }

    /// `getScaleController`: the `scale` subresource of the referenced object.
    async fn scale(
        &self,
        cref: &OwnerReference,
        ns: &str,
    ) -> Result<Option<ControllerScale>, String> {
        let (group, version) = group_version(&cref.api_version);
        let gvk = GroupVersionKind::new(group, version, &cref.kind);
        let resource = self.mapper.resolve(&gvk).await.map_err(|e| e.to_string())?;
        let api = self.client.dynamic(&resource, Some(ns));
        let raw = match api.get_subresource(&cref.name, "scale").await {
            Ok(v) => v,
            Err(e) if e.is_not_found() => {
                if resource.has_subresource("scale") {
                    return Ok(None);
                }
                let gr = if resource.group.is_empty() {
                    resource.plural.clone()
                } else {
                    format!("{}.{}", resource.plural, resource.group)
                };
                return Err(format!("{gr} does not implement the scale subresource"));
            }
            Err(e) => return Err(e.to_string()),
        };
        let scale: Scale = serde_json::from_value(raw).map_err(|e| e.to_string())?;
        if scale.metadata.uid.as_deref() != Some(cref.uid.as_str()) {
            return Ok(None);
        }
        let n = scale.spec.and_then(|s| s.replicas).unwrap_or(0);
        Ok(Some((cref.uid.clone(), n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_kinds_are_verified_like_upstream() {
        let r = |api_version: &str, kind: &str| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "x".into(),
            uid: "u".into(),
            ..Default::default()
        };
        assert!(is_kind(
            &r("apps/v1", "ReplicaSet"),
            "ReplicaSet",
            &["apps", "extensions"]
        ));
        assert!(is_kind(
            &r("extensions/v1beta1", "ReplicaSet"),
            "ReplicaSet",
            &["apps", "extensions"]
        ));
        assert!(!is_kind(
            &r("example.com/v1", "ReplicaSet"),
            "ReplicaSet",
            &["apps"]
        ));
        assert!(is_kind(
            &r("v1", "ReplicationController"),
            "ReplicationController",
            &[""]
        ));
        assert_eq!(group_version("example.com/v1"), ("example.com", "v1"));
        assert_eq!(group_version("v1"), ("", "v1"));
    }
}
