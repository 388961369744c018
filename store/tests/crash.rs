//! Crash durability, spec/reliability.md T1: SIGKILL a writer process at random moments during
//! concurrent writes, restart on the same directory, verify.
//!
//! Per round the child (`store-crash-writer`) prints each acknowledged write; the parent kills it
//! (10% of kills land during start-up/recovery), reopens the store and checks: it opens (always);
//! its revision never decreases and is >= every acknowledged revision; every key holds its last
//! acknowledged value or a later one; no object is newer than the store revision; the event log is
//! dense up to the revision and holds every acknowledged write at exactly its revision; no revision was
//! acknowledged twice.
//!
//! `TEST_SEED=<n>` replays a run; `STORE_CRASH_ROUNDS=<n>` changes the round count (default 20).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use store::{SledStore, Store, StoreConfig, WatchItem, WatchOutcome};

struct Ack {
    key: String,
    value: String,
}

fn config() -> StoreConfig {
    StoreConfig {
        event_log_max_events: u64::MAX,
        event_log_max_age: Duration::from_secs(24 * 3600),
        ..StoreConfig::default()
    }
}

/// Run one child until killed; return its ack lines (complete lines only).
fn run_child(dir: &Path, seed: u64, round: usize, rng: &mut rand::rngs::StdRng) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_store-crash-writer"))
        .arg(dir)
        .arg(seed.to_string())
        .arg(round.to_string())
        .arg("8")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn writer");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                // A line cut by the kill has no newline: it was never fully acknowledged on stdout.
                Ok(_) if line.ends_with('\n') => {
                    if tx.send(line.trim_end().to_owned()).is_err() {
                        return;
                    }
                }
                Ok(_) => return,
            }
        }
    });
    let early = rng.gen_bool(0.1);
    if early {
        // During start-up or recovery.
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..40)));
    } else {
        let ready = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("writer ready");
        assert!(
            ready.starts_with("ready "),
            "unexpected first line {ready:?}"
        );
        std::thread::sleep(Duration::from_millis(rng.gen_range(200..1500)));
    }
    child.kill().expect("SIGKILL writer");
    let status = child.wait().expect("wait writer");
    assert!(
        !status.success(),
        "writer must have been killed, got {status}"
    );
    reader.join().expect("reader thread");
    let lines: Vec<String> = rx.try_iter().collect();
    for line in &lines {
        assert!(!line.starts_with("error"), "writer reported {line}");
    }
    lines
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let seed: u64 = std::env::var("TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let rounds: usize = std::env::var("STORE_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    println!("crash test: TEST_SEED={seed} rounds={rounds}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut acks: BTreeMap<u64, Ack> = BTreeMap::new();
    let mut last_revision = 0u64;
    let mut verified_log = 0u64;
    let started = Instant::now();
    for round in 0..rounds {
        let lines = run_child(dir.path(), seed.wrapping_add(round as u64), round, &mut rng);
        let mut new_acks = 0;
        for line in lines.iter().filter(|l| l.starts_with("ack ")) {
            let mut parts = line.splitn(4, ' ').skip(1);
            let revision: u64 = parts.next().unwrap().parse().unwrap();
            let key = parts.next().unwrap().to_owned();
            let value = parts.next().unwrap().to_owned();
            let previous = acks.insert(revision, Ack { key, value });
            assert!(
                previous.is_none(),
                "seed {seed}: revision {revision} acknowledged twice"
            );
            new_acks += 1;
        }

        runtime.block_on(async {
            let store = SledStore::open(dir.path(), config())
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: restart failed: {e}"));
            let revision = store.current_revision();
            let max_acked = acks.keys().next_back().copied().unwrap_or(0);
            assert!(
                revision >= last_revision,
                "seed {seed}: revision went back {last_revision} -> {revision}"
            );
            assert!(
                revision >= max_acked,
                "seed {seed}: revision {revision} < acknowledged {max_acked}"
            );

            // Every key holds its last acknowledged value, or a later write.
            let mut last_per_key: HashMap<&str, (u64, &str)> = HashMap::new();
            for (rev, ack) in &acks {
                last_per_key.insert(ack.key.as_str(), (*rev, ack.value.as_str()));
            }
            for (key, (rev, value)) in &last_per_key {
                let kv = store.get(key).await.unwrap();
                let kv =
                    kv.unwrap_or_else(|| panic!("seed {seed}: acknowledged key {key} is missing"));
                assert!(
                    kv.mod_revision >= *rev,
                    "seed {seed}: {key} at {} older than acked {rev}",
                    kv.mod_revision
                );
                if kv.mod_revision == *rev {
                    assert_eq!(
                        kv.value,
                        value.as_bytes(),
                        "seed {seed}: {key} value at {rev}"
                    );
                }
            }
            let all = store::conformance::snapshot(&store).await;
            for kv in all.values() {
                assert!(
                    kv.mod_revision <= revision,
                    "seed {seed}: {} newer than the store",
                    kv.key
                );
            }

            // The log is dense up to the revision and carries every acknowledged write.
            let mut watch = match store.watch("", verified_log, 1).unwrap() {
                WatchOutcome::Watching(w) => w,
                WatchOutcome::Expired { compacted } => {
                    panic!("seed {seed}: log compacted to {compacted}")
                }
            };
            let mut expect = verified_log + 1;
            while expect <= revision {
                match watch.next().await {
                    Some(WatchItem::Event(event)) => {
                        assert_eq!(event.revision, expect, "seed {seed}: log not dense");
                        if let Some(ack) = acks.get(&expect) {
                            assert_eq!(event.key, ack.key, "seed {seed}: rev {expect}");
                            let value = event.value.as_ref().map(|kv| kv.value.clone());
                            assert_eq!(
                                value.as_deref(),
                                Some(ack.value.as_bytes()),
                                "seed {seed}: rev {expect}"
                            );
                        }
                        expect += 1;
                    }
                    other => panic!("seed {seed}: log replay ended early at {expect}: {other:?}"),
                }
            }
            drop(watch);
            verified_log = revision;
            last_revision = revision;
            store.flush_and_close().await.unwrap();
            println!("round {round}: {new_acks} acks, revision {revision}");
        });
    }
    println!(
        "crash test: {rounds} rounds, {} acknowledged writes, final revision {last_revision}, {:?}",
        acks.len(),
        started.elapsed()
    );
    assert!(
        acks.len() > rounds * 10,
        "seed {seed}: too little traffic for a meaningful test ({} acks)",
        acks.len()
    );
}
