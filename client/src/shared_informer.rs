//! SharedIndexInformer: one reflector + DeltaFIFO + indexer feeding any number of handlers
//! (client-go `shared_informer.go`, `controller.go`; spec informer.md §4).
//!
//! Guarantees:
//! * **Cache before handlers**: each delta is applied to the indexer before its notification is
//!   distributed, so a handler (or a worker it wakes) always finds at least that state in the lister.
//! * Deltas are applied by one task, under the FIFO lock and the `block_deltas` mutex; adding a
//!   handler after start takes `block_deltas` too, so the replay of existing objects (all as
//!   `on_add(obj, true)`) and the live stream neither overlap nor leave a gap.
//! * Delta handling (§4.3): Added/Updated/Replaced/Sync → update if the key is cached (`on_update`)
//!   else add (`on_add`); Deleted → remove then `on_delete` (object or tombstone). `Sync` deltas and
//!   `Replaced` deltas of an unchanged resourceVersion are *sync* notifications, delivered only to
//!   handlers whose resync period is due.
//! * `has_synced` is true once the first LIST's items were all popped, applied and distributed.
//! * `run` refuses to run twice; after it returns the informer is stopped and accepts no handlers.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::delta_fifo::{Delta, DeltaFifo, DeltaType, KnownObjects, ReflectorStore};
use crate::error::{Error, Result};
use crate::indexer::{meta_namespace_key, namespace_indexers, Indexer, Indexers};
use crate::list_watch::ListerWatcher;
use crate::lister::Lister;
use crate::processor::{
    HandlerRegistration, Notification, ResourceEventHandler, SharedProcessor, MINIMUM_RESYNC_PERIOD,
};
use crate::reflector::Reflector;
use crate::rest::ListParams;

/// `syncedPollPeriod` (client-go `shared_informer.go`).
pub const SYNCED_POLL_PERIOD: Duration = Duration::from_millis(100);

/// Anything that can report cache sync (informers, handler registrations).
pub trait HasSynced: Send + Sync {
    fn has_synced(&self) -> bool;
}

/// client-go `WaitForCacheSync`: polls every 100 ms (first immediately) until all report synced
/// (true) or `shutdown` fires (false).
pub async fn wait_for_cache_sync(synced: &[&dyn HasSynced], shutdown: &CancellationToken) -> bool {
    loop {
        if synced.iter().all(|s| s.has_synced()) {
            return true;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep(SYNCED_POLL_PERIOD) => {}
        }
    }
}

struct Lifecycle {
    started: bool,
    stopped: bool,
    /// How often the reflector asks `should_resync` (0 = never).
    resync_check_period: Duration,
    default_handler_resync: Duration,
}

struct Inner<K> {
    name: String,
    lw: Arc<dyn ListerWatcher<K>>,
    params: ListParams,
    indexer: Indexer<K>,
    fifo: Arc<DeltaFifo<K>>,
    processor: Arc<SharedProcessor<K>>,
    last_sync_rv: Arc<RwLock<String>>,
    /// Held while deltas are applied and while a late handler is registered + replayed.
    block_deltas: Mutex<()>,
    life: Mutex<Lifecycle>,
}

/// A shared informer for objects of type `K`. Clones share one informer.
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        SharedIndexInformer {
            inner: self.inner.clone(),
        }
    }
}

impl<K> SharedIndexInformer<K>
where
    K: crate::Object + Send + Sync + 'static,
{
    /// An informer with the namespace index; `params` carries label/field selectors.
    pub fn new(lw: impl ListerWatcher<K>, params: ListParams, default_resync: Duration) -> Self {
        Self::with_indexers(Arc::new(lw), params, default_resync, namespace_indexers())
    }

    pub fn with_indexers(
        lw: Arc<dyn ListerWatcher<K>>,
        params: ListParams,
        default_resync: Duration,
        indexers: Indexers<K>,
    ) -> Self {
        let name = std::any::type_name::<K>()
            .rsplit("::")
            .next()
            .unwrap_or("object")
            .to_string();
        Self::named(name, lw, params, default_resync, indexers)
    }

    /// An informer called `name` in logs and spans (a dynamic informer's type name, which every
    /// resource shares, would not say which resource it watches).
    pub fn named(
        name: impl Into<String>,
        lw: Arc<dyn ListerWatcher<K>>,
        params: ListParams,
        default_resync: Duration,
        indexers: Indexers<K>,
    ) -> Self {
        let indexer = Indexer::new(indexers);
        let known: Arc<dyn KnownObjects<K>> = Arc::new(indexer.clone());
        let fifo = Arc::new(DeltaFifo::new(Some(known)));
        SharedIndexInformer {
            inner: Arc::new(Inner {
                name: name.into(),
                lw,
                params,
                indexer,
                fifo,
                processor: Arc::new(SharedProcessor::new()),
                last_sync_rv: Arc::new(RwLock::new(String::new())),
                block_deltas: Mutex::new(()),
                life: Mutex::new(Lifecycle {
                    started: false,
                    stopped: false,
                    resync_check_period: default_resync,
                    default_handler_resync: default_resync,
                }),
            }),
        }
    }

    /// Adds a handler with the informer's default resync period.
    pub fn add_event_handler(&self, h: impl ResourceEventHandler<K>) -> HandlerRegistration {
        let d = self.inner.life.lock().default_handler_resync;
        self.add_event_handler_with_resync(h, d)
    }

    /// Adds a handler with its own resync period (spec §4.5). If the informer already started, the
    /// handler first receives `on_add(obj, true)` for every cached object. On a stopped informer the
    /// handler is never called (logged).
    pub fn add_event_handler_with_resync(
        &self,
        h: impl ResourceEventHandler<K>,
        resync: Duration,
    ) -> HandlerRegistration {
        let inner = &self.inner;
        let _blocked = inner.block_deltas.lock();
        let mut life = inner.life.lock();
        let synced = {
            let fifo = inner.fifo.clone();
            Arc::new(move || fifo.has_synced()) as Arc<dyn Fn() -> bool + Send + Sync>
        };
        if life.stopped {
            tracing::warn!(informer = %inner.name, "handler added to a stopped informer is ignored");
            let l = SharedProcessor::<K>::new().add_listener(
                Box::new(h),
                Duration::ZERO,
                Duration::ZERO,
            );
            return HandlerRegistration::new(&l, synced);
        }
        let mut resync = resync;
        if !resync.is_zero() {
            resync = resync.max(MINIMUM_RESYNC_PERIOD);
            if resync < life.resync_check_period {
                if life.started {
                    tracing::warn!(informer = %inner.name, ?resync, "resync period below the informer's check period; raised");
                    resync = life.resync_check_period;
                } else {
                    life.resync_check_period = resync;
                    inner.processor.resync_check_period_changed(resync);
                }
            }
        }
        let l = inner
            .processor
            .add_listener(Box::new(h), resync, life.resync_check_period);
        if life.started {
            for obj in inner.indexer.list() {
                l.add_notification(Notification::Add { obj, initial: true });
            }
        }
        HandlerRegistration::new(&l, synced)
    }

    /// Sets the transform every object goes through before it is queued and cached (client-go's
    /// `SetTransform`, e.g. to drop what no handler reads, or to shrink what the cache keeps).
    /// Only before the informer starts, and only once: otherwise "informer has already started"
    /// (client-go's error) or "informer transform already set".
    pub fn set_transform(&self, transform: impl Fn(K) -> K + Send + Sync + 'static) -> Result<()>
    where
        K: Clone,
    {
        let life = self.inner.life.lock();
        if life.started || life.stopped {
            return Err(Error::InformerState("has already started"));
        }
        // An object still shared elsewhere (a list page's items are not) is copied first.
        let apply = move |obj: Arc<K>| {
            Arc::new(transform(
                Arc::try_unwrap(obj).unwrap_or_else(|shared| K::clone(&shared)),
            ))
        };
        if self.inner.fifo.set_transform(Arc::new(apply)) {
            Ok(())
        } else {
            Err(Error::InformerState("transform already set"))
        }
    }

    /// Stops delivering to a handler (in-flight callbacks are not awaited).
    pub fn remove_event_handler(&self, reg: &HandlerRegistration) -> bool {
        self.inner.processor.remove_listener(reg.id)
    }

    /// Registers more indexers (also after start; they index the current cache).
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<()> {
        let _blocked = self.inner.block_deltas.lock();
        if self.inner.life.lock().stopped {
            return Err(Error::InformerState("stopped"));
        }
        self.inner.indexer.add_indexers(indexers)
    }

    pub fn indexer(&self) -> Indexer<K> {
        self.inner.indexer.clone()
    }

    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.indexer.clone())
    }

    pub fn has_synced(&self) -> bool {
        self.inner.fifo.has_synced()
    }

    /// RV of the last LIST or watch event the reflector observed.
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.last_sync_rv.read().clone()
    }

    pub fn is_started(&self) -> bool {
        self.inner.life.lock().started
    }

    pub fn is_stopped(&self) -> bool {
        self.inner.life.lock().stopped
    }

    /// Runs reflector and delta processing until `shutdown`; a second call returns immediately.
    pub async fn run(&self, shutdown: CancellationToken) {
        let inner = &self.inner;
        let check = {
            let mut life = inner.life.lock();
            if life.started || life.stopped {
                tracing::warn!(informer = %inner.name, "informer already started; run ignored");
                return;
            }
            life.started = true;
            life.resync_check_period
        };
        inner.processor.run();
        let processor = inner.processor.clone();
        let store: Arc<dyn ReflectorStore<K>> = inner.fifo.clone();
        let reflector = Reflector::new(
            inner.name.clone(),
            inner.lw.clone(),
            store,
            inner.params.clone(),
            check,
        )
        .with_should_resync(Arc::new(move || processor.should_resync()))
        .with_last_sync_rv(inner.last_sync_rv.clone());
        let child = shutdown.child_token();
        let span = tracing::debug_span!("reflector", informer = %inner.name);
        let reflector_task = tokio::spawn({
            let child = child.clone();
            async move { reflector.run(child).await }.instrument(span)
        });
        loop {
            let popped = tokio::select! {
                _ = shutdown.cancelled() => break,
                p = inner.fifo.pop(|deltas, initial| self.handle_deltas(deltas, initial)) => p,
            };
            if popped.is_none() {
                break;
            }
        }
        child.cancel();
        inner.fifo.close();
        inner.life.lock().stopped = true;
        if let Err(e) = reflector_task.await {
            tracing::error!(informer = %inner.name, error = %e, "reflector task failed");
        }
        inner.processor.stop().await;
        tracing::debug!(informer = %inner.name, "informer stopped");
    }

    fn handle_deltas(&self, deltas: Vec<Delta<K>>, initial: bool) {
        let inner = &self.inner;
        let _blocked = inner.block_deltas.lock();
        for d in deltas {
            match d.type_ {
                DeltaType::Sync | DeltaType::Replaced | DeltaType::Added | DeltaType::Updated => {
                    let obj = d.object.object().clone();
                    let key = meta_namespace_key(obj.as_ref());
                    match inner.indexer.update(&key, obj.clone()) {
                        Some(old) => {
                            let same_rv =
                                old.meta().resource_version == obj.meta().resource_version;
                            let sync = match d.type_ {
                                DeltaType::Sync => true,
                                DeltaType::Replaced => same_rv,
                                _ => false,
                            };
                            inner
                                .processor
                                .distribute(Notification::Update { old, new: obj }, sync);
                        }
                        None => inner
                            .processor
                            .distribute(Notification::Add { obj, initial }, false),
                    }
                }
                DeltaType::Deleted => {
                    let key = d.object.key();
                    inner.indexer.delete(&key);
                    inner
                        .processor
                        .distribute(Notification::Delete(d.object), false);
                }
            }
        }
    }
}

impl<K> HasSynced for SharedIndexInformer<K>
where
    K: crate::Object + Send + Sync + 'static,
{
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
}
