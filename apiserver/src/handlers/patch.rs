//! PATCH (spec §7.6): JSON patch, merge patch, strategic merge patch and server-side apply,
//! applied to the stored object and then committed like an update.
//!
//! A patch without `metadata.resourceVersion` is unconditional: when its compare-and-swap loses
//! a race the patch is re-applied to the new state. A patch result carrying a different
//! `resourceVersion` or `uid` than the stored object is a 409. Server-side apply of a missing
//! object creates it (201).

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::handlers::read::stored_object;
use crate::handlers::write::{
    commit, field_manager, patch_content_type, prepare_new, prepare_update, respond_committed,
    respond_written, store_new, Committed, WriteScope,
};
use crate::handlers::Ctx;
use crate::http::query::WriteOptions;
use crate::patch::PatchType;

/// Attempts of a patch that keeps losing compare-and-swap races.
const MAX_RETRIES: usize = 16;

/// Applies a non-apply patch to `current`.
pub fn apply_to(
    ty: PatchType,
    info: &'static api::ResourceInfo,
    current: &Value,
    bytes: &[u8],
    name: &str,
) -> Result<Value> {
    crate::patch::apply_patch(info, ty, current, bytes)
        .map_err(|e| patch_error(&e, &info.group_resource(), name))
}

fn patch_error(e: &crate::patch::PatchError, group_resource: &str, name: &str) -> ApiError {
    e.to_status(group_resource, name).into()
}

/// PATCH of an object (`Main`) or of its `/status` (`Status`).
pub async fn patch_with(ctx: &Ctx, body: Body, scope: WriteScope) -> Result<Response> {
    let name = ctx.target.require_name()?.to_string();
    let opts = WriteOptions::from_query(&ctx.query, "PatchOptions")?;
    let ct = patch_content_type(ctx)?;
    let ty =
        PatchType::from_content_type(&ct).ok_or_else(|| ApiError::unsupported_patch_type(&ct))?;
    let apply = ty == PatchType::Apply;
    if opts.force.is_some() && !apply {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            api::validation::FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ),
        ));
    }
    let manager = opts.field_manager.clone().unwrap_or_default();
    if apply && manager.is_empty() {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            api::validation::FieldError::required("fieldManager", "is required for apply patch"),
        ));
    }
    let bytes = ctx.read_body(body).await?;
    if apply {
        crate::http::body::check_flow_depth(&bytes)?;
    }
    let kind = ctx.target.info;
    let gr = ctx.target.group_resource();
    let now = api::meta::now_rfc3339();
    // A patch is conditional only when its own body names a resourceVersion (decided once, not per
    // attempt); the patched result always carries the one it was applied to.
    let body_names_rv = !apply && patch_sets_resource_version(ty, &bytes);
    for _ in 0..MAX_RETRIES {
        let kv = ctx.state.store.get(&ctx.target.key(&name)).await?;
        let Some(kv) = kv else {
            if apply && scope == WriteScope::Main {
                let obj = crate::patch::server_side_apply(
                    kind,
                    None,
                    &bytes,
                    &manager,
                    opts.force.unwrap_or(false),
                    &now,
                )
                .map_err(|e| patch_error(&e, &gr, &name))?;
                let mut obj = obj;
                api::meta::set_name(&mut obj, &name);
                let obj = prepare_new(ctx, obj).await?;
                let stored = store_new(ctx, obj, opts.dry_run).await?;
                return respond_written(ctx, stored, StatusCode::CREATED);
            }
            return Err(ApiError::not_found(&gr, &name));
        };
        let old = stored_object(&ctx.state, &kv)?;
        let mut patched = if apply {
            crate::patch::server_side_apply(
                kind,
                Some(&old),
                &bytes,
                &manager,
                opts.force.unwrap_or(false),
                &now,
            )
            .map_err(|e| patch_error(&e, &gr, &name))
            .and_then(|mut r| {
                crate::handlers::write::validate_fields(ctx, &mut r)?;
                Ok(r)
            })?
        } else {
            let strategy = crate::registry::strategy_for(ctx.target.info);
            let shown = crate::handlers::render::present(ctx.target.info, Value::clone(&old));
            let mut result = apply_to(ty, ctx.target.info, &shown, &bytes, &name)?;
            crate::handlers::write::validate_fields(ctx, &mut result)?;
            strategy.to_storage(result)
        };
        let rv = api::meta::resource_version(&patched).map(String::from);
        let conditional = match rv.as_deref() {
            Some(r) if r != kv.mod_revision.to_string() => {
                return Err(ApiError::conflict(&gr, &name))
            }
            Some(_) => body_names_rv,
            None => false,
        };
        if api::meta::uid(&patched).is_some_and(|u| Some(u) != api::meta::uid(&old)) {
            return Err(api::status::conflict(
                &gr,
                &name,
                "Precondition failed: UID in precondition does not match the UID in record. The object might have been deleted and then recreated",
            )
            .into());
        }
        let manager = if apply {
            String::new()
        } else {
            field_manager(ctx)
        };
        prepare_update(&ctx.target, &mut patched, &old, scope, &manager)?;
        match commit(ctx, &name, patched, &old, kv.mod_revision, opts.dry_run).await? {
            Committed::Raced if !conditional => continue,
            Committed::Raced => return Err(ApiError::conflict(&gr, &name)),
            c => return respond_committed(ctx, c),
        }
    }
    Err(api::status::server_timeout(&gr, "PATCH", 1).into())
}

/// Whether a JSON, merge or strategic-merge patch body sets `metadata.resourceVersion`.
pub(crate) fn patch_sets_resource_version(ty: PatchType, body: &[u8]) -> bool {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    match ty {
        PatchType::Json => value.as_array().is_some_and(|ops| {
            ops.iter().any(|op| {
                op.get("path").and_then(Value::as_str) == Some("/metadata/resourceVersion")
                    && matches!(
                        op.get("op").and_then(Value::as_str),
                        Some("add" | "replace")
                    )
            })
        }),
        _ => value
            .pointer("/metadata/resourceVersion")
            .is_some_and(|v| !v.is_null()),
    }
}

#[cfg(test)]
mod conditional_tests {
    use super::*;

    #[test]
    fn only_a_patch_naming_a_resource_version_is_conditional() {
        let merge = |s: &str| patch_sets_resource_version(PatchType::Merge, s.as_bytes());
        assert!(merge(r#"{"metadata":{"resourceVersion":"5"}}"#));
        assert!(!merge(r#"{"metadata":{"labels":{"a":"b"}}}"#));
        assert!(!merge(r#"{"metadata":{"resourceVersion":null}}"#));
        let json = |s: &str| patch_sets_resource_version(PatchType::Json, s.as_bytes());
        assert!(json(
            r#"[{"op":"replace","path":"/metadata/resourceVersion","value":"5"}]"#
        ));
        assert!(!json(
            r#"[{"op":"replace","path":"/spec/replicas","value":5}]"#
        ));
    }
}
