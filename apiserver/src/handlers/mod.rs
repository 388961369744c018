//! Resource handlers: routing of `/api/v1/...` and `/apis/<g>/<v>/...` to the verbs. HTTP only.
//!
//! A request is resolved to a [`Target`] (resource, namespace, name, subresource) against the
//! runtime resource registry, then dispatched by method: GET → get/list/watch, POST → create,
//! PUT → update, PATCH → patch, DELETE → delete/deletecollection, subresources by name. Each
//! handler parses the request, calls the registry [`Store`](crate::registry::Store) and renders
//! the result; handler modules share only the HTTP helpers of [`crate::http`], never each other.

mod certificates;
mod delete;
mod read;
mod review;
mod stream;
mod subresource;
mod token;
mod unstored;
mod watch;
mod write;

pub use crate::http::request::{Ctx, Target};

use axum::extract::{Path, Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};

use crate::discovery;
use crate::error::{ApiError, Result};
use crate::http::path::{parse_rest, ResourcePath};
use crate::http::query::Query;
use crate::http::request::resolve;
use crate::registry::store::WriteScope;
use crate::state::AppState;

async fn dispatch(state: AppState, path: ResourcePath, req: Request) -> Response {
    match dispatch_inner(state, path, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn dispatch_inner(state: AppState, path: ResourcePath, req: Request) -> Result<Response> {
    if path.resource.is_none() {
        if req.method() != Method::GET {
            return Err(ApiError::method_not_allowed());
        }
        return discovery::resource_list(&state.resources.snapshot(), &path.group, &path.version)
            .map(|v| crate::http::render::json(axum::http::StatusCode::OK, &v))
            .ok_or_else(ApiError::unknown_path);
    }
    let target = resolve(&state, &path)?;
    let warning = target.resource.strategy.deprecation_warning();
    let (parts, body) = req.into_parts();
    let ctx = Ctx {
        state,
        target,
        query: Query::parse(parts.uri.query()),
        user: crate::authn::filter::user_of(&parts.extensions, &parts.headers),
        audit_annotations: crate::audit::annotations_of(&parts.extensions),
        headers: parts.headers,
    };
    let mut unstored_body = Some(body);
    if let Some(r) = unstored::handle(&ctx, &parts.method, &mut unstored_body).await {
        return with_warning(r, warning);
    }
    let body = unstored_body.unwrap_or_default();
    let sub = ctx.target.subresource.clone();
    let named = ctx.target.name.is_some();
    if api::resources::is_review(ctx.target.info()) {
        return with_warning(review::create(ctx, parts.method, body).await, warning);
    }
    let result = match (parts.method, named, sub.as_deref()) {
        (Method::POST, true, Some("token")) => token::token_request(ctx, body).await,
        (method, true, Some("approval")) => certificates::approval(ctx, method, body).await,
        (Method::GET, false, None) => {
            let opts = crate::http::query::ListOptions::from_query(&ctx.query)?;
            if opts.watch {
                watch::watch(ctx, opts).await
            } else {
                read::list(ctx, opts).await
            }
        }
        (Method::GET, true, None) => read::get(ctx).await,
        (Method::POST, false, None) => write::create(ctx, body).await,
        (Method::PUT, true, None) => write::update(ctx, body, WriteScope::Main).await,
        (Method::PATCH, true, None) => write::patch(ctx, body, WriteScope::Main).await,
        (Method::DELETE, true, None) => delete::delete(ctx, body).await,
        (Method::DELETE, false, None) => delete::delete_collection(ctx, body).await,
        (Method::GET, true, Some("status")) => read::get(ctx).await,
        (Method::PUT, true, Some("status")) => write::update(ctx, body, WriteScope::Status).await,
        (Method::PATCH, true, Some("status")) => write::patch(ctx, body, WriteScope::Status).await,
        (method, true, Some(sub)) => subresource::handle(ctx, method, sub, body).await,
        _ => Err(ApiError::method_not_allowed()),
    };
    with_warning(result, warning)
}

/// Adds the deprecation `Warning` header of a deprecated resource to its response, whatever the
/// outcome (upstream's deprecation filter warns on every request to the resource).
fn with_warning(result: Result<Response>, warning: Option<&'static str>) -> Result<Response> {
    let Some(text) = warning else {
        return result;
    };
    let mut resp = result.unwrap_or_else(IntoResponse::into_response);
    if let Ok(v) = axum::http::HeaderValue::from_str(&format!("299 - \"{text}\"")) {
        resp.headers_mut().append(axum::http::header::WARNING, v);
    }
    Ok(resp)
}

/// `/api/{version}`.
pub async fn core_root(
    State(state): State<AppState>,
    Path(version): Path<String>,
    req: Request,
) -> Response {
    let path = ResourcePath {
        group: String::new(),
        version,
        namespace: None,
        resource: None,
        name: None,
        subresource: None,
    };
    dispatch(state, path, req).await
}

/// `/api/{version}/{*rest}`.
pub async fn core(
    State(state): State<AppState>,
    Path((version, rest)): Path<(String, String)>,
    req: Request,
) -> Response {
    match parse_rest("", &version, &rest) {
        Some(p) => dispatch(state, p, req).await,
        None => ApiError::unknown_path().into_response(),
    }
}

/// `/apis/{group}`.
pub async fn group_root(State(state): State<AppState>, Path(group): Path<String>) -> Response {
    match discovery::group(&state.resources.snapshot(), &group) {
        Some(v) => crate::http::render::json(axum::http::StatusCode::OK, &v),
        None => ApiError::unknown_path().into_response(),
    }
}

/// `/apis/{group}/{version}`.
pub async fn named_root(
    State(state): State<AppState>,
    Path((group, version)): Path<(String, String)>,
    req: Request,
) -> Response {
    let path = ResourcePath {
        group,
        version,
        namespace: None,
        resource: None,
        name: None,
        subresource: None,
    };
    dispatch(state, path, req).await
}

/// `/apis/{group}/{version}/{*rest}`.
pub async fn named(
    State(state): State<AppState>,
    Path((group, version, rest)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    match parse_rest(&group, &version, &rest) {
        Some(p) => dispatch(state, p, req).await,
        None => ApiError::unknown_path().into_response(),
    }
}

/// The (verb, resource) labels of a request for metrics, with bounded cardinality (only served
/// resources are named).
pub fn classify(state: &AppState, req: &Request) -> (&'static str, String) {
    let path = req.uri().path();
    let parsed = if let Some(rest) = path.strip_prefix("/api/v1/") {
        parse_rest("", "v1", rest)
    } else if let Some(rest) = path.strip_prefix("/apis/") {
        let mut it = rest.splitn(3, '/');
        match (it.next(), it.next(), it.next()) {
            (Some(g), Some(v), Some(r)) => parse_rest(g, v, r),
            _ => None,
        }
    } else {
        None
    };
    let resolved = parsed.as_ref().and_then(|p| resolve(state, p).ok());
    let resource = resolved
        .as_ref()
        .map(|t| match &t.subresource {
            Some(s) => format!("{}/{}", t.info().plural, s),
            None => t.info().plural.clone(),
        })
        .unwrap_or_default();
    let named = resolved.as_ref().is_some_and(|t| t.name.is_some());
    let watch = req
        .uri()
        .query()
        .map(|q| Query::parse(Some(q)).bool("watch") == Some(true))
        .unwrap_or(false);
    let verb = match (req.method().clone(), named) {
        (Method::GET, _) if watch => "WATCH",
        (Method::GET, true) => "GET",
        (Method::GET, false) => "LIST",
        (Method::POST, _) => "POST",
        (Method::PUT, _) => "PUT",
        (Method::PATCH, _) => "PATCH",
        (Method::DELETE, true) => "DELETE",
        (Method::DELETE, false) => "DELETECOLLECTION",
        _ => "OTHER",
    };
    (verb, resource)
}
