//! The public store types: [`SledStore`] (durable) and [`MemoryStore`] (no files), both the same
//! [`crate::engine`] over a different back end, both implementing [`Store`].

use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::backend::MemoryBackend;
use crate::engine::Engine;
use crate::sled_backend::SledBackend;
use crate::{
    CreateOutcome, DeleteOutcome, KeyValue, ListOptions, ListOutcome, Result, Revision, Store,
    StoreConfig, UpdateOutcome, WatchOutcome,
};

/// The durable store on sled: one atomic sled batch and one flush per group of writes; a directory
/// that is not a minik8s store or does not decode fails [`SledStore::open`] with
/// [`crate::Error::Corrupt`] naming the path.
///
/// Opening starts three threads (writer, flusher, compaction ticker); no tokio runtime is needed to
/// open, the async methods run on any executor. sled locks the directory: to reopen it in the same
/// process, call [`Store::flush_and_close`] and drop the store and its watch streams first.
pub struct SledStore {
    engine: Engine<SledBackend>,
    path: PathBuf,
}

impl SledStore {
    /// Open (or create) the store in directory `path`. A directory that is not a minik8s store, or
    /// whose data does not decode, fails with [`crate::Error::Corrupt`] naming the path.
    pub fn open(path: &Path, cfg: StoreConfig) -> Result<Self> {
        let backend = SledBackend::open(
            path,
            cfg.sled_cache_bytes,
            cfg.fsync,
            cfg.space_reserve_bytes,
        )?;
        let engine = Engine::start(backend, cfg, "store")?;
        tracing::info!(path = %path.display(), revision = engine.current_revision(), "sled store opened");
        Ok(Self {
            engine,
            path: path.to_owned(),
        })
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Live watch subscribers (watchers that finished catching up), for tests and metrics.
    pub fn watcher_count(&self) -> usize {
        self.engine.watcher_count()
    }

    /// Commit and watcher counters.
    pub fn stats(&self) -> crate::StoreStats {
        self.engine.stats()
    }

    #[allow(dead_code)]
    fn backend(&self) -> &SledBackend {
        self.engine.backend()
    }
}

/// The in-memory store: same engine and contract, nothing written to any file.
///
/// A pure in-memory back end (the engine's index plus an in-memory event log) rather than sled's
/// `Config::temporary`: it provably writes no files anywhere, it is much faster (no flush), and it runs
/// the very same engine code, so the contract suite covers both.
pub struct MemoryStore {
    engine: Engine<MemoryBackend>,
}

impl MemoryStore {
    pub fn new(cfg: StoreConfig) -> Result<Self> {
        Ok(Self {
            engine: Engine::start(MemoryBackend::default(), cfg, "memstore")?,
        })
    }

    /// Live watch subscribers (watchers that finished catching up), for tests and metrics.
    pub fn watcher_count(&self) -> usize {
        self.engine.watcher_count()
    }

    /// Commit and watcher counters.
    pub fn stats(&self) -> crate::StoreStats {
        self.engine.stats()
    }
}

macro_rules! delegate_store {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl Store for $ty {
            async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
                self.engine.get(key).await
            }
            async fn create(&self, key: &str, value: Bytes) -> Result<CreateOutcome> {
                self.engine.create(key, value).await
            }
            async fn update(
                &self,
                key: &str,
                value: Bytes,
                expected: Option<Revision>,
            ) -> Result<UpdateOutcome> {
                self.engine.update(key, value, expected).await
            }
            async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<DeleteOutcome> {
                self.engine.delete(key, expected).await
            }
            async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListOutcome> {
                self.engine.list(prefix, opts).await
            }
            fn watch(&self, prefix: &str, after: Revision, buffer: usize) -> Result<WatchOutcome> {
                self.engine.watch(prefix, after, buffer)
            }
            fn current_revision(&self) -> Revision {
                self.engine.current_revision()
            }
            fn compacted_revision(&self) -> Revision {
                self.engine.compacted_revision()
            }
            fn health(&self) -> Result<()> {
                self.engine.health()
            }
            async fn flush_and_close(&self) -> Result<()> {
                self.engine.flush_and_close().await
            }
        }
    };
}

delegate_store!(SledStore);
delegate_store!(MemoryStore);

/// Open the store a process runs on: [`SledStore`] in `data_dir`, or a [`MemoryStore`] when `None`
/// (`--in-memory`; writes no files at all).
pub fn open_store(data_dir: Option<&Path>, cfg: StoreConfig) -> Result<std::sync::Arc<dyn Store>> {
    Ok(match data_dir {
        Some(path) => std::sync::Arc::new(SledStore::open(path, cfg)?),
        None => std::sync::Arc::new(MemoryStore::new(cfg)?),
    })
}
