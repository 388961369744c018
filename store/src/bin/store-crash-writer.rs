//! Child process of the crash-durability test (`tests/crash.rs`, spec/reliability.md T1).
//!
//! `store-crash-writer <dir> <seed> <round> <clients>` opens a [`store::SledStore`] on `<dir>`, prints
//! `ready <revision>`, then runs `<clients>` concurrent clients that create or update (compare-and-swap
//! on the read revision) keys of a small shared key space with unique values, until it is killed.
//! Every acknowledged write is printed as one line, `ack <revision> <key> <value>`, only after the store
//! returned it. Not a library: stdout is its protocol.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use store::{CreateOutcome, SledStore, Store, StoreConfig, UpdateOutcome};

const KEYS: u64 = 24;

/// xorshift64*: enough randomness for a workload, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The configuration both the writer and the verifier open the store with: keep the whole log, so the
/// verifier can check every acknowledged revision.
pub fn crash_config() -> StoreConfig {
    StoreConfig {
        event_log_max_events: u64::MAX,
        event_log_max_age: Duration::from_secs(24 * 3600),
        ..StoreConfig::default()
    }
}

fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    // If the parent is gone there is nobody to tell; the next write fails the same way.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn client(store: Arc<SledStore>, mut rng: Rng, tag: String) {
    let mut seq = 0u64;
    loop {
        seq += 1;
        let key = format!("/crash/k{:02}", rng.next() % KEYS);
        let value = format!("{tag}n{seq}-{:0>64}", rng.next() % 1000);
        let bytes = Bytes::from(value.clone());
        let acked = match store.get(&key).await {
            Ok(None) => match store.create(&key, bytes).await {
                Ok(CreateOutcome::Created(kv)) => Some(kv.mod_revision),
                Ok(CreateOutcome::AlreadyExists(_)) => None,
                Err(error) => {
                    emit(&format!("error create {key}: {error}"));
                    return;
                }
            },
            Ok(Some(current)) => {
                let expected = (!rng.next().is_multiple_of(4)).then_some(current.mod_revision);
                match store.update(&key, bytes, expected).await {
                    Ok(UpdateOutcome::Updated { kv, .. }) => Some(kv.mod_revision),
                    Ok(UpdateOutcome::Conflict(_) | UpdateOutcome::NotFound) => None,
                    Err(error) => {
                        emit(&format!("error update {key}: {error}"));
                        return;
                    }
                }
            }
            Err(error) => {
                emit(&format!("error get {key}: {error}"));
                return;
            }
        };
        if let Some(revision) = acked {
            emit(&format!("ack {revision} {key} {value}"));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: store-crash-writer <dir> <seed> <round> <clients>");
        std::process::exit(2);
    }
    let dir = PathBuf::from(&args[1]);
    let seed: u64 = args[2].parse().unwrap_or(1);
    let round = &args[3];
    let clients: u64 = args[4].parse().unwrap_or(4);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("runtime: {error}");
            std::process::exit(1);
        }
    };
    runtime.block_on(async move {
        let store = match SledStore::open(&dir, crash_config()) {
            Ok(store) => Arc::new(store),
            Err(error) => {
                emit(&format!("error open: {error}"));
                std::process::exit(1);
            }
        };
        emit(&format!("ready {}", store.current_revision()));
        let mut tasks = Vec::new();
        for c in 0..clients {
            let rng = Rng(seed.wrapping_mul(31).wrapping_add(c * 7919 + 1) | 1);
            tasks.push(tokio::spawn(client(
                Arc::clone(&store),
                rng,
                format!("r{round}c{c}"),
            )));
        }
        for task in tasks {
            let _ = task.await;
        }
    });
}
