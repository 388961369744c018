//! Prometheus metrics: request counts and latencies by verb, resource and code, current
//! watchers, requests shed by the in-flight limit, and the store revision.
//!
//! Label sets are bounded: verbs are a fixed set, resources come from the resource table (unknown
//! paths are counted under `""`), codes are HTTP codes. Histograms use fixed buckets.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// Latency buckets in seconds (apiserver_request_duration_seconds uses a similar spread).
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 60.0,
];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    total: u64,
}

/// Process-local metric registry of one apiserver.
#[derive(Default)]
pub struct Metrics {
    /// (verb, resource, code) -> count. Guarded by a mutex: one short critical section per request.
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    /// (verb, resource) -> latency histogram.
    latencies: Mutex<BTreeMap<(String, String), Histogram>>,
    watchers: AtomicI64,
    rejected: AtomicU64,
    revision: AtomicU64,
    /// Terminal authorization decisions by authorizer (in [`crate::authz::Authorizer::ALL`]'s
    /// order) and decision (allowed, denied).
    authorization: [[AtomicU64; 2]; crate::authz::Authorizer::ALL.len()],
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Decrements the watcher gauge when dropped.
#[derive(Debug)]
pub struct WatcherGuard<'a>(&'a Metrics);

impl Drop for WatcherGuard<'_> {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Records one finished request.
    pub fn record_request(&self, verb: &str, resource: &str, code: u16, elapsed: Duration) {
        *self
            .requests
            .lock()
            .entry((verb.to_string(), resource.to_string(), code))
            .or_default() += 1;
        let secs = elapsed.as_secs_f64();
        let mut lat = self.latencies.lock();
        let h = lat
            .entry((verb.to_string(), resource.to_string()))
            .or_default();
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                h.counts[i] += 1;
            }
        }
        h.sum += secs;
        h.total += 1;
    }

    /// Counts a terminal authorization decision of `by` (none: every authorizer had no opinion,
    /// a denial counted under RBAC, the last of the chain).
    pub fn record_authorization(&self, by: crate::authz::Authorizer, allowed: bool) {
        self.authorization[by as usize][usize::from(!allowed)].fetch_add(1, Ordering::Relaxed);
    }

    /// Terminal decisions of `by` so far, allowed or denied.
    pub fn authorizations(&self, by: crate::authz::Authorizer, allowed: bool) -> u64 {
        self.authorization[by as usize][usize::from(!allowed)].load(Ordering::Relaxed)
    }

    /// Counts a request shed with 429.
    pub fn record_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a watcher for as long as the guard lives.
    pub fn watcher(&self) -> WatcherGuard<'_> {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        WatcherGuard(self)
    }

    /// Current number of watchers.
    pub fn watchers(&self) -> i64 {
        self.watchers.load(Ordering::Relaxed)
    }

    /// Publishes the latest store revision seen.
    pub fn set_revision(&self, rev: u64) {
        self.revision.fetch_max(rev, Ordering::Relaxed);
    }

    /// Renders the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Requests by verb, resource and HTTP code.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        for ((verb, res, code), n) in self.requests.lock().iter() {
            let _ = writeln!(
                out,
                "apiserver_request_total{{verb=\"{verb}\",resource=\"{res}\",code=\"{code}\"}} {n}"
            );
        }
        out.push_str(
            "# HELP apiserver_request_duration_seconds Request latency by verb and resource.\n",
        );
        out.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
        for ((verb, res), h) in self.latencies.lock().iter() {
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "apiserver_request_duration_seconds_bucket{{verb=\"{verb}\",resource=\"{res}\",le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_bucket{{verb=\"{verb}\",resource=\"{res}\",le=\"+Inf\"}} {}",
                h.total
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_sum{{verb=\"{verb}\",resource=\"{res}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_count{{verb=\"{verb}\",resource=\"{res}\"}} {}",
                h.total
            );
        }
        let _ = writeln!(
            out,
            "# HELP apiserver_registered_watchers Open watch streams.\n# TYPE apiserver_registered_watchers gauge\napiserver_registered_watchers {}",
            self.watchers()
        );
        let _ = writeln!(
            out,
            "# HELP apiserver_dropped_requests_total Requests shed by the in-flight limit.\n# TYPE apiserver_dropped_requests_total counter\napiserver_dropped_requests_total {}",
            self.rejected.load(Ordering::Relaxed)
        );
        out.push_str("# HELP apiserver_authorization_decisions_total Terminal decisions by authorizer type, name and decision.\n# TYPE apiserver_authorization_decisions_total counter\n");
        for by in crate::authz::Authorizer::ALL {
            for (allowed, decision) in [(true, "allowed"), (false, "denied")] {
                let _ = writeln!(
                    out,
                    "apiserver_authorization_decisions_total{{type=\"{}\",name=\"{}\",decision=\"{decision}\"}} {}",
                    by.kind(),
                    by.name(),
                    self.authorizations(by, allowed)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP process_max_fds Maximum number of open file descriptors.\n# TYPE process_max_fds gauge\nprocess_max_fds {}",
            crate::fdlimit::current()
        );
        let (cpu, resident) = process_usage();
        let _ = writeln!(
            out,
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {cpu}"
        );
        let _ = writeln!(
            out,
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {resident}"
        );
        let _ = writeln!(
            out,
            "# HELP apiserver_storage_revision Latest store revision observed.\n# TYPE apiserver_storage_revision gauge\napiserver_storage_revision {}",
            self.revision.load(Ordering::Relaxed)
        );
        out
    }
}

/// The process's CPU time (user and system, seconds) and resident set size (bytes), as
/// Prometheus' process collector exports them (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, which a kube-apiserver serves too): what a benchmark of another
/// process reads to tell the server's own cost. Zero where the system does not say.
fn process_usage() -> (f64, u64) {
    use nix::sys::resource::{getrusage, UsageWho};
    let cpu = getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            secs(u.user_time()) + secs(u.system_time())
        })
        .unwrap_or(0.0);
    // `statm`'s second field: resident pages.
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096) as u64;
    (cpu, pages * page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts() {
        let m = Metrics::default();
        m.record_request("LIST", "pods", 200, Duration::from_millis(3));
        let _g = m.watcher();
        let text = m.render();
        assert!(text
            .contains("apiserver_request_total{verb=\"LIST\",resource=\"pods\",code=\"200\"} 1"));
        assert!(text.contains("apiserver_registered_watchers 1"));
    }

    /// The process collector's two series, with this process's figures: some CPU spent, and a
    /// resident size between a page and this machine's memory.
    #[test]
    fn renders_the_process_cpu_and_memory() {
        let text = Metrics::default().render();
        let value = |name: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in {text}"));
            line[name.len() + 1..]
                .parse()
                .unwrap_or_else(|e| panic!("{line}: {e}"))
        };
        // Spend some CPU so the counter cannot read zero.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let cpu = value("process_cpu_seconds_total");
        assert!(cpu > 0.0, "{cpu}");
        let rss = value("process_resident_memory_bytes");
        assert!((4096.0..1e12).contains(&rss), "{rss}");
    }

    #[test]
    fn renders_authorization_decisions() {
        let m = Metrics::default();
        m.record_authorization(crate::authz::Authorizer::Rbac, false);
        m.record_authorization(crate::authz::Authorizer::Node, true);
        let text = m.render();
        assert!(text.contains(
            "apiserver_authorization_decisions_total{type=\"RBAC\",name=\"rbac\",decision=\"denied\"} 1"
        ));
        assert!(text.contains(
            "apiserver_authorization_decisions_total{type=\"Node\",name=\"node\",decision=\"allowed\"} 1"
        ));
        assert!(text.contains(
            "apiserver_authorization_decisions_total{type=\"PrivilegedGroups\",name=\"privileged-groups\",decision=\"allowed\"} 0"
        ));
    }
}
