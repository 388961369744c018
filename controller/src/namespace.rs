//! `NamespaceController`: empties a namespace that is being deleted, then finalizes it.
//!
//! A namespace with a deletionTimestamp (phase `Terminating`) is purged kind by kind: every object of
//! each known namespaced kind is deleted (Background; pods gracefully), then of every other
//! namespaced resource discovery lists (custom resources). Kinds the server does not serve
//! answer 404 and count as empty. While anything remains (pods in their grace period, objects held by
//! finalizers) the namespace is requeued after [`RECHECK_DELAY`]. When nothing remains, the `kubernetes`
//! spec finalizer is removed through `PUT /api/v1/namespaces/{name}/finalize` and the apiserver removes
//! the namespace. Lists are uncached (the content must be known to be gone, not believed gone).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use client::{
    Action, Api, Client, DeleteParams, DeletedObject, HandlerRegistration, ListParams, Lister,
    PropagationPolicy, RateLimitingQueue, ResourceEventHandler, Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::Namespace;
use tokio_util::sync::CancellationToken;

use crate::{Error, Result};

/// Delay before re-checking a namespace whose content is still going away.
pub const RECHECK_DELAY: Duration = Duration::from_millis(500);
/// The spec finalizer the namespace controller owns.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

#[async_trait]
trait Purge: Send + Sync {
    /// Delete what is not yet being deleted; return how many objects remain.
    async fn purge(&self, ns: &str) -> Result<usize>;
}

struct TypedPurge<K> {
    client: Client,
    _k: std::marker::PhantomData<fn() -> K>,
}

#[async_trait]
impl<K: client::Resource> Purge for TypedPurge<K> {
    async fn purge(&self, ns: &str) -> Result<usize> {
        let api: Api<K> = self.client.api::<K>(Some(ns));
        let list = match api.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(e) if e.is_not_found() || e.code() == Some(405) => return Ok(0),
            Err(e) => return Err(Error::api("list namespace content", e)),
        };
        let opts = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        for obj in &list.items {
            let meta = obj.metadata();
            if meta.deletion_timestamp.is_some() {
                continue;
            }
            let name = meta.name.as_deref().unwrap_or_default();
            match api.delete(name, &opts).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() || e.is_conflict() => {}
                Err(e) => return Err(Error::api("delete namespace content", e)),
            }
        }
        Ok(list.items.len())
    }
}

/// The namespaced resources the typed purgers do not cover (custom resources, and any built-in
/// kind added later), found through discovery at each purge, as upstream's deleter discovers
/// every namespaced resource that can be listed and deleted.
struct DiscoveredPurge {
    client: Client,
    /// `(group, plural)` of the typed purgers.
    typed: Vec<(String, String)>,
}

#[async_trait]
impl Purge for DiscoveredPurge {
    async fn purge(&self, ns: &str) -> Result<usize> {
        let discovery = client::dynamic::Discovery::run(&self.client)
            .await
            .map_err(|e| Error::api("discover namespaced resources", e))?;
        let opts = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        let mut remaining = 0;
        for group in &discovery.groups {
            // The preferred version only: other versions are the same objects.
            let Some(gv) = group
                .versions
                .iter()
                .find(|v| v.version == group.preferred_version)
            else {
                continue;
            };
            for res in gv.resources.iter().filter(|r| r.namespaced) {
                if self
                    .typed
                    .iter()
                    .any(|(g, p)| *g == res.group && *p == res.plural)
                {
                    continue;
                }
                let api = self.client.dynamic(res, Some(ns));
                let list = match api.list(&ListParams::default()).await {
                    Ok(l) => l,
                    // Not listable (create-only kinds such as bindings), or gone meanwhile.
                    Err(e) if e.is_not_found() || e.code() == Some(405) => continue,
                    Err(e) => return Err(Error::api("list namespace content", e)),
                };
                for obj in &list.items {
                    remaining += 1;
                    if obj.metadata.deletion_timestamp.is_some() {
                        continue;
                    }
                    match api.delete(obj.name(), &opts).await {
                        Ok(()) => {}
                        Err(e) if e.is_not_found() || e.is_conflict() => {}
                        Err(e) => return Err(Error::api("delete namespace content", e)),
                    }
                }
            }
        }
        Ok(remaining)
    }
}

fn purger<K: client::Resource>(client: &Client) -> Arc<dyn Purge> {
    Arc::new(TypedPurge::<K> {
        client: client.clone(),
        _k: std::marker::PhantomData,
    })
}

fn all_kinds(c: &Client) -> Vec<Arc<dyn Purge>> {
    let mut kinds = typed_kinds(c);
    kinds.push(Arc::new(DiscoveredPurge {
        client: c.clone(),
        typed: TYPED
            .iter()
            .map(|(g, p)| (g.to_string(), p.to_string()))
            .collect(),
    }));
    kinds
}

/// `(group, plural)` of [`typed_kinds`]; events are there twice (core and `events.k8s.io`
/// share them), and both HPA versions are one storage.
const TYPED: &[(&str, &str)] = &[
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("apps", "replicasets"),
    ("", "replicationcontrollers"),
    ("batch", "cronjobs"),
    ("batch", "jobs"),
    ("", "pods"),
    ("", "services"),
    ("", "endpoints"),
    ("discovery.k8s.io", "endpointslices"),
    ("", "configmaps"),
    ("", "secrets"),
    ("", "serviceaccounts"),
    ("", "persistentvolumeclaims"),
    ("", "podtemplates"),
    ("", "limitranges"),
    ("", "resourcequotas"),
    ("coordination.k8s.io", "leases"),
    ("autoscaling", "horizontalpodautoscalers"),
    ("policy", "poddisruptionbudgets"),
    ("networking.k8s.io", "networkpolicies"),
    ("networking.k8s.io", "ingresses"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("", "events"),
    ("events.k8s.io", "events"),
];

/// The kinds purged through their typed clients, in deletion order (workloads before pods).
fn typed_kinds(c: &Client) -> Vec<Arc<dyn Purge>> {
    use k8s_openapi::api::{
        apps, autoscaling, batch, coordination, core, discovery, networking, policy, rbac,
    };
    vec![
        purger::<apps::v1::Deployment>(c),
        purger::<apps::v1::StatefulSet>(c),
        purger::<apps::v1::DaemonSet>(c),
        purger::<apps::v1::ReplicaSet>(c),
        purger::<core::v1::ReplicationController>(c),
        purger::<batch::v1::CronJob>(c),
        purger::<batch::v1::Job>(c),
        purger::<core::v1::Pod>(c),
        purger::<core::v1::Service>(c),
        purger::<core::v1::Endpoints>(c),
        purger::<discovery::v1::EndpointSlice>(c),
        purger::<core::v1::ConfigMap>(c),
        purger::<core::v1::Secret>(c),
        purger::<core::v1::ServiceAccount>(c),
        purger::<core::v1::PersistentVolumeClaim>(c),
        purger::<core::v1::PodTemplate>(c),
        purger::<core::v1::LimitRange>(c),
        purger::<core::v1::ResourceQuota>(c),
        purger::<coordination::v1::Lease>(c),
        purger::<autoscaling::v2::HorizontalPodAutoscaler>(c),
        purger::<policy::v1::PodDisruptionBudget>(c),
        purger::<networking::v1::NetworkPolicy>(c),
        purger::<networking::v1::Ingress>(c),
        purger::<rbac::v1::Role>(c),
        purger::<rbac::v1::RoleBinding>(c),
        purger::<core::v1::Event>(c),
    ]
}

struct Inner {
    client: Client,
    namespaces: Lister<Namespace>,
    queue: RateLimitingQueue<String>,
    kinds: Vec<Arc<dyn Purge>>,
}

/// The namespace lifecycle controller.
pub struct NamespaceController {
    inner: Arc<Inner>,
    registration: HandlerRegistration,
}

impl NamespaceController {
    /// Build on the shared namespace informer.
    pub fn new(client: Client, informer: SharedIndexInformer<Namespace>) -> Self {
        let inner = Arc::new(Inner {
            kinds: all_kinds(&client),
            client,
            namespaces: informer.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("namespace"),
        });
        let registration = informer.add_event_handler(Handler(inner.clone()));
        Self {
            inner,
            registration,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the cache, then run `workers` workers until `shutdown` (the [`client::Runner`]).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let inner = self.inner.clone();
        Runner::new("namespace")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &[&self.registration],
                &shutdown,
                move |name: String| {
                    let inner = inner.clone();
                    async move {
                        Ok::<_, Error>(match inner.sync(&name).await? {
                            true => Action::AwaitChange,
                            false => Action::RequeueAfter(RECHECK_DELAY),
                        })
                    }
                },
            )
            .await;
    }
}

impl Inner {
    /// `Ok(true)`: done (or nothing to do); `Ok(false)`: content remains, check again later.
    async fn sync(&self, name: &str) -> Result<bool> {
        let Some(ns) = self.namespaces.get(name) else {
            return Ok(true);
        };
        if ns.metadata.deletion_timestamp.is_none() {
            return Ok(true);
        }
        let finalizers = ns
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone())
            .unwrap_or_default();
        if !finalizers.iter().any(|f| f == FINALIZER_KUBERNETES) {
            return Ok(true);
        }
        let mut remaining = 0;
        for kind in &self.kinds {
            remaining += kind.purge(name).await?;
        }
        if remaining > 0 {
            tracing::debug!(
                namespace = name,
                remaining,
                "namespace content still terminating"
            );
            return Ok(false);
        }
        let mut finalized = (*ns).clone();
        if let Some(spec) = finalized.spec.as_mut() {
            spec.finalizers = Some(
                finalizers
                    .into_iter()
                    .filter(|f| f != FINALIZER_KUBERNETES)
                    .collect(),
            );
        }
        let api: Api<Namespace> = self.client.api::<Namespace>(None);
        // PUT /api/v1/namespaces/{name}/finalize.
        // The client has no PUT-subresource verb: the item path `{name}/finalize` is that URL.
        match api.replace(&format!("{name}/finalize"), &finalized).await {
            Ok(_) => {
                tracing::info!(namespace = name, "namespace finalized");
                Ok(true)
            }
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(Error::api("finalize namespace", e)),
        }
    }
}

struct Handler(Arc<Inner>);

impl ResourceEventHandler<Namespace> for Handler {
    fn on_add(&self, obj: &Arc<Namespace>, _in_initial_list: bool) {
        if obj.metadata.deletion_timestamp.is_some() {
            self.0
                .queue
                .add(obj.metadata.name.clone().unwrap_or_default());
        }
    }

    fn on_update(&self, _old: &Arc<Namespace>, new: &Arc<Namespace>) {
        self.on_add(new, false);
    }

    fn on_delete(&self, _obj: DeletedObject<Namespace>) {}
}
