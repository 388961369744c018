//! The `PersistentVolumeClaimResize` admission plugin (`plugin/pkg/admission/storage/persistentvolume/resize`):
//! a validating plugin, so it runs after the claim's own validation (an update that changes more
//! than the claim may change is a 422 first, as upstream), refusing a claim's growth unless the
//! claim is bound and its class allows expansion. The rule itself lives beside the claims'
//! strategy (`registry/strategy/claim_admission.rs`, with DefaultStorageClass).

use serde_json::Value;

use super::{Attributes, Operation, Plugin, PERSISTENT_VOLUME_CLAIM_RESIZE};
use crate::registry::strategy::claim_admission::validate_resize;
use crate::registry::{Forbidden, Objects};

/// The plugin.
pub struct PersistentVolumeClaimResize;

impl Plugin for PersistentVolumeClaimResize {
    fn name(&self) -> &'static str {
        PERSISTENT_VOLUME_CLAIM_RESIZE
    }

    fn validate(
        &self,
        attrs: &Attributes<'_>,
        claim: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        match (attrs.operation, attrs.old) {
            // Only the main resource: upstream returns early on any subresource.
            (Operation::Update, Some(old))
                if attrs.is("", "persistentvolumeclaims") && attrs.subresource.is_empty() =>
            {
                validate_resize(claim, old, objects)
            }
            _ => Ok(()),
        }
    }
}
