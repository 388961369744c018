//! The contract suite ([`store::conformance`]) against every back end in this crate.

use std::sync::atomic::{AtomicUsize, Ordering};

use store::conformance::{self, Harness};
use store::{MemoryStore, SledStore, StoreConfig};

struct Memory;

impl Harness for Memory {
    type S = MemoryStore;
    fn open(&self, cfg: StoreConfig) -> MemoryStore {
        match MemoryStore::new(cfg) {
            Ok(store) => store,
            Err(error) => panic!("open memory store: {error}"),
        }
    }
}

/// Each store in its own sub-directory of one temporary directory, removed at the end.
struct Sled {
    root: tempfile::TempDir,
    next: AtomicUsize,
    /// Every key under a cold prefix: the index keeps no value, every read goes to disk.
    cold: bool,
}

impl Harness for Sled {
    type S = SledStore;
    fn open(&self, mut cfg: StoreConfig) -> SledStore {
        if self.cold {
            cfg.cold_prefixes = vec![String::new()];
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.root.path().join(format!("store-{n}"));
        match SledStore::open(&path, cfg) {
            Ok(store) => store,
            Err(error) => panic!("open sled store at {}: {error}", path.display()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_passes_the_contract() {
    let seed = conformance::test_seed();
    println!("memory contract: TEST_SEED={seed}");
    conformance::run_all_with_seed(&Memory, seed).await;
}

async fn sled_contract(cold: bool) {
    let root = match tempfile::tempdir() {
        Ok(root) => root,
        Err(error) => panic!("tempdir: {error}"),
    };
    let seed = conformance::test_seed();
    println!("sled contract (every value cold: {cold}): TEST_SEED={seed}");
    let harness = Sled {
        root,
        next: AtomicUsize::new(0),
        cold,
    };
    conformance::run_all_with_seed(&harness, seed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_store_passes_the_contract() {
    sled_contract(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sled_store_with_every_value_cold_passes_the_contract() {
    sled_contract(true).await;
}
