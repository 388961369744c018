//! Store benchmark: durable creates/s with 1, 16 and 64 concurrent writers (1 KiB values), next to raw
//! sled with a flush per insert and raw sled with no flush, in one run.
//!
//! `cargo bench -p store --bench store` (set `STORE_BENCH_SCALE=0.2` for a quicker run). Every loop is
//! bounded in count and in time (10 s per case). Figures go to BENCHMARKS.md, section "Store".
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::{CreateOutcome, MemoryStore, SledStore, Store, StoreConfig};

const CASE_TIME: Duration = Duration::from_secs(10);

fn scale() -> f64 {
    std::env::var("STORE_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

fn count(n: usize) -> usize {
    ((n as f64 * scale()) as usize).max(1)
}

async fn creates(store: Arc<dyn Store>, writers: usize, total: usize) -> (usize, Duration) {
    let value = Bytes::from(vec![b'v'; 1024]);
    let per_writer = total / writers;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = Arc::clone(&store);
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            for i in 0..per_writer {
                if started.elapsed() > CASE_TIME {
                    break;
                }
                match store
                    .create(&format!("/bench/{w}/{i}"), value.clone())
                    .await
                    .unwrap()
                {
                    CreateOutcome::Created(_) => done += 1,
                    CreateOutcome::AlreadyExists(_) => panic!("fresh keys"),
                }
            }
            done
        }));
    }
    let mut done = 0;
    for task in tasks {
        done += task.await.unwrap();
    }
    (done, started.elapsed())
}

/// CPU time (user + system) this process has used, from /proc/self/stat, in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Kernel clock ticks are 100 Hz on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[derive(Clone, Copy)]
enum Case {
    Sled(usize),
    SledNoFsync(usize),
    Memory,
    RawFlushEach,
    RawFsyncEach,
    RawNoFlush,
}

impl Case {
    fn name(self) -> String {
        match self {
            Case::Sled(w) => format!("SledStore durable creates, {w} writers"),
            Case::SledNoFsync(w) => {
                format!("SledStore creates, fsync: false (crash-safe, not power-loss), {w} writers")
            }
            Case::Memory => "MemoryStore creates, 64 writers (reference)".into(),
            Case::RawFlushEach => "raw sled insert + flush per write".into(),
            Case::RawFsyncEach => "raw sled insert + flush + fdatasync per write".into(),
            Case::RawNoFlush => "raw sled insert, no flush (one flush at end)".into(),
        }
    }

    /// (ops, elapsed, mean group-commit size if any)
    fn run(self, runtime: &tokio::runtime::Runtime) -> (usize, Duration, Option<f64>) {
        match self {
            Case::Sled(writers) | Case::SledNoFsync(writers) => {
                let config = StoreConfig {
                    fsync: matches!(self, Case::Sled(_)),
                    ..StoreConfig::default()
                };
                let total = count(match writers {
                    1 => 3_000,
                    16 => 40_000,
                    _ => 80_000,
                });
                let dir = tempfile::tempdir().unwrap();
                let sled = Arc::new(SledStore::open(dir.path(), config).unwrap());
                let store: Arc<dyn Store> = sled.clone();
                let (ops, elapsed) = runtime.block_on(creates(Arc::clone(&store), writers, total));
                runtime.block_on(store.flush_and_close()).unwrap();
                let stats = sled.stats();
                let group = stats.committed_writes as f64 / stats.commits.max(1) as f64;
                let per_commit = |nanos: u64| nanos as f64 / stats.commits.max(1) as f64 / 1000.0;
                eprintln!(
                    "{writers} writers: {ops} creates in {elapsed:?}, {} commits, apply {:.0} us/commit, flush {:.0} us/commit",
                    stats.commits,
                    per_commit(stats.apply_nanos),
                    per_commit(stats.flush_nanos)
                );
                (ops, elapsed, Some(group))
            }
            Case::Memory => {
                let store: Arc<dyn Store> =
                    Arc::new(MemoryStore::new(StoreConfig::default()).unwrap());
                let (ops, elapsed) =
                    runtime.block_on(creates(Arc::clone(&store), 64, count(80_000)));
                runtime.block_on(store.flush_and_close()).unwrap();
                (ops, elapsed, None)
            }
            Case::RawFlushEach => {
                let (ops, elapsed) = raw_sled(Flush::Each, count(3_000));
                (ops, elapsed, None)
            }
            Case::RawFsyncEach => {
                let (ops, elapsed) = raw_sled(Flush::EachWithFdatasync, count(3_000));
                (ops, elapsed, None)
            }
            Case::RawNoFlush => {
                let (ops, elapsed) = raw_sled(Flush::AtEnd, count(100_000));
                (ops, elapsed, None)
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Flush {
    Each,
    EachWithFdatasync,
    AtEnd,
}

fn raw_sled(flush: Flush, total: usize) -> (usize, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new()
        .path(dir.path())
        .flush_every_ms(None)
        .cache_capacity(64 * 1024 * 1024)
        .mode(sled::Mode::HighThroughput)
        .open()
        .unwrap();
    let log_file = std::fs::File::open(dir.path().join("db")).unwrap();
    let value = vec![b'v'; 1024];
    let started = Instant::now();
    let mut done = 0;
    for i in 0..total {
        if started.elapsed() > CASE_TIME {
            break;
        }
        db.insert(format!("/bench/{i}").as_bytes(), value.as_slice())
            .unwrap();
        if flush != Flush::AtEnd {
            db.flush().unwrap();
        }
        if flush == Flush::EachWithFdatasync {
            log_file.sync_data().unwrap();
        }
        done += 1;
    }
    if flush == Flush::AtEnd {
        db.flush().unwrap();
    }
    (done, started.elapsed())
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let reps: usize = std::env::var("STORE_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cases = [
        Case::Sled(1),
        Case::Sled(16),
        Case::Sled(64),
        Case::SledNoFsync(1),
        Case::SledNoFsync(64),
        Case::Memory,
        Case::RawFlushEach,
        Case::RawFsyncEach,
        Case::RawNoFlush,
    ];
    let load_before = loadavg();
    // Repetitions are interleaved, so a burst of load from elsewhere hits every case alike.
    let mut results: Vec<Vec<(f64, Option<f64>, f64)>> = vec![Vec::new(); cases.len()];
    for _ in 0..reps {
        for (i, case) in cases.iter().enumerate() {
            let cpu_before = cpu_seconds();
            let (ops, elapsed, group) = case.run(&runtime);
            let cpu_us_per_op = (cpu_seconds() - cpu_before) * 1e6 / ops.max(1) as f64;
            results[i].push((ops as f64 / elapsed.as_secs_f64(), group, cpu_us_per_op));
        }
    }
    println!(
        "load average before: {load_before}; after: {}; {reps} interleaved repetitions",
        loadavg()
    );
    println!("| case | best /s | median /s | mean group commit | CPU µs per op (median) |");
    println!("|---|---|---|---|---|");
    for (case, runs) in cases.iter().zip(&mut results) {
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let best = runs.last().map_or(0.0, |r| r.0);
        let median = runs[runs.len() / 2].0;
        let group = runs
            .last()
            .and_then(|r| r.1)
            .map_or("-".into(), |g| format!("{g:.1}"));
        let mut cpu: Vec<f64> = runs.iter().map(|r| r.2).collect();
        cpu.sort_by(f64::total_cmp);
        let cpu = cpu[cpu.len() / 2];
        println!(
            "| {} | {best:.0} | {median:.0} | {group} | {cpu:.1} |",
            case.name()
        );
    }
}
