//! Controller-manager metrics in the Prometheus text format (`/metrics` of the binary).
//!
//! Each controller registers its work queue (depth, adds, retries, latency: client-go's
//! `workqueue_*` family) and, for the replication controllers, its sync counters (syncs, errors,
//! pods created/deleted, and the concurrent-sync violation counter that must stay 0), and the
//! informers' count of undecodable objects they skipped. Rendering takes
//! snapshots; nothing here blocks a controller. The registry holds one entry per controller (bounded).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use client::{QueueMetrics, RateLimitingQueue};
use parking_lot::Mutex;

use crate::replication::controller::SyncMetrics;

struct Entry {
    controller: &'static str,
    queue: RateLimitingQueue<String>,
    sync: Option<Arc<SyncMetrics>>,
}

/// Metrics of every running controller.
#[derive(Default)]
pub struct ManagerMetrics {
    entries: Mutex<Vec<Entry>>,
}

impl std::fmt::Debug for ManagerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerMetrics")
            .field("controllers", &self.entries.lock().len())
            .finish()
    }
}

impl ManagerMetrics {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub(crate) fn register(
        &self,
        controller: &'static str,
        queue: RateLimitingQueue<String>,
        sync: Option<Arc<SyncMetrics>>,
    ) {
        let mut e = self.entries.lock();
        e.retain(|x| x.controller != controller);
        e.push(Entry {
            controller,
            queue,
            sync,
        });
    }

    /// The sync counters of a replication controller (`replicaset`, `replicationmanager`).
    pub fn sync_metrics(&self, controller: &str) -> Option<Arc<SyncMetrics>> {
        self.entries
            .lock()
            .iter()
            .find(|e| e.controller == controller)
            .and_then(|e| e.sync.clone())
    }

    /// A snapshot of one controller's work queue.
    pub fn queue_metrics(&self, controller: &str) -> Option<QueueMetrics> {
        self.entries
            .lock()
            .iter()
            .find(|e| e.controller == controller)
            .map(|e| e.queue.metrics())
    }

    /// Prometheus text exposition of every registered controller.
    pub fn render(&self) -> String {
        let entries: Vec<(&'static str, QueueMetrics, Option<Arc<SyncMetrics>>)> = self
            .entries
            .lock()
            .iter()
            .map(|e| (e.controller, e.queue.metrics(), e.sync.clone()))
            .collect();
        let mut out = String::new();
        let gauge = |out: &mut String, name: &str, help: &str, kind: &str, rows: &[(&str, f64)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (label, v) in rows {
                let _ = writeln!(out, "{name}{{name=\"{label}\"}} {v}");
            }
        };
        let q = |f: &dyn Fn(&QueueMetrics) -> f64| -> Vec<(&str, f64)> {
            entries.iter().map(|(n, m, _)| (*n, f(m))).collect()
        };
        gauge(
            &mut out,
            "workqueue_depth",
            "Current depth of the work queue.",
            "gauge",
            &q(&|m| m.depth as f64),
        );
        gauge(
            &mut out,
            "workqueue_waiting",
            "Items waiting for a delayed add.",
            "gauge",
            &q(&|m| m.waiting as f64),
        );
        gauge(
            &mut out,
            "workqueue_adds_total",
            "Adds handled by the work queue.",
            "counter",
            &q(&|m| m.adds as f64),
        );
        gauge(
            &mut out,
            "workqueue_retries_total",
            "Delayed and rate-limited adds.",
            "counter",
            &q(&|m| m.retries as f64),
        );
        gauge(
            &mut out,
            "workqueue_queue_duration_seconds_mean",
            "Mean time an item waited in the queue.",
            "gauge",
            &q(&|m| m.queue_latency.mean().as_secs_f64()),
        );
        gauge(
            &mut out,
            "workqueue_work_duration_seconds_mean",
            "Mean time processing an item took.",
            "gauge",
            &q(&|m| m.work_duration.mean().as_secs_f64()),
        );
        let s = |f: &dyn Fn(&SyncMetrics) -> u64| -> Vec<(&str, f64)> {
            entries
                .iter()
                .filter_map(|(n, _, s)| s.as_ref().map(|s| (*n, f(s) as f64)))
                .collect()
        };
        gauge(
            &mut out,
            "controller_syncs_total",
            "Completed syncs.",
            "counter",
            &s(&|m| m.syncs.load(Ordering::Relaxed)),
        );
        gauge(
            &mut out,
            "controller_sync_errors_total",
            "Syncs that failed and were requeued.",
            "counter",
            &s(&|m| m.errors.load(Ordering::Relaxed)),
        );
        gauge(
            &mut out,
            "controller_concurrent_syncs_total",
            "Times one key was synced by two workers at once (must be 0).",
            "counter",
            &s(&|m| m.concurrent_syncs.load(Ordering::Relaxed)),
        );
        gauge(
            &mut out,
            "controller_pods_created_total",
            "Pods created.",
            "counter",
            &s(&|m| m.creates.load(Ordering::Relaxed)),
        );
        gauge(
            &mut out,
            "controller_pods_deleted_total",
            "Pods deleted.",
            "counter",
            &s(&|m| m.deletes.load(Ordering::Relaxed)),
        );
        let _ = writeln!(
            out,
            "# HELP informer_undecodable_objects_total Objects of a list or watch that did not decode and were skipped.\n# TYPE informer_undecodable_objects_total counter\ninformer_undecodable_objects_total {}",
            client::rest::undecodable::undecodable_objects()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_queue_and_sync_families() {
        let m = ManagerMetrics::new();
        let q = RateLimitingQueue::<String>::with_default_controller_rate_limiter("replicaset");
        q.add("default/web".into());
        let sync = Arc::new(SyncMetrics::default());
        sync.creates.fetch_add(3, Ordering::Relaxed);
        m.register("replicaset", q, Some(sync));
        let text = m.render();
        assert!(
            text.contains("workqueue_depth{name=\"replicaset\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("controller_pods_created_total{name=\"replicaset\"} 3"),
            "{text}"
        );
        assert!(text.contains("# TYPE workqueue_adds_total counter"));
        assert!(text.contains("\ninformer_undecodable_objects_total "));
        assert_eq!(
            m.sync_metrics("replicaset")
                .map(|s| s.creates.load(Ordering::Relaxed)),
            Some(3)
        );
    }
}
