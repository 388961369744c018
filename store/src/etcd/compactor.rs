//! The compactor: etcd keeps every revision until a client compacts it, and kube-apiserver is that
//! client (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/compact.go`, every
//! `--etcd-compaction-interval`, 5 minutes by default).
//!
//! As upstream, each tick compacts up to the revision the previous tick saw: history is kept for at
//! least one interval. Two deviations, both keeping more history, never less:
//! - The newest `retain` revisions are never compacted (the store's `event_log_max_events`), so a
//!   watch cache that fell behind by fewer than that many writes can resume instead of relisting.
//! - Upstream coordinates apiservers through a `compact_rev_key` written each tick (a write, and so a
//!   revision, every interval even when idle). Here a tick with nothing new to compact writes
//!   nothing, and several apiservers simply each compact: compacting to a revision already compacted
//!   is refused by etcd, which only tells this one how far the other got.
//!
//! Guarantees: one compaction in flight per store; a failed tick is logged and retried at the next;
//! the task ends when the store closes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::convert::{classify, Failure};
use super::Shared;
use crate::Revision;

/// Start the compaction task (nothing when `interval` is zero: compaction disabled, as upstream's
/// `--etcd-compaction-interval=0`).
pub(crate) fn start(shared: Arc<Shared>, interval: Duration, retain: u64) {
    if interval.is_zero() {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("etcd store opened outside a tokio runtime: no compaction");
        return;
    };
    handle.spawn(run(shared, interval, retain));
}

/// The revision a tick compacts to: what the previous tick saw, but never into the newest `retain`
/// revisions. `None` when that is not past what is already compacted.
pub(crate) fn target(
    previous_tick: Revision,
    head: Revision,
    retain: u64,
    compacted: Revision,
) -> Option<Revision> {
    let target = previous_tick.min(head.saturating_sub(retain));
    (target > compacted).then_some(target)
}

async fn run(shared: Arc<Shared>, interval: Duration, retain: u64) {
    let mut previous_tick: Revision = 0;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let head = shared.current.load(Ordering::Acquire);
        let compacted = shared.compacted.load(Ordering::Acquire);
        if let Some(revision) = target(previous_tick, head, retain, compacted) {
            compact(&shared, revision).await;
        }
        previous_tick = head;
    }
}

async fn compact(shared: &Shared, revision: Revision) {
    match shared.kv().compact(revision as i64, None).await {
        Ok(response) => {
            if let Some(header) = response.header() {
                shared.observe(header.revision());
            }
            shared.observe_compacted(revision);
            tracing::debug!(revision, "etcd compacted");
        }
        // Another apiserver compacted at least as far.
        Err(error) if classify(&error) == Failure::Compacted => {
            shared.observe_compacted(revision);
        }
        Err(error) => {
            tracing::warn!(%error, revision, "etcd compaction failed; retrying next tick")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn compacts_to_the_previous_tick_but_keeps_the_newest_revisions() {
        // Upstream: the revision seen one interval ago.
        assert_eq!(target(100, 500, 0, 0), Some(100));
        // Never into the newest `retain` revisions.
        assert_eq!(target(450, 500, 100, 0), Some(400));
        // Nothing new: no request at all.
        assert_eq!(target(100, 500, 0, 100), None);
        assert_eq!(target(0, 500, 0, 0), None);
        assert_eq!(target(100, 50, 100, 0), None);
    }
}
