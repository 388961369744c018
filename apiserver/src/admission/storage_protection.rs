//! The `StorageObjectInUseProtection` admission plugin
//! (`plugin/pkg/admission/storage/storageobjectinuseprotection`): a new PersistentVolumeClaim
//! gets the `kubernetes.io/pvc-protection` finalizer and a new PersistentVolume the
//! `kubernetes.io/pv-protection` finalizer (once each), so a claim used by a pod, or a volume
//! still bound, is not removed under it. The `pvc-protection` and `pv-protection` controllers
//! (`controller::volume_protection`) remove the finalizer once the object is being deleted and no
//! longer in use. Mutating; only creates of the object itself.

use serde_json::{json, Value};

use super::{Attributes, Operation, Plugin, STORAGE_OBJECT_IN_USE_PROTECTION};
use crate::registry::{Forbidden, Objects};

/// `PVCProtectionFinalizer`.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
/// `PVProtectionFinalizer`.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";

/// The plugin.
pub struct StorageObjectInUseProtection;

/// Appends `finalizer` to `obj`'s finalizers unless it is there.
fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        // Not a list: validation refuses it.
        return;
    };
    if !list.iter().any(|f| f.as_str() == Some(finalizer)) {
        list.push(Value::String(finalizer.to_string()));
    }
}

impl Plugin for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        STORAGE_OBJECT_IN_USE_PROTECTION
    }

    fn admit(
        &self,
        attrs: &Attributes<'_>,
        obj: &mut Value,
        _objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if attrs.operation != Operation::Create || !attrs.subresource.is_empty() {
            return Ok(());
        }
        if attrs.is("", "persistentvolumeclaims") {
            add_finalizer(obj, PVC_PROTECTION_FINALIZER);
        } else if attrs.is("", "persistentvolumes") {
            add_finalizer(obj, PV_PROTECTION_FINALIZER);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::admission::tests_support::{attrs, Nothing};

    #[test]
    fn new_claims_and_volumes_get_their_finalizer_once() {
        let p = StorageObjectInUseProtection;
        let mut pvc = json!({"metadata": {"name": "c", "finalizers": ["example.com/x"]}});
        p.admit(
            &attrs(Operation::Create, "", "persistentvolumeclaims", ""),
            &mut pvc,
            &Nothing,
        )
        .unwrap();
        assert_eq!(
            pvc["metadata"]["finalizers"],
            json!(["example.com/x", "kubernetes.io/pvc-protection"])
        );
        let again = pvc.clone();
        p.admit(
            &attrs(Operation::Create, "", "persistentvolumeclaims", ""),
            &mut pvc,
            &Nothing,
        )
        .unwrap();
        assert_eq!(pvc, again);

        let mut pv = json!({"metadata": {"name": "v"}});
        p.admit(
            &attrs(Operation::Create, "", "persistentvolumes", ""),
            &mut pv,
            &Nothing,
        )
        .unwrap();
        assert_eq!(
            pv["metadata"]["finalizers"],
            json!(["kubernetes.io/pv-protection"])
        );
    }

    #[test]
    fn updates_subresources_and_other_kinds_are_left_alone() {
        let p = StorageObjectInUseProtection;
        for a in [
            attrs(Operation::Update, "", "persistentvolumeclaims", ""),
            attrs(Operation::Create, "", "persistentvolumeclaims", "status"),
            attrs(Operation::Update, "", "persistentvolumes", ""),
            attrs(Operation::Create, "", "pods", ""),
        ] {
            let mut obj = json!({"metadata": {"name": "x"}});
            p.admit(&a, &mut obj, &Nothing).unwrap();
            assert_eq!(obj, json!({"metadata": {"name": "x"}}));
        }
    }
}
