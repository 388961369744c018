//! Update and patch (`Store.Update` upstream), both one [`Store::guaranteed_update`].
//!
//! An update carries server-owned metadata (uid, creationTimestamp, deletion fields, name,
//! namespace, the stored type) over from the stored object whatever the client sent, applies the
//! kind's update rules for the part it may change ([`WriteScope`]), records managed fields, runs
//! mutating admission, validates, then validating admission (both only for the main resource). A body or patch naming a `resourceVersion` is conditional: it must be the stored one
//! (409 otherwise, also after a lost race, since every attempt checks it against the state it
//! read); without one the write is re-applied to the new state after a lost race. PUT of a missing object creates it where the kind allows it; server-side
//! apply of a missing object creates it.

use serde_json::Value;

use super::{Attempt, Current, Decoded, Outcome, Store};
use crate::error::{ApiError, Result};
use crate::patch::PatchType;
use crate::registry::{FieldValidation, Preconditions, WriteOptions};

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteScope {
    /// The main resource: status is kept from storage.
    Main,
    /// `/status`: only status changes.
    Status,
    /// Server-internal: the object is already fully formed (finalize).
    Internal,
}

impl WriteScope {
    /// The subresource validating admission sees this write as (`None`: not admitted).
    fn admitted_as(self) -> Option<&'static str> {
        match self {
            WriteScope::Main => Some(""),
            WriteScope::Status => Some("status"),
            WriteScope::Internal => None,
        }
    }
}

/// A PATCH: its type and body.
pub struct PatchRequest<'b> {
    /// JSON, merge, strategic merge or apply.
    pub ty: PatchType,
    /// The patch as sent.
    pub body: &'b [u8],
}

impl Store<'_> {
    /// Carries server-owned metadata from `old` to `new`, applies the kind's rules for `scope`,
    /// records managed fields and validates. Admission's warnings and audit annotations are not
    /// kept (see [`prepare_update_with`](Self::prepare_update_with)).
    pub fn prepare_update(
        &self,
        new: &mut Value,
        old: &Value,
        scope: WriteScope,
        manager: &str,
    ) -> Result<()> {
        self.prepare_update_with(new, old, scope, manager, None)
    }

    /// [`prepare_update`](Self::prepare_update) for a client's write: admission leaves its
    /// warnings and audit annotations in `opts`.
    pub(crate) fn prepare_update_with(
        &self,
        new: &mut Value,
        old: &Value,
        scope: WriteScope,
        manager: &str,
        opts: Option<&WriteOptions>,
    ) -> Result<()> {
        let name = api::meta::name(old).unwrap_or("").to_string();
        self.apply_scope_rules(new, old, scope, &name)?;
        let subresource = (scope == WriteScope::Status).then_some("status");
        crate::patch::update_managed_fields(
            self.resource.patch_kind(),
            Some(old),
            new,
            manager,
            &api::meta::now_rfc3339(),
            subresource,
        );
        if scope == WriteScope::Main {
            self.admit(new, Some(old), &name, opts)?;
        }
        let errs = self.resource.validate_update(new, old);
        if !errs.is_empty() {
            return Err(self.invalid(&name, &errs));
        }
        match scope {
            WriteScope::Main => self.validate_admission(new, Some(old), &name, "", opts)?,
            // The plugins that handle subresources see `/status` writes (CertificateSigning).
            WriteScope::Status => self.validate_admission(new, Some(old), &name, "status", opts)?,
            WriteScope::Internal => {}
        }
        self.resource.strategy.canonicalize(new);
        Ok(())
    }

    /// The rules every update of `scope` follows whoever changed the object last (upstream's
    /// `BeforeUpdate` before validation): server-owned metadata carried over from `old`, no new
    /// finalizers on an object being deleted, then the kind's rules for the part `scope` may
    /// change.
    fn apply_scope_rules(
        &self,
        new: &mut Value,
        old: &Value,
        scope: WriteScope,
        name: &str,
    ) -> Result<()> {
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match old.get("metadata").and_then(|m| m.get(k)) {
                Some(v) => {
                    if let Some(m) = api::meta::metadata_mut(new) {
                        m.insert(k.to_string(), v.clone());
                    }
                }
                None => api::meta::remove(new, k),
            }
        }
        api::meta::set_name(new, name);
        if let Some(ns) = api::meta::namespace(old).map(String::from) {
            api::meta::set_namespace(new, &ns);
        }
        // Storage form: the type of the stored object, whichever endpoint wrote it.
        if let Some(o) = new.as_object_mut() {
            for k in ["kind", "apiVersion"] {
                match old.get(k) {
                    Some(v) => o.insert(k.to_string(), v.clone()),
                    None => o.remove(k),
                };
            }
        }
        if api::meta::deletion_timestamp(old).is_some() {
            let before = api::meta::finalizers(old);
            if api::meta::finalizers(new)
                .iter()
                .any(|f| !before.contains(f))
            {
                return Err(self.invalid(
                    name,
                    &[api::validation::FieldError::forbidden(
                        "metadata.finalizers",
                        "no new finalizers can be added if the object is being deleted",
                    )],
                ));
            }
        }
        match scope {
            WriteScope::Main => self.resource.prepare_for_update(new, old),
            WriteScope::Status => self.resource.prepare_for_status_update(new, old),
            WriteScope::Internal => {}
        }
        Ok(())
    }

    /// The admission webhooks on an update of `old` to `new` (after [`prepare_update`]
    /// (Self::prepare_update) ran the built-in admission and validation): mutating webhooks,
    /// then, if they changed the object, its rules, validation and built-in validating admission
    /// again ([`revalidate_mutated`](Self::revalidate_mutated)), then validating webhooks.
    pub(crate) async fn admit_update_by_webhooks(
        &self,
        mut new: Value,
        old: &Value,
        subresource: &str,
        opts: &WriteOptions,
    ) -> Result<Value> {
        let name = api::meta::name(old).unwrap_or("");
        let user = opts.user.as_deref();
        let node = crate::admission::node_restriction::NodeOperation::Update;
        self.restrict_node(node, Some(&new), Some(old), subresource, name, user)?;
        // A scale's admission sees Scales ([`super::subresource_admission`]).
        if subresource == "scale" {
            return self.admit_scale_by_webhooks(new, old, opts).await;
        }
        if self
            .mutate_by_webhooks(&mut new, Some(old), subresource, opts)
            .await?
        {
            self.revalidate_mutated(&mut new, old, subresource, opts)?;
        }
        self.validate_by_webhooks(&new, Some(old), subresource, opts)
            .await?;
        Ok(new)
    }

    /// An update as mutating webhooks left it, checked as upstream checks every update after all
    /// mutating admission (`BeforeUpdate`, then validating admission), whatever the subresource:
    /// the rules of the part the write may change (a `/status` webhook cannot change the spec, a
    /// main-resource webhook cannot change the status, a pod subresource's webhook only its
    /// part), the write's own validation, and the built-in validating admission of that
    /// subresource. So no webhook stores what the client could not have written itself.
    pub(super) fn revalidate_mutated(
        &self,
        new: &mut Value,
        old: &Value,
        subresource: &str,
        opts: &WriteOptions,
    ) -> Result<()> {
        let name = api::meta::name(old).unwrap_or("").to_string();
        let info = &self.resource.info;
        let part = (info.group.is_empty() && info.plural == "pods")
            .then(|| crate::registry::pod_subresources::PodPart::named(subresource))
            .flatten();
        // Webhooks see the main resource, `/status` and the pod parts only
        // ([`WriteScope::admitted_as`], `update_pod_part`).
        let errs = match part {
            Some(part) => {
                part.reapply(new, old);
                part.validate(new, old)
            }
            None => {
                let scope = if subresource == "status" {
                    WriteScope::Status
                } else {
                    WriteScope::Main
                };
                self.apply_scope_rules(new, old, scope, &name)?;
                self.resource.validate_update(new, old)
            }
        };
        if !errs.is_empty() {
            return Err(self.invalid(&name, &errs));
        }
        self.validate_admission(new, Some(old), &name, subresource, Some(opts))?;
        self.resource.strategy.canonicalize(new);
        Ok(())
    }

    /// [`validate_fields`](Self::validate_fields) for a status write that need not refuse unknown
    /// fields: only `status` is kept from its body (everything else comes from the stored object),
    /// so only `status` is walked.
    fn validate_status_fields(&self, obj: &mut Value) -> Result<()> {
        let Some(status) = obj.as_object_mut().and_then(|o| o.remove("status")) else {
            return Ok(());
        };
        let mut only = Value::Object(serde_json::Map::from_iter([("status".to_string(), status)]));
        let checked = self.validate_fields(&mut only, &WriteOptions::default());
        if let (Some(o), Value::Object(mut only)) = (obj.as_object_mut(), only) {
            if let Some(status) = only.remove("status") {
                o.insert("status".to_string(), status);
            }
        }
        checked
    }

    /// The body of a PUT in storage form: namespace, type meta, unknown fields.
    fn update_body(&self, mut obj: Value, scope: WriteScope, opts: &WriteOptions) -> Result<Value> {
        self.reconcile_namespace(&mut obj)?;
        let mut obj = crate::registry::with_type_meta(&self.resource.info, obj);
        if scope == WriteScope::Status && opts.field_validation != FieldValidation::Strict {
            self.validate_status_fields(&mut obj)?;
        } else {
            self.validate_fields(&mut obj, opts)?;
        }
        self.check_decodes(&obj, Decoded::Body)?;
        Ok(self.resource.strategy.to_storage(obj))
    }

    /// PUT of `name` (the main resource or its status). `body` is the decoded request body;
    /// `decode` decodes it again for an attempt after a lost race (cheaper than keeping a copy).
    pub async fn update(
        &self,
        name: &str,
        body: Value,
        decode: &(dyn Fn() -> Result<Value> + Sync),
        scope: WriteScope,
        opts: &WriteOptions,
    ) -> Result<Outcome> {
        self.check_type_meta(&body)?;
        if let Some(n) = api::meta::name(&body).filter(|n| !n.is_empty()) {
            if n != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
        }
        let wanted = self.body_precondition(&body, name)?;
        let may_create =
            scope == WriteScope::Main && self.resource.strategy.allow_create_on_update();
        // The body as sent, kept only where a PUT may create (the create path prepares it anew).
        let original = may_create.then(|| body.clone());
        // Used up by the first attempt; a retry decodes the body again.
        let mut checked = Some(self.update_body(body, scope, opts)?);
        let admitted = scope.admitted_as();
        self.admitted_update(
            name,
            "PUT",
            &Preconditions::default(),
            opts,
            admitted,
            |current| {
                let Some(current) = current else {
                    return match &original {
                        Some(original) => {
                            let mut obj = original.clone();
                            api::meta::set_name(&mut obj, name);
                            api::meta::remove(&mut obj, "resourceVersion");
                            Ok(Attempt::Create(obj))
                        }
                        None => Err(self.not_found(name)),
                    };
                };
                if wanted.is_some_and(|w| w != current.revision) {
                    return Err(self.conflict(name));
                }
                let mut new = match checked.take() {
                    Some(obj) => obj,
                    None => self.update_body(decode()?, scope, opts)?,
                };
                self.prepare_update_with(
                    &mut new,
                    &current.object,
                    scope,
                    &opts.field_manager,
                    Some(opts),
                )?;
                Ok(Attempt::Write(new))
            },
        )
        .await
    }

    /// PATCH of `name` (the main resource or its status). Server-side apply of a missing object
    /// creates it; `opts.field_manager` is then the apply's manager.
    pub async fn patch(
        &self,
        name: &str,
        patch: PatchRequest<'_>,
        scope: WriteScope,
        opts: &WriteOptions,
    ) -> Result<Outcome> {
        let apply = patch.ty == PatchType::Apply;
        if patch.ty == PatchType::StrategicMerge && !self.resource.strategy.strategic_merge() {
            return Err(api::status::unsupported_media_type(&format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                crate::patch::CUSTOM_RESOURCE_PATCH_MEDIA_TYPES
            ))
            .into());
        }
        let info = &self.resource.info;
        let gr = self.group_resource();
        let now = api::meta::now_rfc3339();
        let patch_error = |e: crate::patch::PatchError| ApiError::from(e.to_status(&gr, name));
        let admitted = scope.admitted_as();
        self.admitted_update(
            name,
            "PATCH",
            &Preconditions::default(),
            opts,
            admitted,
            |current| {
                let Some(current) = current else {
                    if apply && scope == WriteScope::Main {
                        let mut obj = crate::patch::server_side_apply(
                            self.resource.patch_kind(),
                            None,
                            patch.body,
                            &opts.field_manager,
                            opts.force,
                            &now,
                        )
                        .map_err(patch_error)?;
                        api::meta::set_name(&mut obj, name);
                        return Ok(Attempt::Create(obj));
                    }
                    return Err(self.not_found(name));
                };
                let old = &current.object;
                let mut patched = if apply {
                    // Applied in the endpoint's version (an autoscaling/v1 apply to an object stored
                    // as v2), then converted back to the storage form.
                    let converted = !self.resource.is_presentable(old);
                    let shown = converted.then(|| self.resource.present(Value::clone(old)));
                    let mut r = crate::patch::server_side_apply(
                        self.resource.patch_kind(),
                        Some(shown.as_ref().unwrap_or(old)),
                        patch.body,
                        &opts.field_manager,
                        opts.force,
                        &now,
                    )
                    .map_err(patch_error)?;
                    self.validate_fields(&mut r, opts)?;
                    self.check_decodes(&r, Decoded::Patched(&patch))?;
                    if converted {
                        self.resource.strategy.to_storage(r)
                    } else {
                        r
                    }
                } else {
                    let shown = self.resource.present(Value::clone(old));
                    let mut result = crate::patch::apply_patch(info, patch.ty, &shown, patch.body)
                        .map_err(patch_error)?;
                    self.validate_fields(&mut result, opts)?;
                    self.check_decodes(&result, Decoded::Patched(&patch))?;
                    self.resource.strategy.to_storage(result)
                };
                self.check_patched(name, &patched, current)?;
                // Apply records its manager itself; other patches record the request's.
                let manager = if apply { "" } else { &opts.field_manager };
                self.prepare_update_with(&mut patched, old, scope, manager, Some(opts))?;
                Ok(Attempt::Write(patched))
            },
        )
        .await
    }

    /// A patched object naming another resourceVersion or uid than the stored object is a 409.
    /// A patch result carries the resourceVersion it was applied to unless the patch itself names
    /// one: so a patch is conditional exactly when it names one, and after a lost race it is
    /// re-applied (unconditional) or refused (conditional) by this check on the new state.
    fn check_patched(&self, name: &str, patched: &Value, current: &Current) -> Result<()> {
        if api::meta::resource_version(patched).is_some_and(|rv| rv != current.revision.to_string())
        {
            return Err(self.conflict(name));
        }
        if api::meta::uid(patched).is_some_and(|u| Some(u) != api::meta::uid(&current.object)) {
            return Err(api::status::conflict(
                &self.group_resource(),
                name,
                "Precondition failed: UID in precondition does not match the UID in record. The object might have been deleted and then recreated",
            )
            .into());
        }
        Ok(())
    }

    /// The body's `metadata.resourceVersion` as a precondition: `Some(rev)` when set.
    pub fn body_precondition(&self, obj: &Value, name: &str) -> Result<Option<u64>> {
        match api::meta::resource_version(obj) {
            None | Some("") => Ok(None),
            Some(rv) => rv.parse::<u64>().map(Some).map_err(|_| self.conflict(name)),
        }
    }
}
