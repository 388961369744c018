//! Watch: the hub writers publish to, and the stream a watcher reads.
//!
//! Design and guarantees:
//! - **Ordered, unique, gap-free.** A stream starts in *catch-up* mode: it reads the event log on
//!   disk (or in memory) in chunks after its cursor, up to the hub's `published` revision. When it
//!   has caught up, it subscribes under the hub lock, the same lock the writer publishes under, with
//!   "deliver events > cursor". So the hand-over from log replay to live events can neither lose nor
//!   repeat an event. The log is dense (one event per revision), so a hole found during catch-up can
//!   only be compaction, and ends the stream with [`WatchClosedReason::Compacted`].
//! - **Bounded, never blocking writers.** Each live subscriber has a bounded channel of `buffer`
//!   events. The writer only ever `try_send`s; a full channel ends that watcher with
//!   [`WatchClosedReason::FellBehind`] (the client re-watches from its last revision or relists), as the
//!   Kubernetes watch cache does (`cache_watcher.go` closes unresponsive watchers). Memory per watcher is
//!   at most `buffer` events (catch-up holds at most one chunk).
//! - **Future revisions.** A watch after a revision that is not yet published subscribes at once and
//!   delivers only events > `after`.
//! - **Fed streams.** A back end whose events come from elsewhere (etcd's watch) makes a stream with
//!   [`WatchStream::fed`] and pushes into its [`WatchFeed`] under the same rules: bounded, `try_send`
//!   only, a full buffer ends the stream with `FellBehind`; a progress mark is sent only while a slot
//!   stays free for the next event, so marks never cause `FellBehind`.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::{Event, Result, Revision};

/// Events read from the log per catch-up step: bounds the memory of a catching-up watcher.
const CATCH_UP_CHUNK: usize = 256;

/// Why a watch stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchClosedReason {
    /// The watcher did not read fast enough and its buffer of `buffer` events filled up.
    FellBehind { buffer: usize },
    /// The store was closed.
    StoreShutdown,
    /// Events the watcher still needed were compacted before it read them (HTTP 410).
    Compacted { compacted: Revision },
    /// Reading the event log failed; the message is the store error.
    StoreError(String),
}

/// One item of a watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchItem {
    Event(Event),
    /// Every event of the stream's prefix up to this revision has been delivered (etcd's progress
    /// notification, a bookmark): the watcher may advance to it. Only fed streams send it.
    Progress(Revision),
    /// The stream has ended; `next` returns `None` afterwards.
    Closed(WatchClosedReason),
}

/// What a watch stream needs from its store: the event log and the hub.
pub(crate) trait WatchSource: Send + Sync + 'static {
    /// Events with `after < revision <= upto`, ascending, at most `max`.
    fn read_log(&self, after: Revision, upto: Revision, max: usize) -> Result<Vec<Event>>;
    fn compacted_revision(&self) -> Revision;
    fn hub(&self) -> &Hub;
}

/// Shared close reason of one subscriber: written by the hub before it drops the sender.
type ReasonSlot = Arc<Mutex<Option<WatchClosedReason>>>;

struct Subscriber {
    prefix: String,
    /// Deliver only events with revision > `after` (a future-revision watch skips earlier ones).
    after: Revision,
    buffer: usize,
    tx: mpsc::Sender<Arc<Event>>,
    reason: ReasonSlot,
}

struct HubInner {
    /// Revision of the last event handed to subscribers; everything <= it is in the log.
    published: Revision,
    subscribers: Vec<Subscriber>,
    closed: bool,
}

/// Fan-out point of committed events. One lock: the writer publishes under it and watchers subscribe
/// under it, which is what makes the log-to-live hand-over exact.
pub(crate) struct Hub {
    inner: Mutex<HubInner>,
}

enum Subscribe {
    Live(mpsc::Receiver<Arc<Event>>, ReasonSlot),
    Behind(Revision),
    Closed,
}

impl Hub {
    pub(crate) fn new(published: Revision) -> Self {
        Self {
            inner: Mutex::new(HubInner {
                published,
                subscribers: Vec::new(),
                closed: false,
            }),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.inner.lock().closed
    }

    /// Hand one committed batch (ascending, dense) to every matching subscriber, without blocking.
    pub(crate) fn publish(&self, events: &[Arc<Event>]) {
        let Some(last) = events.last() else { return };
        let mut inner = self.inner.lock();
        inner.subscribers.retain(|sub| {
            for event in events {
                if event.revision <= sub.after || !event.key.starts_with(&sub.prefix) {
                    continue;
                }
                match sub.tx.try_send(Arc::clone(event)) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        *sub.reason.lock() = Some(WatchClosedReason::FellBehind { buffer: sub.buffer });
                        tracing::debug!(prefix = %sub.prefix, buffer = sub.buffer, "closing watcher that fell behind");
                        return false;
                    }
                    // The stream was dropped.
                    Err(mpsc::error::TrySendError::Closed(_)) => return false,
                }
            }
            true
        });
        inner.published = last.revision;
    }

    /// End every watcher with `StoreShutdown` and refuse new subscriptions.
    pub(crate) fn close(&self) {
        let mut inner = self.inner.lock();
        inner.closed = true;
        for sub in inner.subscribers.drain(..) {
            *sub.reason.lock() = Some(WatchClosedReason::StoreShutdown);
        }
    }

    pub(crate) fn subscriber_count(&self) -> usize {
        self.inner.lock().subscribers.len()
    }

    fn subscribe(&self, prefix: &str, cursor: Revision, buffer: usize) -> Subscribe {
        let mut inner = self.inner.lock();
        if inner.closed {
            return Subscribe::Closed;
        }
        if inner.published > cursor {
            return Subscribe::Behind(inner.published);
        }
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let reason: ReasonSlot = Arc::new(Mutex::new(None));
        inner.subscribers.push(Subscriber {
            prefix: prefix.to_owned(),
            after: cursor,
            buffer,
            tx,
            reason: Arc::clone(&reason),
        });
        Subscribe::Live(rx, reason)
    }
}

enum State {
    CatchUp {
        pending: VecDeque<Event>,
    },
    Live {
        rx: mpsc::Receiver<Arc<Event>>,
        reason: ReasonSlot,
    },
    Fed {
        rx: mpsc::Receiver<FedItem>,
        reason: ReasonSlot,
    },
    Done,
}

/// What a feed carries: an event, or a progress mark.
#[derive(Debug)]
pub(crate) enum FedItem {
    Event(Event),
    Progress(Revision),
}

/// The writing end of a fed [`WatchStream`]. Dropping it without [`WatchFeed::close`] ends the stream
/// with `StoreShutdown`.
pub(crate) struct WatchFeed {
    tx: mpsc::Sender<FedItem>,
    reason: ReasonSlot,
    buffer: usize,
}

impl WatchFeed {
    /// Push one event without blocking; a full buffer sets `FellBehind` and returns `false` (the feed
    /// is then finished: drop it).
    pub(crate) fn send(&self, event: Event) -> bool {
        match self.tx.try_send(FedItem::Event(event)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.close(WatchClosedReason::FellBehind {
                    buffer: self.buffer,
                });
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Push a progress mark if there is room to spare (a mark is only sent while at least one
    /// more slot stays free, so marks never make an event find the buffer full).
    pub(crate) fn progress(&self, revision: Revision) {
        if self.tx.capacity() >= 2 {
            let _ = self.tx.try_send(FedItem::Progress(revision));
        }
    }

    /// Record why the stream ends; the reader sees it after the items already pushed.
    pub(crate) fn close(&self, reason: WatchClosedReason) {
        let mut slot = self.reason.lock();
        if slot.is_none() {
            *slot = Some(reason);
        }
    }

    /// Resolves when the reader dropped its stream.
    pub(crate) async fn reader_gone(&self) {
        self.tx.closed().await
    }
}

/// A watch of a key prefix: call [`WatchStream::next`] until it returns `None`.
/// The last item before `None` is always a [`WatchItem::Closed`].
pub struct WatchStream {
    prefix: String,
    /// Last revision delivered or skipped; the stream continues strictly after it.
    cursor: Revision,
    buffer: usize,
    /// The log and hub of a local store; `None` for a fed stream.
    source: Option<Arc<dyn WatchSource>>,
    state: State,
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchStream")
            .field("prefix", &self.prefix)
            .field("cursor", &self.cursor)
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl WatchStream {
    pub(crate) fn new(
        source: Arc<dyn WatchSource>,
        prefix: &str,
        after: Revision,
        buffer: usize,
    ) -> Self {
        let buffer = buffer.max(1);
        // Subscribe at once when there is nothing to replay, so events committed after this call
        // are buffered even before the first poll.
        let state = match source.hub().subscribe(prefix, after, buffer) {
            Subscribe::Live(rx, reason) => State::Live { rx, reason },
            Subscribe::Behind(_) | Subscribe::Closed => State::CatchUp {
                pending: VecDeque::new(),
            },
        };
        Self {
            prefix: prefix.to_owned(),
            cursor: after,
            buffer,
            source: Some(source),
            state,
        }
    }

    /// A stream fed by a task of the back end through the returned [`WatchFeed`], holding at most
    /// `buffer` items.
    pub(crate) fn fed(prefix: &str, after: Revision, buffer: usize) -> (Self, WatchFeed) {
        let buffer = buffer.max(1);
        let (tx, rx) = mpsc::channel(buffer);
        let reason: ReasonSlot = Arc::new(Mutex::new(None));
        let stream = Self {
            prefix: prefix.to_owned(),
            cursor: after,
            buffer,
            source: None,
            state: State::Fed {
                rx,
                reason: Arc::clone(&reason),
            },
        };
        (stream, WatchFeed { tx, reason, buffer })
    }

    /// Revision of the last event delivered (or the starting `after`): resume a broken watch from it.
    pub fn last_revision(&self) -> Revision {
        match &self.state {
            State::CatchUp { pending } => pending.front().map_or(self.cursor, |e| e.revision - 1),
            _ => self.cursor,
        }
    }

    /// The next event, or the reason the stream ended, or `None` after that.
    ///
    /// Cancel-safe: dropping the future (e.g. in `tokio::select!`) loses no event. Catch-up reads of the
    /// log happen synchronously inside one poll (at most one chunk of 256 events).
    pub async fn next(&mut self) -> Option<WatchItem> {
        loop {
            match &mut self.state {
                State::Done => return None,
                State::CatchUp { pending } => {
                    if let Some(event) = pending.pop_front() {
                        return Some(WatchItem::Event(event));
                    }
                    let Some(source) = &self.source else {
                        return Some(self.end(WatchClosedReason::StoreShutdown));
                    };
                    match source
                        .hub()
                        .subscribe(&self.prefix, self.cursor, self.buffer)
                    {
                        Subscribe::Closed => {
                            return Some(self.end(WatchClosedReason::StoreShutdown))
                        }
                        Subscribe::Live(rx, reason) => self.state = State::Live { rx, reason },
                        Subscribe::Behind(published) => {
                            if let Err(reason) = self.catch_up(published) {
                                return Some(self.end(reason));
                            }
                        }
                    }
                }
                State::Live { rx, reason } => match rx.recv().await {
                    Some(event) => {
                        self.cursor = event.revision;
                        return Some(WatchItem::Event(Event::clone(&event)));
                    }
                    None => {
                        let why = reason
                            .lock()
                            .take()
                            .unwrap_or(WatchClosedReason::StoreShutdown);
                        return Some(self.end(why));
                    }
                },
                State::Fed { rx, reason } => match rx.recv().await {
                    Some(FedItem::Event(event)) => {
                        self.cursor = event.revision;
                        return Some(WatchItem::Event(event));
                    }
                    Some(FedItem::Progress(revision)) => {
                        self.cursor = self.cursor.max(revision);
                        return Some(WatchItem::Progress(revision));
                    }
                    None => {
                        let why = reason
                            .lock()
                            .take()
                            .unwrap_or(WatchClosedReason::StoreShutdown);
                        return Some(self.end(why));
                    }
                },
            }
        }
    }

    /// Adapt into a `futures::Stream` of items (ends after the `Closed` item).
    pub fn into_stream(self) -> impl futures::Stream<Item = WatchItem> + Send {
        futures::stream::unfold(self, |mut watch| async move {
            let item = watch.next().await?;
            Some((item, watch))
        })
    }

    fn end(&mut self, reason: WatchClosedReason) -> WatchItem {
        self.state = State::Done;
        WatchItem::Closed(reason)
    }

    /// Read one chunk of the log after the cursor, up to `published`, into `pending`.
    fn catch_up(&mut self, published: Revision) -> std::result::Result<(), WatchClosedReason> {
        let Some(source) = self.source.clone() else {
            return Err(WatchClosedReason::StoreShutdown);
        };
        let events = source
            .read_log(self.cursor, published, CATCH_UP_CHUNK)
            .map_err(|e| WatchClosedReason::StoreError(e.to_string()))?;
        let State::CatchUp { pending } = &mut self.state else {
            return Ok(());
        };
        let mut expected = self.cursor + 1;
        for event in &events {
            if event.revision != expected {
                break;
            }
            expected += 1;
        }
        // The log is dense: any hole (or nothing at all while behind) means compaction got there first.
        if expected == self.cursor + 1 || expected - 1 != events.last().map_or(0, |e| e.revision) {
            return Err(WatchClosedReason::Compacted {
                compacted: source.compacted_revision(),
            });
        }
        for event in events {
            self.cursor = event.revision;
            if event.key.starts_with(&self.prefix) {
                pending.push_back(event);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventKind, KeyValue};
    use bytes::Bytes;

    fn event(revision: Revision, key: &str) -> Arc<Event> {
        Arc::new(Event {
            kind: EventKind::Put,
            key: key.into(),
            revision,
            value: Some(KeyValue {
                key: key.into(),
                value: Bytes::new(),
                create_revision: revision,
                mod_revision: revision,
            }),
            prev: None,
        })
    }

    #[test]
    fn a_full_subscriber_is_dropped_with_fell_behind_and_others_keep_receiving() {
        let hub = Hub::new(0);
        let Subscribe::Live(mut slow, slow_reason) = hub.subscribe("", 0, 2) else {
            panic!("expected a live subscription");
        };
        let Subscribe::Live(mut fast, _) = hub.subscribe("/a", 0, 16) else {
            panic!("expected a live subscription");
        };
        hub.publish(&[event(1, "/a/1"), event(2, "/b/1"), event(3, "/a/2")]);
        assert_eq!(
            hub.subscriber_count(),
            1,
            "the slow subscriber must be gone"
        );
        assert_eq!(
            *slow_reason.lock(),
            Some(WatchClosedReason::FellBehind { buffer: 2 })
        );
        // The slow one keeps what fitted, then sees the end.
        assert_eq!(slow.try_recv().map(|e| e.revision).ok(), Some(1));
        assert_eq!(slow.try_recv().map(|e| e.revision).ok(), Some(2));
        assert!(slow.try_recv().is_err());
        // The fast one got only its prefix.
        assert_eq!(fast.try_recv().map(|e| e.revision).ok(), Some(1));
        assert_eq!(fast.try_recv().map(|e| e.revision).ok(), Some(3));
    }

    #[test]
    fn subscribing_behind_the_published_revision_is_refused_and_dropped_streams_are_pruned() {
        let hub = Hub::new(0);
        hub.publish(&[event(1, "/a")]);
        assert!(matches!(hub.subscribe("", 0, 4), Subscribe::Behind(1)));
        let Subscribe::Live(rx, _) = hub.subscribe("", 1, 4) else {
            panic!("expected a live subscription");
        };
        drop(rx);
        hub.publish(&[event(2, "/a")]);
        assert_eq!(hub.subscriber_count(), 0);
        hub.close();
        assert!(matches!(hub.subscribe("", 2, 4), Subscribe::Closed));
    }

    #[test]
    fn a_future_subscriber_skips_events_up_to_its_revision() {
        let hub = Hub::new(0);
        let Subscribe::Live(mut rx, _) = hub.subscribe("", 2, 4) else {
            panic!("expected a live subscription");
        };
        hub.publish(&[event(1, "/a"), event(2, "/a"), event(3, "/a")]);
        assert_eq!(rx.try_recv().map(|e| e.revision).ok(), Some(3));
        assert!(rx.try_recv().is_err());
    }
}
