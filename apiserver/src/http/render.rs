//! Rendering objects and lists in the negotiated representation (JSON, YAML, Table,
//! PartialObjectMetadata[List]).
//!
//! Wire form as kube-apiserver's: objects are in Go field order (stored objects are put in it once,
//! when they are written, so a read is a byte copy; objects built for a response are put in it here
//! or by their builder, see `api::wire`), and every JSON body ends with the newline Go's
//! `json.Encoder` writes.

use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::error::{ApiError, Result};
use crate::http::negotiate::{negotiate_output, Negotiated, Output};
use crate::http::query::IncludeObject;
use crate::registry::Resource;
use crate::table;
use crate::watch_cache::Listed;

/// Serialises one object in the endpoint's form without copying it when it already is.
pub fn write_presented(out: &mut Vec<u8>, resource: &Resource, obj: &Value) {
    let res = if resource.is_presentable(obj) {
        api::wire::to_writer(&mut *out, obj)
    } else {
        api::wire::to_writer(&mut *out, &resource.present(obj.clone()))
    };
    if let Err(e) = res {
        tracing::error!(error = %e, "serialising an object failed");
        out.extend_from_slice(b"null");
    }
}

/// The negotiated output, or 406.
pub fn output(accept: Option<&str>) -> Result<Output> {
    match negotiate_output(accept) {
        Negotiated::Chosen(o) => Ok(o),
        Negotiated::NotAcceptable => Err(ApiError::not_acceptable()),
    }
}

/// Serialises `body` as the output format asks.
pub fn encode(body: &Value, out: Output, code: StatusCode) -> Response {
    let (bytes, ct) = match out {
        Output::Yaml => match serde_yaml::to_string(body) {
            Ok(s) => (s.into_bytes(), out.content_type()),
            Err(e) => return ApiError::internal("encoding YAML", e).into_response(),
        },
        _ => (api::wire::to_vec_with_newline(body), out.content_type()),
    };
    with_content_type(bytes, ct, code)
}

/// A JSON response of `body` (already in wire order), newline-terminated.
pub fn json(code: StatusCode, body: &Value) -> Response {
    with_content_type(
        api::wire::to_vec_with_newline(body),
        "application/json",
        code,
    )
}

/// A response of `bytes` already encoded as `content_type`.
pub fn with_content_type(
    bytes: impl Into<bytes::Bytes>,
    content_type: &'static str,
    code: StatusCode,
) -> Response {
    let mut bytes: bytes::Bytes = bytes.into();
    if content_type.starts_with("application/json") && bytes.last() != Some(&b'\n') {
        // Stored objects' text is kept without it; one copy, far cheaper than the serialisation
        // it stands for.
        let mut b = bytes::BytesMut::with_capacity(bytes.len() + 1);
        b.extend_from_slice(&bytes);
        b.extend_from_slice(b"\n");
        bytes = b.freeze();
    }
    let mut resp = (code, bytes).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// What to send back for one object.
pub struct ObjectResponse {
    /// The object (shared with the watch cache after a write).
    pub object: Arc<Value>,
    /// Its JSON text, if a write already made it.
    pub json: Option<bytes::Bytes>,
    /// 200 or 201.
    pub code: StatusCode,
}

/// Renders one object in the negotiated representation.
pub fn respond_object(
    resource: &Resource,
    accept: Option<&str>,
    include: IncludeObject,
    resp: ObjectResponse,
) -> Result<Response> {
    let out = output(accept)?;
    if out == Output::Json && resource.is_presentable(&resp.object) {
        return Ok(match resp.json {
            Some(json) => with_content_type(json, out.content_type(), resp.code),
            None => encode(&resp.object, out, resp.code),
        });
    }
    let obj = resource.present(Arc::unwrap_or_clone(resp.object));
    let body = match out {
        Output::Table => table::table(
            resource,
            std::iter::once(&obj),
            include,
            json!({ "resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null) }),
            true,
        ),
        Output::PartialObjectMetadata | Output::PartialObjectMetadataList => {
            table::partial_metadata(&obj)
        }
        Output::Json | Output::Yaml => obj,
    };
    let out = if out == Output::PartialObjectMetadataList {
        Output::PartialObjectMetadata
    } else {
        out
    };
    Ok(encode(&body, out, resp.code))
}

/// Renders a list page.
pub fn respond_list(
    resource: &Resource,
    accept: Option<&str>,
    include: IncludeObject,
    items: &[Listed],
    list_meta: Value,
) -> Result<Response> {
    let out = output(accept)?;
    let info = &resource.info;
    // Every form but JSON reads the objects.
    let objects = || -> Vec<Arc<Value>> { items.iter().filter_map(Listed::object).collect() };
    let body = match out {
        Output::Table => {
            let objects = objects();
            let typed: Vec<std::borrow::Cow<'_, Value>> = objects
                .iter()
                .map(|o| {
                    if resource.is_presentable(o) {
                        std::borrow::Cow::Borrowed(o.as_ref())
                    } else {
                        std::borrow::Cow::Owned(resource.present(Value::clone(o)))
                    }
                })
                .collect();
            let mut out = Vec::with_capacity(256 + items.len() * 256);
            table::write_table(
                &mut out,
                resource,
                typed.iter().map(|c| c.as_ref()),
                include,
                &list_meta,
            );
            out.push(b'\n');
            let mut resp = (StatusCode::OK, out).into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(crate::http::negotiate::TABLE_CONTENT_TYPE),
            );
            return Ok(resp);
        }
        Output::PartialObjectMetadata | Output::PartialObjectMetadataList => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": list_meta,
            "items": objects().iter().map(|o| table::partial_metadata(o)).collect::<Vec<_>>(),
        }),
        Output::Json => return Ok(json_list(resource, items, &list_meta)),
        Output::Yaml => json!({
            "kind": info.list_kind,
            "apiVersion": info.api_version(),
            "metadata": list_meta,
            "items": objects().iter().map(|o| resource.present(Value::clone(o))).collect::<Vec<_>>(),
        }),
    };
    let out = if out == Output::PartialObjectMetadata {
        Output::PartialObjectMetadataList
    } else {
        out
    };
    Ok(encode(&body, out, StatusCode::OK))
}

/// A JSON list of `items`, streamed into one buffer: an object the watch cache holds as text in
/// the endpoint's form is copied from it, not decoded and serialised.
fn json_list(resource: &Resource, items: &[Listed], list_meta: &Value) -> Response {
    let info = &resource.info;
    let mut out = Vec::with_capacity(256 + items.len() * 512);
    out.extend_from_slice(b"{\"kind\":");
    let _ = api::wire::to_writer(&mut out, &info.list_kind);
    out.extend_from_slice(b",\"apiVersion\":");
    let _ = api::wire::to_writer(&mut out, &info.api_version());
    out.extend_from_slice(b",\"metadata\":");
    let _ = api::wire::to_writer(&mut out, list_meta);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let as_held = item
            .held_view()
            .is_some_and(|view| resource.is_presentable_as(view.api_version(), view.kind()));
        if as_held && item.write_held_text(&mut out) {
            continue;
        }
        match item.object() {
            Some(o) => write_presented(&mut out, resource, &o),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(b"]}\n");
    let mut resp = (StatusCode::OK, out).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Renders a written object: its JSON text as the write made it, when it has one (`Metadata` rows
/// for a Table).
pub fn respond_written(
    resource: &Resource,
    accept: Option<&str>,
    written: crate::registry::Written,
    code: StatusCode,
) -> Result<Response> {
    respond_object(
        resource,
        accept,
        IncludeObject::Metadata,
        ObjectResponse {
            object: written.object,
            json: written.json,
            code,
        },
    )
}

/// Renders the outcome of an update or patch: 201 for a create, the removed object for an update
/// that finished a deletion, else 200.
pub fn respond_outcome(
    resource: &Resource,
    accept: Option<&str>,
    outcome: crate::registry::store::Outcome,
) -> Result<Response> {
    use crate::registry::store::Outcome;
    match outcome {
        Outcome::Stored(w) => respond_written(resource, accept, w, StatusCode::OK),
        Outcome::Created(w) => respond_written(resource, accept, w, StatusCode::CREATED),
        Outcome::Removed(obj, ..) => respond_written(
            resource,
            accept,
            crate::registry::Written::shared(obj),
            StatusCode::OK,
        ),
    }
}
