//! Builders for `meta/v1` `Status` error objects with the exact reasons, codes and messages of the
//! Kubernetes apiserver (spec §9). `Status::code` always equals the HTTP status to send ([`code`]).

use crate::validation::FieldError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status as StatusObject;

/// The optimistic-concurrency conflict detail.
pub const OPTIMISTIC_LOCK_MSG: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// The 415 message for an undecodable body.
pub const UNKNOWN_FORMAT_MSG: &str = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The message of 404s for unknown paths and resources.
pub const NOT_FOUND_PATH_MSG: &str = "the server could not find the requested resource";

fn failure(
    code: u16,
    reason: &str,
    message: impl Into<String>,
    details: Option<StatusDetails>,
) -> Status {
    Status {
        code: Some(i32::from(code)),
        details,
        message: Some(message.into()),
        metadata: Default::default(),
        reason: Some(reason.to_string()),
        status: Some("Failure".to_string()),
    }
}

/// Splits `replicasets.apps` into (`replicasets`, `apps`) and `pods` into (`pods`, ``).
fn split_group_resource(gr: &str) -> (&str, &str) {
    match gr.split_once('.') {
        Some((r, g)) => (r, g),
        None => (gr, ""),
    }
}

fn resource_details(group_resource: &str, name: &str) -> StatusDetails {
    let (kind, group) = split_group_resource(group_resource);
    StatusDetails {
        name: Some(name.to_string()),
        group: (!group.is_empty()).then(|| group.to_string()),
        kind: Some(kind.to_string()),
        ..Default::default()
    }
}

/// 404 `pods "nope" not found`.
pub fn not_found(group_resource: &str, name: &str) -> Status {
    failure(
        404,
        "NotFound",
        format!("{group_resource} \"{name}\" not found"),
        Some(resource_details(group_resource, name)),
    )
}

/// 404 for an unknown path or resource type.
pub fn not_found_path() -> Status {
    failure(
        404,
        "NotFound",
        NOT_FOUND_PATH_MSG,
        Some(StatusDetails::default()),
    )
}

/// 409 `replicationcontrollers "web2" already exists`.
pub fn already_exists(group_resource: &str, name: &str) -> Status {
    failure(
        409,
        "AlreadyExists",
        format!("{group_resource} \"{name}\" already exists"),
        Some(resource_details(group_resource, name)),
    )
}

/// 409 `Operation cannot be fulfilled on <gr> "<name>": <msg>`; use [`OPTIMISTIC_LOCK_MSG`] for stale
/// resourceVersions.
pub fn conflict(group_resource: &str, name: &str, msg: &str) -> Status {
    failure(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {group_resource} \"{name}\": {msg}"),
        Some(resource_details(group_resource, name)),
    )
}

/// One server-side-apply conflict: the other manager's identity and the conflicting field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerConflict {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    /// `""` or `status`.
    pub subresource: String,
    /// Rendered path: `.spec.replicas`, `.spec.containers[name="nginx"].image`.
    pub field: String,
}

impl ManagerConflict {
    /// The manager as the apiserver prints it (`printManager`): `"m"` for appliers, `"m" using v1` for
    /// updaters, with `with subresource "status"` when set.
    pub fn printed_manager(&self) -> String {
        let mut s = crate::validation::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!(
                "{s} with subresource {}",
                crate::validation::go_quote(&self.subresource)
            );
        }
        if self.operation == "Update" {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// 409 server-side-apply conflicts, worded as the apiserver's `NewApplyConflict`.
pub fn apply_conflicts(group_resource: &str, name: &str, conflicts: &[ManagerConflict]) -> Status {
    let n = conflicts.len();
    let causes: Vec<StatusCause> = conflicts
        .iter()
        .map(|c| StatusCause {
            reason: Some("FieldManagerConflict".to_string()),
            message: Some(format!("conflict with {}", c.printed_manager())),
            field: Some(c.field.clone()),
        })
        .collect();
    let body = if n == 1 {
        format!(
            "conflict with {}: {}",
            conflicts[0].printed_manager(),
            conflicts[0].field
        )
    } else {
        let mut managers: Vec<String> = conflicts
            .iter()
            .map(ManagerConflict::printed_manager)
            .collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            for c in conflicts.iter().filter(|c| c.printed_manager() == m) {
                lines.push(format!("- {}", c.field));
            }
        }
        lines.join("\n")
    };
    let plural = if n == 1 { "" } else { "s" };
    let mut d = resource_details(group_resource, name);
    d.causes = Some(causes);
    failure(
        409,
        "Conflict",
        format!("Apply failed with {n} conflict{plural}: {body}"),
        Some(d),
    )
}

/// 422 `<Kind[.group]> "<name>" is invalid: <errs>` with one cause per error. `qualified_kind` is
/// `ReplicationController`, `Deployment.apps` or `ListOptions.meta.k8s.io`.
pub fn invalid(qualified_kind: &str, name: &str, errors: &[FieldError]) -> Status {
    let (kind, group) = split_group_resource(qualified_kind);
    let mut rendered: Vec<String> = Vec::new();
    for e in errors {
        let s = e.to_string();
        if !rendered.contains(&s) {
            rendered.push(s);
        }
    }
    let agg = match rendered.len() {
        0 => String::new(),
        1 => rendered[0].clone(),
        _ => format!("[{}]", rendered.join(", ")),
    };
    let causes: Vec<StatusCause> = errors
        .iter()
        .map(|e| StatusCause {
            reason: Some(e.reason().to_string()),
            message: Some(e.body()),
            field: Some(e.field.clone()),
        })
        .collect();
    failure(
        422,
        "Invalid",
        format!("{qualified_kind} \"{name}\" is invalid: {agg}"),
        // Empty fields are omitted, as Go's `omitempty` does.
        Some(StatusDetails {
            name: (!name.is_empty()).then(|| name.to_string()),
            group: (!group.is_empty()).then(|| group.to_string()),
            kind: Some(kind.to_string()),
            causes: (!causes.is_empty()).then_some(causes),
            ..Default::default()
        }),
    )
}

/// 422 with a free-form message (e.g. a failing JSON-patch `test` operation).
pub fn unprocessable(msg: &str) -> Status {
    failure(422, "Invalid", msg, None)
}

/// 400 BadRequest.
pub fn bad_request(msg: &str) -> Status {
    failure(400, "BadRequest", msg, None)
}

/// 410 Expired (too old resourceVersion, expired continue token).
pub fn gone_expired(msg: &str) -> Status {
    failure(410, "Expired", msg, None)
}

/// 405 MethodNotAllowed.
pub fn method_not_allowed() -> Status {
    failure(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        None,
    )
}

/// 405 MethodNotAllowed with its own message (`create not allowed while custom resource
/// definition is terminating`).
pub fn method_not_allowed_because(msg: &str) -> Status {
    failure(405, "MethodNotAllowed", msg, None)
}

/// 415 UnsupportedMediaType.
pub fn unsupported_media_type(msg: &str) -> Status {
    failure(415, "UnsupportedMediaType", msg, None)
}

/// 406 NotAcceptable.
pub fn not_acceptable(msg: &str) -> Status {
    failure(406, "NotAcceptable", msg, None)
}

/// 413 RequestEntityTooLarge.
pub fn request_entity_too_large(msg: &str) -> Status {
    failure(413, "RequestEntityTooLarge", msg, None)
}

/// 429 TooManyRequests with `retryAfterSeconds: 1` (the apiserver's max-in-flight answer).
pub fn too_many_requests(msg: &str) -> Status {
    with_retry_after(failure(429, "TooManyRequests", msg, None), 1)
}

/// 504 Timeout (`Timeout: <msg>`).
pub fn timeout(msg: &str) -> Status {
    failure(504, "Timeout", format!("Timeout: {msg}"), None)
}

/// 504 for a resourceVersion newer than the store's.
pub fn too_large_resource_version(requested: u64, current: u64) -> Status {
    let msg = format!("Too large resource version: {requested}, current: {current}");
    let st = failure(
        504,
        "Timeout",
        format!("Timeout: {msg}"),
        Some(StatusDetails {
            causes: Some(vec![StatusCause {
                reason: Some("ResourceVersionTooLarge".to_string()),
                message: Some(msg),
                field: None,
            }]),
            ..Default::default()
        }),
    );
    with_retry_after(st, 1)
}

/// 500 ServerTimeout: `The <op> operation against <gr> could not be completed at this time, please try again.`
pub fn server_timeout(group_resource: &str, operation: &str, retry_after_seconds: i32) -> Status {
    let (kind, group) = split_group_resource(group_resource);
    failure(
        500,
        "ServerTimeout",
        format!("The {operation} operation against {group_resource} could not be completed at this time, please try again."),
        Some(StatusDetails {
            name: Some(operation.to_string()),
            group: (!group.is_empty()).then(|| group.to_string()),
            kind: Some(kind.to_string()),
            retry_after_seconds: Some(retry_after_seconds),
            ..Default::default()
        }),
    )
}

/// 500 InternalError (`Internal error occurred: <msg>`). Never put internals in `msg`.
pub fn internal(msg: &str) -> Status {
    failure(
        500,
        "InternalError",
        format!("Internal error occurred: {msg}"),
        Some(StatusDetails {
            causes: Some(vec![StatusCause {
                message: Some(msg.to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    )
}

/// 500 for a failure that is not a Status (apimachinery's `ErrorToAPIStatus` of any other
/// error: no reason, the error's text as the message; kubectl prints `Error from server: <msg>`).
/// Only for messages meant for the client (a conversion webhook's failure).
pub fn unknown(msg: &str) -> Status {
    Status {
        code: Some(500),
        details: None,
        message: Some(msg.to_string()),
        metadata: Default::default(),
        reason: None,
        status: Some("Failure".to_string()),
    }
}

/// 403 Forbidden for a request refused before any resource is resolved (a browser's request
/// to an unauthenticated server): the message as given, no details.
pub fn forbidden_request(msg: &str) -> Status {
    failure(403, "Forbidden", msg, None)
}

/// 403 `<gr> "<name>" is forbidden: <msg>` (`<gr> is forbidden: <msg>` without a name, as
/// apimachinery's `NewForbidden`).
pub fn forbidden(group_resource: &str, name: &str, msg: &str) -> Status {
    let message = if name.is_empty() {
        format!("{group_resource} is forbidden: {msg}")
    } else {
        format!("{group_resource} \"{name}\" is forbidden: {msg}")
    };
    failure(
        403,
        "Forbidden",
        message,
        Some(resource_details(group_resource, name)),
    )
}

/// 403 for creates in a terminating namespace.
pub fn namespace_terminating(group_resource: &str, name: &str, namespace: &str) -> Status {
    let mut st = forbidden(
        group_resource,
        name,
        &format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        ),
    );
    if let Some(d) = st.details.as_mut() {
        d.causes = Some(vec![StatusCause {
            reason: Some("NamespaceTerminating".to_string()),
            message: Some(format!("namespace {namespace} is being terminated")),
            field: Some("metadata.namespace".to_string()),
        }]);
    }
    st
}

/// 401 Unauthorized.
pub fn unauthorized(msg: &str) -> Status {
    failure(401, "Unauthorized", msg, None)
}

/// `status: Success` for a delete (`details.kind` is the resource plural).
pub fn success_deleted(group_resource: &str, name: &str, uid: &str) -> Status {
    let mut d = resource_details(group_resource, name);
    d.uid = (!uid.is_empty()).then(|| uid.to_string());
    Status {
        code: None,
        details: Some(d),
        message: None,
        metadata: Default::default(),
        reason: None,
        status: Some("Success".to_string()),
    }
}

/// Sets `details.retryAfterSeconds` (the HTTP side also sends `Retry-After`).
pub fn with_retry_after(mut st: Status, seconds: i32) -> Status {
    st.details
        .get_or_insert_with(Default::default)
        .retry_after_seconds = Some(seconds);
    st
}

/// The HTTP status code to send for `st` (500 when unset or out of range).
pub fn code(st: &Status) -> u16 {
    match st.code.and_then(|c| u16::try_from(c).ok()) {
        Some(c) if (100..600).contains(&c) => c,
        Some(_) | None if st.status.as_deref() == Some("Success") => 200,
        _ => 500,
    }
}

/// `Status` as JSON with `kind`/`apiVersion`.
pub fn to_json(st: &Status) -> serde_json::Value {
    let mut v = serde_json::to_value(st).unwrap_or_else(
        |_| serde_json::json!({"kind":"Status","apiVersion":"v1","status":"Failure","code":500}),
    );
    // In kube-apiserver's field order (k8s-openapi serialises fields alphabetically).
    if let Some(ty) = crate::wire::Type::named(crate::wire::STATUS) {
        crate::wire::canonicalize(&mut v, ty);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::FieldError;
    use serde_json::json;

    #[test]
    fn not_found_matches_upstream() {
        let v = to_json(&not_found("replicasets.apps", "x"));
        assert_eq!(
            v,
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"replicasets.apps \"x\" not found","reason":"NotFound",
                   "details":{"name":"x","group":"apps","kind":"replicasets"},"code":404})
        );
        assert_eq!(code(&not_found("pods", "p")), 404);
    }

    #[test]
    fn conflict_and_exists() {
        let c = conflict("replicationcontrollers", "web", OPTIMISTIC_LOCK_MSG);
        assert_eq!(c.message.as_deref(), Some("Operation cannot be fulfilled on replicationcontrollers \"web\": the object has been modified; please apply your changes to the latest version and try again"));
        assert_eq!(code(&c), 409);
        assert_eq!(
            already_exists("pods", "a").reason.as_deref(),
            Some("AlreadyExists")
        );
    }

    #[test]
    fn invalid_aggregates() {
        let e1 = FieldError::invalid("metadata.name", "Web_1", "bad");
        let e2 = FieldError::required("spec.template", "");
        let one = invalid("ReplicationController", "Web_1", std::slice::from_ref(&e1));
        assert_eq!(one.message.as_deref(), Some("ReplicationController \"Web_1\" is invalid: metadata.name: Invalid value: \"Web_1\": bad"));
        let two = invalid("Deployment.apps", "d", &[e1, e2]);
        assert_eq!(two.message.as_deref(), Some("Deployment.apps \"d\" is invalid: [metadata.name: Invalid value: \"Web_1\": bad, spec.template: Required value]"));
        let d = two.details.unwrap_or_default();
        assert_eq!(d.group.as_deref(), Some("apps"));
        assert_eq!(d.kind.as_deref(), Some("Deployment"));
        assert_eq!(d.causes.map(|c| c.len()), Some(2));
    }

    #[test]
    fn apply_conflict_message() {
        let c = |m: &str, op: &str, f: &str| ManagerConflict {
            manager: m.into(),
            operation: op.into(),
            api_version: "v1".into(),
            subresource: String::new(),
            field: f.into(),
        };
        let st = apply_conflicts(
            "replicationcontrollers",
            "web",
            &[c("kubectl-client-side-apply", "Update", ".spec.replicas")],
        );
        assert_eq!(st.message.as_deref(), Some("Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .spec.replicas"));
        assert_eq!(code(&st), 409);
        let two = apply_conflicts(
            "replicationcontrollers",
            "web",
            &[
                c("b", "Apply", ".spec.x"),
                c("a", "Update", ".spec.y"),
                c("b", "Apply", ".spec.z"),
            ],
        );
        assert_eq!(
            two.message.as_deref(),
            Some("Apply failed with 3 conflicts: conflicts with \"a\" using v1:\n- .spec.y\nconflicts with \"b\":\n- .spec.x\n- .spec.z")
        );
    }

    #[test]
    fn codes() {
        assert_eq!(code(&too_many_requests("x")), 429);
        assert_eq!(code(&timeout("x")), 504);
        assert_eq!(code(&success_deleted("pods", "a", "u")), 200);
        assert_eq!(code(&gone_expired("x")), 410);
        assert_eq!(code(&internal("x")), 500);
    }
}
