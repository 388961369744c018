//! The rate-limiting queue controllers use (client-go `rate_limiting_queue.go`; spec informer.md
//! §5.4–§5.5): a [`WorkQueue`] plus a [`RateLimiter`]. Cloning shares the queue, so N workers each
//! hold a clone and run the canonical loop: `get` → sync → `forget` on success or
//! `add_rate_limited` on failure → `done`.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use super::metrics::QueueMetrics;
use super::queue::WorkQueue;
use super::rate_limiter::{default_controller_rate_limiter, RateLimiter};

/// A shared, rate-limited work queue.
pub struct RateLimitingQueue<T: Clone + Eq + Hash + Send + Sync + 'static> {
    queue: Arc<WorkQueue<T>>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        RateLimitingQueue {
            queue: self.queue.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> RateLimitingQueue<T> {
    pub fn new(name: &str, rl: impl RateLimiter<T>) -> Self {
        RateLimitingQueue {
            queue: Arc::new(WorkQueue::new(name)),
            limiter: Arc::new(rl),
        }
    }

    /// With `DefaultControllerRateLimiter` (5 ms → 1000 s per item, 10 qps / burst 100 overall).
    pub fn with_default_controller_rate_limiter(name: &str) -> Self {
        Self::new(name, default_controller_rate_limiter())
    }

    pub fn name(&self) -> &str {
        self.queue.name()
    }
    pub fn add(&self, item: T) {
        self.queue.add(item)
    }
    pub fn add_after(&self, item: T, d: Duration) {
        self.queue.add_after(item, d)
    }
    /// `add_after(item, limiter.when(item))`: records a failure.
    pub fn add_rate_limited(&self, item: T) {
        let d = self.limiter.when(&item);
        self.queue.add_after(item, d)
    }
    /// Clears the item's failure history (not its queue state).
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item)
    }
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }
    /// `None` after shutdown once queued items are drained.
    pub async fn get(&self) -> Option<T> {
        self.queue.get().await
    }
    pub fn done(&self, item: &T) {
        self.queue.done(item)
    }
    pub fn len(&self) -> usize {
        self.queue.len()
    }
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
    pub fn shut_down(&self) {
        self.queue.shut_down()
    }
    /// Shuts down and waits until every item handed out is `done`.
    pub async fn shut_down_with_drain(&self) {
        self.queue.shut_down_with_drain().await
    }
    pub fn shutting_down(&self) -> bool {
        self.queue.shutting_down()
    }
    pub fn metrics(&self) -> QueueMetrics {
        self.queue.metrics()
    }
}
