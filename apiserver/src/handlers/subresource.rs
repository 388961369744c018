//! Subresources other than `status` (spec §8): `scale` (GET/PUT/PATCH of the `autoscaling/v1`
//! Scale view), `pods/binding` (POST) and `namespaces/finalize` (PUT). The storage of each is in
//! [`crate::registry::subresources`].

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::Response;

use crate::error::{ApiError, Result};
use crate::http::body::{decode_object, patch_type};
use crate::http::render::{encode, output, respond_outcome};
use crate::http::request::Ctx;
use crate::registry::subresources::ScaleChange;

/// Dispatches a subresource request.
pub async fn handle(ctx: Ctx, method: Method, sub: &str, body: Body) -> Result<Response> {
    match (sub, method) {
        ("scale", Method::GET) => get_scale(ctx).await,
        ("scale", Method::PUT) => put_scale(ctx, body).await,
        ("scale", Method::PATCH) => patch_scale(ctx, body).await,
        ("binding", Method::POST) => bind(ctx, body).await,
        ("finalize", Method::PUT) => finalize(ctx, body).await,
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn respond_scale(ctx: &Ctx, scale: &serde_json::Value) -> Result<Response> {
    Ok(encode(scale, output(ctx.accept())?, StatusCode::OK))
}

async fn get_scale(ctx: Ctx) -> Result<Response> {
    let scale = ctx.store().get_scale(ctx.target.require_name()?).await?;
    respond_scale(&ctx, &scale)
}

async fn put_scale(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let opts = ctx.write_options("UpdateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let scale = decode_object(&ctx.headers, &bytes)?;
    let scale = ctx
        .store()
        .update_scale(name, ScaleChange::Replace(&scale), &opts)
        .await?;
    respond_scale(&ctx, &scale)
}

async fn patch_scale(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let opts = ctx.write_options("PatchOptions")?;
    let ty = patch_type(&ctx.headers)?;
    let bytes = ctx.read_body(body).await?;
    let scale = ctx
        .store()
        .update_scale(name, ScaleChange::Patch(ty, &bytes), &opts)
        .await?;
    respond_scale(&ctx, &scale)
}

async fn bind(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let opts = ctx.write_options("CreateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let binding = decode_object(&ctx.headers, &bytes)?;
    ctx.store().bind(name, &binding, &opts).await?;
    let body = api::status::to_json(&api::status::StatusObject {
        status: Some("Success".into()),
        code: Some(201),
        ..Default::default()
    });
    Ok(crate::http::render::json(StatusCode::CREATED, &body))
}

async fn finalize(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let opts = ctx.write_options("UpdateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let body = decode_object(&ctx.headers, &bytes)?;
    let outcome = ctx.store().finalize(name, &body, &opts).await?;
    respond_outcome(&ctx.target.resource, ctx.accept(), outcome)
}
