//! One log line per failed request: method, path, user agent, HTTP status, and the `Status`
//! reason and message the client was sent. This is minik8s's own choice, not kube-apiserver's:
//! upstream's `httplog` writes every request, at `-v=3` only, so a user at the default level sees
//! nothing of a failed request; a sandbox user needs that line at the default level.
//!
//! A user whose `kubectl drain` got a 400 or whose `apply` got a 422 finds the cause in the
//! server's log at the default level. Two kinds of failure are not logged, because clients make
//! them as normal control flow: a read (GET, HEAD) of an object that does not exist (kubectl's
//! `apply` asks before it creates; controllers ask before they adopt), and a 409 conflict (every
//! optimistic-concurrency retry of a controller is one).
//!
//! Bounded: lines pass a token bucket ([`BURST`] lines at once, then [`PER_SECOND`] a second), so
//! a flood of bad requests cannot fill the disk; the lines it drops are counted and the count is
//! reported on the next line that passes.

use std::time::Instant;

use axum::http::{Method, StatusCode};
use parking_lot::Mutex;

/// Lines logged back to back before the rate applies.
pub const BURST: f64 = 20.0;
/// Lines per second after a burst.
pub const PER_SECOND: f64 = 5.0;

/// What the error renderer tells the log about a failed response: the `Status` sent.
#[derive(Debug, Clone, Default)]
pub struct Failure {
    /// `Status.reason` (`Invalid`, `BadRequest`, `NotFound`, …).
    pub reason: String,
    /// `Status.message`.
    pub message: String,
}

/// A failed request, as the router's outer middleware saw it.
#[derive(Debug)]
pub struct FailedRequest<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub user_agent: &'a str,
    pub status: StatusCode,
    pub failure: Option<&'a Failure>,
}

/// Whether a failed response is worth a line (see the module header).
pub fn worth_logging(method: &Method, status: StatusCode) -> bool {
    if !(status.is_client_error() || status.is_server_error()) {
        return false;
    }
    let read = method == Method::GET || method == Method::HEAD;
    !(status == StatusCode::CONFLICT || (read && status == StatusCode::NOT_FOUND))
}

/// The rate-limited failure log of one apiserver.
#[derive(Debug)]
pub struct FailureLog {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
    dropped: u64,
}

impl Default for FailureLog {
    fn default() -> Self {
        Self::new()
    }
}

impl FailureLog {
    /// A full bucket.
    pub fn new() -> Self {
        FailureLog {
            bucket: Mutex::new(Bucket {
                tokens: BURST,
                refilled: Instant::now(),
                dropped: 0,
            }),
        }
    }

    /// Logs `req` if the bucket allows; returns whether it did.
    pub fn log(&self, req: &FailedRequest<'_>) -> bool {
        let Some(dropped) = self.admit(Instant::now()) else {
            return false;
        };
        let (reason, message) = req
            .failure
            .map_or(("", ""), |f| (f.reason.as_str(), f.message.as_str()));
        tracing::info!(
            target: "apiserver::httplog",
            method = %req.method,
            path = req.path,
            user_agent = req.user_agent,
            status = req.status.as_u16(),
            reason,
            message,
            suppressed = dropped,
            "request failed"
        );
        true
    }

    /// Takes a token at `now`: `Some(lines dropped since the last one logged)`, or `None` (and
    /// the line counted as dropped) when the bucket is empty.
    fn admit(&self, now: Instant) -> Option<u64> {
        let mut b = self.bucket.lock();
        let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
        b.tokens = (b.tokens + elapsed * PER_SECOND).min(BURST);
        b.refilled = now;
        if b.tokens < 1.0 {
            b.dropped += 1;
            return None;
        }
        b.tokens -= 1.0;
        Some(std::mem::take(&mut b.dropped))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn routine_outcomes_are_not_failures_worth_a_line() {
        assert!(worth_logging(
            &Method::POST,
            StatusCode::UNPROCESSABLE_ENTITY
        ));
        assert!(worth_logging(&Method::POST, StatusCode::BAD_REQUEST));
        assert!(worth_logging(&Method::DELETE, StatusCode::NOT_FOUND));
        assert!(worth_logging(
            &Method::GET,
            StatusCode::INTERNAL_SERVER_ERROR
        ));
        assert!(worth_logging(&Method::GET, StatusCode::FORBIDDEN));
        assert!(!worth_logging(&Method::GET, StatusCode::NOT_FOUND));
        assert!(!worth_logging(&Method::PUT, StatusCode::CONFLICT));
        assert!(!worth_logging(&Method::GET, StatusCode::OK));
        assert!(!worth_logging(&Method::GET, StatusCode::NOT_MODIFIED));
    }

    #[test]
    fn a_flood_is_cut_to_the_burst_then_the_rate_and_the_drops_are_counted() {
        let log = FailureLog::new();
        let start = Instant::now();
        let passed = (0..1000).filter(|_| log.admit(start).is_some()).count();
        assert_eq!(passed, BURST as usize);
        // One second later PER_SECOND more pass; the first of them reports the drops.
        let later = start + Duration::from_secs(1);
        assert_eq!(log.admit(later), Some(1000 - BURST as u64));
        let more = (0..100).filter(|_| log.admit(later).is_some()).count();
        assert_eq!(more, PER_SECOND as usize - 1);
        // The bucket never holds more than the burst, however long it was idle.
        let idle = later + Duration::from_secs(3600);
        let after_idle = (0..100).filter(|_| log.admit(idle).is_some()).count();
        assert_eq!(after_idle, BURST as usize);
    }
}
