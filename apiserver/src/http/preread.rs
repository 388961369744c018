//! Request bodies read before the request takes an in-flight seat (issue 21, item 4).
//!
//! The in-flight limit ([`crate::http::limits`]) hands out a small number of seats; if a handler
//! read its body while holding one, a client that declares a large body and sends it slowly would
//! hold that seat for the whole request timeout, and a few dozen such clients would starve every
//! write, lease renewals included. This middleware sits outside the limiter: it reads the whole
//! body first, bounded in size ([`Config::max_body_bytes`], 413), in time and in rate, and hands
//! the buffered body on, so a seat is only ever taken by a request whose body is already here.
//!
//! Deadlines: the body must be complete within `request_timeout` (Kubernetes' 60 s), and after
//! `body_read_grace` it must keep an average rate of at least `body_read_min_rate`: by time `t`
//! after the head, at least `min_rate * (t - grace)` bytes must have arrived (a progressive
//! minimum-rate rule in the manner of Apache's `mod_reqtimeout`). A body that misses either is
//! answered 408 (reason `Timeout`, as apimachinery maps 408) with a Status that says how much
//! arrived, and the connection is closed (the rest of the body is never read).
//!
//! Memory: bodies being pre-read share a byte budget ([`Config::preread_budget`]); a chunk waits
//! for room under the same deadline, and the room is given back when the response is produced.
//! Untouched: watches, log follows and probes (exempt from the limiter too), protocol upgrades,
//! and requests without a body.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use http_body::Body as _;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::Config;
use crate::error::ApiError;
use crate::http::request_info::RequestInfo;

/// Settings and byte budget of the pre-read middleware.
#[derive(Debug, Clone)]
pub struct PreRead {
    /// Largest accepted body (413 past it).
    pub max_body: usize,
    /// The whole body must arrive within this.
    pub deadline: Duration,
    /// Time before the rate rule applies.
    pub grace: Duration,
    /// Least average rate in bytes per second after the grace (0: none).
    pub min_rate: u64,
    /// Bytes of bodies being pre-read or held by their requests, all requests together.
    budget: Arc<Semaphore>,
}

impl PreRead {
    /// The middleware's settings from the server configuration.
    pub fn new(config: &Config) -> Self {
        // The budget holds at least one largest body, so every body can eventually be read.
        let budget = config
            .preread_budget
            .max(config.max_body_bytes)
            .min(Semaphore::MAX_PERMITS);
        Self {
            max_body: config.max_body_bytes,
            deadline: config.request_timeout,
            grace: config.body_read_grace,
            min_rate: config.body_read_min_rate,
            budget: Arc::new(Semaphore::new(budget)),
        }
    }

    /// The instant by which the body must have reached `received + 1` bytes.
    pub fn next_byte_due(&self, start: Instant, received: u64) -> Instant {
        let overall = start + self.deadline;
        if self.min_rate == 0 {
            return overall;
        }
        let rated = Duration::from_secs_f64((received + 1) as f64 / self.min_rate as f64);
        (start + self.grace + rated).min(overall)
    }
}

/// Whether the request's body is left to its handler: streaming and long-running requests,
/// protocol upgrades and requests that carry no body.
/// The request's [`RequestInfo`] is parsed here once (unless the audit layer outside did) and
/// left in its extensions for the deadline, priority-and-fairness and authorization layers inside.
fn untouched(req: &mut Request) -> bool {
    crate::http::limits::is_long_running(RequestInfo::of(req))
        || req.headers().contains_key(header::UPGRADE)
        || req.body().is_end_stream()
}

/// The declared Content-Length, if any.
fn declared_length(req: &Request) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Why a body was not read.
enum Refusal {
    TooLarge,
    TooSlow { received: u64, elapsed: Duration },
    Broken(String),
}

/// The pre-read middleware.
pub async fn preread(State(pre): State<PreRead>, mut req: Request, next: Next) -> Response {
    if untouched(&mut req) {
        return next.run(req).await;
    }
    // A body declared over the limit is still read up to the limit before the 413 (as the
    // handlers read it before this layer existed): answering at once and closing left the client
    // writing megabytes into a closed socket, so it saw a broken pipe instead of the Status.
    let declared = declared_length(&req);
    let (parts, body) = req.into_parts();
    match read(&pre, body, declared).await {
        Ok((bytes, _room)) => {
            // `_room` is held until the response exists: the body lives as long as the request.
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(Refusal::TooLarge) => close(ApiError::too_large().into_response()),
        Err(Refusal::TooSlow { received, elapsed }) => {
            let of = declared.map(|n| format!(" of {n}")).unwrap_or_default();
            let message = format!(
                "the request body was not received in time: {received}{of} bytes in {:.1}s \
                 (a body must arrive within {}s, at {} bytes/s or faster after the first {}s)",
                elapsed.as_secs_f64(),
                pre.deadline.as_secs(),
                pre.min_rate,
                pre.grace.as_secs(),
            );
            close(body_timeout(&message).into_response())
        }
        Err(Refusal::Broken(e)) => close(
            ApiError::bad_request(format!("unable to read the request body: {e}")).into_response(),
        ),
    }
}

/// 408 with the `Timeout` reason.
fn body_timeout(message: &str) -> ApiError {
    let mut status = api::status::timeout(message);
    status.code = Some(408);
    ApiError::from(status)
}

/// Marks the response as the connection's last (the unread rest of a body cannot be skipped).
fn close(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Reads `body` whole under the size, time and rate rules, taking room in the budget per chunk.
async fn read(
    pre: &PreRead,
    mut body: Body,
    declared: Option<u64>,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Refusal> {
    let start = Instant::now();
    let capacity = declared.map_or(0, |n| n.min(64 * 1024) as usize);
    let mut buf = BytesMut::with_capacity(capacity);
    let mut room: Option<OwnedSemaphorePermit> = None;
    let too_slow = |received: usize| Refusal::TooSlow {
        received: received as u64,
        elapsed: start.elapsed(),
    };
    loop {
        let due = pre.next_byte_due(start, buf.len() as u64);
        let frame = match tokio::time::timeout_at(due, body.frame()).await {
            Err(_) => return Err(too_slow(buf.len())),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(Refusal::Broken(e.to_string())),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers carry nothing the handlers read
        };
        if data.is_empty() {
            continue;
        }
        if buf.len() + data.len() > pre.max_body {
            return Err(Refusal::TooLarge);
        }
        let n = u32::try_from(data.len()).map_err(|_| Refusal::TooLarge)?;
        let acquire = pre.budget.clone().acquire_many_owned(n);
        let permit = match tokio::time::timeout_at(due, acquire).await {
            Err(_) => return Err(too_slow(buf.len())),
            Ok(Err(_)) => return Err(Refusal::Broken("the server is shutting down".into())),
            Ok(Ok(p)) => p,
        };
        match room.as_mut() {
            Some(r) => r.merge(permit),
            None => room = Some(permit),
        }
        buf.extend_from_slice(&data);
    }
    Ok((buf.freeze(), room))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre(deadline: u64, grace: u64, min_rate: u64, budget: usize) -> PreRead {
        PreRead::new(&Config {
            request_timeout: Duration::from_secs(deadline),
            body_read_grace: Duration::from_secs(grace),
            body_read_min_rate: min_rate,
            preread_budget: budget,
            max_body_bytes: 1000,
            ..Default::default()
        })
    }

    #[test]
    fn the_rate_rule_moves_the_due_time_with_each_byte_up_to_the_deadline() {
        let p = pre(60, 5, 100, 0);
        let t0 = Instant::now();
        assert_eq!(
            p.next_byte_due(t0, 0),
            t0 + Duration::from_secs(5) + Duration::from_millis(10)
        );
        assert_eq!(p.next_byte_due(t0, 999), t0 + Duration::from_secs(15));
        assert_eq!(p.next_byte_due(t0, 100_000), t0 + Duration::from_secs(60));
        assert_eq!(
            pre(60, 5, 0, 0).next_byte_due(t0, 0),
            t0 + Duration::from_secs(60)
        );
    }

    #[test]
    fn the_budget_holds_at_least_one_largest_body() {
        assert_eq!(pre(60, 5, 100, 0).budget.available_permits(), 1000);
        assert_eq!(pre(60, 5, 100, 5000).budget.available_permits(), 5000);
    }

    /// A body from a channel the test feeds.
    fn channel_body() -> (tokio::sync::mpsc::Sender<Bytes>, Body) {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(8);
        let stream =
            tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, std::convert::Infallible>);
        (tx, Body::from_stream(stream))
    }

    use tokio_stream::StreamExt as _;

    #[tokio::test(start_paused = true)]
    async fn a_slow_body_is_cut_by_the_rate_rule_and_a_steady_one_is_read() {
        let p = pre(60, 5, 100, 0);
        let (tx, body) = channel_body();
        let feeder = tokio::spawn(async move {
            // 10 bytes a second: behind 100 B/s once the grace is over.
            for _ in 0..100 {
                if tx.send(Bytes::from_static(b"0123456789")).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let t0 = Instant::now();
        match read(&p, body, Some(1000)).await {
            Err(Refusal::TooSlow { received, .. }) => assert!(received < 100, "{received}"),
            other => panic!("not cut: {:?}", other.map(|(b, _)| b.len()).ok()),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        feeder.abort();

        let (tx, body) = channel_body();
        tokio::spawn(async move {
            for _ in 0..10 {
                if tx.send(Bytes::from(vec![b'x'; 100])).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(900)).await;
            }
        });
        let (bytes, room) = read(&p, body, Some(1000)).await.ok().unwrap();
        assert_eq!(bytes.len(), 1000);
        assert_eq!(room.map(|r| r.num_permits()), Some(1000));
        assert_eq!(p.budget.available_permits(), 1000);
    }

    #[tokio::test(start_paused = true)]
    async fn an_oversized_body_is_refused_and_a_full_budget_waits_under_the_deadline() {
        let p = pre(60, 5, 0, 0);
        let (tx, body) = channel_body();
        tx.send(Bytes::from(vec![b'x'; 600])).await.unwrap();
        tx.send(Bytes::from(vec![b'x'; 600])).await.unwrap();
        assert!(matches!(read(&p, body, None).await, Err(Refusal::TooLarge)));

        // One request holds the whole budget: the next body waits and is cut at the deadline.
        let held = p.budget.clone().acquire_many_owned(1000).await.unwrap();
        let (tx, body) = channel_body();
        tx.send(Bytes::from_static(b"{}")).await.unwrap();
        drop(tx);
        let t0 = Instant::now();
        assert!(matches!(
            read(&p, body, Some(2)).await,
            Err(Refusal::TooSlow { .. })
        ));
        assert!(
            t0.elapsed() >= Duration::from_secs(60),
            "{:?}",
            t0.elapsed()
        );
        drop(held);
        let (tx, body) = channel_body();
        tx.send(Bytes::from_static(b"{}")).await.unwrap();
        drop(tx);
        assert_eq!(
            read(&p, body, Some(2)).await.ok().unwrap().0.as_ref(),
            b"{}"
        );
    }
}
