//! The store's one error type.
//!
//! Errors are for failures the caller cannot act on by matching: I/O, corruption, a closed store, a
//! value over the size limit. Expected outcomes of an operation (conflict, already-exists, not-found,
//! expired) are *not* errors: they are variants of the operation's outcome enum
//! (see [`crate::CreateOutcome`] and friends), so `?` can never turn a 409 into a 500.

use std::path::PathBuf;

/// Everything that can go wrong in the store that is not an expected outcome.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value was larger than [`crate::MAX_VALUE_SIZE`] (etcd's request limit); nothing was written.
    #[error("value of {size} bytes exceeds the store limit of {limit} bytes")]
    ValueTooLarge { size: usize, limit: usize },

    /// The data directory holds data this store cannot decode. Nothing is reset: the operator decides.
    #[error("store data at {path} is corrupt: {detail}")]
    Corrupt { path: PathBuf, detail: String },

    /// Opening the data directory failed (missing permissions, not a sled database, locked, ...).
    #[error("cannot open store at {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: sled::Error,
    },

    /// A sled operation failed after start-up (read, commit, flush, compaction).
    #[error("store {operation} failed")]
    Sled {
        operation: &'static str,
        #[source]
        source: sled::Error,
    },

    /// A file-system operation failed (creating the data directory, ...).
    #[error("store I/O on {path} failed")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The store's file system is (nearly) full: the write was refused before it reached the disk
    /// (see `space`), or the disk ran out under it (then the store is also failed).
    #[error("the store has no space left: {detail}")]
    NoSpace { detail: String },

    /// The store was closed ([`crate::Store::flush_and_close`]) or its writer stopped.
    #[error("store is closed")]
    Closed,

    /// An earlier commit failed, so the outcome of that batch on disk is unknown; the store refuses
    /// further writes instead of guessing until it has reopened from what is durable.
    #[error(
        "store is failed after an earlier commit error; writes are refused until it has reopened"
    )]
    Failed,

    /// A value the index holds on disk alone changed during the read and its state at the read's
    /// revision could not be found in the log (a write that raced the read was compacted away
    /// already, or the object on disk was not the index's); reading again sees the new state.
    #[error("a stored value changed while it was read; read again")]
    Raced,

    /// A request to etcd failed (unreachable, no leader, timed out, refused): its outcome is unknown
    /// to the caller unless etcd said otherwise. `detail` is etcd's (or gRPC's) message.
    #[error("etcd {operation} failed: {detail}")]
    Etcd {
        operation: &'static str,
        detail: String,
    },

    /// The store's background threads could not be started.
    #[error("cannot start store thread {name}")]
    Spawn {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// What each write of a batch whose commit failed with `self` is told: a full disk by name,
    /// anything else as [`Error::Failed`].
    pub(crate) fn for_each_write(&self) -> Error {
        match self {
            Error::NoSpace { detail } => Error::NoSpace {
                detail: detail.clone(),
            },
            _ => Error::Failed,
        }
    }
}

/// `Result` with the store's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
