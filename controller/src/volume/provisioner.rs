//! A fake storage driver standing in for kind's external provisioner, rancher's
//! `local-path-provisioner` (provisioner name `rancher.io/local-path`, built on
//! `sig-storage-lib-external-provisioner`), and for a CSI driver's `external-resizer` with online
//! file-system expansion ([`super::resizer`]). It is an external component in a real cluster, so it
//! is its own controller here (`local-path-provisioner` in `--controllers`), talking to the
//! apiserver like every other.
//!
//! Provisioning: a claim annotated `volume.kubernetes.io/storage-provisioner: rancher.io/local-path`
//! (the binder's hand-over), without a volume, whose class names this provisioner, gets a
//! PersistentVolume `pvc-<claim uid>` as local-path creates it: a `hostPath` under
//! `/var/local-path-provisioner/`, node affinity `kubernetes.io/hostname In [<selected node>]`,
//! the claim's access modes and volume mode, the requested capacity, the class's reclaim policy,
//! `claimRef` to the claim (uid included, so only that claim binds it) and
//! `pv.kubernetes.io/provisioned-by`. A WaitForFirstConsumer claim is provisioned only once the
//! scheduler set `volume.kubernetes.io/selected-node`; an Immediate one at once, without node
//! affinity (local-path itself refuses Immediate claims; here the simulated storage is reachable
//! from every node). Events `Provisioning` and `ProvisioningSucceeded` as the library's.
//!
//! Deletion: a volume it provisioned that is `Released` with policy `Delete` is deleted.
//! Creating an existing `pvc-<uid>` is success (a retried or repeated sync).

use std::collections::BTreeMap;
use std::sync::Arc;

use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Client, DeleteParams, DeletedObject,
    HandlerRegistration, HasSynced, Lister, RateLimitingQueue, ResourceEventHandler, Runner,
    SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
    VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;

use super::affinity::hostname_selector;
use super::{
    annotation, claim_reference, is_wait_for_first_consumer, volume_name, volume_phase,
    ANN_PROVISIONED_BY, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER, LOCAL_PATH_PROVISIONER,
};
use crate::clock::Clock;
use crate::{Error, Result};

/// Where local-path keeps its volumes on a node (its default `nodePathMap`).
pub const LOCAL_PATH_ROOT: &str = "/var/local-path-provisioner";

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) claims: Lister<PersistentVolumeClaim>,
    pub(super) volumes: Lister<PersistentVolume>,
    pub(super) classes: Lister<StorageClass>,
    pub(super) claim_queue: RateLimitingQueue<String>,
    volume_queue: RateLimitingQueue<String>,
    pub(super) recorder: EventRecorder,
    /// The provisioner name this fake answers to.
    pub(super) name: String,
    pub(super) clock: Arc<dyn Clock>,
}

/// The fake local-path provisioner (and resizer).
pub struct LocalPathProvisioner {
    inner: Arc<Inner>,
    registrations: Vec<HandlerRegistration>,
}

impl LocalPathProvisioner {
    /// Build it on the shared informers; `recorder` should be named as the provisioner's
    /// identity (`rancher.io/local-path_…`).
    pub fn new(
        client: Client,
        volumes: SharedIndexInformer<PersistentVolume>,
        claims: SharedIndexInformer<PersistentVolumeClaim>,
        classes: SharedIndexInformer<StorageClass>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            claims: claims.lister(),
            volumes: volumes.lister(),
            classes: classes.lister(),
            claim_queue: RateLimitingQueue::with_default_controller_rate_limiter(
                "local_path_claims",
            ),
            volume_queue: RateLimitingQueue::with_default_controller_rate_limiter(
                "local_path_volumes",
            ),
            recorder,
            name: LOCAL_PATH_PROVISIONER.to_string(),
            clock,
        });
        let registrations = vec![
            claims.add_event_handler(ClaimHandler(inner.claim_queue.clone())),
            volumes.add_event_handler(VolumeHandler(inner.volume_queue.clone())),
            classes.add_event_handler(NoOp),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The claim queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.claim_queue.clone()
    }

    /// Wait for the caches, then provision, resize and delete until `shutdown`.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let synced: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        let (a, b) = (self.inner.clone(), self.inner.clone());
        let claims = Runner::new("local-path-provisioner-claims")
            .workers(workers)
            .run_workers(
                self.inner.claim_queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = a.clone();
                    async move {
                        inner.sync_claim(&key).await?;
                        Ok::<_, Error>(Action::AwaitChange)
                    }
                },
            );
        let volumes = Runner::new("local-path-provisioner-volumes").run_workers(
            self.inner.volume_queue.clone(),
            &synced,
            &shutdown,
            move |name: String| {
                let inner = b.clone();
                async move {
                    inner.sync_volume(&name).await?;
                    Ok::<_, Error>(Action::AwaitChange)
                }
            },
        );
        tokio::join!(claims, volumes);
    }
}

impl Inner {
    async fn sync_claim(&self, key: &str) -> Result<()> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(());
        };
        let Some(claim) = self.claims.namespace(ns).get(name) else {
            return Ok(());
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        if volume_name(&claim).is_empty() {
            return self.provision(&claim).await;
        }
        self.resize(&claim).await
    }

    /// `shouldProvision` then `provisionClaimOperation`.
    async fn provision(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        if annotation(&claim.metadata, ANN_STORAGE_PROVISIONER) != Some(self.name.as_str()) {
            return Ok(());
        }
        let Some(class) = super::class_of(claim, &self.classes) else {
            return Ok(());
        };
        if class.provisioner != self.name {
            return Ok(());
        }
        let node = annotation(&claim.metadata, ANN_SELECTED_NODE);
        if is_wait_for_first_consumer(Some(&class)) && node.is_none() {
            return Ok(());
        }
        let Some(uid) = claim.metadata.uid.as_deref() else {
            return Ok(());
        };
        let pv_name = format!("pvc-{uid}");
        if self.volumes.get(&pv_name).is_some() {
            return Ok(());
        }
        let (ns, name) = (
            claim.metadata.namespace.as_deref().unwrap_or(""),
            claim.metadata.name.as_deref().unwrap_or(""),
        );
        let event_ref = claim_reference(claim);
        self.recorder.event(
            &event_ref,
            EventType::Normal,
            "Provisioning",
            &format!("External provisioner is provisioning volume for claim \"{ns}/{name}\""),
        );
        let pv = local_path_volume(claim, &class, &pv_name, node, &self.name);
        match self.client.api::<PersistentVolume>(None).create(&pv).await {
            Ok(_) => {}
            Err(e) if e.is_already_exists() => return Ok(()),
            Err(e) => {
                self.recorder.event(
                    &event_ref,
                    EventType::Warning,
                    "ProvisioningFailed",
                    &format!(
                        "failed to provision volume with StorageClass \"{}\": {e}",
                        class.metadata.name.as_deref().unwrap_or("")
                    ),
                );
                return Err(Error::api("create provisioned volume", e));
            }
        }
        self.recorder.event(
            &event_ref,
            EventType::Normal,
            "ProvisioningSucceeded",
            &format!("Successfully provisioned volume {pv_name}"),
        );
        Ok(())
    }

    async fn sync_volume(&self, name: &str) -> Result<()> {
        let Some(pv) = self.volumes.get(name) else {
            return Ok(());
        };
        let ours = annotation(&pv.metadata, ANN_PROVISIONED_BY) == Some(self.name.as_str());
        let policy = pv
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
        if !ours
            || volume_phase(&pv) != "Released"
            || policy != Some("Delete")
            || pv.metadata.deletion_timestamp.is_some()
        {
            return Ok(());
        }
        match self
            .client
            .api::<PersistentVolume>(None)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("delete released volume", e)),
        }
    }
}

/// The volume local-path creates for `claim`.
pub fn local_path_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    pv_name: &str,
    node: Option<&str>,
    provisioner: &str,
) -> PersistentVolume {
    let spec = claim.spec.clone().unwrap_or_default();
    let (ns, name) = (
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or(""),
    );
    let capacity = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| BTreeMap::from([("storage".to_string(), q.clone())]));
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(pv_name.to_string()),
            annotations: Some(BTreeMap::from([(
                ANN_PROVISIONED_BY.to_string(),
                provisioner.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes.clone(),
            capacity,
            claim_ref: Some(claim_reference(claim)),
            host_path: Some(HostPathVolumeSource {
                path: format!("{LOCAL_PATH_ROOT}/{pv_name}_{ns}_{name}"),
                type_: Some("DirectoryOrCreate".into()),
            }),
            node_affinity: node.map(|n| VolumeNodeAffinity {
                required: Some(hostname_selector(n)),
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: spec.volume_mode.clone(),
            ..Default::default()
        }),
        status: None,
    }
}

struct ClaimHandler(RateLimitingQueue<String>);

impl ResourceEventHandler<PersistentVolumeClaim> for ClaimHandler {
    fn on_add(&self, obj: &Arc<PersistentVolumeClaim>, _in_initial_list: bool) {
        self.0.add(key_of_meta(&obj.metadata));
    }
    fn on_update(&self, _old: &Arc<PersistentVolumeClaim>, new: &Arc<PersistentVolumeClaim>) {
        self.0.add(key_of_meta(&new.metadata));
    }
    fn on_delete(&self, _obj: DeletedObject<PersistentVolumeClaim>) {}
}

struct VolumeHandler(RateLimitingQueue<String>);

impl ResourceEventHandler<PersistentVolume> for VolumeHandler {
    fn on_add(&self, obj: &Arc<PersistentVolume>, _in_initial_list: bool) {
        self.0.add(obj.metadata.name.clone().unwrap_or_default());
    }
    fn on_update(&self, _old: &Arc<PersistentVolume>, new: &Arc<PersistentVolume>) {
        self.0.add(new.metadata.name.clone().unwrap_or_default());
    }
    fn on_delete(&self, _obj: DeletedObject<PersistentVolume>) {}
}

struct NoOp;

impl ResourceEventHandler<StorageClass> for NoOp {
    fn on_add(&self, _obj: &Arc<StorageClass>, _in_initial_list: bool) {}
    fn on_update(&self, _old: &Arc<StorageClass>, _new: &Arc<StorageClass>) {}
    fn on_delete(&self, _obj: DeletedObject<StorageClass>) {}
}
