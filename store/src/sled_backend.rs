//! The sled back end: three trees, one transaction per batch, one flush per batch.
//!
//! Layout:
//! - `objects`: key (UTF-8) → `[format][create_revision][mod_revision][value]` — the current state.
//! - `log`: revision (8-byte big-endian) → encoded event with commit time, new and previous value.
//! - `meta`: `format` (a marker naming this layout), `revision` (last committed), `compacted`.
//!
//! Guarantees:
//! - **Atomic**: objects, log entries and the revision counter of a batch are written in one sled
//!   transaction across the three trees, so after a crash either all of a batch is there or none.
//! - **Durable**: [`Backend::commit`] returns only after `Db::flush` (sled's own periodic flush is
//!   disabled: `flush_every_ms(None)`).
//! - **Never reset**: a directory that is not ours, or holds data that does not decode, fails start-up
//!   with [`Error::Corrupt`] naming the path. sled panics on some corrupt files; those are caught at
//!   open and reported the same way.
//! - Compaction writes the `compacted` marker before removing entries and is not flushed on its own: a
//!   crash may bring back old log entries, which are real history, never invented.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Transactional;

use crate::backend::{Backend, Loaded};
use crate::codec;
use crate::{Error, Event, EventKind, Result, Revision};

const FORMAT_KEY: &[u8] = b"format";
const FORMAT: &[u8] = b"minik8s-store/1";
const REVISION_KEY: &[u8] = b"revision";
const COMPACTED_KEY: &[u8] = b"compacted";

/// One event ready for the transaction: log key, log entry, new object (`None` for a delete).
type Encoded = ([u8; 8], Vec<u8>, Option<Vec<u8>>);

pub(crate) struct SledBackend {
    path: PathBuf,
    db: sled::Db,
    objects: sled::Tree,
    log: sled::Tree,
    meta: sled::Tree,
}

impl SledBackend {
    pub(crate) fn open(path: &Path, cache_bytes: u64) -> Result<Self> {
        std::fs::create_dir_all(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
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
        let tree = |name: &str| {
            db.open_tree(name).map_err(|source| Error::Open {
                path: path.to_owned(),
                source,
            })
        };
        let backend = Self {
            objects: tree("objects")?,
            log: tree("log")?,
            meta: tree("meta")?,
            path: path.to_owned(),
            db,
        };
        backend.check_format()?;
        Ok(backend)
    }

    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    fn sled_err(operation: &'static str) -> impl FnOnce(sled::Error) -> Error {
        move |source| Error::Sled { operation, source }
    }

    /// A new (empty) database gets the format marker; an existing one must carry ours.
    fn check_format(&self) -> Result<()> {
        match self
            .meta
            .get(FORMAT_KEY)
            .map_err(Self::sled_err("read format"))?
        {
            Some(found) if found.as_ref() == FORMAT => Ok(()),
            Some(found) => Err(self.corrupt(format!(
                "unknown store format {:?}",
                String::from_utf8_lossy(&found)
            ))),
            None => {
                let empty = self.objects.is_empty() && self.log.is_empty() && self.meta.is_empty();
                let foreign = self.db.tree_names().iter().any(|name| {
                    !matches!(
                        name.as_ref(),
                        b"__sled__default" | b"objects" | b"log" | b"meta"
                    )
                });
                if !empty || foreign || !self.db.is_empty() {
                    return Err(self.corrupt("not a minik8s store (format marker missing)"));
                }
                self.meta
                    .insert(FORMAT_KEY, FORMAT)
                    .map_err(Self::sled_err("write format"))?;
                self.flush()
            }
        }
    }

    fn read_meta_u64(&self, key: &[u8]) -> Result<Revision> {
        match self.meta.get(key).map_err(Self::sled_err("read meta"))? {
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
        let revision = self.read_meta_u64(REVISION_KEY)?;
        let mut compacted = self.read_meta_u64(COMPACTED_KEY)?;
        let log_bound = |entry: Option<(sled::IVec, sled::IVec)>| -> Result<Option<Revision>> {
            entry
                .map(|(k, _)| {
                    codec::decode_revision_key(&k).ok_or_else(|| self.corrupt("bad log key"))
                })
                .transpose()
        };
        let first = log_bound(self.log.first().map_err(Self::sled_err("read log"))?)?;
        let last = log_bound(self.log.last().map_err(Self::sled_err("read log"))?)?;
        if let Some(last) = last {
            if last != revision {
                return Err(self.corrupt(format!(
                    "event log ends at revision {last} but the store revision is {revision}"
                )));
            }
        }
        if let Some(first) = first {
            compacted = compacted.max(first - 1);
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
        for entry in self.objects.iter() {
            let (key, value) = entry.map_err(Self::sled_err("read objects"))?;
            let kv = codec::decode_kv(&key, &value).ok_or_else(|| {
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

    fn commit(&self, events: &[Arc<Event>], at_ms: u64) -> Result<()> {
        let Some(last) = events.last() else {
            return Ok(());
        };
        // Encode outside the transaction: its closure may run more than once.
        let encoded: Vec<Encoded> = events
            .iter()
            .map(|e| {
                let object = match e.kind {
                    EventKind::Put => e.value.as_ref().map(codec::encode_kv),
                    EventKind::Delete => None,
                };
                (
                    codec::revision_key(e.revision),
                    codec::encode_event(e, at_ms),
                    object,
                )
            })
            .collect();
        let revision = codec::revision_key(last.revision);
        let result: Result<(), TransactionError<()>> = (&self.objects, &self.log, &self.meta)
            .transaction(|(objects, log, meta)| {
                for (event, (rev_key, logged, object)) in events.iter().zip(&encoded) {
                    match object {
                        Some(object) => {
                            objects.insert(event.key.as_bytes(), object.as_slice())?;
                        }
                        None => {
                            objects.remove(event.key.as_bytes())?;
                        }
                    }
                    log.insert(rev_key, logged.as_slice())?;
                }
                meta.insert(REVISION_KEY, &revision)?;
                Ok::<(), ConflictableTransactionError<()>>(())
            });
        match result {
            Ok(()) => {}
            Err(TransactionError::Storage(source)) => {
                return Err(Error::Sled {
                    operation: "commit",
                    source,
                })
            }
            Err(TransactionError::Abort(())) => {
                return Err(Error::Sled {
                    operation: "commit",
                    source: sled::Error::Unsupported("transaction aborted".into()),
                })
            }
        }
        self.flush()
    }

    fn read_log(&self, after: Revision, upto: Revision, max: usize) -> Result<Vec<Event>> {
        if after >= upto {
            return Ok(Vec::new());
        }
        let start = codec::revision_key(after + 1);
        let end = codec::revision_key(upto);
        let mut events = Vec::new();
        for entry in self.log.range(start..=end).take(max) {
            let (key, value) = entry.map_err(Self::sled_err("read log"))?;
            let revision =
                codec::decode_revision_key(&key).ok_or_else(|| self.corrupt("bad log key"))?;
            let event = codec::decode_event(revision, &value).ok_or_else(|| {
                self.corrupt(format!("event at revision {revision} does not decode"))
            })?;
            events.push(event);
        }
        Ok(events)
    }

    fn last_committed_before(&self, cutoff_ms: u64, upto: Revision) -> Result<Option<Revision>> {
        let mut found = None;
        for entry in self.log.range(..=codec::revision_key(upto)) {
            let (key, value) = entry.map_err(Self::sled_err("read log"))?;
            let revision =
                codec::decode_revision_key(&key).ok_or_else(|| self.corrupt("bad log key"))?;
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
        self.meta
            .insert(COMPACTED_KEY, &codec::revision_key(upto))
            .map_err(Self::sled_err("compact"))?;
        let mut batch = sled::Batch::default();
        for key in self.log.range(..=codec::revision_key(upto)).keys() {
            batch.remove(key.map_err(Self::sled_err("compact"))?);
        }
        self.log
            .apply_batch(batch)
            .map_err(Self::sled_err("compact"))
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map(|_| ()).map_err(Self::sled_err("flush"))
    }
}
