//! A resource request as the handlers see it: the [`Target`] resolved against the runtime
//! resource registry, and the [`Ctx`] of one request (state, target, query, headers) with the
//! steps every handler shares: reading the body, parsing write options, and the registry store of
//! the target.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderMap};

use crate::error::{ApiError, Result};
use crate::http::path::ResourcePath;
use crate::http::query::Query;
use crate::registry::{Resource, Store, WriteOptions};
use crate::state::AppState;

/// A resolved resource request.
#[derive(Debug, Clone)]
pub struct Target {
    /// The resource.
    pub resource: Arc<Resource>,
    /// Namespace from the path (`None`: cluster-scoped, or all namespaces).
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Subresource.
    pub subresource: Option<String>,
}

impl Target {
    /// The resource's description.
    pub fn info(&self) -> &api::ResourceInfo {
        &self.resource.info
    }

    /// The object name, or 405 for a collection URL.
    pub fn require_name(&self) -> Result<&str> {
        self.name
            .as_deref()
            .ok_or_else(ApiError::method_not_allowed)
    }

    /// `pods` / `deployments.apps`.
    pub fn group_resource(&self) -> String {
        self.resource.info.group_resource()
    }
}

/// Resolves a parsed path against the served resources: an unknown resource, a namespace on a
/// cluster-scoped one, a name without namespace on a namespaced one or an unknown subresource
/// is 404.
pub fn resolve(state: &AppState, path: &ResourcePath) -> Result<Target> {
    let plural = path
        .resource
        .as_deref()
        .ok_or_else(ApiError::unknown_path)?;
    let resource = state
        .resources
        .find(&path.group, &path.version, plural)
        .ok_or_else(ApiError::unknown_path)?;
    if path.namespace.is_some() && !resource.info.namespaced {
        return Err(ApiError::unknown_path());
    }
    if resource.info.namespaced && path.namespace.is_none() && path.name.is_some() {
        return Err(ApiError::unknown_path());
    }
    if let Some(sub) = &path.subresource {
        if resource.info.subresource_named(sub).is_none() {
            return Err(ApiError::unknown_path());
        }
    }
    Ok(Target {
        resource,
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
    /// Who the request acts as ([`crate::authn::filter`]).
    pub user: Arc<crate::authn::UserInfo>,
    /// Where admission leaves the request's audit annotations ([`crate::audit`]).
    pub audit_annotations: crate::registry::AuditAnnotations,
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

    /// The registry store of the target's resource in the target's namespace.
    pub fn store(&self) -> Store<'_> {
        Store::new(
            &self.state,
            self.target.resource.clone(),
            self.target.namespace.as_deref(),
        )
    }

    /// The write options of the query (`kind` names the options type in errors:
    /// `CreateOptions`, …), with the field manager defaulted as upstream does.
    pub fn write_options(&self, kind: &str) -> Result<WriteOptions> {
        let q = crate::http::query::WriteOptions::from_query(&self.query, kind)?;
        Ok(WriteOptions {
            dry_run: q.dry_run,
            field_manager: self.field_manager(),
            field_validation: q.field_validation,
            force: q.force.unwrap_or(false),
            warnings: Default::default(),
            user: Some(self.user.clone()),
            audit_annotations: self.audit_annotations.clone(),
        })
    }

    /// The field manager of a write: `fieldManager`, else the client's User-Agent product name
    /// (upstream's default).
    pub fn field_manager(&self) -> String {
        if let Some(m) = self.query.get("fieldManager").filter(|m| !m.is_empty()) {
            return m.chars().take(128).collect();
        }
        self.headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|ua| ua.split('/').next())
            .map(|s| s.chars().take(128).collect())
            .unwrap_or_default()
    }
}
