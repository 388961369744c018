//! Work-queue metrics (client-go `util/workqueue/metrics.go`): depth, adds, queue latency (time
//! from add to get), work duration (get to done), retries, unfinished work and the longest running
//! processor. Kept in the queue's own lock; `metrics()` returns a snapshot.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// Running sum / count / max of a duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurationStats {
    pub count: u64,
    pub total: Duration,
    pub max: Duration,
}

impl DurationStats {
    fn observe(&mut self, d: Duration) {
        self.count += 1;
        self.total += d;
        self.max = self.max.max(d);
    }
    /// Mean, or zero with no observations.
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            Duration::ZERO
        } else {
            self.total / u32::try_from(self.count).unwrap_or(u32::MAX)
        }
    }
}

/// A point-in-time snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueMetrics {
    /// Items queued (ready, not processing).
    pub depth: usize,
    /// Items waiting for an `add_after` deadline.
    pub waiting: usize,
    /// Accepted adds (deduplicated adds are not counted).
    pub adds: u64,
    /// `add_after` / `add_rate_limited` calls.
    pub retries: u64,
    pub queue_latency: DurationStats,
    pub work_duration: DurationStats,
    /// Sum of the running time of items currently being processed.
    pub unfinished_work: Duration,
    pub longest_running_processor: Duration,
}

pub(crate) struct MetricsState<T> {
    pub adds: u64,
    pub retries: u64,
    pub queued_at: HashMap<T, Instant>,
    pub started_at: HashMap<T, Instant>,
    pub queue_latency: DurationStats,
    pub work_duration: DurationStats,
}

impl<T> Default for MetricsState<T> {
    fn default() -> Self {
        MetricsState {
            adds: 0,
            retries: 0,
            queued_at: HashMap::new(),
            started_at: HashMap::new(),
            queue_latency: DurationStats::default(),
            work_duration: DurationStats::default(),
        }
    }
}

impl<T: Eq + Hash + Clone> MetricsState<T> {
    pub fn got(&mut self, item: &T) {
        let now = Instant::now();
        if let Some(t) = self.queued_at.remove(item) {
            self.queue_latency.observe(now.saturating_duration_since(t));
        }
        self.started_at.insert(item.clone(), now);
    }

    pub fn done(&mut self, item: &T) {
        if let Some(t) = self.started_at.remove(item) {
            self.work_duration
                .observe(Instant::now().saturating_duration_since(t));
        }
    }

    pub fn snapshot(&self, depth: usize, waiting: usize) -> QueueMetrics {
        let now = Instant::now();
        let running = self
            .started_at
            .values()
            .map(|t| now.saturating_duration_since(*t));
        let (mut sum, mut max) = (Duration::ZERO, Duration::ZERO);
        for d in running {
            sum += d;
            max = max.max(d);
        }
        QueueMetrics {
            depth,
            waiting,
            adds: self.adds,
            retries: self.retries,
            queue_latency: self.queue_latency,
            work_duration: self.work_duration,
            unfinished_work: sum,
            longest_running_processor: max,
        }
    }
}
