//! Back-off between replacements of a failed daemon pod (client-go `flowcontrol.Backoff`, as
//! kube-controller-manager builds it for the DaemonSet controller:
//! `flowcontrol.NewBackOff(1*time.Second, 15*time.Minute)`).
//!
//! Per key (`<ds uid>/<observedGeneration>/<node>`): the first failure is handled at once and
//! starts a 1 s window; each failure handled after its window doubles it, up to 15 min. An entry
//! untouched for twice the maximum (30 min) starts over, and [`FailedPodsBackoff::gc`] (run every
//! minute, `BackoffGCInterval`) drops such entries, so the table holds only recently failing
//! (DaemonSet, node) pairs. Time is passed in (the controller's injected clock).

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;

/// `flowcontrol.NewBackOff`'s initial duration for the DaemonSet controller.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Its maximum.
pub const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);
/// `BackoffGCInterval`.
pub const BACKOFF_GC_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: Timestamp,
}

/// The per-key back-off table.
#[derive(Debug)]
pub struct FailedPodsBackoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl Default for FailedPodsBackoff {
    fn default() -> Self {
        Self::new(INITIAL_BACKOFF, MAX_BACKOFF)
    }
}

fn since(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}

impl FailedPodsBackoff {
    /// A table with the given initial and maximum durations.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    fn expired(&self, e: &Entry, now: Timestamp) -> bool {
        since(now, e.last_update) > self.max * 2
    }

    /// `Next`: record a failure handled now; the window starts (or doubles).
    pub fn next(&mut self, key: &str, now: Timestamp) {
        let fresh = match self.entries.get(key) {
            Some(e) if !self.expired(e, now) => (e.backoff * 2).min(self.max),
            _ => self.initial,
        };
        self.entries.insert(
            key.to_string(),
            Entry {
                backoff: fresh,
                last_update: now,
            },
        );
    }

    /// `IsInBackOffSinceUpdate`: the last recorded failure's window has not passed yet.
    pub fn in_backoff_since_update(&self, key: &str, now: Timestamp) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| !self.expired(e, now) && since(now, e.last_update) < e.backoff)
    }

    /// `Get`: the current window of `key` (zero if none).
    pub fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// `GC`: drop entries untouched for twice the maximum.
    pub fn gc(&mut self, now: Timestamp) {
        let max2 = self.max * 2;
        self.entries
            .retain(|_, e| since(now, e.last_update) <= max2);
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No keys held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    fn at(secs: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH + SignedDuration::from_secs(secs)
    }

    #[test]
    fn windows_double_to_the_cap_and_expire() {
        let mut b = FailedPodsBackoff::new(Duration::from_secs(1), Duration::from_secs(4));
        assert!(!b.in_backoff_since_update("k", at(0)));
        b.next("k", at(0));
        assert!(b.in_backoff_since_update("k", at(0)));
        assert!(!b.in_backoff_since_update("k", at(1)));
        b.next("k", at(1));
        assert_eq!(b.get("k"), Duration::from_secs(2));
        b.next("k", at(3));
        b.next("k", at(7));
        assert_eq!(b.get("k"), Duration::from_secs(4), "capped");
        assert!(b.in_backoff_since_update("k", at(10)));
        // Untouched for more than twice the cap: starts over, and GC drops it.
        b.next("k", at(16));
        assert_eq!(b.get("k"), Duration::from_secs(1));
        b.gc(at(24));
        assert_eq!(b.len(), 1);
        b.gc(at(25));
        assert!(b.is_empty());
    }
}
