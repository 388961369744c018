//! `PvProtectionController` (`pv-protection`): removes `kubernetes.io/pv-protection` from a
//! volume being deleted once it is not `Bound`, and adds it to a live volume without it. The
//! queue holds volume names, queued when a volume is added or updated and needs the finalizer or
//! is a deletion candidate; a sync reads the volume from the cache.

use std::sync::Arc;

use client::{
    Action, Client, DeletedObject, HandlerRegistration, Lister, RateLimitingQueue,
    ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::PersistentVolume;
use tokio_util::sync::CancellationToken;

use super::decide::{
    decide, is_deletion_candidate, needs_finalizer, pv_in_use, Decision, PV_PROTECTION_FINALIZER,
};
use super::finalizers_patch;
use crate::{Error, Result};

struct Inner {
    client: Client,
    volumes: Lister<PersistentVolume>,
    queue: RateLimitingQueue<String>,
}

/// The PV protection controller.
pub struct PvProtectionController {
    inner: Arc<Inner>,
    registration: HandlerRegistration,
}

impl PvProtectionController {
    /// Build on the shared volume informer.
    pub fn new(client: Client, volumes: SharedIndexInformer<PersistentVolume>) -> Self {
        let inner = Arc::new(Inner {
            client,
            volumes: volumes.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("pvprotection"),
        });
        let registration = volumes.add_event_handler(VolumeHandler(inner.clone()));
        Self {
            inner,
            registration,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the cache, then run `workers` workers until `shutdown`.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let synced: [&dyn client::HasSynced; 1] = [&self.registration];
        let inner = self.inner.clone();
        Runner::new("pvprotection")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |name: String| {
                    let inner = inner.clone();
                    async move { inner.sync(&name).await.map(|()| Action::AwaitChange) }
                },
            )
            .await;
    }
}

impl Inner {
    /// `processPV` for one volume.
    async fn sync(&self, name: &str) -> Result<()> {
        let Some(pv) = self.volumes.get(name) else {
            return Ok(());
        };
        let finalizers = match decide(&pv.metadata, PV_PROTECTION_FINALIZER, pv_in_use(&pv)) {
            Decision::Nothing => return Ok(()),
            Decision::AddFinalizer(f) | Decision::RemoveFinalizer(f) => f,
        };
        let api = self.client.api::<PersistentVolume>(None);
        match api
            .patch(name, &finalizers_patch(&pv.metadata, finalizers))
            .await
        {
            Ok(_) => {
                tracing::info!(volume = name, "volume protection finalizer updated");
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("update volume finalizers", e)),
        }
    }
}

struct VolumeHandler(Arc<Inner>);

impl ResourceEventHandler<PersistentVolume> for VolumeHandler {
    fn on_add(&self, obj: &Arc<PersistentVolume>, _in_initial_list: bool) {
        let meta = &obj.metadata;
        if needs_finalizer(meta, PV_PROTECTION_FINALIZER)
            || is_deletion_candidate(meta, PV_PROTECTION_FINALIZER)
        {
            if let Some(name) = &meta.name {
                self.0.queue.add(name.clone());
            }
        }
    }

    fn on_update(&self, _old: &Arc<PersistentVolume>, new: &Arc<PersistentVolume>) {
        self.on_add(new, false);
    }

    fn on_delete(&self, _obj: DeletedObject<PersistentVolume>) {}
}
