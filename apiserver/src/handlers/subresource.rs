//! Subresources (spec §8): `status` (GET/PUT/PATCH touching only status), `scale`
//! (autoscaling/v1 Scale view of replicated kinds), `pods/binding` (POST, schedules a pod) and
//! `namespaces/finalize` (PUT, sets `spec.finalizers`; a terminating namespace whose finalizers
//! are all gone is removed).

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::handlers::read::stored_object;
use crate::handlers::render::{encode, output};
use crate::handlers::write::{
    commit, field_manager, patch_content_type, precondition, prepare_update, respond_committed,
    update_with, Committed, WriteScope, Written,
};
use crate::handlers::{read, Ctx};
use crate::http::body::decode_object;
use crate::http::query::WriteOptions;
use crate::registry::strategy_for;

/// Attempts of a subresource write that keeps losing compare-and-swap races.
const MAX_RETRIES: usize = 16;

/// Dispatches a subresource request.
pub async fn handle(ctx: Ctx, method: Method, sub: &str, body: Body) -> Result<Response> {
    match (sub, method) {
        ("status", Method::GET) => read::get(ctx).await,
        ("status", Method::PUT) => update_with(&ctx, body, WriteScope::Status).await,
        ("status", Method::PATCH) => {
            crate::handlers::patch::patch_with(&ctx, body, WriteScope::Status).await
        }
        ("scale", Method::GET) => get_scale(ctx).await,
        ("scale", Method::PUT) => put_scale(ctx, body).await,
        ("scale", Method::PATCH) => patch_scale(ctx, body).await,
        ("binding", Method::POST) => bind(ctx, body).await,
        ("finalize", Method::PUT) => finalize(ctx, body).await,
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn scale_access(ctx: &Ctx) -> Result<&'static dyn crate::registry::ScaleAccess> {
    strategy_for(ctx.target.info)
        .scale()
        .ok_or_else(ApiError::unknown_path)
}

fn respond_scale(ctx: &Ctx, scale: &Value) -> Result<Response> {
    let out = output(ctx.accept())?;
    Ok(encode(scale, out, StatusCode::OK))
}

async fn get_scale(ctx: Ctx) -> Result<Response> {
    let access = scale_access(&ctx)?;
    let (obj, _) = crate::handlers::write::load_object(&ctx).await?;
    respond_scale(&ctx, &access.to_scale(&obj))
}

/// Applies a desired Scale to the object: resourceVersion precondition from the Scale,
/// replicas validation, commit with retries on races of unconditional writes.
///
/// `patch_names_rv` is `None` for a PUT (the body's resourceVersion, if any, is the
/// precondition) and, for a PATCH, whether the patch itself names one: a patched Scale always
/// carries the resourceVersion it was applied to, which must not make the write conditional
/// (`kubectl scale` would get a 409 whenever a controller wrote the object meanwhile).
async fn write_scale(
    ctx: &Ctx,
    make_scale: &(dyn Fn(&Value) -> Result<Value> + Send + Sync),
    patch_names_rv: Option<bool>,
    dry_run: bool,
) -> Result<Response> {
    let access = scale_access(ctx)?;
    let name = ctx.target.require_name()?.to_string();
    let gr = ctx.target.group_resource();
    for _ in 0..MAX_RETRIES {
        let Some(kv) = ctx.state.store.get(&ctx.target.key(&name)).await? else {
            return Err(ApiError::not_found(&gr, &name));
        };
        let old = stored_object(&ctx.state, &kv)?;
        let current = access.to_scale(&old);
        let scale = make_scale(&current)?;
        let wanted = precondition(&ctx.target, &scale, &name)?;
        if wanted.is_some_and(|w| w != kv.mod_revision) {
            return Err(ApiError::conflict(&gr, &name));
        }
        let conditional = wanted.is_some() && patch_names_rv.unwrap_or(true);
        let mut new = Value::clone(&old);
        access.apply_scale(&mut new, &scale).map_err(|errs| {
            ApiError::from(api::status::invalid("Scale.autoscaling", &name, &errs))
        })?;
        prepare_update(
            &ctx.target,
            &mut new,
            &old,
            WriteScope::Main,
            &field_manager(ctx),
        )?;
        match commit(ctx, &name, new, &old, kv.mod_revision, dry_run).await? {
            Committed::Stored(Written { object: o, .. }) | Committed::Removed(o) => {
                return respond_scale(ctx, &access.to_scale(&o))
            }
            Committed::Raced if !conditional => continue,
            Committed::Raced => return Err(ApiError::conflict(&gr, &name)),
        }
    }
    Err(api::status::server_timeout(&gr, "PUT", 1).into())
}

async fn put_scale(ctx: Ctx, body: Body) -> Result<Response> {
    let opts = WriteOptions::from_query(&ctx.query, "UpdateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let scale = decode_object(&ctx.headers, &bytes)?;
    write_scale(&ctx, &move |_| Ok(scale.clone()), None, opts.dry_run).await
}

async fn patch_scale(ctx: Ctx, body: Body) -> Result<Response> {
    let opts = WriteOptions::from_query(&ctx.query, "PatchOptions")?;
    let ct = patch_content_type(&ctx)?;
    let ty = crate::patch::PatchType::from_content_type(&ct)
        .ok_or_else(|| ApiError::unsupported_patch_type(&ct))?;
    let bytes = ctx.read_body(body).await?;
    let info = ctx.target.info;
    let names_rv = crate::handlers::patch::patch_sets_resource_version(ty, &bytes);
    write_scale(
        &ctx,
        &move |current| crate::handlers::patch::apply_to(ty, info, current, &bytes, ""),
        Some(names_rv),
        opts.dry_run,
    )
    .await
}

async fn bind(ctx: Ctx, body: Body) -> Result<Response> {
    let opts = WriteOptions::from_query(&ctx.query, "CreateOptions")?;
    let name = ctx.target.require_name()?.to_string();
    let bytes = ctx.read_body(body).await?;
    let binding = decode_object(&ctx.headers, &bytes)?;
    let gr = ctx.target.group_resource();
    for _ in 0..MAX_RETRIES {
        let Some(kv) = ctx.state.store.get(&ctx.target.key(&name)).await? else {
            return Err(ApiError::not_found(&gr, &name));
        };
        let old = stored_object(&ctx.state, &kv)?;
        let mut new = Value::clone(&old);
        crate::registry::apply_binding(&mut new, &binding).map_err(|e| binding_error(&name, e))?;
        match commit(&ctx, &name, new, &old, kv.mod_revision, opts.dry_run).await? {
            Committed::Raced => continue,
            _ => {
                let body = api::status::to_json(&api::status::StatusObject {
                    status: Some("Success".into()),
                    code: Some(201),
                    ..Default::default()
                });
                return Ok((StatusCode::CREATED, axum::Json(body)).into_response());
            }
        }
    }
    Err(api::status::server_timeout(&gr, "POST", 1).into())
}

fn binding_error(name: &str, e: crate::registry::BindingError) -> ApiError {
    e.to_status(name).into()
}

async fn finalize(ctx: Ctx, body: Body) -> Result<Response> {
    let opts = WriteOptions::from_query(&ctx.query, "UpdateOptions")?;
    let name = ctx.target.require_name()?.to_string();
    let bytes = ctx.read_body(body).await?;
    let body_obj = decode_object(&ctx.headers, &bytes)?;
    let wanted = precondition(&ctx.target, &body_obj, &name)?;
    let finalizers = body_obj
        .pointer("/spec/finalizers")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let gr = ctx.target.group_resource();
    for _ in 0..MAX_RETRIES {
        let Some(kv) = ctx.state.store.get(&ctx.target.key(&name)).await? else {
            return Err(ApiError::not_found(&gr, &name));
        };
        if wanted.is_some_and(|w| w != kv.mod_revision) {
            return Err(ApiError::conflict(&gr, &name));
        }
        let old = stored_object(&ctx.state, &kv)?;
        let mut new = Value::clone(&old);
        if let Some(o) = new.as_object_mut() {
            let spec = o
                .entry("spec")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(s) = spec.as_object_mut() {
                s.insert("finalizers".into(), finalizers.clone());
            }
        }
        prepare_update(&ctx.target, &mut new, &old, WriteScope::Internal, "")?;
        match commit(&ctx, &name, new, &old, kv.mod_revision, opts.dry_run).await? {
            Committed::Raced if wanted.is_none() => continue,
            Committed::Raced => return Err(ApiError::conflict(&gr, &name)),
            c => return respond_committed(&ctx, c),
        }
    }
    Err(api::status::server_timeout(&gr, "PUT", 1).into())
}

/// Whether the target is core `services`.
fn is_service(ctx: &Ctx) -> bool {
    ctx.target.info.group.is_empty() && ctx.target.info.plural == "services"
}

/// Per-kind allocation at create time: Service cluster IPs from 10.96.0.0/12. Returns the object
/// and the address to release if the create does not happen.
pub fn allocate_on_create(ctx: &Ctx, mut obj: Value) -> Result<(Value, Option<String>)> {
    if !is_service(ctx) {
        return Ok((obj, None));
    }
    let name = api::meta::name(&obj).unwrap_or("").to_string();
    match ctx.state.ips.assign(&mut obj) {
        Ok(ip) => Ok((obj, ip.map(|ip| ip.to_string()))),
        Err(e) => Err(api::status::invalid("Service", &name, &[e]).into()),
    }
}

/// Returns the cluster IPs of a deleted service to the pool.
pub fn release_on_delete(
    state: &crate::state::AppState,
    target: &crate::handlers::Target,
    obj: &Value,
) {
    if target.info.group.is_empty() && target.info.plural == "services" {
        let mut ips: Vec<&str> = obj
            .pointer("/spec/clusterIPs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(ip) = obj.pointer("/spec/clusterIP").and_then(Value::as_str) {
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        for ip in ips {
            state.ips.release(ip);
        }
    }
}
