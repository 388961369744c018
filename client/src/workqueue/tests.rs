use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::*;

const DEADLINE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn add_dedups_while_queued() {
    let q = WorkQueue::new("t");
    q.add("a");
    q.add("a");
    q.add("b");
    assert_eq!(q.len(), 2);
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, Some("b"));
    assert_eq!(q.metrics().adds, 2, "deduplicated add not counted");
}

#[tokio::test]
async fn add_during_processing_requeues_once_after_done() {
    let q = WorkQueue::new("t");
    q.add("a");
    let item = q.get().await;
    assert_eq!(item, Some("a"));
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 0, "not queued while processing");
    // Nothing to get until done: a second worker must not receive "a".
    let second = tokio::time::timeout(Duration::from_millis(50), q.get()).await;
    assert!(second.is_err(), "a key is never handed out twice at once");
    q.done(&"a");
    assert_eq!(q.len(), 1, "exactly one re-processing");
    assert_eq!(q.get().await, Some("a"));
    q.done(&"a");
    assert_eq!(q.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_workers_never_process_a_key_twice() {
    let q = Arc::new(WorkQueue::new("t"));
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let violations = Arc::new(AtomicUsize::new(0));
    let processed = Arc::new(AtomicUsize::new(0));
    let readds = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (q, in_flight, violations, processed, readds) = (
            q.clone(),
            in_flight.clone(),
            violations.clone(),
            processed.clone(),
            readds.clone(),
        );
        workers.push(tokio::spawn(async move {
            while let Some(k) = q.get().await {
                if !in_flight.lock().insert(k) {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                tokio::task::yield_now().await;
                // Re-add while processing: must come back after done, not concurrently.
                if k % 3 == 0 && readds.fetch_add(1, Ordering::SeqCst) < 300 {
                    q.add(k);
                }
                in_flight.lock().remove(&k);
                processed.fetch_add(1, Ordering::SeqCst);
                q.done(&k);
            }
        }));
    }
    for round in 0..200u32 {
        for k in 0..10u32 {
            q.add((round + k) % 10);
        }
        tokio::task::yield_now().await;
    }
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while (!q.is_empty() || !in_flight.lock().is_empty()) && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    q.shut_down_with_drain().await;
    for w in workers {
        let _ = w.await;
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    assert!(processed.load(Ordering::SeqCst) >= 10);
}

#[tokio::test(start_paused = true)]
async fn add_after_delays_and_earliest_ready_time_wins() {
    let q = Arc::new(WorkQueue::new("t"));
    let start = tokio::time::Instant::now();
    q.add_after("late", Duration::from_secs(10));
    q.add_after("late", Duration::from_secs(60)); // later: ignored
    q.add_after("early", Duration::from_secs(1));
    assert_eq!(q.len(), 0);
    assert_eq!(q.waiting_len(), 2);
    assert_eq!(q.get().await, Some("early"));
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert_eq!(q.get().await, Some("late"));
    let e = start.elapsed();
    assert!(
        e >= Duration::from_secs(10) && e < Duration::from_secs(60),
        "{e:?}"
    );
    // A sooner add_after moves a waiting item forward.
    q.add_after("x", Duration::from_secs(100));
    q.add_after("x", Duration::from_secs(5));
    let t = tokio::time::Instant::now();
    assert_eq!(q.get().await, Some("x"));
    assert!(t.elapsed() < Duration::from_secs(6));
    // Zero delay = immediate add.
    q.add_after("now", Duration::ZERO);
    assert_eq!(q.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn try_get_takes_only_what_is_ready_now() {
    let q = WorkQueue::new("t");
    assert_eq!(q.try_get(), None, "empty queue: nothing, no wait");
    q.add_after("n1", Duration::from_secs(40));
    q.add("n2");
    assert_eq!(q.try_get(), Some("n2"));
    assert_eq!(q.try_get(), None, "n1 is still quarantined");
    q.done(&"n2");
    tokio::time::advance(Duration::from_secs(40)).await;
    assert_eq!(q.try_get(), Some("n1"), "a due delayed add is promoted");
    // Handed out like `get`: an add while processing waits for `done`.
    q.add("n1");
    assert_eq!(q.try_get(), None);
    q.done(&"n1");
    assert_eq!(q.try_get(), Some("n1"));
}

#[tokio::test(start_paused = true)]
async fn waiting_getter_wakes_for_new_earlier_item() {
    let q = Arc::new(WorkQueue::new("t"));
    q.add_after("slow", Duration::from_secs(100));
    let q2 = q.clone();
    let getter = tokio::spawn(async move { q2.get().await });
    tokio::task::yield_now().await;
    q.add_after("fast", Duration::from_secs(1));
    let got = tokio::time::timeout(Duration::from_secs(2), getter).await;
    assert!(matches!(got, Ok(Ok(Some("fast")))), "{got:?}");
}

#[tokio::test]
async fn shutdown_drains_queued_then_returns_none() {
    let q = Arc::new(WorkQueue::new("t"));
    q.add(1);
    q.add(2);
    q.add_after(3, Duration::from_secs(3600));
    q.shut_down();
    q.add(4); // ignored
    assert_eq!(q.get().await, Some(1));
    assert_eq!(q.get().await, Some(2));
    assert_eq!(q.get().await, None, "waiting items are dropped at shutdown");

    // Blocked getters are woken by shutdown.
    let q = Arc::new(WorkQueue::<u32>::new("t"));
    let q2 = q.clone();
    let g = tokio::spawn(async move { q2.get().await });
    tokio::task::yield_now().await;
    q.shut_down();
    assert!(matches!(
        tokio::time::timeout(DEADLINE, g).await,
        Ok(Ok(None))
    ));
}

#[tokio::test]
async fn shut_down_with_drain_waits_for_processing() {
    let q = Arc::new(WorkQueue::new("t"));
    q.add("a");
    let item = q.get().await;
    assert_eq!(item, Some("a"));
    let q2 = q.clone();
    let drain = tokio::spawn(async move { q2.shut_down_with_drain().await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        !drain.is_finished(),
        "drain waits while an item is processing"
    );
    q.done(&"a");
    assert!(tokio::time::timeout(DEADLINE, drain).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn rate_limited_requeue_follows_item_exponential_backoff() {
    let q = RateLimitingQueue::with_default_controller_rate_limiter("rs");
    let key = "ns/rs".to_string();
    let mut delays = Vec::new();
    for _ in 0..4 {
        let t = tokio::time::Instant::now();
        q.add_rate_limited(key.clone());
        let got = q.get().await;
        assert_eq!(got.as_ref(), Some(&key));
        delays.push(t.elapsed());
        q.done(&key);
    }
    let ms: Vec<u128> = delays.iter().map(|d| d.as_millis()).collect();
    assert_eq!(ms, vec![5, 10, 20, 40], "5 ms · 2^n");
    assert_eq!(q.num_requeues(&key), 4);
    q.forget(&key);
    assert_eq!(q.num_requeues(&key), 0);
    let m = q.metrics();
    assert_eq!(m.retries, 4);
    assert_eq!(m.adds, 4);
    assert_eq!(m.queue_latency.count, 4);
    assert_eq!(m.work_duration.count, 4);
}

#[tokio::test(start_paused = true)]
async fn metrics_track_latency_and_work_duration() {
    let q = WorkQueue::new("t");
    q.add("a");
    tokio::time::advance(Duration::from_millis(300)).await;
    assert_eq!(q.metrics().depth, 1);
    let item = q.get().await;
    assert_eq!(item, Some("a"));
    tokio::time::advance(Duration::from_millis(200)).await;
    let m = q.metrics();
    assert_eq!(m.queue_latency.max, Duration::from_millis(300));
    assert_eq!(m.longest_running_processor, Duration::from_millis(200));
    q.done(&"a");
    let m = q.metrics();
    assert_eq!(m.work_duration.total, Duration::from_millis(200));
    assert_eq!(m.unfinished_work, Duration::ZERO);
}
