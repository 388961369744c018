//! One priority level's queues and seats (upstream `fairqueuing/queueset/queueset.go`, read for
//! behaviour): shuffle-sharded queues served in fair-queuing order by virtual time.
//!
//! Design. A request asks for `seats` (its width). It is put on the shortest queue of its flow's
//! hand (length in seats, waiting plus executing), or rejected when that queue already holds
//! `queue_length_limit` requests. A level whose limit response is `Reject` has no queues: a
//! request is dispatched at once or rejected. Dispatching picks, among queues with waiting
//! requests, the one whose head would finish first in virtual time (the queue's next dispatch
//! time plus one estimated service time, ties broken round-robin), and dispatches its head only
//! if its seats fit under the concurrency limit (a request wider than the whole limit runs alone)
//! — so a wide request is never starved by narrow ones behind it.
//!
//! Virtual time `R` advances with real time at `min(seats requested, limit) / active queues`
//! seat-seconds per second: the service an always-busy queue receives. Dispatching a request
//! advances its queue's next dispatch time by `seats × G` (G, the estimated service time); its
//! completion corrects that by the time it really took, so a queue of slow requests falls back.
//!
//! Guarantees: seats in use never exceed the limit except for a lone over-wide request; each
//! queue is FIFO; every waiting request is either dispatched, cancelled by its waiter, or stays
//! counted. The set is a pure state machine over a payload `T` (the waiter's channel in the
//! server, a label in tests) driven with explicit instants: no clock, no I/O, no locking.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::shuffle::Dealer;

/// Estimated service time of a request (upstream's queueset: 3 ms), corrected on completion.
pub const ESTIMATED_SERVICE_TIME: Duration = Duration::from_millis(3);

/// The queuing parameters of a `Queue` limit response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuing {
    pub queues: usize,
    pub hand_size: usize,
    pub queue_length_limit: usize,
}

/// Why a request was not admitted (upstream's `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// Its queue held `queue_length_limit` requests.
    QueueFull,
    /// A `Reject` level had no seats free.
    ConcurrencyLimit,
}

impl Reject {
    /// The `reason` label of `apiserver_flowcontrol_rejected_requests_total`.
    pub fn reason(self) -> &'static str {
        match self {
            Reject::QueueFull => "queue-full",
            Reject::ConcurrencyLimit => "concurrency-limit",
        }
    }
}

/// What a dispatched request holds until it finishes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ticket {
    pub queue: usize,
    pub seats: u32,
    generation: u64,
    dispatched_at: Instant,
}

/// A waiting request: its id and the queue it was put in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    pub id: u64,
    queue: usize,
}

/// A request dispatched from a queue.
#[derive(Debug)]
pub struct Dispatched<T> {
    pub id: u64,
    pub payload: T,
    pub ticket: Ticket,
    /// When it arrived (its wait is `ticket` time minus this).
    pub arrived: Instant,
}

struct Waiter<T> {
    id: u64,
    seats: u32,
    hash: u64,
    payload: T,
    arrived: Instant,
}

struct Queue<T> {
    waiting: VecDeque<Waiter<T>>,
    next_dispatch_r: f64,
    waiting_seats: u32,
    seats_in_use: u32,
    executing: u32,
}

impl<T> Queue<T> {
    fn new() -> Self {
        Queue {
            waiting: VecDeque::new(),
            next_dispatch_r: 0.0,
            waiting_seats: 0,
            seats_in_use: 0,
            executing: 0,
        }
    }

    fn active(&self) -> bool {
        !self.waiting.is_empty() || self.executing > 0
    }
}

/// The queues and seats of one priority level.
pub struct QueueSet<T> {
    queuing: Option<Queuing>,
    dealer: Dealer,
    queues: Vec<Queue<T>>,
    /// Seats that may execute at once (the level's current concurrency limit).
    limit: u32,
    seats_in_use: u32,
    executing: u32,
    waiting: u32,
    waiting_seats: u32,
    active_queues: u32,
    virtual_time: f64,
    last_real: Instant,
    robin: usize,
    next_id: u64,
    /// Bumped when the queues are rebuilt: a ticket of an older generation names no queue.
    generation: u64,
}

impl<T> std::fmt::Debug for QueueSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSet")
            .field("limit", &self.limit)
            .field("seats_in_use", &self.seats_in_use)
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
}

impl<T> QueueSet<T> {
    /// A set with `queuing` (`None`: the `Reject` limit response) and `limit` seats.
    pub fn new(queuing: Option<Queuing>, limit: u32, now: Instant) -> Self {
        let mut qs = QueueSet {
            queuing: None,
            dealer: Dealer::new(1, 1),
            queues: Vec::new(),
            limit,
            seats_in_use: 0,
            executing: 0,
            waiting: 0,
            waiting_seats: 0,
            active_queues: 0,
            virtual_time: 0.0,
            last_real: now,
            robin: 0,
            next_id: 0,
            generation: 0,
        };
        qs.reconfigure(queuing, now);
        qs
    }

    /// Seats in use by executing requests.
    pub fn seats_in_use(&self) -> u32 {
        self.seats_in_use
    }

    /// Requests executing.
    pub fn executing(&self) -> u32 {
        self.executing
    }

    /// Requests waiting.
    pub fn waiting(&self) -> u32 {
        self.waiting
    }

    /// Seats the waiting requests ask for.
    pub fn waiting_seats(&self) -> u32 {
        self.waiting_seats
    }

    /// Queues with requests waiting or executing.
    pub fn active_queues(&self) -> u32 {
        self.active_queues
    }

    /// The concurrency limit in seats.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Sets the concurrency limit (borrowing, a configuration change); call
    /// [`dispatch`](Self::dispatch) next, a higher limit may admit waiting requests.
    pub fn set_limit(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// Replaces the queuing parameters. Waiting requests are dealt again into the new queues in
    /// their arrival order (none is dropped: a `Reject` level keeps them on one queue until
    /// they are dispatched); executing requests finish against the new accounting.
    pub fn reconfigure(&mut self, queuing: Option<Queuing>, now: Instant) {
        if self.queuing == queuing && !self.queues.is_empty() {
            return;
        }
        self.advance(now);
        let mut waiters: Vec<Waiter<T>> = self
            .queues
            .drain(..)
            .flat_map(|q| q.waiting.into_iter())
            .collect();
        waiters.sort_by_key(|w| w.id);
        let n = queuing.map_or(1, |q| q.queues.max(1));
        self.queues = (0..n).map(|_| Queue::new()).collect();
        self.dealer = queuing.map_or(Dealer::new(1, 1), |q| Dealer::new(n, q.hand_size));
        self.queuing = queuing;
        self.generation += 1;
        self.robin = 0;
        self.active_queues = 0;
        self.waiting = 0;
        self.waiting_seats = 0;
        for w in waiters {
            let qi = self.choose_queue(w.hash);
            self.push(qi, w);
        }
    }

    /// Admits a request of `seats` from the flow `hash`: queued (its id and queue) or rejected
    /// (with its payload back). Call [`dispatch`](Self::dispatch) next: it may be dispatched at once.
    pub fn enqueue(
        &mut self,
        hash: u64,
        seats: u32,
        payload: T,
        now: Instant,
    ) -> Result<Queued, (Reject, T)> {
        self.advance(now);
        let seats = seats.max(1);
        let qi = match self.queuing {
            None => {
                if self.waiting > 0 || !self.fits(seats) {
                    return Err((Reject::ConcurrencyLimit, payload));
                }
                0
            }
            Some(q) => {
                let qi = self.choose_queue(hash);
                if self.queues[qi].waiting.len() >= q.queue_length_limit {
                    return Err((Reject::QueueFull, payload));
                }
                qi
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        self.push(
            qi,
            Waiter {
                id,
                seats,
                hash,
                payload,
                arrived: now,
            },
        );
        Ok(Queued { id, queue: qi })
    }

    /// Removes the waiting request `queued` (its wait limit passed, or its client left); `None`
    /// when it is no longer waiting (it was dispatched). Looks in the queue it was put in (at most
    /// a queue's length limit of waiters), and in every queue only if a reconfiguration moved it.
    pub fn cancel(&mut self, queued: Queued, now: Instant) -> Option<T> {
        self.advance(now);
        let id = queued.id;
        let holds = |q: &Queue<T>| q.waiting.iter().any(|w| w.id == id);
        let qi = match self.queues.get(queued.queue) {
            Some(q) if holds(q) => queued.queue,
            _ => self.queues.iter().position(holds)?,
        };
        let was = self.queues[qi].active();
        let q = &mut self.queues[qi];
        let pos = q.waiting.iter().position(|w| w.id == id)?;
        let w = q.waiting.remove(pos)?;
        q.waiting_seats -= w.seats;
        self.waiting -= 1;
        self.waiting_seats -= w.seats;
        self.note_activity(qi, was);
        Some(w.payload)
    }

    /// Dispatches as many waiting requests as the limit allows, in fair-queuing order.
    pub fn dispatch(&mut self, now: Instant) -> Vec<Dispatched<T>> {
        self.advance(now);
        let mut out = Vec::new();
        while let Some(qi) = self.next_queue() {
            let Some(head) = self.queues[qi].waiting.front() else {
                break;
            };
            if !self.fits(head.seats) {
                break;
            }
            let was = self.queues[qi].active();
            let q = &mut self.queues[qi];
            let Some(w) = q.waiting.pop_front() else {
                break;
            };
            q.waiting_seats -= w.seats;
            q.seats_in_use += w.seats;
            q.executing += 1;
            q.next_dispatch_r += f64::from(w.seats) * ESTIMATED_SERVICE_TIME.as_secs_f64();
            self.waiting -= 1;
            self.waiting_seats -= w.seats;
            self.seats_in_use += w.seats;
            self.executing += 1;
            self.note_activity(qi, was);
            out.push(Dispatched {
                id: w.id,
                payload: w.payload,
                arrived: w.arrived,
                ticket: Ticket {
                    queue: qi,
                    seats: w.seats,
                    generation: self.generation,
                    dispatched_at: now,
                },
            });
        }
        out
    }

    /// A dispatched request finished: its seats are free and its queue's virtual time is
    /// corrected by how long it really took. Call [`dispatch`](Self::dispatch) next.
    pub fn finish(&mut self, ticket: Ticket, now: Instant) {
        self.advance(now);
        self.seats_in_use = self.seats_in_use.saturating_sub(ticket.seats);
        self.executing = self.executing.saturating_sub(1);
        if ticket.generation != self.generation {
            return;
        }
        let Some(q) = self.queues.get(ticket.queue) else {
            return;
        };
        let was = q.active();
        let q = &mut self.queues[ticket.queue];
        q.seats_in_use = q.seats_in_use.saturating_sub(ticket.seats);
        q.executing = q.executing.saturating_sub(1);
        let took = now.saturating_duration_since(ticket.dispatched_at);
        let estimated = ESTIMATED_SERVICE_TIME.as_secs_f64();
        q.next_dispatch_r -= f64::from(ticket.seats) * (estimated - took.as_secs_f64());
        self.note_activity(ticket.queue, was);
    }

    /// Whether a request of `seats` may start now.
    fn fits(&self, seats: u32) -> bool {
        if seats > self.limit {
            // Wider than the whole level: it runs alone.
            return self.executing == 0;
        }
        self.seats_in_use + seats <= self.limit
    }

    /// The shortest queue (in seats) of the flow's hand; the first of equals.
    fn choose_queue(&self, hash: u64) -> usize {
        if self.queues.len() == 1 {
            return 0;
        }
        let mut best = (u32::MAX, 0);
        for qi in self.dealer.deal(hash) {
            let q = &self.queues[qi];
            let len = q.waiting_seats + q.seats_in_use;
            if len < best.0 {
                best = (len, qi);
            }
        }
        best.1
    }

    fn push(&mut self, qi: usize, w: Waiter<T>) {
        let was = self.queues[qi].active();
        let q = &mut self.queues[qi];
        if !was {
            // An idle queue starts at the present, not with credit from its idle time.
            q.next_dispatch_r = self.virtual_time;
        }
        q.waiting_seats += w.seats;
        self.waiting += 1;
        self.waiting_seats += w.seats;
        q.waiting.push_back(w);
        self.note_activity(qi, was);
    }

    /// The queue to dispatch from: the earliest virtual finish of its head (next dispatch time
    /// plus one estimated service time, independent of width so wide requests do not starve
    /// narrow ones), ties broken round-robin from the last queue served.
    fn next_queue(&mut self) -> Option<usize> {
        let n = self.queues.len();
        let mut best: Option<(f64, usize)> = None;
        for step in 1..=n {
            let qi = (self.robin + step) % n;
            let q = &self.queues[qi];
            if q.waiting.is_empty() {
                continue;
            }
            let finish = q.next_dispatch_r + ESTIMATED_SERVICE_TIME.as_secs_f64();
            if best.is_none_or(|(f, _)| finish < f) {
                best = Some((finish, qi));
            }
        }
        let (_, qi) = best?;
        self.robin = qi;
        Some(qi)
    }

    fn note_activity(&mut self, qi: usize, was: bool) {
        match (was, self.queues[qi].active()) {
            (false, true) => self.active_queues += 1,
            (true, false) => self.active_queues = self.active_queues.saturating_sub(1),
            _ => {}
        }
    }

    /// Advances virtual time to `now`.
    fn advance(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last_real).as_secs_f64();
        self.last_real = self.last_real.max(now);
        if self.active_queues == 0 || dt == 0.0 {
            return;
        }
        let requested = f64::from(self.seats_in_use + self.waiting_seats);
        let ratio = requested.min(f64::from(self.limit.max(1))) / f64::from(self.active_queues);
        self.virtual_time += dt * ratio;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::shuffle::flow_hash;

    const QUEUING: Queuing = Queuing {
        queues: 64,
        hand_size: 6,
        queue_length_limit: 50,
    };

    /// Enqueues and dispatches; returns what was dispatched now.
    fn offer(
        qs: &mut QueueSet<&'static str>,
        flow: &'static str,
        seats: u32,
        now: Instant,
    ) -> Vec<Dispatched<&'static str>> {
        qs.enqueue(flow_hash("fs", flow), seats, flow, now)
            .map_err(|(r, _)| r)
            .expect("admitted");
        qs.dispatch(now)
    }

    #[test]
    fn dispatches_at_once_while_seats_are_free_then_queues() {
        let t = Instant::now();
        let mut qs = QueueSet::new(Some(QUEUING), 2, t);
        assert_eq!(offer(&mut qs, "a", 1, t).len(), 1);
        assert_eq!(offer(&mut qs, "a", 1, t).len(), 1);
        assert!(offer(&mut qs, "a", 1, t).is_empty());
        assert_eq!((qs.seats_in_use(), qs.waiting()), (2, 1));
    }

    #[test]
    fn two_flows_are_served_alternately_whatever_their_arrival_order() {
        let mut t = Instant::now();
        let mut qs = QueueSet::new(Some(QUEUING), 1, t);
        let first = offer(&mut qs, "heavy", 1, t);
        let mut running = first[0].ticket;
        // The heavy flow queues 20 requests before the light one queues 5.
        for _ in 0..20 {
            offer(&mut qs, "heavy", 1, t);
        }
        for _ in 0..5 {
            offer(&mut qs, "light", 1, t);
        }
        let mut order = Vec::new();
        for _ in 0..10 {
            t += Duration::from_millis(3);
            qs.finish(running, t);
            let d = qs.dispatch(t);
            assert_eq!(d.len(), 1);
            order.push(d[0].payload);
            running = d[0].ticket;
        }
        let light = order.iter().filter(|f| **f == "light").count();
        // The light flow's 5 requests are all served within the next 10 dispatches.
        assert_eq!(light, 5, "{order:?}");
    }

    #[test]
    fn a_full_queue_rejects_and_reject_levels_never_queue() {
        let t = Instant::now();
        let one_queue = Queuing {
            queues: 1,
            hand_size: 1,
            queue_length_limit: 2,
        };
        let mut qs = QueueSet::new(Some(one_queue), 1, t);
        offer(&mut qs, "a", 1, t);
        offer(&mut qs, "a", 1, t);
        offer(&mut qs, "a", 1, t);
        let r = qs.enqueue(flow_hash("fs", "a"), 1, "a", t);
        assert!(matches!(r, Err((Reject::QueueFull, "a"))));

        let mut reject = QueueSet::new(None, 1, t);
        assert_eq!(offer(&mut reject, "a", 1, t).len(), 1);
        let r = reject.enqueue(flow_hash("fs", "a"), 1, "a", t);
        assert!(matches!(r, Err((Reject::ConcurrencyLimit, _))));
    }

    #[test]
    fn a_wide_request_waits_for_room_and_runs_alone_when_wider_than_the_limit() {
        let t = Instant::now();
        let mut qs = QueueSet::new(Some(QUEUING), 4, t);
        let a = offer(&mut qs, "a", 3, t);
        assert_eq!(a.len(), 1);
        // 2 seats do not fit beside 3 of 4.
        assert!(offer(&mut qs, "b", 2, t).is_empty());
        qs.finish(a[0].ticket, t);
        let b = qs.dispatch(t);
        assert_eq!(b.len(), 1);
        // 10 seats never fit in 4: it waits until nothing executes, then runs alone.
        assert!(offer(&mut qs, "c", 10, t).is_empty());
        qs.finish(b[0].ticket, t);
        let c = qs.dispatch(t);
        assert_eq!(c.len(), 1);
        assert_eq!(qs.seats_in_use(), 10);
        assert!(offer(&mut qs, "d", 1, t).is_empty());
    }

    #[test]
    fn a_cancelled_waiter_leaves_and_a_higher_limit_dispatches_waiters() {
        let t = Instant::now();
        let mut qs = QueueSet::new(Some(QUEUING), 1, t);
        offer(&mut qs, "a", 1, t);
        let b = qs.enqueue(flow_hash("fs", "b"), 1, "b", t).ok().unwrap();
        let c = qs.enqueue(flow_hash("fs", "c"), 1, "c", t).ok().unwrap();
        assert_eq!(qs.cancel(b, t), Some("b"));
        assert_eq!(qs.cancel(b, t), None);
        assert_eq!(qs.waiting(), 1);
        qs.set_limit(3);
        let d = qs.dispatch(t);
        assert_eq!(d.iter().map(|d| d.payload).collect::<Vec<_>>(), vec!["c"]);
        assert_eq!(d[0].id, c.id);
        assert_eq!(qs.cancel(c, t), None);
    }

    #[test]
    fn reconfiguring_keeps_every_waiter() {
        let t = Instant::now();
        let mut qs = QueueSet::new(Some(QUEUING), 1, t);
        for f in ["a", "b", "c", "d"] {
            offer(&mut qs, f, 1, t);
        }
        qs.reconfigure(
            Some(Queuing {
                queues: 8,
                hand_size: 2,
                queue_length_limit: 10,
            }),
            t,
        );
        assert_eq!(qs.waiting(), 3);
        qs.reconfigure(None, t);
        assert_eq!(qs.waiting(), 3);
        qs.set_limit(10);
        assert_eq!(qs.dispatch(t).len(), 3);
    }
}
