//! The fake driver's resizer: what kubernetes-csi's `external-resizer` and the kubelet's online
//! file-system expansion do once the expander annotated a claim with
//! `volume.kubernetes.io/storage-resizer` (any resizer name: in a sandbox this fake stands in for
//! every storage driver).
//!
//! Three writes, each skipped when already done, so an interrupted resize completes on the next
//! sync: (1) the claim's status marks the controller resize (`Resizing` condition,
//! `allocatedResources.storage` = the request, `allocatedResourceStatuses.storage =
//! ControllerResizeInProgress`; event `Resizing`); (2) the volume's `spec.capacity.storage` becomes
//! the request; (3) the node expansion finishes at once (online expansion): `status.capacity`
//! becomes the request, the resize conditions and `allocatedResourceStatuses` are cleared
//! (`allocatedResources` stays, as upstream), event `FileSystemResizeSuccessful`.

use std::collections::BTreeMap;

use client::record::EventType;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::provisioner::Inner;
use super::{
    annotation, claim_capacity, claim_reference, requested_storage, volume_capacity, volume_name,
    ANN_STORAGE_RESIZER,
};
use crate::{Error, Result};

/// `allocatedResourceStatuses` value while the controller expands the volume.
pub const CONTROLLER_RESIZE_IN_PROGRESS: &str = "ControllerResizeInProgress";

fn requested_quantity(claim: &PersistentVolumeClaim) -> Option<Quantity> {
    claim
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .cloned()
}

fn is_resize_condition(c: &PersistentVolumeClaimCondition) -> bool {
    matches!(
        c.type_.as_str(),
        "Resizing" | "FileSystemResizePending" | "ControllerResizeError" | "NodeResizeError"
    )
}

impl Inner {
    pub(super) async fn resize(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        if annotation(&claim.metadata, ANN_STORAGE_RESIZER).is_none_or(str::is_empty)
            || super::claim_phase(claim) != "Bound"
        {
            return Ok(());
        }
        let requested = requested_storage(claim);
        if requested <= claim_capacity(claim) {
            return Ok(());
        }
        let (Some(pv), Some(quantity)) = (
            self.volumes.get(volume_name(claim)),
            requested_quantity(claim),
        ) else {
            return Ok(());
        };
        let pv_name = pv.metadata.name.clone().unwrap_or_default();
        let claim_api = self
            .client
            .api::<PersistentVolumeClaim>(claim.metadata.namespace.as_deref());
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let now = Time(self.clock.now());

        // (1) Mark the controller resize.
        let mut c = claim.clone();
        let status = c.status.get_or_insert_with(Default::default);
        let allocated = status
            .allocated_resources
            .as_ref()
            .and_then(|a| a.get("storage"));
        if allocated != Some(&quantity) && volume_capacity(&pv) < requested {
            status.allocated_resources =
                Some(BTreeMap::from([("storage".to_string(), quantity.clone())]));
            status.allocated_resource_statuses = Some(BTreeMap::from([(
                "storage".to_string(),
                CONTROLLER_RESIZE_IN_PROGRESS.to_string(),
            )]));
            let mut conds: Vec<_> = status.conditions.take().unwrap_or_default();
            conds.retain(|c| !is_resize_condition(c));
            conds.push(PersistentVolumeClaimCondition {
                type_: "Resizing".into(),
                status: "True".into(),
                last_transition_time: Some(now.clone()),
                ..Default::default()
            });
            status.conditions = Some(conds);
            c = match claim_api.replace_status(&claim_name, &c).await {
                Ok(c) => c,
                Err(e) if e.is_not_found() || e.is_conflict() => return Ok(()),
                Err(e) => return Err(Error::api("mark claim resizing", e)),
            };
            self.recorder.event(
                &claim_reference(claim),
                EventType::Normal,
                "Resizing",
                &format!("External resizer is resizing volume {pv_name}"),
            );
        }

        // (2) Expand the volume.
        if volume_capacity(&pv) < requested {
            let mut v: PersistentVolume = (*pv).clone();
            v.spec
                .get_or_insert_with(Default::default)
                .capacity
                .get_or_insert_with(BTreeMap::new)
                .insert("storage".into(), quantity.clone());
            match self
                .client
                .api::<PersistentVolume>(None)
                .replace(&pv_name, &v)
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() || e.is_conflict() => return Ok(()),
                Err(e) => return Err(Error::api("expand volume", e)),
            }
        }

        // (3) The node expansion (online) finishes.
        let status = c.status.get_or_insert_with(Default::default);
        status
            .capacity
            .get_or_insert_with(BTreeMap::new)
            .insert("storage".into(), quantity.clone());
        status
            .allocated_resources
            .get_or_insert_with(BTreeMap::new)
            .insert("storage".into(), quantity);
        status.allocated_resource_statuses = None;
        if let Some(conds) = status.conditions.as_mut() {
            conds.retain(|c| !is_resize_condition(c));
        }
        if status.conditions.as_ref().is_some_and(Vec::is_empty) {
            status.conditions = None;
        }
        match claim_api.replace_status(&claim_name, &c).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() || e.is_conflict() => return Ok(()),
            Err(e) => return Err(Error::api("finish claim resize", e)),
        }
        self.recorder.event(
            &claim_reference(claim),
            EventType::Normal,
            "FileSystemResizeSuccessful",
            &format!("MountVolume.NodeExpandVolume succeeded for volume \"{pv_name}\""),
        );
        Ok(())
    }
}
