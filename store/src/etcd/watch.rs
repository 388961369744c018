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
//! - **Progress.** A progress mark ([`crate::WatchItem::Progress`]) means everything of the prefix
//!   up to its revision has been delivered. It comes from a progress key's event (always in order
//!   with the others), or, where etcd orders its progress answers with the events (see
//!   `progress`), from etcd's progress notifications, periodic or asked for: while a consistent
//!   read wants a revision the watch has not reached, it asks every [`progress::REASK`].
//! - **Bounded.** The stream holds at most `buffer` items; a full buffer ends it with `FellBehind`,
//!   never blocking etcd's stream for long (the task stops reading and cancels the etcd watch).

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{WatchOptions, WatchResponse};
use tokio::time::Instant;

use super::convert::{event, prefix_end};
use super::progress::{self, Mode};
use super::Shared;
use crate::watch::WatchFeed;
use crate::{Error, Result, Revision, WatchClosedReason, WatchStream};

/// How long a broken watch keeps trying to reopen before it gives up.
pub(crate) const RESUME_DEADLINE: Duration = Duration::from_secs(30);
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Whether a watch reports its progress to consistent reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Its prefix gets progress keys (`Mode::Writes`) or progress requests (`Mode::Requests`):
    /// a consistent read may wait for it (the watch cache's feeder).
    Reported,
    /// Nothing waits for it: no progress key, request or notification for it.
    Unreported,
}

/// Start the task feeding a new stream of `prefix` after `after`.
pub(crate) fn start(
    shared: Arc<Shared>,
    prefix: &str,
    after: Revision,
    buffer: usize,
    progress: Progress,
) -> Result<WatchStream> {
    let handle = tokio::runtime::Handle::try_current().map_err(|_| Error::Etcd {
        operation: "watch",
        detail: "an etcd watch needs a running tokio runtime".into(),
    })?;
    let (stream, feed) = WatchStream::fed(prefix, after, buffer);
    if progress == Progress::Reported {
        shared.watched.add(prefix);
    }
    handle.spawn(run(shared, prefix.to_owned(), after, feed, progress));
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
    progress: Progress,
}

async fn run(
    shared: Arc<Shared>,
    prefix: String,
    after: Revision,
    feed: WatchFeed,
    progress: Progress,
) {
    let mut watcher = Watcher {
        shared,
        prefix,
        cursor: after,
        feed,
        progress,
    };
    watcher.run().await;
}

impl Watcher {
    fn options(&self) -> WatchOptions {
        let options = WatchOptions::new()
            .with_range(prefix_end(&self.prefix))
            .with_start_revision(self.cursor as i64 + 1)
            .with_prev_key();
        match (self.shared.progress_mode, self.progress) {
            (Mode::Requests, Progress::Reported) => options.with_progress_notify(),
            _ => options,
        }
    }

    /// Whether a consistent read waits for a revision this watch has not reported yet.
    fn progress_wanted(&self, wanted: &tokio::sync::watch::Receiver<u64>) -> bool {
        self.shared.progress_mode == Mode::Requests
            && self.progress == Progress::Reported
            && *wanted.borrow() > self.cursor
    }

    fn key(&self) -> String {
        if self.prefix.is_empty() {
            "\0".to_owned()
        } else {
            self.prefix.clone()
        }
    }

    async fn run(&mut self) {
        let mut wanted = self.shared.progress_wanted.subscribe();
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
            // Asked again on every new stream: a request sent on a broken one is lost.
            let mut next_ask = Some(Instant::now());
            loop {
                let ask_at = next_ask.filter(|_| self.progress_wanted(&wanted));
                let message = tokio::select! {
                    _ = shutdown.cancelled() => return self.feed.close(WatchClosedReason::StoreShutdown),
                    _ = self.feed.reader_gone() => return,
                    _ = wanted.changed() => {
                        next_ask = Some(Instant::now());
                        continue;
                    }
                    _ = tokio::time::sleep_until(ask_at.unwrap_or_else(Instant::now)), if ask_at.is_some() => {
                        // etcd answers nothing while the watcher is not synced: ask until it does.
                        next_ask = Some(Instant::now() + progress::REASK);
                        match tokio::time::timeout(progress::REASK, stream.request_progress()).await {
                            Ok(Err(_)) => break,
                            Ok(Ok(())) | Err(_) => continue,
                        }
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
            // Where etcd may answer progress before queued events, its marks are not trusted.
            if !response.created() && self.shared.progress_mode == Mode::Requests {
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
            if progress::is_progress_key(ev.key.as_bytes()) {
                self.feed.progress(ev.revision);
            } else if !self.feed.send(ev) {
                return Step::End;
            }
        }
        Step::Continue
    }
}
