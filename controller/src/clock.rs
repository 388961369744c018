//! Time source for every controller decision that depends on "now".
//!
//! Controllers never call `Timestamp::now()` directly: they hold an `Arc<dyn Clock>` so that unit tests
//! drive expiry (expectations, minReadySeconds, lease staleness, eviction deadlines) with a [`FakeClock`]
//! instead of sleeping. The fake clock only moves when a test moves it.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that stands still until told to move (tests).
#[derive(Debug)]
pub struct FakeClock {
    // A mutex, not an atomic: `Timestamp` is 12 bytes and tests are not contended.
    now: Mutex<Timestamp>,
}

impl FakeClock {
    /// A fake clock set to `start`.
    pub fn new(start: Timestamp) -> Arc<Self> {
        Arc::new(Self {
            now: Mutex::new(start),
        })
    }

    /// Move the clock forward (or backward, with a negative duration).
    pub fn advance(&self, by: SignedDuration) {
        let mut now = self.now.lock();
        *now = now.saturating_add(by).unwrap_or(*now);
    }

    /// Set the clock to an instant.
    pub fn set(&self, to: Timestamp) {
        *self.now.lock() = to;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        *self.now.lock()
    }
}

/// The shared system clock as a trait object.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_told() {
        let start = Timestamp::from_second(1_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let c = FakeClock::new(start);
        assert_eq!(c.now(), start);
        c.advance(SignedDuration::from_secs(5));
        assert_eq!(c.now().as_second(), 1_000_005);
    }
}
