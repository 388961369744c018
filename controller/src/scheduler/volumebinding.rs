//! The VolumeBinding plugin (upstream `pkg/scheduler/framework/plugins/volumebinding`): what a
//! pod's PersistentVolumeClaims require of its node, and the claims' binding before the pod's.
//!
//! - **PreFilter** ([`VolumeBinding::pre_filter`]): a missing claim makes the pod unschedulable
//!   (`persistentvolumeclaim "x" not found`), as does one being deleted, and an unbound claim whose
//!   class binds immediately (`pod has unbound immediate PersistentVolumeClaims`): the binder binds
//!   those, and the claim's update brings the pod back. A claim naming a volume the binder has not
//!   finished binding counts as unbound immediate whatever its class, as upstream's
//!   `GetPodVolumeClaims` ("prebound PVCs are treated as unbound immediate binding").
//! - **Filter** ([`PodVolumes::check_node`]): a bound claim's volume must exist
//!   (`ErrReasonPVNotExist`) and admit the node (its node affinity); an unbound WaitForFirstConsumer claim needs either an available volume that
//!   matches on that node (the smallest, as the binder chooses) or a class that provisions.
//! - **PreBind** ([`VolumeBinding::bind_volumes`]): chosen volumes get the claim in `claimRef`
//!   (`pv.kubernetes.io/bound-by-controller`), claims to provision get
//!   `volume.kubernetes.io/selected-node`; then the pod waits until the binder reports every claim
//!   bound, at most [`BIND_TIMEOUT`] (`bindTimeoutSeconds`), woken by claim and volume events.
//!   Failures come back as errors; the scheduler retries the pod with its back-off.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use client::{Client, Lister};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::cached_pod::CachedPod;
use crate::volume::affinity::volume_admits_node;
use crate::volume::matching::find_best_match;
use crate::volume::{
    annotation, claim_reference, class_of, is_wait_for_first_consumer, volume_name,
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, NO_PROVISIONER,
};

/// `bindTimeoutSeconds` (kube-scheduler's VolumeBinding default): 600 s.
pub const BIND_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the wait re-reads the cache if no event arrives (upstream polls every second).
const POLL: Duration = Duration::from_secs(1);

/// `ErrReasonBindConflict`.
pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// `ErrReasonNodeConflict`.
pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// `ErrReasonPVNotExist`.
pub const REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// The listers the plugin reads and a signal for claim and volume changes.
pub struct VolumeBinding {
    client: Client,
    claims: Lister<PersistentVolumeClaim>,
    volumes: Lister<PersistentVolume>,
    classes: Lister<StorageClass>,
    /// Notified on every claim or volume change: binding waits re-check on it.
    pub(super) changed: Notify,
}

/// A pod's claims, sorted by what they need (upstream's `PodVolumeClaims`).
#[derive(Default)]
pub struct PodVolumes {
    /// The volume names of the fully bound claims.
    bound: Vec<String>,
    to_bind: Vec<Arc<PersistentVolumeClaim>>,
}

/// What PreBind does for one claim on the chosen node.
pub enum ClaimBinding {
    /// Pre-bind this volume to the claim.
    Volume(Arc<PersistentVolume>, Arc<PersistentVolumeClaim>),
    /// Ask the claim's provisioner for a volume on the node.
    Provision(Arc<PersistentVolumeClaim>),
}

fn claim_names(pod: &CachedPod) -> Vec<String> {
    let vols = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[]);
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    vols.iter()
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                return Some(c.claim_name.clone());
            }
            // A generic ephemeral volume's claim is `<pod>-<volume>`.
            v.ephemeral
                .as_ref()
                .map(|_| format!("{pod_name}-{}", v.name))
        })
        .collect()
}

/// Whether the binder has finished binding the claim (`bind-completed` and a volume name).
pub fn claim_bound(claim: &PersistentVolumeClaim) -> bool {
    annotation(&claim.metadata, ANN_BIND_COMPLETED).is_some() && !volume_name(claim).is_empty()
}

impl VolumeBinding {
    /// The plugin over these listers.
    pub fn new(
        client: Client,
        claims: Lister<PersistentVolumeClaim>,
        volumes: Lister<PersistentVolume>,
        classes: Lister<StorageClass>,
    ) -> Self {
        Self {
            client,
            claims,
            volumes,
            classes,
            changed: Notify::new(),
        }
    }

    /// PreFilter: the pod's claims, or why no node can take it.
    pub fn pre_filter(&self, pod: &CachedPod) -> Result<PodVolumes, String> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let mut out = PodVolumes::default();
        let mut immediate_unbound = false;
        for name in claim_names(pod) {
            let Some(claim) = self.claims.namespace(ns).get(&name) else {
                return Err(format!("persistentvolumeclaim \"{name}\" not found"));
            };
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
            }
            if claim_bound(&claim) {
                out.bound.push(volume_name(&claim).to_string());
                continue;
            }
            let class = class_of(&claim, &self.classes);
            if is_wait_for_first_consumer(class.as_deref()) && volume_name(&claim).is_empty() {
                out.to_bind.push(claim);
            } else {
                immediate_unbound = true;
            }
        }
        if immediate_unbound {
            return Err("pod has unbound immediate PersistentVolumeClaims".into());
        }
        Ok(out)
    }

    /// Filter for one node: `Ok` with what PreBind would do there, or the reason it cannot.
    pub fn check_node(
        &self,
        vols: &PodVolumes,
        node: &Node,
    ) -> Result<Vec<ClaimBinding>, &'static str> {
        for name in &vols.bound {
            let Some(pv) = self.volumes.get(name) else {
                return Err(REASON_PV_NOT_EXIST);
            };
            if !volume_admits_node(&pv, node) {
                return Err(REASON_NODE_CONFLICT);
            }
        }
        if vols.to_bind.is_empty() {
            return Ok(Vec::new());
        }
        let all = self.volumes.list(&api::labels::Selector::everything());
        let mut chosen: HashSet<String> = HashSet::new();
        let mut out = Vec::with_capacity(vols.to_bind.len());
        for claim in &vols.to_bind {
            let free: Vec<Arc<PersistentVolume>> = all
                .iter()
                .filter(|pv| !chosen.contains(pv.metadata.name.as_deref().unwrap_or("")))
                .cloned()
                .collect();
            if let Some(pv) = find_best_match(claim, &free, Some(node), true) {
                chosen.insert(pv.metadata.name.clone().unwrap_or_default());
                out.push(ClaimBinding::Volume(pv, claim.clone()));
                continue;
            }
            let provisions = class_of(claim, &self.classes)
                .is_some_and(|c| !c.provisioner.is_empty() && c.provisioner != NO_PROVISIONER);
            if !provisions {
                return Err(REASON_BIND_CONFLICT);
            }
            out.push(ClaimBinding::Provision(claim.clone()));
        }
        Ok(out)
    }

    /// PreBind: write the choices, then wait (bounded) until every claim is bound.
    pub async fn bind_volumes(
        &self,
        node: &str,
        bindings: &[ClaimBinding],
        stop: &CancellationToken,
    ) -> Result<(), String> {
        for b in bindings {
            self.write_binding(node, b).await?;
        }
        let deadline = tokio::time::Instant::now() + BIND_TIMEOUT;
        loop {
            let notified = self.changed.notified();
            if self.all_bound(bindings)? {
                return Ok(());
            }
            tokio::select! {
                _ = stop.cancelled() => return Err("scheduler stopping".into()),
                _ = tokio::time::sleep_until(deadline) => {
                    return Err("binding volumes: context deadline exceeded".into());
                }
                _ = notified => {}
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    async fn write_binding(&self, node: &str, b: &ClaimBinding) -> Result<(), String> {
        match b {
            ClaimBinding::Volume(pv, claim) => {
                let mut v: PersistentVolume = (**pv).clone();
                if crate::volume::is_volume_bound_to_claim(&v, claim)
                    && crate::volume::claim_ref(&v)
                        .and_then(|r| r.uid.as_deref())
                        .is_some()
                {
                    return Ok(());
                }
                v.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
                v.spec.get_or_insert_with(Default::default).claim_ref =
                    Some(claim_reference(claim));
                let name = pv.metadata.name.as_deref().unwrap_or("");
                self.client
                    .api::<PersistentVolume>(None)
                    .replace(name, &v)
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("binding volumes: {e}"))
            }
            ClaimBinding::Provision(claim) => {
                if annotation(&claim.metadata, ANN_SELECTED_NODE) == Some(node) {
                    return Ok(());
                }
                let patch =
                    serde_json::json!({"metadata": {"annotations": {ANN_SELECTED_NODE: node}}});
                let api = self
                    .client
                    .api::<PersistentVolumeClaim>(claim.metadata.namespace.as_deref());
                api.patch(
                    claim.metadata.name.as_deref().unwrap_or(""),
                    &client::Patch::Merge(patch),
                )
                .await
                .map(|_| ())
                .map_err(|e| format!("binding volumes: {e}"))
            }
        }
    }

    /// `checkBindings`: every claim bound, or an error if a provisioning claim lost its node.
    fn all_bound(&self, bindings: &[ClaimBinding]) -> Result<bool, String> {
        for b in bindings {
            let claim = match b {
                ClaimBinding::Volume(_, c) | ClaimBinding::Provision(c) => c,
            };
            let ns = claim.metadata.namespace.as_deref().unwrap_or("");
            let name = claim.metadata.name.as_deref().unwrap_or("");
            let Some(now) = self.claims.namespace(ns).get(name) else {
                return Err(format!(
                    "binding volumes: persistentvolumeclaim \"{name}\" not found"
                ));
            };
            if claim_bound(&now) {
                continue;
            }
            let node_taken_back = annotation(&now.metadata, ANN_SELECTED_NODE).is_none()
                && now.metadata.resource_version != claim.metadata.resource_version;
            if matches!(b, ClaimBinding::Provision(_)) && node_taken_back {
                // Provisioning failed and the node was taken back: schedule again.
                return Err(format!(
                    "binding volumes: selectedNode annotation reset for PVC \"{name}\""
                ));
            }
            return Ok(false);
        }
        Ok(true)
    }
}
