//! Request body decoding (spec §2.4, §2.5, T6, T7).
//!
//! Bodies are read with a hard size cap (over the cap → 413, never buffered past it). JSON is
//! parsed by serde_json with its recursion limit on (deep nesting → 400, never a stack overflow).
//! No Content-Type means JSON; YAML and Kubernetes protobuf are decoded too; anything else → 415.

use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::http::negotiate::{body_format, BodyFormat};

/// Reads the whole body, at most `limit` bytes.
pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes> {
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::too_large()),
        Err(e) => Err(ApiError::bad_request(format!(
            "unable to read the request body: {e}"
        ))),
    }
}

/// The request's Content-Type, if any.
pub fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.trim().is_empty())
}

/// Parses JSON text into a value (recursion limit on).
pub fn parse_json(bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized: error decoding JSON: {e}"
        ))
    })
}

/// Parses YAML text into a JSON value. YAML has no recursion limit of its own, so the text is
/// first checked for excessive nesting.
pub fn parse_yaml(bytes: &[u8]) -> Result<Value> {
    check_flow_depth(bytes)?;
    serde_yaml::from_slice::<Value>(bytes)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// Deepest flow nesting (`[`/`{`) accepted in a YAML or JSON text before parsing. YAML parsers
/// have no cheap recursion limit of their own (a 1.5M-deep document takes minutes), so the text is
/// scanned first; block nesting is bounded by indentation within the body-size limit.
pub const MAX_FLOW_DEPTH: i64 = 128;

/// Rejects texts whose bracket nesting exceeds [`MAX_FLOW_DEPTH`] (400).
pub fn check_flow_depth(bytes: &[u8]) -> Result<()> {
    let mut depth = 0i64;
    for b in bytes {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Err(ApiError::bad_request("the document is nested too deeply"));
                }
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
    }
    Ok(())
}

/// Decodes an object body of a POST or PUT according to its Content-Type.
pub fn decode_object(headers: &HeaderMap, bytes: &[u8]) -> Result<Value> {
    let value = match body_format(content_type(headers)) {
        Some(BodyFormat::Json) => parse_json(bytes)?,
        Some(BodyFormat::Yaml) => parse_yaml(bytes)?,
        Some(BodyFormat::Protobuf) => {
            crate::protobuf::decode_object(bytes).map_err(|e| match e {
                crate::protobuf::ProtobufError::UnsupportedKind { .. } => {
                    ApiError::from(api::status::unsupported_media_type(&e.to_string()))
                }
                other => ApiError::bad_request(other.to_string()),
            })?
        }
        None => return Err(ApiError::unsupported_media_type()),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the object provided is unrecognized: expected a JSON object",
        ));
    }
    Ok(value)
}

/// The Content-Type of a PATCH, required, as a patch type (415 for others).
pub fn patch_type(headers: &HeaderMap) -> Result<crate::patch::PatchType> {
    let ct = content_type(headers)
        .map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .ok_or_else(|| ApiError::unsupported_patch_type(""))?;
    crate::patch::PatchType::from_content_type(&ct)
        .ok_or_else(|| ApiError::unsupported_patch_type(&ct))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_is_400() {
        let deep = "[".repeat(100_000);
        assert_eq!(
            parse_json(deep.as_bytes()).err().map(|e| e.code()),
            Some(400)
        );
        assert_eq!(
            parse_yaml(deep.as_bytes()).err().map(|e| e.code()),
            Some(400)
        );
    }

    #[test]
    fn no_content_type_is_json() {
        let h = HeaderMap::new();
        assert!(decode_object(&h, br#"{"a":1}"#).is_ok());
        assert_eq!(decode_object(&h, b"[1]").err().map(|e| e.code()), Some(400));
    }
}
