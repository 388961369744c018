//! The running fake kubelets: N nodes in one process, sharing everything that can be shared.
//!
//! Shape (cheap enough for 1,000 nodes and 100,000 pods):
//!
//! * **One** pod informer for all namespaces with field selector `spec.nodeName!=`, indexed by
//!   `spec.nodeName`; its handler routes each event to the owning node by name and enqueues the
//!   pod key. **One** node informer (label `minik8s.io/fake-node=true`) gives each node its
//!   current object for status decisions.
//! * **One** rate-limited work queue of pod keys and a **bounded pool** of status writers
//!   (`status_workers`). A writer evaluates the pod ([`crate::pod_status::evaluate`]), writes the
//!   status if it changed (PUT `pods/status` carrying the cached `resourceVersion`, so a concurrent
//!   writer's change is never overwritten: 409 → retry from the fresher cache), sends the final
//!   delete for a terminated deleting pod, and re-adds the key with `add_after` for the next
//!   scheduled change — the queue's delay heap is the timer for every pod. A status that would be
//!   superseded within `status_coalesce_window` (500 ms) is not written at all, the way the
//!   kubelet's 1 s PLEG relist never reports sub-second states: a default pod costs one write.
//! * **One** heartbeat wheel for all nodes ([`crate::heartbeat`]).
//! * **One event recorder per node** (a client-go broadcaster with its own correlator, bounded
//!   queue, `source.host` and the kubelet's `eventRecordQPS`/`eventBurst`), its writes sharing
//!   `event_write_concurrency` permits with every other node's. A writer turns what changed
//!   since its last look at a pod into the kubelet's events ([`crate::events::PodMarks`]) and
//!   hands them over without waiting: a full queue drops, the pod lifecycle never blocks.
//!
//! Nodes can join while running ([`FakeKubelets::add_node`]: the next index, registered and Ready
//! before it returns) and leave ([`FakeKubelets::remove_node`]: it stops and its Node object is
//! deleted; its index is never reused). The node table is behind a lock taken only for lookups
//! and those two calls, never across an await.
//!
//! Stopping a node ([`FakeKubelets::stop_node`]) is a crashed machine: no lease renewals, no node
//! status, its pods are not touched (their status freezes; deletions hang until it comes back or
//! someone force-deletes). Starting it again heartbeats at once and re-syncs all its pods.
//!
//! Shutdown: cancelling the token given to [`FakeKubelets::start`] stops the informers, shuts the
//! queue down (the writers, a [`client::Runner`], sync the pods already queued, within its drain
//! deadline, and exit) and ends the wheel; [`FakeKubelets::join`] waits for all of it.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use client::workqueue::{ItemExponentialFailureRateLimiter, MaxOfRateLimiter};
use client::{
    Action, ApiResource, Client, DeleteParams, DeletedObject, EventRecorder, EventType, Indexers,
    ListParams, Preconditions, RateLimitingQueue, Runner, SharedIndexInformer,
    SharedInformerFactory,
};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::credentials::{node_client, NodeCredentials};
use crate::error::{Error, Result};
use crate::events::{self, PodMarks};
use crate::heartbeat;
use crate::ipam::{Ipam, Reservation};
use crate::kubelet_config::KubeletConfig;
use crate::metrics::{Counters, KubeletMetrics};
use crate::node::{NodeIdentity, FAKE_NODE_LABEL};
use crate::plan::PodPlan;
use crate::pod_status::{
    evaluate, merge_with_previous, rejected_status, since, Evaluation, PodFacts,
};
use crate::recorder::start_recorder;
use crate::transform::{status_digest, KubeletPod};

/// How often a pod that got no IP (its node's CIDR was full) tries again.
const IP_RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// Name of the pod informer's index by `spec.nodeName`.
pub const NODE_NAME_INDEX: &str = "spec.nodeName";

/// The outcome of [`FakeKubelets::stop_node`] / [`FakeKubelets::start_node`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeToggle {
    /// The node changed state.
    Changed,
    /// It already was in the requested state.
    Unchanged,
    /// No simulated node has that name.
    UnknownNode,
}

/// Per-pod node-side state. Small on purpose: everything else is recomputed.
#[derive(Clone, Debug)]
pub(crate) struct PodRuntime {
    uid: String,
    accepted: Timestamp,
    ip: Option<Ipv4Addr>,
    deletion_seen: Option<Timestamp>,
    /// When this node first saw the API show the pod `Succeeded` or `Failed`.
    terminal_seen: Option<Timestamp>,
    /// `(resourceVersion our write produced, digest of the status we wrote)`: lets a writer skip a
    /// status the server normalized differently from ours, without missing others' changes.
    written: Option<(String, u64)>,
    /// Admission rejected the pod (the node was full): the message of its `Failed` status.
    rejection: Option<String>,
    /// The pod reached Succeeded/Failed: it no longer counts against the node's pod capacity.
    terminal: bool,
    /// The pod's address went back to the node's pool when it finished (its sandbox is gone, as
    /// a kubelet's CNI teardown frees it), though its status keeps showing it, as upstream's.
    ip_released: bool,
    /// What the events recorded so far say about its containers.
    marks: PodMarks,
    /// The final delete was answered (done, or nothing of ours left): a sync that runs again
    /// before the informer reports the pod gone does not send it again.
    final_delete_sent: bool,
}

/// One node's pods and addresses, under one lock.
pub(crate) struct NodePods {
    ipam: Ipam,
    pods: HashMap<String, PodRuntime>,
    /// Images this node pulled (for `IfNotPresent`), at most [`MAX_NODE_IMAGES`].
    images: HashSet<String>,
}

/// Bound of a node's image list (a real node's image GC keeps it bounded too).
const MAX_NODE_IMAGES: usize = 1024;

impl NodePods {
    /// Whether a node with `images` has `image`; `pulled`: it now has.
    fn image_present_in(images: &mut HashSet<String>, image: &str, pulled: bool) -> bool {
        if pulled && !images.contains(image) {
            if images.len() >= MAX_NODE_IMAGES {
                if let Some(old) = images.iter().next().cloned() {
                    images.remove(&old);
                }
            }
            images.insert(image.to_string());
        }
        images.contains(image)
    }
}

/// One simulated node.
pub(crate) struct NodeState {
    pub(crate) id: NodeIdentity,
    pub(crate) running: AtomicBool,
    /// Set while a heartbeat runs, so a slow one is never doubled up.
    pub(crate) heartbeat_in_flight: AtomicBool,
    pub(crate) uid: Mutex<Option<String>>,
    /// The last Lease we wrote or read (its resourceVersion makes renewals a cheap PUT).
    pub(crate) lease: Mutex<Option<Lease>>,
    pub(crate) last_report: Mutex<Option<Timestamp>>,
    pods: Mutex<NodePods>,
    /// This node's kubelet's event recorder (`source.component: kubelet`, `source.host`: the
    /// node's name).
    pub(crate) recorder: EventRecorder,
    /// Stops the recorder's broadcaster (when the node is removed).
    events_stop: CancellationToken,
    /// What this node writes with: its own identity when the kubelets have credentials.
    pub(crate) client: Client,
}

impl NodeState {
    fn new(
        id: NodeIdentity,
        recorder: EventRecorder,
        events_stop: CancellationToken,
        client: Client,
    ) -> Self {
        Self {
            client,
            pods: Mutex::new(NodePods {
                ipam: Ipam::new(id.pod_cidr),
                pods: HashMap::new(),
                images: HashSet::new(),
            }),
            recorder,
            events_stop,
            id,
            running: AtomicBool::new(true),
            heartbeat_in_flight: AtomicBool::new(false),
            uid: Mutex::new(None),
            lease: Mutex::new(None),
            last_report: Mutex::new(None),
        }
    }
}

/// State shared by the handlers, writers and the heartbeat wheel.
pub(crate) struct Shared {
    /// The shared informers' reads (each node writes with its own [`NodeState::client`]).
    pub(crate) client: Client,
    /// Makes the client of a node added later.
    credentials: Option<NodeCredentials>,
    pub(crate) cfg: KubeletConfig,
    // Append-only (indices are stable); `by_name` holds the nodes not removed. Whoever holds
    // both takes `by_name` first.
    nodes: RwLock<Vec<Arc<NodeState>>>,
    by_name: RwLock<HashMap<String, usize>>,
    pods: SharedIndexInformer<KubeletPod>,
    pub(crate) node_informer: SharedIndexInformer<Node>,
    queue: RateLimitingQueue<String>,
    pub(crate) counters: Counters,
    /// Event writes in flight, shared by every node's broadcaster.
    event_permits: Arc<Semaphore>,
    /// Runs the nodes' event broadcasters.
    event_tasks: TaskTracker,
    shutdown: CancellationToken,
}

impl Shared {
    fn node_of(&self, pod: &KubeletPod) -> Option<usize> {
        let name = pod.spec.as_ref()?.node_name.as_deref()?;
        self.by_name.read().get(name).copied()
    }

    /// Node `i`, if it exists.
    pub(crate) fn node(&self, i: usize) -> Option<Arc<NodeState>> {
        self.nodes.read().get(i).cloned()
    }

    /// How many node indices exist (removed nodes included).
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.read().len()
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.by_name.read().get(name).copied()
    }

    fn pod_key(pod: &KubeletPod) -> String {
        client::meta_namespace_key(pod)
    }

    fn forget_pod(&self, node: usize, key: &str) {
        let Some(node) = self.node(node) else {
            return;
        };
        let mut np = node.pods.lock();
        if let Some(rt) = np.pods.remove(key) {
            if let Some(ip) = rt.ip.filter(|_| !rt.ip_released) {
                np.ipam.release(ip);
            }
        }
    }
}

/// Drives `work` (the registration of `total` nodes), logging how many are `done` once a second
/// while it runs.
async fn report_progress<T>(
    work: impl std::future::Future<Output = T>,
    total: usize,
    done: &AtomicUsize,
) -> T {
    tokio::pin!(work);
    let started = tokio::time::Instant::now();
    let mut tick =
        tokio::time::interval_at(started + Duration::from_secs(1), Duration::from_secs(1));
    loop {
        tokio::select! {
            out = &mut work => {
                if started.elapsed() >= Duration::from_secs(1) {
                    info!(nodes = total, took_ms = started.elapsed().as_millis() as u64, "nodes registered");
                }
                return out;
            }
            _ = tick.tick() => {
                info!(registered = done.load(Ordering::Relaxed), of = total, "registering nodes");
            }
        }
    }
}

/// The running fake kubelets. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct FakeKubelets {
    shared: Arc<Shared>,
    tasks: TaskTracker,
    factory: Arc<SharedInformerFactory>,
    urgent: mpsc::Sender<usize>,
}

impl FakeKubelets {
    /// Registers the nodes, brings them Ready with fresh Leases, starts the shared informers, the
    /// status writers and the heartbeat wheel, and returns once all of that is running.
    pub async fn start(
        client: Client,
        cfg: KubeletConfig,
        shutdown: CancellationToken,
    ) -> Result<FakeKubelets> {
        Self::start_with_credentials(client, None, cfg, shutdown).await
    }

    /// As [`FakeKubelets::start`], each node writing with the client `credentials` make for it
    /// (its own identity); `client` serves the shared reads.
    pub async fn start_with_credentials(
        client: Client,
        credentials: Option<NodeCredentials>,
        cfg: KubeletConfig,
        shutdown: CancellationToken,
    ) -> Result<FakeKubelets> {
        cfg.validate()?;
        let event_permits = Arc::new(Semaphore::new(cfg.event_write_concurrency));
        let event_tasks = TaskTracker::new();
        let mut nodes = Vec::with_capacity(cfg.nodes);
        let mut by_name = HashMap::with_capacity(cfg.nodes);
        for i in 0..cfg.nodes {
            let id = NodeIdentity::nth(&cfg.name_prefix, cfg.first_index + i, &cfg.node)
                .ok_or_else(|| {
                    Error::InvalidConfig(format!("node {i}: pod CIDR or node IP outside IPv4"))
                })?;
            by_name.insert(id.name.clone(), i);
            let events_stop = shutdown.child_token();
            let node_client = node_client(credentials.as_ref(), &client, &id.name)?;
            let recorder = start_recorder(
                &node_client,
                &cfg,
                &id.name,
                &event_permits,
                &event_tasks,
                &events_stop,
            );
            nodes.push(Arc::new(NodeState::new(
                id,
                recorder,
                events_stop,
                node_client,
            )));
        }

        // The kubelet never reads managedFields: its caches go without them.
        let factory = Arc::new(
            SharedInformerFactory::new(client.clone(), Duration::ZERO).without_managed_fields(),
        );
        // Every pod of every node is cached for its life: only what a kubelet reads of it
        // (`KubeletPod`), each list at its exact length, and of its labels those a lifecycle
        // rule matches on.
        let pods = factory.informer_for_resource::<KubeletPod>(
            &ApiResource::of::<Pod>(),
            ListParams::default().fields("spec.nodeName!="),
        );
        let read_labels = crate::transform::ReadLabels::of(&cfg.lifecycle);
        if let Err(e) = pods.set_transform(move |pod| crate::transform::shrink(pod, &read_labels)) {
            debug!(error = %e, "pod informer already started; its pods are kept as decoded");
        }
        let mut indexers: Indexers<KubeletPod> = Indexers::new();
        indexers.insert(
            NODE_NAME_INDEX.to_string(),
            Arc::new(|p: &KubeletPod| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .into_iter()
                    .collect()
            }),
        );
        if let Err(e) = pods.add_indexers(indexers) {
            // Only possible if the informer was shared and already indexed: harmless.
            debug!(error = %e, "pod informer already has the nodeName index");
        }
        let node_informer = factory
            .informer_for::<Node>(ListParams::default().labels(format!("{FAKE_NODE_LABEL}=true")));
        // Failures are retried per pod with back-off capped at the kubelet's status sync period.
        let limiter =
            MaxOfRateLimiter::new(vec![Box::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(5),
                Duration::from_secs(10),
            ))]);
        let queue = RateLimitingQueue::new("kubelet-fake-pods", limiter);
        let shared = Arc::new(Shared {
            client,
            credentials,
            cfg,
            nodes: RwLock::new(nodes),
            by_name: RwLock::new(by_name),
            pods: pods.clone(),
            node_informer,
            queue,
            counters: Counters::default(),
            event_permits,
            event_tasks,
            shutdown: shutdown.clone(),
        });

        // Register every node and give it its first heartbeat (lease + Ready status); a long
        // registration (thousands of nodes) reports its progress once a second.
        let concurrency = shared.cfg.heartbeat_concurrency;
        let registered = AtomicUsize::new(0);
        let registering = futures::stream::iter(0..shared.node_count())
            .map(|i| {
                let (shared, registered) = (shared.clone(), &registered);
                async move {
                    if let Some(node) = shared.node(i) {
                        node.kubelet_started();
                    }
                    heartbeat::register(&shared, i).await?;
                    heartbeat::heartbeat(&shared, i).await;
                    registered.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
            })
            .buffer_unordered(concurrency)
            .collect::<Vec<Result<()>>>();
        let results = report_progress(registering, shared.node_count(), &registered).await;
        for r in results {
            r?;
        }

        pods.add_event_handler(PodRouter {
            shared: shared.clone(),
        });
        factory.start(shutdown.clone());
        if !factory.wait_for_cache_sync(&shutdown).await {
            return Err(Error::CacheSync);
        }

        let tasks = TaskTracker::new();
        {
            // The caches synced above: the runner has none left to wait for.
            let (queue, workers, shutdown) = (
                shared.queue.clone(),
                shared.cfg.status_workers,
                shutdown.clone(),
            );
            let shared = shared.clone();
            tasks.spawn(async move {
                Runner::new("kubelet")
                    .workers(workers)
                    .run_workers(queue, &[], &shutdown, move |key: String| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(sync_pod(&shared, &key).await) }
                    })
                    .await
            });
        }
        let (urgent_tx, urgent_rx) = mpsc::channel(shared.node_count().max(1));
        tasks.spawn(heartbeat::wheel(
            shared.clone(),
            urgent_rx,
            shutdown.clone(),
        ));
        tasks.close();
        Ok(FakeKubelets {
            shared,
            tasks,
            factory,
            urgent: urgent_tx,
        })
    }

    /// The names of all simulated nodes (removed ones excepted), in index order.
    pub fn node_names(&self) -> Vec<String> {
        let by_name = self.shared.by_name.read();
        self.shared
            .nodes
            .read()
            .iter()
            .map(|n| n.id.name.clone())
            .filter(|n| by_name.contains_key(n))
            .collect()
    }

    /// Whether `name` is a simulated node that is running.
    pub fn is_running(&self, name: &str) -> Option<bool> {
        let node = self.shared.node(self.shared.index_of(name)?)?;
        Some(node.running.load(Ordering::SeqCst))
    }

    /// Adds a node with the next index (its name, pod CIDR and address follow from it, as for
    /// the nodes started with the kubelets), registers it and gives it its first heartbeat, so
    /// it is Ready when this returns. Returns its name.
    pub async fn add_node(&self) -> Result<String> {
        let shared = &self.shared;
        let (i, name) = {
            // Lock order: `by_name`, then `nodes` (as `node_names`), never the reverse.
            let mut by_name = shared.by_name.write();
            let mut nodes = shared.nodes.write();
            let i = nodes.len();
            let id = NodeIdentity::nth(
                &shared.cfg.name_prefix,
                shared.cfg.first_index + i,
                &shared.cfg.node,
            )
            .ok_or_else(|| {
                Error::InvalidConfig(format!("node {i}: pod CIDR or node IP outside IPv4"))
            })?;
            let name = id.name.clone();
            let events_stop = shared.shutdown.child_token();
            let client = node_client(shared.credentials.as_ref(), &shared.client, &name)?;
            let recorder = start_recorder(
                &client,
                &shared.cfg,
                &name,
                &shared.event_permits,
                &shared.event_tasks,
                &events_stop,
            );
            nodes.push(Arc::new(NodeState::new(id, recorder, events_stop, client)));
            by_name.insert(name.clone(), i);
            (i, name)
        };
        if let Some(node) = shared.node(i) {
            node.kubelet_started();
        }
        if let Err(e) = heartbeat::register(shared, i).await {
            shared.by_name.write().remove(&name);
            if let Some(n) = shared.node(i) {
                n.running.store(false, Ordering::SeqCst);
            }
            return Err(e);
        }
        heartbeat::heartbeat(shared, i).await;
        tracing::info!(node = %name, "node added");
        Ok(name)
    }

    /// Removes a node: it stops heartbeating, its Node object is deleted and its name is no
    /// longer served (its pods are left to the pod GC, as when a machine leaves a cluster).
    pub async fn remove_node(&self, name: &str) -> Result<NodeToggle> {
        let Some(i) = self.shared.by_name.write().remove(name) else {
            return Ok(NodeToggle::UnknownNode);
        };
        let client = match self.shared.node(i) {
            Some(n) => {
                n.running.store(false, Ordering::SeqCst);
                // Its index stays (indices never shift); its broadcaster and correlator go.
                n.events_stop.cancel();
                n.client.clone()
            }
            None => self.shared.client.clone(),
        };
        // A kubelet may delete its own Node (NodeRestriction).
        let api = client.api::<Node>(None);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                return Err(Error::RemoveNode {
                    node: name.to_string(),
                    source: Box::new(e),
                })
            }
        }
        tracing::info!(node = name, "node removed");
        Ok(NodeToggle::Changed)
    }

    /// Stops a node as if its machine crashed: no more heartbeats, its pods are left alone.
    pub fn stop_node(&self, name: &str) -> NodeToggle {
        let Some(node) = self.shared.index_of(name).and_then(|i| self.shared.node(i)) else {
            return NodeToggle::UnknownNode;
        };
        if node.running.swap(false, Ordering::SeqCst) {
            tracing::info!(node = name, "node stopped");
            NodeToggle::Changed
        } else {
            NodeToggle::Unchanged
        }
    }

    /// Starts a stopped node: it heartbeats at once and re-syncs every pod bound to it.
    pub fn start_node(&self, name: &str) -> NodeToggle {
        let Some(i) = self.shared.index_of(name) else {
            return NodeToggle::UnknownNode;
        };
        let Some(node) = self.shared.node(i) else {
            return NodeToggle::UnknownNode;
        };
        if node.running.swap(true, Ordering::SeqCst) {
            return NodeToggle::Unchanged;
        }
        tracing::info!(node = name, "node started");
        node.kubelet_started();
        // Full channel: the wheel reaches the node within one renew interval anyway.
        let _ = self.urgent.try_send(i);
        for pod in self.shared.pods.indexer().by_index(NODE_NAME_INDEX, name) {
            self.shared.queue.add(Shared::pod_key(&pod));
        }
        NodeToggle::Changed
    }

    /// A snapshot of the counters and of our pods by phase.
    pub fn metrics(&self) -> KubeletMetrics {
        let mut m = KubeletMetrics::default().with_counters(&self.shared.counters);
        let nodes = self.shared.nodes.read().clone();
        m.nodes = self.shared.by_name.read().len() as u64;
        m.nodes_running = nodes
            .iter()
            .filter(|n| n.running.load(Ordering::Relaxed))
            .count() as u64;
        let indexer = self.shared.pods.indexer();
        for n in &nodes {
            for pod in indexer.by_index(NODE_NAME_INDEX, &n.id.name) {
                m.count_phase(pod.status.as_ref().and_then(|s| s.phase.as_deref()));
            }
        }
        m.queue_depth = self.shared.queue.len() as u64;
        m.event_broadcasters = self.shared.event_tasks.len() as u64;
        m
    }

    /// Waits until everything stopped after the shutdown token was cancelled.
    pub async fn join(&self) {
        self.tasks.wait().await;
        self.shared.event_tasks.close();
        self.shared.event_tasks.wait().await;
        self.factory.shutdown().await;
    }
}

/// Routes pod events to their node's queue entries.
struct PodRouter {
    shared: Arc<Shared>,
}

impl client::ResourceEventHandler<KubeletPod> for PodRouter {
    fn on_add(&self, obj: &Arc<KubeletPod>, _initial: bool) {
        if self.shared.node_of(obj).is_some() {
            self.shared.queue.add(Shared::pod_key(obj));
        }
    }

    fn on_update(&self, _old: &Arc<KubeletPod>, new: &Arc<KubeletPod>) {
        if self.shared.node_of(new).is_some() {
            self.shared.queue.add(Shared::pod_key(new));
        }
    }

    fn on_delete(&self, obj: DeletedObject<KubeletPod>) {
        let pod = match &obj {
            DeletedObject::Object(p) => p.clone(),
            DeletedObject::Tombstone(t) => t.obj.clone(),
        };
        if let Some(node) = self.shared.node_of(&pod) {
            let key = Shared::pod_key(&pod);
            self.shared.forget_pod(node, &key);
            // A worker may hold a timer for it: let it see the pod is gone.
            self.shared.queue.add(key);
        }
    }
}

/// Brings one pod's status up to date and says when to look again (the next scheduled change, or
/// a retry with back-off). See the module docs.
async fn sync_pod(shared: &Shared, key: &str) -> Action {
    let Some(pod) = shared.pods.indexer().get_by_key(key) else {
        return Action::AwaitChange;
    };
    let Some(node) = shared.node_of(&pod).and_then(|i| shared.node(i)) else {
        return Action::AwaitChange;
    };
    let node = &*node;
    if !node.running.load(Ordering::SeqCst) {
        // A crashed machine does nothing; start_node re-enqueues its pods.
        return Action::AwaitChange;
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let now = Timestamp::now();

    let (facts, written, rejection) = {
        let mut np = node.pods.lock();
        let NodePods { ipam, pods, .. } = &mut *np;
        if pods.get(key).is_some_and(|rt| rt.uid != uid) {
            // Same name, new pod: the old one's address goes back.
            if let Some(old) = pods.remove(key) {
                if let Some(ip) = old.ip.filter(|_| !old.ip_released) {
                    ipam.release(ip);
                }
            }
        }
        if !pods.contains_key(key) {
            // Re-check under the node lock: the delete handler (which runs after the cache
            // dropped the pod, and takes this lock) must never be followed by a re-insert.
            let still_cached = shared
                .pods
                .indexer()
                .get_by_key(key)
                .is_some_and(|p| p.metadata.uid == pod.metadata.uid);
            if !still_cached {
                return Action::AwaitChange;
            }
            let capacity = shared.cfg.node.pods as usize;
            let rt = match admit(&pod, pods.values(), capacity) {
                Admission::Admit => adopt(&pod, ipam, now, &shared.counters),
                Admission::Reject(message) => {
                    // A pod an earlier run rejected (already Failed) was recorded then.
                    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                    if phase != Some("Failed") {
                        // `rejectPod`: the event carries the reason without the status' prefix.
                        let m = message
                            .strip_prefix("Pod was rejected: ")
                            .unwrap_or(&message);
                        node.recorder.event(
                            &events::pod_ref(&pod, None),
                            EventType::Warning,
                            OUT_OF_PODS,
                            m,
                        );
                    }
                    PodRuntime {
                        uid: uid.clone(),
                        accepted: now,
                        ip: None,
                        deletion_seen: None,
                        terminal_seen: None,
                        written: None,
                        rejection: Some(message),
                        terminal: true,
                        ip_released: false,
                        marks: PodMarks::default(),
                        final_delete_sent: false,
                    }
                }
            };
            pods.insert(key.to_string(), rt);
        }
        let Some(rt) = pods.get_mut(key) else {
            return Action::AwaitChange;
        };
        if pod.metadata.deletion_timestamp.is_some() && rt.deletion_seen.is_none() {
            rt.deletion_seen = Some(now);
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) && rt.terminal_seen.is_none() {
            rt.terminal_seen = Some(now);
        }
        if rt.ip.is_none() && rt.rejection.is_none() {
            // The CIDR was full when the pod arrived: retry, addresses come back with deletions.
            rt.ip = ipam.allocate();
        }
        (
            PodFacts {
                accepted: rt.accepted,
                pod_ip: rt.ip,
                host_ip: node.id.internal_ip,
                deletion_seen: rt.deletion_seen,
                terminal_seen: rt.terminal_seen,
            },
            rt.written.clone(),
            rt.rejection.clone(),
        )
    };

    let rejection_free = rejection.is_none();
    let mut pod_events = Vec::new();
    let eval = match rejection {
        Some(message) => Evaluation {
            status: rejected_status(OUT_OF_PODS, &message),
            next_change: None,
            delete_now: false,
        },
        None => {
            let plan = PodPlan::resolve(&shared.cfg.lifecycle, &pod);
            let mut eval = evaluate(&pod, &plan, &facts, now);
            merge_with_previous(&mut eval.status, pod.status.as_ref());
            let terminal = matches!(
                eval.status.phase.as_deref(),
                Some("Succeeded") | Some("Failed")
            );
            let mut np = node.pods.lock();
            let NodePods { ipam, pods, images } = &mut *np;
            if let Some(rt) = pods.get_mut(key) {
                let mut present =
                    |image: &str, pulled: bool| NodePods::image_present_in(images, image, pulled);
                // Its containers are stopped for a deletion or a terminal phase the API shows.
                let stopping = facts.deletion_seen.is_some() || facts.terminal_seen.is_some();
                pod_events = rt.marks.advance(&pod, &eval.status, stopping, &mut present);
                rt.terminal = terminal;
                // A finished pod's address is free for the next pod (a Job's pods finish by the
                // thousand; holding their addresses exhausted a node's /24).
                if terminal && !rt.ip_released {
                    if let Some(ip) = rt.ip {
                        ipam.release(ip);
                    }
                    rt.ip_released = true;
                }
            }
            eval
        }
    };
    node.record_pod_events(&pod, pod_events);
    let next = match eval.next_change {
        Some(t) => Some(since(t, now) + Duration::from_millis(1)),
        // Waiting for an address: look again later.
        None if facts.pod_ip.is_none() && rejection_free => Some(IP_RETRY_INTERVAL),
        None => None,
    };

    // The digest of a changed status (only a changed one is written).
    let d = status_digest(&eval.status);
    let changed = (pod.status.as_ref().map(|s| s.digest) != Some(d)).then_some(d);
    let already_written = |d: u64| {
        written.as_ref().is_some_and(|(rv, dg)| {
            *dg == d && pod.metadata.resource_version.as_deref() == Some(rv.as_str())
        })
    };
    let (name, ns) = (
        pod.metadata.name.clone().unwrap_or_default(),
        pod.metadata.namespace.clone().unwrap_or_default(),
    );
    let api = node.client.api::<Pod>(Some(&ns));
    // Coalescing: a status about to be superseded is skipped (never the terminal one).
    let fleeting = !eval.delete_now && next.is_some_and(|d| d < shared.cfg.status_coalesce_window);
    if let Some(d) = changed.filter(|d| !already_written(*d) && !fleeting) {
        match api
            .replace_status_metadata(&name, &status_body(&pod, &eval.status))
            .await
        {
            Ok(stored) => {
                Counters::inc(&shared.counters.status_writes);
                let mut np = node.pods.lock();
                if let Some(rt) = np.pods.get_mut(key).filter(|rt| rt.uid == uid) {
                    rt.written = stored.resource_version.map(|rv| (rv, d));
                }
            }
            Err(e) if e.is_conflict() => {
                // Our cache is behind; the informer brings the fresher pod and re-adds the key.
                Counters::inc(&shared.counters.status_write_conflicts);
                return Action::Retry;
            }
            Err(e) if e.is_not_found() => return Action::AwaitChange,
            Err(e) => {
                Counters::inc(&shared.counters.status_write_errors);
                warn!(pod = key, error = %e, "pod status write failed");
                return Action::Retry;
            }
        }
    }

    if eval.delete_now {
        let ours = |rt: &&mut PodRuntime| rt.uid == uid;
        let mark_sent = || {
            if let Some(rt) = node.pods.lock().pods.get_mut(key).filter(ours) {
                rt.final_delete_sent = true;
            }
        };
        let sent = node
            .pods
            .lock()
            .pods
            .get_mut(key)
            .filter(ours)
            .is_some_and(|rt| rt.final_delete_sent);
        if sent {
            return Action::AwaitChange;
        }
        let opts = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&name, &opts).await {
            Ok(()) => {
                Counters::inc(&shared.counters.pod_deletes);
                mark_sent();
            }
            // Gone already, or a new pod took the name: nothing of ours left to delete.
            Err(e) if e.is_not_found() || e.is_conflict() => mark_sent(),
            Err(e) => {
                Counters::inc(&shared.counters.pod_delete_errors);
                warn!(pod = key, error = %e, "final pod delete failed");
                return Action::Retry;
            }
        }
        return Action::AwaitChange;
    }
    next.map_or(Action::AwaitChange, Action::RequeueAfter)
}

/// The body of a status write: the pod's identity, the `resourceVersion` it was computed from
/// (a concurrent change is a 409, never overwritten) and the new status. Everything else of a
/// `/status` PUT comes from the stored pod (the status strategy keeps its spec and metadata), so
/// the spec and labels are not sent: upstream's kubelet sends only the status too, as a patch.
fn status_body(pod: &KubeletPod, status: &k8s_openapi::api::core::v1::PodStatus) -> Pod {
    let m = &pod.metadata;
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..Default::default()
        },
        spec: None,
        status: Some(status.clone()),
    }
}

/// Node-side state for a pod seen for the first time: a pod that already carries a start time and
/// an address of this node (we restarted) keeps both; anything else starts now with a new address.
fn adopt(pod: &KubeletPod, ipam: &mut Ipam, now: Timestamp, counters: &Counters) -> PodRuntime {
    let status = pod.status.as_ref();
    let previous_ip = status
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
        .filter(|ip| ipam.reserve(*ip) == Reservation::Reserved);
    let started = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
    let (accepted, ip) = match (started, previous_ip) {
        (Some(t), Some(ip)) => (t, Some(ip)),
        (_, Some(ip)) => (now, Some(ip)),
        (_, None) => {
            let ip = ipam.allocate();
            if ip.is_none() {
                Counters::inc(&counters.ip_exhausted);
                warn!(pod = %client::meta_namespace_key(pod), cidr = %ipam.cidr(), "pod CIDR exhausted");
            }
            (now, ip)
        }
    };
    PodRuntime {
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        accepted,
        ip,
        deletion_seen: None,
        terminal_seen: None,
        written: None,
        rejection: None,
        terminal: false,
        ip_released: false,
        marks: PodMarks::of(pod),
        final_delete_sent: false,
    }
}

/// Reason of the status of a pod rejected because the node already runs `pods` pods
/// (the kubelet's admission `"OutOf" + resource`).
pub const OUT_OF_PODS: &str = "OutOfpods";

enum Admission {
    Admit,
    Reject(String),
}

/// The kubelet's pod-count admission: a new pod is rejected when the node's admitted, non-terminal
/// pods already fill its capacity. Pods that already ran here (a start time: we restarted) are
/// always re-admitted; a pod some kubelet already rejected stays rejected.
fn admit<'a>(
    pod: &KubeletPod,
    others: impl Iterator<Item = &'a PodRuntime>,
    capacity: usize,
) -> Admission {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if status.is_some_and(|s| s.start_time.is_some()) {
        return Admission::Admit;
    }
    if matches!(phase, Some("Failed") | Some("Succeeded")) {
        // Terminal without ever starting: rejected by an earlier run of this node.
        let message = status.and_then(|s| s.message.clone()).unwrap_or_default();
        return Admission::Reject(message);
    }
    let used = others
        .filter(|rt| rt.rejection.is_none() && !rt.terminal)
        .count();
    if used >= capacity {
        Admission::Reject(format!(
            "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: {used}, capacity: {capacity}"
        ))
    } else {
        Admission::Admit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rt(rejected: bool, terminal: bool) -> PodRuntime {
        PodRuntime {
            uid: "u".into(),
            accepted: Timestamp::UNIX_EPOCH,
            ip: None,
            deletion_seen: None,
            terminal_seen: None,
            written: None,
            rejection: rejected.then(|| "no".to_string()),
            terminal,
            ip_released: false,
            marks: PodMarks::default(),
            final_delete_sent: false,
        }
    }

    fn pod(status: serde_json::Value) -> KubeletPod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status}))
            .unwrap_or_default()
    }

    #[test]
    fn admission_counts_only_admitted_live_pods() {
        let others = [rt(false, false), rt(true, true), rt(false, true)];
        assert!(matches!(
            admit(&pod(json!({})), others.iter(), 2),
            Admission::Admit
        ));
        let full = [rt(false, false), rt(false, false)];
        match admit(&pod(json!({})), full.iter(), 2) {
            Admission::Reject(m) => assert_eq!(
                m,
                "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
            ),
            Admission::Admit => panic!("admitted past capacity"),
        }
        // A pod that already ran here is re-admitted; one rejected before stays rejected.
        let started = pod(json!({"startTime": "2024-01-01T00:00:00Z", "phase": "Running"}));
        assert!(matches!(admit(&started, full.iter(), 2), Admission::Admit));
        let rejected = pod(json!({"phase": "Failed", "reason": "OutOfpods", "message": "m"}));
        assert!(matches!(admit(&rejected, others.iter(), 10), Admission::Reject(m) if m == "m"));
    }

    #[test]
    fn adoption_keeps_start_time_and_address() {
        let mut ipam = Ipam::new(
            crate::ipam::Cidr::new(Ipv4Addr::new(10, 244, 0, 0), 24)
                .unwrap_or_else(|| panic!("cidr")),
        );
        let counters = Counters::default();
        let now = Timestamp::now();
        let p = pod(json!({"startTime": "2024-01-01T00:00:00Z", "podIP": "10.244.0.9"}));
        let a = adopt(&p, &mut ipam, now, &counters);
        assert_eq!(a.ip, Some(Ipv4Addr::new(10, 244, 0, 9)));
        assert_eq!(a.accepted.as_second(), 1_704_067_200);
        // The same address is not handed out again; a foreign address is replaced.
        let q = pod(json!({"podIP": "10.244.0.9"}));
        let b = adopt(&q, &mut ipam, now, &counters);
        assert_ne!(b.ip, a.ip);
        assert_eq!(b.accepted, now);
        let r = pod(json!({"podIP": "192.168.1.1", "startTime": "2024-01-01T00:00:00Z"}));
        let c = adopt(&r, &mut ipam, now, &counters);
        assert!(c.ip.is_some_and(|ip| ip.octets()[..3] == [10, 244, 0]));
        assert_eq!(c.accepted, now);
    }

    #[test]
    fn a_status_write_sends_identity_version_and_status_only() {
        let full: KubeletPod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "web"}, "ownerReferences": [{"apiVersion": "v1",
                "kind": "ReplicationController", "name": "web", "uid": "rc"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap_or_default();
        let status = k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        };
        let body = serde_json::to_value(status_body(&full, &status)).unwrap_or_default();
        assert_eq!(
            body,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
                "status": {"phase": "Running"}})
        );
    }
}
