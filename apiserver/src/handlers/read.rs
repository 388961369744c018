//! GET of one object (from the store: always the latest state) and LIST (from the watch cache at
//! one consistent revision, spec §7.2).

use axum::http::StatusCode;
use axum::response::Response;

use crate::error::Result;
use crate::http::query::ListOptions;
use crate::http::render::{respond_list, respond_object, ObjectResponse};
use crate::http::request::Ctx;

/// GET of one object (also `/status`).
pub async fn get(ctx: Ctx) -> Result<Response> {
    let name = ctx.target.require_name()?;
    let obj = ctx.store().get(name).await?;
    let include = ListOptions::from_query(&ctx.query)
        .map(|o| o.include_object)
        .unwrap_or_default();
    respond_object(
        &ctx.target.resource,
        ctx.accept(),
        include,
        ObjectResponse {
            object: obj,
            json: None,
            code: StatusCode::OK,
        },
    )
}

/// LIST.
pub async fn list(ctx: Ctx, opts: ListOptions) -> Result<Response> {
    let store = ctx.store();
    let filter = store.filter(&opts)?;
    let page = store.list(&opts, &filter).await?;
    respond_list(
        &ctx.target.resource,
        ctx.accept(),
        opts.include_object,
        &page.items,
        page.metadata,
    )
}
