//! OpenAPI (spec §4): `/openapi/v3` index and one document per group-version.
//!
//! Each document has, for every kind, the object path with a PATCH operation carrying the
//! `fieldValidation` query parameter and `x-kubernetes-group-version-kind`: that is what kubectl's
//! query-param verifier looks for before it trusts the server to validate (`--validate=strict`).
//! The strategic-merge-patch content type is deliberately not listed, so kubectl computes
//! client-side-apply patches from its compiled-in types. `components.schemas` carries the kinds'
//! schemas for `kubectl explain` (see [`schemas`]). Documents are read from the runtime resource
//! registry, built on first request and cached until the served set changes; each index entry's
//! `hash` is its document's content hash, so clients refetch exactly the documents that changed.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::error::ApiError;
use crate::registry::resources::Served;
use crate::registry::Resource;
use crate::state::AppState;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
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
    let pkg = match info.group.as_str() {
        "" => "core",
        "apps" => "apps",
        "coordination.k8s.io" => "coordination",
        "events.k8s.io" => "events",
        other => other,
    };
    format!("io.k8s.api.{pkg}.{}.{}", info.version, info.kind)
}

/// The OpenAPI v3 document of one group-version, or `None` if not served.
pub fn document_for(served: &Served, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<&Resource> = served.of(group, version).map(|r| r.as_ref()).collect();
    if resources.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let (mut schemas, roots) = schemas::definitions(&resources);
    for (resource, root) in resources.into_iter().zip(roots) {
        let info = &resource.info;
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
        let name = root
            .as_ref()
            .and_then(|r| r.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .map(String::from)
            .unwrap_or_else(|| match &resource.openapi {
                Some(_) => crate::registry::customresource::schema_name(info),
                None => schema_name(info),
            });
        let schema_ref = json!({ "$ref": format!("#/components/schemas/{name}") });
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
        let schema = schemas.entry(name).or_insert_with(|| {
            resource
                .openapi
                .clone()
                .unwrap_or_else(|| schemas::open_schema(info))
        });
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

/// The serialised documents of one served set, by path (`api/v1`), with their content hashes.
#[derive(Default)]
struct Documents {
    generation: u64,
    /// Paths in discovery order.
    order: Vec<String>,
    docs: HashMap<String, (Bytes, String)>,
}

/// The documents of the current served set, rebuilt when the set changes.
#[derive(Default)]
pub struct OpenApiCache {
    current: parking_lot::Mutex<Option<Arc<Documents>>>,
    /// The `/openapi/v2` document, built on its first request.
    v2: parking_lot::Mutex<Option<Arc<v2::V2>>>,
}

impl std::fmt::Debug for OpenApiCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenApiCache").finish_non_exhaustive()
    }
}

fn content_hash(bytes: &[u8]) -> String {
    let mut h = std::hash::DefaultHasher::new();
    bytes.hash(&mut h);
    format!("{:016X}", h.finish())
}

impl OpenApiCache {
    fn documents(&self, state: &AppState) -> Arc<Documents> {
        let served = state.resources.snapshot();
        if let Some(d) = self.current.lock().as_ref() {
            if d.generation == served.generation {
                return d.clone();
            }
        }
        let mut built = Documents {
            generation: served.generation,
            ..Default::default()
        };
        for (g, v) in served.group_versions() {
            let Some(doc) = document_for(&served, g, v) else {
                continue;
            };
            let Ok(bytes) = api::wire::to_vec(&doc) else {
                continue;
            };
            let hash = content_hash(&bytes);
            built.order.push(gv_path(g, v));
            built.docs.insert(gv_path(g, v), (Bytes::from(bytes), hash));
        }
        let built = Arc::new(built);
        *self.current.lock() = Some(built.clone());
        built
    }
}

/// `/openapi/v3`.
pub async fn index(State(state): State<AppState>) -> Response {
    let docs = documents(state).await;
    let mut paths = Map::new();
    for p in &docs.order {
        if let Some((_, hash)) = docs.docs.get(p) {
            paths.insert(
                p.clone(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}") }),
            );
        }
    }
    axum::Json(json!({ "paths": paths })).into_response()
}

/// The documents, built off the async workers when the set changed.
async fn documents(state: AppState) -> Arc<Documents> {
    let cache = state.openapi.clone();
    tokio::task::spawn_blocking(move || cache.documents(&state))
        .await
        .unwrap_or_default()
}

/// `/openapi/v3/{path}`.
pub async fn document(
    State(state): State<AppState>,
    Path(path): Path<String>,
    RawQuery(_q): RawQuery,
) -> Response {
    let key = path.trim_matches('/').to_string();
    let docs = documents(state).await;
    match docs.docs.get(&key) {
        Some((d, _)) => {
            let mut r = d.clone().into_response();
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

pub mod schemas;
pub mod v2;
pub mod v2_proto;
