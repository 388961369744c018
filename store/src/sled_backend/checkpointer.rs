//! The checkpointer: brings sled up to date behind the write-ahead log, on its own thread.
//!
//! It sleeps until a checkpoint is due (something logged, and `CHECKPOINT_INTERVAL` since the last
//! one ended, or `CHECKPOINT_WRITES` / `CHECKPOINT_BYTES` logged since), then, for everything logged
//! up to then: one atomic sled batch (objects, log entries, revision), the events leave the tail,
//! sled's flush and syncs, and the log segments it covers go. The flusher never waits for it, unless
//! the log is `MAX_BACKLOG_*` ahead. A failed checkpoint is recorded (the next flush fails the
//! store, whose reopen replays the log) and the thread ends; a reopen starts a new one. A panic
//! in sled counts as a failed checkpoint.

use std::sync::Arc;
use std::time::Instant;

use super::{add_event, Inner, CHECKPOINT_BYTES, CHECKPOINT_WRITES, REVISION_KEY};
use crate::codec;
use crate::{Error, Event, Result, Revision};

/// The thread's loop; returns when told to stop or after a failed checkpoint.
pub(super) fn run(inner: &Arc<Inner>) {
    loop {
        let (upto, bytes) = {
            let mut progress = inner.progress.lock();
            loop {
                if progress.stop || progress.failure.is_some() {
                    return;
                }
                if progress.logged > progress.checkpointed {
                    let (writes, bytes) = progress.backlog();
                    let due = progress.at + inner.checkpoint_interval;
                    if writes >= CHECKPOINT_WRITES
                        || bytes >= CHECKPOINT_BYTES
                        || Instant::now() >= due
                    {
                        break (progress.logged, progress.logged_bytes);
                    }
                    inner.progressed.wait_until(&mut progress, due);
                } else {
                    inner.progressed.wait(&mut progress);
                }
            }
        };
        // sled panics on some corrupt states; the flusher must hear of it, not wait forever.
        let checkpointed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            inner.checkpoint(upto, bytes)
        }))
        .unwrap_or(Err(Error::Failed));
        if let Err(error) = checkpointed {
            tracing::error!(%error, "store checkpoint failed; refusing further writes");
            inner.progress.lock().failure = Some(error);
            inner.progressed.notify_all();
            return;
        }
    }
}

impl Inner {
    /// Makes sled durable up to `upto` (logged, with `bytes` logged by then): applies the tail's
    /// events up to it as one batch, syncs sled, deletes the log segments holding nothing newer.
    pub(super) fn checkpoint(&self, upto: Revision, bytes: u64) -> Result<()> {
        let events: Vec<(u64, Arc<Event>)> = {
            let tail = self.tail.lock();
            tail.iter()
                .take_while(|(_, event)| event.revision <= upto)
                .cloned()
                .collect()
        };
        if let Some((_, last)) = events.last() {
            let last = last.revision;
            let compacted = self.compacted.load(std::sync::atomic::Ordering::Acquire);
            let mut batch = sled::Batch::default();
            for (at_ms, event) in &events {
                add_event(&mut batch, event, *at_ms, event.revision > compacted);
            }
            batch.insert(REVISION_KEY, &codec::revision_key(last));
            self.opened()?
                .data
                .apply_batch(batch)
                .map_err(self.sled_err("checkpoint"))?;
            // In sled now (not yet durable: the log still covers them), so readers find them there.
            let mut tail = self.tail.lock();
            while tail
                .front()
                .is_some_and(|(_, event)| event.revision <= last)
            {
                tail.pop_front();
            }
        }
        drop(events);
        self.sync_sled()?;
        self.wal.lock().remove_through(upto)?;
        let mut progress = self.progress.lock();
        progress.checkpointed = progress.checkpointed.max(upto);
        progress.checkpointed_bytes = progress.checkpointed_bytes.max(bytes);
        progress.at = Instant::now();
        drop(progress);
        // The flusher may wait for the backlog to shrink.
        self.progressed.notify_all();
        Ok(())
    }
}
