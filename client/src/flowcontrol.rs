//! Flow-control primitives shared by the REST client, the reflector and the work queue
//! (client-go `util/flowcontrol`, apimachinery `wait.Backoff`, `golang.org/x/time/rate`).
//!
//! * [`TokenBucket`]: a reservation-style token bucket (like `rate.Limiter.Reserve`): every call takes
//!   one token, possibly going into debt, and returns how long the caller must wait. It starts full.
//! * [`ExponentialBackoff`]: jittered exponential backoff with the reflector's "reset after quiet
//!   period" rule (spec informer.md §1.1).
//!
//! Both use `tokio::time::Instant`, so tests drive them with paused time.

use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use tokio::time::Instant;

/// A token bucket of `burst` tokens refilled at `qps` tokens per second.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    // Why a mutex: the state is two numbers updated together; contention is one short critical section.
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// `qps > 0`, `burst >= 1` (a burst of 0 is raised to 1 so the bucket can ever grant).
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            state: Mutex::new(BucketState {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Takes one token and returns the delay after which the caller may proceed.
    pub fn reserve(&self) -> Duration {
        let now = Instant::now();
        let mut s = self.state.lock();
        let elapsed = now.saturating_duration_since(s.last).as_secs_f64();
        s.last = now;
        s.tokens = (s.tokens + elapsed * self.qps).min(self.burst);
        s.tokens -= 1.0;
        if s.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-s.tokens / self.qps)
        }
    }

    /// Takes a token only if one is available now (`rate.Limiter.Allow` / flowcontrol `TryAccept`).
    pub fn try_acquire(&self) -> bool {
        let now = Instant::now();
        let mut s = self.state.lock();
        let elapsed = now.saturating_duration_since(s.last).as_secs_f64();
        s.last = now;
        s.tokens = (s.tokens + elapsed * self.qps).min(self.burst);
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Takes one token and sleeps until it is granted.
    pub async fn acquire(&self) {
        let d = self.reserve();
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }
}

/// Jittered exponential backoff: step `n` returns `d_n + rand[0,1)·jitter·d_n` with
/// `d_0 = initial`, `d_{n+1} = min(d_n · factor, cap)`; the sequence restarts from `initial` when more
/// than `reset_after` elapsed since the last reset (client-go HEAD `backoffManager` rule).
#[derive(Debug)]
pub struct ExponentialBackoff {
    initial: Duration,
    cap: Duration,
    factor: f64,
    jitter: f64,
    reset_after: Duration,
    current: Duration,
    last_reset: Instant,
}

impl ExponentialBackoff {
    pub fn new(
        initial: Duration,
        cap: Duration,
        factor: f64,
        jitter: f64,
        reset_after: Duration,
    ) -> Self {
        ExponentialBackoff {
            initial,
            cap,
            factor,
            jitter,
            reset_after,
            current: initial,
            last_reset: Instant::now(),
        }
    }

    /// The reflector's backoff (spec informer.md §1.1; client-go `reflector.go`
    /// `NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)`).
    pub fn reflector() -> Self {
        Self::new(
            Duration::from_millis(800),
            Duration::from_secs(30),
            2.0,
            1.0,
            Duration::from_secs(120),
        )
    }

    /// The un-jittered delay the next call to [`next`](Self::next) would be based on.
    pub fn peek_base(&self) -> Duration {
        if Instant::now().saturating_duration_since(self.last_reset) > self.reset_after {
            self.initial
        } else {
            self.current
        }
    }

    /// Returns the next delay and advances the sequence.
    pub fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if now.saturating_duration_since(self.last_reset) > self.reset_after {
            self.current = self.initial;
            self.last_reset = now;
        }
        let base = self.current;
        self.current = base.mul_f64(self.factor).min(self.cap);
        if self.jitter > 0.0 {
            let r: f64 = rand::thread_rng().gen_range(0.0..1.0);
            base + base.mul_f64(r * self.jitter)
        } else {
            base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bucket_starts_full_then_spaces_at_rate() {
        let b = TokenBucket::new(10.0, 100);
        for _ in 0..100 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        let d = b.reserve();
        assert!((d.as_secs_f64() - 0.1).abs() < 1e-6, "{d:?}");
        let d = b.reserve();
        assert!((d.as_secs_f64() - 0.2).abs() < 1e-6, "{d:?}");
        tokio::time::advance(Duration::from_secs(1)).await;
        // 10 tokens refilled, debt was 2 → 8 available.
        for _ in 0..8 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        assert!(b.reserve() > Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn reflector_backoff_sequence_and_reset() {
        let mut b = ExponentialBackoff::reflector();
        let expect = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0];
        for e in expect {
            let d = b.next_delay().as_secs_f64();
            assert!(
                d >= e - 1e-9 && d < 2.0 * e + 1e-9,
                "{d} not in [{e}, {})",
                2.0 * e
            );
        }
        tokio::time::advance(Duration::from_secs(121)).await;
        let d = b.next_delay().as_secs_f64();
        assert!((0.8..1.6).contains(&d), "reset after 2 min: {d}");
    }
}
