//! `Scheduler`: binds each pending pod to a node through `POST pods/{name}/binding`.
//!
//! One scheduling loop decides pods one at a time against a cache of node usage, so two decisions never
//! race for the same capacity; the pod is *assumed* onto the chosen node in that cache at once, and the
//! bind request runs concurrently (at most [`MAX_CONCURRENT_BINDS`] in flight, the loop waits for a
//! slot: bounded). A failed bind forgets the assumption and retries the pod. A pod that fits nowhere gets
//! a `FailedScheduling` event and a `PodScheduled=False` condition, and is retried with per-pod backoff
//! (1 s doubling to 10 s, kube-scheduler's `podInitialBackoff`/`podMaxBackoff`) or at once when a node
//! is added or changes, or a pod is deleted.
//!
//! With [`Scheduler::with_volume_binding`], pods' PersistentVolumeClaims are honoured as upstream's
//! VolumeBinding plugin does (`volumebinding.rs`): PreFilter before the nodes are filtered, its
//! node filter beside the others, and its PreBind (pre-bind volumes, ask for provisioning, wait
//! for the claims to be bound) in a task of its own before the pod's bind takes a bind slot; claim,
//! volume and class changes retry unschedulable pods at once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use api::labels::Selector;
use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Client, DeletedObject, HandlerRegistration,
    HasSynced, Lister, Patch, RateLimitingQueue, ResourceEventHandler, Runner, SharedIndexInformer,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Binding, Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::filter::{allocatable, fit_error_message, FitFailure, NodeUsage};
use super::resources::Resources;
use super::score::{select_node_with, usage_of, Placement};
use super::volumebinding::{ClaimBinding, VolumeBinding};
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::pod_util::phase;

/// Bind requests in flight at once (upstream binds each pod in its own goroutine, unbounded). The
/// apiserver queues what its priority level cannot seat (upstream's 200 mutating seats shared by
/// levels), so the bound only keeps a burst of bindings from queueing behind each other: a write
/// waits for its store commit, and on a durable store concurrent writes share one flush.
pub const MAX_CONCURRENT_BINDS: usize = 64;
/// Pods waiting in PreBind for their claims to bind (each up to the bind timeout) at once: past
/// it, the scheduling loop waits for one to finish before it decides the next pod, so waiting
/// pods cannot grow without bound (upstream runs a goroutine per pod, unbounded).
pub const MAX_CONCURRENT_PRE_BINDS: usize = 64;
/// `podInitialBackoffSeconds` (kube-scheduler default): 1 s.
pub const POD_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// `podMaxBackoffSeconds` (kube-scheduler default): 10 s.
pub const POD_MAX_BACKOFF: Duration = Duration::from_secs(10);
/// The scheduler name this scheduler serves.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

#[derive(Debug, Clone, Copy)]
struct Placed {
    node_idx: usize,
    req: Resources,
    non_zero: Resources,
}

/// A node's [`allocatable`] figures and the resourceVersion they were parsed from: parsed when a
/// node version is first seen, not for every pod (upstream's `NodeInfo.Allocatable`, set in
/// `SetNode`). Parsing them for each of 100 nodes on every attempt was 1.4 % of a scale run's CPU.
#[derive(Debug)]
struct ParsedAllocatable {
    resource_version: String,
    figures: (Resources, i64),
}

/// Node usage from bound and assumed pods, keyed by pod key.
///
/// A slot per node name, by index. A slot whose node is gone (not in the node informer) stays while
/// pods still count on it (they go when the pod garbage collector deletes them) and is then freed
/// for the next new name, as upstream's cache drops a `NodeInfo` once it has neither a node nor
/// pods: nodes that come and go under new names do not grow it. Whether a node exists is asked of
/// the caller (`exists`, the node lister), not kept here.
#[derive(Debug, Default)]
struct Cache {
    slots: Vec<Slot>,
    node_index: HashMap<String, usize>,
    /// Slots no name refers to, to reuse.
    free: Vec<usize>,
    pods: HashMap<String, Placed>,
}

/// What the cache holds of one node.
#[derive(Debug)]
struct Slot {
    name: String,
    usage: NodeUsage,
    allocatable: Option<ParsedAllocatable>,
}

impl Cache {
    fn node_idx(&mut self, node: &str) -> usize {
        if let Some(&i) = self.node_index.get(node) {
            return i;
        }
        let slot = Slot {
            name: node.to_string(),
            usage: NodeUsage::default(),
            allocatable: None,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        self.node_index.insert(node.to_string(), i);
        i
    }

    /// The node `name` was deleted: its slot goes now, or with its last pod.
    fn node_deleted(&mut self, name: &str) {
        if let Some(&i) = self.node_index.get(name) {
            self.free_if_unused(i, &|_| false);
        }
    }

    /// Frees slot `i` if no pod counts on it and its node does not exist.
    fn free_if_unused(&mut self, i: usize, exists: &dyn Fn(&str) -> bool) {
        let slot = &self.slots[i];
        if slot.usage.pods == 0 && !exists(&slot.name) {
            self.node_index.remove(&slot.name);
            self.free.push(i);
        }
    }

    /// The usage of `node` and its allocatable figures, parsed again only when its
    /// resourceVersion differs from the one they were parsed at (always, without one).
    fn node_view(&mut self, node: &Node) -> (NodeUsage, (Resources, i64)) {
        let i = self.node_idx(node.metadata.name.as_deref().unwrap_or_default());
        let slot = &mut self.slots[i];
        let rv = node.metadata.resource_version.as_deref();
        let figures = match (&slot.allocatable, rv) {
            (Some(parsed), Some(rv)) if parsed.resource_version == rv => parsed.figures,
            _ => {
                let figures = allocatable(node);
                slot.allocatable = rv.map(|rv| ParsedAllocatable {
                    resource_version: rv.to_string(),
                    figures,
                });
                figures
            }
        };
        (slot.usage, figures)
    }

    fn add(
        &mut self,
        key: &str,
        node: &str,
        req: Resources,
        non_zero: Resources,
        exists: &dyn Fn(&str) -> bool,
    ) {
        let node_idx = self.node_idx(node);
        if let Some(p) = self.pods.get(key) {
            if p.node_idx == node_idx {
                return;
            }
        }
        self.remove(key, exists);
        let u = &mut self.slots[node_idx].usage;
        u.requested = u.requested.plus(req);
        u.non_zero_requested = u.non_zero_requested.plus(non_zero);
        u.pods += 1;
        self.pods.insert(
            key.to_string(),
            Placed {
                node_idx,
                req,
                non_zero,
            },
        );
    }

    fn remove(&mut self, key: &str, exists: &dyn Fn(&str) -> bool) -> bool {
        let Some(p) = self.pods.remove(key) else {
            return false;
        };
        let u = &mut self.slots[p.node_idx].usage;
        u.requested.sub(p.req);
        u.non_zero_requested.sub(p.non_zero);
        u.pods -= 1;
        self.free_if_unused(p.node_idx, exists);
        true
    }
}

struct Inner {
    client: Client,
    pods: Lister<CachedPod>,
    nodes: Lister<Node>,
    queue: RateLimitingQueue<String>,
    cache: Mutex<Cache>,
    // Pods that fit nowhere, retried at once when the cluster changes; their backoff attempt counts.
    unschedulable: Mutex<HashMap<String, u32>>,
    // Pods assumed and not yet confirmed by the informer (bind in flight).
    assumed: Mutex<HashSet<String>>,
    recorder: EventRecorder,
    clock: Arc<dyn Clock>,
    binds: Arc<Semaphore>,
    /// Slots of pods in PreBind ([`MAX_CONCURRENT_PRE_BINDS`]).
    pre_binds: Arc<Semaphore>,
    scheduled_events: bool,
    // The VolumeBinding plugin, when the scheduler was given the storage informers.
    volume_binding: OnceLock<Arc<VolumeBinding>>,
    // Cancelled when the scheduler stops: ends volume-binding waits.
    stop: CancellationToken,
}

/// The scheduler.
pub struct Scheduler {
    inner: Arc<Inner>,
    registrations: Vec<HandlerRegistration>,
}

fn responsible(pod: &CachedPod) -> bool {
    let spec = pod.spec.as_ref();
    let name = spec.and_then(|s| s.scheduler_name.as_deref()).unwrap_or("");
    (name.is_empty() || name == DEFAULT_SCHEDULER_NAME)
        && spec
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty)
        && pod.metadata.deletion_timestamp.is_none()
        && !matches!(phase(pod), "Succeeded" | "Failed")
}

fn bound_node(pod: &CachedPod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

impl Scheduler {
    /// Build the scheduler on the shared pod and node informers.
    pub fn new(
        client: Client,
        pod_informer: SharedIndexInformer<CachedPod>,
        node_informer: SharedIndexInformer<Node>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
        scheduled_events: bool,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            pods: pod_informer.lister(),
            nodes: node_informer.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("scheduler"),
            cache: Mutex::new(Cache::default()),
            unschedulable: Mutex::new(HashMap::new()),
            assumed: Mutex::new(HashSet::new()),
            recorder,
            clock,
            binds: Arc::new(Semaphore::new(MAX_CONCURRENT_BINDS)),
            pre_binds: Arc::new(Semaphore::new(MAX_CONCURRENT_PRE_BINDS)),
            scheduled_events,
            volume_binding: OnceLock::new(),
            stop: CancellationToken::new(),
        });
        let registrations = vec![
            pod_informer.add_event_handler(PodHandler(inner.clone())),
            node_informer.add_event_handler(NodeHandler(inner.clone())),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// Honour pods' PersistentVolumeClaims (the VolumeBinding plugin) with these informers.
    pub fn with_volume_binding(
        mut self,
        claims: SharedIndexInformer<PersistentVolumeClaim>,
        volumes: SharedIndexInformer<PersistentVolume>,
        classes: SharedIndexInformer<StorageClass>,
    ) -> Self {
        let vb = Arc::new(VolumeBinding::new(
            self.inner.client.clone(),
            claims.lister(),
            volumes.lister(),
            classes.lister(),
        ));
        if self.inner.volume_binding.set(vb).is_ok() {
            self.registrations.extend([
                claims.add_event_handler(StorageHandler(self.inner.clone())),
                volumes.add_event_handler(StorageHandler(self.inner.clone())),
                classes.add_event_handler(StorageHandler(self.inner.clone())),
            ]);
        }
        self
    }

    /// The work queue of pending pods (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then schedule until `shutdown`: one worker (the scheduling loop) on the
    /// [`client::Runner`], then the binds still in flight, within the runner's drain deadline.
    pub async fn run(self, shutdown: CancellationToken) {
        let synced: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        let binds = TaskTracker::new();
        let (inner, tracker) = (self.inner.clone(), binds.clone());
        // kube-scheduler keeps its own per-pod back-off (not the queue's): `schedule_one` settles
        // every key itself, hence `Unchanged`.
        Runner::new("scheduler")
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let (inner, tracker) = (inner.clone(), tracker.clone());
                    async move {
                        inner.schedule_one(&key, &tracker).await;
                        Ok::<_, std::convert::Infallible>(Action::Unchanged)
                    }
                },
            )
            .await;
        self.inner.stop.cancel();
        binds.close();
        if tokio::time::timeout(client::runner::DEFAULT_DRAIN_DEADLINE, binds.wait())
            .await
            .is_err()
        {
            tracing::warn!("binds still in flight at the drain deadline");
        }
    }
}

impl Inner {
    fn move_all_unschedulable(&self) {
        let keys: Vec<String> = self.unschedulable.lock().keys().cloned().collect();
        for k in keys {
            self.queue.add(k);
        }
    }

    fn pod_ref(pod: &CachedPod) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            field_path: None,
        }
    }

    async fn schedule_one(self: &Arc<Self>, key: &str, tracker: &TaskTracker) {
        let pod = match split_meta_namespace_key(key) {
            Ok((ns, name)) => self.pods.namespace(ns).get(name),
            Err(_) => None,
        };
        let Some(pod) = pod else {
            self.unschedulable.lock().remove(key);
            return;
        };
        if !responsible(&pod) || self.assumed.lock().contains(key) {
            return;
        }
        let nodes = self.nodes.list(&Selector::everything());
        let vb = self.volume_binding.get().cloned();
        let vols = match vb.as_ref().map(|vb| vb.pre_filter(&pod)) {
            Some(Err(msg)) => {
                let msg = format!("0/{} nodes are available: {msg}.", nodes.len());
                self.fail(key, &pod, &msg).await;
                return;
            }
            Some(Ok(v)) => Some(v),
            None => None,
        };
        // The VolumeBinding filter: nodes it rejects are reported with its reason.
        let mut volume_failures = Vec::new();
        let mut plans: HashMap<String, Vec<ClaimBinding>> = HashMap::new();
        let feasible: Vec<&Arc<Node>> = nodes
            .iter()
            .filter(|n| {
                let (Some(vb), Some(vols)) = (vb.as_ref(), vols.as_ref()) else {
                    return true;
                };
                match vb.check_node(vols, n) {
                    Ok(plan) => {
                        if !plan.is_empty() {
                            plans.insert(n.metadata.name.clone().unwrap_or_default(), plan);
                        }
                        true
                    }
                    Err(reason) => {
                        volume_failures.push(vec![FitFailure::Volume(reason)]);
                        false
                    }
                }
            })
            .collect();
        let placement = {
            let mut cache = self.cache.lock();
            let views: Vec<_> = feasible
                .iter()
                .map(|n| {
                    let (usage, alloc) = cache.node_view(n);
                    (&***n, usage, alloc)
                })
                .collect();
            drop(cache);
            select_node_with(&pod, views)
        };
        match placement {
            Placement::Node(node) => {
                let (req, nz) = usage_of(&pod);
                self.cache
                    .lock()
                    .add(key, &node, req, nz, &self.node_exists());
                self.assumed.lock().insert(key.to_string());
                self.unschedulable.lock().remove(key);
                self.queue.forget(&key.to_string());
                let plan = plans.remove(&node).unwrap_or_default();
                let this = self.clone();
                let key = key.to_string();
                if let (false, Some(vb)) = (plan.is_empty(), vb) {
                    // PreBind waits for the claims without holding a bind slot, in one of a
                    // bounded number of PreBind slots.
                    let Ok(pre_bind) = self.pre_binds.clone().acquire_owned().await else {
                        return;
                    };
                    tracker.spawn(async move {
                        let bound = vb.bind_volumes(&node, &plan, &this.stop).await;
                        drop(pre_bind);
                        if let Err(e) = bound {
                            this.forget_assumed(&key);
                            let msg = format!("running PreBind plugin \"VolumeBinding\": {e}");
                            this.fail(&key, &pod, &msg).await;
                            return;
                        }
                        let Ok(permit) = this.binds.clone().acquire_owned().await else {
                            return;
                        };
                        this.bind(&key, &pod, &node).await;
                        drop(permit);
                    });
                    return;
                }
                // Bounded: wait for a bind slot before deciding the next pod.
                let Ok(permit) = self.binds.clone().acquire_owned().await else {
                    return;
                };
                tracker.spawn(async move {
                    this.bind(&key, &pod, &node).await;
                    drop(permit);
                });
            }
            Placement::Unschedulable(mut failures) => {
                failures.extend(volume_failures);
                let msg = fit_error_message(nodes.len(), &failures);
                self.fail(key, &pod, &msg).await;
            }
        }
    }

    fn forget_assumed(&self, key: &str) {
        self.assumed.lock().remove(key);
        self.cache.lock().remove(key, &self.node_exists());
    }

    /// The pod fits nowhere (or its PreBind failed): event, condition, retry with back-off.
    async fn fail(&self, key: &str, pod: &CachedPod, msg: &str) {
        tracing::debug!(pod = key, %msg, "unschedulable");
        self.recorder.event(
            &Self::pod_ref(pod),
            EventType::Warning,
            "FailedScheduling",
            msg,
        );
        self.mark_unschedulable(pod, msg).await;
        let attempt = {
            let mut u = self.unschedulable.lock();
            let a = u.entry(key.to_string()).or_insert(0);
            *a = a.saturating_add(1);
            *a
        };
        let backoff = POD_INITIAL_BACKOFF
            .saturating_mul(1u32 << (attempt - 1).min(8))
            .min(POD_MAX_BACKOFF);
        self.queue.add_after(key.to_string(), backoff);
    }

    async fn mark_unschedulable(&self, pod: &CachedPod, msg: &str) {
        let already = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.message.as_deref() == Some(msg)
                })
            });
        if already {
            return;
        }
        let now: Timestamp = self.clock.now();
        let patch = serde_json::json!({"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": msg,
            "lastTransitionTime": now.to_string(),
        }]}});
        let api = self.client.api::<Pod>(pod.metadata.namespace.as_deref());
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if let Err(e) = api.patch_status(name, &Patch::Strategic(patch)).await {
            tracing::debug!(pod = name, error = %e, "could not set PodScheduled=False");
        }
    }

    async fn bind(&self, key: &str, pod: &CachedPod, node: &str) {
        let binding = Binding {
            metadata: ObjectMeta {
                name: pod.metadata.name.clone(),
                namespace: pod.metadata.namespace.clone(),
                uid: pod.metadata.uid.clone(),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.to_string()),
                ..Default::default()
            },
        };
        let api = self.client.api::<Pod>(pod.metadata.namespace.as_deref());
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        match api.create_subresource(name, "binding", &binding).await {
            Ok(_) => {
                tracing::debug!(pod = key, node, "bound");
                if self.scheduled_events {
                    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
                    self.recorder.event(
                        &Self::pod_ref(pod),
                        EventType::Normal,
                        "Scheduled",
                        &format!("Successfully assigned {ns}/{name} to {node}"),
                    );
                }
            }
            Err(e) => {
                self.forget_assumed(key);
                if e.is_not_found() || e.is_conflict() {
                    // Pod gone, or already bound by someone else: the informer will tell.
                    tracing::debug!(pod = key, error = %e, "bind not needed");
                } else {
                    tracing::warn!(pod = key, node, error = %e, "bind failed; retrying");
                    self.queue.add_rate_limited(key.to_string());
                }
            }
        }
    }

    /// Whether a node is in the node informer (the cache frees a slot only for one that is not).
    fn node_exists(&self) -> impl Fn(&str) -> bool + '_ {
        |name| self.nodes.get(name).is_some()
    }

    fn observe_pod(&self, pod: &CachedPod) {
        let key = key_of_meta(&pod.metadata);
        if let Some(node) = bound_node(pod) {
            if matches!(phase(pod), "Succeeded" | "Failed") {
                self.cache.lock().remove(&key, &self.node_exists());
                self.assumed.lock().remove(&key);
                self.move_all_unschedulable();
                return;
            }
            let (req, nz) = usage_of(pod);
            self.cache
                .lock()
                .add(&key, node, req, nz, &self.node_exists());
            self.assumed.lock().remove(&key);
            self.unschedulable.lock().remove(&key);
        } else if responsible(pod) {
            self.queue.add(key);
        }
    }
}

struct PodHandler(Arc<Inner>);

impl ResourceEventHandler<CachedPod> for PodHandler {
    fn on_add(&self, obj: &Arc<CachedPod>, _in_initial_list: bool) {
        self.0.observe_pod(obj);
    }

    fn on_update(&self, _old: &Arc<CachedPod>, new: &Arc<CachedPod>) {
        self.0.observe_pod(new);
    }

    fn on_delete(&self, obj: DeletedObject<CachedPod>) {
        let key = obj.key();
        let freed = self.0.cache.lock().remove(&key, &self.0.node_exists());
        self.0.assumed.lock().remove(&key);
        self.0.unschedulable.lock().remove(&key);
        if freed {
            self.0.move_all_unschedulable();
        }
    }
}

struct NodeHandler(Arc<Inner>);

impl ResourceEventHandler<Node> for NodeHandler {
    fn on_add(&self, _obj: &Arc<Node>, _in_initial_list: bool) {
        self.0.move_all_unschedulable();
    }

    fn on_update(&self, old: &Arc<Node>, new: &Arc<Node>) {
        // Heartbeat-only status updates do not change feasibility.
        let changed = old.spec != new.spec
            || old.metadata.labels != new.metadata.labels
            || old.status.as_ref().map(|s| (&s.allocatable, ready_of(s)))
                != new.status.as_ref().map(|s| (&s.allocatable, ready_of(s)));
        if changed {
            self.0.move_all_unschedulable();
        }
    }

    fn on_delete(&self, obj: DeletedObject<Node>) {
        if let Some(name) = obj.object().metadata.name.as_deref() {
            self.0.cache.lock().node_deleted(name);
        }
    }
}

fn ready_of(s: &k8s_openapi::api::core::v1::NodeStatus) -> Option<&str> {
    s.conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// Claim, volume and class changes: wake volume-binding waits and retry unschedulable pods
/// (upstream's queueing hints for VolumeBinding, coarsened to "something changed").
struct StorageHandler(Arc<Inner>);

impl StorageHandler {
    fn changed(&self) {
        if let Some(vb) = self.0.volume_binding.get() {
            vb.changed.notify_waiters();
        }
        self.0.move_all_unschedulable();
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for StorageHandler {
    fn on_add(&self, _obj: &Arc<K>, _in_initial_list: bool) {
        self.changed();
    }

    fn on_update(&self, _old: &Arc<K>, _new: &Arc<K>) {
        self.changed();
    }

    fn on_delete(&self, _obj: DeletedObject<K>) {
        self.changed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::filter::tests::node;

    #[test]
    fn allocatable_is_parsed_again_only_for_a_new_node_version() {
        let mut cache = Cache::default();
        let mut n = node("a", "4", "8Gi", "110");
        n.metadata.resource_version = Some("5".into());
        let (_, first) = cache.node_view(&n);
        assert_eq!(first, allocatable(&n));
        // The same version is not parsed again: its figures are the ones parsed at "5".
        let mut same = node("a", "1", "1Gi", "1");
        same.metadata.resource_version = Some("5".into());
        assert_eq!(cache.node_view(&same).1, first);
        // A new version is.
        same.metadata.resource_version = Some("6".into());
        assert_eq!(cache.node_view(&same).1, allocatable(&same));
        assert_ne!(allocatable(&same), first);
        // Without a version, always.
        let unversioned = node("a", "2", "2Gi", "2");
        assert_eq!(cache.node_view(&unversioned).1, allocatable(&unversioned));
        // Usage comes with it.
        let (req, _) = allocatable(&same);
        cache.add("ns/p", "a", req, req, &|_| true);
        assert_eq!(cache.node_view(&same).0.pods, 1);
    }

    #[test]
    fn a_deleted_node_is_forgotten_with_its_last_pod_and_its_slot_reused() {
        let mut cache = Cache::default();
        // The node informer's nodes, as the scheduler asks them.
        let mut nodes: std::collections::HashSet<&str> = ["a", "b"].into();
        let n = node("a", "4", "8Gi", "110");
        let (req, _) = allocatable(&n);
        cache.add("ns/p", "a", req, req, &|name| nodes.contains(name));
        cache.add("ns/q", "b", req, req, &|name| nodes.contains(name));
        nodes.remove("a");
        cache.node_deleted("a");
        // Its pod still counts on it until the pod goes.
        assert_eq!(cache.node_view(&n).0.pods, 1);
        cache.remove("ns/p", &|name| nodes.contains(name));
        assert!(!cache.node_index.contains_key("a"));
        assert_eq!(cache.free, vec![0]);
        // A new name takes the freed slot, empty; "b" is untouched.
        nodes.insert("c");
        let c = node("c", "4", "8Gi", "110");
        assert_eq!(cache.node_view(&c).0.pods, 0);
        assert_eq!(cache.node_index.get("c"), Some(&0));
        assert_eq!(cache.slots.len(), 2);
        assert_eq!(cache.node_view(&node("b", "4", "8Gi", "110")).0.pods, 1);
        // A node without pods goes at once; one deleted and added again keeps its slot and usage.
        nodes.remove("c");
        cache.node_deleted("c");
        assert_eq!(cache.free, vec![0]);
        nodes.remove("b");
        cache.node_deleted("b");
        nodes.insert("b");
        assert_eq!(cache.node_view(&node("b", "4", "8Gi", "110")).0.pods, 1);
        cache.remove("ns/q", &|name| nodes.contains(name));
        assert!(
            cache.node_index.contains_key("b"),
            "b came back: not deleted any more"
        );
        // A slot a pod made for a node the informer never had goes with that pod.
        cache.add("ns/r", "ghost", req, req, &|name| nodes.contains(name));
        cache.remove("ns/r", &|name| nodes.contains(name));
        assert!(!cache.node_index.contains_key("ghost"));
    }
}
