//! Patch application: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch with the
//! merge keys and `$`-directives of the built-in kinds, and server-side apply with `managedFields`.
//!
//! Guarantees: the result never contains `$`-directives; patch bodies are parsed with bounded nesting
//! (the HTTP side limits body size, this module rejects documents nested deeper than
//! [`MAX_DEPTH`]); every failure is a [`PatchError`] value that maps to one Kubernetes `Status`
//! ([`PatchError::to_status`]); nothing here panics on any input. Application is bounded in
//! memory and time for every patch type ([`limits`]: operations, copied bytes, result size and
//! depth, with kube-apiserver's values).

pub mod limits;
pub mod managed;
pub mod schema;
pub mod strategic;

use api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use api::ResourceInfo;
use serde_json::Value;

pub use managed::{server_side_apply, update_managed_fields};

/// Deepest nesting accepted in a patch document.
pub const MAX_DEPTH: usize = 100;

/// The accepted patch media types, as the 415 message lists them.
pub const PATCH_MEDIA_TYPES: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml";

/// The patch media types custom resources accept (no strategic merge), as their 415 lists them.
pub const CUSTOM_RESOURCE_PATCH_MEDIA_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// The four patch flavours, chosen by the request's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

impl PatchType {
    /// Maps a Content-Type (parameters ignored, case-insensitive) to a patch type.
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::StrategicMerge),
            "application/apply-patch+yaml" => Some(Self::Apply),
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Json => "application/json-patch+json",
            Self::Merge => "application/merge-patch+json",
            Self::StrategicMerge => "application/strategic-merge-patch+json",
            Self::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Why a patch could not be applied. Each variant maps to exactly one Status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// The patch document is not decodable or has the wrong shape (400 BadRequest).
    #[error("{0}")]
    Malformed(String),
    /// The patch is well-formed but cannot be applied, e.g. a failing JSON-patch `test` or a missing
    /// path (422 Invalid).
    #[error("{0}")]
    Invalid(String),
    /// `fieldManager` is required for apply patches (422 on kind `PatchOptions.meta.k8s.io`).
    #[error("fieldManager: Required value: is required for apply patch")]
    FieldManagerRequired,
    /// Server-side apply conflicts: the other managers and fields (409 Conflict with causes).
    #[error("Apply failed with {} conflict(s)", .conflicts.len())]
    Conflict {
        conflicts: Vec<api::status::ManagerConflict>,
    },
    /// The patch or its result passes one of the [`limits`] (413 RequestEntityTooLarge,
    /// `Request entity too large: …`).
    #[error("Request entity too large: {0}")]
    TooLarge(String),
    /// The patch type is not accepted for this resource (415).
    #[error("the body of the request was in an unknown format - accepted media types include: {PATCH_MEDIA_TYPES}")]
    UnsupportedMediaType,
}

impl PatchError {
    /// The Status the HTTP side sends; `group_resource`/`name` name the patched object.
    pub fn to_status(&self, group_resource: &str, name: &str) -> Status {
        match self {
            Self::Malformed(m) => api::status::bad_request(m),
            Self::Invalid(m) => api::status::unprocessable(m),
            Self::FieldManagerRequired => api::status::invalid(
                "PatchOptions.meta.k8s.io",
                "",
                &[api::validation::FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ),
            Self::Conflict { conflicts } => {
                api::status::apply_conflicts(group_resource, name, conflicts)
            }
            Self::TooLarge(_) => api::status::request_entity_too_large(&self.to_string()),
            Self::UnsupportedMediaType => api::status::unsupported_media_type(&self.to_string()),
        }
    }
}

fn depth(v: &Value) -> usize {
    // Iterative to stay safe on deep input.
    let mut max = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        if d > MAX_DEPTH {
            return d;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(m) => stack.extend(m.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

/// Parses a JSON patch body (serde_json's own recursion limit guards the parser).
pub(crate) fn parse_json(patch: &[u8]) -> Result<Value, PatchError> {
    let v: Value = serde_json::from_slice(patch)
        .map_err(|e| PatchError::Malformed(format!("error decoding patch: {e}")))?;
    if depth(&v) > MAX_DEPTH {
        return Err(PatchError::Malformed(
            "the patch document is nested too deeply".into(),
        ));
    }
    Ok(v)
}

/// Applies a JSON, merge or strategic merge patch to `original` (`Apply` is [`server_side_apply`]).
/// `kind` selects the strategic-merge schema; the caller checks resourceVersion/uid preconditions
/// and runs the strategy on the result. The result is within [`limits`].
pub fn apply_patch(
    kind: &ResourceInfo,
    patch_type: PatchType,
    original: &Value,
    patch: &[u8],
) -> Result<Value, PatchError> {
    let result = apply_unchecked(kind, patch_type, original, patch)?;
    limits::check_result(&result)?;
    Ok(result)
}

fn apply_unchecked(
    kind: &ResourceInfo,
    patch_type: PatchType,
    original: &Value,
    patch: &[u8],
) -> Result<Value, PatchError> {
    match patch_type {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(patch)
                .map_err(|e| PatchError::Malformed(format!("error decoding patch: {e}")))?;
            let mut doc = original.clone();
            limits::apply_json_patch(&mut doc, &ops)?;
            Ok(doc)
        }
        PatchType::Merge => {
            let p = parse_json(patch)?;
            if !p.is_object() {
                return Err(PatchError::Malformed(
                    "error decoding patch: a merge patch must be a JSON object".into(),
                ));
            }
            let mut doc = original.clone();
            json_patch::merge(&mut doc, &p);
            Ok(doc)
        }
        PatchType::StrategicMerge => {
            let p = parse_json(patch)?;
            strategic::strategic_merge(kind, original, &p)
        }
        PatchType::Apply => Err(PatchError::UnsupportedMediaType),
    }
}

#[cfg(test)]
mod tests;
