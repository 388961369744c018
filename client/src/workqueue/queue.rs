//! The work queue with its delaying extension (client-go `util/workqueue/queue.go`,
//! `delaying_queue.go`; spec informer.md §5.1–§5.2).
//!
//! Guarantees:
//! * An item is never handed to two workers at once: while it is in `processing`, an `add` only
//!   marks it `dirty`, and `done` re-queues it exactly once.
//! * An item is queued at most once (`dirty` dedups), and adds during processing are never lost.
//! * `add_after(x, d)`: an item already waiting keeps the *earlier* ready time. Waiting items are
//!   promoted by `get` itself (no background task), so paused tokio time drives them exactly.
//!   The waiting set holds each distinct item at most once (bounded by the key space).
//! * `try_get` is `get` without the wait: the ready head (due delayed adds promoted first) or
//!   nothing.
//! * `shut_down`: adds are ignored, waiting items are dropped, already-queued items are still
//!   handed out, then `get` returns `None`. `shut_down_with_drain` also waits for `processing` to
//!   empty.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::metrics::{MetricsState, QueueMetrics};

struct State<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T>,
    processing: HashSet<T>,
    shutting_down: bool,
    /// Delaying queue: item → (ready time, sequence) and its ordered mirror.
    waiting: HashMap<T, (Instant, u64)>,
    by_ready: BTreeMap<(Instant, u64), T>,
    seq: u64,
    metrics: MetricsState<T>,
}

/// The longest wait [`add_after`](WorkQueue::add_after) schedules: a year (tokio timers reach
/// about 2.2 years).
const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

/// Work queue of `T` with dedup, processing tracking and delayed adds.
pub struct WorkQueue<T> {
    name: String,
    state: Mutex<State<T>>,
    /// Wakes getters (one per add; all on shutdown).
    notify: Notify,
    /// Wakes `shut_down_with_drain` when processing empties.
    drained: Notify,
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<T> {
    pub fn new(name: &str) -> Self {
        WorkQueue {
            name: name.to_string(),
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                shutting_down: false,
                waiting: HashMap::new(),
                by_ready: BTreeMap::new(),
                seq: 0,
                metrics: MetricsState::default(),
            }),
            notify: Notify::new(),
            drained: Notify::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn add_locked(&self, s: &mut State<T>, item: T) {
        if s.shutting_down || s.dirty.contains(&item) {
            return;
        }
        s.metrics.adds += 1;
        s.dirty.insert(item.clone());
        if s.processing.contains(&item) {
            return;
        }
        s.metrics.queued_at.insert(item.clone(), Instant::now());
        s.queue.push_back(item);
        self.notify.notify_one();
    }

    /// Marks `item` as needing processing.
    pub fn add(&self, item: T) {
        let mut s = self.state.lock();
        self.add_locked(&mut s, item);
    }

    /// Adds `item` after `d` (now if `d` is zero); an earlier pending ready time wins.
    pub fn add_after(&self, item: T, d: Duration) {
        let mut s = self.state.lock();
        if s.shutting_down {
            return;
        }
        s.metrics.retries += 1;
        if d.is_zero() {
            self.add_locked(&mut s, item);
            return;
        }
        // A delay past [`MAX_DELAY`] (a caller's "practically never") waits that long: `Instant`
        // addition would panic past its range, and tokio's timers do not reach that far.
        let now = Instant::now();
        let ready = now.checked_add(d).unwrap_or_else(|| now + MAX_DELAY);
        if let Some(&(old, seq)) = s.waiting.get(&item) {
            if old <= ready {
                return;
            }
            s.by_ready.remove(&(old, seq));
        }
        s.seq += 1;
        let seq = s.seq;
        s.waiting.insert(item.clone(), (ready, seq));
        s.by_ready.insert((ready, seq), item);
        // A getter may be sleeping until a later ready time.
        self.notify.notify_waiters();
    }

    fn promote_ready(&self, s: &mut State<T>) {
        let now = Instant::now();
        while let Some(entry) = s.by_ready.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let item = entry.remove();
            s.waiting.remove(&item);
            self.add_locked(s, item);
        }
    }

    /// Waits for an item; `None` once shut down and drained of queued items.
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_ready = {
                let mut s = self.state.lock();
                if !s.shutting_down {
                    self.promote_ready(&mut s);
                }
                if let Some(item) = Self::pop_locked(&mut s) {
                    return Some(item);
                }
                if s.shutting_down {
                    return None;
                }
                s.by_ready.keys().next().map(|(t, _)| *t)
            };
            match next_ready {
                Some(t) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(t) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Takes the next item if one is ready now (a due `add_after` included), without waiting:
    /// client-go's `for q.Len() > 0 { q.Get() }`, as the pod GC drains its quarantine queue.
    /// The item must be `done` like one from [`get`](Self::get).
    pub fn try_get(&self) -> Option<T> {
        let mut s = self.state.lock();
        if !s.shutting_down {
            self.promote_ready(&mut s);
        }
        Self::pop_locked(&mut s)
    }

    /// Hands out the head of the queue: it leaves `dirty` and enters `processing`.
    fn pop_locked(s: &mut State<T>) -> Option<T> {
        let item = s.queue.pop_front()?;
        s.dirty.remove(&item);
        s.processing.insert(item.clone());
        s.metrics.got(&item);
        Some(item)
    }

    /// Marks `item` finished; re-queues it if it was added meanwhile.
    pub fn done(&self, item: &T) {
        let mut s = self.state.lock();
        s.metrics.done(item);
        if !s.processing.remove(item) {
            return;
        }
        if s.dirty.contains(item) {
            s.metrics.queued_at.insert(item.clone(), Instant::now());
            s.queue.push_back(item.clone());
            self.notify.notify_one();
        }
        if s.processing.is_empty() {
            self.drained.notify_waiters();
        }
    }

    /// Queued items (not waiting, not processing).
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items waiting for their `add_after` time.
    pub fn waiting_len(&self) -> usize {
        self.state.lock().waiting.len()
    }

    /// Stops accepting adds and wakes every getter.
    pub fn shut_down(&self) {
        let mut s = self.state.lock();
        s.shutting_down = true;
        s.waiting.clear();
        s.by_ready.clear();
        drop(s);
        self.notify.notify_waiters();
    }

    /// `shut_down`, then waits until no item is being processed.
    pub async fn shut_down_with_drain(&self) {
        self.shut_down();
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.state.lock().processing.is_empty() {
                return;
            }
            drained.await;
        }
    }

    pub fn shutting_down(&self) -> bool {
        self.state.lock().shutting_down
    }

    pub fn metrics(&self) -> QueueMetrics {
        let s = self.state.lock();
        s.metrics.snapshot(s.queue.len(), s.waiting.len())
    }
}
