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

fn report(name: &str, ops: usize, elapsed: Duration) {
    let rate = ops as f64 / elapsed.as_secs_f64();
    println!(
        "| {name:<56} | {ops:>7} | {:>8.2} s | {rate:>10.0} /s |",
        elapsed.as_secs_f64()
    );
}

fn raw_sled(flush_each: bool, total: usize) -> (usize, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new()
        .path(dir.path())
        .flush_every_ms(None)
        .cache_capacity(64 * 1024 * 1024)
        .mode(sled::Mode::HighThroughput)
        .open()
        .unwrap();
    let value = vec![b'v'; 1024];
    let started = Instant::now();
    let mut done = 0;
    for i in 0..total {
        if started.elapsed() > CASE_TIME {
            break;
        }
        db.insert(format!("/bench/{i}").as_bytes(), value.as_slice())
            .unwrap();
        if flush_each {
            db.flush().unwrap();
        }
        done += 1;
    }
    if !flush_each {
        db.flush().unwrap();
    }
    (done, started.elapsed())
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| case | ops | time | rate |");
    println!("|---|---|---|---|");
    for (writers, total) in [(1, count(3_000)), (16, count(60_000)), (64, count(120_000))] {
        let dir = tempfile::tempdir().unwrap();
        let sled = Arc::new(SledStore::open(dir.path(), StoreConfig::default()).unwrap());
        let store: Arc<dyn Store> = sled.clone();
        let (ops, elapsed) = runtime.block_on(creates(Arc::clone(&store), writers, total));
        runtime.block_on(store.flush_and_close()).unwrap();
        let stats = sled.stats();
        let group = stats.committed_writes as f64 / stats.commits.max(1) as f64;
        report(
            &format!("SledStore durable creates, {writers} writers (mean group {group:.1})"),
            ops,
            elapsed,
        );
    }
    {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(StoreConfig::default()).unwrap());
        let (ops, elapsed) = runtime.block_on(creates(Arc::clone(&store), 64, count(120_000)));
        runtime.block_on(store.flush_and_close()).unwrap();
        report("MemoryStore creates, 64 writers (reference)", ops, elapsed);
    }
    let (ops, elapsed) = raw_sled(true, count(3_000));
    report("raw sled insert + flush per write", ops, elapsed);
    let (ops, elapsed) = raw_sled(false, count(200_000));
    report("raw sled insert, no flush (one flush at end)", ops, elapsed);
}
