//! The sled back end: one tree with three key spaces, one atomic batch per commit, and a
//! write-ahead log (`crate::wal`) that makes a group of commits durable with one `fdatasync`.
//!
//! Layout of the `data` tree (a one-byte prefix names the key space):
//! - `o` + key (UTF-8) → `[format][create_revision][mod_revision][value]` — the current state.
//! - `l` + revision (8-byte big-endian) → encoded event with commit time, new and previous value.
//! - `m` + name → meta: `format` (a marker naming this layout), `revision` (last committed),
//!   `compacted`.
//!
//! Guarantees:
//! - **Atomic**: objects, log entries and the revision counter of a commit go in one `sled::Batch` on
//!   one tree, which sled applies atomically, also across a crash: after one, either all of a batch is
//!   there or none. (One tree with prefixes rather than three trees in a `transaction`: the batch
//!   gives the same atomicity at a fraction of the cost; measured in BENCHMARKS.md.)
//! - **Durable**, as etcd is: the engine acknowledges a batch only after a flush that started after
//!   the batch was applied, and a flush appends every batch applied since the previous one to the
//!   write-ahead log (`<dir>/wal/`) as one frame and `fdatasync`s it. sled is made durable behind
//!   the log by a *checkpoint* (`Db::flush`, then `fdatasync` of sled's log file and `fsync` of new
//!   blob files: sled alone uses `sync_file_range`, which does not survive power loss), which the
//!   flusher runs after acknowledging a group, every `CHECKPOINT_INTERVAL`, `CHECKPOINT_WRITES`
//!   or `CHECKPOINT_BYTES` of log; it then deletes the log segments holding nothing newer than what was applied before it
//!   started. sled's own periodic flush is disabled (`flush_every_ms(None)`).
//! - **Recovered at open and at reopen**: sled, unflushed, keeps a prefix of its atomic batches
//!   (possibly batches later than its last checkpoint, even unacknowledged ones, applied in
//!   order); every logged event after sled's revision is applied to sled again in order, the log's
//!   torn tail (a frame whose `fdatasync` never returned, so never acknowledged) is ignored, and
//!   then sled is checkpointed and the log deleted. A bad frame followed by a good one, a gap in the
//!   revisions, or a log that starts after sled's revision + 1 is [`Error::Corrupt`].
//! - **Never reset**: a directory that is not ours, or holds data that does not decode, fails start-up
//!   with [`Error::Corrupt`] naming the path. sled panics on some corrupt files; those are caught at
//!   open and reported the same way.
//! - **Reopened, not restarted, after a failed write**: sled latches its first I/O error (a full
//!   disk's `ENOSPC`) until it is opened again; [`Backend::reopen`] drops the database and opens it
//!   again behind the same handle, and the engine reloads what is durable. A snapshot cut short
//!   (`snap.*.generating`, which sled 0.34 would read as corrupt) is removed before every open; a
//!   disk too full for sled to open gives up the store's emergency ballast (`crate::space`).
//! - Compaction writes the `compacted` marker before removing entries and is not flushed on its own: a
//!   crash may bring back old log entries, which are real history, never invented.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Loaded};
use crate::codec;
use crate::wal::{self, Replay, Wal};
use crate::{Error, Event, EventKind, Result, Revision};

const FORMAT_KEY: &[u8] = b"mformat";
const FORMAT: &[u8] = b"minik8s-store/1";
const REVISION_KEY: &[u8] = b"mrevision";
const COMPACTED_KEY: &[u8] = b"mcompacted";
const OBJECT: u8 = b'o';
const LOG: u8 = b'l';

/// How often the flusher checkpoints sled: etcd's backend commits bbolt every 100 ms
/// (`--backend-batch-interval`, `defaultBatchInterval` in `server/storage/backend/backend.go`) ...
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);
/// ... or after 10,000 writes (`defaultBatchLimit`, same file) ...
const CHECKPOINT_WRITES: u64 = 10_000;
/// ... or after one log segment's worth of bytes, which bounds the log's size on disk when values
/// are large (etcd bounds it by its snapshot count instead).
const CHECKPOINT_BYTES: u64 = wal::SEGMENT_BYTES;

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

pub(crate) struct SledBackend {
    path: PathBuf,
    /// `StoreConfig::sled_cache_bytes`, kept to reopen.
    cache_bytes: u64,
    /// The open database. Writers of this lock: [`Backend::reopen`] only; everything else reads.
    /// `None` between a reopen that dropped the old database and one that opened the new.
    open: parking_lot::RwLock<Option<Opened>>,
    /// `StoreConfig::fsync`.
    fsync: bool,
    /// Blob files already fsynced; the set is rebuilt from the directory on each flush, so it stays
    /// as small as the directory.
    synced_blobs: parking_lot::Mutex<HashSet<OsString>>,
    /// Batches applied to sled and not yet in the write-ahead log (encoded with
    /// [`wal::encode_batch`]), and the last revision among them. Filled by `apply` (the writer),
    /// emptied by `flush` (the flusher).
    pending: parking_lot::Mutex<(Vec<u8>, Revision)>,
    /// The write-ahead log; used by the flusher only (and by open and reopen).
    wal: parking_lot::Mutex<Wal>,
    /// The last revision applied to sled: a checkpoint started after reading it covers it.
    applied: AtomicU64,
    /// When the last checkpoint ended, and the log bytes written since.
    last_checkpoint: parking_lot::Mutex<Checkpointed>,
    checkpoint_interval: Duration,
}

/// When the last checkpoint ended, the revision it covered, and the log bytes written since.
struct Checkpointed {
    at: Instant,
    revision: Revision,
    logged_bytes: u64,
}

impl Checkpointed {
    fn at(revision: Revision) -> Self {
        Self {
            at: Instant::now(),
            revision,
            logged_bytes: 0,
        }
    }
}

/// One opening of the sled database.
struct Opened {
    db: sled::Db,
    data: sled::Tree,
    /// sled's log file, opened again so each flush can end with `fdatasync` (see `flush`).
    log_file: std::fs::File,
}

impl Opened {
    /// Opens the database in `path`; sled's panics on corrupt files become [`Error::Corrupt`].
    fn open(path: &Path, cache_bytes: u64) -> Result<Self> {
        remove_partial_snapshots(path)?;
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(cache_bytes)
            .flush_every_ms(None)
            .mode(sled::Mode::HighThroughput);
        // sled can panic on some corrupt files; refuse to start instead of aborting the process.
        let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || config.open()));
        let db = match opened {
            Ok(Ok(db)) => db,
            Ok(Err(sled::Error::Corruption { at, .. })) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    detail: format!("sled reports corruption at {at:?}"),
                })
            }
            Ok(Err(sled::Error::Io(io))) if crate::space::is_enospc(&io) => {
                return Err(Error::NoSpace {
                    detail: format!("opening the store failed: {io}"),
                })
            }
            Ok(Err(source)) => {
                return Err(Error::Open {
                    path: path.to_owned(),
                    source,
                })
            }
            Err(_) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    detail: "sled panicked while recovering the database".into(),
                })
            }
        };
        let data = db.open_tree("data").map_err(|source| Error::Open {
            path: path.to_owned(),
            source,
        })?;
        let log_path = path.join("db");
        let log_file = std::fs::File::open(&log_path).map_err(io_err(&log_path))?;
        Ok(Self { db, data, log_file })
    }

    /// [`Opened::open`]; on a disk too full for sled to open, once more after deleting the
    /// emergency ballast (`crate::space`).
    fn open_or_release_ballast(path: &Path, cache_bytes: u64) -> Result<Self> {
        match Self::open(path, cache_bytes) {
            Err(Error::NoSpace { .. }) if crate::space::release_ballast(path) => {
                Self::open(path, cache_bytes)
            }
            other => other,
        }
    }
}

/// An I/O failure on `path`; "no space left on device" becomes [`Error::NoSpace`].
fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| {
        if crate::space::is_enospc(&source) {
            Error::NoSpace {
                detail: format!("writing {} failed: {source}", file_name(path)),
            }
        } else {
            Error::Io {
                path: path.to_owned(),
                source,
            }
        }
    }
}

/// sled writes a snapshot to `snap.<lsn>.generating`, then renames it to `snap.<lsn>`; a write cut
/// short (a full disk, a crash) leaves the first behind, and sled 0.34 then reads it as the newest
/// snapshot and reports corruption. Such a file is incomplete by construction (the older snapshot
/// is only deleted after the rename), so it is removed before sled opens; sled then recovers from
/// the older snapshot and its log.
fn remove_partial_snapshots(path: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io_err(path)(error)),
    };
    for entry in entries {
        let entry = entry.map_err(io_err(path))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            let file = entry.path();
            std::fs::remove_file(&file).map_err(io_err(&file))?;
            tracing::warn!(path = %file.display(), "removed an incomplete sled snapshot");
        }
    }
    Ok(())
}

/// The last component of `path` (what a client may see of it).
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// fsync a directory, so the entries of files created in it survive power loss.
fn sync_dir(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|dir| dir.sync_all())
        .map_err(io_err(path))
}

impl SledBackend {
    pub(crate) fn open(path: &Path, cache_bytes: u64, fsync: bool, reserve: u64) -> Result<Self> {
        // Owner-only: the store holds every Secret, and sled creates its files with the umask's mode.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(path)
            .map_err(|source| Error::Io {
                path: path.to_owned(),
                source,
            })?;
        Self::open_with(
            path,
            cache_bytes,
            fsync,
            reserve,
            wal::SEGMENT_BYTES,
            CHECKPOINT_INTERVAL,
        )
    }

    /// [`SledBackend::open`] with the log's segment size and checkpoint interval chosen (tests).
    pub(crate) fn open_with(
        path: &Path,
        cache_bytes: u64,
        fsync: bool,
        reserve: u64,
        segment_bytes: u64,
        checkpoint_interval: Duration,
    ) -> Result<Self> {
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(path)
            .map_err(|source| Error::Io {
                path: path.to_owned(),
                source,
            })?;
        let opened = Opened::open_or_release_ballast(path, cache_bytes)?;
        let backend = Self {
            path: path.to_owned(),
            cache_bytes,
            open: parking_lot::RwLock::new(Some(opened)),
            fsync,
            synced_blobs: parking_lot::Mutex::new(HashSet::new()),
            pending: parking_lot::Mutex::new((Vec::new(), 0)),
            wal: parking_lot::Mutex::new(Wal::new(&path.join("wal"), segment_bytes, fsync)),
            applied: AtomicU64::new(0),
            last_checkpoint: parking_lot::Mutex::new(Checkpointed::at(0)),
            checkpoint_interval,
        };
        backend.check_format()?;
        backend.replay_wal()?;
        crate::space::keep_ballast(path, reserve);
        // The log's directory exists before its first segment, and its entry is durable with the rest.
        let wal_dir = path.join("wal");
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&wal_dir)
            .map_err(io_err(&wal_dir))?;
        sync_dir(path)?;
        Ok(backend)
    }

    /// Applies every write-ahead log event after sled's revision to sled, checkpoints, and deletes
    /// the log: afterwards sled alone holds everything that was acknowledged.
    fn replay_wal(&self) -> Result<()> {
        let replayed = {
            let open = self.opened()?;
            let revision = self.read_meta_u64(&open, REVISION_KEY)?;
            let replayed = Replay::run(&self.path.join("wal"), revision, |events, at_ms| {
                let (batch, _) = sled_batch(events.iter(), at_ms, false);
                open.data
                    .apply_batch(batch)
                    .map_err(self.sled_err("replay"))
            })?;
            if replayed > revision {
                tracing::info!(
                    from = revision + 1,
                    to = replayed,
                    "replayed the write-ahead log over sled"
                );
            }
            replayed
        };
        self.applied.store(replayed, Ordering::Release);
        self.sync_sled()?;
        self.wal.lock().clear()?;
        *self.last_checkpoint.lock() = Checkpointed::at(replayed);
        Ok(())
    }

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
}

impl Backend for SledBackend {
    fn load(&self) -> Result<Loaded> {
        let open = self.opened()?;
        let revision = self.read_meta_u64(&open, REVISION_KEY)?;
        let mut compacted = self.read_meta_u64(&open, COMPACTED_KEY)?;
        let log_bound = |entry: Option<(sled::IVec, sled::IVec)>| -> Result<Option<Revision>> {
            entry
                .map(|(k, _)| decode_log_key(&k).ok_or_else(|| self.corrupt("bad log key")))
                .transpose()
        };
        let mut log = open.data.scan_prefix([LOG]);
        let first = log_bound(log.next().transpose().map_err(self.sled_err("read log"))?)?;
        let last = log_bound(
            log.next_back()
                .transpose()
                .map_err(self.sled_err("read log"))?,
        )?;
        let last = last.or(first);
        if let Some(last) = last {
            if last != revision {
                return Err(self.corrupt(format!(
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
            return Err(self.corrupt(format!(
                "compacted revision {compacted} is after the store revision {revision}"
            )));
        }
        let mut items = Vec::new();
        for entry in open.data.scan_prefix([OBJECT]) {
            let (key, value) = entry.map_err(self.sled_err("read objects"))?;
            let kv = codec::decode_kv(&key[1..], &value).ok_or_else(|| {
                self.corrupt(format!(
                    "object {:?} does not decode",
                    String::from_utf8_lossy(&key)
                ))
            })?;
            if kv.mod_revision > revision || kv.create_revision > kv.mod_revision {
                return Err(self.corrupt(format!(
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

    fn apply(&self, events: &[Arc<Event>], at_ms: u64) -> Result<()> {
        let Some(last) = events.last() else {
            return Ok(());
        };
        let (batch, logged) = sled_batch(events.iter().map(|e| &**e), at_ms, true);
        self.opened()?
            .data
            .apply_batch(batch)
            .map_err(self.sled_err("commit"))?;
        self.applied.store(last.revision, Ordering::Release);
        let mut pending = self.pending.lock();
        pending.0.extend_from_slice(&logged);
        pending.1 = last.revision;
        Ok(())
    }

    fn read_log(&self, after: Revision, upto: Revision, max: usize) -> Result<Vec<Event>> {
        if after >= upto {
            return Ok(Vec::new());
        }
        let mut events = Vec::new();
        let open = self.opened()?;
        for entry in open
            .data
            .range(log_key(after + 1)..=log_key(upto))
            .take(max)
        {
            let (key, value) = entry.map_err(self.sled_err("read log"))?;
            let revision = decode_log_key(&key).ok_or_else(|| self.corrupt("bad log key"))?;
            let event = codec::decode_event(revision, &value).ok_or_else(|| {
                self.corrupt(format!("event at revision {revision} does not decode"))
            })?;
            events.push(event);
        }
        Ok(events)
    }

    fn last_committed_before(&self, cutoff_ms: u64, upto: Revision) -> Result<Option<Revision>> {
        let mut found = None;
        let open = self.opened()?;
        for entry in open.data.range(log_key(0)..=log_key(upto)) {
            let (key, value) = entry.map_err(self.sled_err("read log"))?;
            let revision = decode_log_key(&key).ok_or_else(|| self.corrupt("bad log key"))?;
            let at = codec::event_time(&value).ok_or_else(|| {
                self.corrupt(format!("event at revision {revision} does not decode"))
            })?;
            if at >= cutoff_ms {
                break;
            }
            found = Some(revision);
        }
        Ok(found)
    }

    fn compact(&self, upto: Revision) -> Result<()> {
        // Marker and removals in one batch: the log never looks compacted further than recorded.
        let mut batch = sled::Batch::default();
        batch.insert(COMPACTED_KEY, &codec::revision_key(upto));
        let open = self.opened()?;
        for key in open.data.range(log_key(0)..=log_key(upto)).keys() {
            batch.remove(key.map_err(self.sled_err("compact"))?);
        }
        open.data
            .apply_batch(batch)
            .map_err(self.sled_err("compact"))
    }

    fn free_space(&self) -> Option<u64> {
        crate::space::available(&self.path)
    }

    /// sled latches its first I/O error (a full disk's `ENOSPC` included) and fails every later
    /// operation until the database is opened again; this is that opening. The old database goes
    /// first: it holds the directory's lock. What the new one finds is what reached the disk, as
    /// after a crash.
    fn reopen(&self) -> Result<()> {
        let mut open = self.open.write();
        drop(open.take());
        // Applied, never logged, never acknowledged: what sled kept of them is what counts now.
        *self.pending.lock() = (Vec::new(), 0);
        let opened = Opened::open_or_release_ballast(&self.path, self.cache_bytes)?;
        *open = Some(opened);
        drop(open);
        self.synced_blobs.lock().clear();
        self.replay_wal()
    }

    /// Appends the batches applied since the last call to the write-ahead log as one frame and
    /// syncs it: from then on they are durable.
    fn flush(&self) -> Result<()> {
        let (payload, last) = std::mem::take(&mut *self.pending.lock());
        if payload.is_empty() {
            return Ok(());
        }
        self.wal.lock().append(&payload, last)?;
        self.last_checkpoint.lock().logged_bytes += payload.len() as u64;
        Ok(())
    }

    /// Checkpoints when one is due: something was logged since the last one, and
    /// `checkpoint_interval` passed, or [`CHECKPOINT_WRITES`] or [`CHECKPOINT_BYTES`] were logged.
    fn maintain(&self) -> Result<()> {
        let due = {
            let last = self.last_checkpoint.lock();
            let writes = self
                .applied
                .load(Ordering::Acquire)
                .saturating_sub(last.revision);
            last.logged_bytes > 0
                && (writes >= CHECKPOINT_WRITES
                    || last.logged_bytes >= CHECKPOINT_BYTES
                    || last.at.elapsed() >= self.checkpoint_interval)
        };
        if due {
            self.checkpoint()?;
        }
        Ok(())
    }
}

/// The sled batch for `events` (objects, log entries, revision), and, when `log` is set, the same
/// events encoded for the write-ahead log (the log entries' bytes are encoded once for both).
fn sled_batch<'a>(
    events: impl Iterator<Item = &'a Event>,
    at_ms: u64,
    log: bool,
) -> (sled::Batch, Vec<u8>) {
    let mut batch = sled::Batch::default();
    let mut logged = Vec::new();
    let mut count = 0u32;
    let mut last = None;
    if log {
        logged.extend_from_slice(&at_ms.to_le_bytes());
        logged.extend_from_slice(&[0; 4]);
    }
    for event in events {
        match (&event.kind, &event.value) {
            (EventKind::Put, Some(kv)) => {
                batch.insert(object_key(&event.key), codec::encode_kv(kv))
            }
            _ => batch.remove(object_key(&event.key)),
        }
        let encoded = codec::encode_event(event, at_ms);
        if log {
            wal::encode_event(&mut logged, event.revision, &encoded);
            count += 1;
        }
        batch.insert(&log_key(event.revision), encoded);
        last = Some(event.revision);
    }
    if log {
        logged[8..12].copy_from_slice(&count.to_le_bytes());
    }
    if let Some(last) = last {
        batch.insert(REVISION_KEY, &codec::revision_key(last));
    }
    (batch, logged)
}

impl Drop for SledBackend {
    /// A last checkpoint, so the next open has no log to replay (best effort: the log covers it).
    fn drop(&mut self) {
        if self.opened().is_err() {
            return;
        }
        // Everything logged was applied before the checkpoint started, so it covers the whole log.
        match self.checkpoint().and_then(|()| self.wal.lock().clear()) {
            Ok(()) => {}
            Err(error) => {
                tracing::debug!(%error, "closing checkpoint failed; the next open replays the log")
            }
        }
    }
}

impl SledBackend {
    /// Makes sled durable up to what was applied before it started, then deletes the log segments
    /// that holds nothing newer.
    fn checkpoint(&self) -> Result<()> {
        let upto = self.applied.load(Ordering::Acquire);
        self.sync_sled()?;
        self.wal.lock().remove_through(upto)?;
        *self.last_checkpoint.lock() = Checkpointed::at(upto);
        Ok(())
    }

    /// sled's `flush` writes its buffers with `sync_file_range` (data pages only: no file metadata,
    /// no disk-cache flush) and writes blob files (values over ~128 KiB) with no sync at all. That
    /// survives a process kill, not a power loss; so after it: `fdatasync` the log file, `fsync`
    /// new blob files and their directory.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyValue;

    const NEVER: Duration = Duration::from_secs(3600);

    fn put(revision: Revision, value: &str) -> Arc<Event> {
        Arc::new(Event {
            kind: EventKind::Put,
            key: format!("/k{revision}"),
            revision,
            value: Some(KeyValue {
                key: format!("/k{revision}"),
                value: bytes::Bytes::from(value.to_owned()),
                create_revision: revision,
                mod_revision: revision,
            }),
            prev: None,
        })
    }

    fn open(dir: &Path, segment_bytes: u64) -> Result<SledBackend> {
        SledBackend::open_with(dir, 1 << 20, true, 0, segment_bytes, NEVER)
    }

    /// A store whose sled holds revisions `1..=upto` (checkpointed) and no log.
    fn sled_at(dir: &Path, upto: Revision) {
        let backend = open(dir, wal::SEGMENT_BYTES).unwrap();
        let events: Vec<_> = (1..=upto).map(|r| put(r, "sled")).collect();
        backend.apply(&events, 1).unwrap();
        backend.flush().unwrap();
    }

    /// Writes a log of `revisions`, one frame per revision, as the flusher would.
    fn forge_log(dir: &Path, revisions: std::ops::RangeInclusive<Revision>) -> PathBuf {
        let mut log = Wal::new(&dir.join("wal"), wal::SEGMENT_BYTES, false);
        for revision in revisions {
            let event = put(revision, "wal");
            let (_, payload) = sled_batch(std::iter::once(&*event), 7, true);
            log.append(&payload, revision).unwrap();
        }
        dir.join("wal").join(format!("{:016x}.wal", 0))
    }

    fn value_of(backend: &SledBackend, revision: Revision) -> Option<String> {
        backend
            .load()
            .unwrap()
            .items
            .into_iter()
            .find(|kv| kv.key == format!("/k{revision}"))
            .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
    }

    fn segment_files(dir: &Path) -> usize {
        std::fs::read_dir(dir.join("wal"))
            .map(|entries| entries.count())
            .unwrap_or(0)
    }

    #[test]
    fn replays_the_log_over_a_sled_behind_it() {
        let dir = tempfile::tempdir().unwrap();
        sled_at(dir.path(), 5);
        forge_log(dir.path(), 6..=10);
        let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
        assert_eq!(backend.load().unwrap().revision, 10);
        assert_eq!(value_of(&backend, 5).as_deref(), Some("sled"));
        assert_eq!(value_of(&backend, 6).as_deref(), Some("wal"));
        let log = backend.read_log(0, 10, 100).unwrap();
        assert_eq!(log.len(), 10);
        assert_eq!(segment_files(dir.path()), 0, "the replayed log is deleted");
    }

    #[test]
    fn skips_logged_events_sled_already_holds() {
        let dir = tempfile::tempdir().unwrap();
        sled_at(dir.path(), 10);
        forge_log(dir.path(), 3..=12);
        let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
        assert_eq!(backend.load().unwrap().revision, 12);
        assert_eq!(value_of(&backend, 10).as_deref(), Some("sled"));
        assert_eq!(value_of(&backend, 11).as_deref(), Some("wal"));
    }

    #[test]
    fn a_log_starting_after_sled_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        sled_at(dir.path(), 10);
        forge_log(dir.path(), 15..=16);
        assert!(matches!(
            open(dir.path(), wal::SEGMENT_BYTES),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        sled_at(dir.path(), 5);
        let segment = forge_log(dir.path(), 6..=8);
        // A frame whose header claims more than was written: its write never completed.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&segment)
            .unwrap();
        std::io::Write::write_all(&mut file, &[100, 0, 0, 0, 1, 2, 3, 4, 5, 6]).unwrap();
        drop(file);
        let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
        assert_eq!(backend.load().unwrap().revision, 8);
    }

    #[test]
    fn a_bad_frame_before_good_ones_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        sled_at(dir.path(), 5);
        let segment = forge_log(dir.path(), 6..=8);
        let mut bytes = std::fs::read(&segment).unwrap();
        // Flip a byte in the first frame's payload; the two frames after it stay valid.
        bytes[20] ^= 0xff;
        std::fs::write(&segment, bytes).unwrap();
        match open(dir.path(), wal::SEGMENT_BYTES) {
            Err(Error::Corrupt { detail, .. }) => assert!(detail.contains("followed by a valid")),
            Err(other) => panic!("expected Corrupt, got {other}"),
            Ok(_) => panic!("expected Corrupt, the store opened"),
        }
    }

    #[test]
    fn a_checkpoint_deletes_the_segments_it_covers() {
        let dir = tempfile::tempdir().unwrap();
        // One-byte segments: every frame starts a new one.
        let backend = open(dir.path(), 1).unwrap();
        for revision in 1..=3 {
            backend.apply(&[put(revision, "v")], 1).unwrap();
            backend.flush().unwrap();
        }
        assert_eq!(backend.wal.lock().segment_count(), 3);
        assert_eq!(segment_files(dir.path()), 3);
        backend.checkpoint().unwrap();
        // The current segment stays (the next frame goes there); the finished ones are gone.
        assert_eq!(segment_files(dir.path()), 1);
        drop(backend);
        let backend = open(dir.path(), 1).unwrap();
        assert_eq!(backend.load().unwrap().revision, 3);
    }

    #[test]
    fn reopen_after_a_failed_write_replays_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
        backend
            .apply(&[put(1, "a"), put(2, "a"), put(3, "a")], 1)
            .unwrap();
        backend.flush().unwrap();
        // Applied, but its flush never happened (the store failed).
        backend.apply(&[put(4, "a")], 1).unwrap();
        backend.reopen().unwrap();
        let loaded = backend.load().unwrap();
        assert!(loaded.revision >= 3, "acknowledged writes survive a reopen");
        assert_eq!(
            backend.read_log(0, loaded.revision, 100).unwrap().len() as u64,
            loaded.revision
        );
        assert_eq!(segment_files(dir.path()), 0);
        let next = loaded.revision + 1;
        backend.apply(&[put(next, "b")], 1).unwrap();
        backend.flush().unwrap();
        drop(backend);
        let backend = open(dir.path(), wal::SEGMENT_BYTES).unwrap();
        assert_eq!(backend.load().unwrap().revision, next);
        assert_eq!(value_of(&backend, next).as_deref(), Some("b"));
    }
}
