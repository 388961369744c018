//! Tests of the controller runner. Timing is driven by paused tokio time; every wait is a
//! condition with a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::workqueue::RateLimitingQueue;

/// Virtual-time deadline for every condition (paused time makes it cost nothing).
const DEADLINE: Duration = Duration::from_secs(600);

/// Waits (in virtual time) until `cond` holds; false at the deadline.
async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

#[derive(Default)]
struct Flag(AtomicBool);

impl HasSynced for Flag {
    fn has_synced(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

fn queue() -> RateLimitingQueue<String> {
    RateLimitingQueue::with_default_controller_rate_limiter("test")
}

/// Calls of the sync function, in order.
#[derive(Default, Clone)]
struct Calls(Arc<Mutex<Vec<(String, Instant)>>>);

impl Calls {
    fn record(&self, key: &str) {
        self.0.lock().push((key.to_string(), Instant::now()));
    }
    fn count(&self, key: &str) -> usize {
        self.0.lock().iter().filter(|(k, _)| k == key).count()
    }
    fn times(&self, key: &str) -> Vec<Instant> {
        self.0
            .lock()
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, t)| *t)
            .collect()
    }
}

#[tokio::test(start_paused = true)]
async fn no_sync_before_the_caches_synced() {
    let synced = Arc::new(Flag::default());
    let q = queue();
    q.add("a".into());
    let calls = Calls::default();
    let shutdown = CancellationToken::new();
    let run = {
        let (q, calls, synced, shutdown) =
            (q.clone(), calls.clone(), synced.clone(), shutdown.clone());
        tokio::spawn(async move {
            Runner::new("t")
                .workers(3)
                .run_workers(q, &[synced.as_ref()], &shutdown, move |k: String| {
                    calls.record(&k);
                    async { Ok::<_, Infallible>(Action::AwaitChange) }
                })
                .await
        })
    };
    // Ten of client-go's 100 ms sync polls: still unsynced, nothing ran.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(calls.count("a"), 0, "a sync ran before the caches synced");
    synced.0.store(true, Ordering::SeqCst);
    assert!(eventually(|| calls.count("a") == 1).await);
    shutdown.cancel();
    assert_eq!(run.await.unwrap(), Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn shutdown_before_sync_starts_nothing_and_shuts_the_queue() {
    let never = Flag::default();
    let q = queue();
    q.add("a".into());
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let stopped = Runner::new("t")
        .run_workers(q.clone(), &[&never], &shutdown, move |_k: String| {
            r.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(Action::AwaitChange) }
        })
        .await;
    assert_eq!(stopped, Stopped::BeforeSync);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(q.shutting_down());
}

/// One key per [`Action`] (and an error, and a panic): the queue calls each one stands for.
#[tokio::test(start_paused = true)]
async fn each_outcome_settles_the_key_as_process_next_work_item() {
    let q = queue();
    let calls = Calls::default();
    let shutdown = CancellationToken::new();
    let run = {
        let (q, calls, shutdown) = (q.clone(), calls.clone(), shutdown.clone());
        tokio::spawn(async move {
            Runner::new("t")
                .workers(2)
                .run_workers(q, &[], &shutdown, move |k: String| {
                    calls.record(&k);
                    let n = calls.count(&k);
                    async move {
                        match k.as_str() {
                            // Fails twice, then succeeds.
                            "flaky" if n <= 2 => Err("boom"),
                            "flaky" => Ok(Action::AwaitChange),
                            "retry" if n <= 3 => Ok(Action::Retry),
                            "retry" => Ok(Action::AwaitChange),
                            "poll" if n <= 2 => Ok(Action::RequeueAfter(Duration::from_secs(30))),
                            "panics" if n == 1 => panic!("a bug in a sync"),
                            _ => Ok(Action::AwaitChange),
                        }
                    }
                })
                .await
        })
    };
    let start = Instant::now();
    for k in ["flaky", "retry", "poll", "panics", "done"] {
        q.add(k.to_string());
    }
    assert!(eventually(|| calls.count("flaky") == 3).await);
    assert!(eventually(|| calls.count("retry") == 4).await);
    assert!(eventually(|| calls.count("poll") == 3).await);
    assert!(
        eventually(|| calls.count("panics") == 2).await,
        "a panicking key is retried"
    );
    // Errors and Retry back off per key: 5 ms, 10 ms, 20 ms (DefaultControllerRateLimiter).
    let retry = calls.times("retry");
    assert_eq!(retry[1] - retry[0], Duration::from_millis(5));
    assert_eq!(retry[2] - retry[1], Duration::from_millis(10));
    assert_eq!(retry[3] - retry[2], Duration::from_millis(20));
    // Success forgets the failures.
    assert_eq!(q.num_requeues(&"flaky".to_string()), 0);
    assert_eq!(q.num_requeues(&"retry".to_string()), 0);
    // RequeueAfter: again after exactly the delay, with no failure counted.
    let poll = calls.times("poll");
    assert_eq!(poll[0], start);
    assert_eq!(poll[1] - poll[0], Duration::from_secs(30));
    assert_eq!(poll[2] - poll[1], Duration::from_secs(30));
    assert_eq!(q.num_requeues(&"poll".to_string()), 0);
    assert_eq!(calls.count("done"), 1, "synced once, never requeued");
    // Every key handed out was `done`: a new add is synced again.
    q.add("done".into());
    assert!(eventually(|| calls.count("done") == 2).await);
    shutdown.cancel();
    assert_eq!(run.await.unwrap(), Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn unchanged_leaves_the_failure_history_alone() {
    let q = queue();
    let key = "k".to_string();
    // Two failures recorded earlier (e.g. by a task the sync started).
    q.add_rate_limited(key.clone());
    q.add_rate_limited(key.clone());
    let calls = Calls::default();
    let shutdown = CancellationToken::new();
    let run = {
        let (q, calls, shutdown) = (q.clone(), calls.clone(), shutdown.clone());
        tokio::spawn(async move {
            Runner::new("t")
                .run_workers(q, &[], &shutdown, move |k: String| {
                    calls.record(&k);
                    async { Ok::<_, Infallible>(Action::Unchanged) }
                })
                .await
        })
    };
    assert!(eventually(|| calls.count("k") == 1).await);
    assert_eq!(q.num_requeues(&key), 2);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(calls.count("k"), 1, "Unchanged requeues nothing");
    shutdown.cancel();
    assert_eq!(run.await.unwrap(), Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn shutdown_drains_the_queued_keys_then_returns() {
    let q = queue();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let calls = Calls::default();
    let shutdown = CancellationToken::new();
    let run = {
        let (q, calls, gate, shutdown) = (q.clone(), calls.clone(), gate.clone(), shutdown.clone());
        tokio::spawn(async move {
            Runner::new("t")
                .workers(2)
                .drain_deadline(Duration::from_secs(60))
                .run_workers(q, &[], &shutdown, move |k: String| {
                    let (calls, gate) = (calls.clone(), gate.clone());
                    async move {
                        let _permit = gate.acquire().await;
                        calls.record(&k);
                        Ok::<_, Infallible>(Action::Retry)
                    }
                })
                .await
        })
    };
    for i in 0..10 {
        q.add(format!("k{i}"));
    }
    // Both workers hold a key; eight are queued.
    assert!(eventually(|| q.len() == 8).await);
    shutdown.cancel();
    assert!(eventually(|| q.shutting_down()).await);
    q.add("late".into());
    gate.add_permits(100);
    assert_eq!(run.await.unwrap(), Stopped::Drained);
    let synced: HashSet<String> = calls.0.lock().iter().map(|(k, _)| k.clone()).collect();
    let want: HashSet<String> = (0..10).map(|i| format!("k{i}")).collect();
    assert_eq!(
        synced, want,
        "every queued key synced once, no add after shutdown"
    );
    assert_eq!(
        calls.0.lock().len(),
        10,
        "retries after shutdown are dropped"
    );
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn drain_deadline_cancels_the_syncs_still_running() {
    let q = queue();
    let started = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let shutdown = CancellationToken::new();
    let run = {
        let (q, started, dropped, shutdown) = (
            q.clone(),
            started.clone(),
            dropped.clone(),
            shutdown.clone(),
        );
        tokio::spawn(async move {
            Runner::new("t")
                .workers(2)
                .drain_deadline(Duration::from_secs(5))
                .run_workers(q, &[], &shutdown, move |_k: String| {
                    started.fetch_add(1, Ordering::SeqCst);
                    let guard = DropCounter(dropped.clone());
                    async move {
                        let _guard = guard;
                        std::future::pending::<()>().await;
                        Ok::<_, Infallible>(Action::AwaitChange)
                    }
                })
                .await
        })
    };
    for k in ["a", "b", "c"] {
        q.add(k.into());
    }
    assert!(eventually(|| started.load(Ordering::SeqCst) == 2).await);
    let cancelled_at = Instant::now();
    shutdown.cancel();
    assert_eq!(run.await.unwrap(), Stopped::Abandoned { in_flight: 2 });
    assert_eq!(Instant::now() - cancelled_at, Duration::from_secs(5));
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        2,
        "the stuck syncs were cancelled"
    );
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "the queued key was abandoned"
    );
}

struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_never_synced_by_two_workers_at_once() {
    let q = queue();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let violations = Arc::new(AtomicUsize::new(0));
    let syncs = Arc::new(AtomicUsize::new(0));
    let shutdown = CancellationToken::new();
    let run = {
        let (q2, in_flight, violations, syncs, shutdown) = (
            q.clone(),
            in_flight.clone(),
            violations.clone(),
            syncs.clone(),
            shutdown.clone(),
        );
        tokio::spawn(async move {
            Runner::new("t")
                .workers(4)
                .run_workers(q2.clone(), &[], &shutdown, move |k: String| {
                    let (q, in_flight, violations, syncs) = (
                        q2.clone(),
                        in_flight.clone(),
                        violations.clone(),
                        syncs.clone(),
                    );
                    async move {
                        if !in_flight.lock().insert(k.clone()) {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::task::yield_now().await;
                        // An event for the key while it is being synced.
                        if syncs.fetch_add(1, Ordering::SeqCst) < 500 {
                            q.add(k.clone());
                        }
                        in_flight.lock().remove(&k);
                        Ok::<_, Infallible>(Action::AwaitChange)
                    }
                })
                .await
        })
    };
    for round in 0..100 {
        for k in 0..5 {
            q.add(format!("k{}", (round + k) % 5));
        }
        tokio::task::yield_now().await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while syncs.load(Ordering::SeqCst) < 500 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    shutdown.cancel();
    assert_eq!(run.await.unwrap(), Stopped::Drained);
    assert!(syncs.load(Ordering::SeqCst) >= 500);
    assert_eq!(violations.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn each_sync_runs_in_a_span_carrying_its_key() {
    use tracing_subscriber::layer::SubscriberExt;

    let spans = SpanLog::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    // Current-thread runtime: the runner's tasks run on this thread, under this subscriber.
    let _default = tracing::subscriber::set_default(subscriber);
    let q = queue();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let shutdown = CancellationToken::new();
    let run = {
        let (q, seen, shutdown) = (q.clone(), seen.clone(), shutdown.clone());
        tokio::spawn(async move {
            Runner::new("ctl")
                .run_workers(q, &[], &shutdown, move |_k: String| {
                    let seen = seen.clone();
                    async move {
                        let name = tracing::Span::current().metadata().map(|m| m.name());
                        seen.lock().push(name);
                        Ok::<_, Infallible>(Action::AwaitChange)
                    }
                })
                .await
        })
    };
    q.add("ns/web-1".into());
    assert!(eventually(|| seen.lock().len() == 1).await);
    assert_eq!(
        seen.lock()[0],
        Some("sync"),
        "the sync runs inside its span"
    );
    let logged = spans.0.lock().clone();
    assert!(
        logged.contains(&"sync controller=ctl key=ns/web-1".to_string()),
        "{logged:?}"
    );
    shutdown.cancel();
    assert_eq!(run.await.unwrap(), Stopped::Drained);
}

/// Records every new span as `name field=value ...`.
#[derive(Default, Clone)]
struct SpanLog(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanLog {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={v:?}", f.name()));
            }
        }
        let mut fields = Fields(attrs.metadata().name().to_string());
        attrs.record(&mut fields);
        self.0.lock().push(fields.0);
    }
}

#[tokio::test(start_paused = true)]
async fn periodic_passes_are_spaced_from_the_end_of_the_last_one() {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let shutdown = CancellationToken::new();
    let run = {
        let (starts, shutdown) = (starts.clone(), shutdown.clone());
        tokio::spawn(async move {
            Runner::new("t")
                .run_periodic(Duration::from_secs(10), &[], &shutdown, || {
                    let starts = starts.clone();
                    async move {
                        let n = {
                            let mut s = starts.lock();
                            s.push(Instant::now());
                            s.len()
                        };
                        tokio::time::sleep(Duration::from_secs(3)).await;
                        match n {
                            2 => Err("a pass failed"),
                            3 => panic!("a pass panicked"),
                            _ => Ok(()),
                        }
                    }
                })
                .await
        })
    };
    assert!(
        eventually(|| starts.lock().len() == 5).await,
        "failures and panics do not stop it"
    );
    let s = starts.lock().clone();
    for w in s.windows(2) {
        // wait.Until(sliding): period counted from the end of the previous 3 s pass.
        assert_eq!(w[1] - w[0], Duration::from_secs(13));
    }
    shutdown.cancel();
    assert_eq!(run.await.unwrap(), Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn periodic_pass_in_flight_finishes_or_is_cancelled_at_the_deadline() {
    for (pass_takes, want) in [
        (Duration::from_secs(2), Stopped::Drained),
        (Duration::from_secs(60), Stopped::Abandoned { in_flight: 1 }),
    ] {
        let finished = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicBool::new(false));
        let shutdown = CancellationToken::new();
        let run = {
            let (finished, started, shutdown) =
                (finished.clone(), started.clone(), shutdown.clone());
            tokio::spawn(async move {
                Runner::new("t")
                    .drain_deadline(Duration::from_secs(5))
                    .run_periodic(Duration::from_secs(20), &[], &shutdown, || {
                        let (finished, started) = (finished.clone(), started.clone());
                        async move {
                            started.store(true, Ordering::SeqCst);
                            tokio::time::sleep(pass_takes).await;
                            finished.store(true, Ordering::SeqCst);
                            Ok::<_, Infallible>(())
                        }
                    })
                    .await
            })
        };
        assert!(eventually(|| started.load(Ordering::SeqCst)).await);
        shutdown.cancel();
        assert_eq!(run.await.unwrap(), want);
        assert_eq!(finished.load(Ordering::SeqCst), want == Stopped::Drained);
    }
}
