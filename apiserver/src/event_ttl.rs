//! Events expire: kube-apiserver's `--event-ttl` (one hour by default).
//!
//! Upstream gives every write of an event, create or update, an etcd lease of the TTL (the events
//! registry's TTL function answers the same TTL for both), so etcd deletes an event one TTL after
//! it was last written: no admission, no finalizers, and its watchers see it `DELETED`. Our stores
//! have no leases, so the apiserver keeps the schedule:
//! - it follows the events' storage (both API groups store there) with a store watch, and gives
//!   each write a deadline one TTL after the apiserver saw it;
//! - a key whose deadline passed is deleted with a precondition on the revision of that write: an
//!   update in between wins (its own deadline is later), and several apiservers on one etcd may all
//!   sweep (one delete succeeds, the others find a conflict or nothing);
//! - events already stored when the apiserver starts (or relists) get their deadline from their own
//!   newest timestamp: their creation, or the last time their writer said it saw the event
//!   (`lastTimestamp`, `eventTime`, `series.lastObservedTime`), whichever is later. The store does
//!   not keep when a key was written; that is the latest write the object itself attests, so an
//!   event written before a restart expires about one TTL after its last write, not one TTL after
//!   the start (a write that changed none of these timestamps is not seen: such an event may go
//!   early).

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use store::{
    DeleteOutcome, EventKind, ListOptions, ListOutcome, Revision, Store, WatchClosedReason,
    WatchItem,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Where events of both API groups are stored.
pub const PREFIX: &str = "/registry/events/";

/// Most expired events deleted before the watch is read again.
const BATCH: usize = 256;

/// Deletes in flight at once.
const CONCURRENT_DELETES: usize = 16;

/// How long a delete that failed (the store was unavailable) waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Page size of the list that loads the schedule.
const PAGE: usize = 1000;

/// Store events the watch holds while a batch of deletes is under way (the watch cache's own
/// store watch holds as many); a watch that falls further behind ends, and the schedule is
/// listed again.
const WATCH_BUFFER: usize = 16_384;

/// Deletes each event one `ttl` after its last write, until `shutdown`. A zero `ttl` is never
/// passed (events then live until deleted, as upstream's `--event-ttl=0`).
pub async fn run(store: Arc<dyn Store>, ttl: Duration, shutdown: CancellationToken) {
    loop {
        let followed = tokio::select! {
            _ = shutdown.cancelled() => return,
            loaded = load(&*store, ttl) => loaded,
        };
        match followed {
            Ok((schedule, stream)) => {
                if follow(&*store, ttl, schedule, stream, &shutdown).await == Ended::Stopped {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "event expiry cannot read the stored events; trying again");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The server is shutting down, or the store is (its watches end for good: the watch cache
    /// stops on it too; listing again would only spin).
    Stopped,
    /// The store watch ended otherwise (fell behind, compacted): list again.
    WatchClosed,
}

/// The schedule of what is stored now, from one consistent list, and a watch from its revision.
async fn load(
    store: &dyn Store,
    ttl: Duration,
) -> Result<(Schedule, store::WatchStream), store::Error> {
    'list: loop {
        let now = Instant::now();
        let wall = jiff::Timestamp::now();
        let mut schedule = Schedule::default();
        let mut opts = ListOptions {
            limit: Some(PAGE),
            ..Default::default()
        };
        let mut revision = None;
        loop {
            let ListOutcome::Listed(page) = store.list(PREFIX, opts.clone()).await? else {
                // Compacted under the list: start over.
                continue 'list;
            };
            revision.get_or_insert(page.revision);
            for kv in page.items {
                let age = last_written_age(&kv.value, wall);
                schedule.set(&kv.key, kv.mod_revision, now + ttl.saturating_sub(age));
            }
            match page.continue_token {
                Some(token) => opts.continue_token = Some(token),
                None => break,
            }
        }
        match store.watch_passive(PREFIX, revision.unwrap_or(0), WATCH_BUFFER)? {
            store::WatchOutcome::Watching(stream) => return Ok((schedule, stream)),
            store::WatchOutcome::Expired { .. } => continue 'list,
        }
    }
}

/// Follows the store watch and deletes what expires, until the watch ends or `shutdown`.
async fn follow(
    store: &dyn Store,
    ttl: Duration,
    mut schedule: Schedule,
    mut stream: store::WatchStream,
    shutdown: &CancellationToken,
) -> Ended {
    loop {
        // Nothing scheduled: wait for a write (a far deadline stands for "never").
        let next = schedule
            .next_deadline()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = shutdown.cancelled() => return Ended::Stopped,
            item = stream.next() => match item {
                Some(WatchItem::Event(ev)) => match ev.kind {
                    EventKind::Put => schedule.set(&ev.key, ev.revision, Instant::now() + ttl),
                    EventKind::Delete => schedule.forget(&ev.key),
                },
                Some(WatchItem::Progress(_)) => {}
                Some(WatchItem::Closed(WatchClosedReason::StoreShutdown)) | None => {
                    return Ended::Stopped
                }
                Some(WatchItem::Closed(reason)) => {
                    tracing::debug!(?reason, "event expiry lost its store watch; listing again");
                    return Ended::WatchClosed;
                }
            },
            _ = tokio::time::sleep_until(next) => {
                let due = schedule.take_due(Instant::now(), BATCH);
                expire(store, &mut schedule, due).await;
            }
        }
    }
}

/// Deletes `due` keys, each only if it is still at the revision its deadline was given for; a
/// delete the store could not do is scheduled again.
async fn expire(store: &dyn Store, schedule: &mut Schedule, due: Vec<(Arc<str>, Revision)>) {
    let results: Vec<_> = futures::stream::iter(due)
        .map(|(key, revision)| async move {
            let outcome = store.delete(&key, Some(revision)).await;
            (key, revision, outcome)
        })
        .buffer_unordered(CONCURRENT_DELETES)
        .collect()
        .await;
    for (key, revision, outcome) in results {
        match outcome {
            Ok(DeleteOutcome::Deleted { .. }) => tracing::debug!(%key, "event expired"),
            // Written again (its new deadline comes with the watch) or deleted meanwhile.
            Ok(DeleteOutcome::Conflict(_) | DeleteOutcome::NotFound) => {}
            Err(e) => {
                tracing::warn!(%key, error = %e, "expired event not deleted; trying again");
                schedule.set(&key, revision, Instant::now() + RETRY);
            }
        }
    }
}

/// How long ago the event's writer last said it saw the event, by the event's own timestamps
/// (zero when it has none readable, or they are in the future).
fn last_written_age(value: &[u8], now: jiff::Timestamp) -> Duration {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Stamps {
        metadata: Option<Meta>,
        first_timestamp: Option<String>,
        last_timestamp: Option<String>,
        event_time: Option<String>,
        series: Option<Series>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        creation_timestamp: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Series {
        last_observed_time: Option<String>,
    }
    let Some(stamps) = crate::watch_cache::stored::parse::<Stamps>(value) else {
        return Duration::ZERO;
    };
    let newest = [
        stamps.metadata.and_then(|m| m.creation_timestamp),
        stamps.first_timestamp,
        stamps.last_timestamp,
        stamps.event_time,
        stamps.series.and_then(|s| s.last_observed_time),
    ]
    .into_iter()
    .flatten()
    .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
    .max();
    newest
        .and_then(|t| now.duration_since(t).try_into().ok())
        .unwrap_or(Duration::ZERO)
}

/// Each scheduled key's deadline and the revision it was given for, and the keys in deadline
/// order.
#[derive(Default)]
struct Schedule {
    by_key: HashMap<Arc<str>, (Instant, Revision)>,
    due: BTreeSet<(Instant, Arc<str>)>,
}

impl Schedule {
    /// `key` expires at `deadline` if it is still at `revision` then (replacing its deadline).
    fn set(&mut self, key: &str, revision: Revision, deadline: Instant) {
        let key = match self.by_key.get_key_value(key) {
            Some((k, (old, _))) => {
                let k = k.clone();
                self.due.remove(&(*old, k.clone()));
                k
            }
            None => Arc::from(key),
        };
        self.due.insert((deadline, key.clone()));
        self.by_key.insert(key, (deadline, revision));
    }

    fn forget(&mut self, key: &str) {
        if let Some((k, (deadline, _))) = self.by_key.remove_entry(key) {
            self.due.remove(&(deadline, k));
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.due.first().map(|(d, _)| *d)
    }

    /// Removes and returns up to `max` keys whose deadline is not after `now`, earliest first.
    fn take_due(&mut self, now: Instant, max: usize) -> Vec<(Arc<str>, Revision)> {
        let mut due = Vec::new();
        while due.len() < max {
            match self.due.first() {
                Some((deadline, _)) if *deadline <= now => {}
                _ => break,
            }
            let Some((_, key)) = self.due.pop_first() else {
                break;
            };
            if let Some((_, revision)) = self.by_key.remove(Borrow::<str>::borrow(&key)) {
                due.push((key, revision));
            }
        }
        due
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_deadline_and_revision() {
        let t0 = Instant::now();
        let mut s = Schedule::default();
        s.set("/registry/events/ns/a", 5, t0 + Duration::from_secs(10));
        s.set("/registry/events/ns/b", 6, t0 + Duration::from_secs(20));
        // `a` written again: its deadline moves after `b`'s.
        s.set("/registry/events/ns/a", 7, t0 + Duration::from_secs(30));
        assert_eq!(s.len(), 2);
        assert_eq!(s.next_deadline(), Some(t0 + Duration::from_secs(20)));
        assert!(s.take_due(t0 + Duration::from_secs(19), 10).is_empty());
        let due = s.take_due(t0 + Duration::from_secs(30), 10);
        let due: Vec<_> = due.iter().map(|(k, r)| (&**k, *r)).collect();
        assert_eq!(
            due,
            [("/registry/events/ns/b", 6), ("/registry/events/ns/a", 7)]
        );
        assert_eq!(s.len(), 0);
        assert_eq!(s.next_deadline(), None);
    }

    #[test]
    fn a_deleted_event_is_forgotten_and_a_batch_is_bounded() {
        let t0 = Instant::now();
        let mut s = Schedule::default();
        for i in 0..5 {
            s.set(&format!("/registry/events/ns/e{i}"), i, t0);
        }
        s.forget("/registry/events/ns/e0");
        s.forget("/registry/events/ns/never");
        let first = s.take_due(t0, 3);
        assert_eq!(first.len(), 3);
        assert!(first.iter().all(|(k, _)| &**k != "/registry/events/ns/e0"));
        assert_eq!(s.take_due(t0, 3).len(), 1);
        assert_eq!(s.len(), 0);
    }

    #[tokio::test]
    async fn expiry_stops_when_the_store_closes() {
        let store: Arc<dyn Store> =
            Arc::new(store::MemoryStore::new(store::StoreConfig::default()).unwrap());
        let task = tokio::spawn(run(
            store.clone(),
            Duration::from_secs(3600),
            CancellationToken::new(),
        ));
        // Let it list and watch, then close the store under it: its watch ends for good, and
        // listing again would spin.
        tokio::time::sleep(Duration::from_millis(50)).await;
        store.flush_and_close().await.unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
    }

    #[test]
    fn a_stored_event_is_as_old_as_its_newest_timestamp() {
        let now: jiff::Timestamp = "2026-12-07T10:00:00Z".parse().unwrap();
        let age = |v: serde_json::Value| last_written_age(v.to_string().as_bytes(), now);
        let core = serde_json::json!({
            "metadata": {"creationTimestamp": "2026-12-07T09:00:00Z"},
            "firstTimestamp": "2026-12-07T09:00:00Z",
            "lastTimestamp": "2026-12-07T09:50:00Z",
        });
        assert_eq!(age(core), Duration::from_secs(600));
        let new_api = serde_json::json!({
            "metadata": {"creationTimestamp": "2026-12-07T09:00:00Z"},
            "eventTime": "2026-12-07T09:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-12-07T09:59:30.500000Z"},
        });
        assert_eq!(age(new_api), Duration::from_millis(29_500));
        // No timestamp, a future one, or no JSON: as if written now.
        assert_eq!(age(serde_json::json!({"metadata": {}})), Duration::ZERO);
        assert_eq!(
            age(serde_json::json!({"lastTimestamp": "2027-01-01T00:00:00Z"})),
            Duration::ZERO
        );
        assert_eq!(last_written_age(b"\x00not json", now), Duration::ZERO);
    }
}
