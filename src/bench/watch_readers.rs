//! The watch benchmark's readers: `watchers` watch streams, each counting its events, checking
//! their resourceVersion order and recording each event's delivery latency.
//!
//! Both ends of every stream cost a file descriptor. When this process cannot hold both ends of
//! every stream (its limit, raised to the hard limit, is below twice the watchers), the streams
//! are read by child processes (`minik8s bench watch-clients`, hidden) of at most
//! [`PER_CHILD`] streams each, which report over their standard output: `opened` once all their
//! streams are open, then, after the parent wrote the number of objects created to their standard
//! input, their counts and latency histogram. Latencies are measured against the wall clock
//! (µs since the Unix epoch), the same in every process of the machine.
//!
//! Reading is linear in the bytes received (memchr over each chunk, one compaction per chunk)
//! with no allocation per event. Every wait has a deadline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use memchr::memmem;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::Error;

/// Latencies a watcher keeps before adding them to the shared histogram.
const LOCAL_SAMPLES: usize = 1024;

/// Streams read by one child process.
pub(super) const PER_CHILD: usize = 4000;

/// Descriptors a process keeps for everything but the streams.
const RESERVE: usize = 1024;

/// µs since the Unix epoch.
pub(super) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// What the readers saw, all together.
pub(super) struct Totals {
    pub delivered: u64,
    pub ended_early: u64,
    pub out_of_order: u64,
    pub histogram: Histogram,
}

/// What every watcher of one process counts, shared.
#[derive(Default)]
struct Counters {
    opened: AtomicU64,
    delivered: AtomicU64,
    ended_early: AtomicU64,
    out_of_order: AtomicU64,
}

/// Watch streams read by this process.
struct Fleet {
    watchers: usize,
    counters: Arc<Counters>,
    histogram: Arc<parking_lot::Mutex<Histogram>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    fn open(url: &str, rv: &str, watchers: usize) -> Result<Fleet, Error> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(watchers)
            .build()?;
        let counters = Arc::new(Counters::default());
        let histogram = Arc::new(parking_lot::Mutex::new(Histogram::default()));
        let stop = CancellationToken::new();
        let tasks = (0..watchers)
            .map(|_| {
                let req = http.get(format!("{url}?watch=true&resourceVersion={rv}"));
                let (counters, histogram, stop) =
                    (counters.clone(), histogram.clone(), stop.clone());
                tokio::spawn(async move { watcher(req, &counters, &histogram, &stop).await })
            })
            .collect();
        Ok(Fleet {
            watchers,
            counters,
            histogram,
            stop,
            tasks,
        })
    }

    async fn wait_opened(&self, deadline: Duration) -> Result<(), Error> {
        let want = self.watchers as u64;
        let c = &self.counters;
        if wait_until(deadline, || c.opened.load(Ordering::Relaxed) >= want).await {
            return Ok(());
        }
        self.stop.cancel();
        Err(Error::Failed(format!(
            "watch: only {} of {want} watch streams opened",
            c.opened.load(Ordering::Relaxed)
        )))
    }

    /// Waits until every stream has `per_watcher` events (or one ended early, or `deadline`),
    /// then stops reading.
    async fn finish(self, per_watcher: u64, deadline: Duration) -> Totals {
        let expected = per_watcher * self.watchers as u64;
        let c = &self.counters;
        wait_until(deadline, || {
            c.delivered.load(Ordering::Relaxed) >= expected
                || c.ended_early.load(Ordering::Relaxed) > 0
        })
        .await;
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        Totals {
            delivered: c.delivered.load(Ordering::Relaxed),
            ended_early: c.ended_early.load(Ordering::Relaxed),
            out_of_order: c.out_of_order.load(Ordering::Relaxed),
            histogram: std::mem::take(&mut *self.histogram.lock()),
        }
    }
}

/// One watch stream, read until `stop`.
async fn watcher(
    req: reqwest::RequestBuilder,
    counters: &Counters,
    histogram: &parking_lot::Mutex<Histogram>,
    stop: &CancellationToken,
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
                let now = now_micros();
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

/// A child process reading some of the streams.
struct Child {
    process: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

/// The readers: here, or in child processes.
pub(super) struct Readers(Place);

enum Place {
    Here(Fleet),
    Children(Vec<Child>),
}

impl Readers {
    /// Opens `watchers` streams on `url` from `rv`, in this process if its descriptors allow.
    pub(super) fn open(url: &str, rv: &str, watchers: usize) -> Result<Readers, Error> {
        let limit = usize::try_from(apiserver::fdlimit::raise()).unwrap_or(usize::MAX);
        if 2 * watchers + RESERVE <= limit {
            return Fleet::open(url, rv, watchers).map(|f| Readers(Place::Here(f)));
        }
        if watchers + RESERVE > limit {
            return Err(Error::Failed(format!(
                "watch: the server's end of {watchers} streams needs more than this process's {limit} file descriptors"
            )));
        }
        let exe = std::env::current_exe()
            .map_err(|e| Error::Failed(format!("watch: cannot find this binary: {e}")))?;
        let mut children = Vec::new();
        let mut left = watchers;
        while left > 0 {
            let n = left.min(PER_CHILD);
            left -= n;
            let mut process = tokio::process::Command::new(&exe)
                .args([
                    "bench",
                    "watch-clients",
                    "--watch-url",
                    url,
                    "--watch-rv",
                    rv,
                ])
                .arg(format!("--watchers={n}"))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| Error::Failed(format!("watch: cannot start a reader: {e}")))?;
            let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
                return Err(Error::Failed("watch: a reader has no pipes".into()));
            };
            let stdout = BufReader::new(stdout).lines();
            children.push(Child {
                process,
                stdin,
                stdout,
            });
        }
        Ok(Readers(Place::Children(children)))
    }

    /// Waits until every stream is open (the server registered every watch).
    pub(super) async fn wait_opened(&mut self, deadline: Duration) -> Result<(), Error> {
        match &mut self.0 {
            Place::Here(fleet) => fleet.wait_opened(deadline).await,
            Place::Children(children) => {
                let end = tokio::time::Instant::now() + deadline;
                for c in children {
                    let line = tokio::time::timeout_at(end, c.stdout.next_line()).await;
                    if !matches!(&line, Ok(Ok(Some(l))) if l == "opened") {
                        return Err(Error::Failed(format!(
                            "watch: a reader did not open its streams: {line:?}"
                        )));
                    }
                }
                Ok(())
            }
        }
    }

    /// Waits until every stream has seen the events of `objects` creates, or `deadline`.
    pub(super) async fn finish(self, objects: u64, deadline: Duration) -> Result<Totals, Error> {
        let mut children = match self.0 {
            Place::Here(fleet) => return Ok(fleet.finish(objects, deadline).await),
            Place::Children(children) => children,
        };
        let mut totals = Totals {
            delivered: 0,
            ended_early: 0,
            out_of_order: 0,
            histogram: Histogram::default(),
        };
        for c in children.iter_mut() {
            let told = c.stdin.write_all(format!("{objects}\n").as_bytes()).await;
            told.map_err(|e| Error::Failed(format!("watch: a reader went away: {e}")))?;
        }
        let end = tokio::time::Instant::now() + deadline + Duration::from_secs(10);
        for mut c in children {
            let report = tokio::time::timeout_at(end, c.stdout.next_line()).await;
            let Ok(Ok(Some(report))) = report else {
                return Err(Error::Failed(format!(
                    "watch: a reader did not report: {report:?}"
                )));
            };
            totals.merge(&report)?;
            let _ = tokio::time::timeout_at(end, c.process.wait()).await;
        }
        Ok(totals)
    }
}

impl Totals {
    /// The line a child reports: `delivered ended_early out_of_order bucket:count ...`.
    fn line(&self) -> String {
        let mut line = format!(
            "{} {} {}",
            self.delivered, self.ended_early, self.out_of_order
        );
        for (b, c) in self
            .histogram
            .counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
        {
            line.push_str(&format!(" {b}:{c}"));
        }
        line
    }

    /// Adds a child's report.
    fn merge(&mut self, line: &str) -> Result<(), Error> {
        let bad = || Error::Failed(format!("watch: unreadable reader report {line:?}"));
        let mut words = line.split(' ');
        let mut number =
            || -> Result<u64, Error> { words.next().and_then(|w| w.parse().ok()).ok_or_else(bad) };
        self.delivered += number()?;
        self.ended_early += number()?;
        self.out_of_order += number()?;
        for word in words {
            let (b, c) = word.split_once(':').ok_or_else(bad)?;
            let (b, c): (usize, u64) =
                (b.parse().map_err(|_| bad())?, c.parse().map_err(|_| bad())?);
            *self.histogram.counts.get_mut(b).ok_or_else(bad)? += c;
            self.histogram.total += c;
        }
        Ok(())
    }
}

/// `minik8s bench watch-clients`: reads `watchers` streams for a parent `bench watch`.
pub(super) async fn child(url: &str, rv: &str, watchers: usize) -> Result<(), Error> {
    let fleet = Fleet::open(url, rv, watchers)?;
    fleet.wait_opened(super::watch::SETTLE).await?;
    println!("opened");
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let objects = match stdin.next_line().await {
        Ok(Some(n)) => n
            .trim()
            .parse()
            .map_err(|_| Error::Failed(format!("watch-clients: not a count: {n:?}")))?,
        other => return Err(Error::Failed(format!("watch-clients: no count: {other:?}"))),
    };
    let totals = fleet.finish(objects, super::watch::SETTLE).await;
    println!("{}", totals.line());
    Ok(())
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
pub(super) struct Histogram {
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
    pub(super) fn quantile(&self, p: f64) -> Duration {
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
    fn a_child_report_adds_up_in_the_parent() {
        let mut child = Histogram::default();
        child.add(&[5, 5, 3_000_000]);
        let report = Totals {
            delivered: 3,
            ended_early: 1,
            out_of_order: 2,
            histogram: child,
        }
        .line();
        let mut totals = Totals {
            delivered: 10,
            ended_early: 0,
            out_of_order: 0,
            histogram: Histogram::default(),
        };
        totals.histogram.add(&[7]);
        totals.merge(&report).unwrap();
        assert_eq!(
            (totals.delivered, totals.ended_early, totals.out_of_order),
            (13, 1, 2)
        );
        assert_eq!(totals.histogram.total, 4);
        assert_eq!(totals.histogram.quantile(0.0), Duration::from_micros(5));
        assert!(totals.histogram.quantile(1.0) > Duration::from_millis(2990));
        assert!(totals.merge("1 2").is_err());
        assert!(totals.merge("1 2 3 x:1").is_err());
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
