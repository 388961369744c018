//! SharedInformerFactory: one informer per (type, list options) for a whole process (client-go
//! `informers.SharedInformerFactory`).
//!
//! Guarantees: `informer::<K>()` returns the *same* instance on every call (all namespaces, no
//! selectors), `informer_for::<K>(params)` the same instance per distinct `params`;
//! `dynamic_informer(resource)` likewise per resource (group, version, plural) and params
//! (client-go's `dynamicinformer.DynamicSharedInformerFactory.ForResource`); `start` runs each
//! informer not yet started exactly once, as a task on the current tokio runtime.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::dynamic::DynamicObject;
use crate::indexer::namespace_indexers;
use crate::rest::{Api, ApiObject, ApiResource, Client, ListParams, Resource};
use crate::shared_informer::{HasSynced, SharedIndexInformer};

/// Spawns an informer's `run` on the factory's tracker.
type StartFn = Box<dyn Fn(&TaskTracker, CancellationToken) + Send + Sync>;

struct Entry {
    informer: Box<dyn Any + Send + Sync>,
    synced: Arc<dyn HasSynced>,
    start: StartFn,
    started: bool,
}

/// One informer per object type, resource (`None`: the type's own) and list options.
type EntryKey = (TypeId, Option<(String, String, String)>, ListParams);

/// Creates and starts shared informers over one [`Client`].
pub struct SharedInformerFactory {
    client: Client,
    default_resync: Duration,
    strip_managed_fields: bool,
    entries: Mutex<HashMap<EntryKey, Entry>>,
    tasks: TaskTracker,
}

impl SharedInformerFactory {
    /// `default_resync` = 0 disables resync (kube-controller-manager uses a random 12–24 h).
    pub fn new(client: Client, default_resync: Duration) -> Self {
        SharedInformerFactory {
            client,
            default_resync,
            strip_managed_fields: false,
            entries: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
        }
    }

    /// Every informer of this factory caches objects without `metadata.managedFields`
    /// (client-go's `informers.WithTransform(cache.TransformStripManagedFields())`, as
    /// kube-scheduler does), see [`Api::without_managed_fields`](crate::Api::without_managed_fields).
    pub fn without_managed_fields(mut self) -> Self {
        self.strip_managed_fields = true;
        self
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The informer for all objects of `K` in all namespaces.
    pub fn informer<K: Resource>(&self) -> SharedIndexInformer<K> {
        self.informer_for::<K>(ListParams::default())
    }

    /// The informer for `K` restricted by `tweak` (label/field selectors, e.g.
    /// `spec.nodeName=node-1`).
    pub fn informer_for<K: Resource>(&self, tweak: ListParams) -> SharedIndexInformer<K> {
        self.shared((TypeId::of::<K>(), None, tweak), || self.client.all::<K>())
    }

    /// The informer for every object of `resource` (all namespaces), as [`DynamicObject`]s: a
    /// custom resource's informer, with the same listers, handlers and resync as typed ones.
    pub fn dynamic_informer(&self, resource: &ApiResource) -> SharedIndexInformer<DynamicObject> {
        self.informer_for_resource::<DynamicObject>(resource, ListParams::default())
    }

    /// The informer for `resource` restricted by `tweak`, with objects decoded as `K`
    /// ([`DynamicObject`], or a custom resource's own Rust type).
    pub fn informer_for_resource<K: ApiObject>(
        &self,
        resource: &ApiResource,
        tweak: ListParams,
    ) -> SharedIndexInformer<K> {
        let r = (
            resource.group.clone(),
            resource.version.clone(),
            resource.plural.clone(),
        );
        self.shared((TypeId::of::<K>(), Some(r), tweak), || {
            self.client.api_with::<K>(resource, None)
        })
    }

    /// The informer under `key`, created over `api()` if there is none yet.
    fn shared<K: ApiObject>(
        &self,
        key: EntryKey,
        api: impl FnOnce() -> Api<K>,
    ) -> SharedIndexInformer<K> {
        let tweak = key.2.clone();
        let mut entries = self.entries.lock();
        if let Some(e) = entries.get(&key) {
            if let Some(i) = e.informer.downcast_ref::<SharedIndexInformer<K>>() {
                return i.clone();
            }
        }
        let mut api = api();
        if self.strip_managed_fields {
            api = api.without_managed_fields();
        }
        // Named for its resource when it has one (every dynamic informer shares a type).
        let inf = match &key.1 {
            Some((group, _, plural)) => {
                let name = if group.is_empty() {
                    plural.clone()
                } else {
                    format!("{plural}.{group}")
                };
                let lw: Arc<dyn crate::ListerWatcher<K>> = Arc::new(api);
                SharedIndexInformer::named(
                    name,
                    lw,
                    tweak,
                    self.default_resync,
                    namespace_indexers(),
                )
            }
            None => SharedIndexInformer::new(api, tweak, self.default_resync),
        };
        let run = inf.clone();
        entries.insert(
            key,
            Entry {
                informer: Box::new(inf.clone()),
                synced: Arc::new(inf.clone()),
                start: Box::new(move |tasks, token| {
                    let i = run.clone();
                    tasks.spawn(async move { i.run(token).await });
                }),
                started: false,
            },
        );
        inf
    }

    /// Starts every informer created so far that is not running yet. Must be called within a tokio
    /// runtime; call again after creating more informers.
    pub fn start(&self, shutdown: CancellationToken) {
        if tokio::runtime::Handle::try_current().is_err() {
            tracing::error!(
                "SharedInformerFactory::start outside a tokio runtime; nothing started"
            );
            return;
        }
        for e in self.entries.lock().values_mut() {
            if !e.started {
                e.started = true;
                (e.start)(&self.tasks, shutdown.clone());
            }
        }
    }

    /// Waits until every started informer synced; false if `shutdown` fired first.
    pub async fn wait_for_cache_sync(&self, shutdown: &CancellationToken) -> bool {
        let synced: Vec<Arc<dyn HasSynced>> = self
            .entries
            .lock()
            .values()
            .filter(|e| e.started)
            .map(|e| e.synced.clone())
            .collect();
        let refs: Vec<&dyn HasSynced> = synced.iter().map(|s| s.as_ref()).collect();
        crate::shared_informer::wait_for_cache_sync(&refs, shutdown).await
    }

    /// Waits for every started informer's task to finish (after `shutdown` was cancelled).
    pub async fn shutdown(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}
