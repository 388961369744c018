//! The write path: the writer thread (evaluate, assign revisions, apply) and the flusher thread
//! (flush, index, acknowledge, publish), and compaction, which runs on the writer thread. See the
//! parent module for the guarantees; the order of the flusher's four steps is what makes them hold.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{elapsed_nanos, now_ms, Command, Index, Shared, WriteOp, WriteOutcome};
use crate::backend::Backend;
use crate::space;
use crate::watch::WatchSource;
use crate::{
    CreateOutcome, DeleteOutcome, Error, Event, EventKind, KeyValue, Result, Revision,
    UpdateOutcome,
};

/// Most log entries one compaction tick removes, so a tick never stalls writes for long.
const COMPACT_STEP: u64 = 20_000;

/// A batch applied to the back end, waiting for its flush.
pub(super) struct Applied {
    events: Vec<Arc<Event>>,
    pending: Vec<Pending>,
}

pub(super) enum Stage {
    Batch(Applied),
    /// Answered once every stage sent before it is done (the writer waits for it before a reopen).
    Sync(std::sync::mpsc::SyncSender<()>),
    Close,
}

/// How often a failed store tries to reopen its back end: a disk that stays full costs one
/// reopen per interval, not one per write.
const RECOVERY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a recovery waits for the flusher to answer the batches sent before the failure.
const SYNC_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// The single writer. Runs on its own thread; owns revision assignment, every mutation of the back
/// end, and compaction. It applies batch N+1 while the flusher thread flushes batch N.
pub(super) struct Writer<B: Backend> {
    pub(super) shared: Arc<Shared<B>>,
    /// State of keys written by batches applied but not yet in the index (newer than the index).
    pub(super) overlay: HashMap<String, (Option<KeyValue>, Revision)>,
    /// The revision the next write gets.
    pub(super) next: Revision,
    pub(super) stages: std::sync::mpsc::SyncSender<Stage>,
    pub(super) flusher: std::thread::JoinHandle<Result<()>>,
    /// When the last reopen was tried (see [`RECOVERY_INTERVAL`]).
    pub(super) last_recovery: Option<std::time::Instant>,
    /// Whether the last batch found less free space than the reserve: the log says so once when
    /// the store starts refusing and once when it stops.
    pub(super) short_of_space: bool,
}

type Reply = oneshot::Sender<Result<WriteOutcome>>;
/// A write's outcome, with what answers it (`R`).
pub(super) type Outcome<R> = (R, Result<WriteOutcome>);
type Pending = Outcome<Reply>;

impl<B: Backend> Writer<B> {
    pub(super) fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let max_batch = self.shared.config.max_batch.max(1);
        let mut batch = Vec::with_capacity(max_batch);
        while let Some(first) = rx.blocking_recv() {
            batch.push(first);
            while batch.len() < max_batch {
                match rx.try_recv() {
                    Ok(command) => batch.push(command),
                    Err(_) => break,
                }
            }
            let mut writes = Vec::with_capacity(batch.len());
            let mut compact = false;
            let mut close = None;
            for command in batch.drain(..) {
                match command {
                    Command::Write(op, reply) if close.is_none() => writes.push((op, reply)),
                    Command::Write(_, reply) => {
                        let _ = reply.send(Err(Error::Closed));
                    }
                    Command::Compact => compact = true,
                    Command::Close(reply) => close = close.or(Some(reply)),
                }
            }
            self.apply(writes);
            if compact {
                if self.shared.failed.load(Ordering::Acquire) {
                    // No writes needed: readiness comes back once the disk has room again.
                    self.recover();
                } else {
                    self.compact();
                }
            }
            if let (Some(inline), Some(_)) = (&self.shared.inline, &close) {
                // Waits for a write in progress; none starts after.
                inline.lock().closed = true;
            }
            if let Some(reply) = close {
                rx.close();
                while let Ok(command) = rx.try_recv() {
                    match command {
                        Command::Write(_, reply) => {
                            let _ = reply.send(Err(Error::Closed));
                        }
                        Command::Close(reply) => {
                            let _ = reply.send(Ok(()));
                        }
                        Command::Compact => {}
                    }
                }
                let flushed = self.finish();
                tracing::debug!("store closed");
                let _ = reply.send(flushed);
                return;
            }
        }
        // Every sender is gone: the store was dropped.
        let _ = self.finish();
    }

    /// Let the flusher drain, flush and close the hub; release the back end (sled's directory lock)
    /// before anyone hears "closed".
    fn finish(self) -> Result<()> {
        let Self {
            shared,
            stages,
            flusher,
            ..
        } = self;
        let _ = stages.send(Stage::Close);
        drop(stages);
        let flushed = flusher.join().unwrap_or(Err(Error::Failed));
        drop(shared);
        flushed
    }

    fn apply(&mut self, writes: Vec<(WriteOp, Reply)>) {
        if writes.is_empty() {
            return;
        }
        if self.shared.failed.load(Ordering::Acquire) && !self.recover() {
            // One look at the file system for the whole batch.
            let free = self.shared.backend.free_space();
            let reserve = self.shared.config.space_reserve_bytes;
            for (op, reply) in writes {
                let why = free
                    .and_then(|f| space::check(op.need(), f, reserve).err())
                    .unwrap_or(Error::Failed);
                let _ = reply.send(Err(why));
            }
            return;
        }
        let writes = refuse_without_room(&self.shared, &mut self.short_of_space, writes);
        if writes.is_empty() {
            return;
        }
        let (events, pending) = {
            let index = self.shared.index.read();
            // Entries the index has caught up with are no longer needed.
            let indexed = index.revision;
            self.overlay.retain(|_, (_, revision)| *revision > indexed);
            evaluate(
                &self.shared.backend,
                &index,
                &mut self.overlay,
                &mut self.next,
                writes,
            )
        };
        if !events.is_empty() {
            let started = std::time::Instant::now();
            let applied = self.shared.backend.apply(&events, now_ms());
            self.shared
                .apply_nanos
                .fetch_add(elapsed_nanos(started), Ordering::Relaxed);
            if let Err(error) = applied {
                tracing::error!(%error, "store commit failed; refusing further writes");
                self.shared.failed.store(true, Ordering::Release);
                for (reply, _) in pending {
                    let _ = reply.send(Err(error.for_each_write()));
                }
                return;
            }
        }
        // Outcomes without events also wait their turn: they may reveal earlier, unflushed writes.
        if let Err(std::sync::mpsc::SendError(Stage::Batch(applied))) =
            self.stages.send(Stage::Batch(Applied { events, pending }))
        {
            for (reply, _) in applied.pending {
                let _ = reply.send(Err(Error::Failed));
            }
        }
    }

    /// Brings a failed store back: waits until the flusher has answered every batch sent before
    /// the failure, reopens the back end, and takes what is durable as the truth, as a restart
    /// would. Batches that reached the disk although their writers were told they failed (an
    /// unknown outcome, as an etcd timeout is) are indexed and published, so watchers see no gap;
    /// nothing acknowledged can be missing, or the store stays failed. At most once per
    /// [`RECOVERY_INTERVAL`]. Returns whether the store takes writes again.
    fn recover(&mut self) -> bool {
        if self
            .last_recovery
            .is_some_and(|at| at.elapsed() < RECOVERY_INTERVAL)
        {
            return false;
        }
        self.last_recovery = Some(std::time::Instant::now());
        let (done, synced) = std::sync::mpsc::sync_channel(1);
        if self.stages.send(Stage::Sync(done)).is_err()
            || synced.recv_timeout(SYNC_DEADLINE).is_err()
        {
            return false;
        }
        let shared = &self.shared;
        let cold = shared.index.read().cold.clone();
        let loaded = match shared
            .backend
            .reopen()
            .and_then(|()| shared.backend.load(&cold))
        {
            Ok(loaded) => loaded,
            Err(error) => {
                tracing::warn!(%error, "store reopen failed; writes stay refused");
                return false;
            }
        };
        let acknowledged = shared.index.read().revision;
        if loaded.revision < acknowledged {
            tracing::error!(
                durable = loaded.revision,
                acknowledged,
                "store reopened without acknowledged writes; writes stay refused"
            );
            return false;
        }
        let adopted = match shared
            .backend
            .read_log(acknowledged, loaded.revision, usize::MAX)
        {
            Ok(events) if events.len() as u64 == loaded.revision - acknowledged => events,
            Ok(_) | Err(_) => {
                tracing::error!(
                    durable = loaded.revision,
                    acknowledged,
                    "store reopened with a hole in its log; writes stay refused"
                );
                return false;
            }
        };
        let adopted: Vec<Arc<Event>> = adopted.into_iter().map(Arc::new).collect();
        {
            let mut index = shared.index.write();
            let cold = std::mem::take(&mut index.cold);
            *index = Index::new(loaded.revision, loaded.items, cold);
        }
        shared
            .compacted
            .fetch_max(loaded.compacted, Ordering::AcqRel);
        shared.hub.publish(&adopted);
        self.overlay.clear();
        self.next = loaded.revision + 1;
        shared.failed.store(false, Ordering::Release);
        tracing::warn!(
            revision = loaded.revision,
            adopted = adopted.len(),
            "store reopened after a failed commit; writes resume"
        );
        true
    }

    fn compact(&self) {
        // Inline writes never race a compaction either.
        let _inline = self.shared.inline.as_ref().map(|inline| inline.lock());
        let config = &self.shared.config;
        let revision = self.shared.index.read().revision;
        let compacted = self.shared.compacted_revision();
        let by_count = revision.saturating_sub(config.event_log_max_events);
        let max_age_ms = u64::try_from(config.event_log_max_age.as_millis()).unwrap_or(u64::MAX);
        let cutoff = now_ms().saturating_sub(max_age_ms);
        let by_age = match self.shared.backend.last_committed_before(cutoff, revision) {
            Ok(found) => found.unwrap_or(0),
            Err(error) => {
                tracing::warn!(%error, "compaction scan failed");
                return;
            }
        };
        let target = by_count
            .max(by_age)
            .min(compacted.saturating_add(COMPACT_STEP));
        if target <= compacted {
            return;
        }
        // A compaction is a sled write too: with the disk short even for deletes it would hit
        // ENOSPC, which sled latches while the store still looks healthy. Wait for room.
        if room_for(&self.shared, space::Need::Shrink).is_err() {
            return;
        }
        // Raise the bound first, so no new watch or list relies on entries about to go.
        self.shared.compacted.store(target, Ordering::Release);
        match self.shared.backend.compact(target) {
            Ok(()) => tracing::debug!(compacted = target, "event log compacted"),
            Err(error) => tracing::warn!(%error, "compaction failed"),
        }
    }
}

/// Answers [`Error::NoSpace`] to the writes the disk has no room for (`crate::space`) and returns
/// the rest. One look at the file system per batch.
fn refuse_without_room<B: Backend>(
    shared: &Shared<B>,
    short_of_space: &mut bool,
    writes: Vec<(WriteOp, Reply)>,
) -> Vec<(WriteOp, Reply)> {
    let Some(free) = shared.backend.free_space() else {
        return writes;
    };
    let reserve = shared.config.space_reserve_bytes;
    let short = free < reserve;
    if short != *short_of_space {
        *short_of_space = short;
        if short {
            tracing::warn!(
                free_bytes = free,
                reserve_bytes = reserve,
                "the store's disk is nearly full: creates and updates are refused until space is freed"
            );
        } else {
            tracing::info!(
                free_bytes = free,
                "the store's disk has room again: writes resume"
            );
        }
    }
    if !short {
        return writes;
    }
    writes
        .into_iter()
        .filter_map(|(op, reply)| match space::check(op.need(), free, reserve) {
            Ok(()) => Some((op, reply)),
            Err(error) => {
                let _ = reply.send(Err(error));
                None
            }
        })
        .collect()
}

/// What a write is told while the store is failed: that the disk is full, while it is (the usual
/// cause), else [`Error::Failed`].
pub(super) fn failed_because<B: Backend>(shared: &Shared<B>, need: space::Need) -> Error {
    room_for(shared, need).err().unwrap_or(Error::Failed)
}

/// Whether the disk has room for a write that needs `need` (always, for a back end without files).
pub(super) fn room_for<B: Backend>(shared: &Shared<B>, need: space::Need) -> Result<()> {
    match shared.backend.free_space() {
        Some(free) => space::check(need, free, shared.config.space_reserve_bytes),
        None => Ok(()),
    }
}

/// The flusher stage: for each applied batch, in order: flush, apply to the index, acknowledge,
/// publish. A flush covers every batch applied before it started, so acknowledging after it is
/// acknowledging durable data.
pub(super) fn flusher<B: Backend>(
    shared: Arc<Shared<B>>,
    stages: std::sync::mpsc::Receiver<Stage>,
) -> Result<()> {
    let mut closing = false;
    while !closing {
        let first = match stages.recv() {
            Ok(Stage::Batch(first)) => first,
            Ok(Stage::Sync(done)) => {
                let _ = done.send(());
                continue;
            }
            Ok(Stage::Close) | Err(_) => break,
        };
        // Every batch applied while the previous flush ran shares the next one.
        let mut group = vec![first];
        let mut synced = None;
        while let Ok(stage) = stages.try_recv() {
            match stage {
                Stage::Batch(applied) => group.push(applied),
                Stage::Sync(done) => {
                    synced = Some(done);
                    break;
                }
                Stage::Close => {
                    closing = true;
                    break;
                }
            }
        }
        commit_group(&shared, group);
        if let Some(done) = synced {
            let _ = done.send(());
        }
    }
    let flushed = shared.backend.flush();
    shared.hub.close();
    flushed
}

/// Flush once for `group` (batches in revision order), then per batch: index, acknowledge, publish.
fn commit_group<B: Backend>(shared: &Shared<B>, group: Vec<Applied>) {
    let fail = |group: Vec<Applied>, error: Option<&Error>| {
        for (reply, _) in group.into_iter().flat_map(|applied| applied.pending) {
            let _ = reply.send(Err(error.map_or(Error::Failed, Error::for_each_write)));
        }
    };
    if shared.failed.load(Ordering::Acquire) {
        return fail(group, None);
    }
    let writes: usize = group.iter().map(|applied| applied.events.len()).sum();
    if writes > 0 {
        let started = std::time::Instant::now();
        let flushed = shared.backend.flush();
        shared
            .flush_nanos
            .fetch_add(elapsed_nanos(started), Ordering::Relaxed);
        if let Err(error) = flushed {
            tracing::error!(%error, "store flush failed; refusing further writes");
            shared.failed.store(true, Ordering::Release);
            return fail(group, Some(&error));
        }
        shared.commits.fetch_add(1, Ordering::Relaxed);
        shared
            .committed_writes
            .fetch_add(writes as u64, Ordering::Relaxed);
    }
    for Applied { events, pending } in group {
        if let Some(last) = events.last() {
            let mut index = shared.index.write();
            index_events(&mut index, &events);
            index.revision = last.revision;
        }
        for (reply, outcome) in pending {
            let _ = reply.send(outcome);
        }
        shared.hub.publish(&events);
    }
}

/// Applies committed `events` to the index's items (the caller sets its revision).
pub(super) fn index_events(index: &mut Index, events: &[Arc<Event>]) {
    for event in events {
        match &event.value {
            Some(kv) => index.insert(kv.clone()),
            None => {
                index.items.remove(&event.key);
            }
        }
    }
}

/// Evaluate a batch in order against the index plus the writes not yet in it (`overlay`, including
/// this batch's own earlier ones); assign revisions from `next`. Each outcome goes with its write's
/// `R` (its reply channel; nothing inline).
pub(super) fn evaluate<B: Backend, R>(
    backend: &B,
    index: &Index,
    overlay: &mut HashMap<String, (Option<KeyValue>, Revision)>,
    next: &mut Revision,
    writes: Vec<(WriteOp, R)>,
) -> (Vec<Arc<Event>>, Vec<Outcome<R>>) {
    let mut events = Vec::new();
    let mut pending = Vec::with_capacity(writes.len());
    for (op, reply) in writes {
        let key = match &op {
            WriteOp::Create { key, .. }
            | WriteOp::Update { key, .. }
            | WriteOp::Delete { key, .. } => key,
        };
        let current = match current(backend, index, overlay, key) {
            Ok(current) => current,
            Err(error) => {
                pending.push((reply, Err(error)));
                continue;
            }
        };
        let outcome = match op {
            WriteOp::Create { key, value } => match current {
                Some(existing) => WriteOutcome::Create(CreateOutcome::AlreadyExists(existing)),
                None => {
                    let kv = KeyValue {
                        key: key.clone(),
                        value,
                        create_revision: *next,
                        mod_revision: *next,
                    };
                    push(
                        &mut events,
                        overlay,
                        next,
                        EventKind::Put,
                        Some(kv.clone()),
                        None,
                        key,
                    );
                    WriteOutcome::Create(CreateOutcome::Created(kv))
                }
            },
            WriteOp::Update {
                key,
                value,
                expected,
            } => match current {
                None => WriteOutcome::Update(UpdateOutcome::NotFound),
                Some(prev) if expected.is_some_and(|rev| rev != prev.mod_revision) => {
                    WriteOutcome::Update(UpdateOutcome::Conflict(prev))
                }
                Some(prev) => {
                    let kv = KeyValue {
                        key: key.clone(),
                        value,
                        create_revision: prev.create_revision,
                        mod_revision: *next,
                    };
                    push(
                        &mut events,
                        overlay,
                        next,
                        EventKind::Put,
                        Some(kv.clone()),
                        Some(prev.clone()),
                        key,
                    );
                    WriteOutcome::Update(UpdateOutcome::Updated { kv, prev })
                }
            },
            WriteOp::Delete { key, expected } => match current {
                None => WriteOutcome::Delete(DeleteOutcome::NotFound),
                Some(prev) if expected.is_some_and(|rev| rev != prev.mod_revision) => {
                    WriteOutcome::Delete(DeleteOutcome::Conflict(prev))
                }
                Some(prev) => {
                    let revision = *next;
                    push(
                        &mut events,
                        overlay,
                        next,
                        EventKind::Delete,
                        None,
                        Some(prev.clone()),
                        key,
                    );
                    WriteOutcome::Delete(DeleteOutcome::Deleted { prev, revision })
                }
            },
        };
        pending.push((reply, Ok(outcome)));
    }
    (events, pending)
}

/// `key`'s state for a write: the overlay's, else the index's, its value read if held cold (the
/// back end has exactly the index's state of a key the overlay lacks: the only writes applied
/// but not indexed are the overlay's, and the index cannot move under `index`).
fn current<B: Backend>(
    backend: &B,
    index: &Index,
    overlay: &HashMap<String, (Option<KeyValue>, Revision)>,
    key: &str,
) -> Result<Option<KeyValue>> {
    if let Some((state, _)) = overlay.get(key) {
        return Ok(state.clone());
    }
    index
        .get(key)
        .map(|(kv, cold)| super::thaw_one(backend, index.revision, kv, cold))
        .transpose()
}

fn push(
    events: &mut Vec<Arc<Event>>,
    overlay: &mut HashMap<String, (Option<KeyValue>, Revision)>,
    next: &mut Revision,
    kind: EventKind,
    value: Option<KeyValue>,
    prev: Option<KeyValue>,
    key: String,
) {
    overlay.insert(key.clone(), (value.clone(), *next));
    events.push(Arc::new(Event {
        kind,
        key,
        revision: *next,
        value,
        prev,
    }));
    *next += 1;
}
