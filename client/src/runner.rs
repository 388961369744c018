//! The controller runner, written once: wait for the caches, run N workers off a work queue (or one
//! periodic pass), drain on shutdown. client-go's `Run(workers, stopCh)` pattern
//! (`cache.WaitForNamedCacheSync` → `wait.Until(worker, 1s)` × N → `queue.ShutDown()`, with
//! `processNextWorkItem` as the worker body; spec informer.md §4.9, §5.5), and kube-runtime's
//! `controller/runner.rs` in its role of owning the workers and their shutdown.
//!
//! [`Runner::run_workers`]:
//! 1. waits until every given [`HasSynced`] reports synced (client-go polls every 100 ms), or
//!    returns [`Stopped::BeforeSync`] if `shutdown` fires first — nothing reconciles before its
//!    caches have synced;
//! 2. starts N workers; each takes a key from the queue, runs the sync function under a
//!    `sync{controller, key}` span, and settles the key as the returned [`Action`] says
//!    (`Forget`, `AddAfter`, `AddRateLimited`), then calls `Done` — always, also when the sync
//!    failed or panicked, so a key is never left "processing";
//! 3. on `shutdown`, shuts the queue down and lets the workers drain it: adds (and pending
//!    delayed adds) are dropped, keys already queued are still synced, and each worker exits once
//!    the queue is empty (client-go `ShutDownWithDrain`: return once every item handed out is
//!    `Done`). The drain is bounded by [`Runner::drain_deadline`]; past it, the syncs still in
//!    flight are cancelled at their next await and the rest of the queue is abandoned
//!    ([`Stopped::Abandoned`]). `run_workers` returns only when every worker task has ended.
//!
//! [`Runner::run_periodic`] is `wait.Until(f, period, stop)` after the same cache wait, for the
//! controllers that work in passes (node lifecycle, pod GC): the first pass runs at once, the next
//! one `period` after the previous one *ended* (client-go's `sliding = true`); a pass in flight at
//! shutdown may finish within the drain deadline.
//!
//! Guarantees: a key is never synced by two workers at once (the queue's), a sync never starts
//! before the caches synced, a panicking sync is logged and retried with back-off instead of
//! killing its worker, and shutdown is bounded. Upstream re-panics (`HandleCrash` with
//! `ReallyCrash`); here a worker survives, as this crate's controllers always have.

use std::any::Any;
use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::shared_informer::{wait_for_cache_sync, HasSynced};
use crate::workqueue::RateLimitingQueue;

/// How long shutdown lets workers drain before cancelling what is still running. Below the
/// controller manager's and the control plane's own deadlines (10 s, 8 s), so a runner stops on
/// its own terms before its caller gives up on it.
pub const DEFAULT_DRAIN_DEADLINE: Duration = Duration::from_secs(5);

/// What a sync asks of the queue for its key (client-go `processNextWorkItem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Synced: `Forget` the key's failure history; it comes back when something changes.
    AwaitChange,
    /// Synced, and due again after this long: `Forget`, then `AddAfter` (a scheduled change,
    /// a poll of something still going away).
    RequeueAfter(Duration),
    /// Failed in a way the sync already reported: `AddRateLimited` (per-key back-off).
    Retry,
    /// Leave the key's failure history and schedule as the sync set them (a sync that keeps its
    /// own back-off, or settles the key from a task it started).
    Unchanged,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Shut down before the caches synced: nothing ran.
    BeforeSync,
    /// Every worker (or the last pass) finished its work and exited.
    Drained,
    /// The drain deadline passed: this many workers (or passes) still running were cancelled.
    Abandoned {
        /// Workers cancelled mid-sync or with keys left in the queue.
        in_flight: usize,
    },
}

/// Runs a controller's workers (see the module docs).
#[derive(Debug, Clone)]
pub struct Runner {
    name: Arc<str>,
    workers: usize,
    drain_deadline: Duration,
}

impl Runner {
    /// A runner named `name` (the controller's name, in logs and spans), one worker, the default
    /// drain deadline.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self {
            name: name.into(),
            workers: 1,
            drain_deadline: DEFAULT_DRAIN_DEADLINE,
        }
    }

    /// Run `n` workers (at least one), e.g. `--concurrent-replicaset-syncs`.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// How long shutdown waits for the work in flight and still queued before cancelling it.
    pub fn drain_deadline(mut self, d: Duration) -> Self {
        self.drain_deadline = d;
        self
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Wait for `synced`, then run the workers on `queue` until `shutdown`, then drain.
    ///
    /// `sync(key)` returns the [`Action`] for the key, or an error, which is logged and retried
    /// with the queue's rate limiter (`AddRateLimited`). A panic is treated as an error.
    pub async fn run_workers<K, F, Fut, E>(
        self,
        queue: RateLimitingQueue<K>,
        synced: &[&dyn HasSynced],
        shutdown: &CancellationToken,
        sync: F,
    ) -> Stopped
    where
        K: Clone + Eq + Hash + Display + Send + Sync + 'static,
        F: Fn(K) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        if !wait_for_cache_sync(synced, shutdown).await {
            tracing::info!(controller = %self.name, "stopped before caches synced");
            queue.shut_down();
            return Stopped::BeforeSync;
        }
        tracing::info!(controller = %self.name, workers = self.workers, "caches synced; starting workers");
        let sync = Arc::new(sync);
        // Cancelled only when the drain deadline passes: ends the syncs still in flight.
        let abort = CancellationToken::new();
        let tracker = TaskTracker::new();
        for _ in 0..self.workers {
            tracker.spawn(worker(
                self.name.clone(),
                queue.clone(),
                sync.clone(),
                abort.clone(),
            ));
        }
        tracker.close();
        shutdown.cancelled().await;
        queue.shut_down();
        if tokio::time::timeout(self.drain_deadline, tracker.wait())
            .await
            .is_ok()
        {
            tracing::info!(controller = %self.name, "workers drained and stopped");
            return Stopped::Drained;
        }
        let in_flight = tracker.len();
        tracing::warn!(
            controller = %self.name,
            in_flight,
            deadline = ?self.drain_deadline,
            "drain deadline passed; cancelling the syncs in flight"
        );
        abort.cancel();
        tracker.wait().await;
        Stopped::Abandoned { in_flight }
    }

    /// Wait for `synced`, then run `pass` every `period` (measured from the end of the previous
    /// pass) until `shutdown`. A failed or panicking pass is logged; the next one runs on time.
    pub async fn run_periodic<F, Fut, E>(
        self,
        period: Duration,
        synced: &[&dyn HasSynced],
        shutdown: &CancellationToken,
        mut pass: F,
    ) -> Stopped
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        if !wait_for_cache_sync(synced, shutdown).await {
            tracing::info!(controller = %self.name, "stopped before caches synced");
            return Stopped::BeforeSync;
        }
        tracing::info!(controller = %self.name, ?period, "caches synced; starting");
        loop {
            let span = tracing::debug_span!("pass", controller = %self.name);
            let one = AssertUnwindSafe(async { pass().await })
                .catch_unwind()
                .instrument(span);
            tokio::pin!(one);
            let finished = tokio::select! {
                outcome = &mut one => Some(outcome),
                _ = shutdown.cancelled() => None,
            };
            let Some(outcome) = finished else {
                // Shutdown mid-pass: let it finish, within the deadline.
                return match tokio::time::timeout(self.drain_deadline, &mut one).await {
                    Ok(outcome) => {
                        self.report_pass(outcome);
                        Stopped::Drained
                    }
                    Err(_) => {
                        tracing::warn!(controller = %self.name, "drain deadline passed; pass cancelled");
                        Stopped::Abandoned { in_flight: 1 }
                    }
                };
            };
            self.report_pass(outcome);
            tokio::select! {
                _ = shutdown.cancelled() => return Stopped::Drained,
                _ = tokio::time::sleep(period) => {}
            }
        }
    }

    fn report_pass<E: Display>(&self, outcome: Result<Result<(), E>, Box<dyn Any + Send>>) {
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(controller = %self.name, error = %e, "pass failed"),
            Err(panic) => tracing::error!(
                controller = %self.name,
                panic = panic_message(panic.as_ref()),
                "pass panicked"
            ),
        }
    }
}

/// One worker: client-go's `processNextWorkItem` in a loop until the queue is shut down and empty.
async fn worker<K, F, Fut, E>(
    name: Arc<str>,
    queue: RateLimitingQueue<K>,
    sync: Arc<F>,
    abort: CancellationToken,
) where
    K: Clone + Eq + Hash + Display + Send + Sync + 'static,
    F: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    loop {
        let key = tokio::select! {
            biased;
            _ = abort.cancelled() => return,
            key = queue.get() => match key {
                Some(key) => key,
                None => return,
            },
        };
        let span = tracing::debug_span!("sync", controller = %name, key = %key);
        // The call itself is inside the future, so a panic before its first await is caught too.
        let one = AssertUnwindSafe(async { sync(key.clone()).await })
            .catch_unwind()
            .instrument(span);
        let outcome = tokio::select! {
            biased;
            _ = abort.cancelled() => {
                queue.done(&key);
                return;
            }
            outcome = one => outcome,
        };
        match outcome {
            Ok(Ok(action)) => settle(&queue, &key, action),
            Ok(Err(e)) => {
                tracing::warn!(controller = %name, key = %key, error = %e, "sync failed; requeue");
                queue.add_rate_limited(key.clone());
            }
            Err(panic) => {
                tracing::error!(
                    controller = %name,
                    key = %key,
                    panic = panic_message(panic.as_ref()),
                    "sync panicked; requeue"
                );
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
}

/// The queue calls an [`Action`] stands for (before `Done`).
fn settle<K>(queue: &RateLimitingQueue<K>, key: &K, action: Action)
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    match action {
        Action::AwaitChange => queue.forget(key),
        Action::RequeueAfter(d) => {
            queue.forget(key);
            queue.add_after(key.clone(), d);
        }
        Action::Retry => queue.add_rate_limited(key.clone()),
        Action::Unchanged => {}
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "(not a string)"
    }
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
