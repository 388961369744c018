//! The REST storage of subresources that are not the object itself (spec §8): `*/scale`
//! (`autoscaling/v1` Scale view of replicated kinds, `ScaleREST` upstream), `pods/binding`
//! (`BindingREST`: schedules a pod) and `namespaces/finalize` (`FinalizeREST`: sets
//! `spec.finalizers`; a terminating namespace whose finalizers are all gone is removed). Each write
//! is one [`Store::guaranteed_update`]. `status` is the object itself with [`WriteScope::Status`].
//! Admission webhooks and policies see a scale as an UPDATE of `autoscaling/v1` Scales and a
//! binding as a CREATE of a `v1` Binding (`registry/store/subresource_admission.rs`).
//! Each body (or patched Scale) is first decoded into its type ([`Store::check_decodes`]).

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::Binding;
use serde_json::Value;

use super::store::{
    Attempt, Decoded, Outcome, PatchRequest, Store, SubresourceRequest, WriteScope, BINDING,
};
use super::{Preconditions, ScaleAccess, WriteOptions};
use crate::error::{ApiError, Result};

/// How a scale write computes the desired Scale from the current one.
pub enum ScaleChange<'b> {
    /// PUT: this Scale; its resourceVersion, if any, is a precondition.
    Replace(&'b Value),
    /// PATCH: this patch applied to the current Scale (which carries the current resourceVersion,
    /// so only a patch naming one is conditional).
    Patch(crate::patch::PatchType, &'b [u8]),
}

impl Store<'_> {
    fn scale_access(&self) -> Result<&dyn ScaleAccess> {
        self.resource()
            .strategy
            .scale()
            .ok_or_else(ApiError::unknown_path)
    }

    /// The Scale of `name`.
    pub async fn get_scale(&self, name: &str) -> Result<Value> {
        let access = self.scale_access()?;
        let obj = self.get(name).await?;
        Ok(access.to_scale(&obj))
    }

    /// Writes a desired Scale to `name`: resourceVersion precondition from the Scale, replicas
    /// validation. Returns the Scale of the object as it now is.
    pub async fn update_scale(
        &self,
        name: &str,
        change: ScaleChange<'_>,
        opts: &WriteOptions,
    ) -> Result<Value> {
        let access = self.scale_access()?;
        let info = &self.resource().info;
        // Admitted as a `scale` write: webhooks and policies see Scales.
        let pre = Preconditions::default();
        let outcome = self
            .admitted_update(name, "PUT", &pre, opts, Some("scale"), |current| {
                let Some(current) = current else {
                    return Err(self.not_found(name));
                };
                let scale = match &change {
                    ScaleChange::Replace(scale) => (*scale).clone(),
                    ScaleChange::Patch(ty, body) => crate::patch::apply_patch(
                        info,
                        *ty,
                        &access.to_scale(&current.object),
                        body,
                    )
                    .map_err(|e| ApiError::from(e.to_status(&info.group_resource(), "")))?,
                };
                let from = match &change {
                    ScaleChange::Replace(_) => Decoded::Body,
                    ScaleChange::Patch(ty, body) => {
                        Decoded::Patched(&PatchRequest { ty: *ty, body })
                    }
                };
                self.check_decodes_as::<Scale>(("Scale", "v1"), &scale, from)?;
                let wanted = self.body_precondition(&scale, name)?;
                if wanted.is_some_and(|w| w != current.revision) {
                    return Err(self.conflict(name));
                }
                let mut new = Value::clone(&current.object);
                access.apply_scale(&mut new, &scale).map_err(|errs| {
                    ApiError::from(api::status::invalid("Scale.autoscaling", name, &errs))
                })?;
                self.prepare_update(
                    &mut new,
                    &current.object,
                    WriteScope::Main,
                    &opts.field_manager,
                )?;
                Ok(Attempt::Write(new))
            })
            .await?;
        match outcome {
            Outcome::Stored(w) | Outcome::Created(w) => Ok(access.to_scale(&w.object)),
            Outcome::Removed(o, ..) => Ok(access.to_scale(&o)),
        }
    }

    /// `pods/binding`: assigns the pod `name` to the binding's node, after admission of the
    /// Binding (a CREATE of `pods/binding`; mutating webhooks may change it).
    pub async fn bind(&self, name: &str, binding: &Value, opts: &WriteOptions) -> Result<()> {
        self.check_decodes_as::<Binding>(("Binding", "v1"), binding, Decoded::Body)?;
        let request = SubresourceRequest {
            operation: crate::admission::webhook::Operation::Create,
            subresource: "binding",
            kind: BINDING,
            name,
            opts,
        };
        let mutated = self.admit_subresource::<Binding>(request, binding).await?;
        self.bind_admitted(name, mutated.as_ref().unwrap_or(binding), opts)
            .await
    }

    /// [`bind`](Self::bind) of a Binding admission has seen (the legacy `bindings` resource is
    /// admitted as itself).
    pub async fn bind_admitted(
        &self,
        name: &str,
        binding: &Value,
        opts: &WriteOptions,
    ) -> Result<()> {
        self.guaranteed_update(name, "POST", &Preconditions::default(), opts, |current| {
            let Some(current) = current else {
                return Err(self.not_found(name));
            };
            let mut new = Value::clone(&current.object);
            super::apply_binding(&mut new, binding)
                .map_err(|e| ApiError::from(e.to_status(name)))?;
            Ok(Attempt::Write(new))
        })
        .await
        .map(|_| ())
    }

    /// `namespaces/finalize`: sets `spec.finalizers` from `body` (its resourceVersion, if any, is
    /// a precondition).
    pub async fn finalize(&self, name: &str, body: &Value, opts: &WriteOptions) -> Result<Outcome> {
        self.check_decodes(body, Decoded::Body)?;
        let wanted = self.body_precondition(body, name)?;
        let finalizers = body
            .pointer("/spec/finalizers")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        self.guaranteed_update(name, "PUT", &Preconditions::default(), opts, |current| {
            let Some(current) = current else {
                return Err(self.not_found(name));
            };
            if wanted.is_some_and(|w| w != current.revision) {
                return Err(self.conflict(name));
            }
            let mut new = Value::clone(&current.object);
            if let Some(o) = new.as_object_mut() {
                let spec = o
                    .entry("spec")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(s) = spec.as_object_mut() {
                    s.insert("finalizers".into(), finalizers.clone());
                }
            }
            self.prepare_update(&mut new, &current.object, WriteScope::Internal, "")?;
            Ok(Attempt::Write(new))
        })
        .await
    }
}
