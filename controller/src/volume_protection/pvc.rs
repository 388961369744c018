//! `PvcProtectionController` (`pvc-protection`): removes `kubernetes.io/pvc-protection` from a
//! claim being deleted once no pod uses it, and adds it to a live claim without it.
//!
//! The queue holds claim keys (`namespace/name`). A claim is queued when it is added or updated
//! and needs the finalizer or is a deletion candidate; a pod is looked at when it is deleted,
//! terminated or unscheduled (only those can free a claim), and queues every claim it names (and
//! on a pod replaced by another of the same name, the old pod's claims too). A sync reads the
//! claim from the cache; for a deletion candidate it asks the pod informer's claim index
//! ([`PVC_INDEX`]) and, when no cached pod uses the claim, a live list of the namespace's pods
//! (upstream's `askAPIServer`: the cache may not have a pod created a moment ago). Upstream
//! batches the claims of a namespace to share one live list; here each claim lists once.

use std::sync::Arc;

use client::{
    key_of_meta, split_meta_namespace_key, Action, Client, DeletedObject, HandlerRegistration,
    Indexer, ListParams, Lister, RateLimitingQueue, ResourceEventHandler, Runner,
    SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use tokio_util::sync::CancellationToken;

use super::decide::{
    claim_keys, decide, is_deletion_candidate, needs_finalizer, pod_event_may_free_claims,
    pod_uses_pvc, Decision, PVC_PROTECTION_FINALIZER,
};
use super::finalizers_patch;
use crate::cached_pod::CachedPod;
use crate::{Error, Result};

/// The pod index by the claims a pod names (upstream `common.PodPVCIndex`).
pub const PVC_INDEX: &str = "pod-pvc-index";

struct Inner {
    client: Client,
    claims: Lister<PersistentVolumeClaim>,
    pod_index: Indexer<CachedPod>,
    queue: RateLimitingQueue<String>,
}

/// The PVC protection controller.
pub struct PvcProtectionController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 2],
}

impl PvcProtectionController {
    /// Build on the shared claim and pod informers.
    pub fn new(
        client: Client,
        claims: SharedIndexInformer<PersistentVolumeClaim>,
        pods: SharedIndexInformer<CachedPod>,
    ) -> Self {
        let by_claim: client::IndexFunc<CachedPod> = Arc::new(|p: &CachedPod| claim_keys(p));
        // Another controller may have added the same index: that one serves as well.
        if let Err(e) = pods.add_indexers([(PVC_INDEX.to_string(), by_claim)].into()) {
            tracing::debug!(error = %e, "pod claim index not added");
        }
        let inner = Arc::new(Inner {
            client,
            claims: claims.lister(),
            pod_index: pods.indexer(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("pvcprotection"),
        });
        let registrations = [
            claims.add_event_handler(ClaimHandler(inner.clone())),
            pods.add_event_handler(PodHandler(inner.clone())),
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
        let [a, b] = &self.registrations;
        let synced: [&dyn client::HasSynced; 2] = [a, b];
        let inner = self.inner.clone();
        Runner::new("pvcprotection")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move { inner.sync(&key).await.map(|()| Action::AwaitChange) }
                },
            )
            .await;
    }
}

impl Inner {
    /// `processPVC` for one claim key.
    async fn sync(&self, key: &str) -> Result<()> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(());
        };
        let Some(claim) = self.claims.namespace(ns).get(name) else {
            return Ok(());
        };
        let in_use = is_deletion_candidate(&claim.metadata, PVC_PROTECTION_FINALIZER)
            && (self.used_by_a_cached_pod(key, &claim)
                || self.used_by_a_live_pod(ns, &claim).await?);
        let finalizers = match decide(&claim.metadata, PVC_PROTECTION_FINALIZER, in_use) {
            Decision::Nothing => {
                if in_use {
                    tracing::debug!(claim = key, "keeping claim: a pod uses it");
                }
                return Ok(());
            }
            Decision::AddFinalizer(f) | Decision::RemoveFinalizer(f) => f,
        };
        let api = self.client.api::<PersistentVolumeClaim>(Some(ns));
        match api
            .patch(name, &finalizers_patch(&claim.metadata, finalizers))
            .await
        {
            Ok(_) => {
                tracing::info!(claim = key, "claim protection finalizer updated");
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("update claim finalizers", e)),
        }
    }

    /// `askInformer`: whether a cached pod uses `claim` (of key `key`).
    fn used_by_a_cached_pod(&self, key: &str, claim: &PersistentVolumeClaim) -> bool {
        self.pod_index
            .by_index(PVC_INDEX, key)
            .iter()
            .any(|p| pod_uses_pvc(p, claim))
    }

    /// `askAPIServer`: whether a pod of a live list of `ns` uses `claim`.
    async fn used_by_a_live_pod(&self, ns: &str, claim: &PersistentVolumeClaim) -> Result<bool> {
        // Read as the cache reads pods (only what the check needs is decoded).
        let pods = self
            .client
            .api_with::<CachedPod>(&client::ApiResource::of::<Pod>(), Some(ns))
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::api("live list of pods", e))?;
        Ok(pods.items.iter().any(|p| pod_uses_pvc(p, claim)))
    }

    fn queue_claims_of(&self, pod: &CachedPod, deleted: bool) {
        if pod_event_may_free_claims(pod, deleted) {
            for key in claim_keys(pod) {
                self.queue.add(key);
            }
        }
    }
}

struct ClaimHandler(Arc<Inner>);

impl ClaimHandler {
    fn consider(&self, claim: &PersistentVolumeClaim) {
        let meta = &claim.metadata;
        if needs_finalizer(meta, PVC_PROTECTION_FINALIZER)
            || is_deletion_candidate(meta, PVC_PROTECTION_FINALIZER)
        {
            self.0.queue.add(key_of_meta(meta));
        }
    }
}

impl ResourceEventHandler<PersistentVolumeClaim> for ClaimHandler {
    fn on_add(&self, obj: &Arc<PersistentVolumeClaim>, _in_initial_list: bool) {
        self.consider(obj);
    }

    fn on_update(&self, _old: &Arc<PersistentVolumeClaim>, new: &Arc<PersistentVolumeClaim>) {
        self.consider(new);
    }

    fn on_delete(&self, _obj: DeletedObject<PersistentVolumeClaim>) {}
}

struct PodHandler(Arc<Inner>);

impl ResourceEventHandler<CachedPod> for PodHandler {
    fn on_add(&self, obj: &Arc<CachedPod>, _in_initial_list: bool) {
        self.0.queue_claims_of(obj, false);
    }

    fn on_update(&self, old: &Arc<CachedPod>, new: &Arc<CachedPod>) {
        self.0.queue_claims_of(new, false);
        // An update may hide the deletion of a pod and the creation of another of its name.
        if old.metadata.uid != new.metadata.uid {
            self.0.queue_claims_of(old, true);
        }
    }

    fn on_delete(&self, obj: DeletedObject<CachedPod>) {
        self.0.queue_claims_of(obj.object(), true);
    }
}
