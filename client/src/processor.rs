//! The shared processor and its per-handler listeners (client-go `sharedProcessor`,
//! `processorListener`; spec informer.md §4.4–§4.6, §4.8).
//!
//! Guarantees:
//! * Producers never block on a slow handler: each listener owns a growing FIFO buffer (initial
//!   capacity 1024, doubling, as client-go's `buffer.RingGrowing`). This is the one deliberately
//!   unbounded buffer of the crate (spec §4.6): its size is bounded by the number of events the
//!   informer delivers while that handler is slow.
//! * Per handler: notifications are delivered sequentially, in distribution order, by one task.
//!   Across handlers: no ordering.
//! * Sync notifications (resync, unchanged relist) go only to listeners whose resync is due.
//! * A panicking handler does not kill its listener: the item is skipped, logged, and the next
//!   delivery waits 1 s (client-go's behaviour when not configured to crash).
//! * `HandlerRegistration::has_synced` = informer synced ∧ every initial-list add handed to this
//!   handler has returned.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::delta_fifo::DeletedObject;

/// `initialBufferSize` of a processorListener.
pub const INITIAL_BUFFER_SIZE: usize = 1024;
/// `minimumResyncPeriod` of a shared informer.
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Callbacks for cache changes. Objects are shared with the cache: never mutate them.
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool);
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>);
    fn on_delete(&self, obj: DeletedObject<K>);
}

/// A shared handler (e.g. a controller that also owns its work queue) is a handler.
impl<K, H: ResourceEventHandler<K>> ResourceEventHandler<K> for Arc<H> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list)
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        (**self).on_update(old, new)
    }
    fn on_delete(&self, obj: DeletedObject<K>) {
        (**self).on_delete(obj)
    }
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(DeletedObject<K>) + Send + Sync>;

/// A handler built from optional closures (client-go `ResourceEventHandlerDetailedFuncs`).
pub struct FnHandler<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for FnHandler<K> {
    fn default() -> Self {
        FnHandler {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> FnHandler<K> {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn on_add(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    pub fn on_delete(mut self, f: impl Fn(DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for FnHandler<K> {
    fn on_add(&self, obj: &Arc<K>, initial: bool) {
        if let Some(f) = &self.add {
            f(obj, initial)
        }
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new)
        }
    }
    fn on_delete(&self, obj: DeletedObject<K>) {
        if let Some(f) = &self.delete {
            f(obj)
        }
    }
}

/// client-go `FilteringResourceEventHandler`: passes only objects accepted by `filter`; an update
/// crossing the filter becomes an add or a delete.
pub struct FilteringHandler<K, H> {
    pub filter: Box<dyn Fn(&K) -> bool + Send + Sync>,
    pub handler: H,
}

impl<K: Send + Sync + 'static, H: ResourceEventHandler<K>> ResourceEventHandler<K>
    for FilteringHandler<K, H>
{
    fn on_add(&self, obj: &Arc<K>, initial: bool) {
        if (self.filter)(obj) {
            self.handler.on_add(obj, initial)
        }
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.handler.on_update(old, new),
            (false, true) => self.handler.on_add(new, false),
            (true, false) => self.handler.on_delete(DeletedObject::Object(old.clone())),
            (false, false) => {}
        }
    }
    fn on_delete(&self, obj: DeletedObject<K>) {
        if (self.filter)(obj.object()) {
            self.handler.on_delete(obj)
        }
    }
}

/// One queued callback.
pub(crate) enum Notification<K> {
    Add { obj: Arc<K>, initial: bool },
    Update { old: Arc<K>, new: Arc<K> },
    Delete(DeletedObject<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Notification::Add { obj, initial } => Notification::Add {
                obj: obj.clone(),
                initial: *initial,
            },
            Notification::Update { old, new } => Notification::Update {
                old: old.clone(),
                new: new.clone(),
            },
            Notification::Delete(d) => Notification::Delete(d.clone()),
        }
    }
}

struct ResyncState {
    /// What the handler asked for (after the 1 s minimum).
    requested: Duration,
    /// Effective period (0 = never).
    period: Duration,
    next: Instant,
    /// Set by `should_resync` when due: sync notifications reach this listener.
    syncing: bool,
}

pub(crate) struct ProcessorListener<K> {
    id: u64,
    handler: Box<dyn ResourceEventHandler<K>>,
    buf: Mutex<VecDeque<Notification<K>>>,
    notify: Notify,
    stopped: AtomicBool,
    /// Initial-list adds queued but not yet returned from the handler.
    pending_initial: AtomicUsize,
    resync: Mutex<ResyncState>,
}

impl<K: Send + Sync + 'static> ProcessorListener<K> {
    pub(crate) fn add_notification(&self, n: Notification<K>) {
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        if matches!(n, Notification::Add { initial: true, .. }) {
            self.pending_initial.fetch_add(1, Ordering::AcqRel);
        }
        self.buf.lock().push_back(n);
        self.notify.notify_one();
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.notify.notify_one();
    }

    async fn run(self: Arc<Self>) {
        loop {
            let next = self.buf.lock().pop_front();
            let Some(n) = next else {
                if self.stopped.load(Ordering::Acquire) {
                    return;
                }
                self.notify.notified().await;
                continue;
            };
            if self.stopped.load(Ordering::Acquire) {
                return;
            }
            let initial = matches!(n, Notification::Add { initial: true, .. });
            let h = &self.handler;
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| match n {
                Notification::Add { obj, initial } => h.on_add(&obj, initial),
                Notification::Update { old, new } => h.on_update(&old, &new),
                Notification::Delete(d) => h.on_delete(d),
            }));
            if initial {
                self.pending_initial.fetch_sub(1, Ordering::AcqRel);
            }
            if r.is_err() {
                tracing::error!(
                    listener = self.id,
                    "event handler panicked; notification skipped"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Effective period per spec §4.5.
fn effective_period(requested: Duration, check: Duration) -> Duration {
    if requested.is_zero() || check.is_zero() {
        Duration::ZERO
    } else {
        requested.max(check)
    }
}

/// Fans notifications out to listeners.
pub(crate) struct SharedProcessor<K> {
    listeners: Mutex<Vec<Arc<ProcessorListener<K>>>>,
    next_id: AtomicU64,
    started: AtomicBool,
    tasks: TaskTracker,
}

impl<K: Send + Sync + 'static> SharedProcessor<K> {
    pub(crate) fn new() -> Self {
        SharedProcessor {
            listeners: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            started: AtomicBool::new(false),
            tasks: TaskTracker::new(),
        }
    }

    pub(crate) fn add_listener(
        &self,
        handler: Box<dyn ResourceEventHandler<K>>,
        requested: Duration,
        check: Duration,
    ) -> Arc<ProcessorListener<K>> {
        let period = effective_period(requested, check);
        let l = Arc::new(ProcessorListener {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            handler,
            buf: Mutex::new(VecDeque::with_capacity(INITIAL_BUFFER_SIZE)),
            notify: Notify::new(),
            stopped: AtomicBool::new(false),
            pending_initial: AtomicUsize::new(0),
            resync: Mutex::new(ResyncState {
                requested,
                period,
                next: Instant::now() + period,
                syncing: false,
            }),
        });
        let mut ls = self.listeners.lock();
        ls.push(l.clone());
        if self.started.load(Ordering::Acquire) {
            self.tasks.spawn(l.clone().run());
        }
        l
    }

    pub(crate) fn remove_listener(&self, id: u64) -> bool {
        let mut ls = self.listeners.lock();
        let before = ls.len();
        ls.retain(|l| {
            if l.id == id {
                l.stop();
                false
            } else {
                true
            }
        });
        ls.len() != before
    }

    /// Informer check period changed before start: recompute effective periods.
    pub(crate) fn resync_check_period_changed(&self, check: Duration) {
        let now = Instant::now();
        for l in self.listeners.lock().iter() {
            let mut r = l.resync.lock();
            r.period = effective_period(r.requested, check);
            r.next = now + r.period;
        }
    }

    pub(crate) fn distribute(&self, n: Notification<K>, sync: bool) {
        for l in self.listeners.lock().iter() {
            if !sync || l.resync.lock().syncing {
                l.add_notification(n.clone());
            }
        }
    }

    /// Marks listeners whose resync is due; true if any is (then the FIFO queues `Sync` deltas).
    pub(crate) fn should_resync(&self) -> bool {
        let now = Instant::now();
        let mut any = false;
        for l in self.listeners.lock().iter() {
            let mut r = l.resync.lock();
            let due = !r.period.is_zero() && now >= r.next;
            r.syncing = due;
            if due {
                any = true;
                r.next = now + r.period;
            }
        }
        any
    }

    pub(crate) fn run(&self) {
        let ls = self.listeners.lock();
        self.started.store(true, Ordering::Release);
        for l in ls.iter() {
            self.tasks.spawn(l.clone().run());
        }
    }

    /// Stops every listener and waits for their tasks.
    pub(crate) async fn stop(&self) {
        let ls: Vec<_> = std::mem::take(&mut *self.listeners.lock());
        for l in &ls {
            l.stop();
        }
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// Returned by `add_event_handler`: the handler's own sync state and its removal handle.
pub struct HandlerRegistration {
    pub(crate) id: u64,
    pub(crate) pending_initial: Arc<dyn Fn() -> usize + Send + Sync>,
    pub(crate) informer_synced: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl HandlerRegistration {
    pub(crate) fn new<K: Send + Sync + 'static>(
        l: &Arc<ProcessorListener<K>>,
        informer_synced: Arc<dyn Fn() -> bool + Send + Sync>,
    ) -> Self {
        let weak = Arc::downgrade(l);
        HandlerRegistration {
            id: l.id,
            pending_initial: Arc::new(move || {
                weak.upgrade()
                    .map(|l| l.pending_initial.load(Ordering::Acquire))
                    .unwrap_or(0)
            }),
            informer_synced,
        }
    }
    pub fn id(&self) -> u64 {
        self.id
    }
    /// The informer synced and this handler has processed every initial-list object.
    pub fn has_synced(&self) -> bool {
        (self.informer_synced)() && (self.pending_initial)() == 0
    }
}

impl crate::shared_informer::HasSynced for HandlerRegistration {
    fn has_synced(&self) -> bool {
        HandlerRegistration::has_synced(self)
    }
}
