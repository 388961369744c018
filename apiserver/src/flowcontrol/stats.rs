//! The `apiserver_flowcontrol_*` metrics (upstream `util/flowcontrol/metrics`), kept in atomics
//! beside the objects they describe and rendered into `/metrics`.
//!
//! Per flow (labels `priority_level`, `flow_schema`): requests in queue and executing, seats
//! executing, dispatched and rejected (`reason`: `queue-full`, `concurrency-limit`, `time-out`,
//! `cancelled`) totals, and the queue wait histogram (`execute`: whether the request then ran).
//! Per priority level: its nominal, current, lower and upper limits in seats. Label sets are
//! bounded by the configured objects; the stats of a flow schema or level outlive its
//! configuration (counters never go backwards while the server runs).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Upstream's buckets of `apiserver_flowcontrol_request_wait_duration_seconds`.
const WAIT_BUCKETS: [f64; 13] = [
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];

/// Rejection reasons, in label order.
pub const REASONS: [&str; 4] = ["queue-full", "concurrency-limit", "time-out", "cancelled"];

#[derive(Debug, Default)]
struct WaitHistogram {
    buckets: [AtomicU64; WAIT_BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl WaitHistogram {
    /// One shared counter per observation (its own bucket; the cumulative `le` counts are summed
    /// when rendered): every request of a schema, on every core, bumps these.
    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = WAIT_BUCKETS.partition_point(|b| *b < secs);
        if let Some(bucket) = self.buckets.get(i) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        if !d.is_zero() {
            let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        }
    }
}

/// The counters of one (priority level, flow schema) pair.
#[derive(Debug, Default)]
pub struct FlowStats {
    pub level: String,
    pub schema: String,
    inqueue: AtomicI64,
    executing: AtomicI64,
    executing_seats: AtomicI64,
    dispatched: AtomicU64,
    rejected: [AtomicU64; REASONS.len()],
    /// `[execute=false, execute=true]`.
    wait: [WaitHistogram; 2],
}

impl FlowStats {
    pub fn new(level: &str, schema: &str) -> Self {
        FlowStats {
            level: level.to_string(),
            schema: schema.to_string(),
            ..Default::default()
        }
    }

    pub fn queued(&self, delta: i64) {
        self.inqueue.fetch_add(delta, Ordering::Relaxed);
    }

    /// A request starts (`+1`, its seats) or ends (`-1`, minus its seats) executing.
    pub fn executing(&self, delta: i64, seats: i64) {
        self.executing.fetch_add(delta, Ordering::Relaxed);
        self.executing_seats.fetch_add(seats, Ordering::Relaxed);
    }

    /// A request was dispatched after waiting `waited`.
    pub fn dispatched(&self, waited: Duration) {
        self.dispatched.fetch_add(1, Ordering::Relaxed);
        self.wait[1].observe(waited);
    }

    /// A request was rejected for `reason` (an index in [`REASONS`]) after waiting `waited`.
    pub fn rejected(&self, reason: &str, waited: Duration) {
        if let Some(i) = REASONS.iter().position(|r| *r == reason) {
            self.rejected[i].fetch_add(1, Ordering::Relaxed);
        }
        self.wait[0].observe(waited);
    }

    /// Requests rejected so far for `reason`.
    pub fn rejected_total(&self, reason: &str) -> u64 {
        REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.rejected[i].load(Ordering::Relaxed))
    }

    /// Requests dispatched so far.
    pub fn dispatched_total(&self) -> u64 {
        self.dispatched.load(Ordering::Relaxed)
    }
}

/// The limits of one level, in seats.
#[derive(Debug, Default)]
pub struct LevelGauges {
    pub nominal: AtomicI64,
    pub current: AtomicI64,
    pub lower: AtomicI64,
    pub upper: AtomicI64,
}

/// A metric's name, help and reader.
type Metric<T> = (&'static str, &'static str, fn(&T) -> i64);

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Renders every metric of `flows` and `levels` (name, gauges).
pub fn render(
    out: &mut String,
    flows: &[std::sync::Arc<FlowStats>],
    levels: &[(String, std::sync::Arc<LevelGauges>)],
) {
    let label = |f: &FlowStats| {
        format!(
            "flow_schema=\"{}\",priority_level=\"{}\"",
            f.schema, f.level
        )
    };
    let gauges: [Metric<FlowStats>; 3] = [
        (
            "apiserver_flowcontrol_current_inqueue_requests",
            "Requests waiting in queues.",
            |f| f.inqueue.load(Ordering::Relaxed),
        ),
        (
            "apiserver_flowcontrol_current_executing_requests",
            "Requests executing.",
            |f| f.executing.load(Ordering::Relaxed),
        ),
        (
            "apiserver_flowcontrol_current_executing_seats",
            "Seats occupied by executing requests.",
            |f| f.executing_seats.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, get) in gauges {
        header(out, name, "gauge", help);
        for f in flows {
            let _ = writeln!(out, "{name}{{{}}} {}", label(f), get(f));
        }
    }
    let name = "apiserver_flowcontrol_dispatched_requests_total";
    header(out, name, "counter", "Requests released for service.");
    for f in flows {
        let _ = writeln!(
            out,
            "{name}{{{}}} {}",
            label(f),
            f.dispatched.load(Ordering::Relaxed)
        );
    }
    let name = "apiserver_flowcontrol_rejected_requests_total";
    header(out, name, "counter", "Requests rejected, by reason.");
    for f in flows {
        for (i, reason) in REASONS.iter().enumerate() {
            let n = f.rejected[i].load(Ordering::Relaxed);
            if n > 0 {
                let _ = writeln!(out, "{name}{{{},reason=\"{reason}\"}} {n}", label(f));
            }
        }
    }
    let name = "apiserver_flowcontrol_request_wait_duration_seconds";
    header(
        out,
        name,
        "histogram",
        "Time requests spent waiting in queue.",
    );
    for f in flows {
        for (e, execute) in ["false", "true"].iter().enumerate() {
            let h = &f.wait[e];
            let count = h.count.load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            let l = format!("execute=\"{execute}\",{}", label(f));
            let mut cumulative = 0;
            for (i, b) in WAIT_BUCKETS.iter().enumerate() {
                cumulative += h.buckets[i].load(Ordering::Relaxed);
                let _ = writeln!(out, "{name}_bucket{{{l},le=\"{b}\"}} {cumulative}");
            }
            // Observations land between the loads: `+Inf` and `_count` never below a bucket.
            let count = count.max(cumulative);
            let _ = writeln!(out, "{name}_bucket{{{l},le=\"+Inf\"}} {count}");
            let sum = h.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "{name}_sum{{{l}}} {sum}\n{name}_count{{{l}}} {count}");
        }
    }
    let per_level: [Metric<LevelGauges>; 4] = [
        (
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats of the priority level.",
            |g| g.nominal.load(Ordering::Relaxed),
        ),
        (
            "apiserver_flowcontrol_current_limit_seats",
            "Current derived number of execution seats of the priority level.",
            |g| g.current.load(Ordering::Relaxed),
        ),
        (
            "apiserver_flowcontrol_lower_limit_seats",
            "Configured lower bound on the seats of the priority level.",
            |g| g.lower.load(Ordering::Relaxed),
        ),
        (
            "apiserver_flowcontrol_upper_limit_seats",
            "Configured upper bound on the seats of the priority level.",
            |g| g.upper.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, get) in per_level {
        header(out, name, "gauge", help);
        for (level, g) in levels {
            let _ = writeln!(out, "{name}{{priority_level=\"{level}\"}} {}", get(g));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn renders_flow_and_level_metrics() {
        let f = Arc::new(FlowStats::new("global-default", "global-default"));
        f.queued(1);
        f.dispatched(Duration::from_millis(3));
        f.executing(1, 2);
        f.rejected("queue-full", Duration::from_secs(1));
        let g = Arc::new(LevelGauges::default());
        g.nominal.store(49, Ordering::Relaxed);
        let mut out = String::new();
        render(&mut out, &[f], &[("global-default".to_string(), g)]);
        let flow = "flow_schema=\"global-default\",priority_level=\"global-default\"";
        for line in [
            format!("apiserver_flowcontrol_current_inqueue_requests{{{flow}}} 1"),
            format!("apiserver_flowcontrol_current_executing_seats{{{flow}}} 2"),
            format!("apiserver_flowcontrol_dispatched_requests_total{{{flow}}} 1"),
            format!("apiserver_flowcontrol_rejected_requests_total{{{flow},reason=\"queue-full\"}} 1"),
            format!("apiserver_flowcontrol_request_wait_duration_seconds_bucket{{execute=\"true\",{flow},le=\"0.005\"}} 1"),
            "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"global-default\"} 49".to_string(),
        ] {
            assert!(out.contains(&line), "missing {line} in\n{out}");
        }
    }
}
