//! The persistence boundary of the engine, and the pure in-memory back end.
//!
//! The engine ([`crate::engine`]) owns revisions, preconditions, the in-memory index, batching and
//! watch fan-out; a back end only has to make a batch of events durable atomically, load what is
//! durable at start-up, and keep the event log (read, age scan, compaction).
//!
//! [`MemoryBackend`] keeps the event log in a `VecDeque` and nothing else (the engine's index *is* the
//! state). It writes no files at all. Chosen over sled's `Config::temporary` because it is faster,
//! cannot leave files behind, and runs the same engine code, so the contract suite covers both.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::{Event, KeyValue, Result, Revision};

/// What is durable, as found at start-up.
pub(crate) struct Loaded {
    pub(crate) revision: Revision,
    pub(crate) compacted: Revision,
    pub(crate) items: Vec<KeyValue>,
}

pub(crate) trait Backend: Send + Sync + 'static {
    /// What is durable. The values of keys under `cold` prefixes are left out (empty): the index
    /// would drop them ([`Backend::keeps_objects`]).
    fn load(&self, cold: &[String]) -> Result<Loaded>;

    /// Atomically apply `events` (ascending, dense, starting at the last applied revision + 1) to the
    /// objects, append them to the log, and set the revision to the last one. Not yet durable: the
    /// engine calls [`Backend::flush`] before anyone is told.
    fn apply(&self, events: &[Arc<Event>], at_ms: u64) -> Result<()>;

    /// Logged events with `after < revision <= upto`, ascending, at most `max`.
    fn read_log(&self, after: Revision, upto: Revision, max: usize) -> Result<Vec<Event>>;

    /// The newest revision `<= upto` whose event was committed before `cutoff_ms`, scanning from the
    /// oldest retained event.
    fn last_committed_before(&self, cutoff_ms: u64, upto: Revision) -> Result<Option<Revision>>;

    /// Drop logged events with revision `<= upto` and record `upto` as compacted.
    fn compact(&self, upto: Revision) -> Result<()>;

    /// Make everything applied so far durable.
    fn flush(&self) -> Result<()>;

    /// Free bytes on the file system the back end writes to; `None` for a back end that writes no
    /// files (or when the file system cannot be asked).
    fn free_space(&self) -> Option<u64> {
        None
    }

    /// Opens the back end's files again after a failed commit, dropping what it held in memory;
    /// the engine then loads what is durable. Back ends that cannot reopen say [`crate::Error::Failed`].
    fn reopen(&self) -> Result<()> {
        Err(crate::Error::Failed)
    }

    /// Whether the back end keeps every current object ([`Backend::read_object`]), so the index
    /// may hold values cold (`StoreConfig::cold_prefixes`).
    fn keeps_objects(&self) -> bool {
        false
    }

    /// The current (applied, perhaps not yet flushed) state of `key`, for a back end that
    /// [`Backend::keeps_objects`]; the others hold nothing to read.
    fn read_object(&self, _key: &str) -> Result<Option<KeyValue>> {
        Err(crate::Error::Failed)
    }

    /// Nothing to flush: callers apply their writes inline instead of through the writer and
    /// flusher threads, whose pipeline exists to overlap applying with flushing.
    fn writes_inline(&self) -> bool {
        false
    }
}

/// The in-memory back end: only the event log, bounded by the engine's compaction.
#[derive(Default)]
pub(crate) struct MemoryBackend {
    /// `(commit time in Unix ms, event)`, ascending by revision.
    log: Mutex<VecDeque<(u64, Arc<Event>)>>,
}

impl Backend for MemoryBackend {
    fn load(&self, _cold: &[String]) -> Result<Loaded> {
        Ok(Loaded {
            revision: 0,
            compacted: 0,
            items: Vec::new(),
        })
    }

    fn apply(&self, events: &[Arc<Event>], at_ms: u64) -> Result<()> {
        let mut log = self.log.lock();
        log.extend(events.iter().map(|e| (at_ms, Arc::clone(e))));
        Ok(())
    }

    fn read_log(&self, after: Revision, upto: Revision, max: usize) -> Result<Vec<Event>> {
        let log = self.log.lock();
        // The log is dense and ascending, so the position of `after + 1` is computable.
        let start = match log.front() {
            Some((_, first)) => after.saturating_add(1).saturating_sub(first.revision),
            None => return Ok(Vec::new()),
        };
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        Ok(log
            .iter()
            .skip(start)
            .take_while(|(_, e)| e.revision <= upto)
            .take(max)
            .map(|(_, e)| Event::clone(e))
            .collect())
    }

    fn last_committed_before(&self, cutoff_ms: u64, upto: Revision) -> Result<Option<Revision>> {
        let log = self.log.lock();
        Ok(log
            .iter()
            .take_while(|(at, e)| *at < cutoff_ms && e.revision <= upto)
            .last()
            .map(|(_, e)| e.revision))
    }

    fn compact(&self, upto: Revision) -> Result<()> {
        let mut log = self.log.lock();
        while log.front().is_some_and(|(_, e)| e.revision <= upto) {
            log.pop_front();
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn writes_inline(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;

    fn event(revision: Revision) -> Arc<Event> {
        Arc::new(Event {
            kind: EventKind::Delete,
            key: format!("/k{revision}"),
            revision,
            value: None,
            prev: None,
        })
    }

    #[test]
    fn memory_log_reads_ranges_and_compacts() {
        let backend = MemoryBackend::default();
        let events: Vec<_> = (1..=10).map(event).collect();
        backend.apply(&events[..5], 100).ok();
        backend.apply(&events[5..], 200).ok();
        let revisions = |v: Vec<Event>| v.iter().map(|e| e.revision).collect::<Vec<_>>();
        assert_eq!(
            revisions(backend.read_log(3, 6, 10).unwrap_or_default()),
            [4, 5, 6]
        );
        assert_eq!(
            revisions(backend.read_log(3, 10, 2).unwrap_or_default()),
            [4, 5]
        );
        assert_eq!(backend.last_committed_before(150, 10).ok(), Some(Some(5)));
        assert_eq!(backend.last_committed_before(100, 10).ok(), Some(None));
        backend.compact(7).ok();
        // After compaction a read from before the log starts returns what is left; callers detect the
        // hole because the log is dense.
        assert_eq!(
            revisions(backend.read_log(2, 10, 10).unwrap_or_default()),
            [8, 9, 10]
        );
        assert_eq!(
            revisions(backend.read_log(8, 10, 10).unwrap_or_default()),
            [9, 10]
        );
    }
}
