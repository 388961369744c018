//! `store`: a versioned key-value store with etcd's semantics, behind the [`Store`] trait.
//!
//! - [`SledStore`]: durable, on sled. A writer thread assigns dense revisions and applies each batch
//!   of writes (objects, event log entries, revision counter) as one atomic sled batch; a flusher
//!   thread flushes once per batch (group commit), then applies it to the in-memory index,
//!   acknowledges and publishes the batch's events, in that order.
//! - [`MemoryStore`]: the same engine over a pure in-memory back end (no files at all), for tests and
//!   `--in-memory`; [`open_store`] picks one of the two.
//! - [`EtcdStore`]: the same contract on an etcd v3 cluster (several apiservers on one store);
//!   [`etcd::server`] runs etcd members for tests and benchmarks.
//! - [`conformance`]: the contract suite, generic over [`Store`]; every back end runs it.
//!
//! Guarantees are stated on the [`Store`] trait; the mechanisms in each module's docs:
//! `engine` (pipeline, index, lists at a revision, compaction), `watch` (hub and streams),
//! `sled_backend` (layout, atomicity, corruption), `backend` (the persistence boundary),
//! `codec` and `continue_token` (encodings), `space` (the disk reserve).

mod backend;
mod codec;
pub mod conformance;
mod continue_token;
mod contract;
mod engine;
mod error;
pub mod etcd;
mod sled_backend;
mod space;
mod stores;
mod types;
mod watch;

pub use contract::Store;
pub use error::{Error, Result};
pub use etcd::{EtcdConfig, EtcdStore};
pub use stores::{open_store, MemoryStore, SledStore};
pub use types::{
    CreateOutcome, DeleteOutcome, Event, EventKind, KeyValue, ListOptions, ListOutcome, ListPage,
    Revision, StoreConfig, StoreStats, UpdateOutcome, WatchOutcome, MAX_VALUE_SIZE,
};
pub use watch::{WatchClosedReason, WatchItem, WatchStream};
