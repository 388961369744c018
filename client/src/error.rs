//! The one error type of the `client` crate.
//!
//! Design: every failed call to an apiserver is classified from the HTTP status code and the decoded
//! `metav1.Status` body, so callers match on *what happened* (`NotFound`, `Conflict`, `Gone` …) rather
//! than on strings. The mapping follows apimachinery's `errors.FromObject` / `ReasonForError`:
//! 404 → `NotFound`, 409 + reason `AlreadyExists` → `AlreadyExists`, other 409 → `Conflict`,
//! 410 → `Gone` (reason `Expired`/`Gone`, "too old resource version"), 422 → `Invalid`,
//! 429 → `TooManyRequests` (with `Retry-After`), anything else non-2xx → `Api`.
//! A `Status` with cause `ResourceVersionTooLarge` (or an old server's 504 saying so) is reported as
//! `ResourceVersionTooLarge`, which the reflector treats exactly like `Gone` (spec informer.md §1.6).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors returned by the REST client, the informer machinery and leader election.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 404: the object (or its namespace) does not exist.
    #[error("not found: {}", status_message(.0))]
    NotFound(Status),
    /// 409 with reason `AlreadyExists`: create of a name that exists.
    #[error("already exists: {}", status_message(.0))]
    AlreadyExists(Status),
    /// 409 otherwise: optimistic-concurrency conflict (stale resourceVersion or precondition).
    #[error("conflict: {}", status_message(.0))]
    Conflict(Status),
    /// 410: the requested resourceVersion (or continue token) is older than the server's history.
    #[error("gone (expired): {}", status_message(.0))]
    Gone(Status),
    /// The requested resourceVersion is newer than the server has (treated like `Gone` for LIST).
    #[error("too large resource version: {}", status_message(.0))]
    ResourceVersionTooLarge(Status),
    /// 422: the object failed validation.
    #[error("invalid: {}", status_message(.0))]
    Invalid(Status),
    /// 429: the server asked us to slow down; `retry_after` is its `Retry-After` header.
    #[error("too many requests (retry after {retry_after:?}): {}", status_message(.status))]
    TooManyRequests {
        status: Status,
        retry_after: Option<Duration>,
    },
    /// Any other non-success HTTP status.
    #[error("api error {code}: {}", status_message(.status))]
    Api { code: u16, status: Status },
    /// Transport failure: connect, TLS, reset, timeout, body read.
    #[error("http request failed")]
    Http(#[source] reqwest::Error),
    /// A response body or watch line could not be decoded.
    #[error("decoding {what} failed")]
    Decode {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A watch line exceeded the bounded line buffer.
    #[error("watch event larger than {limit} bytes")]
    WatchLineTooLong { limit: usize },
    /// Client configuration (URL, CA bundle, kubeconfig) is invalid.
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// The kubeconfig file could not be read or parsed.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    /// An indexer with this name is already registered.
    #[error("indexer conflict: {0} already exists")]
    IndexerConflict(String),
    /// `by_index` etc. on an index name that was never registered.
    #[error("index with name {0} does not exist")]
    IndexNotFound(String),
    /// An operation on an informer that has been stopped (or started twice).
    #[error("informer {0}")]
    InformerState(&'static str),
    /// Invalid leader-election configuration (spec informer.md §7 validation).
    #[error("invalid leader election config: {0}")]
    LeaderElectionConfig(String),
    /// A key was not `name` or `namespace/name`.
    #[error("unexpected key format: {0:?}")]
    InvalidKey(String),
    /// Discovery serves no resource of this kind (apimachinery's `NoKindMatchError`).
    #[error("{}", no_kind_match(.group, .kind, .version.as_deref()))]
    NoKindMatch {
        group: String,
        kind: String,
        /// The version asked for; `None`: any version of the group.
        version: Option<String>,
    },
    /// Discovery serves no such resource (apimachinery's `NoResourceMatchError`).
    #[error("no matches for {group}/{version}, Resource={resource}")]
    NoResourceMatch {
        group: String,
        version: String,
        resource: String,
    },
}

fn no_kind_match(group: &str, kind: &str, version: Option<&str>) -> String {
    match version {
        None => format!("no matches for kind {kind:?} in group {group:?}"),
        Some(v) => {
            let gv = if group.is_empty() {
                v.to_string()
            } else {
                format!("{group}/{v}")
            };
            format!("no matches for kind {kind:?} in version {gv:?}")
        }
    }
}

fn status_message(s: &Status) -> String {
    match (&s.reason, &s.message) {
        (Some(r), Some(m)) => format!("{r}: {m}"),
        (None, Some(m)) => m.clone(),
        (Some(r), None) => r.clone(),
        (None, None) => format!("code {}", s.code.unwrap_or_default()),
    }
}

/// Builds a `Status` for a failure that carried no decodable body.
pub(crate) fn synthetic_status(code: u16, reason: &str, message: impl Into<String>) -> Status {
    Status {
        code: Some(i32::from(code)),
        message: Some(message.into()),
        reason: Some(reason.to_string()),
        status: Some("Failure".to_string()),
        ..Default::default()
    }
}

fn is_too_large_rv(status: &Status) -> bool {
    let cause = status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.reason.as_deref() == Some("ResourceVersionTooLarge")
                    || c.message
                        .as_deref()
                        .is_some_and(|m| m.contains("Too large resource version"))
            })
        });
    cause
        || status
            .message
            .as_deref()
            .is_some_and(|m| m.contains("Too large resource version"))
}

impl Error {
    /// Classifies an HTTP status code plus decoded `Status` (apimachinery `errors.FromObject`).
    pub fn from_status(code: u16, status: Status, retry_after: Option<Duration>) -> Self {
        if is_too_large_rv(&status) {
            return Error::ResourceVersionTooLarge(status);
        }
        match code {
            404 => Error::NotFound(status),
            409 if status.reason.as_deref() == Some("AlreadyExists") => {
                Error::AlreadyExists(status)
            }
            409 => Error::Conflict(status),
            410 => Error::Gone(status),
            422 => Error::Invalid(status),
            429 => Error::TooManyRequests {
                status,
                retry_after,
            },
            _ => Error::Api { code, status },
        }
    }

    /// Converts the `Status` embedded in a watch `ERROR` event.
    pub fn from_watch_status(status: Status) -> Self {
        let code = status
            .code
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(500);
        // Old servers sent `Expired`/`Gone` reasons with code 0; honour the reason too.
        let code = match status.reason.as_deref() {
            Some("Expired") | Some("Gone") => 410,
            _ => code,
        };
        Error::from_status(code, status, None)
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_))
    }
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict(_))
    }
    pub fn is_already_exists(&self) -> bool {
        matches!(self, Error::AlreadyExists(_))
    }
    /// 410 Expired/Gone.
    pub fn is_gone(&self) -> bool {
        matches!(self, Error::Gone(_))
    }
    /// 410 or "too large resource version": the reflector's relist-from-scratch triggers (§1.4).
    pub fn is_gone_or_too_large(&self) -> bool {
        matches!(self, Error::Gone(_) | Error::ResourceVersionTooLarge(_))
    }
    pub fn is_too_many_requests(&self) -> bool {
        matches!(self, Error::TooManyRequests { .. })
    }
    pub fn is_invalid(&self) -> bool {
        matches!(self, Error::Invalid(_))
    }
    /// The TCP connection could not be established (client-go `utilnet.IsConnectionRefused`).
    pub fn is_connection_refused(&self) -> bool {
        matches!(self, Error::Http(e) if e.is_connect())
    }
    /// HTTP status code of an API error, if this is one.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::NotFound(_) => Some(404),
            Error::AlreadyExists(_) | Error::Conflict(_) => Some(409),
            Error::Gone(_) => Some(410),
            Error::Invalid(_) => Some(422),
            Error::TooManyRequests { .. } => Some(429),
            Error::Api { code, .. } => Some(*code),
            Error::ResourceVersionTooLarge(s) => s.code.and_then(|c| u16::try_from(c).ok()),
            _ => None,
        }
    }
    /// The decoded `Status`, for API errors.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::NotFound(s)
            | Error::AlreadyExists(s)
            | Error::Conflict(s)
            | Error::Gone(s)
            | Error::ResourceVersionTooLarge(s)
            | Error::Invalid(s)
            | Error::TooManyRequests { status: s, .. }
            | Error::Api { status: s, .. } => Some(s),
            _ => None,
        }
    }

    /// The error as client-go's `StatusError.Error()` reads: the server's `Status` message when
    /// it sent one (`pods "x" is forbidden: ...`), else this error's own text. Controllers put it
    /// in events (`Error creating: <message>`), as upstream's.
    pub fn api_message(&self) -> String {
        match self.status().and_then(|s| s.message.as_deref()) {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => self.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_message_is_the_status_message_as_client_gos() {
        let forbidden = synthetic_status(403, "Forbidden", "pods \"p\" is forbidden: no");
        let e = Error::from_status(403, forbidden, None);
        assert_eq!(e.api_message(), "pods \"p\" is forbidden: no");
        assert!(e.to_string().starts_with("api error 403"));
        let e = Error::Config("x".into());
        assert_eq!(e.api_message(), e.to_string());
    }

    #[test]
    fn classification_follows_apimachinery() {
        let s = |r: &str| synthetic_status(0, r, "m");
        assert!(Error::from_status(404, s("NotFound"), None).is_not_found());
        assert!(Error::from_status(409, s("AlreadyExists"), None).is_already_exists());
        assert!(Error::from_status(409, s("Conflict"), None).is_conflict());
        assert!(Error::from_status(410, s("Expired"), None).is_gone());
        assert!(Error::from_status(422, s("Invalid"), None).is_invalid());
        assert!(Error::from_status(429, s("TooManyRequests"), None).is_too_many_requests());
        assert_eq!(
            Error::from_status(503, s("ServiceUnavailable"), None).code(),
            Some(503)
        );
        let old = synthetic_status(504, "Timeout", "Too large resource version: 10, current: 5");
        assert!(Error::from_status(504, old, None).is_gone_or_too_large());
        let watch = synthetic_status(0, "Expired", "too old resource version: 1 (5)");
        assert!(Error::from_watch_status(watch).is_gone());
    }
}
