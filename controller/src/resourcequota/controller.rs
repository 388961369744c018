//! The `resourcequota` controller's I/O (see [`super`]): informers, the two work queues, the
//! full resync, replenishment handlers and the status write.

use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use api::quota::evaluator::Evaluator;
use client::dynamic::RestMapper;
use client::{
    meta_namespace_key, Action, Api, Client, DeletedObject, HandlerRegistration, HasSynced,
    ListParams, Lister, RateLimitingQueue, ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, ReplicationController, ResourceQuota, Secret, Service,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::decide::{self, Priority};
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::{Error, Result};

/// `--resource-quota-sync-period`: how often every quota is recalculated in full (5 m).
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(300);

/// The shared informers of the kinds the core evaluators measure (upstream's quota monitor
/// discovers every resource; these are the ones with their own evaluator or a legacy alias).
pub struct Informers {
    pub quotas: SharedIndexInformer<ResourceQuota>,
    pub pods: SharedIndexInformer<CachedPod>,
    pub services: SharedIndexInformer<Service>,
    pub claims: SharedIndexInformer<PersistentVolumeClaim>,
    pub configmaps: SharedIndexInformer<ConfigMap>,
    pub secrets: SharedIndexInformer<Secret>,
    pub replicationcontrollers: SharedIndexInformer<ReplicationController>,
}

struct Listers {
    quotas: Lister<ResourceQuota>,
    pods: Lister<CachedPod>,
    services: Lister<Service>,
    claims: Lister<PersistentVolumeClaim>,
    configmaps: Lister<ConfigMap>,
    secrets: Lister<Secret>,
    replicationcontrollers: Lister<ReplicationController>,
}

struct Inner {
    client: Client,
    mapper: RestMapper,
    listers: Listers,
    /// `resourcequota_primary`: recalculation.
    queue: RateLimitingQueue<String>,
    /// `resourcequota_priority`: quotas whose status misses usage admission needs.
    missing_usage: RateLimitingQueue<String>,
    /// The static evaluators (`NewEvaluators`).
    registry: Vec<Evaluator>,
    clock: Arc<dyn Clock>,
}

/// The ResourceQuota controller (`resourcequota-controller`, alias `resourcequota`).
pub struct ResourceQuotaController {
    inner: Arc<Inner>,
    registrations: Vec<HandlerRegistration>,
    sync_period: Duration,
}

fn to_json<K: serde::Serialize>(obj: &K) -> Value {
    serde_json::to_value(obj).unwrap_or(Value::Null)
}

impl ResourceQuotaController {
    /// Builds on the shared informers; registers its handlers before they start.
    pub fn new(client: Client, informers: Informers, clock: Arc<dyn Clock>) -> Self {
        let i = &informers;
        let inner = Arc::new(Inner {
            mapper: RestMapper::new(client.clone()),
            client,
            listers: Listers {
                quotas: i.quotas.lister(),
                pods: i.pods.lister(),
                services: i.services.lister(),
                claims: i.claims.lister(),
                configmaps: i.configmaps.lister(),
                secrets: i.secrets.lister(),
                replicationcontrollers: i.replicationcontrollers.lister(),
            },
            queue: RateLimitingQueue::with_default_controller_rate_limiter("resourcequota_primary"),
            missing_usage: RateLimitingQueue::with_default_controller_rate_limiter(
                "resourcequota_priority",
            ),
            registry: Evaluator::registry(),
            clock,
        });
        let registrations =
            vec![
                i.quotas.add_event_handler(QuotaHandler(inner.clone())),
                i.pods
                    .add_event_handler(Replenish::<CachedPod>::new(&inner, "pods")),
                i.services
                    .add_event_handler(Replenish::<Service>::new(&inner, "services")),
                i.claims
                    .add_event_handler(Replenish::<PersistentVolumeClaim>::new(
                        &inner,
                        "persistentvolumeclaims",
                    )),
                i.configmaps
                    .add_event_handler(Replenish::<ConfigMap>::new(&inner, "configmaps")),
                i.secrets
                    .add_event_handler(Replenish::<Secret>::new(&inner, "secrets")),
                i.replicationcontrollers.add_event_handler(
                    Replenish::<ReplicationController>::new(&inner, "replicationcontrollers"),
                ),
            ];
        Self {
            inner,
            registrations,
            sync_period: DEFAULT_SYNC_PERIOD,
        }
    }

    /// Another full-resync period than `--resource-quota-sync-period`'s 5 minutes.
    pub fn with_sync_period(mut self, period: Duration) -> Self {
        self.sync_period = period;
        self
    }

    /// The recalculation queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Waits for the caches, then runs `workers` workers on each queue and the full resync
    /// until `shutdown` (`--concurrent-resource-quota-syncs`, 5).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let synced: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        let worker = |inner: Arc<Inner>| {
            move |key: String| {
                let inner = inner.clone();
                async move { inner.sync(&key).await.map(|()| Action::AwaitChange) }
            }
        };
        let resync = self.inner.clone();
        let period = self.sync_period;
        // The first pass would only repeat the informers' initial adds.
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let primary = Runner::new("resourcequota_primary")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                worker(self.inner.clone()),
            );
        let priority = Runner::new("resourcequota_priority")
            .workers(workers)
            .run_workers(
                self.inner.missing_usage.clone(),
                &synced,
                &shutdown,
                worker(self.inner.clone()),
            );
        let full =
            Runner::new("resourcequota_resync").run_periodic(period, &synced, &shutdown, || {
                if !first.swap(false, std::sync::atomic::Ordering::Relaxed) {
                    resync.enqueue_all();
                }
                async { Ok::<_, std::convert::Infallible>(()) }
            });
        tokio::join!(primary, priority, full);
    }
}

impl Inner {
    /// `addQuota`: into the priority queue when usage is missing, else the normal one.
    fn add_quota(&self, quota: &ResourceQuota) {
        let key = meta_namespace_key(quota);
        match decide::priority(&to_json(quota), &self.registry) {
            Priority::MissingUsage => self.missing_usage.add(key),
            Priority::Normal => self.queue.add(key),
        }
    }

    /// `enqueueAll`: every quota, for a full recalculation.
    fn enqueue_all(&self) {
        for quota in self.listers.quotas.list(&Selector::everything()) {
            self.queue.add(meta_namespace_key(quota.as_ref()));
        }
    }

    /// `replenishQuota`: re-queues the quotas of `namespace` that track `evaluator`'s resources.
    /// A namespace without quotas costs one index lookup.
    fn replenish(&self, evaluator: &Evaluator, namespace: &str) {
        let quotas = self
            .listers
            .quotas
            .namespace(namespace)
            .list(&Selector::everything());
        for quota in quotas {
            if decide::tracks(&to_json(quota.as_ref()), evaluator) {
                self.queue.add(meta_namespace_key(quota.as_ref()));
            }
        }
    }

    /// `syncResourceQuotaFromKey`: recalculates one quota and writes its status if it changed.
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(cached) = self.listers.quotas.get(key) else {
            return Ok(());
        };
        let quota = to_json(cached.as_ref());
        let namespace = cached.metadata.namespace.clone().unwrap_or_default();
        let evaluators = self.evaluators(&quota);
        let mut counted = std::collections::HashMap::new();
        for e in evaluators.iter().filter(|e| !self.cached(e)) {
            counted.insert(
                e.resource().to_string(),
                self.list_live(e, &namespace).await,
            );
        }
        let now = self.clock.now();
        let (status, errors) = decide::next_status(
            &quota,
            &evaluators,
            |e| match counted.remove(e.resource()) {
                Some(listed) => listed,
                None => Ok(self.list_cached(e, &namespace)),
            },
            now,
        );
        let mut failed = errors;
        if let Some(status) = status {
            let mut next = (*cached).clone();
            next.status = serde_json::from_value(status)
                .map_err(|e| Error::Quota(format!("status of {key}: {e}")))?;
            let api: Api<ResourceQuota> = self.client.api(Some(&namespace));
            let name = cached.metadata.name.clone().unwrap_or_default();
            match api.replace_status(&name, &next).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => failed.push(e.to_string()),
            }
        }
        match failed.is_empty() {
            true => Ok(()),
            false => Err(Error::Quota(format!("{key}: {}", failed.join("; ")))),
        }
    }

    /// The registry plus an object counter for every `count/<resource>.<group>` of the quota
    /// that no registered evaluator measures.
    fn evaluators(&self, quota: &Value) -> Vec<Evaluator> {
        let mut out = self.registry.clone();
        let hard = api::quota::from_json(quota.pointer("/spec/hard"));
        for name in hard.keys() {
            if out.iter().any(|e| !e.matching_resources([name]).is_empty()) {
                continue;
            }
            if let Some(e) = Evaluator::for_count_name(name) {
                out.push(e);
            }
        }
        out
    }

    fn cached(&self, e: &Evaluator) -> bool {
        e.group().is_empty()
            && matches!(
                e.resource(),
                "pods"
                    | "services"
                    | "persistentvolumeclaims"
                    | "configmaps"
                    | "secrets"
                    | "replicationcontrollers"
                    | "resourcequotas"
            )
    }

    /// The namespace's objects of a kind with a shared informer, as JSON.
    fn list_cached(&self, e: &Evaluator, namespace: &str) -> Vec<Arc<Value>> {
        fn all<K: client::Object + serde::Serialize + Send + Sync + 'static>(
            lister: &Lister<K>,
            ns: &str,
        ) -> Vec<Arc<Value>> {
            lister
                .namespace(ns)
                .list(&Selector::everything())
                .iter()
                .map(|o| Arc::new(to_json(o.as_ref())))
                .collect()
        }
        let l = &self.listers;
        match e.resource() {
            "pods" => all(&l.pods, namespace),
            "services" => all(&l.services, namespace),
            "persistentvolumeclaims" => all(&l.claims, namespace),
            "configmaps" => all(&l.configmaps, namespace),
            "secrets" => all(&l.secrets, namespace),
            "replicationcontrollers" => all(&l.replicationcontrollers, namespace),
            "resourcequotas" => all(&l.quotas, namespace),
            _ => Vec::new(),
        }
    }

    /// The namespace's objects of another resource, listed from the apiserver (resolved through
    /// discovery); a resource not served counts nothing.
    async fn list_live(
        &self,
        e: &Evaluator,
        namespace: &str,
    ) -> std::result::Result<Vec<Arc<Value>>, String> {
        let discovery = self
            .mapper
            .discovery()
            .await
            .map_err(|err| err.to_string())?;
        let Some(resource) = discovery.resolve_resource(e.group(), None, e.resource()) else {
            return Ok(Vec::new());
        };
        let api = self.client.dynamic(resource, Some(namespace));
        let listed = api
            .list(&ListParams::default())
            .await
            .map_err(|err| err.to_string())?;
        Ok(listed
            .items
            .iter()
            .map(|o| Arc::new(o.to_value()))
            .collect())
    }
}

struct QuotaHandler(Arc<Inner>);

impl ResourceEventHandler<ResourceQuota> for QuotaHandler {
    fn on_add(&self, obj: &Arc<ResourceQuota>, _in_initial_list: bool) {
        self.0.add_quota(obj);
    }

    fn on_update(&self, old: &Arc<ResourceQuota>, new: &Arc<ResourceQuota>) {
        if decide::spec_hard_changed(&to_json(old.as_ref()), &to_json(new.as_ref())) {
            self.0.add_quota(new);
        }
    }

    fn on_delete(&self, _obj: DeletedObject<ResourceQuota>) {}
}

/// The quota monitor's handlers for one kind: replenish on delete, and on the updates that can
/// lower usage (see [`ReplenishOnUpdate`]).
struct Replenish<K> {
    inner: Arc<Inner>,
    evaluator: Evaluator,
    _k: std::marker::PhantomData<fn(K)>,
}

impl<K> Replenish<K> {
    fn new(inner: &Arc<Inner>, resource: &str) -> Self {
        Self {
            inner: inner.clone(),
            evaluator: Evaluator::for_resource("", resource),
            _k: std::marker::PhantomData,
        }
    }
}

/// The monitor's update filter per kind.
trait ReplenishOnUpdate {
    fn lowers_usage(old: &Self, new: &Self, now: jiff::Timestamp) -> bool;
}

fn timestamp(
    t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> Option<jiff::Timestamp> {
    t.map(|t| t.0)
}

impl ReplenishOnUpdate for CachedPod {
    /// The pod stopped counting (it became terminal or outlived its deletion grace period).
    fn lowers_usage(old: &Self, new: &Self, now: jiff::Timestamp) -> bool {
        let counts = |p: &CachedPod| {
            decide::pod_counts(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                timestamp(p.metadata.deletion_timestamp.as_ref()),
                p.metadata.deletion_grace_period_seconds,
                now,
            )
        };
        counts(old) && !counts(new)
    }
}

impl ReplenishOnUpdate for Service {
    /// The priced service type changed.
    fn lowers_usage(old: &Self, new: &Self, _now: jiff::Timestamp) -> bool {
        let ty = |s: &Service| {
            decide::quota_service_type(s.spec.as_ref().and_then(|s| s.type_.as_deref())).to_string()
        };
        ty(old) != ty(new)
    }
}

impl ReplenishOnUpdate for PersistentVolumeClaim {
    /// The allocated size changed (`RequiresQuotaReplenish`).
    fn lowers_usage(old: &Self, new: &Self, _now: jiff::Timestamp) -> bool {
        let allocated = |c: &PersistentVolumeClaim| {
            c.status
                .as_ref()
                .and_then(|s| s.allocated_resources.as_ref())
                .and_then(|r| r.get("storage"))
                .map(|q| q.0.clone())
        };
        allocated(old) != allocated(new)
    }
}

macro_rules! counted_only {
    ($($k:ty),*) => {$(
        impl ReplenishOnUpdate for $k {
            fn lowers_usage(_old: &Self, _new: &Self, _now: jiff::Timestamp) -> bool {
                false
            }
        }
    )*};
}
counted_only!(ConfigMap, Secret, ReplicationController);

impl<K> ResourceEventHandler<K> for Replenish<K>
where
    K: client::Object + ReplenishOnUpdate + Send + Sync + 'static,
{
    fn on_add(&self, _obj: &Arc<K>, _in_initial_list: bool) {}

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let now = self.inner.clock.now();
        if K::lowers_usage(old, new, now) {
            let ns = new.meta().namespace.clone().unwrap_or_default();
            self.inner.replenish(&self.evaluator, &ns);
        }
    }

    fn on_delete(&self, obj: DeletedObject<K>) {
        let ns = obj.object().meta().namespace.clone().unwrap_or_default();
        self.inner.replenish(&self.evaluator, &ns);
    }
}
