//! The values the store contract speaks in: key-values with revisions, events, and one outcome enum per
//! operation.
//!
//! Revisions: one global counter, dense. Revision 0 means "nothing written yet"; the first committed
//! write gets revision 1 and every later write exactly the next number. `mod_revision` of a key-value
//! is the revision of the write that produced it; `create_revision` that of the create that started its
//! current life (a delete ends it; a later create starts a new life).

use std::time::Duration;

use bytes::Bytes;

/// A global store revision (Kubernetes `resourceVersion`, decimal). 0 = nothing written yet.
pub type Revision = u64;

/// Largest value the store accepts: etcd's `--max-request-bytes` default, 1.5 MiB.
pub const MAX_VALUE_SIZE: usize = 1_572_864;

/// One stored key and its value at some revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// Revision of the create that started this key's current life.
    pub create_revision: Revision,
    /// Revision of the write that produced this value.
    pub mod_revision: Revision,
}

/// What a committed write did to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Create or update: `value` holds the new state.
    Put,
    /// Delete: `value` is `None`, `prev` holds the last state.
    Delete,
}

/// One committed write, as a watcher sees it. Exactly one event per revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub key: String,
    pub revision: Revision,
    /// New state; `None` for a delete.
    pub value: Option<KeyValue>,
    /// State before this write; `None` for a create (the key did not exist at `revision - 1`).
    pub prev: Option<KeyValue>,
}

impl Event {
    /// True when this event created the key (it did not exist at `revision - 1`).
    pub fn is_create(&self) -> bool {
        self.kind == EventKind::Put && self.prev.is_none()
    }
}

/// Outcome of [`crate::Store::create`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    Created(KeyValue),
    /// The key exists; nothing was written. Carries the current value.
    AlreadyExists(KeyValue),
}

/// Outcome of [`crate::Store::update`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateOutcome {
    Updated {
        kv: KeyValue,
        prev: KeyValue,
    },
    /// The key does not exist; nothing was written.
    NotFound,
    /// The key's `mod_revision` is not the expected one; nothing was written. Carries the current value.
    Conflict(KeyValue),
}

/// Outcome of [`crate::Store::delete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// `revision` is the revision of the delete itself.
    Deleted {
        prev: KeyValue,
        revision: Revision,
    },
    NotFound,
    /// The key's `mod_revision` is not the expected one; nothing was deleted. Carries the current value.
    Conflict(KeyValue),
}

/// Options of [`crate::Store::list`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Most items in one page; `None` = all.
    pub limit: Option<usize>,
    /// Token from a previous page; the page is served at the token's revision, after its last key.
    /// It overrides `revision`.
    pub continue_token: Option<String>,
    /// List exactly at this revision; `None` = latest.
    pub revision: Option<Revision>,
}

impl ListOptions {
    /// A list at `revision` that starts strictly after `key`: what the continue token of a page
    /// ending at `key` asks for (a caller that keeps its own position, such as the apiserver
    /// listing a resource it does not cache, resumes with it).
    pub fn after_key(revision: Revision, key: &str, limit: Option<usize>) -> Self {
        let token = crate::continue_token::ContinueToken {
            revision,
            after_key: key.to_owned(),
        };
        ListOptions {
            limit,
            continue_token: Some(token.encode()),
            revision: None,
        }
    }
}

/// One page of a list: items in ascending key order, all as of `revision`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    pub items: Vec<KeyValue>,
    /// The revision the page is consistent at (the first page's revision for every later page).
    pub revision: Revision,
    /// Present when more items remain; pass it in [`ListOptions::continue_token`].
    pub continue_token: Option<String>,
    /// How many items remain after this page, when the store knows it cheaply.
    pub remaining: Option<u64>,
}

/// Outcome of [`crate::Store::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListOutcome {
    Listed(ListPage),
    /// The requested (or token's) revision is older than the history the store keeps (HTTP 410).
    Expired {
        compacted: Revision,
    },
    /// The continue token is malformed (HTTP 400).
    InvalidContinue,
    /// The requested revision is newer than the store's current one.
    FutureRevision {
        current: Revision,
    },
}

/// Outcome of [`crate::Store::watch`].
#[derive(Debug)]
pub enum WatchOutcome {
    Watching(crate::WatchStream),
    /// `after` is older than the oldest revision a watch can start after (HTTP 410).
    Expired {
        compacted: Revision,
    },
}

/// Tuning of a store. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Keep at most this many events in the log (older ones are compacted). Default 100,000.
    pub event_log_max_events: u64,
    /// Compact events older than this. Default 10 minutes.
    pub event_log_max_age: Duration,
    /// How often background compaction runs. Default 5 s.
    pub compaction_interval: Duration,
    /// Buffer of a watcher that does not choose one (`buffer == 0` in [`crate::Store::watch`]).
    /// Default 1,024 events.
    pub default_watch_buffer: usize,
    /// Bound of the queue of writes waiting for the writer (backpressure beyond it). Default 4,096.
    pub write_queue: usize,
    /// Most writes committed in one batch (one flush). Default 1,024.
    pub max_batch: usize,
    /// sled page-cache size in bytes (sled only). Default 64 MiB.
    pub sled_cache_bytes: u64,
    /// After each sled flush, also `fdatasync` the log file and `fsync` new blob files (sled only).
    /// `true` (default): acknowledged writes survive power loss. `false`: sled's flush alone
    /// (`sync_file_range`), which survives a process crash (kill -9) but not a power loss or a kernel
    /// crash; faster on disks with a slow cache flush.
    pub fsync: bool,
    /// Free space the store keeps on its file system (on-disk back ends only): below it creates and
    /// updates are refused with [`crate::Error::NoSpace`], below a quarter of it deletes too.
    /// Default 16 MiB: room for the batches in flight, sled's new log segments and a snapshot.
    pub space_reserve_bytes: u64,
    /// Key prefixes whose values the store does not keep in memory once durable (on-disk back ends
    /// only): its index keeps such a key's revisions, and reads fetch the value from disk. For data
    /// that is written much and read little, as Events are. Default none.
    pub cold_prefixes: Vec<String>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            event_log_max_events: 100_000,
            event_log_max_age: Duration::from_secs(600),
            compaction_interval: Duration::from_secs(5),
            default_watch_buffer: 1_024,
            write_queue: 4_096,
            max_batch: 1_024,
            sled_cache_bytes: 64 * 1024 * 1024,
            fsync: true,
            space_reserve_bytes: 16 * 1024 * 1024,
            cold_prefixes: Vec::new(),
        }
    }
}

/// Counters of a running store, for benchmarks and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Durable commits (one flush each).
    pub commits: u64,
    /// Writes those commits carried; `committed_writes / commits` is the mean group-commit size.
    pub committed_writes: u64,
    /// Live watch subscribers.
    pub watchers: usize,
    /// Total time the writer spent applying batches to the back end, and the flusher flushing.
    pub apply_nanos: u64,
    pub flush_nanos: u64,
}
