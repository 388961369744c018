//! The DaemonSet controller's wiring (see [`super`]): the informers (DaemonSets, ControllerRevisions,
//! pods, nodes), the work queue, the expectations and the failed-pod back-off, and the event
//! handlers that feed the queue (upstream `addDaemonset` … `updateNode`). A sync's steps live in
//! `sync` and `history`.

use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, Action, Client, DeletedObject, HandlerRegistration, Lister, RateLimitingQueue,
    ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::backoff::{FailedPodsBackoff, BACKOFF_GC_INTERVAL};
use super::placement::DaemonPlacement;
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::history::History;
use crate::pod_util::{controller_of, is_pod_ready};
use crate::replication::claim::controller_ref;
use crate::replication::expectations::ControllerExpectations;
use crate::Error;

/// `BurstReplicas`: at most this many creates and deletes per sync.
pub const BURST_REPLICAS: usize = 250;

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) daemonsets: Lister<DaemonSet>,
    pub(super) revisions: Lister<ControllerRevision>,
    // Adoption, release, renumbering and deletion of revisions (upstream's `crControl`).
    pub(super) history: History,
    pub(super) pods: Lister<CachedPod>,
    pub(super) nodes: Lister<Node>,
    pub(super) queue: RateLimitingQueue<String>,
    pub(super) expectations: ControllerExpectations,
    // Per (DaemonSet, generation, node): back-off between replacements of a failed pod. Short
    // critical sections only; never held across an await.
    pub(super) failed_pods_backoff: Mutex<FailedPodsBackoff>,
    pub(super) recorder: EventRecorder,
    pub(super) clock: Arc<dyn Clock>,
}

/// The DaemonSet controller (`daemonset-controller`).
pub struct DaemonSetsController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 4],
}

impl DaemonSetsController {
    /// Build on the shared informers.
    pub fn new(
        client: Client,
        daemonsets: SharedIndexInformer<DaemonSet>,
        revisions: SharedIndexInformer<ControllerRevision>,
        pods: SharedIndexInformer<CachedPod>,
        nodes: SharedIndexInformer<Node>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client: client.clone(),
            daemonsets: daemonsets.lister(),
            revisions: revisions.lister(),
            history: History::new(client.clone(), revisions.lister()),
            pods: pods.lister(),
            nodes: nodes.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("daemonset"),
            expectations: ControllerExpectations::new(clock.clone()),
            failed_pods_backoff: Mutex::new(FailedPodsBackoff::default()),
            recorder,
            clock,
        });
        let registrations = [
            daemonsets.add_event_handler(DaemonSetHandler(inner.clone())),
            revisions.add_event_handler(RevisionHandler(inner.clone())),
            pods.add_event_handler(PodHandler(inner.clone())),
            nodes.add_event_handler(NodeHandler(inner.clone())),
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

    /// Wait for the caches, then run `workers` workers (`--concurrent-daemonset-syncs`, 2) and
    /// the back-off GC until `shutdown`.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let [a, b, c, d] = &self.registrations;
        let synced: [&dyn client::HasSynced; 4] = [a, b, c, d];
        let gc = {
            let (inner, shutdown) = (self.inner.clone(), shutdown.clone());
            async move {
                let mut tick = tokio::time::interval(BACKOFF_GC_INTERVAL);
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tick.tick() => inner.failed_pods_backoff.lock().gc(inner.clock.now()),
                    }
                }
            }
        };
        let inner = self.inner.clone();
        let workers = Runner::new("daemonset").workers(workers).run_workers(
            self.inner.queue.clone(),
            &synced,
            &shutdown,
            move |key: String| {
                let inner = inner.clone();
                async move {
                    inner.sync(&key).await?;
                    Ok::<_, Error>(Action::AwaitChange)
                }
            },
        );
        tokio::join!(workers, gc);
    }
}

pub(super) fn ds_ref(ds: &DaemonSet) -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("DaemonSet".into()),
        namespace: ds.metadata.namespace.clone(),
        name: ds.metadata.name.clone(),
        uid: ds.metadata.uid.clone(),
        resource_version: ds.metadata.resource_version.clone(),
        field_path: None,
    }
}

pub(super) fn owner_ref(ds: &DaemonSet) -> OwnerReference {
    controller_ref(
        "apps/v1",
        "DaemonSet",
        ds.metadata.name.as_deref().unwrap_or_default(),
        ds.metadata.uid.as_deref().unwrap_or_default(),
    )
}

fn selector_of(ds: &DaemonSet) -> Option<Selector> {
    api::labels::label_selector_as_selector(ds.spec.as_ref().map(|s| &s.selector)).ok()
}

impl Inner {
    pub(super) fn event(&self, ds: &DaemonSet, warning: bool, reason: &str, message: &str) {
        let t = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.recorder.event(&ds_ref(ds), t, reason, message);
    }

    pub(super) fn enqueue(&self, ds: &DaemonSet) {
        self.queue.add(key_of_meta(&ds.metadata));
    }

    pub(super) fn enqueue_after(&self, ds: &DaemonSet, after: Duration) {
        self.queue.add_after(key_of_meta(&ds.metadata), after);
    }

    /// `resolveControllerRef`.
    fn resolve(&self, ns: &str, r: &OwnerReference) -> Option<Arc<DaemonSet>> {
        if r.kind != "DaemonSet" {
            return None;
        }
        let ds = self.daemonsets.namespace(ns).get(&r.name)?;
        (ds.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(ds)
    }

    /// DaemonSets whose selector matches an orphan's labels (`GetPodDaemonSets`,
    /// `GetHistoryDaemonSets`).
    fn matching(&self, meta: &ObjectMeta) -> Vec<Arc<DaemonSet>> {
        let Some(labels) = meta.labels.as_ref().filter(|l| !l.is_empty()) else {
            return Vec::new();
        };
        let ns = meta.namespace.as_deref().unwrap_or_default();
        self.daemonsets
            .namespace(ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|ds| selector_of(ds).is_some_and(|s| !s.is_empty() && s.matches(labels)))
            .collect()
    }

    fn pod_added(&self, pod: &CachedPod) {
        if pod.metadata.deletion_timestamp.is_some() {
            // On a restart the pod may show up already being deleted.
            self.pod_deleted(pod);
            return;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(r) = controller_of(&pod.metadata) {
            if let Some(ds) = self.resolve(ns, r) {
                self.expectations
                    .creation_observed(&key_of_meta(&ds.metadata));
                self.enqueue(&ds);
            }
            return;
        }
        for ds in self.matching(&pod.metadata) {
            self.enqueue(&ds);
        }
    }

    fn pod_updated(&self, old: &CachedPod, cur: &CachedPod) {
        if old.metadata.resource_version == cur.metadata.resource_version {
            return;
        }
        if cur.metadata.deletion_timestamp.is_some() {
            self.pod_deleted(cur);
            return;
        }
        let ns = cur.metadata.namespace.as_deref().unwrap_or_default();
        let (old_ref, cur_ref) = (controller_of(&old.metadata), controller_of(&cur.metadata));
        if old_ref != cur_ref {
            if let Some(ds) = old_ref.and_then(|r| self.resolve(ns, r)) {
                self.enqueue(&ds);
            }
        }
        if let Some(r) = cur_ref {
            let Some(ds) = self.resolve(ns, r) else {
                return;
            };
            self.enqueue(&ds);
            let min_ready = ds
                .spec
                .as_ref()
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0);
            if !is_pod_ready(old) && is_pod_ready(cur) && min_ready > 0 {
                // Look again once it may have become available.
                let secs = u64::try_from(min_ready).unwrap_or(0) + 1;
                self.enqueue_after(&ds, Duration::from_secs(secs));
            }
            return;
        }
        if old.metadata.labels != cur.metadata.labels || old_ref != cur_ref {
            for ds in self.matching(&cur.metadata) {
                self.enqueue(&ds);
            }
        }
    }

    fn pod_deleted(&self, pod: &CachedPod) {
        let Some(r) = controller_of(&pod.metadata) else {
            return;
        };
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(ds) = self.resolve(ns, r) {
            self.expectations
                .deletion_observed(&key_of_meta(&ds.metadata));
            self.enqueue(&ds);
        }
    }

    fn revision_changed(&self, old: Option<&ControllerRevision>, cur: &ControllerRevision) {
        let ns = cur.metadata.namespace.as_deref().unwrap_or_default();
        let cur_ref = controller_of(&cur.metadata);
        if let Some(old_ref) = old.and_then(|o| controller_of(&o.metadata)) {
            if Some(old_ref) != cur_ref {
                if let Some(ds) = self.resolve(ns, old_ref) {
                    self.enqueue(&ds);
                }
            }
        }
        if let Some(r) = cur_ref {
            // A new revision of ours was our own doing: only changes wake the DaemonSet.
            if old.is_some() {
                if let Some(ds) = self.resolve(ns, r) {
                    self.enqueue(&ds);
                }
            }
            return;
        }
        let labels_changed = old.is_none_or(|o| o.metadata.labels != cur.metadata.labels);
        if labels_changed || old.is_some_and(|o| controller_of(&o.metadata).is_some()) {
            for ds in self.matching(&cur.metadata) {
                self.enqueue(&ds);
            }
        }
    }

    fn node_added(&self, node: &Node) {
        for ds in self.daemonsets.list(&Selector::everything()) {
            if DaemonPlacement::of(&ds).should_run(node).0 {
                self.enqueue(&ds);
            }
        }
    }

    fn node_updated(&self, old: &Node, cur: &Node) {
        // Placement reads only the name, labels and taints.
        if old.metadata.labels == cur.metadata.labels && old.spec == cur.spec {
            return;
        }
        for ds in self.daemonsets.list(&Selector::everything()) {
            let placement = DaemonPlacement::of(&ds);
            if placement.should_run(old) != placement.should_run(cur) {
                self.enqueue(&ds);
            }
        }
    }
}

struct DaemonSetHandler(Arc<Inner>);

impl ResourceEventHandler<DaemonSet> for DaemonSetHandler {
    fn on_add(&self, obj: &Arc<DaemonSet>, _in_initial_list: bool) {
        self.0.enqueue(obj);
    }

    fn on_update(&self, old: &Arc<DaemonSet>, new: &Arc<DaemonSet>) {
        if old.metadata.uid != new.metadata.uid {
            let key = key_of_meta(&old.metadata);
            self.0.expectations.delete_expectations(&key);
        }
        self.0.enqueue(new);
    }

    fn on_delete(&self, obj: DeletedObject<DaemonSet>) {
        let key = key_of_meta(&obj.object().metadata);
        self.0.expectations.delete_expectations(&key);
        self.0.queue.add(key);
    }
}

struct RevisionHandler(Arc<Inner>);

impl ResourceEventHandler<ControllerRevision> for RevisionHandler {
    fn on_add(&self, obj: &Arc<ControllerRevision>, _in_initial_list: bool) {
        if obj.metadata.deletion_timestamp.is_some() {
            self.on_delete(DeletedObject::Object(obj.clone()));
            return;
        }
        self.0.revision_changed(None, obj);
    }

    fn on_update(&self, old: &Arc<ControllerRevision>, new: &Arc<ControllerRevision>) {
        if old.metadata.resource_version != new.metadata.resource_version {
            self.0.revision_changed(Some(old), new);
        }
    }

    fn on_delete(&self, obj: DeletedObject<ControllerRevision>) {
        let cr = obj.object();
        let ns = cr.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(ds) = controller_of(&cr.metadata).and_then(|r| self.0.resolve(ns, r)) {
            self.0.enqueue(&ds);
        }
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

struct NodeHandler(Arc<Inner>);

impl ResourceEventHandler<Node> for NodeHandler {
    fn on_add(&self, obj: &Arc<Node>, _in_initial_list: bool) {
        self.0.node_added(obj);
    }

    fn on_update(&self, old: &Arc<Node>, new: &Arc<Node>) {
        self.0.node_updated(old, new);
    }

    fn on_delete(&self, _obj: DeletedObject<Node>) {
        // As upstream: pods of a deleted node go with the pod GC; the status counts only
        // existing nodes, and the next sync of each DaemonSet sees that.
        for ds in self.0.daemonsets.list(&Selector::everything()) {
            self.0.enqueue(&ds);
        }
    }
}
