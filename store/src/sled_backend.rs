//! The sled back end: one tree with three key spaces, one atomic batch and one flush per commit.
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
//! - **Durable**: the engine acknowledges a batch only after a flush that started after the batch
//!   was applied: `Db::flush`, then `fdatasync` of sled's log file and `fsync` of new blob files
//!   (sled alone uses `sync_file_range`, which does not survive power loss). sled's own periodic
//!   flush is disabled (`flush_every_ms(None)`).
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
use std::sync::Arc;

use crate::backend::{Backend, Loaded};
use crate::codec;
use crate::{Error, Event, EventKind, KeyValue, Result, Revision};

const FORMAT_KEY: &[u8] = b"mformat";
const FORMAT: &[u8] = b"minik8s-store/1";
const REVISION_KEY: &[u8] = b"mrevision";
const COMPACTED_KEY: &[u8] = b"mcompacted";
const OBJECT: u8 = b'o';
const LOG: u8 = b'l';

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
        let opened = Opened::open_or_release_ballast(path, cache_bytes)?;
        let backend = Self {
            path: path.to_owned(),
            cache_bytes,
            open: parking_lot::RwLock::new(Some(opened)),
            fsync,
            synced_blobs: parking_lot::Mutex::new(HashSet::new()),
        };
        backend.check_format()?;
        crate::space::keep_ballast(path, reserve);
        sync_dir(path)?;
        Ok(backend)
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
        self.flush()
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
    fn load(&self, cold: &[String]) -> Result<Loaded> {
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
            let is_cold = cold.iter().any(|p| key[1..].starts_with(p.as_bytes()));
            let kv = codec::decode_kv(&key[1..], &value, !is_cold).ok_or_else(|| {
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
        let mut batch = sled::Batch::default();
        for event in events {
            match (&event.kind, &event.value) {
                (EventKind::Put, Some(kv)) => {
                    batch.insert(object_key(&event.key), codec::encode_kv(kv))
                }
                _ => batch.remove(object_key(&event.key)),
            }
            batch.insert(&log_key(event.revision), codec::encode_event(event, at_ms));
        }
        batch.insert(REVISION_KEY, &codec::revision_key(last.revision));
        self.opened()?
            .data
            .apply_batch(batch)
            .map_err(self.sled_err("commit"))
    }

    fn keeps_objects(&self) -> bool {
        true
    }

    fn read_object(&self, key: &str) -> Result<Option<KeyValue>> {
        let open = self.opened()?;
        let Some(value) = open
            .data
            .get(object_key(key))
            .map_err(self.sled_err("read object"))?
        else {
            return Ok(None);
        };
        codec::decode_kv(key.as_bytes(), &value, true)
            .map(Some)
            .ok_or_else(|| self.corrupt(format!("object {key:?} does not decode")))
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
        let opened = Opened::open_or_release_ballast(&self.path, self.cache_bytes)?;
        *open = Some(opened);
        drop(open);
        self.synced_blobs.lock().clear();
        Ok(())
    }

    /// sled's `flush` writes its buffers with `sync_file_range` (data pages only: no file metadata,
    /// no disk-cache flush) and writes blob files (values over ~128 KiB) with no sync at all. That
    /// survives a process kill, not a power loss; so after it: `fdatasync` the log file, `fsync`
    /// new blob files and their directory.
    fn flush(&self) -> Result<()> {
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
}

impl SledBackend {
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
