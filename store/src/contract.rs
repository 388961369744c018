//! The store contract: the trait every back end implements and the apiserver codes against
//! (`Arc<dyn Store>`).
//!
//! Guarantees every implementation gives (checked by [`crate::conformance`]):
//! - **Revisions**: one global counter; each committed create, update or delete increments it by exactly
//!   one. After a restart it continues where it was; it never goes back and never skips.
//! - **Durability**: a write returns only after its data is durable (for on-disk back ends: flushed).
//!   Reads never return data that is not yet acknowledged durable.
//! - **Linearizable reads**: a `get` or `list` issued after a write returned sees that write.
//! - **Watch**: every change with revision > `after`, in revision order, no gap, no duplicate, each
//!   event with its new and previous value; a watcher that falls behind its buffer is ended with
//!   [`crate::WatchClosedReason::FellBehind`], never blocking writers.
//! - **History**: a watch or list at a revision older than the retained event log is `Expired`.

use bytes::Bytes;

use crate::{
    CreateOutcome, DeleteOutcome, KeyValue, ListOptions, ListOutcome, Result, Revision,
    UpdateOutcome, WatchOutcome,
};

/// A versioned key-value store with etcd's semantics. Object-safe: use it as `Arc<dyn Store>`.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The current value of `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Create `key`; `AlreadyExists` if it exists. Values over [`crate::MAX_VALUE_SIZE`] are
    /// `Err(ValueTooLarge)`.
    async fn create(&self, key: &str, value: Bytes) -> Result<CreateOutcome>;

    /// Replace the value of `key`. With `expected = Some(rev)` only if its `mod_revision == rev`
    /// (else `Conflict`); `NotFound` if the key does not exist.
    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<UpdateOutcome>;

    /// Delete `key`, with the same precondition as `update`.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<DeleteOutcome>;

    /// Keys starting with `prefix`, ascending, all at one consistent revision (latest, or
    /// `opts.revision`, or the continue token's), paginated by `opts.limit`.
    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListOutcome>;

    /// Every change with revision > `after`, for keys starting with `prefix` ("" = all).
    /// `buffer` is the watcher's bound (0 = the store's default). `after` may be in the future: then
    /// the first event delivered has revision > `after`.
    fn watch(&self, prefix: &str, after: Revision, buffer: usize) -> Result<WatchOutcome>;

    /// [`watch`](Self::watch) for a watcher no consistent read waits on (one client's watch of
    /// a resource the apiserver does not cache): the store need not report its progress, so a
    /// prefix chosen by a request adds nothing to what every consistent read costs (etcd: no
    /// progress key is written and no progress request sent for it).
    fn watch_passive(&self, prefix: &str, after: Revision, buffer: usize) -> Result<WatchOutcome> {
        self.watch(prefix, after, buffer)
    }

    /// Revision of the last acknowledged write (0 if none).
    fn current_revision(&self) -> Revision;

    /// The current revision for a consistent ("most recent") read: the revision of the last write
    /// acknowledged by any client of the store, not only by this process. For a store with one
    /// writer process that is [`Store::current_revision`]; for etcd a quorum read, after which the
    /// store's live watches report progress up to it ([`crate::WatchItem::Progress`]).
    async fn consistent_revision(&self) -> Result<Revision> {
        Ok(self.current_revision())
    }

    /// Oldest revision a watch can start after (events with revision > it are retained).
    fn compacted_revision(&self) -> Revision;

    /// Whether the store takes writes now (its readiness, as etcd's health for kube-apiserver's
    /// `/readyz`): `Err(NoSpace)` while its disk has no room for creates and updates, `Err(Failed)`
    /// after a failed commit. Cheap (one look at the file system at most).
    fn health(&self) -> Result<()> {
        Ok(())
    }

    /// Clean shutdown: finish writes already submitted, flush, end every watcher with
    /// [`crate::WatchClosedReason::StoreShutdown`]. Later writes get `Err(Closed)`.
    async fn flush_and_close(&self) -> Result<()>;
}
