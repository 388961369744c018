//! The one place where errors become HTTP responses: every failure is rendered as a Kubernetes
//! `Status` object (spec §9) whose `code` equals the HTTP status.
//!
//! Client-facing failures ([`ApiError::Status`]) carry a Status built by `api::status` with the
//! exact reason and message of the upstream apiserver. Internal failures ([`ApiError::Internal`])
//! are logged with their cause inside the request's span and answered with a generic 500 body
//! that never leaks internals.

use api::status::{self, StatusObject};
use api::validation::FieldError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Result of a handler step.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// A failed API request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A Kubernetes `Status` failure to send to the client as is.
    #[error("{}", .0.message.as_deref().unwrap_or("request failed"))]
    Status(Box<StatusObject>),
    /// A server-side failure; its cause is logged, never sent.
    #[error("internal error while {context}")]
    Internal {
        /// What the server was doing.
        context: &'static str,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl From<StatusObject> for ApiError {
    fn from(s: StatusObject) -> Self {
        ApiError::Status(Box::new(s))
    }
}

impl ApiError {
    /// Wraps an internal failure.
    pub fn internal(
        context: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        ApiError::Internal {
            context,
            source: source.into(),
        }
    }

    /// 404 for an absent object (`group_resource` as `pods` / `deployments.apps`).
    pub fn not_found(group_resource: &str, name: &str) -> Self {
        status::not_found(group_resource, name).into()
    }

    /// 404 for a path that names no resource.
    pub fn unknown_path() -> Self {
        status::not_found_path().into()
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group_resource: &str, name: &str) -> Self {
        status::already_exists(group_resource, name).into()
    }

    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(group_resource: &str, name: &str) -> Self {
        status::conflict(group_resource, name, status::OPTIMISTIC_LOCK_MSG).into()
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl AsRef<str>) -> Self {
        status::bad_request(message.as_ref()).into()
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        status::method_not_allowed().into()
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable() -> Self {
        status::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        )
        .into()
    }

    /// 415 for an undecodable body type.
    pub fn unsupported_media_type() -> Self {
        status::unsupported_media_type(status::UNKNOWN_FORMAT_MSG).into()
    }

    /// 415 for an unsupported patch type.
    pub fn unsupported_patch_type(content_type: &str) -> Self {
        status::unsupported_media_type(&format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
        ))
        .into()
    }

    /// 413 for an oversized body.
    pub fn too_large() -> Self {
        status::request_entity_too_large("the request body is too large").into()
    }

    /// 429 from the in-flight limit.
    pub fn too_many_requests() -> Self {
        status::too_many_requests(
            "the server has received too many requests and has asked us to try again later",
        )
        .into()
    }

    /// 504 from the request timeout.
    pub fn timeout() -> Self {
        status::timeout("request did not complete within the allotted timeout").into()
    }

    /// 410 Expired.
    pub fn expired(message: impl AsRef<str>) -> Self {
        status::gone_expired(message.as_ref()).into()
    }

    /// 422 Invalid for the options object of a request (`ListOptions`, `PatchOptions`, ...).
    pub fn invalid_options(kind: &str, error: FieldError) -> Self {
        status::invalid(&format!("{kind}.meta.k8s.io"), "", &[error]).into()
    }

    /// The HTTP status code of this error.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::Status(s) => status::code(s),
            ApiError::Internal { .. } => 500,
        }
    }

    /// The Status object of this error, as JSON.
    pub fn to_status(&self) -> serde_json::Value {
        match self {
            ApiError::Status(s) => status::to_json(s),
            ApiError::Internal { .. } => status::to_json(&status::internal(
                "an internal error occurred; see the server log",
            )),
        }
    }

    fn retry_after(&self) -> Option<i32> {
        match self {
            ApiError::Status(s) => s.details.as_ref().and_then(|d| d.retry_after_seconds),
            ApiError::Internal { .. } => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal { context, source } = &self {
            tracing::error!(context, error = %source, "internal error");
        }
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let status = self.to_status();
        let failure = crate::http::httplog::Failure {
            reason: text_of(&status, "reason"),
            message: text_of(&status, "message"),
        };
        let body = api::wire::to_vec_with_newline(&status);
        let mut resp = (code, body).into_response();
        resp.extensions_mut().insert(failure);
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(secs) = self.retry_after() {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

fn text_of(status: &serde_json::Value, field: &str) -> String {
    status
        .get(field)
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Converts a store failure into an internal error (never a client-facing message), except a
/// full disk: that is a 500 whose message names the cause, as kube-apiserver passes on etcd's
/// `etcdserver: mvcc: database space exceeded` (no reason; kubectl prints `Error from server: …`).
impl From<store::Error> for ApiError {
    fn from(e: store::Error) -> Self {
        match e {
            store::Error::ValueTooLarge { .. } => {
                status::request_entity_too_large("the object is too large to store").into()
            }
            full @ store::Error::NoSpace { .. } => status::unknown(&full.to_string()).into(),
            other => ApiError::internal("accessing the store", other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_status_shape() {
        let s = ApiError::not_found("deployments.apps", "x").to_status();
        assert_eq!(s["message"], "deployments.apps \"x\" not found");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["kind"], "deployments");
        assert_eq!(s["details"]["group"], "apps");
    }

    #[test]
    fn internal_never_leaks() {
        let e = ApiError::internal("reading the store", "secret path /var/lib/x");
        let s = e.to_status();
        assert!(!s.to_string().contains("/var/lib/x"));
        assert_eq!(s["code"], 500);
    }

    #[test]
    fn retry_after_is_sent() {
        let r = ApiError::too_many_requests().into_response();
        assert_eq!(r.status().as_u16(), 429);
        assert_eq!(
            r.headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()),
            Some("1")
        );
    }
}
