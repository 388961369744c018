//! The mirroring controller's wiring, sync and writes (see [`super`]).

use std::collections::BTreeMap;
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
use k8s_openapi::api::core::v1::{Endpoints, ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio_util::sync::CancellationToken;

use super::reconciler::{reconcile, Plan};
use super::MANAGED_BY;
use crate::endpointslice::controller::{managed_by, service_key_of_slice};
use crate::endpointutil::pod::service_selector;
use crate::endpointutil::slice_tracker::EndpointSliceTracker;
use crate::endpointutil::{
    is_namespace_terminating, should_retry, ANNOTATION_LEADER, LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME, LABEL_SKIP_MIRROR,
};
use crate::{Error, Result};

struct Inner {
    client: Client,
    endpoints: Lister<Endpoints>,
    slices: Lister<EndpointSlice>,
    services: Lister<Service>,
    queue: RateLimitingQueue<String>,
    tracker: EndpointSliceTracker,
    max_per_subset: usize,
    recorder: EventRecorder,
}

/// The EndpointSlice mirroring controller.
pub struct EndpointSliceMirroringController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 3],
}

/// `shouldMirror`: not labelled to skip mirroring, not a leader-election lock.
pub fn should_mirror(ep: &Endpoints) -> bool {
    let skip = ep
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_SKIP_MIRROR))
        .is_some_and(|v| v == "true");
    let leader = ep
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_LEADER));
    !skip && !leader
}

fn selectorless(s: &Service) -> bool {
    service_selector(s).is_none()
}

impl EndpointSliceMirroringController {
    /// Build on the shared Endpoints, EndpointSlice and Service informers;
    /// `max_per_subset` is `--mirroring-max-endpoints-per-subset`.
    pub fn new(
        client: Client,
        endpoints: SharedIndexInformer<Endpoints>,
        slices: SharedIndexInformer<EndpointSlice>,
        services: SharedIndexInformer<Service>,
        recorder: EventRecorder,
        max_per_subset: usize,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            endpoints: endpoints.lister(),
            slices: slices.lister(),
            services: services.lister(),
            queue: RateLimitingQueue::new(
                "endpoint_slice_mirroring",
                MaxOfRateLimiter::new(vec![
                    Box::new(ItemExponentialFailureRateLimiter::new(
                        Duration::from_secs(1),
                        Duration::from_secs(100),
                    )),
                    Box::new(BucketRateLimiter::new(10.0, 100)),
                ]),
            ),
            tracker: EndpointSliceTracker::new(),
            max_per_subset,
            recorder,
        });
        let i = inner.clone();
        let endpoints_handler = FnHandler::<Endpoints>::new()
            .on_add({
                let i = i.clone();
                move |e, _| {
                    if should_mirror(e) {
                        i.queue.add(key_of_meta(&e.metadata));
                    }
                }
            })
            .on_update({
                let i = i.clone();
                move |old, new| {
                    if should_mirror(old) || should_mirror(new) {
                        i.queue.add(key_of_meta(&new.metadata));
                    }
                }
            })
            .on_delete({
                let i = i.clone();
                move |d| {
                    if should_mirror(d.object()) {
                        i.queue.add(key_of_meta(&d.object().metadata));
                    }
                }
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
        let service_handler = FnHandler::<Service>::new()
            .on_add({
                let i = i.clone();
                move |s, _| {
                    if selectorless(s) {
                        i.queue.add(key_of_meta(&s.metadata));
                    }
                }
            })
            .on_update({
                let i = i.clone();
                move |old, new| {
                    if selectorless(old) != selectorless(new) {
                        i.queue.add(key_of_meta(&new.metadata));
                    }
                }
            })
            .on_delete({
                let i = i.clone();
                move |d| {
                    if selectorless(d.object()) {
                        i.queue.add(key_of_meta(&d.object().metadata));
                    }
                }
            });
        let registrations = [
            endpoints.add_event_handler(endpoints_handler),
            slices.add_event_handler(slice_handler),
            services.add_event_handler(service_handler),
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
    /// (`--mirroring-concurrent-service-endpoint-syncs`, 5).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let [a, b, c] = &self.registrations;
        let synced: [&dyn client::HasSynced; 3] = [a, b, c];
        let inner = self.inner.clone();
        Runner::new("endpoint_slice_mirroring")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        match inner.sync_endpoints(&key).await {
                            Ok(action) => Ok(action),
                            Err(e) if !should_retry(inner.queue.num_requeues(&key)) => {
                                tracing::info!(%key, error = %e, "retry budget exceeded, dropping Endpoints out of the queue");
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
    fn queue_for_slice(&self, slice: &EndpointSlice) {
        if let Some(key) = service_key_of_slice(slice) {
            // `--mirroring-endpointslice-updates-batch-period` defaults to 0.
            self.queue.add(key);
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

    fn mirrored(&self, ns: &str, name: &str) -> Vec<Arc<EndpointSlice>> {
        let sel = Selector::from_map(&BTreeMap::from([
            (LABEL_SERVICE_NAME.to_string(), name.to_string()),
            (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        ]));
        self.slices.namespace(ns).list(&sel)
    }

    /// `deleteMirroredSlices`.
    async fn delete_mirrored(&self, ns: &str, name: &str) -> Result<Action> {
        self.tracker.delete_service(ns, name);
        let api: Api<EndpointSlice> = self.client.api(Some(ns));
        let slices = self.mirrored(ns, name);
        let mut failed = None;
        for s in &slices {
            let n = s.metadata.name.as_deref().unwrap_or_default();
            match api.delete(n, &DeleteParams::default()).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => failed = Some(e),
            }
        }
        match failed {
            Some(e) => Err(Error::api("delete mirrored EndpointSlices", e)),
            None => Ok(Action::AwaitChange),
        }
    }

    /// `syncEndpoints`.
    async fn sync_endpoints(&self, key: &str) -> Result<Action> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(Action::AwaitChange);
        };
        let Some(ep) = self.endpoints.namespace(ns).get(name) else {
            return self.delete_mirrored(ns, name).await;
        };
        if !should_mirror(&ep) {
            return self.delete_mirrored(ns, name).await;
        }
        let Some(svc) = self.services.namespace(ns).get(name) else {
            return self.delete_mirrored(ns, name).await;
        };
        if !selectorless(&svc) {
            return self.delete_mirrored(ns, name).await;
        }
        let cached = self.mirrored(ns, name);
        let existing: Vec<&EndpointSlice> = cached.iter().map(AsRef::as_ref).collect();
        if self.tracker.stale_slices(&svc, &existing) {
            tracing::debug!(%key, "EndpointSlice informer cache is out of date");
            return Ok(Action::Retry);
        }
        let plan = reconcile(&ep, &existing, self.max_per_subset, MANAGED_BY);
        self.report(&ep, &plan);
        self.finalize(&ep, plan).await?;
        Ok(Action::AwaitChange)
    }

    fn report(&self, ep: &Endpoints, plan: &Plan) {
        let r = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Endpoints".into()),
            namespace: ep.metadata.namespace.clone(),
            name: ep.metadata.name.clone(),
            uid: ep.metadata.uid.clone(),
            resource_version: ep.metadata.resource_version.clone(),
            field_path: None,
        };
        if plan.invalid > 0 {
            let msg = format!(
                "Skipped {} invalid IP addresses when mirroring to EndpointSlices",
                plan.invalid
            );
            self.recorder
                .event(&r, EventType::Warning, "InvalidIPAddress", &msg);
        }
        if plan.skipped > plan.invalid {
            let msg = format!(
                "A max of {} addresses can be mirrored to EndpointSlices per Endpoints subset. {} addresses were skipped",
                self.max_per_subset, plan.skipped
            );
            self.recorder
                .event(&r, EventType::Warning, "TooManyAddressesToMirror", &msg);
        }
    }

    /// `finalize`: creates (unless the Endpoints is being deleted), updates, deletes.
    async fn finalize(&self, ep: &Endpoints, plan: Plan) -> Result<()> {
        let ns = ep.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<EndpointSlice> = self.client.api(Some(ns));
        if ep.metadata.deletion_timestamp.is_none() {
            for slice in plan.create {
                match api.create(&slice).await {
                    Ok(created) => self.tracker.update(&created),
                    Err(e) if is_namespace_terminating(&e) => return Ok(()),
                    Err(e) => return Err(Error::api("create mirrored EndpointSlice", e)),
                }
            }
        }
        for slice in plan.update {
            let name = slice.metadata.name.clone().unwrap_or_default();
            match api.replace(&name, &slice).await {
                Ok(updated) => self.tracker.update(&updated),
                Err(e) => return Err(Error::api("update mirrored EndpointSlice", e)),
            }
        }
        for slice in plan.delete {
            let name = slice.metadata.name.clone().unwrap_or_default();
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(()) => self.tracker.expect_deletion(&slice),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Error::api("delete mirrored EndpointSlice", e)),
            }
        }
        Ok(())
    }
}
