//! Work queues for controllers (client-go `util/workqueue`; spec informer.md §5).
//!
//! * [`WorkQueue`]: dirty/processing sets (an item is never processed twice at once; an add during
//!   processing re-queues it after `done`) plus `add_after` delays.
//! * [`rate_limiter`]: per-item exponential, token bucket, max-of, fast/slow, max-wait.
//! * [`RateLimitingQueue`]: the queue controllers use.
//! * [`QueueMetrics`]: depth, adds, latency, work duration, retries.

pub mod metrics;
pub mod queue;
pub mod rate_limiter;
pub mod rate_limiting_queue;

pub use metrics::{DurationStats, QueueMetrics};
pub use queue::WorkQueue;
pub use rate_limiter::{
    default_controller_rate_limiter, default_item_based_rate_limiter, BucketRateLimiter,
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter,
    WithMaxWaitRateLimiter,
};
pub use rate_limiting_queue::RateLimitingQueue;

#[cfg(test)]
mod tests;
