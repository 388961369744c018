//! The priority-and-fairness filter (upstream `filters/priority-and-fairness.go`, read for
//! behaviour): classify, wait for seats, execute, give the seats back.
//!
//! * Long-running requests other than watches (`exec`, `log`, …) are not tracked.
//! * The response — served or rejected — carries `X-Kubernetes-PF-FlowSchema-UID` and
//!   `X-Kubernetes-PF-PriorityLevel-UID` (UIDs, not names, as upstream).
//! * An `Exempt` level executes at once.
//! * Otherwise the request waits for its seats at most a quarter of the request timeout (15 s
//!   by default, upstream's `getRequestWaitContext`); a full queue, a `Reject` level without
//!   free seats or a wait past the limit is answered 429 `Too many requests, please try again
//!   later.` with its level's `Retry-After`, after nothing but classification and a queue
//!   look-up. A client that leaves while waiting is withdrawn from its queue.
//! * A watch holds its seat while its handler sets it up (registers with the watch cache and
//!   takes its initial state) and gives it back before it streams: the seat covers the watch's
//!   initialization, as upstream's does (upstream releases it once the initial events are
//!   queued for sending; here once the handler has returned the streaming response).

use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

use super::level::{Level, Seat};
use super::queueset::Queued;
use super::request::{RequestDigest, RequestInfo};
use super::stats::FlowStats;
use super::{classify, shuffle, subject, width, Schema};
use crate::authn::identity::UserInfo;
use crate::state::AppState;

/// `X-Kubernetes-PF-FlowSchema-UID`.
pub const FLOW_SCHEMA_UID: HeaderName = HeaderName::from_static("x-kubernetes-pf-flowschema-uid");
/// `X-Kubernetes-PF-PriorityLevel-UID`.
pub const PRIORITY_LEVEL_UID: HeaderName =
    HeaderName::from_static("x-kubernetes-pf-prioritylevel-uid");

/// Upstream's body of a 429 (`tooManyRequests`, written with `http.Error`).
const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.\n";

/// The filter.
pub async fn filter(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let info = RequestInfo::of(&mut req).clone();
    if info.verb != "watch" && crate::http::limits::is_long_running(&info) {
        return next.run(req).await;
    }
    // A secure server's authenticated user (`authn::filter`); a plain server's fixed admin
    // would be exempt, so there the subject is derived (see `subject`).
    let authenticated = state
        .security
        .is_some()
        .then(|| req.extensions().get::<std::sync::Arc<UserInfo>>())
        .flatten();
    let user = subject::subject(authenticated.map(|u| u.as_ref()), req.headers(), &info);
    let digest = RequestDigest { info, user };
    let dispatch = state.flowcontrol.dispatch();
    let Some(schema) = dispatch.classify(&digest) else {
        return next.run(req).await;
    };
    let mut resp = if schema.level_spec.exempt {
        schema.stats.dispatched(Duration::ZERO);
        execute(&schema.stats, 1, next.run(req)).await
    } else {
        let distinguisher = classify::distinguisher(&schema.spec, &digest);
        let hash = shuffle::flow_hash(&schema.spec.name, distinguisher);
        let initial_events = digest.info.verb == "watch"
            && crate::http::query::Query::parse(req.uri().query()).get("sendInitialEvents")
                == Some("true");
        let seats = width::seats(
            &digest.info,
            initial_events,
            || stored_objects(&state, &digest.info),
            schema.max_seats,
        );
        let wait_limit = state.config.request_timeout / 4;
        match acquire(schema, hash, seats, wait_limit).await {
            Ok(seat) => {
                let n = i64::from(seat.seats());
                let resp = execute(&schema.stats, n, next.run(req)).await;
                drop(seat);
                resp
            }
            Err(_) => {
                state.metrics.record_rejected();
                schema.level.dropped.record();
                too_many_requests(schema.level.dropped.retry_after())
            }
        }
    };
    let h = resp.headers_mut();
    h.insert(FLOW_SCHEMA_UID, schema.uid_header.clone());
    h.insert(PRIORITY_LEVEL_UID, schema.level_uid_header.clone());
    resp
}

/// Runs the handler counted as executing with `seats`.
async fn execute(
    stats: &FlowStats,
    seats: i64,
    handler: impl std::future::Future<Output = Response>,
) -> Response {
    struct Executing<'a>(&'a FlowStats, i64);
    impl Drop for Executing<'_> {
        fn drop(&mut self) {
            self.0.executing(-1, -self.1);
        }
    }
    stats.executing(1, seats);
    let _guard = Executing(stats, seats);
    handler.await
}

/// Withdraws a waiting request whose future is dropped (its client left, or the request timed
/// out) from its queue.
struct Waiting<'a> {
    level: &'a std::sync::Arc<Level>,
    stats: &'a FlowStats,
    id: Queued,
    since: Instant,
    armed: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.stats.queued(-1);
            if self.level.cancel(self.id) {
                self.stats.rejected("cancelled", self.since.elapsed());
            }
        }
    }
}

/// Waits for the request's seats; the rejection reason if it gets none.
async fn acquire(
    schema: &Schema,
    hash: u64,
    seats: u32,
    wait_limit: Duration,
) -> Result<Seat, &'static str> {
    let since = Instant::now();
    let stats = &schema.stats;
    let (id, mut rx) = match schema.level.enqueue(hash, seats) {
        Ok(queued) => queued,
        Err(reason) => {
            stats.rejected(reason.reason(), Duration::ZERO);
            return Err(reason.reason());
        }
    };
    if let Ok(seat) = rx.try_recv() {
        stats.dispatched(Duration::ZERO);
        return Ok(seat);
    }
    stats.queued(1);
    let mut waiting = Waiting {
        level: &schema.level,
        stats,
        id,
        since,
        armed: true,
    };
    let outcome = tokio::time::timeout(wait_limit, &mut rx).await;
    waiting.armed = false;
    stats.queued(-1);
    match outcome {
        Ok(Ok(seat)) => {
            stats.dispatched(since.elapsed());
            Ok(seat)
        }
        Ok(Err(oneshot::error::RecvError { .. })) | Err(_) => {
            if !schema.level.cancel(id) {
                // Dispatched just as the wait ended: the seat is on the channel.
                if let Ok(seat) = rx.try_recv() {
                    stats.dispatched(since.elapsed());
                    return Ok(seat);
                }
            }
            stats.rejected("time-out", since.elapsed());
            Err("time-out")
        }
    }
}

/// How many objects of the request's resource are stored (for a LIST's width); 0 for an
/// unknown resource (upstream gives those the minimum width).
fn stored_objects(state: &AppState, info: &RequestInfo) -> u64 {
    let served = state.resources.snapshot();
    match served.find(&info.api_group, &info.api_version, &info.resource) {
        Some(r) => state
            .cache
            .resource_count(&format!("/registry/{}/", r.info.storage)) as u64,
        None => 0,
    }
}

/// Upstream's 429: plain text, `Retry-After` in seconds.
fn too_many_requests(retry_after: i64) -> Response {
    let mut resp = (StatusCode::TOO_MANY_REQUESTS, TOO_MANY_REQUESTS).into_response();
    let h = resp.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}
