//! Storage object in-use protection: the `pvc-protection` and `pv-protection` controllers
//! (upstream `pkg/controller/volume/pvcprotection` and `pvprotection`).
//!
//! The `StorageObjectInUseProtection` admission plugin puts the `kubernetes.io/pvc-protection`
//! finalizer on every new PersistentVolumeClaim and `kubernetes.io/pv-protection` on every new
//! PersistentVolume. A claim or volume being deleted therefore stays (Terminating) until its
//! controller removes the finalizer:
//! - [`pvc::PvcProtectionController`]: a claim is removed once no scheduled pod uses it
//!   ([`decide::pod_uses_pvc`]): looked up first in the pod informer's claim index, and when that
//!   finds none, confirmed by a live list of the namespace's pods (the cache may trail a pod just
//!   created), as upstream.
//! - [`pv::PvProtectionController`]: a volume is removed once it is not `Bound`.
//!
//! Both also add their finalizer to an object that is not being deleted and lacks it (objects
//! created while the plugin was off), as upstream. The decisions are pure functions in
//! [`decide`]; the controllers' work queues hold object keys (bounded by the object count) and
//! retry a failed write with the per-key back-off. Writes are merge patches of the finalizer list
//! guarded by the object's resourceVersion, so a stale cache never drops another finalizer.

pub mod decide;
pub mod pv;
pub mod pvc;

pub use decide::{PVC_PROTECTION_FINALIZER, PV_PROTECTION_FINALIZER};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

/// The merge patch that sets `meta`'s finalizers to `finalizers`, guarded by its resourceVersion.
fn finalizers_patch(meta: &ObjectMeta, finalizers: Vec<String>) -> client::Patch {
    client::Patch::Merge(json!({
        "metadata": {
            "resourceVersion": meta.resource_version,
            "finalizers": finalizers,
        }
    }))
}
