//! The EndpointSlice controller's wiring, sync and writes (see [`super`]).

use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::record::{EventRecorder, EventType};
use client::workqueue::rate_limiter::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter,
};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Api, Client, DeleteParams, FnHandler,
    HandlerRegistration, Lister, RateLimitingQueue, Runner, SharedIndexInformer,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

use super::reconciler::{NodeInfo, Plan, Reconciler};
use super::slices::LABEL_ZONE;
use super::MANAGED_BY;
use crate::cached_pod::CachedPod;
use crate::endpointutil::pod::{
    is_external_name, pod_service_memberships, service_selector, services_to_update_on_pod_change,
};
use crate::endpointutil::slice_tracker::EndpointSliceTracker;
use crate::endpointutil::trigger_time::{format_trigger_time, TriggerTimeTracker};
use crate::endpointutil::{
    is_namespace_terminating, should_retry, ANNOTATION_TRIGGER_TIME, LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
};
use crate::{Error, Result};

/// `endpointSliceChangeMinSyncDelay`: slice events are batched this long.
pub const ENDPOINT_SLICE_CHANGE_MIN_SYNC_DELAY: Duration = Duration::from_secs(1);

struct Inner {
    client: Client,
    services: Lister<Service>,
    pods: Lister<CachedPod>,
    nodes: Lister<Node>,
    slices: Lister<EndpointSlice>,
    queue: RateLimitingQueue<String>,
    tracker: EndpointSliceTracker,
    triggers: TriggerTimeTracker,
    reconciler: Reconciler,
    recorder: EventRecorder,
}

/// The EndpointSlice controller.
pub struct EndpointSliceController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 4],
}

/// The queue's rate limiter: max of per-item 1 s → 1000 s and 10 qps / burst 100 overall
/// (`defaultSyncBackOff`, `maxSyncBackOff`).
pub fn service_queue(name: &str) -> RateLimitingQueue<String> {
    RateLimitingQueue::new(
        name,
        MaxOfRateLimiter::new(vec![
            Box::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_secs(1),
                Duration::from_secs(1000),
            )),
            Box::new(BucketRateLimiter::new(10.0, 100)),
        ]),
    )
}

/// `ServiceControllerKey`: the key of the Service a slice belongs to, by its label.
pub fn service_key_of_slice(slice: &EndpointSlice) -> Option<String> {
    let name = slice.metadata.labels.as_ref()?.get(LABEL_SERVICE_NAME)?;
    (!name.is_empty()).then(|| {
        format!(
            "{}/{name}",
            slice.metadata.namespace.as_deref().unwrap_or_default()
        )
    })
}

/// Whether `managed_by` manages the slice.
pub fn managed_by(slice: &EndpointSlice, managed_by: &str) -> bool {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_MANAGED_BY))
        .is_some_and(|v| v == managed_by)
}

impl EndpointSliceController {
    /// Build on the shared informers; `max_endpoints_per_slice` is `--max-endpoints-per-slice`.
    pub fn new(
        client: Client,
        services: SharedIndexInformer<Service>,
        pods: SharedIndexInformer<CachedPod>,
        nodes: SharedIndexInformer<Node>,
        slices: SharedIndexInformer<EndpointSlice>,
        recorder: EventRecorder,
        max_endpoints_per_slice: usize,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            services: services.lister(),
            pods: pods.lister(),
            nodes: nodes.lister(),
            slices: slices.lister(),
            queue: service_queue("endpoint_slice"),
            tracker: EndpointSliceTracker::new(),
            triggers: TriggerTimeTracker::new(),
            reconciler: Reconciler {
                max_endpoints_per_slice,
                managed_by: MANAGED_BY.into(),
            },
            recorder,
        });
        let i = inner.clone();
        let service_handler = FnHandler::<Service>::new()
            .on_add({
                let i = i.clone();
                move |s, _| i.queue.add(key_of_meta(&s.metadata))
            })
            .on_update({
                let i = i.clone();
                move |_, s| i.queue.add(key_of_meta(&s.metadata))
            })
            .on_delete({
                let i = i.clone();
                move |d| i.queue.add(key_of_meta(&d.object().metadata))
            });
        let pod_handler = FnHandler::<CachedPod>::new()
            .on_add({
                let i = i.clone();
                move |p, _| i.pod_added(p)
            })
            .on_update({
                let i = i.clone();
                move |old, new| {
                    for key in services_to_update_on_pod_change(&i.services, old, new) {
                        i.queue.add(key);
                    }
                }
            })
            .on_delete({
                let i = i.clone();
                move |d| i.pod_added(d.object())
            });
        let slice_handler = FnHandler::<EndpointSlice>::new()
            .on_add({
                let i = i.clone();
                move |s, _| {
                    if managed_by(s, MANAGED_BY) && i.tracker.should_sync(s) {
                        i.queue_for_slice(s);
                    }
                }
            })
            .on_update({
                let i = i.clone();
                move |old, new| i.slice_updated(old, new)
            })
            .on_delete({
                let i = i.clone();
                move |d| {
                    let s = d.object();
                    if managed_by(s, MANAGED_BY)
                        && i.tracker.has(s)
                        && !i.tracker.handle_deletion(s)
                    {
                        i.queue_for_slice(s);
                    }
                }
            });
        let registrations = [
            services.add_event_handler(service_handler),
            pods.add_event_handler(pod_handler),
            slices.add_event_handler(slice_handler),
            // Nodes are only read (zones); a no-op handler gives their informer's sync state.
            nodes.add_event_handler(FnHandler::<Node>::new()),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then run `workers` workers until `shutdown`
    /// (`--concurrent-service-endpoint-syncs`, 5).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let [a, b, c, d] = &self.registrations;
        let synced: [&dyn client::HasSynced; 4] = [a, b, c, d];
        let inner = self.inner.clone();
        Runner::new("endpoint_slice")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        match inner.sync_service(&key).await {
                            Ok(action) => Ok(action),
                            Err(e) if !should_retry(inner.queue.num_requeues(&key)) => {
                                tracing::info!(%key, error = %e, "retry budget exceeded, dropping service out of the queue");
                                Ok(Action::AwaitChange)
                            }
                            Err(e) => Err::<Action, Error>(e),
                        }
                    }
                },
            )
            .await;
    }
}

impl Inner {
    fn pod_added(&self, pod: &CachedPod) {
        for key in pod_service_memberships(&self.services, pod) {
            self.queue.add(key);
        }
    }

    fn queue_for_slice(&self, slice: &EndpointSlice) {
        if let Some(key) = service_key_of_slice(slice) {
            self.queue
                .add_after(key, ENDPOINT_SLICE_CHANGE_MIN_SYNC_DELAY);
        }
    }

    fn slice_updated(&self, old: &EndpointSlice, new: &EndpointSlice) {
        let name = |s: &EndpointSlice| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_SERVICE_NAME).cloned())
        };
        if name(old) != name(new) {
            self.queue_for_slice(new);
            self.queue_for_slice(old);
            return;
        }
        let changed_hands = managed_by(old, MANAGED_BY) != managed_by(new, MANAGED_BY);
        if changed_hands || (managed_by(new, MANAGED_BY) && self.tracker.should_sync(new)) {
            self.queue_for_slice(new);
        }
    }

    fn node_info(&self, name: &str) -> NodeInfo {
        match self.nodes.get(name) {
            Some(n) => NodeInfo::Found(
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_ZONE).cloned()),
            ),
            None => NodeInfo::Missing,
        }
    }

    /// `syncService`.
    async fn sync_service(&self, key: &str) -> Result<Action> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(Action::AwaitChange);
        };
        let Some(svc) = self.services.namespace(ns).get(name) else {
            self.triggers.delete_service(ns, name);
            self.tracker.delete_service(ns, name);
            return Ok(Action::AwaitChange);
        };
        if is_external_name(&svc) {
            return Ok(Action::AwaitChange);
        }
        let Some(selector) = service_selector(&svc) else {
            return Ok(Action::AwaitChange);
        };
        let pods = self.pods.namespace(ns).list(&Selector::from_map(selector));
        let slice_selector = Selector::from_map(&BTreeMap::from([
            (LABEL_SERVICE_NAME.to_string(), name.to_string()),
            (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        ]));
        let cached = self.slices.namespace(ns).list(&slice_selector);
        let existing: Vec<&EndpointSlice> = cached
            .iter()
            .map(AsRef::as_ref)
            .filter(|s: &&EndpointSlice| s.metadata.deletion_timestamp.is_none())
            .collect();
        if self.tracker.stale_slices(&svc, &existing) {
            tracing::debug!(%key, "EndpointSlice informer cache is out of date");
            return Ok(Action::Retry);
        }
        let trigger = self.triggers.compute(&svc, &pods);
        let plan = self
            .reconciler
            .reconcile(&svc, &pods, &existing, &|n| self.node_info(n));
        let missing = plan.missing_nodes.clone();
        let written = self.finalize(&svc, plan, trigger).await;
        let failure = match (&written, missing.first()) {
            (Err(e), _) => Some(e.to_string()),
            (Ok(()), Some(first)) => Some(first.clone()),
            (Ok(()), None) => None,
        };
        if let Some(why) = failure {
            let msg = format!("Error updating Endpoint Slices for Service {ns}/{name}: {why}");
            self.recorder.event(
                &service_ref(&svc),
                EventType::Warning,
                "FailedToUpdateEndpointSlices",
                &msg,
            );
        }
        written?;
        if missing.is_empty() || !should_retry(self.queue.num_requeues(&key.to_string())) {
            return Ok(Action::AwaitChange);
        }
        // Pods on a node not yet known were left out: look again later.
        Ok(Action::Retry)
    }

    /// `finalize`'s writes: creates (unless the Service is being deleted), updates, deletes.
    async fn finalize(&self, svc: &Service, plan: Plan, trigger: Option<Timestamp>) -> Result<()> {
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<EndpointSlice> = self.client.api(Some(ns));
        if svc.metadata.deletion_timestamp.is_none() {
            for mut slice in plan.create {
                set_trigger_time(&mut slice, trigger);
                match api.create(&slice).await {
                    Ok(created) => self.tracker.update(&created),
                    Err(e) if is_namespace_terminating(&e) => return Ok(()),
                    Err(e) => return Err(Error::api("create EndpointSlice", e)),
                }
            }
        }
        for mut slice in plan.update {
            set_trigger_time(&mut slice, trigger);
            let name = slice.metadata.name.clone().unwrap_or_default();
            match api.replace(&name, &slice).await {
                Ok(updated) => self.tracker.update(&updated),
                Err(e) => return Err(Error::api("update EndpointSlice", e)),
            }
        }
        for slice in plan.delete {
            let name = slice.metadata.name.clone().unwrap_or_default();
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(()) => self.tracker.expect_deletion(&slice),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Error::api("delete EndpointSlice", e)),
            }
        }
        Ok(())
    }
}

/// `addTriggerTimeAnnotation`.
pub fn set_trigger_time(slice: &mut EndpointSlice, trigger: Option<Timestamp>) {
    let mut a = slice.metadata.annotations.take().unwrap_or_default();
    match trigger {
        Some(t) => a.insert(ANNOTATION_TRIGGER_TIME.into(), format_trigger_time(t)),
        None => a.remove(ANNOTATION_TRIGGER_TIME),
    };
    slice.metadata.annotations = (!a.is_empty()).then_some(a);
}

fn service_ref(svc: &Service) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        namespace: svc.metadata.namespace.clone(),
        name: svc.metadata.name.clone(),
        uid: svc.metadata.uid.clone(),
        resource_version: svc.metadata.resource_version.clone(),
        field_path: None,
    }
}
