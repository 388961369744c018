//! DELETE and DELETECOLLECTION (spec §7.7): the options come from the body (JSON or protobuf
//! `DeleteOptions`) or the query; the decisions are the registry store's.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use crate::error::{ApiError, Result};
use crate::http::body::content_type;
use crate::http::negotiate::Output;
use crate::http::query::{DeleteOptions, ListOptions};
use crate::http::render::{encode, output, respond_written, with_content_type};
use crate::http::request::Ctx;
use crate::registry::{Deleted, Written};
use crate::watch_cache::ObjectJson;

/// DELETE of one object.
pub async fn delete(ctx: Ctx, body: Body) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let bytes = ctx.read_body(body).await?;
    let mut opts = DeleteOptions::decode(content_type(&ctx.headers), &bytes, &ctx.query)?;
    opts.user = Some(ctx.user.clone());
    let resource = &ctx.target.resource;
    let d = ctx.store().delete(name, &opts).await?;
    let (obj, revision, json) = match d {
        Deleted::Marked(w) => return respond_written(resource, ctx.accept(), w, StatusCode::OK),
        Deleted::Removed(obj, revision, json) => (obj, revision, json),
    };
    if !resource.strategy.delete_returns_object() {
        let name = api::meta::name(&obj).unwrap_or("");
        let uid = api::meta::uid(&obj).unwrap_or("");
        let status = api::status::success_deleted(&ctx.target.group_resource(), name, uid);
        return Ok(crate::http::render::json(
            StatusCode::OK,
            &api::status::to_json(&status),
        ));
    }
    // The usual answer (a kubelet's final delete of a pod): written from the shared object and
    // its text, with the deletion's resourceVersion spliced in.
    if let Some(rev) = revision {
        let out = output(ctx.accept())?;
        if out == Output::Json && resource.is_presentable(&obj) {
            let json = match json {
                Some(json) => json,
                None => ObjectJson::encode(&obj)
                    .map_err(|e| ApiError::internal("encoding an object", e))?,
            };
            let body = json.with_resource_version(&rev.to_string());
            return Ok(with_content_type(body, out.content_type(), StatusCode::OK));
        }
    }
    let shown = Deleted::Removed(obj, revision, None).into_object();
    respond_written(
        resource,
        ctx.accept(),
        Written::object(shown),
        StatusCode::OK,
    )
}

/// DELETE of a collection: every matching object, as DELETE does; responds with the list of
/// deleted (or marked) objects.
pub async fn delete_collection(ctx: Ctx, body: Body) -> Result<Response> {
    let bytes = ctx.read_body(body).await?;
    let mut opts = DeleteOptions::decode(content_type(&ctx.headers), &bytes, &ctx.query)?;
    opts.user = Some(ctx.user.clone());
    let list_opts = ListOptions::from_query(&ctx.query)?;
    let store = ctx.store();
    let deleted = store.delete_collection(&opts, &list_opts).await?;
    let resource = &ctx.target.resource;
    let items: Vec<_> = deleted
        .into_iter()
        .map(|d| resource.present(d.into_object()))
        .collect();
    let body = json!({
        "kind": resource.info.list_kind,
        "apiVersion": resource.info.api_version(),
        "metadata": { "resourceVersion": store.current_revision().to_string() },
        "items": items,
    });
    let out = output(ctx.accept())?;
    Ok(encode(&body, out, StatusCode::OK))
}
