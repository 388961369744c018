//! The binder's syncs (`syncClaim`, `syncVolume`, `bind`, `reclaimVolume` of upstream's
//! `pv_controller.go`), one object at a time, from the cache.
//!
//! Binding takes four writes in upstream's order, each idempotent so that a sync interrupted
//! after any of them completes on the next one: the volume's `claimRef` (+ `bound-by-controller`
//! when the controller chose it), the volume's phase `Bound`, the claim's `volumeName` (+
//! `bind-completed`, and `bound-by-controller` when the controller chose), the claim's status
//! (`Bound`, the volume's capacity and access modes). A claim without a match either waits for its
//! first consumer (WaitForFirstConsumer without `selected-node`), is handed to its class's
//! provisioner (the `storage-provisioner` annotations and an `ExternalProvisioning` event), or
//! stays Pending. A volume whose claim is gone is `Released` and reclaimed: `Retain` keeps it;
//! `Delete` leaves a provisioned volume to its provisioner; any other volume has no deleter here
//! (minik8s has no volume plugins), so, as upstream without a deletable plugin, it goes `Failed`
//! with a `VolumeFailedDelete` event and the reason in `status.message`.

use std::collections::BTreeMap;
use std::sync::Arc;

use client::record::EventType;
use client::split_meta_namespace_key;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::binder::Inner;
use super::matching::find_best_match;
use super::{
    annotation, claim_class, claim_ref, claim_reference, is_volume_bound_to_claim,
    is_wait_for_first_consumer, volume_name, volume_phase, volume_reference,
    ANN_BETA_STORAGE_PROVISIONER, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
};
use crate::{Error, Result};

fn claim_event_ref(claim: &PersistentVolumeClaim) -> k8s_openapi::api::core::v1::ObjectReference {
    claim_reference(claim)
}

fn set_annotation(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
    value: &str,
) {
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_string(), value.to_string());
}

/// Not found or conflict: the cache is behind; the informer brings the key back.
fn settled(e: &client::Error) -> bool {
    e.is_not_found() || e.is_conflict()
}

impl Inner {
    fn claim_event(&self, claim: &PersistentVolumeClaim, t: EventType, reason: &str, msg: &str) {
        self.recorder.event(&claim_event_ref(claim), t, reason, msg);
    }

    pub(super) async fn sync_claim(&self, key: &str) -> Result<()> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(());
        };
        let Some(claim) = self.claims.namespace(ns).get(name) else {
            return Ok(());
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        if annotation(&claim.metadata, ANN_BIND_COMPLETED).is_none() {
            self.sync_unbound_claim(&claim).await
        } else {
            self.sync_bound_claim(&claim).await
        }
    }

    async fn sync_unbound_claim(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        let all = api::labels::Selector::everything();
        let wanted = volume_name(claim);
        if wanted.is_empty() {
            let class = super::class_of(claim, &self.classes);
            let delay = is_wait_for_first_consumer(class.as_deref());
            let volumes = self.volumes.list(&all);
            if let Some(pv) = find_best_match(claim, &volumes, None, delay) {
                return self.bind(&pv, claim).await;
            }
            let selected = annotation(&claim.metadata, ANN_SELECTED_NODE).is_some();
            if delay && !selected {
                self.claim_event(
                    claim,
                    EventType::Normal,
                    "WaitForFirstConsumer",
                    "waiting for first consumer to be created before binding",
                );
                return self.set_claim_pending(claim).await;
            }
            let class_name = claim_class(claim);
            if class_name.is_empty() {
                self.claim_event(
                    claim,
                    EventType::Normal,
                    "FailedBinding",
                    "no persistent volumes available for this claim and no storage class is set",
                );
                return self.set_claim_pending(claim).await;
            }
            let Some(class) = class else {
                self.claim_event(
                    claim,
                    EventType::Warning,
                    "ProvisioningFailed",
                    &format!("storageclass.storage.k8s.io \"{class_name}\" not found"),
                );
                return self.set_claim_pending(claim).await;
            };
            return self.provision(claim, &class.provisioner).await;
        }
        // Pre-bound by the user to a volume.
        let Some(pv) = self.volumes.get(wanted) else {
            return self.set_claim_pending(claim).await;
        };
        match claim_ref(&pv) {
            None => self.bind(&pv, claim).await,
            Some(_) if is_volume_bound_to_claim(&pv, claim) => self.bind(&pv, claim).await,
            Some(_) => {
                self.claim_event(
                    claim,
                    EventType::Warning,
                    "FailedBinding",
                    &format!("volume \"{wanted}\" already bound to a different claim."),
                );
                self.set_claim_pending(claim).await
            }
        }
    }

    async fn sync_bound_claim(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        let wanted = volume_name(claim);
        if wanted.is_empty() {
            return self
                .set_claim_lost(claim, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
                .await;
        }
        let Some(pv) = self.volumes.get(wanted) else {
            return self
                .set_claim_lost(
                    claim,
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                )
                .await;
        };
        if claim_ref(&pv).is_none() || is_volume_bound_to_claim(&pv, claim) {
            return self.bind(&pv, claim).await;
        }
        self.claim_event(
            claim,
            EventType::Warning,
            "ClaimMisbound",
            "Two claims are bound to the same volume, this one is bound incorrectly",
        );
        self.write_claim_status(claim, "Lost", None).await
    }

    /// `provisionClaimOperationExternal`: name the provisioner on the claim and say so.
    async fn provision(&self, claim: &PersistentVolumeClaim, provisioner: &str) -> Result<()> {
        let named = annotation(&claim.metadata, ANN_STORAGE_PROVISIONER) == Some(provisioner)
            && annotation(&claim.metadata, ANN_BETA_STORAGE_PROVISIONER) == Some(provisioner);
        if !named {
            let mut c = claim.clone();
            set_annotation(&mut c.metadata, ANN_STORAGE_PROVISIONER, provisioner);
            set_annotation(&mut c.metadata, ANN_BETA_STORAGE_PROVISIONER, provisioner);
            let api = self
                .client
                .api::<PersistentVolumeClaim>(claim.metadata.namespace.as_deref());
            match api
                .replace(claim.metadata.name.as_deref().unwrap_or(""), &c)
                .await
            {
                Ok(_) => {}
                Err(e) if settled(&e) => return Ok(()),
                Err(e) => return Err(Error::api("set claim provisioner", e)),
            }
        }
        self.claim_event(
            claim,
            EventType::Normal,
            "ExternalProvisioning",
            &format!(
                "Waiting for a volume to be created either by the external provisioner '{provisioner}' \
                 or manually by the system administrator. If volume creation is delayed, please verify \
                 that the provisioner is running and correctly registered."
            ),
        );
        Ok(())
    }

    async fn set_claim_pending(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        self.write_claim_status(claim, "Pending", None).await
    }

    async fn set_claim_lost(&self, claim: &PersistentVolumeClaim, msg: &str) -> Result<()> {
        if super::claim_phase(claim) != "Lost" {
            self.claim_event(claim, EventType::Warning, "ClaimLost", msg);
        }
        self.write_claim_status(claim, "Lost", None).await
    }

    /// `updateClaimStatus`: the phase, and with a volume its capacity and access modes.
    async fn write_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        phase: &str,
        pv: Option<&PersistentVolume>,
    ) -> Result<()> {
        let mut status = claim.status.clone().unwrap_or_default();
        status.phase = Some(phase.to_string());
        if let Some(spec) = pv.and_then(|p| p.spec.as_ref()) {
            status.access_modes = spec.access_modes.clone();
            // A resize in progress owns `capacity` (the expander's fake resizer sets it).
            if status.capacity.is_none() {
                status.capacity = spec.capacity.clone();
            }
        }
        if claim.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut c = claim.clone();
        c.status = Some(status);
        let api = self
            .client
            .api::<PersistentVolumeClaim>(claim.metadata.namespace.as_deref());
        match api
            .replace_status(claim.metadata.name.as_deref().unwrap_or(""), &c)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if settled(&e) => Ok(()),
            Err(e) => Err(Error::api("update claim status", e)),
        }
    }

    async fn write_volume_phase(
        &self,
        pv: &PersistentVolume,
        phase: &str,
    ) -> Result<Option<PersistentVolume>> {
        if volume_phase(pv) == phase {
            return Ok(Some(pv.clone()));
        }
        let mut v = pv.clone();
        v.status.get_or_insert_with(Default::default).phase = Some(phase.to_string());
        let api = self.client.api::<PersistentVolume>(None);
        match api
            .replace_status(pv.metadata.name.as_deref().unwrap_or(""), &v)
            .await
        {
            Ok(v) => Ok(Some(v)),
            Err(e) if settled(&e) => Ok(None),
            Err(e) => Err(Error::api("update volume phase", e)),
        }
    }

    /// `bind`: volume to claim, volume phase, claim to volume, claim status.
    async fn bind(&self, pv: &Arc<PersistentVolume>, claim: &PersistentVolumeClaim) -> Result<()> {
        let pv_name = pv.metadata.name.clone().unwrap_or_default();
        let vol_api = self.client.api::<PersistentVolume>(None);
        let mut pv: PersistentVolume = (**pv).clone();
        let reference = claim_reference(claim);
        let bound_uid = claim_ref(&pv).and_then(|r| r.uid.clone());
        if bound_uid.is_none() || bound_uid != claim.metadata.uid {
            if claim_ref(&pv).is_none() {
                set_annotation(&mut pv.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
            }
            pv.spec.get_or_insert_with(Default::default).claim_ref = Some(reference);
            pv = match vol_api.replace(&pv_name, &pv).await {
                Ok(v) => v,
                Err(e) if settled(&e) => return Ok(()),
                Err(e) => return Err(Error::api("bind volume to claim", e)),
            };
        }
        let Some(pv) = self.write_volume_phase(&pv, "Bound").await? else {
            return Ok(());
        };
        let mut c = claim.clone();
        let mut changed = false;
        if volume_name(claim) != pv_name {
            if volume_name(claim).is_empty() {
                set_annotation(&mut c.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
            }
            c.spec.get_or_insert_with(Default::default).volume_name = Some(pv_name.clone());
            changed = true;
        }
        if annotation(&claim.metadata, ANN_BIND_COMPLETED).is_none() {
            set_annotation(&mut c.metadata, ANN_BIND_COMPLETED, "yes");
            changed = true;
        }
        let claim_api = self
            .client
            .api::<PersistentVolumeClaim>(claim.metadata.namespace.as_deref());
        let c = if changed {
            match claim_api
                .replace(claim.metadata.name.as_deref().unwrap_or(""), &c)
                .await
            {
                Ok(c) => c,
                Err(e) if settled(&e) => return Ok(()),
                Err(e) => return Err(Error::api("bind claim to volume", e)),
            }
        } else {
            c
        };
        tracing::debug!(claim = ?c.metadata.name, volume = pv_name, "bound");
        self.write_claim_status(&c, "Bound", Some(&pv)).await
    }

    pub(super) async fn sync_volume(&self, name: &str) -> Result<()> {
        let Some(pv) = self.volumes.get(name) else {
            return Ok(());
        };
        let Some(r) = claim_ref(&pv) else {
            self.write_volume_phase(&pv, "Available").await?;
            return Ok(());
        };
        let uid = r.uid.as_deref().unwrap_or("");
        if uid.is_empty() {
            // Pre-bound by the user; the claim's sync finishes the binding.
            self.write_volume_phase(&pv, "Available").await?;
            self.queue_claim(&pv);
            return Ok(());
        }
        let (ns, claim_name) = (
            r.namespace.as_deref().unwrap_or(""),
            r.name.as_deref().unwrap_or(""),
        );
        let claim = self
            .claims
            .namespace(ns)
            .get(claim_name)
            .filter(|c| c.metadata.uid.as_deref() == Some(uid));
        let Some(claim) = claim else {
            let Some(pv) = self.write_volume_phase(&pv, "Released").await? else {
                return Ok(());
            };
            return self.reclaim(&pv).await;
        };
        let bound_to = volume_name(&claim);
        if bound_to.is_empty() {
            // The claim's sync is binding it (or the scheduler pre-bound this volume).
            self.queue_claim(&pv);
            return Ok(());
        }
        if bound_to == name {
            self.write_volume_phase(&pv, "Bound").await?;
            return Ok(());
        }
        // The claim is bound to another volume.
        let provisioned = annotation(&pv.metadata, ANN_PROVISIONED_BY).is_some();
        if provisioned && reclaim_policy(&pv) == "Delete" {
            let Some(pv) = self.write_volume_phase(&pv, "Released").await? else {
                return Ok(());
            };
            return self.reclaim(&pv).await;
        }
        self.unbind(&pv).await
    }

    fn queue_claim(&self, pv: &PersistentVolume) {
        if let Some(r) = claim_ref(pv) {
            if let (Some(ns), Some(n)) = (r.namespace.as_deref(), r.name.as_deref()) {
                self.claim_queue.add(format!("{ns}/{n}"));
            }
        }
    }

    /// `unbindVolume`: a controller-bound volume loses its claimRef; a user's keeps the name.
    async fn unbind(&self, pv: &PersistentVolume) -> Result<()> {
        let mut v = pv.clone();
        let by_controller = annotation(&pv.metadata, ANN_BOUND_BY_CONTROLLER).is_some();
        if let Some(spec) = v.spec.as_mut() {
            if by_controller {
                spec.claim_ref = None;
            } else if let Some(r) = spec.claim_ref.as_mut() {
                r.uid = None;
            }
        }
        if let Some(a) = v.metadata.annotations.as_mut() {
            a.remove(ANN_BOUND_BY_CONTROLLER);
        }
        let api = self.client.api::<PersistentVolume>(None);
        let v = match api
            .replace(pv.metadata.name.as_deref().unwrap_or(""), &v)
            .await
        {
            Ok(v) => v,
            Err(e) if settled(&e) => return Ok(()),
            Err(e) => return Err(Error::api("unbind volume", e)),
        };
        self.write_volume_phase(&v, "Available").await.map(|_| ())
    }

    /// `reclaimVolume` of a Released volume.
    async fn reclaim(&self, pv: &PersistentVolume) -> Result<()> {
        match reclaim_policy(pv) {
            "Delete" if annotation(&pv.metadata, ANN_PROVISIONED_BY).is_some() => {
                // Its provisioner deletes it (and the storage behind it).
                Ok(())
            }
            "Delete" => {
                // `findDeletablePlugin` finds no plugin for a volume nobody provisioned.
                let message = format!(
                    "error getting deleter volume plugin for volume {:?}: no deletable volume plugin matched",
                    pv.metadata.name.as_deref().unwrap_or("")
                );
                let mut failed = pv.clone();
                let status = failed.status.get_or_insert_with(Default::default);
                if status.phase.as_deref() == Some("Failed")
                    && status.message.as_deref() == Some(message.as_str())
                {
                    return Ok(());
                }
                status.phase = Some("Failed".into());
                status.message = Some(message.clone());
                let name = pv.metadata.name.as_deref().unwrap_or("");
                match self
                    .client
                    .api::<PersistentVolume>(None)
                    .replace_status(name, &failed)
                    .await
                {
                    Ok(_) => {
                        self.recorder.event(
                            &volume_reference(pv),
                            EventType::Warning,
                            "VolumeFailedDelete",
                            &message,
                        );
                        Ok(())
                    }
                    Err(e) if settled(&e) => Ok(()),
                    Err(e) => Err(Error::api("mark released volume failed", e)),
                }
            }
            // Retain: the administrator reclaims it. Recycle (deprecated) is not simulated.
            _ => Ok(()),
        }
    }
}

/// The volume's reclaim policy (`Retain` when unset, as the API defaults it for static volumes).
pub fn reclaim_policy(pv: &PersistentVolume) -> &str {
    pv.spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain")
}
