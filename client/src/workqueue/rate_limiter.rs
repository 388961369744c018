//! Rate limiters deciding how long a failed item waits before it is retried (client-go
//! `util/workqueue/default_rate_limiters.go`; spec informer.md §5.3).
//!
//! Constants copied from client-go: `DefaultControllerRateLimiter` = max of per-item exponential
//! 5 ms → 1000 s and an overall token bucket of 10 qps, burst 100; `DefaultItemBasedRateLimiter`
//! = exponential 1 ms → 1000 s. Per-item state is bounded by the number of distinct failing items
//! and cleared by `forget`.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;

use crate::flowcontrol::TokenBucket;

/// Decides retry delays. `when` records a failure.
pub trait RateLimiter<T>: Send + Sync + 'static {
    /// Records a failure of `item` and returns how long to wait before retrying it.
    fn when(&self, item: &T) -> Duration;
    /// Clears `item`'s failure history (call on success).
    fn forget(&self, item: &T);
    /// Failures recorded for `item`.
    fn num_requeues(&self, item: &T) -> u32;
}

impl<T: 'static> RateLimiter<T> for Box<dyn RateLimiter<T>> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

/// `base × 2^failures`, capped at `max` (client-go `ItemExponentialFailureRateLimiter`).
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> ItemExponentialFailureRateLimiter<T> {
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> RateLimiter<T>
    for ItemExponentialFailureRateLimiter<T>
{
    fn when(&self, item: &T) -> Duration {
        let mut f = self.failures.lock();
        let n = f.entry(item.clone()).or_insert(0);
        let exp = *n;
        *n = n.saturating_add(1);
        // Computed in f64 so a huge exponent saturates to `max` instead of overflowing.
        let backoff = self.base.as_secs_f64() * 2f64.powi(i32::try_from(exp).unwrap_or(i32::MAX));
        if !backoff.is_finite() || backoff > self.max.as_secs_f64() {
            self.max
        } else {
            Duration::from_secs_f64(backoff)
        }
    }
    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

/// Overall token bucket (client-go `BucketRateLimiter`, golang `rate.Limiter.Reserve().Delay()`).
pub struct BucketRateLimiter {
    bucket: TokenBucket,
}

impl BucketRateLimiter {
    pub fn new(qps: f64, burst: u32) -> Self {
        BucketRateLimiter {
            bucket: TokenBucket::new(qps, burst),
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.bucket.reserve()
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// `fast` for the first `max_fast_attempts` failures, then `slow` (client-go `ItemFastSlowRateLimiter`).
pub struct ItemFastSlowRateLimiter<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    attempts: Mutex<HashMap<T, u32>>,
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> ItemFastSlowRateLimiter<T> {
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        ItemFastSlowRateLimiter {
            fast,
            slow,
            max_fast_attempts,
            attempts: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let mut a = self.attempts.lock();
        let n = a.entry(item.clone()).or_insert(0);
        *n = n.saturating_add(1);
        if *n <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }
    fn forget(&self, item: &T) {
        self.attempts.lock().remove(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.attempts.lock().get(item).copied().unwrap_or(0)
    }
}

/// The maximum of several limiters; every limiter records each failure (client-go `MaxOfRateLimiter`).
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T: 'static> MaxOfRateLimiter<T> {
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<T: 'static> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or(Duration::ZERO)
    }
    fn forget(&self, item: &T) {
        for l in &self.limiters {
            l.forget(item)
        }
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Caps another limiter's delay at `max_delay` (client-go `WithMaxWaitRateLimiter`).
pub struct WithMaxWaitRateLimiter<T> {
    limiter: Box<dyn RateLimiter<T>>,
    max_delay: Duration,
}

impl<T: 'static> WithMaxWaitRateLimiter<T> {
    pub fn new(limiter: Box<dyn RateLimiter<T>>, max_delay: Duration) -> Self {
        WithMaxWaitRateLimiter { limiter, max_delay }
    }
}

impl<T: 'static> RateLimiter<T> for WithMaxWaitRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_delay)
    }
    fn forget(&self, item: &T) {
        self.limiter.forget(item)
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }
}

/// client-go `DefaultControllerRateLimiter`: max(exponential 5 ms → 1000 s, bucket 10 qps / 100).
pub fn default_controller_rate_limiter<T: Eq + Hash + Clone + Send + Sync + 'static>(
) -> MaxOfRateLimiter<T> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

/// client-go `DefaultItemBasedRateLimiter`: exponential 1 ms → 1000 s.
pub fn default_item_based_rate_limiter<T: Eq + Hash + Clone + Send + Sync + 'static>(
) -> ItemExponentialFailureRateLimiter<T> {
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_constants() {
        let r = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        );
        let mut got = Vec::new();
        for _ in 0..20 {
            got.push(r.when(&"k"));
        }
        assert_eq!(got[0], Duration::from_millis(5));
        assert_eq!(got[1], Duration::from_millis(10));
        assert_eq!(got[2], Duration::from_millis(20));
        assert_eq!(
            got[17],
            Duration::from_millis(655_360),
            "18th failure = 5ms·2^17"
        );
        assert_eq!(got[18], Duration::from_secs(1000));
        assert_eq!(r.num_requeues(&"k"), 20);
        assert_eq!(r.when(&"other"), Duration::from_millis(5), "per item");
        r.forget(&"k");
        assert_eq!(r.num_requeues(&"k"), 0);
        assert_eq!(r.when(&"k"), Duration::from_millis(5));
        for _ in 0..10_000 {
            r.when(&"huge");
        }
        assert_eq!(r.when(&"huge"), Duration::from_secs(1000), "no overflow");
    }

    #[tokio::test(start_paused = true)]
    async fn default_controller_limiter_is_max_of_both() {
        let r = default_controller_rate_limiter::<String>();
        // 100 distinct items: bucket burst absorbs them, exponential gives 5 ms each.
        for i in 0..100 {
            assert_eq!(r.when(&format!("k{i}")), Duration::from_millis(5));
        }
        // The 101st overall failure waits for the bucket: 100 ms at 10 qps.
        let d = r.when(&"x".to_string());
        assert!((d.as_secs_f64() - 0.1).abs() < 1e-6, "{d:?}");
        assert_eq!(r.num_requeues(&"x".to_string()), 1);
        r.forget(&"x".to_string());
        assert_eq!(r.num_requeues(&"x".to_string()), 0);
    }

    #[test]
    fn fast_slow_and_max_wait() {
        let r = ItemFastSlowRateLimiter::new(Duration::from_millis(1), Duration::from_secs(5), 2);
        assert_eq!(r.when(&1), Duration::from_millis(1));
        assert_eq!(r.when(&1), Duration::from_millis(1));
        assert_eq!(r.when(&1), Duration::from_secs(5));
        let w = WithMaxWaitRateLimiter::new(
            Box::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_secs(1),
                Duration::from_secs(100),
            )),
            Duration::from_secs(3),
        );
        assert_eq!(w.when(&1), Duration::from_secs(1));
        assert_eq!(w.when(&1), Duration::from_secs(2));
        assert_eq!(w.when(&1), Duration::from_secs(3));
    }
}
