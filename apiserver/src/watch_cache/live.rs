//! Live events of one resource: ONE bounded broadcast log per resource, shared by every watcher of
//! it, instead of a queue per watcher.
//!
//! The feeder appends each event once (an `Arc`, never copied per watcher) after it released the
//! cache's lock; every watcher reads the log at its own pace. Costs per event do not grow with the
//! watchers beyond waking those that wait, and a watcher busy writing its previous events is not
//! woken again (it finds the new ones when it comes back).
//!
//! Guarantees:
//! - **Exactly once, in order.** A watcher subscribes under the cache's lock at revision `after`
//!   (its initial events cover everything up to `after`); events the feeder applied before the
//!   subscription but appends after it have a revision ≤ `after` and are skipped here, every later
//!   one is read. The single feeder appends in revision order.
//! - **Bounded.** The log holds the last `buffer` events of the resource. A watcher that falls
//!   further behind is ended (its stream closes and the client re-watches from its last
//!   resourceVersion), as kube-apiserver's cacher terminates a watcher whose buffer stays full;
//!   memory never grows with a slow reader.
//! - **Closing.** Dropping the log's sender (relist, shutdown) ends every watcher once it has read
//!   what was already appended.
//!
//! A watcher of a resource the cache does not hold ([`super::uncached`]) reads its own store watch
//! instead, through the same interface: each event decoded for it, ended when the store watch ends
//! (it fell behind its buffer, the store closed).

use std::sync::Arc;

use futures::FutureExt as _;
use tokio::sync::broadcast;
use tokio::sync::mpsc::error::TryRecvError;

use store::Revision;

use super::CacheEvent;

/// The sending side of one resource's log.
pub(super) type Log = broadcast::Sender<Arc<CacheEvent>>;

/// The most events a log keeps and a store watch of the cache buffers, whatever the configuration
/// asks (the cache clamps its buffer to it): the channels allocate or count every slot and panic
/// on huge capacities; upstream's cacher buffers far fewer per watcher.
pub(super) const MAX_BUFFER: usize = 1 << 20;

/// A new log keeping the last `buffer` events (1 to [`MAX_BUFFER`]).
pub(super) fn log(buffer: usize) -> Log {
    broadcast::channel(buffer.clamp(1, MAX_BUFFER)).0
}

/// One watcher's reading position in its resource's log.
#[derive(Debug)]
pub struct LiveEvents {
    source: Source,
    /// Events at or before this revision were in the watcher's initial events.
    after: Revision,
    /// Fell behind or the log closed: nothing more is delivered.
    ended: bool,
}

/// Where a watcher's live events come from.
#[derive(Debug)]
enum Source {
    /// Its resource's shared log.
    Log(broadcast::Receiver<Arc<CacheEvent>>),
    /// Its own store watch (a resource the cache does not hold), its events defaulted by the
    /// defaulter.
    Store(store::WatchStream, super::Defaulter),
}

impl LiveEvents {
    pub(super) fn new(log: &Log, after: Revision) -> Self {
        LiveEvents {
            source: Source::Log(log.subscribe()),
            after,
            ended: false,
        }
    }

    /// Live events read from `stream` (it delivers only events after its start).
    pub(super) fn from_store(stream: store::WatchStream, defaulter: super::Defaulter) -> Self {
        LiveEvents {
            source: Source::Store(stream, defaulter),
            after: 0,
            ended: false,
        }
    }

    /// The revision up to which this watcher will have seen every event of its resource once it
    /// has read those queued now (what a bookmark may claim): the cache's
    /// [`dispatched`](super::WatchCache::dispatched) revision for a reader of a shared log; for a
    /// store watch nothing beyond the events it delivered (0), as its store watch may still be
    /// behind the cache.
    pub fn complete_through(&self, cache: &super::WatchCache) -> Revision {
        match self.source {
            Source::Log(_) => cache.dispatched(),
            Source::Store(..) => 0,
        }
    }

    /// The next event; `None` once the watcher fell more than the log's length behind or the log
    /// closed (then for good). Cancel-safe.
    pub async fn recv(&mut self) -> Option<Arc<CacheEvent>> {
        let rx = match &mut self.source {
            Source::Log(rx) => rx,
            Source::Store(stream, defaulter) => {
                while !self.ended {
                    match store_item(stream.next().await, defaulter) {
                        Delivered::Event(ev) => return Some(ev),
                        Delivered::Nothing => {}
                        Delivered::End => self.ended = true,
                    }
                }
                return None;
            }
        };
        while !self.ended {
            match rx.recv().await {
                Ok(ev) if ev.revision <= self.after => continue,
                Ok(ev) => return Some(ev),
                Err(
                    broadcast::error::RecvError::Lagged(_) | broadcast::error::RecvError::Closed,
                ) => {
                    self.ended = true;
                }
            }
        }
        None
    }

    /// The next event if one is there: `Empty` when none is yet, `Disconnected` once the watcher
    /// ended (as [`recv`](Self::recv) returning `None`).
    pub fn try_recv(&mut self) -> Result<Arc<CacheEvent>, TryRecvError> {
        let rx = match &mut self.source {
            Source::Log(rx) => rx,
            Source::Store(stream, defaulter) => {
                while !self.ended {
                    // `next` is cancel-safe: an item not ready now is read by a later call.
                    let Some(item) = stream.next().now_or_never() else {
                        return Err(TryRecvError::Empty);
                    };
                    match store_item(item, defaulter) {
                        Delivered::Event(ev) => return Ok(ev),
                        Delivered::Nothing => {}
                        Delivered::End => self.ended = true,
                    }
                }
                return Err(TryRecvError::Disconnected);
            }
        };
        while !self.ended {
            match rx.try_recv() {
                Ok(ev) if ev.revision <= self.after => continue,
                Ok(ev) => return Ok(ev),
                Err(broadcast::error::TryRecvError::Empty) => return Err(TryRecvError::Empty),
                Err(
                    broadcast::error::TryRecvError::Lagged(_)
                    | broadcast::error::TryRecvError::Closed,
                ) => self.ended = true,
            }
        }
        Err(TryRecvError::Disconnected)
    }
}

/// What one item of a store watch delivers to its watcher.
enum Delivered {
    Event(Arc<CacheEvent>),
    /// A progress mark, or an event that does not decode (logged).
    Nothing,
    /// The store watch ended.
    End,
}

fn store_item(item: Option<store::WatchItem>, defaulter: &super::Defaulter) -> Delivered {
    match item {
        Some(store::WatchItem::Event(ev)) => {
            let (key, revision) = (ev.key.clone(), ev.revision);
            match super::uncached::cache_event(ev, defaulter) {
                Some(ev) => Delivered::Event(Arc::new(ev)),
                None => {
                    tracing::warn!(%key, revision, "undecodable event skipped");
                    Delivered::Nothing
                }
            }
        }
        Some(store::WatchItem::Progress(_)) => Delivered::Nothing,
        Some(store::WatchItem::Closed(_)) | None => Delivered::End,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch_cache::EventType;

    #[test]
    fn any_configured_buffer_makes_a_log() {
        for buffer in [0, 1, usize::MAX] {
            drop(log(buffer).subscribe());
        }
    }

    fn event(revision: Revision) -> Arc<CacheEvent> {
        Arc::new(CacheEvent::new(
            EventType::Added,
            format!("/registry/configmaps/ns/{revision}"),
            revision,
            Arc::new(serde_json::json!({"metadata": {"name": revision.to_string()}})),
            None,
        ))
    }

    #[tokio::test]
    async fn events_up_to_the_subscription_revision_are_skipped() {
        let log = log(8);
        let mut live = LiveEvents::new(&log, 5);
        for rev in [4, 5, 6, 7] {
            let _ = log.send(event(rev));
        }
        assert_eq!(live.recv().await.map(|e| e.revision), Some(6));
        assert_eq!(live.try_recv().map(|e| e.revision), Ok(7));
        assert_eq!(live.try_recv().err(), Some(TryRecvError::Empty));
    }

    #[tokio::test]
    async fn every_watcher_shares_the_same_event() {
        let log = log(8);
        let mut a = LiveEvents::new(&log, 0);
        let mut b = LiveEvents::new(&log, 0);
        let _ = log.send(event(1));
        let (Some(x), Some(y)) = (a.recv().await, b.recv().await) else {
            panic!("not delivered")
        };
        assert!(Arc::ptr_eq(&x, &y));
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_the_log_ends_for_good() {
        let log = log(4);
        let mut slow = LiveEvents::new(&log, 0);
        let mut fast = LiveEvents::new(&log, 0);
        for rev in 1..=10 {
            let _ = log.send(event(rev));
            assert_eq!(fast.recv().await.map(|e| e.revision), Some(rev));
        }
        assert!(slow.recv().await.is_none());
        let _ = log.send(event(11));
        assert_eq!(slow.try_recv().err(), Some(TryRecvError::Disconnected));
        assert!(slow.recv().await.is_none());
        assert_eq!(fast.recv().await.map(|e| e.revision), Some(11));
    }

    #[tokio::test]
    async fn dropping_the_log_ends_watchers_after_what_was_appended() {
        let log = log(4);
        let mut live = LiveEvents::new(&log, 0);
        let _ = log.send(event(1));
        drop(log);
        assert_eq!(live.recv().await.map(|e| e.revision), Some(1));
        assert!(live.recv().await.is_none());
    }
}
