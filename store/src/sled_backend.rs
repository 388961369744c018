//! The sled back end: one tree with three key spaces, and a write-ahead log (`crate::wal`) in front
//! of it that alone stands between a group of writes and its acknowledgement.
//!
//! Layout of the `data` tree (a one-byte prefix names the key space):
//! - `o` + key (UTF-8) → `[format][create_revision][mod_revision][value]` — the current state.
//! - `l` + revision (8-byte big-endian) → encoded event with commit time, new and previous value.
//! - `m` + name → meta: `format` (a marker naming this layout), `revision` (last in sled),
//!   `compacted`.
//!
//! Three threads write, each one thing: the engine's writer `apply`s a batch (encodes it for the
//! log and keeps its events in memory, `Inner::tail`); the engine's flusher `flush`es (appends every
//! batch applied since the last flush to the log as one frame, one `fdatasync`); the
//! **checkpointer** (`checkpointer`) brings sled up to date behind the log.
//!
//! Guarantees:
//! - **Durable**, as etcd is in front of bbolt: the engine acknowledges a batch only after a flush
//!   that started after it was applied, and that flush's frame is `fdatasync`ed. Nothing else is on
//!   that path: sled is not written there.
//! - **sled behind the log, one batch per checkpoint**: every `CHECKPOINT_INTERVAL`, or once
//!   `CHECKPOINT_WRITES` writes or `CHECKPOINT_BYTES` of log wait, the checkpointer applies
//!   everything logged since the previous checkpoint to sled as one atomic `sled::Batch`
//!   (objects, log entries, revision counter: sled seals and writes its IO buffer once per batch,
//!   so once per checkpoint, not once per group commit), then `Db::flush`, `fdatasync` of sled's
//!   log file and `fsync` of new blob files (sled alone uses `sync_file_range`, which does not
//!   survive power loss), then deletes the log segments holding nothing newer. sled's own periodic
//!   flush is disabled (`flush_every_ms(None)`).
//! - **Bounded**: at most `MAX_BACKLOG_WRITES` writes or `MAX_BACKLOG_BYTES` of log wait for a
//!   checkpoint; past that the flusher waits for the checkpointer before it logs more (and so the
//!   engine's writers wait), never unbounded memory or log.
//! - **Readers see the log**: what is logged but not yet in sled is read from the in-memory tail
//!   (`read_log`, `last_committed_before`); `load` runs only after a replay, when sled holds
//!   everything.
//! - **Recovered at open and at reopen**: sled holds a prefix of its atomic batches, all logged;
//!   every logged event after sled's revision is applied to sled again in order, the log's torn
//!   tail (a frame whose `fdatasync` never returned, so never acknowledged) is ignored, then sled
//!   is synced and the log deleted. A bad frame followed by a good one, a gap in the revisions, or
//!   a log that starts after sled's revision + 1 is [`Error::Corrupt`]. The checkpointer is stopped
//!   and joined before a reopen and at close (where a last checkpoint empties the log).
//! - **Never reset**: a directory that is not ours, or holds data that does not decode, fails start-up
//!   with [`Error::Corrupt`] naming the path. sled panics on some corrupt files; those are caught at
//!   open and reported the same way.
//! - **Reopened, not restarted, after a failed write**: sled latches its first I/O error (a full
//!   disk's `ENOSPC`) until it is opened again, and a failed checkpoint fails the next flush;
//!   [`Backend::reopen`] drops the database and opens it again behind the same handle, replays the
//!   log, and the engine reloads what is durable. A snapshot cut short (`snap.*.generating`, which
//!   sled 0.34 would read as corrupt) is removed before every open; a disk too full for sled to
//!   open gives up the store's emergency ballast (`crate::space`).
//! - Compaction writes the `compacted` marker before removing entries and is not flushed on its own: a
//!   crash may bring back old log entries, which are real history, never invented.

use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::backend::{Backend, Loaded};
use crate::codec;
use crate::wal::{self, Wal};
use crate::{Error, Event, EventKind, Result, Revision};

mod checkpointer;
mod opened;
mod replay;

use opened::{io_err, sync_dir, Opened};

const FORMAT_KEY: &[u8] = b"mformat";
const FORMAT: &[u8] = b"minik8s-store/1";
const REVISION_KEY: &[u8] = b"mrevision";
const COMPACTED_KEY: &[u8] = b"mcompacted";
const OBJECT: u8 = b'o';
const LOG: u8 = b'l';

/// How often sled is checkpointed behind the log: etcd's backend commits bbolt every 100 ms
/// (`--backend-batch-interval`, `defaultBatchInterval` in `server/storage/backend/backend.go`) ...
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);
/// ... or after 10,000 writes (`defaultBatchLimit`, same file) ...
const CHECKPOINT_WRITES: u64 = 10_000;
/// ... or after one log segment's worth of bytes, which bounds the log's size on disk when values
/// are large (etcd bounds it by its snapshot count instead).
const CHECKPOINT_BYTES: u64 = wal::SEGMENT_BYTES;
/// How far the log may run ahead of sled before the flusher waits for the checkpointer: a few
/// checkpoints' worth, so a slow checkpoint stalls nobody while the next one is due.
const MAX_BACKLOG_WRITES: u64 = 4 * CHECKPOINT_WRITES;
const MAX_BACKLOG_BYTES: u64 = 2 * CHECKPOINT_BYTES;

fn object_key(key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + key.len());
    out.push(OBJECT);
    out.extend_from_slice(key.as_bytes());
    out
}

fn log_key(revision: Revision) -> [u8; 9] {
    let mut out = [LOG; 9];
    out[1..].copy_from_slice(&codec::revision_key(revision));
    out
}

fn decode_log_key(key: &[u8]) -> Option<Revision> {
    match key.split_first() {
        Some((&LOG, rest)) => codec::decode_revision_key(rest),
        _ => None,
    }
}

/// The sled back end: the shared state, and the checkpointer thread that works on it.
pub(crate) struct SledBackend {
    inner: Arc<Inner>,
    /// The checkpointer thread; `None` while stopped (from the start of a reopen until it
    /// succeeded, and at close).
    checkpointer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the writer (`apply`), the flusher (`flush`), the checkpointer and readers share.
struct Inner {
    path: PathBuf,
    /// `StoreConfig::sled_cache_bytes`, kept to reopen.
    cache_bytes: u64,
    /// The open database. Writers of this lock: [`Backend::reopen`] only; everything else reads.
    /// `None` between a reopen that dropped the old database and one that opened the new.
    open: RwLock<Option<Opened>>,
    /// `StoreConfig::fsync`.
    fsync: bool,
    /// Blob files already fsynced; the set is rebuilt from the directory on each sync, so it stays
    /// as small as the directory.
    synced_blobs: Mutex<HashSet<OsString>>,
    /// Batches applied (by the writer) and not yet in the log, encoded as a frame's payload, and
    /// the last revision among them; taken by the next `flush`. Bounded by the engine's pipeline
    /// (`FLUSH_QUEUE` batches of at most `max_batch` writes).
    pending: Mutex<(Vec<u8>, Revision)>,
    /// The write-ahead log: appended to by the flusher, trimmed by the checkpointer.
    wal: Mutex<Wal>,
    /// Every applied event sled does not hold yet, ascending and dense, with its commit time:
    /// logged ones (until a checkpoint has put them in sled) and pending ones. An event leaves it
    /// only after sled has it, so a reader finds every revision below the first one here in sled.
    /// Bounded: pending ones by the pipeline, logged ones by `MAX_BACKLOG_*` (`flush` waits).
    tail: Mutex<VecDeque<(u64, Arc<Event>)>>,
    /// How far the log and sled are, shared by the flusher and the checkpointer.
    progress: Mutex<Progress>,
    /// Signalled when `progress` moves: a checkpoint may be due, or one ended.
    progressed: Condvar,
    /// The engine's compaction bound as last told to `compact`: a checkpoint writes no log
    /// entries at or below it (they would only wait for the next compaction tick).
    compacted: AtomicU64,
    /// [`CHECKPOINT_INTERVAL`], shorter or longer in tests.
    checkpoint_interval: Duration,
}

/// The log's and sled's positions. Counters of bytes are since the store opened.
struct Progress {
    /// The last revision whose frame is durable in the log.
    logged: Revision,
    /// Payload bytes logged, and logged when the revision `checkpointed` was.
    logged_bytes: u64,
    checkpointed_bytes: u64,
    /// The last revision durable in sled (a checkpoint covered it).
    checkpointed: Revision,
    /// When the last checkpoint ended.
    at: Instant,
    /// The checkpointer is told to stop (reopen, close).
    stop: bool,
    /// A checkpoint failed: the next flush fails the store, which then reopens.
    failure: Option<Error>,
}

impl Progress {
    fn at(revision: Revision) -> Self {
        Self {
            logged: revision,
            logged_bytes: 0,
            checkpointed_bytes: 0,
            checkpointed: revision,
            at: Instant::now(),
            stop: false,
            failure: None,
        }
    }

    /// Logged, not yet checkpointed: writes and bytes.
    fn backlog(&self) -> (u64, u64) {
        (
            self.logged.saturating_sub(self.checkpointed),
            self.logged_bytes.saturating_sub(self.checkpointed_bytes),
        )
    }
}

impl SledBackend {
    pub(crate) fn open(path: &Path, cache_bytes: u64, fsync: bool, reserve: u64) -> Result<Self> {
        Self::open_with(
            path,
            cache_bytes,
            fsync,
            reserve,
            wal::SEGMENT_BYTES,
            CHECKPOINT_INTERVAL,
        )
    }

    /// [`SledBackend::open`] with the log's segment size and the checkpoint interval chosen (tests).
    pub(crate) fn open_with(
        path: &Path,
        cache_bytes: u64,
        fsync: bool,
        reserve: u64,
        segment_bytes: u64,
        checkpoint_interval: Duration,
    ) -> Result<Self> {
        // Owner-only: the store holds every Secret, and sled creates its files with the umask's mode.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(path)
            .map_err(|source| Error::Io {
                path: path.to_owned(),
                source,
            })?;
        let opened = Opened::open_or_release_ballast(path, cache_bytes)?;
        let inner = Inner {
            path: path.to_owned(),
            cache_bytes,
            open: RwLock::new(Some(opened)),
            fsync,
            synced_blobs: Mutex::new(HashSet::new()),
            pending: Mutex::new((Vec::new(), 0)),
            wal: Mutex::new(Wal::new(&path.join("wal"), segment_bytes, fsync)),
            tail: Mutex::new(VecDeque::new()),
            progress: Mutex::new(Progress::at(0)),
            progressed: Condvar::new(),
            compacted: AtomicU64::new(0),
            checkpoint_interval,
        };
        inner.check_format()?;
        inner.replay_wal()?;
        crate::space::keep_ballast(path, reserve);
        // The log's directory exists before its first segment, and its entry is durable with the rest.
        let wal_dir = path.join("wal");
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&wal_dir)
            .map_err(io_err(&wal_dir))?;
        sync_dir(path)?;
        let backend = Self {
            inner: Arc::new(inner),
            checkpointer: Mutex::new(None),
        };
        backend.start_checkpointer()?;
        Ok(backend)
    }

    fn start_checkpointer(&self) -> Result<()> {
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || checkpointer::run(&inner))
            .map_err(|source| Error::Spawn {
                name: "checkpointer",
                source,
            })?;
        *self.checkpointer.lock() = Some(handle);
        Ok(())
    }

    /// Stops the checkpointer and waits for it (a checkpoint under way finishes first).
    fn stop_checkpointer(&self) {
        let Some(handle) = self.checkpointer.lock().take() else {
            return;
        };
        self.inner.progress.lock().stop = true;
        self.inner.progressed.notify_all();
        let _ = handle.join();
    }

    /// Checkpoints everything logged so far now (tests; the checkpointer does it when due).
    #[cfg(test)]
    fn checkpoint_now(&self) -> Result<()> {
        let (upto, bytes) = {
            let progress = self.inner.progress.lock();
            (progress.logged, progress.logged_bytes)
        };
        self.inner.checkpoint(upto, bytes)
    }
}

impl Inner {
    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    /// A sled failure; "no space left on device" becomes [`Error::NoSpace`], naming the path.
    fn sled_err(&self, operation: &'static str) -> impl FnOnce(sled::Error) -> Error + '_ {
        move |source| match &source {
            sled::Error::Io(io) if crate::space::is_enospc(io) => Error::NoSpace {
                detail: format!("{operation} failed: {io}"),
            },
            _ => Error::Sled { operation, source },
        }
    }

    /// A new (empty) database gets the format marker; an existing one must carry ours.
    fn check_format(&self) -> Result<()> {
        {
            let open = self.opened()?;
            self.check_format_of(&open)?;
        }
        self.sync_sled()
    }

    fn check_format_of(&self, open: &Opened) -> Result<()> {
        let found = open
            .data
            .get(FORMAT_KEY)
            .map_err(self.sled_err("read format"))?;
        match found {
            Some(found) if found.as_ref() == FORMAT => Ok(()),
            Some(found) => Err(self.corrupt(format!(
                "unknown store format {:?}",
                String::from_utf8_lossy(&found)
            ))),
            None => {
                let foreign = open
                    .db
                    .tree_names()
                    .iter()
                    .any(|name| !matches!(name.as_ref(), b"__sled__default" | b"data"));
                if !open.data.is_empty() || foreign || !open.db.is_empty() {
                    return Err(self.corrupt("not a minik8s store (format marker missing)"));
                }
                open.data
                    .insert(FORMAT_KEY, FORMAT)
                    .map_err(self.sled_err("write format"))?;
                Ok(())
            }
        }
    }

    /// The open database, or [`Error::Failed`] after a reopen that could not open it.
    fn opened(&self) -> Result<parking_lot::MappedRwLockReadGuard<'_, Opened>> {
        parking_lot::RwLockReadGuard::try_map(self.open.read(), Option::as_ref)
            .map_err(|_| Error::Failed)
    }

    fn read_meta_u64(&self, open: &Opened, key: &[u8]) -> Result<Revision> {
        match open.data.get(key).map_err(self.sled_err("read meta"))? {
            None => Ok(0),
            Some(bytes) => codec::decode_revision_key(&bytes).ok_or_else(|| {
                self.corrupt(format!(
                    "meta {} is not a revision",
                    String::from_utf8_lossy(key)
                ))
            }),
        }
    }

    /// The first revision of the tail (`Revision::MAX` when it is empty): every revision below it
    /// that was ever applied is in sled.
    fn tail_first(tail: &VecDeque<(u64, Arc<Event>)>) -> Revision {
        tail.front()
            .map_or(Revision::MAX, |(_, event)| event.revision)
    }

    /// Makes everything applied to sled so far durable. sled's `flush` writes its buffers with
    /// `sync_file_range` (data pages only: no file metadata, no disk-cache flush) and writes blob
    /// files (values over ~128 KiB) with no sync at all. That survives a process kill, not a power
    /// loss; so after it: `fdatasync` the log file, `fsync` new blob files and their directory.
    fn sync_sled(&self) -> Result<()> {
        {
            let open = self.opened()?;
            open.db.flush().map_err(self.sled_err("flush"))?;
            if !self.fsync {
                return Ok(());
            }
            open.log_file
                .sync_data()
                .map_err(io_err(&self.path.join("db")))?;
        }
        self.sync_new_blobs()
    }

    fn sync_new_blobs(&self) -> Result<()> {
        let dir = self.path.join("blobs");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(io_err(&dir)(error)),
        };
        let mut synced = self.synced_blobs.lock();
        let mut present = HashSet::new();
        let mut new = false;
        for entry in entries {
            let name = entry.map_err(io_err(&dir))?.file_name();
            if !synced.contains(&name) {
                let file = dir.join(&name);
                match std::fs::File::open(&file).and_then(|f| f.sync_all()) {
                    Ok(()) => new = true,
                    // sled removed it meanwhile (blob garbage collection).
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(error) => return Err(io_err(&file)(error)),
                }
            }
            present.insert(name);
        }
        *synced = present;
        drop(synced);
        if new {
            sync_dir(&dir)?;
        }
        Ok(())
    }
}

/// Adds `event` to `batch`: its object's new state and, unless `log` is false (compacted), its log
/// entry.
fn add_event(batch: &mut sled::Batch, event: &Event, at_ms: u64, log: bool) {
    match (&event.kind, &event.value) {
        (EventKind::Put, Some(kv)) => batch.insert(object_key(&event.key), codec::encode_kv(kv)),
        _ => batch.remove(object_key(&event.key)),
    }
    if log {
        batch.insert(&log_key(event.revision), codec::encode_event(event, at_ms));
    }
}

impl Backend for SledBackend {
    /// What sled holds. Called only at start-up and after a reopen, both after a replay: then sled
    /// holds everything logged and the tail is empty.
    fn load(&self) -> Result<Loaded> {
        let inner = &*self.inner;
        let open = inner.opened()?;
        let revision = inner.read_meta_u64(&open, REVISION_KEY)?;
        let mut compacted = inner.read_meta_u64(&open, COMPACTED_KEY)?;
        let log_bound = |entry: Option<(sled::IVec, sled::IVec)>| -> Result<Option<Revision>> {
            entry
                .map(|(k, _)| decode_log_key(&k).ok_or_else(|| inner.corrupt("bad log key")))
                .transpose()
        };
        let mut log = open.data.scan_prefix([LOG]);
        let first = log_bound(log.next().transpose().map_err(inner.sled_err("read log"))?)?;
        let last = log_bound(
            log.next_back()
                .transpose()
                .map_err(inner.sled_err("read log"))?,
        )?;
        let last = last.or(first);
        if let Some(last) = last {
            if last != revision {
                return Err(inner.corrupt(format!(
                    "event log ends at revision {last} but the store revision is {revision}"
                )));
            }
        }
        if let Some(first) = first {
            compacted = compacted.max(first.saturating_sub(1));
        } else {
            // An empty log means everything up to the revision was compacted.
            compacted = revision;
        }
        if compacted > revision {
            return Err(inner.corrupt(format!(
                "compacted revision {compacted} is after the store revision {revision}"
            )));
        }
        let mut items = Vec::new();
        for entry in open.data.scan_prefix([OBJECT]) {
            let (key, value) = entry.map_err(inner.sled_err("read objects"))?;
            let kv = codec::decode_kv(&key[1..], &value).ok_or_else(|| {
                inner.corrupt(format!(
                    "object {:?} does not decode",
                    String::from_utf8_lossy(&key)
                ))
            })?;
            if kv.mod_revision > revision || kv.create_revision > kv.mod_revision {
                return Err(inner.corrupt(format!(
                    "object {:?} has revision {} beyond the store revision {revision}",
                    kv.key, kv.mod_revision
                )));
            }
            items.push(kv);
        }
        Ok(Loaded {
            revision,
            compacted,
            items,
        })
    }

    /// Encodes the batch for the log (the next `flush` writes it) and keeps its events for readers
    /// and the checkpointer. No I/O.
    fn apply(&self, events: &[Arc<Event>], at_ms: u64) -> Result<()> {
        let Some(last) = events.last() else {
            return Ok(());
        };
        let mut payload = Vec::new();
        wal::encode_batch(&mut payload, events.iter().map(|e| &**e), at_ms);
        {
            let mut pending = self.inner.pending.lock();
            if pending.0.is_empty() {
                pending.0 = payload;
            } else {
                pending.0.extend_from_slice(&payload);
            }
            pending.1 = last.revision;
        }
        self.inner
            .tail
            .lock()
            .extend(events.iter().map(|event| (at_ms, Arc::clone(event))));
        Ok(())
    }

    /// sled for the revisions below the tail, the tail for the rest.
    fn read_log(&self, after: Revision, upto: Revision, max: usize) -> Result<Vec<Event>> {
        let inner = &*self.inner;
        // Compacted events may wait in the tail for a checkpoint: they are gone all the same (the
        // caller sees the hole).
        let after = after.max(inner.compacted.load(Ordering::Acquire));
        if after >= upto || max == 0 {
            return Ok(Vec::new());
        }
        // The tail first: whatever leaves it meanwhile is in sled, below the first revision seen.
        let (tail_first, from_tail) = {
            let tail = inner.tail.lock();
            let first = Inner::tail_first(&tail);
            let from_tail: Vec<Event> = if first <= upto {
                // Dense and ascending, so the position of `after + 1` is computable.
                let skip = usize::try_from((after + 1).saturating_sub(first)).unwrap_or(usize::MAX);
                tail.iter()
                    .skip(skip)
                    .take_while(|(_, event)| event.revision <= upto)
                    .take(max)
                    .map(|(_, event)| Event::clone(event))
                    .collect()
            } else {
                Vec::new()
            };
            (first, from_tail)
        };
        let mut events = Vec::new();
        let sled_upto = upto.min(tail_first.saturating_sub(1));
        if after < sled_upto {
            let open = inner.opened()?;
            for entry in open
                .data
                .range(log_key(after + 1)..=log_key(sled_upto))
                .take(max)
            {
                let (key, value) = entry.map_err(inner.sled_err("read log"))?;
                let revision = decode_log_key(&key).ok_or_else(|| inner.corrupt("bad log key"))?;
                let event = codec::decode_event(revision, &value).ok_or_else(|| {
                    inner.corrupt(format!("event at revision {revision} does not decode"))
                })?;
                events.push(event);
            }
        }
        let room = max - events.len();
        events.extend(from_tail.into_iter().take(room));
        Ok(events)
    }

    fn last_committed_before(&self, cutoff_ms: u64, upto: Revision) -> Result<Option<Revision>> {
        let inner = &*self.inner;
        // The tail's answer first (no allocation): its first revision, and its last event before
        // the cutoff, if the scan got past sled.
        let (tail_first, in_tail) = {
            let tail = inner.tail.lock();
            let found = tail
                .iter()
                .take_while(|(at, event)| *at < cutoff_ms && event.revision <= upto)
                .last()
                .map(|(_, event)| event.revision);
            (Inner::tail_first(&tail), found)
        };
        let mut found = None;
        let sled_upto = upto.min(tail_first.saturating_sub(1));
        let open = inner.opened()?;
        for entry in open.data.range(log_key(0)..=log_key(sled_upto)) {
            let (key, value) = entry.map_err(inner.sled_err("read log"))?;
            let revision = decode_log_key(&key).ok_or_else(|| inner.corrupt("bad log key"))?;
            let at = codec::event_time(&value).ok_or_else(|| {
                inner.corrupt(format!("event at revision {revision} does not decode"))
            })?;
            if at >= cutoff_ms {
                return Ok(found);
            }
            found = Some(revision);
        }
        Ok(in_tail.or(found))
    }

    /// Removes sled's log entries up to `upto`; entries still in the tail are left out of sled by
    /// the checkpointer.
    fn compact(&self, upto: Revision) -> Result<()> {
        let inner = &*self.inner;
        inner.compacted.fetch_max(upto, Ordering::AcqRel);
        // Marker and removals in one batch: the log never looks compacted further than recorded.
        let mut batch = sled::Batch::default();
        batch.insert(COMPACTED_KEY, &codec::revision_key(upto));
        let open = inner.opened()?;
        for key in open.data.range(log_key(0)..=log_key(upto)).keys() {
            batch.remove(key.map_err(inner.sled_err("compact"))?);
        }
        open.data
            .apply_batch(batch)
            .map_err(inner.sled_err("compact"))
    }

    fn free_space(&self) -> Option<u64> {
        crate::space::available(&self.inner.path)
    }

    /// sled latches its first I/O error (a full disk's `ENOSPC` included) and fails every later
    /// operation until the database is opened again; this is that opening. The checkpointer stops
    /// first, then the old database goes (it holds the directory's lock), with every event not in
    /// sled: what the new one finds plus the log's replay is what reached the disk, as after a
    /// crash.
    fn reopen(&self) -> Result<()> {
        self.stop_checkpointer();
        let inner = &*self.inner;
        {
            let mut open = inner.open.write();
            drop(open.take());
            // Applied, maybe logged: the log's replay brings back what is durable of them.
            *inner.pending.lock() = (Vec::new(), 0);
            inner.tail.lock().clear();
            *open = Some(Opened::open_or_release_ballast(
                &inner.path,
                inner.cache_bytes,
            )?);
        }
        inner.synced_blobs.lock().clear();
        inner.replay_wal()?;
        self.start_checkpointer()
    }

    /// Appends the batches applied since the last call to the write-ahead log as one frame and
    /// syncs it: from then on they are durable. Waits first while the checkpointer is
    /// `MAX_BACKLOG_*` behind; fails once a checkpoint has failed.
    fn flush(&self) -> Result<()> {
        let inner = &*self.inner;
        {
            let mut progress = inner.progress.lock();
            loop {
                if let Some(failure) = &progress.failure {
                    return Err(failure.for_each_write());
                }
                let (writes, bytes) = progress.backlog();
                if progress.stop || (writes < MAX_BACKLOG_WRITES && bytes < MAX_BACKLOG_BYTES) {
                    break;
                }
                inner.progressed.wait(&mut progress);
            }
        }
        let (payload, last) = std::mem::take(&mut *inner.pending.lock());
        if payload.is_empty() {
            return Ok(());
        }
        inner.wal.lock().append(&payload, last)?;
        let mut progress = inner.progress.lock();
        let idle = progress.logged == progress.checkpointed;
        progress.logged = last;
        progress.logged_bytes += payload.len() as u64;
        let (writes, bytes) = progress.backlog();
        // The checkpointer sleeps without a deadline while nothing waits, and until the interval
        // ends otherwise: wake it for the first write, and when a size bound is reached.
        if idle || writes >= CHECKPOINT_WRITES || bytes >= CHECKPOINT_BYTES {
            inner.progressed.notify_all();
        }
        Ok(())
    }
}

impl Drop for SledBackend {
    /// Stops the checkpointer, then a last checkpoint, so the next open has no log to replay (best
    /// effort: the log covers it).
    fn drop(&mut self) {
        self.stop_checkpointer();
        let inner = &*self.inner;
        let (upto, bytes, failed) = {
            let progress = inner.progress.lock();
            (
                progress.logged,
                progress.logged_bytes,
                progress.failure.is_some(),
            )
        };
        if failed || inner.opened().is_err() {
            return;
        }
        // Everything logged is covered, so the whole log can go.
        match inner
            .checkpoint(upto, bytes)
            .and_then(|()| inner.wal.lock().clear())
        {
            Ok(()) => {}
            Err(error) => {
                tracing::debug!(%error, "closing checkpoint failed; the next open replays the log")
            }
        }
    }
}

#[cfg(test)]
mod tests;
