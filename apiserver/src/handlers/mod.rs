//! Resource handlers: routing of `/api/v1/...` and `/apis/<g>/<v>/...` to the verbs.
//!
//! A request is resolved to a [`Target`] (resource, namespace, name, subresource) against the
//! resource table, then dispatched by method: GET → get/list/watch, POST → create (or binding),
//! PUT → update, PATCH → patch, DELETE → delete/deletecollection. Each verb lives in its own
//! module; objects in and out are `serde_json::Value`.

mod delete;
mod patch;
pub mod read;
pub mod render;
pub mod subresource;
mod watch;
pub mod write;

pub use render::{respond_object, ObjectResponse};

use api::ResourceInfo;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::response::{IntoResponse, Response};

use crate::discovery;
use crate::error::{ApiError, Result};
use crate::http::path::{parse_rest, ResourcePath};
use crate::http::query::Query;
use crate::state::AppState;

/// A resolved resource request.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resource.
    pub info: &'static ResourceInfo,
    /// Namespace from the path (`None`: cluster-scoped, or all namespaces).
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Subresource.
    pub subresource: Option<String>,
}

impl Target {
    /// `/registry/<storage>/`.
    pub fn resource_prefix(&self) -> String {
        format!("/registry/{}/", self.info.storage)
    }

    /// Prefix of the keys this collection request covers.
    pub fn collection_prefix(&self) -> String {
        match (&self.namespace, self.info.namespaced) {
            (Some(ns), true) => format!("/registry/{}/{}/", self.info.storage, ns),
            _ => self.resource_prefix(),
        }
    }

    /// Storage key of the named object.
    pub fn key(&self, name: &str) -> String {
        object_key(self.info, self.namespace.as_deref(), name)
    }

    /// The object name, or 405 for a collection URL.
    pub fn require_name(&self) -> Result<&str> {
        self.name
            .as_deref()
            .ok_or_else(ApiError::method_not_allowed)
    }

    /// `pods` / `deployments.apps`.
    pub fn group_resource(&self) -> String {
        self.info.group_resource()
    }
}

/// Storage key of an object.
pub fn object_key(info: &ResourceInfo, namespace: Option<&str>, name: &str) -> String {
    match (info.namespaced, namespace) {
        (true, Some(ns)) => format!("/registry/{}/{}/{}", info.storage, ns, name),
        _ => format!("/registry/{}/{}", info.storage, name),
    }
}

fn resolve(path: &ResourcePath) -> Result<Target> {
    let plural = path
        .resource
        .as_deref()
        .ok_or_else(ApiError::unknown_path)?;
    let info = api::find_resource(&path.group, &path.version, plural)
        .ok_or_else(ApiError::unknown_path)?;
    if path.namespace.is_some() && !info.namespaced {
        return Err(ApiError::unknown_path());
    }
    if info.namespaced && path.namespace.is_none() && path.name.is_some() {
        return Err(ApiError::unknown_path());
    }
    if let Some(sub) = &path.subresource {
        let finalize = info.plural == "namespaces" && info.group.is_empty() && sub == "finalize";
        if info.subresource(sub).is_none() && !finalize {
            return Err(ApiError::unknown_path());
        }
    }
    Ok(Target {
        info,
        namespace: path.namespace.clone(),
        name: path.name.clone(),
        subresource: path.subresource.clone(),
    })
}

/// Everything a verb handler gets.
pub struct Ctx {
    /// Shared state.
    pub state: AppState,
    /// The resolved target.
    pub target: Target,
    /// Parsed query.
    pub query: Query,
    /// Request headers.
    pub headers: HeaderMap,
}

impl Ctx {
    /// The `Accept` header.
    pub fn accept(&self) -> Option<&str> {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
    }

    /// Reads the body with the configured size cap.
    pub async fn read_body(&self, body: Body) -> Result<bytes::Bytes> {
        crate::http::body::read_limited(body, self.state.config.max_body_bytes).await
    }
}

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
        return discovery::resource_list(&path.group, &path.version)
            .map(|v| axum::Json(v).into_response())
            .ok_or_else(ApiError::unknown_path);
    }
    let target = resolve(&path)?;
    let (parts, body) = req.into_parts();
    let ctx = Ctx {
        state,
        target,
        query: Query::parse(parts.uri.query()),
        headers: parts.headers,
    };
    let sub = ctx.target.subresource.clone();
    let named = ctx.target.name.is_some();
    match (parts.method, named, sub.as_deref()) {
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
        (Method::PUT, true, None) => write::update(ctx, body).await,
        (Method::PATCH, true, None) => write::patch(ctx, body).await,
        (Method::DELETE, true, None) => delete::delete(ctx, body).await,
        (Method::DELETE, false, None) => delete::delete_collection(ctx, body).await,
        (method, true, Some(sub)) => subresource::handle(ctx, method, sub, body).await,
        _ => Err(ApiError::method_not_allowed()),
    }
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
pub async fn group_root(Path(group): Path<String>) -> Response {
    match discovery::group(&group) {
        Some(v) => axum::Json(v).into_response(),
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

/// The (verb, resource) labels of a request for metrics, with bounded cardinality.
pub fn classify(req: &Request) -> (&'static str, String) {
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
    let resolved = parsed.as_ref().and_then(|p| resolve(p).ok());
    let resource = resolved
        .as_ref()
        .map(|t| match &t.subresource {
            Some(s) => format!("{}/{}", t.info.plural, s),
            None => t.info.plural.to_string(),
        })
        .unwrap_or_default();
    let named = resolved.as_ref().is_some_and(|t| t.name.is_some());
    let watch = req
        .uri()
        .query()
        .map(|q| matches!(Query::parse(Some(q)).bool("watch"), Ok(Some(true))))
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
