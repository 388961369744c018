//! `persistentvolume-expander` (canonical `persistentvolume-expander-controller`; upstream
//! `pkg/controller/volume/expand/expand_controller.go`): a Bound claim whose requested storage is
//! above its `status.capacity` is handed to its volume's resizer, as upstream does for CSI
//! volumes: the claim is annotated `volume.kubernetes.io/storage-resizer: <driver>` and gets the
//! event `ExternalExpanding` ("waiting for an external controller to expand this PVC"). The driver
//! is the provisioner that created the volume (`pv.kubernetes.io/provisioned-by`), else the
//! class's. Whether the claim may grow at all was decided at admission (PersistentVolumeClaimResize).
//! The resize itself is the storage driver's ([`super::resizer`]).

use std::sync::Arc;

use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Client, DeletedObject, HandlerRegistration,
    HasSynced, Lister, Patch, RateLimitingQueue, ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use tokio_util::sync::CancellationToken;

use super::{
    annotation, claim_capacity, claim_phase, claim_reference, requested_storage, volume_name,
    ANN_PROVISIONED_BY, ANN_STORAGE_RESIZER,
};
use crate::{Error, Result};

struct Inner {
    client: Client,
    claims: Lister<PersistentVolumeClaim>,
    volumes: Lister<PersistentVolume>,
    classes: Lister<StorageClass>,
    queue: RateLimitingQueue<String>,
    recorder: EventRecorder,
}

/// The expand controller.
pub struct ExpandController {
    inner: Arc<Inner>,
    registrations: Vec<HandlerRegistration>,
}

impl ExpandController {
    /// Build it on the shared informers.
    pub fn new(
        client: Client,
        claims: SharedIndexInformer<PersistentVolumeClaim>,
        volumes: SharedIndexInformer<PersistentVolume>,
        classes: SharedIndexInformer<StorageClass>,
        recorder: EventRecorder,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            claims: claims.lister(),
            volumes: volumes.lister(),
            classes: classes.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("volume_expand"),
            recorder,
        });
        let registrations = vec![
            claims.add_event_handler(ClaimHandler(inner.queue.clone())),
            volumes.add_event_handler(Synced),
            classes.add_event_handler(Synced),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then run `workers` workers until `shutdown`.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let synced: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        let inner = self.inner.clone();
        Runner::new("persistentvolume-expander")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        inner.sync(&key).await?;
                        Ok::<_, Error>(Action::AwaitChange)
                    }
                },
            )
            .await;
    }
}

/// `pvcRequiresExpansion` style check: Bound and asking for more than it has.
pub fn needs_expansion(claim: &PersistentVolumeClaim) -> bool {
    claim_phase(claim) == "Bound"
        && !volume_name(claim).is_empty()
        && requested_storage(claim) > claim_capacity(claim)
}

impl Inner {
    async fn sync(&self, key: &str) -> Result<()> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(());
        };
        let Some(claim) = self.claims.namespace(ns).get(name) else {
            return Ok(());
        };
        if !needs_expansion(&claim) {
            return Ok(());
        }
        let Some(pv) = self.volumes.get(volume_name(&claim)) else {
            return Ok(());
        };
        let driver = annotation(&pv.metadata, ANN_PROVISIONED_BY)
            .map(str::to_string)
            .or_else(|| super::class_of(&claim, &self.classes).map(|c| c.provisioner.clone()));
        let Some(driver) = driver else {
            return Ok(());
        };
        if annotation(&claim.metadata, ANN_STORAGE_RESIZER) == Some(driver.as_str()) {
            return Ok(());
        }
        let patch = serde_json::json!({"metadata": {"annotations": {ANN_STORAGE_RESIZER: driver}}});
        let api = self.client.api::<PersistentVolumeClaim>(Some(ns));
        match api.patch(name, &Patch::Merge(patch)).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(Error::api("set claim resizer", e)),
        }
        self.recorder.event(
            &claim_reference(&claim),
            EventType::Normal,
            "ExternalExpanding",
            "waiting for an external controller to expand this PVC",
        );
        Ok(())
    }
}

struct ClaimHandler(RateLimitingQueue<String>);

impl ResourceEventHandler<PersistentVolumeClaim> for ClaimHandler {
    fn on_add(&self, obj: &Arc<PersistentVolumeClaim>, _in_initial_list: bool) {
        if needs_expansion(obj) {
            self.0.add(key_of_meta(&obj.metadata));
        }
    }
    fn on_update(&self, _old: &Arc<PersistentVolumeClaim>, new: &Arc<PersistentVolumeClaim>) {
        if needs_expansion(new) {
            self.0.add(key_of_meta(&new.metadata));
        }
    }
    fn on_delete(&self, _obj: DeletedObject<PersistentVolumeClaim>) {}
}

/// Informers that only have to be synced.
struct Synced;

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for Synced {
    fn on_add(&self, _obj: &Arc<K>, _in_initial_list: bool) {}
    fn on_update(&self, _old: &Arc<K>, _new: &Arc<K>) {}
    fn on_delete(&self, _obj: DeletedObject<K>) {}
}
