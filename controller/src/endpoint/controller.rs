//! The endpoints controller's wiring and sync (see [`super`]).

use std::collections::HashMap;
use std::sync::Arc;

use api::labels::Selector;
use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Api, Client, DeleteParams, FnHandler,
    HandlerRegistration, Lister, RateLimitingQueue, Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{Endpoints, ObjectReference, Service};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::object::desired_endpoints;
use super::subsets::desired_subsets;
use crate::cached_pod::CachedPod;
use crate::endpointutil::pod::{
    is_external_name, pod_service_memberships, service_selector, services_to_update_on_pod_change,
};
use crate::endpointutil::trigger_time::TriggerTimeTracker;
use crate::endpointutil::{is_namespace_terminating, should_retry, ANNOTATION_LEADER};
use crate::{Error, Result};

struct Inner {
    client: Client,
    services: Lister<Service>,
    pods: Lister<CachedPod>,
    endpoints: Lister<Endpoints>,
    queue: RateLimitingQueue<String>,
    triggers: TriggerTimeTracker,
    // Per Endpoints key, the resourceVersion this controller last replaced
    // (`staleEndpointsTracker`): seeing it again in the cache means the cache is behind.
    stale: Mutex<HashMap<String, String>>,
    recorder: EventRecorder,
}

/// The endpoints controller.
pub struct EndpointController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 3],
}

impl EndpointController {
    /// Build on the shared Service, Pod and Endpoints informers.
    pub fn new(
        client: Client,
        services: SharedIndexInformer<Service>,
        pods: SharedIndexInformer<CachedPod>,
        endpoints: SharedIndexInformer<Endpoints>,
        recorder: EventRecorder,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            services: services.lister(),
            pods: pods.lister(),
            endpoints: endpoints.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("endpoint"),
            triggers: TriggerTimeTracker::new(),
            stale: Mutex::new(HashMap::new()),
            recorder,
        });
        let (a, b, c) = (inner.clone(), inner.clone(), inner.clone());
        let service_handler = FnHandler::<Service>::new()
            .on_add(move |s, _| a.queue.add(key_of_meta(&s.metadata)))
            .on_update({
                let i = inner.clone();
                move |_, s| i.queue.add(key_of_meta(&s.metadata))
            })
            .on_delete({
                let i = inner.clone();
                move |d| i.queue.add(key_of_meta(&d.object().metadata))
            });
        let pod_handler = FnHandler::<CachedPod>::new()
            .on_add(move |p, _| b.pod_added(p))
            .on_update({
                let i = inner.clone();
                move |old, new| {
                    for key in services_to_update_on_pod_change(&i.services, old, new) {
                        i.queue.add(key);
                    }
                }
            })
            .on_delete({
                let i = inner.clone();
                move |d| i.pod_added(d.object())
            });
        let endpoints_handler = FnHandler::<Endpoints>::new()
            .on_delete(move |d| c.queue.add(key_of_meta(&d.object().metadata)));
        let registrations = [
            services.add_event_handler(service_handler),
            pods.add_event_handler(pod_handler),
            endpoints.add_event_handler(endpoints_handler),
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

    /// Wait for the caches, queue every existing Endpoints once (`checkLeftoverEndpoints`), then
    /// run `workers` workers until `shutdown` (`--concurrent-endpoint-syncs`, 5).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let [a, b, c] = &self.registrations;
        let synced: [&dyn client::HasSynced; 3] = [a, b, c];
        let inner = self.inner.clone();
        let leftovers = {
            let inner = self.inner.clone();
            let shutdown = shutdown.clone();
            async move {
                if client::wait_for_cache_sync(&synced, &shutdown).await {
                    inner.check_leftover_endpoints();
                }
            }
        };
        let workers = Runner::new("endpoint").workers(workers).run_workers(
            self.inner.queue.clone(),
            &synced,
            &shutdown,
            move |key: String| {
                let inner = inner.clone();
                async move {
                    match inner.sync_service(&key).await {
                        Ok(action) => Ok(action),
                        Err(e) if !should_retry(inner.queue.num_requeues(&key)) => {
                            tracing::info!(%key, error = %e, "dropping service out of the queue");
                            Ok(Action::AwaitChange)
                        }
                        Err(e) => Err::<Action, Error>(e),
                    }
                }
            },
        );
        tokio::join!(workers, leftovers);
    }
}

impl Inner {
    fn pod_added(&self, pod: &CachedPod) {
        for key in pod_service_memberships(&self.services, pod) {
            self.queue.add(key);
        }
    }

    fn check_leftover_endpoints(&self) {
        for ep in self.endpoints.list(&Selector::everything()) {
            let leader = ep
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(ANNOTATION_LEADER));
            if !leader {
                self.queue.add(key_of_meta(&ep.metadata));
            }
        }
    }

    fn forget(&self, key: &str, ns: &str, name: &str) {
        self.triggers.delete_service(ns, name);
        self.stale.lock().remove(key);
    }

    /// `syncService`.
    async fn sync_service(&self, key: &str) -> Result<Action> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(Action::AwaitChange);
        };
        let api: Api<Endpoints> = self.client.api(Some(ns));
        let Some(svc) = self.services.namespace(ns).get(name) else {
            // The Service is gone: so is its Endpoints.
            match api.delete(name, &DeleteParams::default()).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Error::api("delete endpoints", e)),
            }
            self.forget(key, ns, name);
            return Ok(Action::AwaitChange);
        };
        if is_external_name(&svc) {
            return Ok(Action::AwaitChange);
        }
        let Some(selector) = service_selector(&svc) else {
            return Ok(Action::AwaitChange);
        };
        let pods = self.pods.namespace(ns).list(&Selector::from_map(selector));
        let trigger = self.triggers.compute(&svc, &pods);
        let subsets = desired_subsets(&svc, &pods);
        let current = self.endpoints.namespace(ns).get(name);
        if let Some(cur) = &current {
            let stale = self.stale.lock().get(key).cloned();
            if stale.is_some() && stale == cur.metadata.resource_version {
                tracing::debug!(%key, "endpoints informer cache is out of date");
                return Ok(Action::Retry);
            }
        }
        let Some(desired) = desired_endpoints(current.as_deref(), &svc, subsets, trigger) else {
            return Ok(Action::AwaitChange);
        };
        match &current {
            None => match api.create(&desired).await {
                Ok(_) => Ok(Action::AwaitChange),
                Err(e) if is_namespace_terminating(&e) => Ok(Action::AwaitChange),
                Err(e) => {
                    let msg = format!("Failed to create endpoint for service {ns}/{name}: {e}");
                    self.warn(&desired, "FailedToCreateEndpoint", &msg);
                    Err(Error::api("create endpoints", e))
                }
            },
            Some(cur) => match api.replace(name, &desired).await {
                Ok(updated) => {
                    if updated.metadata.resource_version != cur.metadata.resource_version {
                        if let Some(rv) = cur.metadata.resource_version.clone() {
                            self.stale.lock().insert(key.to_string(), rv);
                        }
                    }
                    Ok(Action::AwaitChange)
                }
                Err(e) => {
                    let msg = format!("Failed to update endpoint {ns}/{name}: {e}");
                    self.warn(&desired, "FailedToUpdateEndpoint", &msg);
                    Err(Error::api("update endpoints", e))
                }
            },
        }
    }

    fn warn(&self, ep: &Endpoints, reason: &str, message: &str) {
        let r = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Endpoints".into()),
            namespace: ep.metadata.namespace.clone(),
            name: ep.metadata.name.clone(),
            uid: ep.metadata.uid.clone(),
            resource_version: ep.metadata.resource_version.clone(),
            field_path: None,
        };
        self.recorder.event(&r, EventType::Warning, reason, message);
    }
}
