//! One priority level at run time: its [`QueueSet`] behind a lock, the seats it hands out, its
//! seat demand for borrowing, and its Retry-After tracker.
//!
//! A request waits on a one-shot channel; whoever frees seats (a finishing request, a raised
//! limit) dispatches waiting requests under the level's lock and hands each its [`Seat`] after
//! releasing the lock. A [`Seat`] gives its seats back when dropped, wherever it is dropped —
//! also when its waiter has gone (then the channel drops it) — so seats never leak. The lock is
//! held only for queue bookkeeping (no I/O, no await).

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::borrowing::SeatDemand;
use super::config::{LevelSpec, Limits};
use super::queueset::{Dispatched, QueueSet, Queued, Reject, Ticket};
use super::retry::DroppedRequests;
use super::stats::LevelGauges;

type Waiter = oneshot::Sender<Seat>;

struct State {
    /// The configuration in force (a change of anything else leaves the level alone).
    spec: LevelSpec,
    exempt: bool,
    limits: Limits,
    qs: QueueSet<Waiter>,
    demand: SeatDemand,
}

/// A priority level.
pub struct Level {
    pub name: String,
    state: Mutex<State>,
    /// Its limits, for `/metrics`.
    pub gauges: Arc<LevelGauges>,
    /// The Retry-After of its rejections.
    pub dropped: DroppedRequests,
}

impl std::fmt::Debug for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Level")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Seats held by an executing request; given back when dropped.
#[derive(Debug)]
pub struct Seat {
    level: Arc<Level>,
    ticket: Option<Ticket>,
}

impl Seat {
    /// How many seats.
    pub fn seats(&self) -> u32 {
        self.ticket.map_or(0, |t| t.seats)
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.level.finish(t);
        }
    }
}

impl Level {
    /// A level configured by `spec` and `limits`.
    pub fn new(spec: &LevelSpec, limits: Limits, now: Instant) -> Arc<Self> {
        let level = Arc::new(Level {
            name: spec.name.clone(),
            state: Mutex::new(State {
                spec: spec.clone(),
                exempt: spec.exempt,
                limits,
                qs: QueueSet::new(spec.queuing, limits.nominal, now),
                demand: SeatDemand::new(now),
            }),
            gauges: Default::default(),
            dropped: DroppedRequests::default(),
        });
        level.publish(&limits, limits.nominal);
        level
    }

    fn publish(&self, l: &Limits, current: u32) {
        use std::sync::atomic::Ordering::Relaxed;
        self.gauges.nominal.store(i64::from(l.nominal), Relaxed);
        self.gauges.lower.store(i64::from(l.lower), Relaxed);
        self.gauges.upper.store(i64::from(l.upper), Relaxed);
        self.gauges.current.store(i64::from(current), Relaxed);
    }

    /// Applies a changed configuration: new queuing parameters, and the nominal limit as the
    /// current one until the next borrowing adjustment. An unchanged level (another object
    /// changed) keeps its current, borrowed limit.
    pub fn reconfigure(self: &Arc<Self>, spec: &LevelSpec, limits: Limits) {
        let now = Instant::now();
        let dispatched = {
            let mut st = self.state.lock();
            if st.spec == *spec && st.limits == limits {
                return;
            }
            st.spec = spec.clone();
            st.exempt = spec.exempt;
            st.limits = limits;
            st.qs.reconfigure(spec.queuing, now);
            st.qs.set_limit(limits.nominal);
            self.publish(&limits, limits.nominal);
            st.dispatch(now)
        };
        self.deliver(dispatched);
    }

    /// Queues a request of `seats` of the flow `hash`: its id and the channel its [`Seat`]
    /// arrives on (at once if seats are free), or why it is rejected.
    pub fn enqueue(
        self: &Arc<Self>,
        hash: u64,
        seats: u32,
    ) -> Result<(Queued, oneshot::Receiver<Seat>), Reject> {
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let (id, dispatched) = {
            let mut st = self.state.lock();
            let id = match st.qs.enqueue(hash, seats, tx, now) {
                Ok(id) => id,
                Err((reason, _)) => return Err(reason),
            };
            (id, st.dispatch(now))
        };
        self.deliver(dispatched);
        Ok((id, rx))
    }

    /// Withdraws the waiting request `id`; false if it was dispatched meanwhile (its seat is on
    /// its channel).
    pub fn cancel(&self, queued: Queued) -> bool {
        let now = Instant::now();
        let mut st = self.state.lock();
        let removed = st.qs.cancel(queued, now).is_some();
        st.note_demand(now);
        removed
    }

    fn finish(self: &Arc<Self>, ticket: Ticket) {
        let now = Instant::now();
        let dispatched = {
            let mut st = self.state.lock();
            st.qs.finish(ticket, now);
            st.dispatch(now)
        };
        self.deliver(dispatched);
    }

    /// Hands out seats, outside the lock.
    fn deliver(self: &Arc<Self>, dispatched: Vec<Dispatched<Waiter>>) {
        for d in dispatched {
            let seat = Seat {
                level: self.clone(),
                ticket: Some(d.ticket),
            };
            // A waiter that left drops the seat here, which gives it back.
            let _ = d.payload.send(seat);
        }
    }

    /// Ends a borrowing period: the level's smoothed seat demand and its limits.
    pub fn end_period(&self, now: Instant) -> (f64, Limits, bool) {
        let mut st = self.state.lock();
        let smoothed = st.demand.end_period(now);
        (smoothed, st.limits, st.exempt)
    }

    /// Sets the current limit (borrowing) and dispatches what it admits.
    pub fn set_limit(self: &Arc<Self>, limit: u32) {
        let now = Instant::now();
        let dispatched = {
            let mut st = self.state.lock();
            st.qs.set_limit(limit);
            let l = st.limits;
            self.publish(&l, limit);
            st.dispatch(now)
        };
        self.deliver(dispatched);
    }

    /// Active queues, requests waiting and requests executing now (the debug dump).
    pub fn occupancy(&self) -> (u32, u32, u32) {
        let st = self.state.lock();
        (st.qs.active_queues(), st.qs.waiting(), st.qs.executing())
    }

    /// Seats in use, requests waiting and the current limit now (tests).
    pub fn load(&self) -> (u32, u32, u32) {
        let st = self.state.lock();
        (st.qs.seats_in_use(), st.qs.waiting(), st.qs.limit())
    }
}

impl State {
    fn dispatch(&mut self, now: Instant) -> Vec<Dispatched<Waiter>> {
        let d = self.qs.dispatch(now);
        self.note_demand(now);
        d
    }

    fn note_demand(&mut self, now: Instant) {
        let demand = self.qs.seats_in_use() + self.qs.waiting_seats();
        self.demand.set(demand, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::queueset::Queuing;

    fn level(limit: u32) -> Arc<Level> {
        let spec = LevelSpec {
            name: "l".into(),
            uid: String::new(),
            exempt: false,
            shares: 1,
            lendable_percent: 0,
            borrowing_limit_percent: None,
            queuing: Some(Queuing {
                queues: 4,
                hand_size: 2,
                queue_length_limit: 10,
            }),
        };
        let limits = Limits {
            nominal: limit,
            lendable: 0,
            lower: limit,
            upper: limit,
            max_seats: limit,
        };
        Level::new(&spec, limits, Instant::now())
    }

    #[tokio::test]
    async fn a_dropped_seat_dispatches_the_next_waiter_and_an_abandoned_seat_comes_back() {
        let l = level(1);
        let (_, mut first) = l.enqueue(1, 1).map_err(|_| ()).unwrap();
        let seat = first.try_recv().unwrap();
        let (_, mut second) = l.enqueue(2, 1).map_err(|_| ()).unwrap();
        assert!(second.try_recv().is_err());
        let (_, third) = l.enqueue(3, 1).map_err(|_| ()).unwrap();
        drop(seat);
        let second_seat = second.try_recv().unwrap();
        assert_eq!(l.load(), (1, 1, 1));
        // The third waiter leaves; when its seat comes it goes straight back.
        drop(third);
        drop(second_seat);
        assert_eq!(l.load(), (0, 0, 1));
    }

    #[tokio::test]
    async fn cancel_withdraws_only_a_waiting_request() {
        let l = level(1);
        let (a, _seat) = l.enqueue(1, 1).map_err(|_| ()).unwrap();
        let (b, _rx) = l.enqueue(2, 1).map_err(|_| ()).unwrap();
        assert!(!l.cancel(a));
        assert!(l.cancel(b));
        assert_eq!(l.load(), (1, 0, 1));
        l.set_limit(3);
        assert_eq!(l.load(), (1, 0, 3));
    }
}
