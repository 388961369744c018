//! Replay of the write-ahead log over sled, at open and at reopen: what a crash between the log and
//! a checkpoint left only in the log is applied to sled again, batch by batch, each with the
//! previous values the log leaves out.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::{add_event, object_key, Inner, Progress, COMPACTED_KEY, REVISION_KEY};
use crate::codec;
use crate::wal::Replay;
use crate::{Event, KeyValue, Result};

impl Inner {
    /// Applies every write-ahead log event after sled's revision to sled, syncs sled, and deletes
    /// the log: afterwards sled alone holds everything that was acknowledged, and the log and sled
    /// are at the same revision.
    pub(super) fn replay_wal(&self) -> Result<()> {
        let (replayed, compacted) = {
            let open = self.opened()?;
            let revision = self.read_meta_u64(&open, REVISION_KEY)?;
            let replayed = Replay::run(&self.path.join("wal"), revision, |events, at_ms| {
                let events = self.with_prev(&open.data, events)?;
                let mut batch = sled::Batch::default();
                for event in &events {
                    add_event(&mut batch, event, at_ms, true);
                }
                if let Some(last) = events.last() {
                    batch.insert(REVISION_KEY, &codec::revision_key(last.revision));
                }
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
            (replayed, self.read_meta_u64(&open, COMPACTED_KEY)?)
        };
        self.sync_sled()?;
        self.wal.lock().clear()?;
        self.compacted.store(compacted, Ordering::Release);
        *self.progress.lock() = Progress::at(replayed);
        Ok(())
    }

    /// `events` of one logged batch, replayed over `tree`, with each event's previous value as it
    /// was applied: the state of its key after the events before it, in this batch or in `tree`
    /// (the write-ahead log does not carry it; sled's log entries and watchers' `prev_kv` do).
    fn with_prev(&self, tree: &sled::Tree, events: Vec<Event>) -> Result<Vec<Event>> {
        let mut overlay: HashMap<String, Option<KeyValue>> = HashMap::new();
        let mut out = Vec::with_capacity(events.len());
        for mut event in events {
            let prev = match overlay.get(&event.key) {
                Some(state) => state.clone(),
                None => match tree
                    .get(object_key(&event.key))
                    .map_err(self.sled_err("replay"))?
                {
                    Some(stored) => Some(
                        codec::decode_kv(event.key.as_bytes(), &stored).ok_or_else(|| {
                            self.corrupt(format!("object {} does not decode", event.key))
                        })?,
                    ),
                    None => None,
                },
            };
            overlay.insert(event.key.clone(), event.value.clone());
            event.prev = prev;
            out.push(event);
        }
        Ok(out)
    }
}
