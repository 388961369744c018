//! Plain counters, readable by the binary without any metrics library.
//!
//! Counters are monotonic `AtomicU64`s bumped with `Relaxed` ordering (they are statistics, not
//! synchronization). Pod counts by phase are not tracked incrementally: a [`KubeletMetrics`]
//! snapshot counts them from the shared pod informer's cache, so they can never drift.

use std::sync::atomic::{AtomicU64, Ordering};

/// The live counters.
#[derive(Debug, Default)]
pub struct Counters {
    pub status_writes: AtomicU64,
    pub status_write_conflicts: AtomicU64,
    pub status_write_errors: AtomicU64,
    pub pod_deletes: AtomicU64,
    pub pod_delete_errors: AtomicU64,
    pub lease_renewals: AtomicU64,
    pub lease_errors: AtomicU64,
    pub node_status_writes: AtomicU64,
    pub node_status_errors: AtomicU64,
    pub ip_exhausted: AtomicU64,
}

impl Counters {
    /// Adds one to `c`.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// A point-in-time view of the fake kubelets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeletMetrics {
    /// Simulated nodes.
    pub nodes: u64,
    /// Nodes currently running (not stopped).
    pub nodes_running: u64,
    /// Event broadcasters running: one per node not removed.
    pub event_broadcasters: u64,
    /// Pods bound to our nodes, by `status.phase` (an absent phase counts as Pending).
    pub pods_pending: u64,
    pub pods_running: u64,
    pub pods_succeeded: u64,
    pub pods_failed: u64,
    pub pods_unknown: u64,
    /// Successful pod status writes.
    pub status_writes: u64,
    /// Pod status writes rejected with 409 (retried).
    pub status_write_conflicts: u64,
    /// Pod status writes that failed otherwise (retried with back-off).
    pub status_write_errors: u64,
    /// Final deletes (grace 0, UID precondition) sent and accepted.
    pub pod_deletes: u64,
    pub pod_delete_errors: u64,
    /// Successful lease renewals (including creations).
    pub lease_renewals: u64,
    pub lease_errors: u64,
    /// Node status posts.
    pub node_status_writes: u64,
    pub node_status_errors: u64,
    /// Pods that could not get an IP because their node's CIDR was full.
    pub ip_exhausted: u64,
    /// Pod keys waiting in the status-writer queue.
    pub queue_depth: u64,
}

impl KubeletMetrics {
    /// Fills the counter fields from `c`.
    pub fn with_counters(mut self, c: &Counters) -> Self {
        self.status_writes = Counters::get(&c.status_writes);
        self.status_write_conflicts = Counters::get(&c.status_write_conflicts);
        self.status_write_errors = Counters::get(&c.status_write_errors);
        self.pod_deletes = Counters::get(&c.pod_deletes);
        self.pod_delete_errors = Counters::get(&c.pod_delete_errors);
        self.lease_renewals = Counters::get(&c.lease_renewals);
        self.lease_errors = Counters::get(&c.lease_errors);
        self.node_status_writes = Counters::get(&c.node_status_writes);
        self.node_status_errors = Counters::get(&c.node_status_errors);
        self.ip_exhausted = Counters::get(&c.ip_exhausted);
        self
    }

    /// Counts one pod in its phase.
    pub fn count_phase(&mut self, phase: Option<&str>) {
        match phase {
            None | Some("Pending") => self.pods_pending += 1,
            Some("Running") => self.pods_running += 1,
            Some("Succeeded") => self.pods_succeeded += 1,
            Some("Failed") => self.pods_failed += 1,
            Some(_) => self.pods_unknown += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_reads_counters_and_phases() {
        let c = Counters::default();
        Counters::inc(&c.status_writes);
        Counters::inc(&c.status_writes);
        Counters::inc(&c.lease_renewals);
        let mut m = KubeletMetrics::default().with_counters(&c);
        for p in [
            None,
            Some("Pending"),
            Some("Running"),
            Some("Failed"),
            Some("Weird"),
        ] {
            m.count_phase(p);
        }
        assert_eq!(m.status_writes, 2);
        assert_eq!(m.lease_renewals, 1);
        assert_eq!(m.pods_pending, 2);
        assert_eq!(m.pods_running, 1);
        assert_eq!(m.pods_failed, 1);
        assert_eq!(m.pods_unknown, 1);
    }
}

impl KubeletMetrics {
    /// Prometheus text exposition (format 0.0.4) of these figures.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |name: &str, help: &str, kind: &str, samples: &[(&str, u64)]| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
            for (labels, v) in samples {
                out.push_str(&format!("{name}{labels} {v}\n"));
            }
        };
        line(
            "kubelet_fake_nodes",
            "Simulated nodes.",
            "gauge",
            &[("", self.nodes)],
        );
        line(
            "kubelet_fake_nodes_running",
            "Simulated nodes that are heartbeating.",
            "gauge",
            &[("", self.nodes_running)],
        );
        line(
            "kubelet_fake_pods",
            "Pods on simulated nodes by phase.",
            "gauge",
            &[
                ("{phase=\"Pending\"}", self.pods_pending),
                ("{phase=\"Running\"}", self.pods_running),
                ("{phase=\"Succeeded\"}", self.pods_succeeded),
                ("{phase=\"Failed\"}", self.pods_failed),
                ("{phase=\"Unknown\"}", self.pods_unknown),
            ],
        );
        line(
            "kubelet_fake_status_writes_total",
            "Pod status writes by result.",
            "counter",
            &[
                ("{result=\"ok\"}", self.status_writes),
                ("{result=\"conflict\"}", self.status_write_conflicts),
                ("{result=\"error\"}", self.status_write_errors),
            ],
        );
        line(
            "kubelet_fake_lease_renewals_total",
            "Lease renewals.",
            "counter",
            &[("", self.lease_renewals)],
        );
        line(
            "kubelet_fake_node_status_writes_total",
            "Node status posts.",
            "counter",
            &[("", self.node_status_writes)],
        );
        line(
            "kubelet_fake_queue_depth",
            "Pods waiting for a status write.",
            "gauge",
            &[("", self.queue_depth)],
        );
        out
    }
}

#[cfg(test)]
mod render_tests {
    use super::*;

    #[test]
    fn render_names_pods_by_phase_and_status_writes() {
        let m = KubeletMetrics {
            pods_running: 7,
            status_writes: 3,
            ..Default::default()
        };
        let text = m.render();
        assert!(
            text.contains("kubelet_fake_pods{phase=\"Running\"} 7\n"),
            "{text}"
        );
        assert!(
            text.contains("kubelet_fake_status_writes_total{result=\"ok\"} 3\n"),
            "{text}"
        );
    }
}
