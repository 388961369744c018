//! `store`: a versioned key-value store with etcd's semantics, behind the [`Store`] trait.
//!
//! - [`SledStore`]: durable, on sled. One writer thread assigns dense revisions, commits a batch of
//!   writes (objects, event log, revision counter) in one sled transaction, flushes once (group
//!   commit), then acknowledges and publishes the batch's events, in that order.
//! - [`MemoryStore`]: the same engine with a pure in-memory back end, for tests and `--in-memory`.
//! - [`conformance`]: the contract suite, generic over [`Store`]; every back end runs it.
//!
//! Guarantees are stated on the [`Store`] trait; the mechanisms in each module's docs.

mod backend;
mod codec;
pub mod conformance;
mod continue_token;
mod contract;
mod engine;
mod error;
mod sled_backend;
mod stores;
mod types;
mod watch;

pub use contract::Store;
pub use error::{Error, Result};
pub use stores::{MemoryStore, SledStore};
pub use types::{
    CreateOutcome, DeleteOutcome, Event, EventKind, KeyValue, ListOptions, ListOutcome, ListPage,
    Revision, StoreConfig, StoreStats, UpdateOutcome, WatchOutcome, MAX_VALUE_SIZE,
};
pub use watch::{WatchClosedReason, WatchItem, WatchStream};
