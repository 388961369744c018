//! Subresources other than `status` (spec §8): `scale` (GET/PUT/PATCH of the `autoscaling/v1`
//! Scale view), `pods/binding` (POST), `namespaces/finalize` (PUT), `pods/eviction` (POST of a
//! `policy/v1` Eviction), `pods/ephemeralcontainers` and `pods/resize` (GET/PUT/PATCH of the pod),
//! and the streaming subresources ([`super::stream`]). The storage of each is in
//! [`crate::registry::subresources`], [`crate::registry::eviction`] and
//! [`crate::registry::pod_subresources`].

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::Response;

use crate::error::{ApiError, Result};
use crate::http::body::{decode_object, patch_type};
use crate::http::render::{encode, output, respond_outcome};
use crate::http::request::Ctx;
use crate::registry::pod_subresources::{PodChange, PodPart};
use crate::registry::subresources::ScaleChange;

/// Dispatches a subresource request.
pub async fn handle(ctx: Ctx, method: Method, sub: &str, body: Body) -> Result<Response> {
    match (sub, method) {
        ("scale", Method::GET) => get_scale(ctx).await,
        ("scale", Method::PUT) => put_scale(ctx, body).await,
        ("scale", Method::PATCH) => patch_scale(ctx, body).await,
        ("binding", Method::POST) => bind(ctx, body).await,
        ("finalize", Method::PUT) => finalize(ctx, body).await,
        ("eviction", Method::POST) => evict(ctx, body).await,
        ("ephemeralcontainers", method) => {
            pod_part(ctx, method, PodPart::EphemeralContainers, body).await
        }
        ("resize", method) => pod_part(ctx, method, PodPart::Resize, body).await,
        ("log" | "exec" | "attach" | "portforward" | "proxy", method) => {
            super::stream::not_simulated(ctx, method, sub).await
        }
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
    super::write::with_warnings(respond_scale(&ctx, &scale), &opts.warnings)
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
    super::write::with_warnings(respond_scale(&ctx, &scale), &opts.warnings)
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
    let resp = crate::http::render::json(StatusCode::CREATED, &body);
    super::write::with_warnings(Ok(resp), &opts.warnings)
}

async fn finalize(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let opts = ctx.write_options("UpdateOptions")?;
    let bytes = ctx.read_body(body).await?;
    let body = decode_object(&ctx.headers, &bytes)?;
    let outcome = ctx.store().finalize(name, &body, &opts).await?;
    respond_outcome(&ctx.target.resource, ctx.accept(), outcome)
}

/// `pods/eviction`: the Eviction's own name and namespace must be the URL's; its
/// `deleteOptions` (JSON or, inside a protobuf Eviction, protobuf) with the request's dry run.
/// The answer (the eviction's Status, a refusal by a budget too) carries admission's warnings.
async fn evict(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let mut write = ctx.write_options("CreateOptions")?;
    let query_dry_run = write.dry_run;
    let bytes = ctx.read_body(body).await?;
    let eviction = decode_object(&ctx.headers, &bytes)?;
    let (group, version) = api::resources::split_api_version(
        eviction
            .get("apiVersion")
            .and_then(|v| v.as_str())
            .unwrap_or(""),
    );
    let kind = eviction.get("kind").and_then(|v| v.as_str()).unwrap_or("");
    let accepted = matches!((group, version), ("policy", "v1" | "v1beta1") | ("", ""));
    if !accepted || !(kind.is_empty() || kind == "Eviction") {
        return Err(ApiError::bad_request(format!(
            "not a Eviction object: {}, Kind={kind}",
            eviction
                .get("apiVersion")
                .and_then(|v| v.as_str())
                .unwrap_or("")
        )));
    }
    if api::meta::name(&eviction) != Some(name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let ns = ctx.target.namespace.as_deref().unwrap_or("");
    if api::meta::namespace(&eviction).is_some_and(|n| !n.is_empty() && n != ns) {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let store = ctx.store();
    let node = crate::admission::node_restriction::NodeOperation::Create;
    store.restrict_node(
        node,
        Some(&eviction),
        None,
        "eviction",
        name,
        Some(&ctx.user),
    )?;
    let eviction = admit_eviction(&store, name, eviction, &mut write).await?;
    let mut opts = match eviction.get("deleteOptions") {
        Some(o) if o.is_object() => crate::http::query::DeleteOptions::from_json(o)?,
        _ => crate::http::query::DeleteOptions::default(),
    };
    opts.dry_run |= query_dry_run;
    let evicted = crate::registry::eviction::evict(&ctx.state, &store, name, &opts).await?;
    let status = evicted.to_status();
    let code = StatusCode::from_u16(api::status::code(&status)).unwrap_or(StatusCode::CREATED);
    let resp = crate::http::render::json(code, &api::status::to_json(&status));
    super::write::with_warnings(Ok(resp), &write.warnings)
}

/// Admission webhooks and policies on an eviction: a CREATE of `pods/eviction` whose object is
/// the Eviction as `policy/v1` (the endpoint's kind); the Eviction mutating webhooks left.
/// `opts` (the request's) leave with admission's warnings; a dry run in the Eviction's
/// `deleteOptions` makes admission's a dry run too.
async fn admit_eviction(
    store: &crate::registry::Store<'_>,
    name: &str,
    mut eviction: serde_json::Value,
    opts: &mut crate::registry::WriteOptions,
) -> Result<serde_json::Value> {
    let in_body = eviction.pointer("/deleteOptions/dryRun");
    opts.dry_run |= in_body
        .and_then(|d| d.as_array())
        .is_some_and(|d| !d.is_empty());
    if let Some(o) = eviction.as_object_mut() {
        o.insert("apiVersion".into(), "policy/v1".into());
        o.insert("kind".into(), "Eviction".into());
    }
    let request = crate::registry::store::SubresourceRequest {
        operation: crate::admission::webhook::Operation::Create,
        subresource: "eviction",
        kind: crate::registry::store::EVICTION,
        name,
        opts,
    };
    type Eviction = k8s_openapi::api::policy::v1::Eviction;
    let mutated = store
        .admit_subresource::<Eviction>(request, &eviction)
        .await?;
    Ok(mutated.unwrap_or(eviction))
}

/// GET, PUT and PATCH of `pods/ephemeralcontainers` and `pods/resize`.
async fn pod_part(ctx: Ctx, method: Method, part: PodPart, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let outcome = match method {
        Method::GET => {
            let obj = ctx.store().get(name).await?;
            let shown = ctx.target.resource.present(serde_json::Value::clone(&obj));
            return Ok(encode(&shown, output(ctx.accept())?, StatusCode::OK));
        }
        Method::PUT => {
            let opts = ctx.write_options("UpdateOptions")?;
            let bytes = ctx.read_body(body).await?;
            let pod = decode_object(&ctx.headers, &bytes)?;
            ctx.store()
                .update_pod_part(name, part, PodChange::Replace(&pod), &opts)
                .await?
        }
        Method::PATCH => {
            let opts = ctx.write_options("PatchOptions")?;
            let ty = patch_type(&ctx.headers)?;
            let bytes = ctx.read_body(body).await?;
            ctx.store()
                .update_pod_part(name, part, PodChange::Patch(ty, &bytes), &opts)
                .await?
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    respond_outcome(&ctx.target.resource, ctx.accept(), outcome)
}
