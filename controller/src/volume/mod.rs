//! Persistent volumes: the binder (`persistentvolume-binder`), the expander
//! (`persistentvolume-expander`), and a fake of kind's external local-path provisioner and of a CSI
//! resizer, which finish what those controllers hand to storage drivers.
//!
//! Upstream: `pkg/controller/volume/persistentvolume` (binder), `pkg/controller/volume/expand`
//! (expander), `pkg/volume/util` (helpers), rancher's `local-path-provisioner` and
//! `sig-storage-lib-external-provisioner` (provisioner), kubernetes-csi `external-resizer`.
//! The annotations, event reasons and messages are upstream's; the pure decisions (which volume a
//! claim binds to, whether a volume's node affinity admits a node) live in [`matching`] and
//! [`affinity`] and are tested without I/O.

pub mod affinity;
pub mod binder;
pub mod binder_sync;
pub mod expander;
pub mod matching;
pub mod provisioner;
pub mod resizer;

use std::sync::Arc;

use api::quantity::Amount;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

/// `pv.kubernetes.io/bind-completed` (on claims the binder has bound).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// `pv.kubernetes.io/bound-by-controller` (on volumes and claims the binder bound, not the user).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// `volume.kubernetes.io/storage-provisioner`: which provisioner should provision the claim.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// `volume.beta.kubernetes.io/storage-provisioner`, still set beside it.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// `volume.kubernetes.io/selected-node`: the scheduler's node for a WaitForFirstConsumer claim.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// `pv.kubernetes.io/provisioned-by`: the provisioner that created a volume.
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// `volume.kubernetes.io/storage-resizer`: the resizer that should expand a claim's volume.
pub const ANN_STORAGE_RESIZER: &str = "volume.kubernetes.io/storage-resizer";
/// `volume.beta.kubernetes.io/storage-class`, which wins over `storageClassName`.
pub const ANN_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// `kubernetes.io/no-provisioner`: a class whose volumes are created by hand.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// `WaitForFirstConsumer`.
pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
/// kind's default provisioner, the one [`provisioner`] simulates.
pub const LOCAL_PATH_PROVISIONER: &str = "rancher.io/local-path";

/// An annotation's value.
pub fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// `GetPersistentVolumeClaimClass`: the beta annotation, else `storageClassName`, else `""`.
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(c) = annotation(&claim.metadata, ANN_STORAGE_CLASS) {
        return c;
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// `GetPersistentVolumeClass`: the same for a volume.
pub fn volume_class(pv: &PersistentVolume) -> &str {
    if let Some(c) = annotation(&pv.metadata, ANN_STORAGE_CLASS) {
        return c;
    }
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

fn storage_of(
    list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) -> Amount {
    list.and_then(|m| m.get("storage"))
        .and_then(|q| Amount::parse(&q.0).ok())
        .unwrap_or(Amount::ZERO)
}

/// The claim's `spec.resources.requests.storage`.
pub fn requested_storage(claim: &PersistentVolumeClaim) -> Amount {
    storage_of(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
    )
}

/// The claim's `status.capacity.storage`.
pub fn claim_capacity(claim: &PersistentVolumeClaim) -> Amount {
    storage_of(claim.status.as_ref().and_then(|s| s.capacity.as_ref()))
}

/// The volume's `spec.capacity.storage`.
pub fn volume_capacity(pv: &PersistentVolume) -> Amount {
    storage_of(pv.spec.as_ref().and_then(|s| s.capacity.as_ref()))
}

/// The claim's phase (`Pending` when unset).
pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// The volume's phase (`Pending` when unset).
pub fn volume_phase(pv: &PersistentVolume) -> &str {
    pv.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// The claim a volume is bound or pre-bound to.
pub fn claim_ref(pv: &PersistentVolume) -> Option<&ObjectReference> {
    pv.spec.as_ref()?.claim_ref.as_ref()
}

/// `spec.volumeName` of a claim (`""` when unset).
pub fn volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("")
}

/// `IsVolumeBoundToClaim`: the volume's claimRef names the claim (and its uid, when set).
pub fn is_volume_bound_to_claim(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = claim_ref(pv) else {
        return false;
    };
    if r.name != claim.metadata.name || r.namespace != claim.metadata.namespace {
        return false;
    }
    match r.uid.as_deref() {
        None | Some("") => true,
        uid => uid == claim.metadata.uid.as_deref(),
    }
}

/// `GetBindVolumeToClaim`'s reference to a claim.
pub fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// An event's reference to a volume.
pub fn volume_reference(pv: &PersistentVolume) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolume".into()),
        name: pv.metadata.name.clone(),
        uid: pv.metadata.uid.clone(),
        resource_version: pv.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// Whether the class delays binding until a pod uses the claim.
pub fn is_wait_for_first_consumer(class: Option<&StorageClass>) -> bool {
    class.and_then(|c| c.volume_binding_mode.as_deref()) == Some(WAIT_FOR_FIRST_CONSUMER)
}

/// The claim's class from a lister of classes (`None` for `""` or a missing class).
pub fn class_of(
    claim: &PersistentVolumeClaim,
    classes: &client::Lister<StorageClass>,
) -> Option<Arc<StorageClass>> {
    let name = claim_class(claim);
    if name.is_empty() {
        return None;
    }
    classes.get(name)
}
