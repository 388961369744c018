//! The `Retry-After` of a rejected request (upstream `dropped_requests_tracker.go`, read for
//! behaviour): per priority level, starting at 1 s; when the level dropped at least
//! `3 × retryAfter` requests in the last `retryAfter` seconds it doubles (at most once per
//! `retryAfter` seconds, up to 32 s), and when it dropped fewer than `retryAfter` it shrinks by
//! one second — TCP-like backoff for clients that honour it.
//!
//! Counting is per whole second of wall-clock time; the history is bounded to the last 32
//! seconds. A rejection costs one short lock.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// Upstream's `maxRetryAfter`.
const MAX_RETRY_AFTER: i64 = 32;

#[derive(Debug)]
struct State {
    /// (second, drops) of past seconds, oldest first.
    history: VecDeque<(i64, i64)>,
    current_second: i64,
    current_count: i64,
    retry_after: i64,
    last_increase: i64,
}

/// One level's dropped-request statistics.
#[derive(Debug)]
pub struct DroppedRequests {
    state: Mutex<State>,
}

impl Default for DroppedRequests {
    fn default() -> Self {
        DroppedRequests {
            state: Mutex::new(State {
                history: VecDeque::new(),
                current_second: 0,
                current_count: 0,
                retry_after: 1,
                last_increase: 0,
            }),
        }
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl DroppedRequests {
    /// Records a rejection now.
    pub fn record(&self) {
        self.record_at(unix_now());
    }

    /// The Retry-After to send now, in seconds.
    pub fn retry_after(&self) -> i64 {
        self.state.lock().retry_after
    }

    /// Records a rejection at `second`.
    pub fn record_at(&self, second: i64) {
        let mut s = self.state.lock();
        if s.current_second == second {
            s.current_count += 1;
            return;
        }
        let (past, count) = (s.current_second, s.current_count);
        s.history.push_back((past, count));
        while s
            .history
            .front()
            .is_some_and(|(t, _)| past - t > MAX_RETRY_AFTER)
        {
            s.history.pop_front();
        }
        s.current_second = second;
        s.current_count = 1;
        // Re-evaluated as each new second starts, from the seconds before it.
        let retry = s.retry_after;
        let dropped: i64 = s
            .history
            .iter()
            .rev()
            .take_while(|(t, _)| second - t <= retry)
            .filter(|(t, _)| *t < second)
            .map(|(_, n)| n)
            .sum();
        if second - s.last_increase >= retry && dropped >= 3 * retry {
            s.retry_after = (retry * 2).min(MAX_RETRY_AFTER);
            s.last_increase = second;
        } else if dropped < retry && retry > 1 {
            s.retry_after = retry - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_under_sustained_drops_and_shrinks_when_they_stop() {
        let d = DroppedRequests::default();
        assert_eq!(d.retry_after(), 1);
        for _ in 0..5 {
            d.record_at(100);
        }
        // The next second sees 5 drops in the last 1 s: ≥ 3 → 2 s.
        d.record_at(101);
        assert_eq!(d.retry_after(), 2);
        for _ in 0..10 {
            d.record_at(102);
        }
        // 1 + 10 drops in the last 2 s ≥ 6, and 2 s since the last increase → 4 s.
        d.record_at(103);
        assert_eq!(d.retry_after(), 4);
        // Quiet for a while: a lone drop shrinks it by one second.
        d.record_at(200);
        assert_eq!(d.retry_after(), 3);
        d.record_at(300);
        assert_eq!(d.retry_after(), 2);
    }
}
