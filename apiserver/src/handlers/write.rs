//! CREATE (POST), UPDATE (PUT) and PATCH of objects and of their `/status` (spec §6, §7.4–§7.6):
//! the request is parsed and negotiated here, the write is the registry store's.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;

use crate::error::{ApiError, Result};
use crate::http::body::{check_flow_depth, decode_object, patch_type};
use crate::http::render::{respond_outcome, respond_written};
use crate::http::request::Ctx;
use crate::patch::PatchType;
use crate::registry::store::{PatchRequest, WriteScope};
use crate::registry::Warnings;

/// POST to a collection.
pub async fn create(ctx: Ctx, body: Body) -> Result<Response> {
    if ctx.target.info().namespaced && ctx.target.namespace.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    let opts = ctx.write_options("CreateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let obj = decode_object(&ctx.headers, &bytes)?;
    let written = ctx.store().create(obj, &opts).await?;
    let resp = respond_written(
        &ctx.target.resource,
        ctx.accept(),
        written,
        StatusCode::CREATED,
    );
    with_warnings(resp, &opts.warnings)
}

/// Adds the write's warnings to its response as `Warning: 299 - "<text>"` headers.
pub(super) fn with_warnings(resp: Result<Response>, warnings: &Warnings) -> Result<Response> {
    let mut resp = resp?;
    for text in warnings.all() {
        let quoted = format!(
            "299 - \"{}\"",
            text.replace('\\', "\\\\").replace('"', "\\\"")
        );
        if let Ok(v) = axum::http::HeaderValue::from_str(&quoted) {
            resp.headers_mut().append(axum::http::header::WARNING, v);
        }
    }
    Ok(resp)
}

/// PUT of an object or of its `/status`.
pub async fn update(ctx: Ctx, body: Body, scope: WriteScope) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let opts = ctx.write_options("UpdateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let obj = decode_object(&ctx.headers, &bytes)?;
    let decode = || decode_object(&ctx.headers, &bytes);
    let outcome = ctx.store().update(name, obj, &decode, scope, &opts).await?;
    let resp = respond_outcome(&ctx.target.resource, ctx.accept(), outcome);
    with_warnings(resp, &opts.warnings)
}

/// PATCH of an object or of its `/status`.
pub async fn patch(ctx: Ctx, body: Body, scope: WriteScope) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let mut opts = ctx.write_options("PatchOptions")?;
    let ty = patch_type(&ctx.headers)?;
    let apply = ty == PatchType::Apply;
    let explicit_force = ctx.query.bool("force");
    if explicit_force.is_some() && !apply {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            api::validation::FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ),
        ));
    }
    if apply {
        // Apply has no default manager: it must be named.
        opts.field_manager = ctx
            .query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .map(String::from)
            .ok_or_else(|| {
                ApiError::invalid_options(
                    "PatchOptions",
                    api::validation::FieldError::required(
                        "fieldManager",
                        "is required for apply patch",
                    ),
                )
            })?;
    }
    let bytes = ctx.read_body(body).await?;
    if apply {
        check_flow_depth(&bytes)?;
    }
    let patch = PatchRequest { ty, body: &bytes };
    let outcome = ctx.store().patch(name, patch, scope, &opts).await?;
    let resp = respond_outcome(&ctx.target.resource, ctx.accept(), outcome);
    with_warnings(resp, &opts.warnings)
}
