//! `minik8s bench watch`: watch fan-out. `watchers` watch streams on the ConfigMaps of one
//! namespace while one writer creates ConfigMaps at a fixed rate; every created object must reach
//! every watcher.
//!
//! Each object carries its send time (µs since the benchmark's epoch) in its data; a watcher reads
//! it from each event line and records the delivery latency. The client side is linear in the
//! bytes it receives (memchr over each chunk, one compaction per chunk) and keeps no per-event
//! allocation, so at a thousand watchers it stays a small part of the process the server shares.
//!
//! The run fails loudly (an error, non-zero exit) when an event is missing, a stream ended early
//! (the server dropped a watcher that fell behind), an event came out of resourceVersion order, or
//! a write failed. Bounded: `rate × seconds` writes, every wait has a deadline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use memchr::memmem;

use super::{configmap, ms, percentile, Error};
use crate::control_plane::ControlPlane;

/// Longest wait for the watch streams to open, and for the last events after the last write.
const SETTLE: Duration = Duration::from_secs(60);

/// Latencies a watcher keeps before adding them to the shared histogram.
const LOCAL_SAMPLES: usize = 1024;

/// What every watcher counts, shared.
#[derive(Default)]
struct Counters {
    opened: AtomicU64,
    delivered: AtomicU64,
    ended_early: AtomicU64,
    out_of_order: AtomicU64,
}

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
    let epoch = Instant::now();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(watchers + 8)
        .build()?;
    let url = format!("{}/api/v1/namespaces/default/configmaps", plane.url());
    let listed: serde_json::Value = http.get(&url).send().await?.json().await?;
    let rv = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let counters = Arc::new(Counters::default());
    let histogram = Arc::new(parking_lot::Mutex::new(Histogram::default()));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = Vec::with_capacity(watchers);
    for _ in 0..watchers {
        let req = http.get(format!("{url}?watch=true&resourceVersion={rv}"));
        let (counters, histogram, stop) = (counters.clone(), histogram.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            watcher(req, epoch, &counters, &histogram, &stop).await
        }));
    }
    // The response head comes after the server registered the watch.
    let opened = wait_until(SETTLE, || {
        counters.opened.load(Ordering::Relaxed) >= watchers as u64
    })
    .await;
    if !opened {
        stop.cancel();
        return Err(Error::Failed(format!(
            "watch: only {} of {watchers} watch streams opened",
            counters.opened.load(Ordering::Relaxed)
        )));
    }

    let writes = write_at(&http, &url, epoch, rate, load).await;
    // Every object that exists was written by this run: a write answered with an error may still
    // have been stored, and then its event is due too.
    let listed: serde_json::Value = http.get(&url).send().await?.json().await?;
    let created = listed["items"].as_array().map_or(0, Vec::len) as u64;
    let expected = created * watchers as u64;
    wait_until(SETTLE, || {
        counters.delivered.load(Ordering::Relaxed) >= expected
            || counters.ended_early.load(Ordering::Relaxed) > 0
    })
    .await;
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    let delivered = counters.delivered.load(Ordering::Relaxed);
    let ended_early = counters.ended_early.load(Ordering::Relaxed);
    let out_of_order = counters.out_of_order.load(Ordering::Relaxed);
    let h = histogram.lock();
    println!(
        "watch: {watchers} watchers, {rate} writes/s for {}s: delivered {delivered} of {expected} events; latency p50 {} p99 {} max {}; streams ended early {ended_early}, out of order {out_of_order}",
        load.as_secs(),
        ms(h.quantile(0.5)),
        ms(h.quantile(0.99)),
        ms(h.quantile(1.0)),
    );
    println!(
        "watch: writes {} of {} succeeded ({} failed); write latency p50 {} p99 {} max {}",
        writes.ok,
        writes.sent,
        writes.sent - writes.ok,
        ms(percentile(&writes.latencies, 0.5)),
        ms(percentile(&writes.latencies, 0.99)),
        ms(percentile(&writes.latencies, 1.0)),
    );
    if delivered != expected || ended_early > 0 || out_of_order > 0 || writes.ok != writes.sent {
        return Err(Error::Failed(format!(
            "watch: FAILED: delivered {delivered} of {expected} events, {ended_early} streams ended early, {out_of_order} out of order, {} writes failed",
            writes.sent - writes.ok
        )));
    }
    Ok(())
}

/// One watch stream, read until `stop`.
async fn watcher(
    req: reqwest::RequestBuilder,
    epoch: Instant,
    counters: &Counters,
    histogram: &parking_lot::Mutex<Histogram>,
    stop: &tokio_util::sync::CancellationToken,
) {
    let resp = match req.send().await {
        Ok(r) if r.status().is_success() => r,
        _ => {
            counters.ended_early.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    counters.opened.fetch_add(1, Ordering::Relaxed);
    let mut stream = resp.bytes_stream();
    let mut lines = Lines::default();
    let mut local = Vec::with_capacity(LOCAL_SAMPLES);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            chunk = stream.next() => {
                let Some(Ok(chunk)) = chunk else {
                    counters.ended_early.fetch_add(1, Ordering::Relaxed);
                    break;
                };
                let now = epoch.elapsed().as_micros() as u64;
                let seen = lines.push(&chunk, |sent| local.push(now.saturating_sub(sent)));
                counters.out_of_order.fetch_add(seen.out_of_order, Ordering::Relaxed);
                counters.delivered.fetch_add(seen.events, Ordering::Relaxed);
                if local.len() >= LOCAL_SAMPLES {
                    histogram.lock().add(&local);
                    local.clear();
                }
            }
        }
    }
    histogram.lock().add(&local);
}

/// What a writer did.
struct Writes {
    sent: u64,
    ok: u64,
    latencies: Vec<Duration>,
}

/// Creates `rate × load` ConfigMaps, one every `1/rate` s, each request on its own task (a slow
/// answer does not hold the next write back); waits for every answer.
async fn write_at(
    http: &reqwest::Client,
    url: &str,
    epoch: Instant,
    rate: u64,
    load: Duration,
) -> Writes {
    let interval = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let total = rate * load.as_secs().max(1);
    let mut ticker = tokio::time::interval(interval);
    let deadline = Instant::now() + load + Duration::from_secs(5);
    let mut pending = Vec::with_capacity(total as usize);
    let mut sent = 0u64;
    while sent < total && Instant::now() < deadline {
        ticker.tick().await;
        let stamp = epoch.elapsed().as_micros().to_string();
        let body = configmap(&format!("w-{sent}"), &format!("sent={stamp};"));
        let req = http.post(url).json(&body).timeout(SETTLE);
        pending.push(tokio::spawn(async move {
            let t = Instant::now();
            let ok = req
                .send()
                .await
                .is_ok_and(|r| r.status() == reqwest::StatusCode::CREATED);
            (ok, t.elapsed())
        }));
        sent += 1;
    }
    let mut writes = Writes {
        sent,
        ok: 0,
        latencies: Vec::with_capacity(pending.len()),
    };
    for p in pending {
        if let Ok((ok, took)) = p.await {
            writes.ok += u64::from(ok);
            writes.latencies.push(took);
        }
    }
    writes.latencies.sort();
    writes
}

/// Polls `done` every 20 ms until it holds or `deadline` passes; whether it held.
async fn wait_until(deadline: Duration, done: impl Fn() -> bool) -> bool {
    let end = Instant::now() + deadline;
    while !done() {
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Splits a watch stream into event lines.
struct Lines {
    buf: Vec<u8>,
    last_rv: u64,
    sent: memmem::Finder<'static>,
    rv: memmem::Finder<'static>,
}

impl Default for Lines {
    fn default() -> Self {
        Lines {
            buf: Vec::new(),
            last_rv: 0,
            sent: memmem::Finder::new(b"sent="),
            rv: memmem::Finder::new(b"\"resourceVersion\":\""),
        }
    }
}

/// What one chunk held.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    events: u64,
    out_of_order: u64,
}

impl Lines {
    /// Takes one chunk; calls `sent` with the send time of every complete event line in it.
    fn push(&mut self, chunk: &[u8], mut sent: impl FnMut(u64)) -> Seen {
        self.buf.extend_from_slice(chunk);
        let mut seen = Seen::default();
        let mut start = 0;
        while let Some(end) = memchr::memchr(b'\n', &self.buf[start..]) {
            let line = &self.buf[start..start + end];
            start += end + 1;
            let Some(stamp) = number_after(line, &self.sent) else {
                continue;
            };
            seen.events += 1;
            sent(stamp);
            if let Some(rv) = number_after(line, &self.rv) {
                if rv <= self.last_rv {
                    seen.out_of_order += 1;
                }
                self.last_rv = rv;
            }
        }
        self.buf.drain(..start);
        seen
    }
}

/// The decimal number right after the first `marker` in `line`.
fn number_after(line: &[u8], marker: &memmem::Finder<'_>) -> Option<u64> {
    let from = marker.find(line)? + marker.needle().len();
    let digits = line[from..].iter().take_while(|b| b.is_ascii_digit());
    let mut n: u64 = 0;
    let mut any = false;
    for d in digits {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        any = true;
    }
    any.then_some(n)
}

/// Latencies in µs, bucketed to about 0.1 % (exact below 2,048 µs): constant memory whatever the
/// number of samples.
struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

/// Sub-buckets per power of two above [`EXACT`].
const SUB: u64 = 1024;
/// Values below this have a bucket each.
const EXACT: u64 = 2 * SUB;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; bucket(u64::MAX) + 1],
            total: 0,
        }
    }
}

fn bucket(us: u64) -> usize {
    if us < EXACT {
        return us as usize;
    }
    let shift = u64::from(64 - us.leading_zeros()) - 11;
    (EXACT + (shift - 1) * SUB + ((us >> shift) - SUB)) as usize
}

/// The least value of bucket `b`.
fn bucket_floor(b: usize) -> u64 {
    let b = b as u64;
    if b < EXACT {
        return b;
    }
    let shift = (b - EXACT) / SUB + 1;
    ((b - EXACT) % SUB + SUB) << shift
}

impl Histogram {
    fn add(&mut self, samples: &[u64]) {
        for s in samples {
            self.counts[bucket(*s)] += 1;
        }
        self.total += samples.len() as u64;
    }

    /// The `p` quantile (0 ≤ p ≤ 1), as the least value of its bucket.
    fn quantile(&self, p: f64) -> Duration {
        if self.total == 0 {
            return Duration::ZERO;
        }
        let rank = (((self.total - 1) as f64) * p).round() as u64;
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return Duration::from_micros(bucket_floor(b));
            }
        }
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_chunks_and_counted_once() {
        let mut lines = Lines::default();
        let mut stamps = Vec::new();
        let a = br#"{"type":"ADDED","object":{"metadata":{"resourceVersion":"5"},"data":{"payload":"sent=12;"}}}"#;
        let b = br#"{"type":"ADDED","object":{"metadata":{"resourceVersion":"4"},"data":{"payload":"sent=34;"}}}"#;
        let mut stream = a.to_vec();
        stream.push(b'\n');
        stream.extend_from_slice(b);
        stream.push(b'\n');
        let (first, second) = stream.split_at(30);
        let seen = lines.push(first, |s| stamps.push(s));
        assert_eq!(seen, Seen::default());
        let seen = lines.push(second, |s| stamps.push(s));
        assert_eq!(
            seen,
            Seen {
                events: 2,
                out_of_order: 1
            }
        );
        assert_eq!(stamps, vec![12, 34]);
        assert!(lines.buf.is_empty());
    }

    #[test]
    fn a_bookmark_is_not_an_event() {
        let mut lines = Lines::default();
        let seen = lines.push(
            b"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n",
            |_| {},
        );
        assert_eq!(seen.events, 0);
    }

    #[test]
    fn histogram_quantiles_are_within_a_thousandth() {
        for v in [
            0u64,
            1,
            2047,
            2048,
            2049,
            4095,
            4096,
            123_456,
            5_000_000,
            u64::MAX / 2,
        ] {
            let floor = bucket_floor(bucket(v));
            assert!(floor <= v, "{v}: floor {floor}");
            assert!(v - floor <= v / 1000, "{v}: floor {floor}");
        }
        let mut h = Histogram::default();
        let samples: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        h.add(&samples);
        let p99 = h.quantile(0.99).as_micros() as u64;
        assert!((989_000..=990_000).contains(&p99), "{p99}");
        assert_eq!(h.quantile(0.0), Duration::from_micros(1000));
        assert_eq!(Histogram::default().quantile(0.5), Duration::ZERO);
    }
}
