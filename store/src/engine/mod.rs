//! The engine every back end shares: the write pipeline, an in-memory index, reads, lists, watches.
//!
//! **Writes.** Callers send a write to a bounded queue (`StoreConfig::write_queue`; a full queue is
//! backpressure on the caller, never unbounded memory) and wait for its outcome. Two threads form a
//! pipeline, so that applying one batch overlaps flushing the previous one (a back end with nothing
//! to flush, the in-memory one, skips the pipeline: each caller evaluates, applies, indexes and
//! publishes its own write under one lock, the same four steps without two thread hand-offs):
//! - the **writer** takes everything queued (at most `max_batch`), evaluates preconditions in order
//!   against the index plus the writes applied but not yet indexed (its overlay), assigns dense
//!   revisions, and applies the batch's events atomically to the back end (objects, log, revision);
//! - the **flusher** takes every applied batch waiting (a bounded queue of `FLUSH_QUEUE` batches),
//!   flushes once for all of them (group commit: the flush covers every batch applied before it
//!   started), then for each batch in revision order applies the events to the in-memory index and
//!   advances the revision under the index lock, acknowledges every caller, and publishes the events
//!   to watchers. Outcomes that only read (`Conflict`, ...)
//!   are held back the same way, since they may reveal earlier writes that are not yet durable.
//!
//! A failed commit leaves the on-disk outcome unknown, so the store turns *failed*: that batch and
//! every later write get an error until the writer has reopened the back end and taken what is
//! durable as the truth, as a restart would (tried at most once a second, on the next write or
//! compaction tick; `Writer::recover`). Before that can happen on a full disk, writes the disk has
//! no room for are refused one by one before they are applied (`crate::space`), which latches
//! nothing.
//!
//! **Reads** (`get`, `list`) are served from the index, which holds only acknowledged-durable data:
//! sled itself exposes applied-but-unflushed data, which etcd's guarantee ("a read never returns data
//! that has not been made durable") forbids. A read after an acknowledged write sees it.
//! The index holds every current key-value; values are `Bytes`, shared with events and callers.
//! Keys under [`StoreConfig::cold_prefixes`] are the exception, for a back end that keeps its
//! objects: once indexed, such a key's value is left to the back end, and a read fetches it — the
//! object on disk when it is still the indexed state, else (a later write applied, not yet
//! indexed) the `prev` of that write's logged event ([`Engine::thaw`]).
//!
//! **Lists at an older revision** (continue tokens, `ListOptions::revision`) are exact: the page is the
//! current index with every key touched after the target revision replaced by its state before the
//! first such touch (the `prev` of that event in the log). A target older than the log is `Expired`.
//!
//! **Compaction** runs on the writer thread between batches (so it never races an apply), at most
//! `COMPACT_STEP` events per tick: the count bound and the age bound of the config.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::RwLock;
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Backend, Loaded};
use crate::continue_token::ContinueToken;
use crate::watch::{Hub, WatchSource};

mod writer;

use crate::{
    CreateOutcome, DeleteOutcome, Error, Event, KeyValue, ListOptions, ListOutcome, ListPage,
    Result, Revision, StoreConfig, UpdateOutcome, WatchOutcome, WatchStream, MAX_VALUE_SIZE,
};
use writer::{flusher, Writer};

/// Applied batches that may wait for the flusher (each at most `max_batch` writes): bounds memory and
/// how far applying may run ahead of durability.
const FLUSH_QUEUE: usize = 8;

enum WriteOp {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Option<Revision>,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
}

impl WriteOp {
    /// What the write needs from the disk.
    fn need(&self) -> crate::space::Need {
        match self {
            WriteOp::Create { .. } | WriteOp::Update { .. } => crate::space::Need::Grow,
            WriteOp::Delete { .. } => crate::space::Need::Shrink,
        }
    }
}

enum WriteOutcome {
    Create(CreateOutcome),
    Update(UpdateOutcome),
    Delete(DeleteOutcome),
}

enum Command {
    Write(WriteOp, oneshot::Sender<Result<WriteOutcome>>),
    Compact,
    Close(oneshot::Sender<Result<()>>),
}

/// The index: every current key, its revisions and (unless held cold) its value, and the revision
/// it is consistent at.
struct Index {
    revision: Revision,
    items: BTreeMap<String, Held>,
    /// [`StoreConfig::cold_prefixes`], or nothing for a back end that keeps no objects.
    cold: Vec<String>,
}

/// A key's state in the index. `value` is `None` for a key under a cold prefix: once durable, the
/// back end alone holds the value, and reads fetch it ([`Engine::thaw`]).
#[derive(Debug, Clone)]
struct Held {
    value: Option<Bytes>,
    create_revision: Revision,
    mod_revision: Revision,
}

impl Index {
    fn new(revision: Revision, items: Vec<KeyValue>, cold: Vec<String>) -> Self {
        // Collected, so the map is built in bulk from the sorted entries.
        let items = items.into_iter().map(|kv| hold(&cold, kv)).collect();
        Self {
            revision,
            items,
            cold,
        }
    }

    /// Indexes `kv` as its key's current state, its value dropped if the key is under a cold prefix.
    fn insert(&mut self, kv: KeyValue) {
        let (key, held) = hold(&self.cold, kv);
        self.items.insert(key, held);
    }

    /// `key`'s state; its value is empty when held cold (the second member says so).
    fn get(&self, key: &str) -> Option<(KeyValue, bool)> {
        self.items.get(key).map(|held| held.state(key))
    }
}

/// `kv` as an index entry: its value dropped if its key is under one of the `cold` prefixes.
fn hold(cold: &[String], kv: KeyValue) -> (String, Held) {
    let is_cold = cold.iter().any(|prefix| kv.key.starts_with(prefix));
    let held = Held {
        value: (!is_cold).then_some(kv.value),
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
    };
    (kv.key, held)
}

impl Held {
    /// This state as a key-value, and whether its value is still to be read (held cold).
    fn state(&self, key: &str) -> (KeyValue, bool) {
        let kv = KeyValue {
            key: key.to_owned(),
            value: self.value.clone().unwrap_or_default(),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
        };
        (kv, self.value.is_none())
    }
}

/// The write lock of a back end that writes inline ([`Backend::writes_inline`]).
struct Inline {
    /// The revision the next write gets.
    next: Revision,
    /// Written by the write being evaluated (always empty in between: every earlier write is indexed).
    overlay: HashMap<String, (Option<KeyValue>, Revision)>,
    /// Set by close: later writes fail with `Closed`.
    closed: bool,
}

pub(crate) struct Shared<B: Backend> {
    backend: B,
    /// `Some` when writes run inline; then it also orders compaction against them.
    inline: Option<parking_lot::Mutex<Inline>>,
    /// Written only by the writer thread, after the back end made the batch durable.
    index: RwLock<Index>,
    hub: Hub,
    /// Events with revision > this are in the log. Raised *before* entries are removed.
    compacted: AtomicU64,
    /// Set when a commit failed; all later writes are refused.
    failed: AtomicBool,
    /// Durable commits (flushes) so far, and the writes they carried: their ratio is the group size.
    commits: AtomicU64,
    committed_writes: AtomicU64,
    /// Time spent in back-end apply and flush, for benchmarks.
    apply_nanos: AtomicU64,
    flush_nanos: AtomicU64,
    config: StoreConfig,
}

impl<B: Backend> WatchSource for Shared<B> {
    fn read_log(&self, after: Revision, upto: Revision, max: usize) -> Result<Vec<Event>> {
        self.backend.read_log(after, upto, max)
    }
    fn compacted_revision(&self) -> Revision {
        self.compacted.load(Ordering::Acquire)
    }
    fn hub(&self) -> &Hub {
        &self.hub
    }
}

/// A running store over back end `B`. Dropping it stops the writer once queued writes are done.
pub(crate) struct Engine<B: Backend> {
    shared: Arc<Shared<B>>,
    commands: mpsc::Sender<Command>,
}

fn elapsed_nanos(started: std::time::Instant) -> u64 {
    u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl<B: Backend> Engine<B> {
    pub(crate) fn start(backend: B, config: StoreConfig, name: &'static str) -> Result<Self> {
        // Only a back end that keeps the objects can be read a cold value from.
        let cold = if backend.keeps_objects() {
            config.cold_prefixes.clone()
        } else {
            Vec::new()
        };
        let Loaded {
            revision,
            compacted,
            items,
        } = backend.load(&cold)?;
        let index = Index::new(revision, items, cold);
        let inline = backend.writes_inline().then(|| {
            parking_lot::Mutex::new(Inline {
                next: revision + 1,
                overlay: HashMap::new(),
                closed: false,
            })
        });
        let shared = Arc::new(Shared {
            backend,
            inline,
            index: RwLock::new(index),
            hub: Hub::new(revision),
            compacted: AtomicU64::new(compacted),
            failed: AtomicBool::new(false),
            commits: AtomicU64::new(0),
            committed_writes: AtomicU64::new(0),
            apply_nanos: AtomicU64::new(0),
            flush_nanos: AtomicU64::new(0),
            config: config.clone(),
        });
        let (commands, rx) = mpsc::channel(config.write_queue.max(1));
        // Applied batches wait here while the previous flush runs; the next flush covers them all.
        let (stages, stage_rx) = std::sync::mpsc::sync_channel(FLUSH_QUEUE);
        let flusher_shared = Arc::clone(&shared);
        let flusher = std::thread::Builder::new()
            .name(format!("{name}-flusher"))
            .spawn(move || flusher(flusher_shared, stage_rx))
            .map_err(|source| Error::Spawn {
                name: "flusher",
                source,
            })?;
        let writer = Writer {
            shared: Arc::clone(&shared),
            overlay: HashMap::new(),
            next: revision + 1,
            stages,
            flusher,
            last_recovery: None,
            short_of_space: false,
        };
        std::thread::Builder::new()
            .name(format!("{name}-writer"))
            .spawn(move || writer.run(rx))
            .map_err(|source| Error::Spawn {
                name: "writer",
                source,
            })?;
        // The ticker holds only a weak sender: it ends when the store is dropped or closed.
        let ticker = commands.downgrade();
        let interval = config.compaction_interval.max(Duration::from_millis(10));
        std::thread::Builder::new()
            .name(format!("{name}-compact"))
            .spawn(move || loop {
                std::thread::sleep(interval);
                let Some(sender) = ticker.upgrade() else {
                    return;
                };
                match sender.try_send(Command::Compact) {
                    Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => {}
                    Err(mpsc::error::TrySendError::Closed(_)) => return,
                }
            })
            .map_err(|source| Error::Spawn {
                name: "compaction ticker",
                source,
            })?;
        tracing::debug!(revision, compacted, "store started");
        Ok(Self { shared, commands })
    }

    pub(crate) fn backend(&self) -> &B {
        &self.shared.backend
    }

    async fn submit(&self, op: WriteOp) -> Result<WriteOutcome> {
        if let Some(inline) = &self.shared.inline {
            return self.write_inline(inline, op);
        }
        let (reply, outcome) = oneshot::channel();
        self.commands
            .send(Command::Write(op, reply))
            .await
            .map_err(|_| Error::Closed)?;
        outcome.await.map_err(|_| Error::Closed)?
    }

    /// The writer's and the flusher's steps for one write, on the caller's thread: evaluate and
    /// assign a revision, apply, index, publish. Under the inline lock, so writes stay in revision
    /// order and each sees every earlier one in the index.
    fn write_inline(
        &self,
        inline: &parking_lot::Mutex<Inline>,
        op: WriteOp,
    ) -> Result<WriteOutcome> {
        let shared = &*self.shared;
        let mut guard = inline.lock();
        let Inline {
            next,
            overlay,
            closed,
        } = &mut *guard;
        if *closed {
            return Err(Error::Closed);
        }
        if shared.failed.load(Ordering::Acquire) {
            return Err(Error::Failed);
        }
        writer::room_for(shared, op.need())?;
        let (events, mut outcomes) = {
            let index = shared.index.read();
            let evaluated =
                writer::evaluate(&shared.backend, &index, overlay, next, vec![(op, ())]);
            overlay.clear();
            evaluated
        };
        let ((), outcome) = outcomes.pop().ok_or(Error::Failed)?;
        let outcome = outcome?;
        let Some(last) = events.last() else {
            return Ok(outcome);
        };
        let started = std::time::Instant::now();
        if let Err(error) = shared.backend.apply(&events, now_ms()) {
            tracing::error!(%error, "store commit failed; refusing further writes");
            shared.failed.store(true, Ordering::Release);
            return Err(error.for_each_write());
        }
        shared
            .apply_nanos
            .fetch_add(elapsed_nanos(started), Ordering::Relaxed);
        shared.commits.fetch_add(1, Ordering::Relaxed);
        shared
            .committed_writes
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        {
            let mut index = shared.index.write();
            writer::index_events(&mut index, &events);
            index.revision = last.revision;
        }
        shared.hub.publish(&events);
        Ok(outcome)
    }

    fn check_size(value: &Bytes) -> Result<()> {
        if value.len() > MAX_VALUE_SIZE {
            return Err(Error::ValueTooLarge {
                size: value.len(),
                limit: MAX_VALUE_SIZE,
            });
        }
        Ok(())
    }

    pub(crate) async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let (found, seen) = {
            let index = self.shared.index.read();
            (index.get(key), index.revision)
        };
        found
            .map(|(kv, is_cold)| thaw_one(&self.shared.backend, seen, kv, is_cold))
            .transpose()
    }

    pub(crate) async fn create(&self, key: &str, value: Bytes) -> Result<CreateOutcome> {
        Self::check_size(&value)?;
        let key = key.to_owned();
        match self.submit(WriteOp::Create { key, value }).await? {
            WriteOutcome::Create(outcome) => Ok(outcome),
            _ => Err(Error::Failed),
        }
    }

    pub(crate) async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<UpdateOutcome> {
        Self::check_size(&value)?;
        let key = key.to_owned();
        match self
            .submit(WriteOp::Update {
                key,
                value,
                expected,
            })
            .await?
        {
            WriteOutcome::Update(outcome) => Ok(outcome),
            _ => Err(Error::Failed),
        }
    }

    pub(crate) async fn delete(
        &self,
        key: &str,
        expected: Option<Revision>,
    ) -> Result<DeleteOutcome> {
        let key = key.to_owned();
        match self.submit(WriteOp::Delete { key, expected }).await? {
            WriteOutcome::Delete(outcome) => Ok(outcome),
            _ => Err(Error::Failed),
        }
    }

    pub(crate) async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListOutcome> {
        let (target, after_key) = match &opts.continue_token {
            Some(token) => match ContinueToken::decode(token) {
                Some(token) => (Some(token.revision), Some(token.after_key)),
                None => return Ok(ListOutcome::InvalidContinue),
            },
            None => (opts.revision, None),
        };
        let limit = opts.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let start = match &after_key {
            Some(key) => Bound::Excluded(key.clone()),
            None => Bound::Included(prefix.to_owned()),
        };
        let index = self.shared.index.read();
        let current = index.revision;
        let target = target.unwrap_or(current);
        if target > current {
            return Ok(ListOutcome::FutureRevision { current });
        }
        if target == current {
            let mut range = index
                .items
                .range((start, Bound::Unbounded))
                .take_while(|(k, _)| k.starts_with(prefix));
            let mut items = Vec::new();
            let mut cold = Vec::new();
            for (key, held) in range.by_ref().take(limit) {
                let (kv, is_cold) = held.state(key);
                if is_cold {
                    cold.push(items.len());
                }
                items.push(kv);
            }
            let remaining = range.count() as u64;
            drop(index);
            thaw(&self.shared.backend, current, &mut items, &cold)?;
            return Ok(ListOutcome::Listed(page(
                items,
                current,
                remaining > 0,
                Some(remaining),
            )));
        }
        drop(index);

        // Historical: the state at `target` of every key changed since is the `prev` of its first
        // later event. Fold the log (target, R] in chunks until R is the index's revision, then merge
        // with the untouched keys of the index, lazily, under its read lock.
        let compacted = self.shared.compacted_revision();
        if target < compacted {
            return Ok(ListOutcome::Expired { compacted });
        }
        let in_range = |key: &str| {
            key.starts_with(prefix) && after_key.as_deref().is_none_or(|after| key > after)
        };
        let mut at_target: HashMap<String, Option<KeyValue>> = HashMap::new();
        let mut folded = target;
        let mut attempts = 0;
        let index = loop {
            let upto = self.current_revision();
            if !self.fold_log(&mut folded, upto, &in_range, &mut at_target)? {
                return Ok(ListOutcome::Expired {
                    compacted: self.shared.compacted_revision(),
                });
            }
            let index = self.shared.index.read();
            attempts += 1;
            if index.revision == folded {
                break index;
            }
            if attempts >= 3 {
                // Writes keep coming: fold the (short) rest while holding the index still.
                if !self.fold_log(&mut folded, index.revision, &in_range, &mut at_target)? {
                    return Ok(ListOutcome::Expired {
                        compacted: self.shared.compacted_revision(),
                    });
                }
                break index;
            }
        };
        // Both sides as (key, state, held cold): the log's states carry their values.
        let mut changed: Vec<(&str, KeyValue, bool)> = at_target
            .iter()
            .filter_map(|(k, state)| state.as_ref().map(|kv| (k.as_str(), kv.clone(), false)))
            .collect();
        changed.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut changed = changed.into_iter().peekable();
        let mut untouched = index
            .items
            .range((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(k, _)| !at_target.contains_key(k.as_str()))
            .map(|(k, held)| {
                let (kv, cold) = held.state(k);
                (k.as_str(), kv, cold)
            })
            .peekable();
        let mut next = || match (untouched.peek(), changed.peek()) {
            (Some(a), Some(b)) if a.0 < b.0 => untouched.next(),
            (Some(_), Some(_)) | (None, Some(_)) => changed.next(),
            (Some(_), None) => untouched.next(),
            (None, None) => None,
        };
        let mut items = Vec::new();
        let mut cold = Vec::new();
        while items.len() < limit {
            match next() {
                Some((_, kv, is_cold)) => {
                    if is_cold {
                        cold.push(items.len());
                    }
                    items.push(kv);
                }
                None => break,
            }
        }
        let mut remaining = 0u64;
        while next().is_some() {
            remaining += 1;
        }
        // The untouched keys are as the index has them now.
        let seen = index.revision;
        drop(index);
        thaw(&self.shared.backend, seen, &mut items, &cold)?;
        Ok(ListOutcome::Listed(page(
            items,
            target,
            remaining > 0,
            Some(remaining),
        )))
    }

    /// Fold logged events `(*folded, upto]` into `at_target` (first `prev` per key in range), in
    /// bounded chunks. `false` when the log has a hole there (compacted meanwhile).
    fn fold_log(
        &self,
        folded: &mut Revision,
        upto: Revision,
        in_range: &dyn Fn(&str) -> bool,
        at_target: &mut HashMap<String, Option<KeyValue>>,
    ) -> Result<bool> {
        const CHUNK: usize = 1_024;
        while *folded < upto {
            let events = self.shared.backend.read_log(*folded, upto, CHUNK)?;
            if events.is_empty() {
                return Ok(false);
            }
            for event in events {
                if event.revision != *folded + 1 {
                    return Ok(false);
                }
                *folded = event.revision;
                if in_range(&event.key) {
                    at_target.entry(event.key).or_insert(event.prev);
                }
            }
        }
        Ok(true)
    }

    pub(crate) fn watch(
        &self,
        prefix: &str,
        after: Revision,
        buffer: usize,
    ) -> Result<WatchOutcome> {
        if self.shared.hub.is_closed() {
            return Err(Error::Closed);
        }
        let compacted = self.shared.compacted_revision();
        if after < compacted {
            return Ok(WatchOutcome::Expired { compacted });
        }
        let buffer = if buffer == 0 {
            self.shared.config.default_watch_buffer
        } else {
            buffer
        };
        let source: Arc<dyn WatchSource> = Arc::clone(&self.shared) as Arc<dyn WatchSource>;
        Ok(WatchOutcome::Watching(WatchStream::new(
            source, prefix, after, buffer,
        )))
    }

    pub(crate) fn current_revision(&self) -> Revision {
        self.shared.index.read().revision
    }

    pub(crate) fn compacted_revision(&self) -> Revision {
        self.shared.compacted_revision()
    }

    pub(crate) fn stats(&self) -> crate::StoreStats {
        crate::StoreStats {
            commits: self.shared.commits.load(Ordering::Relaxed),
            committed_writes: self.shared.committed_writes.load(Ordering::Relaxed),
            apply_nanos: self.shared.apply_nanos.load(Ordering::Relaxed),
            flush_nanos: self.shared.flush_nanos.load(Ordering::Relaxed),
            watchers: self.shared.hub.subscriber_count(),
        }
    }

    /// Number of live watch subscribers (for tests and metrics).
    pub(crate) fn watcher_count(&self) -> usize {
        self.shared.hub.subscriber_count()
    }

    /// Whether the store takes writes: not failed, and room on disk for creates and updates.
    pub(crate) fn health(&self) -> Result<()> {
        if self.shared.failed.load(Ordering::Acquire) {
            return Err(writer::failed_because(
                &self.shared,
                crate::space::Need::Grow,
            ));
        }
        writer::room_for(&self.shared, crate::space::Need::Grow)
    }

    pub(crate) async fn flush_and_close(&self) -> Result<()> {
        let (reply, done) = oneshot::channel();
        if self.commands.send(Command::Close(reply)).await.is_err() {
            return Ok(()); // already closed
        }
        done.await.unwrap_or(Ok(()))
    }
}

/// Fills in the value of each `items[i]`, `i` in `cold`: states the index held cold at revision
/// `seen`. The back end's object is that state unless the key was written since; then the state
/// is the `prev` of the key's first logged event after `seen` (a later write is applied before it
/// is indexed, so it is in the log; compaction stays behind the index).
fn thaw<B: Backend>(
    backend: &B,
    seen: Revision,
    items: &mut [KeyValue],
    cold: &[usize],
) -> Result<()> {
    let mut moved: HashMap<String, usize> = HashMap::new();
    for &i in cold {
        let Some(kv) = items.get_mut(i) else {
            continue;
        };
        match backend.read_object(&kv.key)? {
            Some(stored) if stored.mod_revision == kv.mod_revision => kv.value = stored.value,
            Some(_) | None => {
                moved.insert(kv.key.clone(), i);
            }
        }
    }
    let mut after = seen;
    while !moved.is_empty() {
        const CHUNK: usize = 1_024;
        let events = backend.read_log(after, Revision::MAX, CHUNK)?;
        if events
            .first()
            .is_none_or(|first| first.revision != after + 1)
        {
            return Err(Error::Raced);
        }
        for event in events {
            after = event.revision;
            let Some(i) = moved.remove(&event.key) else {
                continue;
            };
            match (event.prev, items.get_mut(i)) {
                (Some(prev), Some(kv)) if prev.mod_revision == kv.mod_revision => {
                    kv.value = prev.value;
                }
                _ => return Err(Error::Raced),
            }
        }
    }
    Ok(())
}

/// `kv`, as the index held it at revision `seen`, with its value read if it was held cold.
fn thaw_one<B: Backend>(backend: &B, seen: Revision, kv: KeyValue, cold: bool) -> Result<KeyValue> {
    if !cold {
        return Ok(kv);
    }
    let mut items = [kv];
    thaw(backend, seen, &mut items, &[0])?;
    let [kv] = items;
    Ok(kv)
}

fn page(items: Vec<KeyValue>, revision: Revision, more: bool, remaining: Option<u64>) -> ListPage {
    let continue_token = match (more, items.last()) {
        (true, Some(last)) => Some(
            ContinueToken {
                revision,
                after_key: last.key.clone(),
            }
            .encode(),
        ),
        _ => None,
    };
    ListPage {
        remaining: if continue_token.is_some() {
            remaining
        } else {
            None
        },
        items,
        revision,
        continue_token,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sled_backend::SledBackend;
    use crate::EventKind;

    fn cold_engine(dir: &std::path::Path) -> Engine<SledBackend> {
        let config = StoreConfig {
            cold_prefixes: vec!["/cold/".to_owned()],
            ..StoreConfig::default()
        };
        let backend = SledBackend::open(dir, 1 << 20, false, 0);
        let backend = backend.unwrap_or_else(|e| panic!("open sled: {e}"));
        Engine::start(backend, config, "test").unwrap_or_else(|e| panic!("start: {e}"))
    }

    fn created(outcome: Result<CreateOutcome>) -> KeyValue {
        match outcome {
            Ok(CreateOutcome::Created(kv)) => kv,
            other => panic!("create: {other:?}"),
        }
    }

    fn listed(outcome: Result<ListOutcome>) -> Vec<KeyValue> {
        match outcome {
            Ok(ListOutcome::Listed(page)) => page.items,
            other => panic!("list: {other:?}"),
        }
    }

    #[tokio::test]
    async fn cold_values_leave_the_index_and_are_read_from_disk() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let engine = cold_engine(dir.path());
        let cold = created(engine.create("/cold/a", Bytes::from_static(b"one")).await);
        let hot = created(engine.create("/hot/a", Bytes::from_static(b"two")).await);
        {
            let index = engine.shared.index.read();
            assert!(index
                .items
                .get("/cold/a")
                .is_some_and(|h| h.value.is_none()));
            assert!(index.items.get("/hot/a").is_some_and(|h| h.value.is_some()));
        }
        assert_eq!(engine.get("/cold/a").await.ok(), Some(Some(cold.clone())));
        assert_eq!(engine.get("/hot/a").await.ok(), Some(Some(hot)));
        assert_eq!(
            listed(engine.list("/cold/", ListOptions::default()).await),
            std::slice::from_ref(&cold)
        );
        // An update's previous state and a delete's last state come from disk too.
        match engine
            .update("/cold/a", Bytes::from_static(b"three"), None)
            .await
        {
            Ok(UpdateOutcome::Updated { prev, .. }) => assert_eq!(prev, cold),
            other => panic!("update: {other:?}"),
        }
        match engine.delete("/cold/a", None).await {
            Ok(DeleteOutcome::Deleted { prev, .. }) => {
                assert_eq!(prev.value, Bytes::from_static(b"three"))
            }
            other => panic!("delete: {other:?}"),
        }
        // Loaded at start-up without their values, read from disk as before.
        let kept = created(engine.create("/cold/b", Bytes::from_static(b"four")).await);
        engine
            .flush_and_close()
            .await
            .unwrap_or_else(|e| panic!("close: {e}"));
        drop(engine);
        let engine = cold_engine(dir.path());
        assert!(engine
            .shared
            .index
            .read()
            .items
            .get("/cold/b")
            .is_some_and(|h| h.value.is_none()));
        assert_eq!(engine.get("/cold/b").await.ok(), Some(Some(kept)));
    }

    /// A write applied to disk but not yet indexed (its flush still running) must not show through
    /// a cold read: the index's state is then the `prev` of the write's logged event.
    #[tokio::test]
    async fn a_cold_read_racing_an_unindexed_write_returns_the_indexed_state() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let engine = cold_engine(dir.path());
        let first = created(engine.create("/cold/a", Bytes::from_static(b"one")).await);
        let second = created(engine.create("/cold/b", Bytes::from_static(b"two")).await);
        let revision = engine.current_revision();
        // What the writer thread does before the flusher indexes: apply an update of `a` and a
        // delete of `b` to the back end alone.
        let update = KeyValue {
            value: Bytes::from_static(b"unflushed"),
            mod_revision: revision + 1,
            ..first.clone()
        };
        let events = [
            Arc::new(Event {
                kind: EventKind::Put,
                key: first.key.clone(),
                revision: revision + 1,
                value: Some(update),
                prev: Some(first.clone()),
            }),
            Arc::new(Event {
                kind: EventKind::Delete,
                key: second.key.clone(),
                revision: revision + 2,
                value: None,
                prev: Some(second.clone()),
            }),
        ];
        engine
            .backend()
            .apply(&events, now_ms())
            .unwrap_or_else(|e| panic!("apply: {e}"));
        assert_eq!(engine.get("/cold/a").await.ok(), Some(Some(first.clone())));
        assert_eq!(engine.get("/cold/b").await.ok(), Some(Some(second.clone())));
        assert_eq!(
            listed(engine.list("/cold/", ListOptions::default()).await),
            [first, second]
        );
    }
}
