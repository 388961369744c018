//! The StatefulSet controller's wiring (see [`super`]): informers (StatefulSets, pods,
//! ControllerRevisions, PersistentVolumeClaims), the work queue and the event handlers that
//! feed it (`addPod`, `updatePod`, `deletePod`, `enqueueStatefulSet`). A sync's steps are in
//! `sync`; its requests in `pod_control`.

use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::record::EventRecorder;
use client::{
    key_of_meta, Action, Client, DeletedObject, HandlerRegistration, Lister, RateLimitingQueue,
    ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use tokio_util::sync::CancellationToken;

use super::identity::min_ready_seconds;
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::history::History;
use crate::pod_util::{controller_of, is_pod_ready};
use crate::Error;

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) sets: Lister<StatefulSet>,
    pub(super) pods: Lister<CachedPod>,
    pub(super) claims: Lister<PersistentVolumeClaim>,
    pub(super) history: History,
    pub(super) queue: RateLimitingQueue<String>,
    pub(super) recorder: EventRecorder,
    pub(super) clock: Arc<dyn Clock>,
}

/// The StatefulSet controller.
pub struct StatefulSetController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 4],
}

impl StatefulSetController {
    /// Build on the shared informers.
    pub fn new(
        client: Client,
        sets: SharedIndexInformer<StatefulSet>,
        pods: SharedIndexInformer<CachedPod>,
        revisions: SharedIndexInformer<ControllerRevision>,
        claims: SharedIndexInformer<PersistentVolumeClaim>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Arc::new(Inner {
            history: History::new(client.clone(), revisions.lister()),
            client,
            sets: sets.lister(),
            pods: pods.lister(),
            claims: claims.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("statefulset"),
            recorder,
            clock,
        });
        // Revisions and claims are only read from their caches: no-op handlers give their
        // sync state to the runner.
        let registrations = [
            sets.add_event_handler(SetHandler(inner.clone())),
            pods.add_event_handler(PodHandler(inner.clone())),
            revisions.add_event_handler(client::FnHandler::<ControllerRevision>::new()),
            claims.add_event_handler(client::FnHandler::<PersistentVolumeClaim>::new()),
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
    /// (`--concurrent-statefulset-syncs`, 5).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let [a, b, c, d] = &self.registrations;
        let synced: [&dyn client::HasSynced; 4] = [a, b, c, d];
        let inner = self.inner.clone();
        Runner::new("statefulset")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        Ok::<_, Error>(match inner.sync(&key).await? {
                            Some(after) => Action::RequeueAfter(after),
                            None => Action::AwaitChange,
                        })
                    }
                },
            )
            .await;
    }
}

impl Inner {
    pub(super) fn enqueue(&self, set: &StatefulSet) {
        self.queue.add(key_of_meta(&set.metadata));
    }

    /// `resolveControllerRef`.
    fn resolve(&self, ns: &str, r: &OwnerReference) -> Option<Arc<StatefulSet>> {
        if r.kind != "StatefulSet" {
            return None;
        }
        let set = self.sets.namespace(ns).get(&r.name)?;
        (set.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(set)
    }

    /// `getStatefulSetsForPod`: sets whose selector matches an orphan pod.
    fn matching_sets(&self, pod: &CachedPod) -> Vec<Arc<StatefulSet>> {
        if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
            return Vec::new();
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        self.sets
            .namespace(ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|s| {
                api::labels::label_selector_as_selector(s.spec.as_ref().map(|s| &s.selector))
                    .is_ok_and(|sel| !sel.is_empty() && sel.matches(pod.metadata.labels.as_ref()))
            })
            .collect()
    }

    fn pod_added(&self, pod: &CachedPod) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.pod_deleted(pod);
            return;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(r) = controller_of(&pod.metadata) {
            if let Some(set) = self.resolve(ns, r) {
                self.enqueue(&set);
            }
            return;
        }
        for set in self.matching_sets(pod) {
            self.enqueue(&set);
        }
    }

    fn pod_updated(&self, old: &CachedPod, new: &CachedPod) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        let ns = new.metadata.namespace.as_deref().unwrap_or_default();
        let labels_changed = old.metadata.labels != new.metadata.labels;
        let (old_ref, new_ref) = (controller_of(&old.metadata), controller_of(&new.metadata));
        let ref_changed = old_ref != new_ref;
        if ref_changed {
            if let Some(set) = old_ref.and_then(|r| self.resolve(ns, r)) {
                self.enqueue(&set);
            }
        }
        if let Some(r) = new_ref {
            if let Some(set) = self.resolve(ns, r) {
                self.enqueue(&set);
                // A pod that just became ready is available minReadySeconds later.
                let min_ready = min_ready_seconds(&set);
                if !is_pod_ready(old) && is_pod_ready(new) && min_ready > 0 {
                    let after = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0) + 1);
                    self.queue.add_after(key_of_meta(&set.metadata), after);
                }
            }
            return;
        }
        if labels_changed || ref_changed {
            for set in self.matching_sets(new) {
                self.enqueue(&set);
            }
        }
    }

    fn pod_deleted(&self, pod: &CachedPod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(set) = controller_of(&pod.metadata).and_then(|r| self.resolve(ns, r)) {
            self.enqueue(&set);
        }
    }
}

struct SetHandler(Arc<Inner>);

impl ResourceEventHandler<StatefulSet> for SetHandler {
    fn on_add(&self, obj: &Arc<StatefulSet>, _in_initial_list: bool) {
        self.0.enqueue(obj);
    }

    fn on_update(&self, _old: &Arc<StatefulSet>, new: &Arc<StatefulSet>) {
        self.0.enqueue(new);
    }

    fn on_delete(&self, obj: DeletedObject<StatefulSet>) {
        self.0.enqueue(obj.object());
    }
}

struct PodHandler(Arc<Inner>);

impl ResourceEventHandler<CachedPod> for PodHandler {
    fn on_add(&self, obj: &Arc<CachedPod>, _in_initial_list: bool) {
        self.0.pod_added(obj);
    }

    fn on_update(&self, old: &Arc<CachedPod>, new: &Arc<CachedPod>) {
        self.0.pod_updated(old, new);
    }

    fn on_delete(&self, obj: DeletedObject<CachedPod>) {
        self.0.pod_deleted(obj.object());
    }
}
