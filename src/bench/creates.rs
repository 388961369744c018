//! `minik8s bench creates`: durable creates/s over HTTP against the on-disk store (sled, group
//! commit), at several writer counts, with every answer that is not a 201 counted by kind.
//!
//! Each run starts a fresh control plane (no controllers), then `writers` tasks create unique
//! 1 KiB ConfigMaps in a closed loop for the load time. A 429 (priority and fairness shedding) is
//! counted and retried after a 10 ms pause, as a client honouring a short `Retry-After` would;
//! other non-2xx answers and transport errors are counted and not retried. The issue-17 goal: no
//! 429 at 64 and 256 writers and at least 90 % of the 16-writer creates/s. Every loop is bounded
//! by a count and a deadline; traffic is loopback only.
//!
//! After each run it prints where a create's time went: the round trip the writers saw, the
//! apiserver's own mean (`apiserver_request_duration_seconds`), and of that the mean wait for a
//! priority-and-fairness seat (`apiserver_flowcontrol_request_wait_duration_seconds`).
//!
//! With `--etcd-gateway URL`, each run is followed by etcd's own put rate through its JSON gateway
//! at the same writer count (`etcd_gateway`), and the ratio of the two is printed (issue 17:
//! durable creates at least twice etcd's puts/s).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{configmap, in_memory_config, Error};
use crate::control_plane::{ControlPlane, ControlPlaneConfig, Storage};

/// Retries of one create answered 429.
const MAX_RETRIES: usize = 100;

/// What one run counted.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) created: AtomicU64,
    /// 429 answers (each retried).
    pub(super) too_many: AtomicU64,
    /// Creates still answered 429 after [`MAX_RETRIES`]: not created.
    pub(super) gave_up: AtomicU64,
    pub(super) other_status: AtomicU64,
    pub(super) transport: AtomicU64,
}

impl Counts {
    /// The creates that did not happen, by kind.
    pub(super) fn failures(&self) -> String {
        format!(
            "429: {} retried, {} given up; other non-2xx: {}, transport errors: {}",
            self.too_many.load(Ordering::Relaxed),
            self.gave_up.load(Ordering::Relaxed),
            self.other_status.load(Ordering::Relaxed),
            self.transport.load(Ordering::Relaxed),
        )
    }
}

/// `writers` closed-loop writers POSTing 1 KiB ConfigMaps (named by `name(writer, i)`) to `url`
/// for `load` ([`super::closed_loop`]): what happened, and the seconds taken. A 429 is retried
/// after 10 ms, at most [`MAX_RETRIES`] times.
pub(super) async fn closed_loop(
    http: &reqwest::Client,
    url: &str,
    writers: usize,
    load: Duration,
    name: impl Fn(usize, u64) -> String + Clone + Send + Sync + 'static,
) -> (Arc<Counts>, f64) {
    let payload: Arc<str> = "x".repeat(1024).into();
    let counts = Arc::new(Counts::default());
    let (http, url) = (http.clone(), Arc::<str>::from(url));
    let op = {
        let counts = counts.clone();
        move |w: usize, i: u64| {
            let (http, url, payload, counts) =
                (http.clone(), url.clone(), payload.clone(), counts.clone());
            let body = configmap(&name(w, i), &payload);
            async move {
                for _ in 0..MAX_RETRIES {
                    let counter = match http.post(&*url).json(&body).send().await {
                        Ok(r) if r.status().as_u16() == 201 => &counts.created,
                        Ok(r) if r.status().as_u16() == 429 => {
                            counts.too_many.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                        Ok(_) => &counts.other_status,
                        Err(_) => &counts.transport,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                counts.gave_up.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    };
    let (_, _, took) = super::closed_loop(writers, load, op).await;
    (counts, took.as_secs_f64())
}

/// Runs the benchmark at each of `writer_counts`, `load` each.
/// `secure`: against a secure server (HTTPS, the admin's client certificate, RBAC per request).
/// `audit_log`: with an audit log there, every request audited at `Metadata`.
pub async fn creates(
    writer_counts: &[usize],
    load: Duration,
    secure: bool,
    audit_log: Option<&std::path::Path>,
    etcd_gateway: Option<&str>,
) -> Result<(), Error> {
    for &writers in writer_counts {
        let writers = writers.max(1);
        let creates = run(writers, load, secure, audit_log).await?;
        if let Some(url) = etcd_gateway {
            let prefix = format!("/bench-creates/{}/{writers}/", std::process::id());
            let etcd = super::etcd_gateway::put_rate(url, &prefix, writers, load, 1024).await?;
            let puts = etcd.per_second();
            println!(
                "etcd JSON gateway: {writers:>3} writers, 1 KiB values: {puts:.0} puts/s ({} in {:.1} s, {} errors); creates / puts = {:.2}",
                etcd.puts,
                etcd.took.as_secs_f64(),
                etcd.errors,
                if puts > 0.0 { creates / puts } else { f64::INFINITY }
            );
        }
    }
    Ok(())
}

/// The policy of an audited run: everything at `Metadata`.
const METADATA_POLICY: &str =
    "{\"apiVersion\":\"audit.k8s.io/v1\",\"kind\":\"Policy\",\"rules\":[{\"level\":\"Metadata\"}]}";

async fn run(
    writers: usize,
    load: Duration,
    secure: bool,
    audit_log: Option<&std::path::Path>,
) -> Result<f64, Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::Failed(e.to_string()))?;
    let mut config = ControlPlaneConfig {
        storage: Storage::Dir(dir.path().to_path_buf()),
        kubeconfig: Some(dir.path().join("kubeconfig")),
        ..in_memory_config()
    };
    if secure {
        config.apiserver.secure = Some(apiserver::config::SecureConfig::default());
    }
    if let Some(path) = audit_log {
        let policy = apiserver::audit::Policy::from_bytes(METADATA_POLICY.as_bytes())
            .map_err(|e| Error::Failed(e.to_string()))?;
        config.apiserver.audit = apiserver::audit::AuditOptions {
            log_path: Some(path.to_path_buf()),
            policy: Some(policy),
            ..Default::default()
        };
    }
    let plane = ControlPlane::start(config).await?;
    let url = format!("{}/api/v1/namespaces/default/configmaps", plane.url());
    let http = super::admin_http(
        &plane,
        reqwest::Client::builder().pool_max_idle_per_host(writers),
    )?;
    let (counts, secs) = closed_loop(&http, &url, writers, load, move |w, i| {
        format!("w{writers}-{w}-{i}")
    })
    .await;
    let n = counts.created.load(Ordering::Relaxed);
    let metrics = http
        .get(format!("{}/metrics", plane.url()))
        .send()
        .await?
        .text()
        .await?;
    let audited = match audit_log {
        Some(_) => {
            // Events the writer could not keep up with are dropped and counted, never waited for.
            let count = |name: &str| {
                metrics
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map_or("?", str::trim)
                    .to_string()
            };
            format!(
                ", audit log at Metadata ({} events, {} dropped)",
                count("apiserver_audit_event_total "),
                count("apiserver_audit_error_total{plugin=\"buffered\"} ")
            )
        }
        None => String::new(),
    };
    let rate = n as f64 / secs;
    println!(
        "creates: {writers:>3} writers, 1 KiB ConfigMaps, durable (sled, group commit){audited}: {rate:.0} creates/s ({n} in {secs:.1} s; {})",
        counts.failures()
    );
    let time = Breakdown::of(&metrics);
    println!(
        "  where a create's time goes: {:.2} ms round trip at the client, {:.2} ms in the apiserver, of which {:.2} ms waiting for a priority-and-fairness seat",
        if n > 0 { writers as f64 * secs / n as f64 * 1e3 } else { 0.0 },
        time.server_seconds * 1e3,
        time.seat_wait_seconds * 1e3,
    );
    plane.shutdown().await;
    Ok(rate)
}

/// Mean times of the run's ConfigMap creates, from the server's own histograms: the request's
/// (`apiserver_request_duration_seconds`, POST configmaps) and its wait for a seat
/// (`apiserver_flowcontrol_request_wait_duration_seconds` of executed requests, every flow).
#[derive(Debug, Default, PartialEq)]
struct Breakdown {
    server_seconds: f64,
    seat_wait_seconds: f64,
}

impl Breakdown {
    fn of(metrics: &str) -> Self {
        let (mut server, mut wait) = ((0.0, 0.0), (0.0, 0.0));
        for line in metrics.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let create =
                series.contains("verb=\"POST\"") && series.contains("resource=\"configmaps\"");
            let executed = series.contains("execute=\"true\"");
            let sums = match series.split_once('{').map_or(series, |(name, _)| name) {
                "apiserver_request_duration_seconds_sum" if create => &mut server.0,
                "apiserver_request_duration_seconds_count" if create => &mut server.1,
                "apiserver_flowcontrol_request_wait_duration_seconds_sum" if executed => {
                    &mut wait.0
                }
                "apiserver_flowcontrol_request_wait_duration_seconds_count" if executed => {
                    &mut wait.1
                }
                _ => continue,
            };
            *sums += value;
        }
        let mean = |(sum, count): (f64, f64)| if count > 0.0 { sum / count } else { 0.0 };
        Self {
            server_seconds: mean(server),
            seat_wait_seconds: mean(wait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakdown_takes_the_means_of_configmap_creates_and_of_executed_waits() {
        let metrics = "\
apiserver_request_duration_seconds_sum{verb=\"POST\",resource=\"configmaps\"} 3
apiserver_request_duration_seconds_count{verb=\"POST\",resource=\"configmaps\"} 1000
apiserver_request_duration_seconds_sum{verb=\"GET\",resource=\"configmaps\"} 50
apiserver_request_duration_seconds_count{verb=\"GET\",resource=\"configmaps\"} 2
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute=\"true\",flow_schema=\"global-default\",priority_level=\"global-default\"} 0.5
apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"true\",flow_schema=\"global-default\",priority_level=\"global-default\"} 990
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute=\"true\",flow_schema=\"exempt\",priority_level=\"exempt\"} 0
apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"true\",flow_schema=\"exempt\",priority_level=\"exempt\"} 10
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute=\"false\",flow_schema=\"global-default\",priority_level=\"global-default\"} 99
apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"false\",flow_schema=\"global-default\",priority_level=\"global-default\"} 1
";
        let time = Breakdown::of(metrics);
        assert!((time.server_seconds - 0.003).abs() < 1e-12, "{time:?}");
        assert!((time.seat_wait_seconds - 0.0005).abs() < 1e-12, "{time:?}");
        assert_eq!(Breakdown::of("# nothing here\n"), Breakdown::default());
    }
}
