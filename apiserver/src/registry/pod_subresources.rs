//! The REST storage of `pods/ephemeralcontainers` and `pods/resize` (upstream's
//! `EphemeralContainersREST` and `ResizeREST`): GET is the pod; PUT and PATCH (every patch type
//! but apply, applied to the pod) change only the subresource's part of it, each write one
//! [`Store::guaranteed_update`] whose rules are
//! [`strategy::pod_subresources`](super::strategy). A body naming a resourceVersion is
//! conditional (409 on any other). The built-in validating admission runs on the result, with the
//! subresource's name (PodSecurity checks added ephemeral containers).

use serde_json::Value;

use super::store::{Attempt, Decoded, Outcome, PatchRequest, Store};
use super::{Preconditions, WriteOptions};
use crate::error::{ApiError, Result};
use crate::patch::PatchType;

/// Which pod subresource a write is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPart {
    /// `ephemeralcontainers`: `spec.ephemeralContainers`.
    EphemeralContainers,
    /// `resize`: containers' `resources` and `resizePolicy`.
    Resize,
}

impl PodPart {
    /// The subresource name.
    pub fn name(self) -> &'static str {
        match self {
            PodPart::EphemeralContainers => "ephemeralcontainers",
            PodPart::Resize => "resize",
        }
    }

    /// The part named `subresource`, if it is one.
    pub fn named(subresource: &str) -> Option<PodPart> {
        [PodPart::EphemeralContainers, PodPart::Resize]
            .into_iter()
            .find(|p| p.name() == subresource)
    }

    fn prepare(self, body: &Value, old: &Value) -> Value {
        match self {
            PodPart::EphemeralContainers => {
                super::strategy::prepare_ephemeral_containers(body, old)
            }
            PodPart::Resize => super::strategy::prepare_resize(body, old),
        }
    }

    /// The part's rules applied again to `new` as a mutating webhook left it: only the part
    /// comes from `new` (and the managed fields recorded before the webhooks ran), the rest
    /// from `old`, as upstream's `PrepareForUpdate` after admission.
    pub(crate) fn reapply(self, new: &mut Value, old: &Value) {
        let managed = new
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .and_then(|m| m.remove("managedFields"));
        *new = self.prepare(new, old);
        if let (Some(m), Some(managed)) = (api::meta::metadata_mut(new), managed) {
            m.insert("managedFields".to_string(), managed);
        }
    }

    pub(crate) fn validate(self, new: &Value, old: &Value) -> Vec<api::validation::FieldError> {
        match self {
            PodPart::EphemeralContainers => {
                super::strategy::validate_ephemeral_containers_update(new, old)
            }
            PodPart::Resize => super::strategy::validate_resize(new, old),
        }
    }
}

/// How the body of a pod subresource write is computed from the current pod.
pub enum PodChange<'b> {
    /// PUT of this pod.
    Replace(&'b Value),
    /// PATCH of the current pod.
    Patch(PatchType, &'b [u8]),
}

impl Store<'_> {
    /// Writes `part` of the pod `name` from `change`.
    pub async fn update_pod_part(
        &self,
        name: &str,
        part: PodPart,
        change: PodChange<'_>,
        opts: &WriteOptions,
    ) -> Result<Outcome> {
        if let PodChange::Replace(body) = &change {
            self.check_type_meta(body)?;
            if api::meta::name(body).is_some_and(|n| !n.is_empty() && n != name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    api::meta::name(body).unwrap_or("")
                )));
            }
        }
        let info = self.resource().info.clone();
        let verb = match change {
            PodChange::Replace(_) => "PUT",
            PodChange::Patch(..) => "PATCH",
        };
        let admitted = Some(part.name());
        self.admitted_update(
            name,
            verb,
            &Preconditions::default(),
            opts,
            admitted,
            |current| {
                let Some(current) = current else {
                    return Err(self.not_found(name));
                };
                let old = &current.object;
                let body = match &change {
                    PodChange::Replace(body) => (*body).clone(),
                    PodChange::Patch(PatchType::Apply, _) => {
                        return Err(ApiError::from(api::status::unsupported_media_type(
                            "apply patches are not supported for this subresource",
                        )))
                    }
                    PodChange::Patch(ty, patch) => {
                        let shown = self.resource().present(Value::clone(old));
                        crate::patch::apply_patch(&info, *ty, &shown, patch).map_err(|e| {
                            ApiError::from(e.to_status(&info.group_resource(), name))
                        })?
                    }
                };
                let from = match &change {
                    PodChange::Replace(_) => Decoded::Body,
                    PodChange::Patch(ty, body) => Decoded::Patched(&PatchRequest { ty: *ty, body }),
                };
                self.check_decodes(&body, from)?;
                let wanted = self.body_precondition(&body, name)?;
                if wanted.is_some_and(|w| w != current.revision) {
                    return Err(self.conflict(name));
                }
                let mut new = part.prepare(&body, old);
                let errs = part.validate(&new, old);
                if !errs.is_empty() {
                    return Err(self.invalid(name, &errs));
                }
                crate::patch::update_managed_fields(
                    &info,
                    Some(old),
                    &mut new,
                    &opts.field_manager,
                    &api::meta::now_rfc3339(),
                    Some(part.name()),
                );
                // The built-in validating admission of the subresource (PodSecurity, as
                // upstream's chain runs on `pods/ephemeralcontainers` and `pods/resize`).
                self.validate_admission(&new, Some(old), name, part.name(), Some(opts))?;
                Ok(Attempt::Write(new))
            },
        )
        .await
    }
}
