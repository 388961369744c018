//! Load shedding and time limits (T8, T9; Kubernetes `filters/maxinflight.go`, `filters/timeout.go`).
//!
//! Two semaphores bound concurrent requests, one for reads and one for mutations. A request that
//! finds no free permit is answered 429 with `Retry-After: 1` at once (a non-blocking acquire, no
//! queue). Long-running requests (watches) and health/metrics endpoints are exempt from both the
//! in-flight limit and the request timeout; every other request is answered 504 when it exceeds
//! the configured timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::metrics::Metrics;

/// Shared state of the limit middleware.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Permits for GET/HEAD/OPTIONS.
    pub reads: Arc<Semaphore>,
    /// Permits for POST/PUT/PATCH/DELETE.
    pub mutations: Arc<Semaphore>,
    /// Time limit of a non-long-running request.
    pub request_timeout: Duration,
    /// Where rejections are counted.
    pub metrics: Arc<Metrics>,
}

impl Limits {
    /// Limits with the given caps.
    pub fn new(
        max_reads: usize,
        max_mutations: usize,
        request_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            metrics,
            reads: Arc::new(Semaphore::new(max_reads)),
            mutations: Arc::new(Semaphore::new(max_mutations)),
            request_timeout,
        }
    }
}

/// Whether a request is long-running (a watch) or a probe: exempt from in-flight and timeout.
pub fn is_exempt(method: &Method, path: &str, query: Option<&str>) -> bool {
    if matches!(path, "/healthz" | "/livez" | "/readyz" | "/metrics")
        || path.starts_with("/healthz/")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/")
    {
        return true;
    }
    if method != Method::GET {
        return false;
    }
    let q = crate::http::query::Query::parse(query);
    matches!(q.bool("watch"), Ok(Some(true)))
        || path.ends_with("/log") && q.get("follow") == Some("true")
}

/// The in-flight and timeout middleware.
pub async fn limit(State(limits): State<Limits>, req: Request, next: Next) -> Response {
    if is_exempt(req.method(), req.uri().path(), req.uri().query()) {
        return next.run(req).await;
    }
    let sem = match *req.method() {
        Method::GET | Method::HEAD | Method::OPTIONS => &limits.reads,
        _ => &limits.mutations,
    };
    let Ok(_permit) = sem.clone().try_acquire_owned() else {
        limits.metrics.record_rejected();
        return ApiError::too_many_requests().into_response();
    };
    match tokio::time::timeout(limits.request_timeout, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => ApiError::timeout().into_response(),
    }
}
