//! Event recording (client-go `tools/record`): recorders hand `core/v1` Events to a broadcaster,
//! which logs them, correlates them ([`correlator`]) and writes them to the apiserver.
//!
//! Guarantees and bounds:
//! * `EventRecorder::event` never blocks and never fails the caller: events go into a channel of
//!   [`MAX_QUEUED_EVENTS`] and are dropped when it is full (client-go `DropIfChannelFull`,
//!   `maxQueuedEvents = 1000`). Drops are counted; the first and every [`DROP_LOG_EVERY`]th are
//!   logged with the total, so a burst (10,000 pods created at once) cannot flood the log.
//! * Writes: a repeat is a PATCH of count/lastTimestamp/message (falling back to a create when the
//!   event is gone), otherwise a POST. An API error (e.g. AlreadyExists, namespace terminating) is
//!   final; a transport error is retried up to [`MAX_TRIES_PER_EVENT`] times, [`RETRY_SLEEP`]
//!   apart (the first retry after a random fraction of it), stopping at shutdown.
//! * Optional write limits, for many recorders in one process (the fake kubelets): a token
//!   bucket per broadcaster ([`EventBroadcaster::with_rate_limit`], the kubelet's
//!   `eventRecordQPS`/`eventBurst` on its event client) and a semaphore shared by several
//!   broadcasters ([`EventBroadcaster::with_write_permits`]) bounding their writes in flight.
//!   Waiting for either never blocks a recorder: the queue in front absorbs it, and drops.
//! * Optional concurrent writes ([`EventBroadcaster::with_concurrent_writes`]): events are still
//!   correlated one at a time, in order, but up to `n` first occurrences are written at once, as
//!   the events.k8s.io broadcaster kube-scheduler uses writes each event on its own goroutine; a
//!   broadcaster of events that cannot be aggregated (one per pod) then drains its queue as fast
//!   as the apiserver takes them instead of one round trip at a time. A repeat (a PATCH of an
//!   event the correlator has named) waits until every write in flight has finished and is
//!   written alone, so it never overtakes the create it patches and counts never go backwards;
//!   `run` returns only after its writes have ended.

pub mod correlator;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rand::Rng;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use correlator::{CorrelationResult, EventCorrelator};

use crate::error::{Error, Result};
use crate::flowcontrol::TokenBucket;
use crate::rest::{Client, Patch};

/// `maxQueuedEvents`.
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// `maxTriesPerEvent`.
pub const MAX_TRIES_PER_EVENT: u32 = 12;
/// `defaultSleepDuration` between write retries.
pub const RETRY_SLEEP: Duration = Duration::from_secs(10);
/// One warning per this many events dropped on a full queue.
pub const DROP_LOG_EVERY: u64 = 1000;

/// `v1.EventTypeNormal` / `v1.EventTypeWarning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(&self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event as it waits in a broadcaster's queue: what the recorder was told and when, made an
/// `Event` when it is taken out ([`Recorded::into_event`]). Queues of 1,000 per fake node fill
/// while a sandbox starts many pods, and a whole `Event` is ~1 KB before its strings; this keeps
/// what the recorder was told and shares the component and host, and the object with the other
/// events recorded about it at once ([`EventRecorder::event_about`]: a kubelet's `Pulled`,
/// `Created` and `Started` name one container). Queued boxed: a channel holds its slots in
/// blocks of 32 allocated for the type.
struct Recorded {
    involved_object: Arc<ObjectReference>,
    type_: EventType,
    reason: String,
    message: String,
    at: Timestamp,
    component: Arc<str>,
    /// Empty: none.
    host: Arc<str>,
}

impl Recorded {
    /// The event client-go's `generateEvent` makes: name `<obj>.<unix-nanos hex>`, in the
    /// object's namespace (`default` for cluster-scoped objects), count 1.
    fn into_event(self) -> Event {
        let Recorded {
            involved_object,
            type_,
            reason,
            message,
            at,
            component,
            host,
        } = self;
        let involved_object = Arc::unwrap_or_clone(involved_object);
        let ns = involved_object
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_string());
        let name = involved_object.name.as_deref().unwrap_or_default();
        let host = (!host.is_empty()).then(|| host.to_string());
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", at.as_nanosecond())),
                namespace: Some(ns),
                ..Default::default()
            },
            involved_object,
            reason: Some(reason),
            message: Some(message),
            first_timestamp: Some(Time(at)),
            last_timestamp: Some(Time(at)),
            count: Some(1),
            type_: Some(type_.as_str().to_string()),
            source: Some(EventSource {
                component: Some(component.to_string()),
                host: host.clone(),
            }),
            reporting_component: Some(component.to_string()),
            reporting_instance: host,
            ..Default::default()
        }
    }
}

/// Records events for one component. Cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Box<Recorded>>,
    component: Arc<str>,
    host: Arc<str>,
    /// Events dropped on a full queue by every recorder of this broadcaster.
    dropped: Arc<AtomicU64>,
}

impl EventRecorder {
    /// Records an event about `obj` (client-go `generateEvent`, made when the broadcaster takes it
    /// from the queue, stamped with the time it was recorded): name `<obj>.<unix-nanos hex>`, in the object's namespace
    /// (`default` for cluster-scoped objects), count 1.
    pub fn event(&self, obj: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        self.event_about(&Arc::new(obj.clone()), type_, reason, message);
    }

    /// [`event`](Self::event), the reference shared with the caller's other events about `obj`
    /// while they wait in the queue.
    pub fn event_about(
        &self,
        obj: &Arc<ObjectReference>,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        tracing::debug!(
            object = %format!(
                "{}/{}",
                obj.namespace.as_deref().unwrap_or(""),
                obj.name.as_deref().unwrap_or("")
            ),
            kind = obj.kind.as_deref().unwrap_or(""),
            r#type = type_.as_str(), reason, message, "event"
        );
        let recorded = Recorded {
            involved_object: Arc::clone(obj),
            type_,
            reason: reason.to_string(),
            message: message.to_string(),
            at: Timestamp::now(),
            component: self.component.clone(),
            host: self.host.clone(),
        };
        match self.tx.try_send(Box::new(recorded)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if n % DROP_LOG_EVERY == 1 {
                    tracing::warn!(dropped_total = n, "event queue full; events dropped");
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::debug!("event broadcaster stopped; event dropped");
            }
        }
    }
}

/// Receives events from recorders and writes them to the apiserver.
pub struct EventBroadcaster {
    client: Client,
    component: String,
    host: String,
    tx: mpsc::Sender<Box<Recorded>>,
    rx: mpsc::Receiver<Box<Recorded>>,
    correlator: EventCorrelator,
    dropped: Arc<AtomicU64>,
    /// Writes (creates and patches, retries included) wait for a token.
    rate_limit: Option<TokenBucket>,
    /// Writes in flight, shared with other broadcasters.
    permits: Option<Arc<Semaphore>>,
    /// Writes of this broadcaster in flight at once (1: one after the other).
    concurrency: usize,
}

impl EventBroadcaster {
    pub fn new(client: Client, component: &str) -> Self {
        let (tx, rx) = mpsc::channel(MAX_QUEUED_EVENTS);
        EventBroadcaster {
            client,
            component: component.to_string(),
            host: std::env::var("HOSTNAME").unwrap_or_default(),
            tx,
            rx,
            correlator: EventCorrelator::new(),
            dropped: Arc::new(AtomicU64::new(0)),
            rate_limit: None,
            permits: None,
            concurrency: 1,
        }
    }

    /// Writes up to `n` events at once (1 to 1,024), each correlated before it is written.
    pub fn with_concurrent_writes(mut self, n: usize) -> Self {
        self.concurrency = n.clamp(1, 1024);
        self
    }

    /// Limits writes to `qps` per second with bursts of `burst` (a client's QPS/burst).
    pub fn with_rate_limit(mut self, qps: f64, burst: u32) -> Self {
        self.rate_limit = (qps > 0.0).then(|| TokenBucket::new(qps, burst));
        self
    }

    /// Each write holds one of `permits` (shared by several broadcasters) while in flight.
    pub fn with_write_permits(mut self, permits: Arc<Semaphore>) -> Self {
        self.permits = Some(permits);
        self
    }

    /// Sets `source.host` of events recorded from now on (default: `$HOSTNAME`).
    pub fn with_host(mut self, host: &str) -> Self {
        self.host = host.to_string();
        self
    }

    /// A recorder for `component` (empty: the broadcaster's component).
    pub fn recorder(&self, component: &str) -> EventRecorder {
        EventRecorder {
            tx: self.tx.clone(),
            component: if component.is_empty() {
                self.component.as_str().into()
            } else {
                component.into()
            },
            host: self.host.as_str().into(),
            dropped: self.dropped.clone(),
        }
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes events until `shutdown` (or until every recorder is dropped).
    pub async fn run(self, shutdown: CancellationToken) {
        let EventBroadcaster {
            client,
            mut rx,
            correlator,
            tx,
            rate_limit,
            permits,
            concurrency,
            ..
        } = self;
        drop(tx);
        let limits = Arc::new(WriteLimits {
            rate_limit,
            permits,
        });
        let correlator = Arc::new(correlator);
        let in_flight = Arc::new(Semaphore::new(concurrency));
        let writes = TaskTracker::new();
        loop {
            let e = tokio::select! {
                _ = shutdown.cancelled() => break,
                e = rx.recv() => e,
            };
            let Some(e) = e else { break };
            let result = correlator.correlate(e.into_event(), Timestamp::now());
            if result.skip {
                tracing::debug!(reason = ?result.event.reason, "event dropped by spam filter");
                continue;
            }
            if concurrency == 1 {
                record_to_sink(&client, &correlator, result, &limits, &shutdown).await;
                continue;
            }
            // A repeat waits for every write in flight (the create it patches among them).
            let wanted = if result.patch.is_some() {
                u32::try_from(concurrency).unwrap_or(u32::MAX)
            } else {
                1
            };
            let permit = tokio::select! {
                _ = shutdown.cancelled() => break,
                p = in_flight.clone().acquire_many_owned(wanted) => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            if wanted > 1 {
                record_to_sink(&client, &correlator, result, &limits, &shutdown).await;
                drop(permit);
                continue;
            }
            let (client, correlator, limits, shutdown) = (
                client.clone(),
                correlator.clone(),
                limits.clone(),
                shutdown.clone(),
            );
            writes.spawn(async move {
                record_to_sink(&client, &correlator, result, &limits, &shutdown).await;
                drop(permit);
            });
        }
        writes.close();
        writes.wait().await;
    }
}

/// What a write waits for before it is sent.
struct WriteLimits {
    rate_limit: Option<TokenBucket>,
    permits: Option<Arc<Semaphore>>,
}

async fn record_to_sink(
    client: &Client,
    correlator: &EventCorrelator,
    result: CorrelationResult,
    limits: &WriteLimits,
    shutdown: &CancellationToken,
) {
    let mut tries = 0u32;
    loop {
        if let Some(bucket) = &limits.rate_limit {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = bucket.acquire() => {}
            }
        }
        let permit = match &limits.permits {
            Some(p) => tokio::select! {
                _ = shutdown.cancelled() => return,
                // Closed (`Err`): nobody limits any more.
                p = p.clone().acquire_owned() => p.ok(),
            },
            None => None,
        };
        let outcome = write_event(client, &result).await;
        // The permit goes back before any retry sleep.
        drop(permit);
        match outcome {
            Ok(written) => {
                correlator.update_state(result.key, &written);
                return;
            }
            Err(e) if e.status().is_some() => {
                tracing::warn!(error = %e, "server rejected event; not retrying");
                return;
            }
            Err(e) => {
                tries += 1;
                if tries >= MAX_TRIES_PER_EVENT {
                    tracing::error!(error = %e, tries, "unable to write event; giving up");
                    return;
                }
                let d = if tries == 1 {
                    RETRY_SLEEP.mul_f64(rand::thread_rng().gen_range(0.0..1.0))
                } else {
                    RETRY_SLEEP
                };
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(d) => {}
                }
            }
        }
    }
}

async fn write_event(client: &Client, r: &CorrelationResult) -> Result<Event> {
    let ns = r.event.metadata.namespace.clone().unwrap_or_default();
    let api = client.api::<Event>(Some(&ns));
    if let (Some(patch), Some(name)) = (&r.patch, r.event.metadata.name.as_deref()) {
        match api.patch(name, &Patch::Strategic(patch.clone())).await {
            Ok(e) => return Ok(e),
            Err(Error::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let mut e = r.event.clone();
    e.metadata.resource_version = None;
    api.create(&e).await
}

#[cfg(test)]
mod tests;
