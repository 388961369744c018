//! `minik8s bench watch`: watch fan-out. `watchers` watch streams on the ConfigMaps of one
//! namespace while one writer creates ConfigMaps at a fixed rate; every created object must reach
//! every watcher.
//!
//! Each object carries its send time (µs since the Unix epoch) in its data; a reader takes it from
//! each event line and records the delivery latency ([`watch_readers`](super::watch_readers): in
//! this process, or in child processes when one process cannot hold both ends of every stream).
//!
//! The run fails loudly (an error, non-zero exit) when an event is missing, a stream ended early
//! (the server dropped a watcher that fell behind), an event came out of resourceVersion order, or
//! a write failed. Bounded: `rate × seconds` writes, every wait has a deadline.

use std::time::{Duration, Instant};

use super::watch_readers::{now_micros, Readers, Totals};
use super::{configmap, ms, percentile, Error};
use crate::control_plane::ControlPlane;

/// Longest wait for the watch streams to open, for a write, and for the last events after the
/// last write.
pub(super) const SETTLE: Duration = Duration::from_secs(60);

pub(super) async fn watch(watchers: usize, rate: u64, load: Duration) -> Result<(), Error> {
    let plane = ControlPlane::start(super::in_memory_config()).await?;
    let result = run(&plane, watchers, rate, load).await;
    plane.shutdown().await;
    result
}

async fn run(
    plane: &ControlPlane,
    watchers: usize,
    rate: u64,
    load: Duration,
) -> Result<(), Error> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()?;
    let url = format!("{}/api/v1/namespaces/default/configmaps", plane.url());
    let listed: serde_json::Value = http.get(&url).send().await?.json().await?;
    let rv = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let mut readers = Readers::open(&url, &rv, watchers)?;
    // A response head comes after the server registered the watch.
    readers.wait_opened(SETTLE).await?;

    let writes = write_at(&http, &url, rate, load).await;
    // Every object that exists was written by this run: a write answered with an error may still
    // have been stored, and then its event is due too.
    let listed: serde_json::Value = http.get(&url).send().await?.json().await?;
    let created = listed["items"].as_array().map_or(0, Vec::len) as u64;
    let expected = created * watchers as u64;
    let Totals {
        delivered,
        ended_early,
        out_of_order,
        histogram: h,
    } = readers.finish(created, SETTLE).await?;
    println!(
        "watch: {watchers} watchers, {rate} writes/s for {}s: delivered {delivered} of {expected} events; latency p50 {} p99 {} max {}; streams ended early {ended_early}, out of order {out_of_order}",
        load.as_secs(),
        ms(h.quantile(0.5)),
        ms(h.quantile(0.99)),
        ms(h.quantile(1.0)),
    );
    println!(
        "watch: writes {} of {} succeeded (of {} planned; failures {:?}); write latency p50 {} p99 {} max {}",
        writes.ok,
        writes.sent,
        writes.planned,
        writes.failures,
        ms(percentile(&writes.latencies, 0.5)),
        ms(percentile(&writes.latencies, 0.99)),
        ms(percentile(&writes.latencies, 1.0)),
    );
    let failed = writes.sent - writes.ok;
    let unsent = writes.planned - writes.sent;
    if delivered != expected || ended_early > 0 || out_of_order > 0 || failed > 0 || unsent > 0 {
        return Err(Error::Failed(format!(
            "watch: FAILED: delivered {delivered} of {expected} events, {ended_early} streams ended early, {out_of_order} out of order, {failed} writes failed, {unsent} writes not sent in time"
        )));
    }
    Ok(())
}

/// What a writer did.
struct Writes {
    /// `rate × seconds`: what the writer meant to send.
    planned: u64,
    sent: u64,
    ok: u64,
    /// Failed writes by HTTP status (0: no answer).
    failures: std::collections::BTreeMap<u16, u64>,
    latencies: Vec<Duration>,
}

/// Creates `rate × load` ConfigMaps, one every `1/rate` s, each request on its own task (a slow
/// answer does not hold the next write back); waits for every answer.
async fn write_at(http: &reqwest::Client, url: &str, rate: u64, load: Duration) -> Writes {
    let interval = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let total = rate * load.as_secs().max(1);
    let mut ticker = tokio::time::interval(interval);
    let deadline = Instant::now() + load + Duration::from_secs(5);
    let mut pending = Vec::with_capacity(total as usize);
    let mut sent = 0u64;
    while sent < total && Instant::now() < deadline {
        ticker.tick().await;
        let stamp = now_micros().to_string();
        let body = configmap(&format!("w-{sent}"), &format!("sent={stamp};"));
        let req = http.post(url).json(&body).timeout(SETTLE);
        pending.push(tokio::spawn(async move {
            let t = Instant::now();
            let status = req.send().await.map_or(0, |r| r.status().as_u16());
            (status, t.elapsed())
        }));
        sent += 1;
    }
    let mut writes = Writes {
        planned: total,
        sent,
        ok: 0,
        failures: Default::default(),
        latencies: Vec::with_capacity(pending.len()),
    };
    for p in pending {
        let (status, took) = p.await.unwrap_or((0, Duration::ZERO));
        if status == reqwest::StatusCode::CREATED.as_u16() {
            writes.ok += 1;
            writes.latencies.push(took);
        } else {
            *writes.failures.entry(status).or_default() += 1;
        }
    }
    writes.latencies.sort();
    writes
}
