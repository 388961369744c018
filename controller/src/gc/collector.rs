//! `GarbageCollector`: cascading deletion through ownerReferences, wired to informers.
//!
//! Each registered kind's informer feeds the shared [`Graph`]; every change enqueues the UIDs whose
//! decision may have changed (the object, its owners, its dependents). Workers evaluate one UID at a
//! time (the queue never hands one UID to two workers) with the pure decisions of [`super::graph`] and
//! issue the resulting requests: DELETE with a UID precondition and a propagation policy, strategic
//! patches removing owner references (UID precondition), and JSON patches that remove one finalizer
//! only if the finalizer list is still the one decided on (`test` op). An owner absent from the graph
//! is verified with a live GET before its dependents are deleted; confirmed-absent UIDs are remembered
//! in a bounded set so that thousands of dependents of one deleted owner cost one GET. An owner of
//! a kind no informer watches (a custom resource) is looked up through discovery and the dynamic
//! client, so dependents of a deleted custom resource are collected too.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use client::{
    Action, Api, Client, DeleteParams, DeletedObject, HandlerRegistration, HasSynced, Patch,
    Preconditions, PropagationPolicy, RateLimitingQueue, ResourceEventHandler, Runner,
    SharedIndexInformer,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::graph::{
    decide_dependent, decide_owner, owner_state_in_graph, remove_owner_refs_patch,
    DependentDecision, Graph, GraphNode, ObjectId, OwnerDecision, OwnerState, Propagation,
};
use crate::{Error, Result};

/// Bound of the confirmed-absent owner set (cleared when full).
pub const ABSENT_OWNER_CACHE: usize = 4096;

/// `group/kind` for an `apiVersion` and `kind`.
fn group_kind(api_version: &str, kind: &str) -> String {
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    format!("{group}/{kind}")
}

/// Requests the collector makes for one kind.
#[async_trait]
trait KindOps: Send + Sync {
    async fn get(&self, ns: Option<&str>, name: &str) -> Result<Option<GraphNode>, client::Error>;
    async fn delete(&self, id: &ObjectId, policy: Propagation) -> Result<(), client::Error>;
    async fn patch(&self, id: &ObjectId, patch: Patch) -> Result<(), client::Error>;
}

struct TypedOps<K> {
    client: Client,
    _k: std::marker::PhantomData<fn() -> K>,
}

#[async_trait]
impl<K: client::Resource> KindOps for TypedOps<K> {
    async fn get(&self, ns: Option<&str>, name: &str) -> Result<Option<GraphNode>, client::Error> {
        let api: Api<K> = self.client.api::<K>(ns);
        match api.get(name).await {
            Ok(o) => Ok(GraphNode::from_meta(K::API_VERSION, K::KIND, o.metadata())),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn delete(&self, id: &ObjectId, policy: Propagation) -> Result<(), client::Error> {
        let api: Api<K> = self.client.api::<K>(id.namespace.as_deref());
        api.delete(&id.name, &delete_params(id, policy)).await
    }

    async fn patch(&self, id: &ObjectId, patch: Patch) -> Result<(), client::Error> {
        let api: Api<K> = self.client.api::<K>(id.namespace.as_deref());
        api.patch(&id.name, &patch).await.map(|_| ())
    }
}

/// The requests for a kind no informer watches (a custom resource owner), through the dynamic
/// client on the resource discovery resolved.
struct DynamicOps {
    client: Client,
    resource: client::ApiResource,
}

fn delete_params(id: &ObjectId, policy: Propagation) -> DeleteParams {
    let propagation_policy = Some(match policy {
        Propagation::Background => PropagationPolicy::Background,
        Propagation::Foreground => PropagationPolicy::Foreground,
        Propagation::Orphan => PropagationPolicy::Orphan,
    });
    DeleteParams {
        propagation_policy,
        preconditions: Some(Preconditions {
            uid: Some(id.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    }
}

#[async_trait]
impl KindOps for DynamicOps {
    async fn get(&self, ns: Option<&str>, name: &str) -> Result<Option<GraphNode>, client::Error> {
        let ns = if self.resource.namespaced { ns } else { None };
        let api = self.client.dynamic(&self.resource, ns);
        match api.get(name).await {
            Ok(o) => Ok(GraphNode::from_meta(
                &self.resource.api_version,
                &self.resource.kind,
                &o.metadata,
            )),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn delete(&self, id: &ObjectId, policy: Propagation) -> Result<(), client::Error> {
        let api = self.client.dynamic(&self.resource, id.namespace.as_deref());
        api.delete(&id.name, &delete_params(id, policy)).await
    }

    async fn patch(&self, id: &ObjectId, patch: Patch) -> Result<(), client::Error> {
        let api = self.client.dynamic(&self.resource, id.namespace.as_deref());
        api.patch(&id.name, &patch).await.map(|_| ())
    }
}

struct Inner {
    graph: Mutex<Graph>,
    /// `group/kind` of the custom resources already watched.
    watched_custom: Mutex<HashSet<String>>,
    ops: HashMap<String, Arc<dyn KindOps>>,
    /// Resolves owner kinds no informer watches (custom resources), through discovery.
    mapper: client::RestMapper,
    /// The ops of those kinds, by `group/kind`, once resolved.
    dynamic_ops: Mutex<HashMap<String, Arc<dyn KindOps>>>,
    queue: RateLimitingQueue<String>,
    absent: Mutex<HashSet<String>>,
}

/// The garbage collector. Register kinds with [`GarbageCollector::watch`], then [`run`](Self::run).
pub struct GarbageCollector {
    client: Client,
    ops: HashMap<String, Arc<dyn KindOps>>,
    /// Where custom resources' informers come from, and the CRDs that name them.
    custom: Option<(
        Arc<client::SharedInformerFactory>,
        SharedIndexInformer<CustomResourceDefinition>,
    )>,
    // Deferred handler registration: the graph exists only once `run` builds it.
    graph_handlers: Vec<RegisterFn>,
    queue: RateLimitingQueue<String>,
}

type RegisterFn = Box<dyn FnOnce(Arc<Inner>) -> HandlerRegistration + Send>;

impl GarbageCollector {
    /// A collector with no kinds yet.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            ops: HashMap::new(),
            custom: None,
            graph_handlers: Vec::new(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter(
                "garbage_collector_attempt_to_delete",
            ),
        }
    }

    /// The work queue of UIDs to evaluate (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.queue.clone()
    }

    /// Observe kind `K` through its shared informer (dependents and owners of this kind).
    pub fn watch<K: client::Resource>(&mut self, informer: SharedIndexInformer<K>) {
        self.watch_as::<K, K>(informer);
    }

    /// [`watch`](Self::watch) through an informer that decodes resource `R` as its own type `K`
    /// (the pods' [`CachedPod`](crate::cached_pod::CachedPod)); requests are of `R`.
    pub fn watch_as<R: client::Resource, K: client::ApiObject>(
        &mut self,
        informer: SharedIndexInformer<K>,
    ) {
        self.ops.insert(
            group_kind(R::API_VERSION, R::KIND),
            Arc::new(TypedOps::<R> {
                client: self.client.clone(),
                _k: std::marker::PhantomData,
            }),
        );
        self.graph_handlers.push(Box::new(move |inner: Arc<Inner>| {
            informer.add_event_handler(GraphHandler::<K> {
                inner,
                api_version: R::API_VERSION,
                kind: R::KIND,
                _k: std::marker::PhantomData,
            })
        }));
    }

    /// Observe custom resources too (as owners and as dependents), as upstream's GC does through
    /// discovery: for each CRD the informer shows Established, a dynamic informer of its storage
    /// version from `factory` feeds the graph, started when the CRD appears.
    pub fn watch_custom_resources(
        &mut self,
        factory: Arc<client::SharedInformerFactory>,
        crds: SharedIndexInformer<CustomResourceDefinition>,
    ) {
        self.custom = Some((factory, crds));
    }

    /// Register handlers, wait for every cache, then run `workers` workers until `shutdown`.
    pub async fn run(mut self, workers: usize, shutdown: CancellationToken) {
        let inner = Arc::new(Inner {
            graph: Mutex::new(Graph::new()),
            ops: std::mem::take(&mut self.ops),
            watched_custom: Mutex::new(HashSet::new()),
            mapper: client::RestMapper::new(self.client.clone()),
            dynamic_ops: Mutex::new(HashMap::new()),
            queue: self.queue.clone(),
            absent: Mutex::new(HashSet::new()),
        });
        let mut registrations: Vec<HandlerRegistration> = self
            .graph_handlers
            .drain(..)
            .map(|h| h(inner.clone()))
            .collect();
        if let Some((factory, crds)) = self.custom.take() {
            registrations.push(crds.add_event_handler(CrdHandler {
                inner: inner.clone(),
                factory,
                shutdown: shutdown.clone(),
            }));
        }
        let synced: Vec<&dyn HasSynced> =
            registrations.iter().map(|r| r as &dyn HasSynced).collect();
        let queue = inner.queue.clone();
        Runner::new("garbagecollector")
            .workers(workers)
            .run_workers(queue, &synced, &shutdown, move |uid: String| {
                let inner = inner.clone();
                async move { inner.process(&uid).await.map(|()| Action::AwaitChange) }
            })
            .await;
    }
}

impl Inner {
    fn ops_for(&self, api_version: &str, kind: &str) -> Option<Arc<dyn KindOps>> {
        let key = group_kind(api_version, kind);
        self.ops
            .get(&key)
            .cloned()
            .or_else(|| self.dynamic_ops.lock().get(&key).cloned())
    }

    /// The ops of an owner kind no informer watches, resolved through discovery (rediscovered
    /// on a miss, so a CRD installed after start-up is found).
    async fn resolve_owner_kind(&self, api_version: &str, kind: &str) -> Option<Arc<dyn KindOps>> {
        let key = group_kind(api_version, kind);
        if let Some(ops) = self.dynamic_ops.lock().get(&key) {
            return Some(ops.clone());
        }
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = client::GroupVersionKind::new(group, version, kind);
        let resource = match self.mapper.resolve(&gvk).await {
            Ok(r) => r,
            Err(_) => self.mapper.resolve_kind(group, kind).await.ok()?,
        };
        let ops: Arc<dyn KindOps> = Arc::new(DynamicOps {
            client: self.mapper.client().clone(),
            resource,
        });
        self.dynamic_ops.lock().insert(key, ops.clone());
        Some(ops)
    }

    fn enqueue_all(&self, uids: Vec<String>) {
        for u in uids {
            self.queue.add(u);
        }
    }

    async fn owner_state(&self, owner_ns: Option<&str>, r: &OwnerReference) -> Result<OwnerState> {
        let in_graph = owner_state_in_graph(&self.graph.lock(), r);
        if in_graph != OwnerState::Unverified {
            return Ok(in_graph);
        }
        if self.absent.lock().contains(&r.uid) {
            return Ok(OwnerState::Absent);
        }
        let ops = match self.ops_for(&r.api_version, &r.kind) {
            Some(ops) => ops,
            None => match self.resolve_owner_kind(&r.api_version, &r.kind).await {
                Some(ops) => ops,
                // A kind discovery does not know: never delete on its behalf.
                None => return Ok(OwnerState::Solid),
            },
        };
        let found = ops
            .get(owner_ns, &r.name)
            .await
            .map_err(|e| Error::api("verify owner", e))?;
        let state = match found {
            Some(n) if n.id.uid == r.uid && n.deleting_dependents() => {
                OwnerState::WaitingForDependents
            }
            Some(n) if n.id.uid == r.uid => OwnerState::Solid,
            _ => OwnerState::Absent,
        };
        if state == OwnerState::Absent {
            let mut absent = self.absent.lock();
            if absent.len() >= ABSENT_OWNER_CACHE {
                absent.clear();
            }
            absent.insert(r.uid.clone());
        }
        Ok(state)
    }

    async fn remove_finalizer(&self, node: &GraphNode, finalizer: &str) -> Result<()> {
        let Some(ops) = self.ops_for(&node.id.api_version, &node.id.kind) else {
            return Ok(());
        };
        let remaining: Vec<&String> = node.finalizers.iter().filter(|f| *f != finalizer).collect();
        let patch = Patch::Json(serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": node.finalizers},
            {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
        ]));
        match ops.patch(&node.id, patch).await {
            Ok(()) => {
                tracing::info!(kind = %node.id.kind, name = %node.id.name, finalizer, "removed finalizer");
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("remove finalizer", e)),
        }
    }

    async fn process(&self, uid: &str) -> Result<()> {
        // Dependents are copied only for an owner being deleted: a live owner with 10,000 pods is
        // evaluated on every pod event, and must cost O(1) then.
        let (node, dependents, has_dependents) = {
            let g = self.graph.lock();
            let Some(node) = g.get(uid).cloned() else {
                return Ok(());
            };
            let deps: Vec<GraphNode> = if node.deleting {
                g.dependents_of(uid).into_iter().cloned().collect()
            } else {
                Vec::new()
            };
            let has = g.has_dependents(uid);
            (node, deps, has)
        };
        if node.deleting {
            let dep_refs: Vec<&GraphNode> = dependents.iter().collect();
            match decide_owner(&node, &dep_refs) {
                OwnerDecision::Nothing => {}
                OwnerDecision::Orphan(ids) => {
                    for id in ids {
                        let Some(ops) = self.ops_for(&id.api_version, &id.kind) else {
                            continue;
                        };
                        let patch =
                            Patch::Strategic(remove_owner_refs_patch(&id.uid, &[uid.to_string()]));
                        match ops.patch(&id, patch).await {
                            Ok(()) => {}
                            Err(e) if e.is_not_found() || e.is_conflict() || e.is_invalid() => {}
                            Err(e) => return Err(Error::api("orphan dependent", e)),
                        }
                    }
                    self.remove_finalizer(&node, super::graph::FINALIZER_ORPHAN)
                        .await?;
                }
                OwnerDecision::AwaitDependents(uids) => self.enqueue_all(uids),
                OwnerDecision::RemoveFinalizer(f) => self.remove_finalizer(&node, f).await?,
            }
        }
        if node.owners.is_empty() {
            return Ok(());
        }
        let mut states = HashMap::new();
        for r in node.owners.iter() {
            let s = self.owner_state(node.id.namespace.as_deref(), r).await?;
            states.insert(r.uid.clone(), s);
        }
        let decision = decide_dependent(&node, has_dependents, |r| {
            states.get(&r.uid).copied().unwrap_or(OwnerState::Solid)
        });
        let Some(ops) = self.ops_for(&node.id.api_version, &node.id.kind) else {
            return Ok(());
        };
        match decision {
            DependentDecision::Keep | DependentDecision::Verify(_) => Ok(()),
            DependentDecision::RemoveOwnerRefs(uids) => {
                let patch = Patch::Strategic(remove_owner_refs_patch(&node.id.uid, &uids));
                match ops.patch(&node.id, patch).await {
                    Ok(()) => Ok(()),
                    Err(e) if e.is_not_found() => Ok(()),
                    Err(e) => Err(Error::api("remove owner references", e)),
                }
            }
            DependentDecision::Delete(_) => {
                // As client-go's attemptToDeleteItem: decide on the live object, not the cached
                // one. An orphaning owner may have just removed its reference (the cache has
                // not seen that yet); deleting on the cached references would kill an orphan.
                let live = match ops.get(node.id.namespace.as_deref(), &node.id.name).await {
                    Ok(Some(live)) if live.id.uid == node.id.uid => live,
                    Ok(_) => return Ok(()),
                    Err(e) => return Err(Error::api("get dependent", e)),
                };
                let recheck = decide_dependent(&live, has_dependents, |r| {
                    states.get(&r.uid).copied().unwrap_or(OwnerState::Solid)
                });
                let DependentDecision::Delete(policy) = recheck else {
                    return Ok(());
                };
                tracing::debug!(kind = %node.id.kind, name = %node.id.name, policy = policy.as_str(), "deleting dependent");
                match ops.delete(&node.id, policy).await {
                    Ok(()) => Ok(()),
                    Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
                    Err(e) => Err(Error::api("delete dependent", e)),
                }
            }
        }
    }
}

struct GraphHandler<K> {
    inner: Arc<Inner>,
    /// The resource's, of which `K` is the informer's type.
    api_version: &'static str,
    kind: &'static str,
    _k: std::marker::PhantomData<fn() -> K>,
}

impl<K: client::ApiObject> GraphHandler<K> {
    fn observe(&self, obj: &K) {
        let Some(node) = GraphNode::from_meta(self.api_version, self.kind, obj.meta()) else {
            return;
        };
        let dirty = self.inner.graph.lock().observe(node);
        self.inner.enqueue_all(dirty);
    }
}

impl<K: client::ApiObject> ResourceEventHandler<K> for GraphHandler<K> {
    fn on_add(&self, obj: &Arc<K>, _in_initial_list: bool) {
        self.observe(obj);
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if old.meta().uid != new.meta().uid {
            if let Some(u) = old.meta().uid.as_deref() {
                let dirty = self.inner.graph.lock().forget(u);
                self.inner.enqueue_all(dirty);
            }
        }
        self.observe(new);
    }

    fn on_delete(&self, obj: DeletedObject<K>) {
        if let Some(u) = obj.object().meta().uid.as_deref() {
            let dirty = self.inner.graph.lock().forget(u);
            self.inner.enqueue_all(dirty);
        }
    }
}

/// The resource a CRD serves in its storage version, once Established.
fn storage_resource(crd: &CustomResourceDefinition) -> Option<client::ApiResource> {
    let established = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    if !established || crd.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let spec = &crd.spec;
    let version = spec.versions.iter().find(|v| v.storage && v.served)?;
    Some(client::ApiResource::new(
        spec.group.clone(),
        version.name.clone(),
        spec.names.kind.clone(),
        spec.names.plural.clone(),
        spec.scope == "Namespaced",
    ))
}

/// Starts watching the custom resources of each Established CRD.
struct CrdHandler {
    inner: Arc<Inner>,
    factory: Arc<client::SharedInformerFactory>,
    shutdown: CancellationToken,
}

impl CrdHandler {
    fn observe(&self, crd: &CustomResourceDefinition) {
        let Some(resource) = storage_resource(crd) else {
            return;
        };
        let key = group_kind(&resource.api_version, &resource.kind);
        if !self.inner.watched_custom.lock().insert(key.clone()) {
            return;
        }
        self.inner.dynamic_ops.lock().insert(
            key,
            Arc::new(DynamicOps {
                client: self.inner.mapper.client().clone(),
                resource: resource.clone(),
            }),
        );
        let informer = self.factory.dynamic_informer(&resource);
        // The registration lives as long as the informer: custom resources stay observed.
        let _registration = informer.add_event_handler(DynamicGraphHandler {
            inner: self.inner.clone(),
            resource,
        });
        self.factory.start(self.shutdown.clone());
    }
}

impl ResourceEventHandler<CustomResourceDefinition> for CrdHandler {
    fn on_add(&self, obj: &Arc<CustomResourceDefinition>, _in_initial_list: bool) {
        self.observe(obj);
    }

    fn on_update(&self, _old: &Arc<CustomResourceDefinition>, new: &Arc<CustomResourceDefinition>) {
        self.observe(new);
    }

    fn on_delete(&self, _obj: DeletedObject<CustomResourceDefinition>) {}
}

/// Feeds the graph from a custom resource's dynamic informer.
struct DynamicGraphHandler {
    inner: Arc<Inner>,
    resource: client::ApiResource,
}

impl ResourceEventHandler<client::DynamicObject> for DynamicGraphHandler {
    fn on_add(&self, obj: &Arc<client::DynamicObject>, _in_initial_list: bool) {
        let Some(node) = GraphNode::from_meta(
            &self.resource.api_version,
            &self.resource.kind,
            &obj.metadata,
        ) else {
            return;
        };
        let dirty = self.inner.graph.lock().observe(node);
        self.inner.enqueue_all(dirty);
    }

    fn on_update(&self, old: &Arc<client::DynamicObject>, new: &Arc<client::DynamicObject>) {
        if old.metadata.uid != new.metadata.uid {
            if let Some(u) = old.metadata.uid.as_deref() {
                let dirty = self.inner.graph.lock().forget(u);
                self.inner.enqueue_all(dirty);
            }
        }
        self.on_add(new, false);
    }

    fn on_delete(&self, obj: DeletedObject<client::DynamicObject>) {
        if let Some(u) = obj.object().metadata.uid.as_deref() {
            let dirty = self.inner.graph.lock().forget(u);
            self.inner.enqueue_all(dirty);
        }
    }
}
