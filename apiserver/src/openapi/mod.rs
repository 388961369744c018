//! OpenAPI (spec §4): `/openapi/v3` index and one document per group-version.
//!
//! Each document has, for every kind, the object path with a PATCH operation carrying the
//! `fieldValidation` query parameter and `x-kubernetes-group-version-kind`: that is what kubectl's
//! query-param verifier looks for before it trusts the server to validate (`--validate=strict`).
//! The strategic-merge-patch content type is deliberately not listed, so kubectl computes
//! client-side-apply patches from its compiled-in types. `components.schemas` carries the kinds'
//! schemas for `kubectl explain` (see [`schemas`]). Documents are built once and cached.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::extract::{Path, RawQuery};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::discovery::group_versions;
use crate::error::ApiError;

/// Content hash of the documents: they are static per build.
const HASH: &str = concat!("minik8s-", env!("CARGO_PKG_VERSION"));

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`.
pub async fn index() -> Response {
    let mut paths = Map::new();
    for (g, v) in group_versions() {
        let p = gv_path(g, v);
        paths.insert(
            p.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{p}?hash={HASH}") }),
        );
    }
    axum::Json(json!({ "paths": paths })).into_response()
}

fn query_param(name: &str, ty: &str) -> Value {
    json!({ "name": name, "in": "query", "schema": { "type": ty, "uniqueItems": true } })
}

fn path_param(name: &str) -> Value {
    json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string", "uniqueItems": true } })
}

fn operation_id(verb: &str, info: &api::ResourceInfo) -> String {
    let group: String = if info.group.is_empty() {
        "Core".into()
    } else {
        info.group
            .split('.')
            .next()
            .unwrap_or("")
            .chars()
            .enumerate()
            .map(|(i, c)| if i == 0 { c.to_ascii_uppercase() } else { c })
            .collect()
    };
    let version: String = info
        .version
        .chars()
        .enumerate()
        .map(|(i, c)| if i == 0 { c.to_ascii_uppercase() } else { c })
        .collect();
    let scope = if info.namespaced { "Namespaced" } else { "" };
    format!("{verb}{group}{version}{scope}{}", info.kind)
}

/// The schema name of a kind as upstream names it (`io.k8s.api.core.v1.Pod`).
pub fn schema_name(info: &api::ResourceInfo) -> String {
    let pkg = match info.group {
        "" => "core",
        "apps" => "apps",
        "coordination.k8s.io" => "coordination",
        "events.k8s.io" => "events",
        other => other,
    };
    format!("io.k8s.api.{pkg}.{}.{}", info.version, info.kind)
}

/// The OpenAPI v3 document of one group-version, or `None` if not served.
pub fn document_for(group: &str, version: &str) -> Option<Value> {
    let resources: Vec<&api::ResourceInfo> = api::resources()
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = schemas::definitions(&resources);
    for info in resources {
        let base = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if info.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", info.plural)
        } else {
            format!("{base}/{}/{{name}}", info.plural)
        };
        let mut params = vec![path_param("name")];
        if info.namespaced {
            params.push(path_param("namespace"));
        }
        let schema_ref = json!({ "$ref": format!("#/components/schemas/{}", schema_name(info)) });
        let gvk = json!({ "group": info.group, "version": info.version, "kind": info.kind });
        paths.insert(
            path,
            json!({
                "parameters": params,
                "patch": {
                    "operationId": operation_id("patch", info),
                    "parameters": [
                        query_param("dryRun", "string"),
                        query_param("fieldManager", "string"),
                        query_param("fieldValidation", "string"),
                        query_param("force", "boolean"),
                    ],
                    "requestBody": {
                        "content": {
                            "application/json-patch+json": { "schema": { "type": "object" } },
                            "application/merge-patch+json": { "schema": { "type": "object" } },
                            "application/apply-patch+yaml": { "schema": { "type": "object" } },
                        },
                        "required": true,
                    },
                    "responses": {
                        "200": { "description": "OK", "content": { "application/json": { "schema": schema_ref.clone() } } },
                        "201": { "description": "Created", "content": { "application/json": { "schema": schema_ref } } },
                    },
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk.clone(),
                },
            }),
        );
        let schema = schemas
            .entry(schema_name(info))
            .or_insert_with(|| schemas::open_schema(info));
        if let Some(o) = schema.as_object_mut() {
            o.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "components": { "schemas": schemas },
    }))
}

/// The documents of every served group-version, serialised once (they are static).
fn documents() -> &'static HashMap<String, Bytes> {
    static DOCS: OnceLock<HashMap<String, Bytes>> = OnceLock::new();
    DOCS.get_or_init(|| {
        group_versions()
            .into_iter()
            .filter_map(|(g, v)| {
                let doc = document_for(g, v)?;
                let bytes = serde_json::to_vec(&doc).ok()?;
                Some((gv_path(g, v), Bytes::from(bytes)))
            })
            .collect()
    })
}

/// `/openapi/v3/{path}`.
pub async fn document(Path(path): Path<String>, RawQuery(_q): RawQuery) -> Response {
    let key = path.trim_matches('/').to_string();
    // The first request builds every document; keep that off the async workers.
    let doc = tokio::task::spawn_blocking(move || documents().get(&key).cloned())
        .await
        .ok()
        .flatten();
    match doc {
        Some(d) => {
            let mut r = d.into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, immutable"),
            );
            r
        }
        None => ApiError::unknown_path().into_response(),
    }
}

/// `/openapi/v2`: not served (kubectl falls back to v3 only; explain uses v3).
pub async fn v2() -> Response {
    (StatusCode::NOT_FOUND, ApiError::unknown_path()).into_response()
}

pub mod schemas;
