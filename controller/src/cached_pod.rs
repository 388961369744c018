//! What the controller manager's shared pod informer keeps of a pod: its metadata whole, and of
//! its spec and status what a controller of this crate reads, as a type of its own
//! ([`CachedPod`]) that the informer decodes the watch into (client-go's `SetTransform` is meant
//! for the same: an informer that keeps every pod for its life holds less of each; issue 17
//! item 7). The fake kubelets do the same with their own type (`kubelet_fake::transform`).
//!
//! A type rather than a `Pod` with fields emptied: k8s-openapi's `Container` is 2,120 bytes,
//! `PodSpec` 1,416 and `ContainerStatus` 752 before their contents, every field present or not,
//! so a pod kept as a `Pod` costs that much whatever is dropped.
//!
//! The fields keep the `core/v1` names and shapes (`pod.spec.as_ref()?.containers`,
//! `pod.status.as_ref()?.conditions`), so a controller reads a cached pod as it reads a `Pod`.
//! Dropped, because no controller here reads them: the containers' commands, environment,
//! mounts, probes, lifecycle and security settings; every volume but the claims, named or
//! ephemeral (the volumes that carry API data into a container, such as the `kube-api-access-*`
//! one on nearly every pod, are the kubelet's alone); of the status, the containers' images,
//! IDs and last states and the resize and volume details. What is rarely set and large in place
//! (affinity, pod-level resources, an ephemeral volume's claim template) is boxed; a container's
//! requests and limits are sorted slices ([`ResourceList`]), not tree maps.
//!
//! Controllers never write a cached pod back whole (they patch, delete, bind, or write
//! `/status` with a status of their own making; the StatefulSet's identity repair writes the
//! stored pod), so what the type leaves out is never lost. It is not a `k8s_openapi::Resource`:
//! `client.api::<CachedPod>()` does not compile, and the one `Api` made of it (PVC protection's
//! live list, `api_with`) only lists. It serialises with the `core/v1` names (the quota
//! evaluator reads pods as JSON).
//!
//! Guarantees: decoding a pod's JSON as a [`CachedPod`] keeps every field it has equal to the
//! `Pod`'s (a test compares them leaf by leaf); a controller cannot read a field the type does
//! not have, so one that starts reading another adds it here. Every list kept is at its exact
//! length ([`shrink`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use client::transform::{fit_opt, shrink_meta};
use client::{ApiResource, ListParams, SharedIndexInformer, SharedInformerFactory};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, ContainerState, ContainerStatus, EphemeralVolumeSource,
    HostIP, PersistentVolumeClaimVolumeSource, Pod, PodCondition, PodIP, PodReadinessGate,
    PodResourceClaim, PodResourceClaimStatus, PodSchedulingGate, PodSpec, PodStatus, ResourceClaim,
    ResourceRequirements, Toleration, TopologySpreadConstraint, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};

/// A pod as the controller manager's informer keeps it (see the module docs); JSON names as
/// `core/v1` Pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CachedPod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<CachedPodSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CachedPodStatus>,
}

/// What the controllers read of a `PodSpec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedPodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Boxed, as `resources`: rarely set, and 144 bytes in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<Affinity>>,
    /// Shared with the other cached pods that carry the same list ([`shared_tolerations`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "shared_tolerations"
    )]
    pub tolerations: Option<Arc<[Toleration]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_gates: Option<Vec<PodSchedulingGate>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<BTreeMap<String, Quantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<ResourceRequirements>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_gates: Option<Vec<PodReadinessGate>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claims: Option<Vec<PodResourceClaim>>,
    /// The claim volumes only ([`CachedVolume::is_claim`]).
    #[serde(
        default,
        deserialize_with = "claim_volumes",
        skip_serializing_if = "Option::is_none"
    )]
    pub volumes: Option<Vec<CachedVolume>>,
    #[serde(default)]
    pub containers: Vec<CachedContainer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<CachedContainer>>,
}

/// What the controllers read of a `Container` (and of an init container).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedContainer {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ContainerPort>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<CachedResources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// A container's `resources` (`ResourceRequirements`), its lists kept as [`ResourceList`]s.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedResources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Vec<ResourceClaim>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceList>,
}

/// A `ResourceList` (resource name to quantity) as a slice sorted by name, read and written as
/// the JSON map it is. A `BTreeMap` holds even one entry in an 11-slot tree node (~560 bytes);
/// a container names two or three resources.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceList(Box<[(String, Quantity)]>);

impl ResourceList {
    /// The quantity of `name`.
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        let i = self
            .0
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
            .ok()?;
        Some(&self.0[i].1)
    }

    /// Every (name, quantity), by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Quantity)> {
        self.0.iter().map(|(k, q)| (k.as_str(), q))
    }
}

impl From<BTreeMap<String, Quantity>> for ResourceList {
    fn from(map: BTreeMap<String, Quantity>) -> Self {
        ResourceList(map.into_iter().collect())
    }
}

impl Serialize for ResourceList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, q)| (k, q)))
    }
}

impl<'de> Deserialize<'de> for ResourceList {
    /// As the map decodes (a repeated name: the last one).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::<String, Quantity>::deserialize(d).map(ResourceList::from)
    }
}

/// A cached pod's tolerations, shared by the pods that carry the same list: nearly every pod
/// carries the same two (`not-ready` and `unreachable` for 300 s, which the
/// `DefaultTolerationSeconds` admission plugin adds), about 340 bytes a pod held apart
/// ([`crate::interned`]).
pub mod shared_tolerations {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Toleration;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::interned::RecentLists;

    /// How many distinct lists are remembered: a cluster's pods carry a handful (the default
    /// pair, daemon pods' longer one, a few of users' own).
    pub const RECENT: usize = 8;

    static SHARED: RecentLists<Toleration> = RecentLists::new(RECENT);

    /// `list`, as the equal list cached pods hold already if there is one.
    pub fn intern(list: Vec<Toleration>) -> Arc<[Toleration]> {
        SHARED.intern(list)
    }

    pub fn serialize<S: Serializer>(
        list: &Option<Arc<[Toleration]>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        list.as_deref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Arc<[Toleration]>>, D::Error> {
        Ok(Option::<Vec<Toleration>>::deserialize(d)?.map(intern))
    }
}

impl From<ResourceRequirements> for CachedResources {
    fn from(r: ResourceRequirements) -> Self {
        CachedResources {
            claims: r.claims,
            limits: r.limits.map(ResourceList::from),
            requests: r.requests.map(ResourceList::from),
        }
    }
}

/// What the controllers read of a `Volume`: the claims a pod uses (the StatefulSet's, PVC
/// protection, the scheduler's volume binding, ephemeral volumes). A pod keeps no other volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedVolume {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
    /// Boxed: its claim template is 800 bytes in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<Box<EphemeralVolumeSource>>,
}

impl CachedVolume {
    /// A volume of a claim, named or ephemeral: the only ones a cached pod keeps.
    pub fn is_claim(&self) -> bool {
        self.persistent_volume_claim.is_some() || self.ephemeral.is_some()
    }
}

/// A pod's claim volumes; `None` when it has none.
fn only_claims(volumes: impl IntoIterator<Item = CachedVolume>) -> Option<Vec<CachedVolume>> {
    let claims: Vec<CachedVolume> = volumes.into_iter().filter(CachedVolume::is_claim).collect();
    (!claims.is_empty()).then_some(claims)
}

fn claim_volumes<'de, D: serde::Deserializer<'de>>(
    decoder: D,
) -> Result<Option<Vec<CachedVolume>>, D::Error> {
    Ok(Option::<Vec<CachedVolume>>::deserialize(decoder)?.and_then(only_claims))
}

/// What the controllers read of a `PodStatus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedPodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodCondition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, rename = "hostIP", skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<String>,
    #[serde(default, rename = "hostIPs", skip_serializing_if = "Option::is_none")]
    pub host_ips: Option<Vec<HostIP>>,
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    #[serde(default, rename = "podIPs", skip_serializing_if = "Option::is_none")]
    pub pod_ips: Option<Vec<PodIP>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominated_node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_statuses: Option<Vec<CachedContainerStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_container_statuses: Option<Vec<CachedContainerStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_container_statuses: Option<Vec<CachedContainerStatus>>,
}

/// What the controllers read of a `ContainerStatus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedContainerStatus {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub restart_count: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ContainerState>,
}

impl client::Object for CachedPod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The factory's shared pod informer, as every controller of the manager shares it: every pod
/// is cached for its life, as a [`CachedPod`] with each list at its exact length.
pub fn informer(factory: &SharedInformerFactory) -> SharedIndexInformer<CachedPod> {
    let pods = factory
        .informer_for_resource::<CachedPod>(&ApiResource::of::<Pod>(), ListParams::default());
    if let Err(e) = pods.set_transform(shrink) {
        tracing::debug!(error = %e, "pod informer already started; its pods are kept as decoded");
    }
    pods
}

/// A pod a controller got whole (the answer to a patch, a pod it built) as the cache keeps it:
/// the same fields as decoding its JSON gives (a test compares the two).
impl From<Pod> for CachedPod {
    fn from(pod: Pod) -> Self {
        CachedPod {
            metadata: pod.metadata,
            spec: pod.spec.map(CachedPodSpec::from),
            status: pod.status.map(CachedPodStatus::from),
        }
    }
}

impl From<PodSpec> for CachedPodSpec {
    fn from(s: PodSpec) -> Self {
        CachedPodSpec {
            node_name: s.node_name,
            node_selector: s.node_selector,
            affinity: s.affinity.map(Box::new),
            tolerations: s.tolerations.map(shared_tolerations::intern),
            topology_spread_constraints: s.topology_spread_constraints,
            scheduler_name: s.scheduler_name,
            scheduling_gates: s.scheduling_gates,
            priority: s.priority,
            priority_class_name: s.priority_class_name,
            preemption_policy: s.preemption_policy,
            overhead: s.overhead,
            resources: s.resources.map(Box::new),
            host_network: s.host_network,
            hostname: s.hostname,
            subdomain: s.subdomain,
            restart_policy: s.restart_policy,
            termination_grace_period_seconds: s.termination_grace_period_seconds,
            active_deadline_seconds: s.active_deadline_seconds,
            readiness_gates: s.readiness_gates,
            resource_claims: s.resource_claims,
            volumes: s
                .volumes
                .and_then(|vs| only_claims(vs.into_iter().map(CachedVolume::from))),
            containers: s
                .containers
                .into_iter()
                .map(CachedContainer::from)
                .collect(),
            init_containers: s
                .init_containers
                .map(|cs| cs.into_iter().map(CachedContainer::from).collect()),
        }
    }
}

impl From<Container> for CachedContainer {
    fn from(c: Container) -> Self {
        CachedContainer {
            name: c.name,
            image: c.image,
            ports: c.ports,
            resources: c.resources.map(CachedResources::from),
            restart_policy: c.restart_policy,
        }
    }
}

impl From<Volume> for CachedVolume {
    fn from(v: Volume) -> Self {
        CachedVolume {
            name: v.name,
            persistent_volume_claim: v.persistent_volume_claim,
            ephemeral: v.ephemeral.map(Box::new),
        }
    }
}

impl From<PodStatus> for CachedPodStatus {
    fn from(s: PodStatus) -> Self {
        let containers =
            |l: Option<Vec<ContainerStatus>>| l.map(|l| l.into_iter().map(Into::into).collect());
        CachedPodStatus {
            phase: s.phase,
            reason: s.reason,
            message: s.message,
            conditions: s.conditions,
            start_time: s.start_time,
            host_ip: s.host_ip,
            host_ips: s.host_ips,
            pod_ip: s.pod_ip,
            pod_ips: s.pod_ips,
            nominated_node_name: s.nominated_node_name,
            qos_class: s.qos_class,
            resource_claim_statuses: s.resource_claim_statuses,
            container_statuses: containers(s.container_statuses),
            init_container_statuses: containers(s.init_container_statuses),
            ephemeral_container_statuses: containers(s.ephemeral_container_statuses),
        }
    }
}

impl From<ContainerStatus> for CachedContainerStatus {
    fn from(c: ContainerStatus) -> Self {
        CachedContainerStatus {
            name: c.name,
            ready: c.ready,
            restart_count: c.restart_count,
            started: c.started,
            state: c.state,
        }
    }
}

/// `pod` with every list at its exact length (the informer's transform: a decoder grows lists
/// by doubling).
pub fn shrink(mut pod: CachedPod) -> CachedPod {
    shrink_meta(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.shrink_to_fit();
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            fit_opt(&mut c.ports);
        }
        fit_opt(&mut spec.init_containers);
        fit_opt(&mut spec.topology_spread_constraints);
        fit_opt(&mut spec.scheduling_gates);
        fit_opt(&mut spec.readiness_gates);
        fit_opt(&mut spec.resource_claims);
        fit_opt(&mut spec.volumes);
    }
    if let Some(status) = pod.status.as_mut() {
        fit_opt(&mut status.conditions);
        fit_opt(&mut status.host_ips);
        fit_opt(&mut status.pod_ips);
        fit_opt(&mut status.resource_claim_statuses);
        fit_opt(&mut status.container_statuses);
        fit_opt(&mut status.init_container_statuses);
        fit_opt(&mut status.ephemeral_container_statuses);
    }
    pod
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;
    use serde_json::{json, Value};

    use super::*;

    /// A running pod as the ServiceAccount admission, the scheduler and a kubelet leave it: every
    /// part a controller reads and many it does not.
    fn full_pod() -> Vec<u8> {
        let container = json!({"name": "c", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
            "command": ["sh"], "args": ["-c", "serve"], "workingDir": "/srv",
            "env": [{"name": "A", "value": "1"}], "envFrom": [{"configMapRef": {"name": "cm"}}],
            "ports": [{"name": "http", "containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
            "volumeMounts": [{"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}},
            "securityContext": {"runAsNonRoot": true},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"});
        let mut sidecar = container.clone();
        sidecar["name"] = json!("log");
        sidecar["restartPolicy"] = json!("Always");
        let running = json!({"name": "c", "image": "nginx:1.27", "imageID": "docker://sha256:1",
            "containerID": "containerd://abc", "ready": true, "restartCount": 2, "started": true,
            "state": {"running": {"startedAt": "2026-12-07T00:00:00Z"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                "startedAt": "2026-12-06T00:00:00Z", "finishedAt": "2026-12-06T23:59:59Z"}},
            "volumeMounts": [{"name": "kube-api-access-x", "mountPath": "/var/run/secrets"}]});
        let mut spec = json!({"nodeName": "n", "schedulerName": "default-scheduler", "priority": 10,
                "priorityClassName": "high", "preemptionPolicy": "Never",
                "serviceAccountName": "default", "automountServiceAccountToken": true,
                "hostname": "h", "subdomain": "s", "hostNetwork": false, "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "activeDeadlineSeconds": 600, "nodeSelector": {"disk": "ssd"},
                "overhead": {"cpu": "5m"}, "resources": {"limits": {"cpu": "2"}},
                "enableServiceLinks": true, "securityContext": {"fsGroup": 2000},
                "readinessGates": [{"conditionType": "example.com/ready"}],
                "schedulingGates": [{"name": "example.com/gate"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
                "initContainers": [sidecar],
                "containers": [container]});
        spec["volumes"] = json!([
                    {"name": "kube-api-access-x", "projected": {"sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}},
                    {"name": "cfg", "configMap": {"name": "cm"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-p"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]);
        let status = json!({"phase": "Running", "reason": "R", "message": "M", "qosClass": "Burstable",
                "hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.1"}],
                "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
                "startTime": "2026-12-07T00:00:00Z", "nominatedNodeName": "m",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-07T00:00:01Z"}],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
                "containerStatuses": [running.clone()],
                "initContainerStatuses": [running.clone()],
                "ephemeralContainerStatuses": [running]});
        serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u", "resourceVersion": "9",
                "labels": {"app": "web"}, "annotations": {"controller.kubernetes.io/pod-deletion-cost": "5"},
                "finalizers": ["batch.kubernetes.io/job-tracking"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                    "name": "web", "uid": "rc", "controller": true}]},
            "spec": spec,
            "status": status
        }))
        .unwrap_or_default()
    }

    fn decode<T: DeserializeOwned>(text: &[u8]) -> T {
        serde_json::from_slice(text).unwrap_or_else(|e| panic!("bad pod: {e}"))
    }

    /// Every leaf of `v` as (path, value).
    fn leaves(v: &Value, path: String, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, v) in m {
                    leaves(v, format!("{path}/{k}"), out);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, v) in a.iter().enumerate() {
                    leaves(v, format!("{path}/{i}"), out);
                }
            }
            v => out.push((path, v.clone())),
        }
    }

    #[test]
    fn decoding_keeps_every_field_read_as_the_pod_has_it() {
        let text = full_pod();
        let cached: CachedPod = decode(&text);
        let whole: Pod = decode(&text);
        assert_eq!(
            cached,
            CachedPod::from(whole.clone()),
            "decoded as converted"
        );

        let (cached, whole) = (
            serde_json::to_value(&cached).unwrap(),
            serde_json::to_value(&whole).unwrap(),
        );
        // Of the volumes, the claims stay (the projected and configMap ones go).
        let volumes = &whole["spec"]["volumes"];
        assert_eq!(cached["spec"]["volumes"], json!([volumes[2], volumes[3]]));
        let mut kept = Vec::new();
        leaves(&cached, String::new(), &mut kept);
        let mut all = Vec::new();
        leaves(&whole, String::new(), &mut all);
        kept.retain(|(p, _)| !p.starts_with("/spec/volumes/"));
        // What no controller reads, by the path's start.
        let dropped = [
            "/apiVersion",
            "/kind",
            "/spec/serviceAccountName",
            "/spec/automountServiceAccountToken",
            "/spec/dnsPolicy",
            "/spec/enableServiceLinks",
            "/spec/securityContext/",
            // Compared whole below.
            "/spec/volumes/",
            "/status/containerStatuses/0/image",
            "/status/containerStatuses/0/containerID",
            "/status/containerStatuses/0/lastState/",
            "/status/containerStatuses/0/volumeMounts/",
            "/status/initContainerStatuses/0/image",
            "/status/initContainerStatuses/0/containerID",
            "/status/initContainerStatuses/0/lastState/",
            "/status/initContainerStatuses/0/volumeMounts/",
            "/status/ephemeralContainerStatuses/0/image",
            "/status/ephemeralContainerStatuses/0/containerID",
            "/status/ephemeralContainerStatuses/0/lastState/",
            "/status/ephemeralContainerStatuses/0/volumeMounts/",
        ];
        let container_dropped = [
            "imagePullPolicy",
            "command",
            "args",
            "workingDir",
            "env",
            "envFrom",
            "volumeMounts",
            "readinessProbe",
            "lifecycle",
            "securityContext",
            "terminationMessagePath",
            "terminationMessagePolicy",
        ];
        let is_dropped = |path: &str| {
            dropped.iter().any(|d| path.starts_with(d))
                || ["/spec/containers/0/", "/spec/initContainers/0/"]
                    .iter()
                    .any(|c| {
                        path.strip_prefix(c).is_some_and(|rest| {
                            container_dropped.contains(&rest.split('/').next().unwrap_or(""))
                        })
                    })
        };
        let mut expected: Vec<(String, Value)> =
            all.into_iter().filter(|(p, _)| !is_dropped(p)).collect();
        // The order of the fields is the types' own.
        kept.sort_by(|a, b| a.0.cmp(&b.0));
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(kept, expected, "every other field is kept as it was");
    }

    #[test]
    fn an_empty_pod_stays_empty() {
        let cached: CachedPod = decode(b"{}");
        assert_eq!(cached, CachedPod::default());
        assert_eq!(
            serde_json::to_value(&cached).unwrap(),
            json!({"metadata": {}})
        );
    }

    #[test]
    fn lists_are_kept_at_their_exact_length() {
        let cached = shrink(decode(&full_pod()));
        let spec = cached.spec.as_ref().unwrap();
        let status = cached.status.as_ref().unwrap();
        assert_eq!(spec.containers.capacity(), spec.containers.len());
        let volumes = spec.volumes.as_ref().unwrap();
        assert_eq!(volumes.capacity(), volumes.len());
        let conditions = status.conditions.as_ref().unwrap();
        assert_eq!(conditions.capacity(), conditions.len());
    }

    /// A resource list reads and writes as the JSON map, finds each name, and keeps its names
    /// in order, as a `BTreeMap` does.
    #[test]
    fn a_resource_list_is_the_map_it_was_decoded_from() {
        let text = r#"{"memory":"16Mi","cpu":"10m","example.com/gpu":"1"}"#;
        let list: ResourceList = serde_json::from_str(text).unwrap();
        let map: BTreeMap<String, Quantity> = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert_eq!(list, ResourceList::from(map.clone()));
        for (name, q) in &map {
            assert_eq!(list.get(name), Some(q));
        }
        assert_eq!(list.get("storage"), None);
        assert_eq!(
            list.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["cpu", "example.com/gpu", "memory"]
        );
        let empty: ResourceList = serde_json::from_str("{}").unwrap();
        assert_eq!(empty.get("cpu"), None);
        assert_eq!(serde_json::to_string(&empty).unwrap(), "{}");
    }

    /// Pods decoded with the same tolerations hold one list; a different list is its own, and
    /// the shared one reads and writes as the JSON it was decoded from.
    #[test]
    fn equal_toleration_lists_are_one() {
        let pod = |tolerations: Value| -> CachedPod {
            serde_json::from_value(json!({"metadata": {"name": "p"},
                "spec": {"containers": [], "tolerations": tolerations}}))
            .unwrap()
        };
        let defaults = json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300}]);
        let tolerations = |p: &CachedPod| p.spec.as_ref().unwrap().tolerations.clone().unwrap();
        let (a, b) = (pod(defaults.clone()), pod(defaults.clone()));
        assert!(Arc::ptr_eq(&tolerations(&a), &tolerations(&b)));
        let other = pod(json!([{"key": "gpu", "operator": "Exists"}]));
        assert!(!Arc::ptr_eq(&tolerations(&a), &tolerations(&other)));
        assert_eq!(
            serde_json::to_value(&a).unwrap()["spec"]["tolerations"],
            defaults
        );
        let from_pod = CachedPod::from(
            serde_json::from_value::<Pod>(serde_json::to_value(&a).unwrap()).unwrap(),
        );
        assert!(Arc::ptr_eq(&tolerations(&a), &tolerations(&from_pod)));
        // More distinct lists than are remembered: each still decodes to its own value.
        for i in 0..2 * shared_tolerations::RECENT {
            let list = json!([{"key": format!("k{i}"), "operator": "Exists"}]);
            assert_eq!(
                serde_json::to_value(&tolerations(&pod(list.clone()))[..]).unwrap(),
                list
            );
        }
    }
}
