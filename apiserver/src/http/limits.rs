//! The request time limit (T8; upstream `filters/timeout.go` and `BasicLongRunningRequestCheck`).
//!
//! Every request that is not long-running is answered 504 when it takes longer than the
//! configured timeout, its wait in a priority-and-fairness queue included (the limit wraps
//! [`crate::flowcontrol::filter`]). Long-running requests — watches, and the `attach`, `exec`,
//! `log`, `portforward` and `proxy` subresources and verbs, as kube-apiserver's check names them
//! — have no time limit. In-flight limits are API Priority and Fairness' (see
//! [`crate::flowcontrol`]).

use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::http::request_info::RequestInfo;

/// Whether a request is long-running (upstream's long-running verbs `watch`, `proxy` and
/// subresources `attach`, `exec`, `proxy`, `log`, `portforward`).
pub fn is_long_running(info: &RequestInfo) -> bool {
    if !info.resource_request {
        return false;
    }
    if matches!(info.verb.as_str(), "watch" | "proxy") {
        return true;
    }
    matches!(
        info.subresource.as_str(),
        "attach" | "exec" | "proxy" | "log" | "portforward"
    )
}

/// The time-limit middleware.
/// The parsed [`RequestInfo`] is left in the request's extensions for the filters inside.
pub async fn timeout(State(limit): State<Duration>, mut req: Request, next: Next) -> Response {
    if is_long_running(RequestInfo::of(&mut req)) {
        return next.run(req).await;
    }
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => ApiError::timeout().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    #[test]
    fn long_running_requests_as_upstream() {
        let lr =
            |m: Method, p: &str, q: Option<&str>| is_long_running(&RequestInfo::parse(&m, p, q));
        assert!(lr(Method::GET, "/api/v1/pods", Some("watch=true")));
        assert!(lr(Method::GET, "/api/v1/namespaces/a/pods/p/log", None));
        assert!(lr(Method::POST, "/api/v1/namespaces/a/pods/p/exec", None));
        assert!(!lr(Method::GET, "/api/v1/pods", None));
        assert!(!lr(Method::GET, "/healthz", None));
        assert!(!lr(Method::PUT, "/api/v1/namespaces/a/pods/p/status", None));
    }
}
