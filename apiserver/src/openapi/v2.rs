//! `/openapi/v2`: the Swagger 2.0 document of every served kind (helm and older tools read it),
//! built from the same per-kind schemas as the v3 documents, with `#/definitions/` references,
//! `x-kubernetes-group-version-kind` on each kind's definition and every path's PATCH operation,
//! and the patch/list extensions (see [`super::schemas::add_extensions`]).
//!
//! Content negotiation as kube-openapi's handler: the first of the `Accept` list that is served,
//! JSON (`application/json`, `*/*`, no `Accept`) or protobuf
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, the only form client-go's
//! `OpenAPISchema` asks for; see [`super::v2_proto`]); anything else 406.
//! Built on first request and cached until the served set changes; the `ETag` is its content hash.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::{content_hash, operation_id, schemas};
use crate::registry::resources::Served;
use crate::registry::Resource;
use crate::state::AppState;

/// The v2 document of one served set.
#[derive(Debug)]
pub(super) struct V2 {
    generation: u64,
    json: Bytes,
    proto: Bytes,
    etag: String,
}

/// The protobuf media type (and its pre-1.10 spelling), as kube-openapi serves them.
const PROTO: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const PROTO_OLD: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn param(name: &str, location: &str, ty: &str) -> Value {
    let mut p = json!({ "name": name, "in": location, "type": ty, "uniqueItems": true });
    if location == "path" {
        p["required"] = json!(true);
    }
    p
}

/// `#/components/schemas/x` references as `#/definitions/x`, and the OpenAPI 3 `allOf` wrappers
/// of described references unwrapped (Swagger 2.0 keeps `description` beside `$ref`).
fn to_v2(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(all)) = m.get("allOf") {
                if let [only] = all.as_slice() {
                    if let Some(r) = only.get("$ref").cloned() {
                        m.shift_remove("allOf");
                        m.insert("$ref".into(), r);
                    }
                }
            }
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                if let Some(name) = r.strip_prefix("#/components/schemas/") {
                    *r = format!("#/definitions/{name}");
                }
            }
            m.values_mut().for_each(to_v2);
        }
        Value::Array(a) => a.iter_mut().for_each(to_v2),
        _ => {}
    }
}

/// The Swagger 2.0 document of `served`.
pub fn document(served: &Served) -> Value {
    let resources: Vec<&Resource> = served.resources.iter().map(|r| r.as_ref()).collect();
    let (mut definitions, roots) = schemas::definitions(&resources);
    let mut paths = Map::new();
    for (resource, root) in resources.iter().zip(roots) {
        let info = &resource.info;
        let base = if info.group.is_empty() {
            format!("/api/{}", info.version)
        } else {
            format!("/apis/{}/{}", info.group, info.version)
        };
        let path = if info.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", info.plural)
        } else {
            format!("{base}/{}/{{name}}", info.plural)
        };
        let name = root
            .as_ref()
            .and_then(|r| r.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .map(String::from)
            .unwrap_or_else(|| match &resource.openapi {
                Some(_) => crate::registry::customresource::schema_name(info),
                None => super::schema_name(info),
            });
        let gvk = json!({ "group": info.group, "version": info.version, "kind": info.kind });
        let mut params = vec![param("name", "path", "string")];
        if info.namespaced {
            params.push(param("namespace", "path", "string"));
        }
        let schema_ref = json!({ "$ref": format!("#/definitions/{name}") });
        paths.insert(
            path,
            json!({
                "parameters": params,
                "patch": {
                    "consumes": [
                        "application/json-patch+json",
                        "application/merge-patch+json",
                        "application/apply-patch+yaml",
                    ],
                    "produces": ["application/json", "application/yaml"],
                    "schemes": ["https"],
                    "operationId": operation_id("patch", info),
                    "parameters": [
                        { "name": "body", "in": "body", "required": true, "schema": { "type": "object" } },
                        param("dryRun", "query", "string"),
                        param("fieldManager", "query", "string"),
                        param("fieldValidation", "query", "string"),
                        param("force", "query", "boolean"),
                    ],
                    "responses": {
                        "200": { "description": "OK", "schema": schema_ref.clone() },
                        "201": { "description": "Created", "schema": schema_ref },
                    },
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk.clone(),
                },
            }),
        );
        let def = definitions.entry(name).or_insert_with(|| {
            resource
                .openapi
                .clone()
                .unwrap_or_else(|| schemas::open_schema(info))
        });
        if let Some(o) = def.as_object_mut() {
            // A definition served by several group-versions (none today) lists each.
            match o.get_mut("x-kubernetes-group-version-kind") {
                Some(Value::Array(list)) if !list.contains(&gvk) => list.push(gvk),
                Some(_) => {}
                None => {
                    o.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
                }
            }
        }
    }
    let mut definitions = Value::Object(definitions);
    to_v2(&mut definitions);
    json!({
        "swagger": "2.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "definitions": definitions,
    })
}

impl super::OpenApiCache {
    fn v2(&self, state: &AppState) -> Arc<V2> {
        let served = state.resources.snapshot();
        if let Some(d) = self.v2.lock().as_ref() {
            if d.generation == served.generation {
                return d.clone();
            }
        }
        let doc = document(&served);
        let json = Bytes::from(api::wire::to_vec(&doc).unwrap_or_default());
        let built = Arc::new(V2 {
            generation: served.generation,
            etag: format!("\"{}\"", content_hash(&json)),
            proto: Bytes::from(super::v2_proto::encode(&doc)),
            json,
        });
        *self.v2.lock() = Some(built.clone());
        built
    }
}

/// The first form the `Accept` header lists that is served: `Some(true)` protobuf,
/// `Some(false)` JSON (also for no header), `None` neither.
fn wants_proto(headers: &HeaderMap) -> Option<bool> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Some(false);
    };
    accept.split(',').find_map(|t| {
        let essence = t.split(';').next().unwrap_or("").trim();
        match essence {
            "" | "application/json" | "application/*" | "*/*" => Some(false),
            PROTO | PROTO_OLD => Some(true),
            _ => None,
        }
    })
}

/// `GET /openapi/v2`.
pub async fn handler(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(proto) = wants_proto(&headers) else {
        return crate::error::ApiError::from(api::status::not_acceptable(&format!(
            "only the following media types are accepted: application/json, {PROTO}"
        )))
        .into_response();
    };
    let cache = state.openapi.clone();
    let Ok(doc) = tokio::task::spawn_blocking(move || cache.v2(&state)).await else {
        return crate::error::ApiError::internal("building the OpenAPI v2 document", "task failed")
            .into_response();
    };
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == doc.etag));
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        if proto {
            doc.proto.clone()
        } else {
            doc.json.clone()
        }
        .into_response()
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        // kube-openapi answers the `@` spelling (which Go's mime parser refuses) with this one.
        HeaderValue::from_static(if proto { PROTO_OLD } else { "application/json" }),
    );
    if let Ok(v) = HeaderValue::from_str(&doc.etag) {
        h.insert(header::ETAG, v);
    }
    resp
}
