//! Watches on etcd: one etcd watch (with `prev_kv` and progress notifications) per [`WatchStream`],
//! read by one task that feeds the stream, as kube-apiserver's `etcd3/watcher.go`.
//!
//! Guarantees:
//! - **Every change of the prefix, in order, once.** etcd delivers a watch's events in revision
//!   order; the task remembers the last revision it delivered (its cursor) and drops anything at or
//!   below it, so a resumed watch never repeats an event.
//! - **Resume.** When the connection to etcd breaks (a member dies, etcd restarts) the task opens a
//!   new watch from `cursor + 1` on any endpoint, with a backoff, for at most [`RESUME_DEADLINE`];
//!   past it the stream ends with `StoreError` (the watch cache relists).
//! - **Compaction.** A watch from a compacted revision is cancelled by etcd with its compact
//!   revision: the stream ends with `Compacted` (HTTP 410 upstream).
//! - **Progress.** etcd's progress notifications (periodic, or asked for by
//!   [`crate::Store::consistent_revision`]) become [`crate::WatchItem::Progress`]: everything of the
//!   prefix up to that revision has been delivered.
//! - **Bounded.** The stream holds at most `buffer` items; a full buffer ends it with `FellBehind`,
//!   never blocking etcd's stream for long (the task stops reading and cancels the etcd watch).

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{WatchOptions, WatchResponse};
use tokio::time::Instant;

use super::convert::{event, prefix_end};
use super::Shared;
use crate::watch::WatchFeed;
use crate::{Error, Result, Revision, WatchClosedReason, WatchStream};

/// How long a broken watch keeps trying to reopen before it gives up.
pub(crate) const RESUME_DEADLINE: Duration = Duration::from_secs(30);
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Start the task feeding a new stream of `prefix` after `after`.
pub(crate) fn start(
    shared: Arc<Shared>,
    prefix: &str,
    after: Revision,
    buffer: usize,
) -> Result<WatchStream> {
    let handle = tokio::runtime::Handle::try_current().map_err(|_| Error::Etcd {
        operation: "watch",
        detail: "an etcd watch needs a running tokio runtime".into(),
    })?;
    let (stream, feed) = WatchStream::fed(prefix, after, buffer);
    handle.spawn(run(shared, prefix.to_owned(), after, feed));
    Ok(stream)
}

/// What one etcd response means for the task.
enum Step {
    Continue,
    End,
}

struct Watcher {
    shared: Arc<Shared>,
    prefix: String,
    cursor: Revision,
    feed: WatchFeed,
}

async fn run(shared: Arc<Shared>, prefix: String, after: Revision, feed: WatchFeed) {
    let mut watcher = Watcher {
        shared,
        prefix,
        cursor: after,
        feed,
    };
    watcher.run().await;
}

impl Watcher {
    fn options(&self) -> WatchOptions {
        WatchOptions::new()
            .with_range(prefix_end(&self.prefix))
            .with_start_revision(self.cursor as i64 + 1)
            .with_prev_key()
            .with_progress_notify()
    }

    fn key(&self) -> String {
        if self.prefix.is_empty() {
            "\0".to_owned()
        } else {
            self.prefix.clone()
        }
    }

    async fn run(&mut self) {
        let mut progress_requests = self.shared.progress_requests.subscribe();
        progress_requests.borrow_and_update();
        let shutdown = self.shared.shutdown.clone();
        let mut broken_since: Option<Instant> = None;
        let mut backoff = BACKOFF_START;
        loop {
            if let Some(since) = broken_since {
                if since.elapsed() > RESUME_DEADLINE {
                    self.feed.close(WatchClosedReason::StoreError(format!(
                        "etcd watch could not be reopened within {RESUME_DEADLINE:?}"
                    )));
                    return;
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return self.feed.close(WatchClosedReason::StoreShutdown),
                    _ = self.feed.reader_gone() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
            let mut client = self.shared.client.watch_client();
            let opened = tokio::select! {
                _ = shutdown.cancelled() => return self.feed.close(WatchClosedReason::StoreShutdown),
                _ = self.feed.reader_gone() => return,
                opened = client.watch(self.key(), Some(self.options())) => opened,
            };
            let mut stream = match opened {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::debug!(%error, prefix = %self.prefix, "etcd watch did not open; retrying");
                    broken_since.get_or_insert_with(Instant::now);
                    continue;
                }
            };
            loop {
                let message = tokio::select! {
                    _ = shutdown.cancelled() => return self.feed.close(WatchClosedReason::StoreShutdown),
                    _ = self.feed.reader_gone() => return,
                    changed = progress_requests.changed() => {
                        if changed.is_ok() && stream.request_progress().await.is_err() {
                            break;
                        }
                        continue;
                    }
                    message = stream.message() => message,
                };
                match message {
                    Ok(Some(response)) => {
                        if response.created() {
                            broken_since = None;
                            backoff = BACKOFF_START;
                        }
                        if let Step::End = self.handle(response) {
                            return;
                        }
                    }
                    Ok(None) | Err(_) => {
                        tracing::debug!(prefix = %self.prefix, cursor = self.cursor, "etcd watch broke; resuming");
                        broken_since.get_or_insert_with(Instant::now);
                        break;
                    }
                }
            }
        }
    }

    fn handle(&mut self, response: WatchResponse) -> Step {
        let header_revision = response.header().map_or(0, |h| h.revision());
        self.shared.observe(header_revision);
        if response.canceled() {
            let compacted = u64::try_from(response.compact_revision()).unwrap_or(0);
            if compacted > 0 {
                self.shared.observe_compacted(compacted);
                self.feed.close(WatchClosedReason::Compacted { compacted });
            } else {
                self.feed.close(WatchClosedReason::StoreError(format!(
                    "etcd cancelled the watch: {}",
                    response.cancel_reason()
                )));
            }
            return Step::End;
        }
        if response.events().is_empty() {
            if !response.created() {
                // A progress notification: everything up to the header revision was sent.
                let revision = u64::try_from(header_revision).unwrap_or(0);
                if revision > self.cursor {
                    self.cursor = revision;
                    self.feed.progress(revision);
                }
            }
            return Step::Continue;
        }
        for ev in response.events() {
            let Some(ev) = event(ev) else { continue };
            if ev.revision <= self.cursor {
                continue;
            }
            self.cursor = ev.revision;
            if !self.feed.send(ev) {
                return Step::End;
            }
        }
        Step::Continue
    }
}
