//! `PersistentVolumeController` (`persistentvolume-binder`, canonical name
//! `persistentvolume-binder-controller`): the informers, queues and workers; the syncs are in
//! [`super::binder_sync`].
//!
//! Two work queues as upstream: claims (`namespace/name`) and volumes (`name`), one worker each
//! (upstream runs one goroutine per queue, so two syncs of one object never race). A claim is
//! queued when it changes, and when a volume naming it in `claimRef` changes; a volume when it
//! changes, and when its claim changes or goes. Every claim and volume is queued again each
//! [`SYNC_PERIOD`] (`--pvclaimbinder-sync-period`), which retries what waited on something no
//! event announces (a class created after its claim). Writes use the cached object's
//! resourceVersion; a conflict retries the key with the queue's back-off.

use std::sync::Arc;
use std::time::Duration;

use client::record::EventRecorder;
use client::{
    key_of_meta, Action, Client, DeletedObject, HandlerRegistration, HasSynced, Lister,
    RateLimitingQueue, ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use tokio_util::sync::CancellationToken;

use super::{claim_ref, volume_name};
use crate::Error;

/// `--pvclaimbinder-sync-period` (kube-controller-manager default 15 s).
pub const SYNC_PERIOD: Duration = Duration::from_secs(15);

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) claims: Lister<PersistentVolumeClaim>,
    pub(super) volumes: Lister<PersistentVolume>,
    pub(super) classes: Lister<StorageClass>,
    pub(super) claim_queue: RateLimitingQueue<String>,
    pub(super) volume_queue: RateLimitingQueue<String>,
    pub(super) recorder: EventRecorder,
}

/// The PersistentVolume binder.
pub struct PersistentVolumeController {
    inner: Arc<Inner>,
    registrations: Vec<HandlerRegistration>,
}

impl PersistentVolumeController {
    /// Build the binder on the shared informers.
    pub fn new(
        client: Client,
        volumes: SharedIndexInformer<PersistentVolume>,
        claims: SharedIndexInformer<PersistentVolumeClaim>,
        classes: SharedIndexInformer<StorageClass>,
        recorder: EventRecorder,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            claims: claims.lister(),
            volumes: volumes.lister(),
            classes: classes.lister(),
            claim_queue: RateLimitingQueue::with_default_controller_rate_limiter("claims"),
            volume_queue: RateLimitingQueue::with_default_controller_rate_limiter("volumes"),
            recorder,
        });
        let registrations = vec![
            volumes.add_event_handler(VolumeHandler(inner.clone())),
            claims.add_event_handler(ClaimHandler(inner.clone())),
            classes.add_event_handler(ClassHandler),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The claim queue (for metrics).
    pub fn claim_queue(&self) -> RateLimitingQueue<String> {
        self.inner.claim_queue.clone()
    }

    /// The volume queue (for metrics).
    pub fn volume_queue(&self) -> RateLimitingQueue<String> {
        self.inner.volume_queue.clone()
    }

    /// Wait for the caches, then run one worker per queue and the periodic resync until
    /// `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let synced: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        let (a, b) = (self.inner.clone(), self.inner.clone());
        let claims = Runner::new("persistentvolume-binder-claims").run_workers(
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
        let volumes = Runner::new("persistentvolume-binder-volumes").run_workers(
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
        let resync = self.inner.clone().resync(shutdown.clone());
        tokio::join!(claims, volumes, resync);
    }
}

impl Inner {
    /// Upstream's `resync`: queue every claim and volume each [`SYNC_PERIOD`].
    async fn resync(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(SYNC_PERIOD);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let all = api::labels::Selector::everything();
            for c in self.claims.list(&all) {
                self.claim_queue.add(key_of_meta(&c.metadata));
            }
            for v in self.volumes.list(&all) {
                self.volume_queue
                    .add(v.metadata.name.clone().unwrap_or_default());
            }
        }
    }

    fn queue_claim_of(&self, pv: &PersistentVolume) {
        if let Some(r) = claim_ref(pv) {
            if let (Some(ns), Some(name)) = (r.namespace.as_deref(), r.name.as_deref()) {
                self.claim_queue.add(format!("{ns}/{name}"));
            }
        }
    }
}

struct VolumeHandler(Arc<Inner>);

impl ResourceEventHandler<PersistentVolume> for VolumeHandler {
    fn on_add(&self, obj: &Arc<PersistentVolume>, _in_initial_list: bool) {
        self.0
            .volume_queue
            .add(obj.metadata.name.clone().unwrap_or_default());
        self.0.queue_claim_of(obj);
    }

    fn on_update(&self, _old: &Arc<PersistentVolume>, new: &Arc<PersistentVolume>) {
        self.0
            .volume_queue
            .add(new.metadata.name.clone().unwrap_or_default());
        self.0.queue_claim_of(new);
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolume>) {
        // A bound claim whose volume is gone becomes Lost.
        self.0.queue_claim_of(obj.object());
    }
}

struct ClaimHandler(Arc<Inner>);

impl ClaimHandler {
    fn queue_volume_of(&self, claim: &PersistentVolumeClaim) {
        let name = volume_name(claim);
        if !name.is_empty() {
            self.0.volume_queue.add(name.to_string());
        }
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for ClaimHandler {
    fn on_add(&self, obj: &Arc<PersistentVolumeClaim>, _in_initial_list: bool) {
        self.0.claim_queue.add(key_of_meta(&obj.metadata));
    }

    fn on_update(&self, _old: &Arc<PersistentVolumeClaim>, new: &Arc<PersistentVolumeClaim>) {
        self.0.claim_queue.add(key_of_meta(&new.metadata));
    }

    fn on_delete(&self, obj: DeletedObject<PersistentVolumeClaim>) {
        // Its volume is released (and reclaimed).
        self.queue_volume_of(obj.object());
    }
}

/// The class informer only has to be synced before claims are decided.
struct ClassHandler;

impl ResourceEventHandler<StorageClass> for ClassHandler {
    fn on_add(&self, _obj: &Arc<StorageClass>, _in_initial_list: bool) {}
    fn on_update(&self, _old: &Arc<StorageClass>, _new: &Arc<StorageClass>) {}
    fn on_delete(&self, _obj: DeletedObject<StorageClass>) {}
}
