//! The controller manager: one informer factory, every enabled controller, one shutdown protocol.
//!
//! [`run`] creates the shared informers (pods, nodes, leases, namespaces, ReplicaSets,
//! ReplicationControllers), builds each enabled controller on them (registering handlers before the
//! informers start, so no event is missed), starts the factory and the event broadcaster, and runs
//! the controllers; each runs on a [`client::Runner`], which waits for its own caches before doing any
//! work. Cancelling `shutdown` stops the work queues (each runner drains its own, within its drain
//! deadline), waits for the controllers (bounded by [`SHUTDOWN_DEADLINE`]) and the informers, and
//! returns. With leader election configured, the controllers run only while this process holds
//! the Lease, and losing it ends `run` with [`Error::LostLeadership`](crate::Error).

use std::sync::Arc;
use std::time::Duration;

use client::leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector};
use client::record::EventBroadcaster;
use client::{Client, SharedInformerFactory};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
    ReplicationController, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::StorageClass;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::{self, Clock};
use crate::clusterroleaggregation::ClusterRoleAggregationController;
use crate::cronjob::CronJobController;
use crate::daemonset::DaemonSetsController;
use crate::disruption::{DisruptionController, DisruptionListers};
use crate::gc::collector::GarbageCollector;
use crate::job::JobController;
use crate::metrics::ManagerMetrics;
use crate::namespace::NamespaceController;
use crate::nodelifecycle::controller::{NodeLifecycleConfig, NodeLifecycleController};
use crate::podgc::{PodGcConfig, PodGcController};
use crate::replication::controller::ReplicationManager;
use crate::rootcacertpublisher::Publisher;
use crate::scheduler::controller::Scheduler;
use crate::serviceaccount::ServiceAccountsController;
use crate::tainteviction::TaintEvictionController;
use crate::ttlafterfinished::TtlAfterFinishedController;
use crate::volume::binder::PersistentVolumeController;
use crate::volume::expander::ExpandController;
use crate::volume::provisioner::LocalPathProvisioner;
use crate::{Error, Result};

/// How long shutdown waits for controllers to finish in-flight work.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);
/// The scheduler's event writes in flight at once (its broadcaster writes concurrently, as
/// kube-scheduler's events.k8s.io broadcaster does, bounded here).
const SCHEDULER_EVENT_WRITES: usize = 2;

/// Which controllers run (kube-controller-manager `--controllers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnabledControllers {
    /// `replicaset`.
    pub replicaset: bool,
    /// `replicationcontroller`.
    pub replicationcontroller: bool,
    /// `garbagecollector`.
    pub garbagecollector: bool,
    /// `namespace`.
    pub namespace: bool,
    /// `scheduler` (kube-scheduler, run in-process here).
    pub scheduler: bool,
    /// `nodelifecycle`.
    pub nodelifecycle: bool,
    /// `deployment`.
    pub deployment: bool,
    /// `podgc` (`pod-garbage-collector-controller`).
    pub podgc: bool,
    /// `serviceaccount` (`serviceaccount-controller`).
    pub serviceaccount: bool,
    /// `cronjob` (`cronjob-controller`).
    pub cronjob: bool,
    /// `job` (`job-controller`).
    pub job: bool,
    /// `statefulset` (`statefulset-controller`).
    pub statefulset: bool,
    /// `daemonset` (`daemonset-controller`).
    pub daemonset: bool,
    /// `ttl-after-finished` (`ttl-after-finished-controller`).
    pub ttl_after_finished: bool,
    /// `root-ca-cert-publisher` (`root-ca-certificate-publisher-controller`); runs only with a
    /// [root CA](ControllerManagerConfig::root_ca).
    pub root_ca_cert_publisher: bool,
    /// `persistentvolume-binder` (`persistentvolume-binder-controller`).
    pub persistentvolume_binder: bool,
    /// `persistentvolume-expander` (`persistentvolume-expander-controller`).
    pub persistentvolume_expander: bool,
    /// `local-path-provisioner`: the fake of kind's external provisioner (and CSI resizer),
    /// not a kube-controller-manager controller.
    pub local_path_provisioner: bool,
    /// `taint-eviction-controller`.
    pub taint_eviction: bool,
    /// `disruption` (`disruption-controller`).
    pub disruption: bool,
    /// `clusterrole-aggregation` (`clusterrole-aggregation-controller`).
    pub clusterrole_aggregation: bool,
    /// `endpoint` (`endpoints-controller`).
    pub endpoint: bool,
    /// `endpointslice` (`endpointslice-controller`).
    pub endpointslice: bool,
    /// `endpointslicemirroring` (`endpointslice-mirroring-controller`).
    pub endpointslice_mirroring: bool,
    /// `resourcequota` (`resourcequota-controller`).
    pub resourcequota: bool,
    /// `service-cidr-controller`.
    pub service_cidr: bool,
    /// `pvc-protection` (`persistentvolumeclaim-protection-controller`).
    pub pvc_protection: bool,
    /// `pv-protection` (`persistentvolume-protection-controller`).
    pub pv_protection: bool,
}

impl Default for EnabledControllers {
    fn default() -> Self {
        Self::all()
    }
}

impl EnabledControllers {
    /// Every controller.
    pub fn all() -> Self {
        Self {
            replicaset: true,
            replicationcontroller: true,
            garbagecollector: true,
            namespace: true,
            scheduler: true,
            nodelifecycle: true,
            deployment: true,
            podgc: true,
            serviceaccount: true,
            cronjob: true,
            job: true,
            statefulset: true,
            daemonset: true,
            ttl_after_finished: true,
            root_ca_cert_publisher: true,
            persistentvolume_binder: true,
            persistentvolume_expander: true,
            local_path_provisioner: true,
            taint_eviction: true,
            disruption: true,
            clusterrole_aggregation: true,
            endpoint: true,
            endpointslice: true,
            endpointslice_mirroring: true,
            resourcequota: true,
            service_cidr: true,
            pvc_protection: true,
            pv_protection: true,
        }
    }

    /// No controller.
    pub fn none() -> Self {
        Self {
            replicaset: false,
            replicationcontroller: false,
            garbagecollector: false,
            namespace: false,
            scheduler: false,
            nodelifecycle: false,
            deployment: false,
            podgc: false,
            serviceaccount: false,
            cronjob: false,
            job: false,
            statefulset: false,
            daemonset: false,
            ttl_after_finished: false,
            root_ca_cert_publisher: false,
            persistentvolume_binder: false,
            persistentvolume_expander: false,
            local_path_provisioner: false,
            taint_eviction: false,
            disruption: false,
            clusterrole_aggregation: false,
            endpoint: false,
            endpointslice: false,
            endpointslice_mirroring: false,
            resourcequota: false,
            service_cidr: false,
            pvc_protection: false,
            pv_protection: false,
        }
    }

    /// Parse `--controllers`: comma-separated names, `*` = all, `-name` disables (`*,-scheduler`).
    /// A controller goes by upstream's alias or its canonical name (`replicaset` or
    /// `replicaset-controller`, `podgc` or `pod-garbage-collector-controller`, as
    /// `cmd/kube-controller-manager/names`); the in-process scheduler is `scheduler`.
    pub fn parse(spec: &str) -> Result<Self> {
        let mut out = Self::none();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "*" {
                out = Self::all();
                continue;
            }
            let (on, name) = match item.strip_prefix('-') {
                Some(n) => (false, n),
                None => (true, item),
            };
            let slot = match name {
                "replicaset" | "replicaset-controller" => &mut out.replicaset,
                "replicationcontroller" | "replicationcontroller-controller" => {
                    &mut out.replicationcontroller
                }
                "garbagecollector" | "garbage-collector-controller" => &mut out.garbagecollector,
                "namespace" | "namespace-controller" => &mut out.namespace,
                "scheduler" => &mut out.scheduler,
                "deployment" | "deployment-controller" => &mut out.deployment,
                "nodelifecycle" | "node-lifecycle-controller" => &mut out.nodelifecycle,
                "podgc" | "pod-garbage-collector-controller" => &mut out.podgc,
                "serviceaccount" | "serviceaccount-controller" => &mut out.serviceaccount,
                "cronjob" | "cronjob-controller" => &mut out.cronjob,
                "job" | "job-controller" => &mut out.job,
                "statefulset" | "statefulset-controller" => &mut out.statefulset,
                "daemonset" | "daemonset-controller" => &mut out.daemonset,
                "ttl-after-finished" | "ttl-after-finished-controller" => {
                    &mut out.ttl_after_finished
                }
                "root-ca-cert-publisher" | "root-ca-certificate-publisher-controller" => {
                    &mut out.root_ca_cert_publisher
                }
                "persistentvolume-binder" | "persistentvolume-binder-controller" => {
                    &mut out.persistentvolume_binder
                }
                "persistentvolume-expander" | "persistentvolume-expander-controller" => {
                    &mut out.persistentvolume_expander
                }
                "local-path-provisioner" => &mut out.local_path_provisioner,
                "taint-eviction-controller" => &mut out.taint_eviction,
                "disruption" | "disruption-controller" => &mut out.disruption,
                "clusterrole-aggregation" | "clusterrole-aggregation-controller" => {
                    &mut out.clusterrole_aggregation
                }
                "endpoint" | "endpoints-controller" => &mut out.endpoint,
                "endpointslice" | "endpointslice-controller" => &mut out.endpointslice,
                "endpointslicemirroring" | "endpointslice-mirroring-controller" => {
                    &mut out.endpointslice_mirroring
                }
                "resourcequota" | "resourcequota-controller" => &mut out.resourcequota,
                "service-cidr-controller" => &mut out.service_cidr,
                "pvc-protection" | "persistentvolumeclaim-protection-controller" => {
                    &mut out.pvc_protection
                }
                "pv-protection" | "persistentvolume-protection-controller" => {
                    &mut out.pv_protection
                }
                other => return Err(Error::Start(format!("unknown controller {other:?}"))),
            };
            *slot = on;
        }
        Ok(out)
    }
}

/// Configuration of the controller manager.
#[derive(Clone)]
pub struct ControllerManagerConfig {
    /// Workers per replication controller kind (`--concurrent-replicaset-syncs`, 5).
    pub workers: usize,
    /// Garbage-collector workers (`--concurrent-gc-syncs`, 20).
    pub gc_workers: usize,
    /// Namespace workers (`--concurrent-namespace-syncs`, 10).
    pub namespace_workers: usize,
    /// CronJob workers (`--concurrent-cron-job-syncs`, 5).
    pub cronjob_workers: usize,
    /// Job workers (`--concurrent-job-syncs`, 5).
    pub job_workers: usize,
    /// StatefulSet workers (`--concurrent-statefulset-syncs`, 5).
    pub statefulset_workers: usize,
    /// TTL-after-finished workers (`--concurrent-ttl-after-finished-syncs`, 5).
    pub ttl_after_finished_workers: usize,
    /// DaemonSet workers (`--concurrent-daemonset-syncs`, 2).
    pub daemonset_workers: usize,
    /// Endpoints workers (`--concurrent-endpoint-syncs`, 5).
    pub endpoint_workers: usize,
    /// EndpointSlice workers (`--concurrent-service-endpoint-syncs`, 5).
    pub endpointslice_workers: usize,
    /// Endpoints per EndpointSlice (`--max-endpoints-per-slice`, 100).
    pub max_endpoints_per_slice: usize,
    /// Mirroring workers (`--mirroring-concurrent-service-endpoint-syncs`, 5).
    pub endpointslice_mirroring_workers: usize,
    /// Addresses mirrored per Endpoints subset (`--mirroring-max-endpoints-per-subset`, 1000).
    pub mirroring_max_endpoints_per_subset: usize,
    /// ResourceQuota workers per queue (`--concurrent-resource-quota-syncs`, 5).
    pub resource_quota_workers: usize,
    /// Node check period (`--node-monitor-period`, 5 s).
    pub node_monitor_period: Duration,
    /// Lease silence before a node is unreachable (`--node-monitor-grace-period`, 40 s).
    pub node_monitor_grace_period: Duration,
    /// The pod GC: `--terminated-pod-gc-threshold` (12500), its period (20 s) and quarantine (40 s).
    pub pod_gc: PodGcConfig,
    /// Informer resync (0 = never; kube-controller-manager uses a random 12–24 h).
    pub resync_period: Duration,
    /// Which controllers run.
    pub controllers: EnabledControllers,
    /// Emit a `Scheduled` event per bound pod (kube-scheduler does; costs one write per pod).
    pub scheduled_events: bool,
    /// Run only while holding this Lease (`--leader-elect`); `None` = always active.
    pub leader_election: Option<LeaderElectionConfig>,
    /// Time source for every controller decision.
    pub clock: Arc<dyn Clock>,
    /// Where the controllers publish their metrics (render with [`ManagerMetrics::render`]).
    pub metrics: Arc<ManagerMetrics>,
    /// The cluster CA bundle (PEM) the root CA publisher puts into every namespace
    /// (`--root-ca-file`); `None` leaves the publisher off.
    pub root_ca: Option<String>,
    /// Each controller's client (`--use-service-account-credentials`: its ServiceAccount's token).
    pub controller_clients: crate::clientbuilder::ControllerClients,
    /// The in-process scheduler's own client (kube-scheduler's identity); `None`: the manager's.
    pub scheduler_client: Option<Client>,
    /// The client of kind's add-ons run in-process (the local-path provisioner; kind's admin
    /// applies them); `None`: the manager's.
    pub addon_client: Option<Client>,
}

impl std::fmt::Debug for ControllerManagerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerManagerConfig")
            .field("workers", &self.workers)
            .field("gc_workers", &self.gc_workers)
            .field("node_monitor_grace_period", &self.node_monitor_grace_period)
            .field("pod_gc", &self.pod_gc)
            .field("controllers", &self.controllers)
            .field("controller_clients", &self.controller_clients)
            .field(
                "leader_election",
                &self.leader_election.as_ref().map(|l| &l.identity),
            )
            .finish()
    }
}

impl Default for ControllerManagerConfig {
    fn default() -> Self {
        Self {
            workers: 5,
            gc_workers: 20,
            namespace_workers: 10,
            cronjob_workers: 5,
            job_workers: 5,
            statefulset_workers: 5,
            ttl_after_finished_workers: 5,
            daemonset_workers: 2,
            endpoint_workers: 5,
            endpointslice_workers: 5,
            max_endpoints_per_slice: crate::endpointslice::DEFAULT_MAX_ENDPOINTS_PER_SLICE,
            endpointslice_mirroring_workers: 5,
            mirroring_max_endpoints_per_subset:
                crate::endpointslicemirroring::DEFAULT_MAX_ENDPOINTS_PER_SUBSET,
            resource_quota_workers: 5,
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: Duration::from_secs(40),
            pod_gc: PodGcConfig::default(),
            resync_period: Duration::ZERO,
            controllers: EnabledControllers::all(),
            scheduled_events: true,
            leader_election: None,
            clock: clock::system(),
            metrics: ManagerMetrics::new(),
            root_ca: None,
            controller_clients: crate::clientbuilder::ControllerClients::Simple,
            scheduler_client: None,
            addon_client: None,
        }
    }
}

/// The Lease the in-process scheduler elects its leader on, in the controller manager's lease
/// namespace (kube-scheduler's `--leader-elect-resource-name` default).
pub const SCHEDULER_LEASE: &str = "kube-scheduler";

/// Run the controller manager until `shutdown` is cancelled. With leader election, the scheduler
/// elects its own leader on the [`SCHEDULER_LEASE`] Lease (as kube-scheduler, a process of its own
/// upstream, does) and the other controllers on the configured one; losing either ends `run`.
pub async fn run(
    client: Client,
    cfg: ControllerManagerConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    let Some(le) = cfg.leader_election.clone() else {
        run_controllers(client, cfg, shutdown).await;
        return Ok(());
    };
    if !cfg.controllers.scheduler || le.lease_name == SCHEDULER_LEASE {
        return run_elected(client, cfg, le, shutdown).await;
    }
    let mut controllers = cfg.clone();
    controllers.controllers.scheduler = false;
    let scheduler_le = LeaderElectionConfig {
        lease_name: SCHEDULER_LEASE.to_owned(),
        ..le.clone()
    };
    // Its lease is written as kube-scheduler (the bootstrap role `system:kube-scheduler` may
    // update the `kube-scheduler` Lease only).
    let scheduler_client = cfg
        .scheduler_client
        .clone()
        .unwrap_or_else(|| client.clone());
    let scheduler = ControllerManagerConfig {
        controllers: EnabledControllers {
            scheduler: true,
            ..EnabledControllers::none()
        },
        leader_election: Some(scheduler_le.clone()),
        ..cfg
    };
    // Either losing its lease stops the other, as the process exits upstream.
    let stop = shutdown.child_token();
    let elected = |client, cfg, le| {
        let stop = stop.clone();
        async move {
            let result = run_elected(client, cfg, le, stop.clone()).await;
            if result.is_err() {
                stop.cancel();
            }
            result
        }
    };
    let (controllers, scheduler) = tokio::join!(
        elected(client.clone(), controllers, le),
        elected(scheduler_client, scheduler, scheduler_le),
    );
    controllers.and(scheduler)
}

/// Runs `cfg`'s controllers while this process holds `le`'s Lease.
async fn run_elected(
    client: Client,
    cfg: ControllerManagerConfig,
    le: LeaderElectionConfig,
    shutdown: CancellationToken,
) -> Result<()> {
    let elector = LeaderElector::new(client.clone(), le)
        .map_err(|e| Error::api("leader election config", e))?;
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let identity = elector.config().identity.clone();
    let callbacks = LeaderCallbacks {
        on_started_leading: Box::new(move |leading: CancellationToken| {
            Box::pin(async move {
                run_controllers(client, cfg, leading).await;
                let _ = done_tx.send(());
            })
        }),
        on_stopped_leading: Box::new(move || tracing::info!(%identity, "stopped leading")),
        on_new_leader: Some(Box::new(|leader: &str| {
            tracing::info!(leader, "new leader observed")
        })),
    };
    // `LeaderElector::run`'s future is not `Send` (it holds a non-`Sync` closure across awaits), so it
    // is driven on a blocking thread; this keeps `run` itself spawnable.
    let token = shutdown.clone();
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || handle.block_on(elector.run(token, callbacks)))
        .await
        .map_err(|e| Error::Start(format!("leader election task: {e}")))?;
    if shutdown.is_cancelled() {
        // Ran (if ever leading) to completion under the cancelled token.
        let _ = tokio::time::timeout(SHUTDOWN_DEADLINE, done_rx).await;
        Ok(())
    } else {
        Err(Error::LostLeadership)
    }
}

/// The accounts of the enabled controllers, as upstream names them (`ClientOrDie(name)` in
/// `cmd/kube-controller-manager/app`); the taint eviction controller uses the node controller's.
fn controller_accounts(en: &EnabledControllers) -> Vec<&'static str> {
    [
        (en.replicaset, "replicaset-controller"),
        (en.deployment, "deployment-controller"),
        (en.replicationcontroller, "replication-controller"),
        (en.garbagecollector, "generic-garbage-collector"),
        (en.namespace, "namespace-controller"),
        (en.serviceaccount, "service-account-controller"),
        (en.cronjob, "cronjob-controller"),
        (en.job, "job-controller"),
        (en.statefulset, "statefulset-controller"),
        (en.daemonset, "daemon-set-controller"),
        (en.ttl_after_finished, "ttl-after-finished-controller"),
        (en.root_ca_cert_publisher, "root-ca-cert-publisher"),
        (en.persistentvolume_binder, "persistent-volume-binder"),
        (en.persistentvolume_expander, "expand-controller"),
        (en.pvc_protection, "pvc-protection-controller"),
        (en.pv_protection, "pv-protection-controller"),
        (en.endpoint, "endpoint-controller"),
        (en.endpointslice, "endpointslice-controller"),
        (
            en.endpointslice_mirroring,
            "endpointslicemirroring-controller",
        ),
        (en.nodelifecycle || en.taint_eviction, "node-controller"),
        (en.disruption, "disruption-controller"),
        (
            en.clusterrole_aggregation,
            "clusterrole-aggregation-controller",
        ),
        (en.service_cidr, "service-cidrs-controller"),
        (en.podgc, "pod-garbage-collector"),
        (en.resourcequota, "resourcequota-controller"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect()
}

/// Build and run every enabled controller on one informer factory.
async fn run_controllers(
    client: Client,
    cfg: ControllerManagerConfig,
    shutdown: CancellationToken,
) {
    // No controller reads managedFields: the caches go without them (as kube-scheduler's do).
    let factory = Arc::new(
        SharedInformerFactory::new(client.clone(), cfg.resync_period).without_managed_fields(),
    );
    let broadcaster = EventBroadcaster::new(client.clone(), "controller-manager");
    // kube-scheduler is its own process with its own broadcaster (the events.k8s.io one, which
    // writes each event on its own goroutine): one `Scheduled` event per pod cannot be aggregated,
    // and written one at a time behind the controllers' events they filled the shared queue.
    let scheduler_client = cfg
        .scheduler_client
        .clone()
        .unwrap_or_else(|| client.clone());
    let scheduler_events = EventBroadcaster::new(scheduler_client.clone(), "default-scheduler")
        .with_concurrent_writes(SCHEDULER_EVENT_WRITES);
    let tracker = TaskTracker::new();
    let en = cfg.controllers;
    let clock = cfg.clock.clone();
    // Each controller's client, under upstream's account name (`ClientOrDie(name)`).
    let clients = cfg
        .controller_clients
        .obtain(&client, &controller_accounts(&en))
        .await;

    let pods = crate::cached_pod::informer(&factory);
    if let (true, Some(client)) = (en.replicaset, clients.get("replicaset-controller")) {
        let m = ReplicationManager::<ReplicaSet>::new(
            client.clone(),
            factory.informer::<ReplicaSet>(),
            pods.clone(),
            broadcaster.recorder("replicaset-controller"),
            clock.clone(),
        );
        cfg.metrics
            .register("replicaset", m.queue(), Some(m.metrics()));
        let (w, s) = (cfg.workers, shutdown.clone());
        tracker.spawn(async move { m.run(w, s).await });
    }
    if let (true, Some(client)) = (en.deployment, clients.get("deployment-controller")) {
        let d = crate::deployment::DeploymentController::new(
            client.clone(),
            factory.informer::<k8s_openapi::api::apps::v1::Deployment>(),
            factory.informer::<ReplicaSet>(),
            pods.clone(),
            broadcaster.recorder("deployment-controller"),
            clock.clone(),
        );
        cfg.metrics.register("deployment", d.queue(), None);
        let (w, s) = (cfg.workers, shutdown.clone());
        tracker.spawn(async move { d.run(w, s).await });
    }
    if let (true, Some(client)) = (
        en.replicationcontroller,
        clients.get("replication-controller"),
    ) {
        let m = ReplicationManager::<ReplicationController>::new(
            client.clone(),
            factory.informer::<ReplicationController>(),
            pods.clone(),
            broadcaster.recorder("replication-controller"),
            clock.clone(),
        );
        cfg.metrics
            .register("replicationmanager", m.queue(), Some(m.metrics()));
        let (w, s) = (cfg.workers, shutdown.clone());
        tracker.spawn(async move { m.run(w, s).await });
    }
    if let (true, Some(client)) = (
        en.garbagecollector,
        clients.get("generic-garbage-collector"),
    ) {
        let mut gc = GarbageCollector::new(client.clone());
        gc.watch_as::<Pod, _>(pods.clone());
        gc.watch(factory.informer::<ReplicaSet>());
        gc.watch(factory.informer::<ReplicationController>());
        // Deployments own ReplicaSets: without them the GC would never see those owners go.
        gc.watch(factory.informer::<k8s_openapi::api::apps::v1::Deployment>());
        // Jobs own pods and CronJobs own Jobs.
        gc.watch(factory.informer::<Job>());
        gc.watch(factory.informer::<CronJob>());
        // StatefulSets and DaemonSets own pods and ControllerRevisions; StatefulSets own claims
        // too (retention policy).
        gc.watch(factory.informer::<StatefulSet>());
        gc.watch(factory.informer::<DaemonSet>());
        gc.watch(factory.informer::<ControllerRevision>());
        gc.watch(factory.informer::<PersistentVolumeClaim>());
        // Services own their EndpointSlices; Endpoints own the mirrored ones.
        gc.watch(factory.informer::<Service>());
        gc.watch(factory.informer::<Endpoints>());
        gc.watch(factory.informer::<EndpointSlice>());
        // Custom resources, owners and dependents, as their CRDs are established.
        gc.watch_custom_resources(
            factory.clone(),
            factory.informer::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(),
        );
        cfg.metrics.register("garbagecollector", gc.queue(), None);
        let (w, s) = (cfg.gc_workers, shutdown.clone());
        tracker.spawn(async move { gc.run(w, s).await });
    }
    if let (true, Some(client)) = (en.namespace, clients.get("namespace-controller")) {
        let nc = NamespaceController::new(client.clone(), factory.informer::<Namespace>());
        cfg.metrics.register("namespace", nc.queue(), None);
        let (w, s) = (cfg.namespace_workers, shutdown.clone());
        tracker.spawn(async move { nc.run(w, s).await });
    }
    if let (true, Some(client)) = (en.serviceaccount, clients.get("service-account-controller")) {
        let sa = ServiceAccountsController::new(
            client.clone(),
            factory.informer::<Namespace>(),
            factory.informer::<ServiceAccount>(),
        );
        cfg.metrics.register("serviceaccount", sa.queue(), None);
        let s = shutdown.clone();
        // Upstream runs this controller with one worker.
        tracker.spawn(async move { sa.run(1, s).await });
    }
    if let (true, Some(client)) = (en.cronjob, clients.get("cronjob-controller")) {
        let cj = CronJobController::new(
            client.clone(),
            factory.informer::<CronJob>(),
            factory.informer::<Job>(),
            broadcaster.recorder("cronjob-controller"),
            clock.clone(),
        );
        cfg.metrics.register("cronjob", cj.queue(), None);
        let (w, s) = (cfg.cronjob_workers, shutdown.clone());
        tracker.spawn(async move { cj.run(w, s).await });
    }
    if let (true, Some(client)) = (en.job, clients.get("job-controller")) {
        let jc = JobController::new(
            client.clone(),
            factory.informer::<Job>(),
            pods.clone(),
            broadcaster.recorder("job-controller"),
            clock.clone(),
        );
        cfg.metrics.register("job", jc.queue(), None);
        let (w, s) = (cfg.job_workers, shutdown.clone());
        tracker.spawn(async move { jc.run(w, s).await });
    }
    if let (true, Some(client)) = (en.statefulset, clients.get("statefulset-controller")) {
        let sc = crate::statefulset::StatefulSetController::new(
            client.clone(),
            factory.informer::<StatefulSet>(),
            pods.clone(),
            factory.informer::<ControllerRevision>(),
            factory.informer::<PersistentVolumeClaim>(),
            broadcaster.recorder("statefulset-controller"),
            clock.clone(),
        );
        cfg.metrics.register("statefulset", sc.queue(), None);
        let (w, s) = (cfg.statefulset_workers, shutdown.clone());
        tracker.spawn(async move { sc.run(w, s).await });
    }
    if let (true, Some(client)) = (en.daemonset, clients.get("daemon-set-controller")) {
        let dsc = DaemonSetsController::new(
            client.clone(),
            factory.informer::<DaemonSet>(),
            factory.informer::<ControllerRevision>(),
            pods.clone(),
            factory.informer::<Node>(),
            broadcaster.recorder("daemonset-controller"),
            clock.clone(),
        );
        cfg.metrics.register("daemonset", dsc.queue(), None);
        let (w, s) = (cfg.daemonset_workers, shutdown.clone());
        tracker.spawn(async move { dsc.run(w, s).await });
    }
    if let (true, Some(client)) = (
        en.ttl_after_finished,
        clients.get("ttl-after-finished-controller"),
    ) {
        let ttl = TtlAfterFinishedController::new(
            client.clone(),
            factory.informer::<Job>(),
            clock.clone(),
        );
        cfg.metrics
            .register("ttl_jobs_to_delete", ttl.queue(), None);
        let (w, s) = (cfg.ttl_after_finished_workers, shutdown.clone());
        tracker.spawn(async move { ttl.run(w, s).await });
    }
    if let (true, Some(ca), Some(client)) = (
        en.root_ca_cert_publisher,
        cfg.root_ca.clone(),
        clients.get("root-ca-cert-publisher"),
    ) {
        let p = Publisher::new(
            client.clone(),
            factory.informer::<Namespace>(),
            factory.informer::<ConfigMap>(),
            ca,
        );
        cfg.metrics
            .register("root_ca_cert_publisher", p.queue(), None);
        let s = shutdown.clone();
        tracker.spawn(async move { p.run(1, s).await });
    }
    if let (true, Some(client)) = (
        en.persistentvolume_binder,
        clients.get("persistent-volume-binder"),
    ) {
        let pv = PersistentVolumeController::new(
            client.clone(),
            factory.informer::<PersistentVolume>(),
            factory.informer::<PersistentVolumeClaim>(),
            factory.informer::<StorageClass>(),
            broadcaster.recorder("persistentvolume-controller"),
        );
        cfg.metrics.register("claims", pv.claim_queue(), None);
        cfg.metrics.register("volumes", pv.volume_queue(), None);
        let s = shutdown.clone();
        tracker.spawn(async move { pv.run(s).await });
    }
    if let (true, Some(client)) = (en.pvc_protection, clients.get("pvc-protection-controller")) {
        let c = crate::volume_protection::pvc::PvcProtectionController::new(
            client.clone(),
            factory.informer::<PersistentVolumeClaim>(),
            pods.clone(),
        );
        cfg.metrics.register("pvcprotection", c.queue(), None);
        let s = shutdown.clone();
        // Upstream runs one worker (`startPersistentVolumeClaimProtectionController`).
        tracker.spawn(async move { c.run(1, s).await });
    }
    if let (true, Some(client)) = (en.pv_protection, clients.get("pv-protection-controller")) {
        let c = crate::volume_protection::pv::PvProtectionController::new(
            client.clone(),
            factory.informer::<PersistentVolume>(),
        );
        cfg.metrics.register("pvprotection", c.queue(), None);
        let s = shutdown.clone();
        // Upstream runs one worker (`startPersistentVolumeProtectionController`).
        tracker.spawn(async move { c.run(1, s).await });
    }
    if let (true, Some(client)) = (
        en.persistentvolume_expander,
        clients.get("expand-controller"),
    ) {
        let ex = ExpandController::new(
            client.clone(),
            factory.informer::<PersistentVolumeClaim>(),
            factory.informer::<PersistentVolume>(),
            factory.informer::<StorageClass>(),
            broadcaster.recorder("volume_expand"),
        );
        cfg.metrics.register("volume_expand", ex.queue(), None);
        let s = shutdown.clone();
        // Upstream's expand controller runs `defaultWorkerCount` (10) workers.
        tracker.spawn(async move { ex.run(10, s).await });
    }
    if en.local_path_provisioner {
        let client = cfg.addon_client.clone().unwrap_or_else(|| client.clone());
        let lp = LocalPathProvisioner::new(
            client.clone(),
            factory.informer::<PersistentVolume>(),
            factory.informer::<PersistentVolumeClaim>(),
            factory.informer::<StorageClass>(),
            broadcaster.recorder("rancher.io/local-path_local-path-provisioner"),
            clock.clone(),
        );
        cfg.metrics
            .register("local_path_provisioner", lp.queue(), None);
        let s = shutdown.clone();
        tracker.spawn(async move { lp.run(2, s).await });
    }
    if let (true, Some(client)) = (en.endpoint, clients.get("endpoint-controller")) {
        let ec = crate::endpoint::EndpointController::new(
            client.clone(),
            factory.informer::<Service>(),
            pods.clone(),
            factory.informer::<Endpoints>(),
            broadcaster.recorder("endpoint-controller"),
        );
        cfg.metrics.register("endpoint", ec.queue(), None);
        let (w, s) = (cfg.endpoint_workers, shutdown.clone());
        tracker.spawn(async move { ec.run(w, s).await });
    }
    if let (true, Some(client)) = (en.endpointslice, clients.get("endpointslice-controller")) {
        let esc = crate::endpointslice::EndpointSliceController::new(
            client.clone(),
            factory.informer::<Service>(),
            pods.clone(),
            factory.informer::<Node>(),
            factory.informer::<EndpointSlice>(),
            broadcaster.recorder("endpoint-slice-controller"),
            cfg.max_endpoints_per_slice,
        );
        cfg.metrics.register("endpoint_slice", esc.queue(), None);
        let (w, s) = (cfg.endpointslice_workers, shutdown.clone());
        tracker.spawn(async move { esc.run(w, s).await });
    }
    if let (true, Some(client)) = (
        en.endpointslice_mirroring,
        clients.get("endpointslicemirroring-controller"),
    ) {
        let m = crate::endpointslicemirroring::EndpointSliceMirroringController::new(
            client.clone(),
            factory.informer::<Endpoints>(),
            factory.informer::<EndpointSlice>(),
            factory.informer::<Service>(),
            broadcaster.recorder("endpoint-slice-mirroring-controller"),
            cfg.mirroring_max_endpoints_per_subset,
        );
        cfg.metrics
            .register("endpoint_slice_mirroring", m.queue(), None);
        let (w, s) = (cfg.endpointslice_mirroring_workers, shutdown.clone());
        tracker.spawn(async move { m.run(w, s).await });
    }
    if en.scheduler {
        let client = scheduler_client.clone();
        let sched = Scheduler::new(
            client.clone(),
            pods.clone(),
            factory.informer::<Node>(),
            scheduler_events.recorder("default-scheduler"),
            clock.clone(),
            cfg.scheduled_events,
        )
        .with_volume_binding(
            factory.informer::<PersistentVolumeClaim>(),
            factory.informer::<PersistentVolume>(),
            factory.informer::<StorageClass>(),
        );
        cfg.metrics.register("scheduler", sched.queue(), None);
        let s = shutdown.clone();
        tracker.spawn(async move { sched.run(s).await });
    }
    if let (true, Some(client)) = (en.nodelifecycle, clients.get("node-controller")) {
        let nl = NodeLifecycleController::new(
            client.clone(),
            factory.informer::<Node>(),
            factory.informer::<Lease>(),
            clock.clone(),
            NodeLifecycleConfig {
                monitor_period: cfg.node_monitor_period,
                grace_period: cfg.node_monitor_grace_period,
            },
        );
        cfg.metrics.register("node_lifecycle", nl.queue(), None);
        let s = shutdown.clone();
        tracker.spawn(async move { nl.run(s).await });
    }
    if let (true, Some(client)) = (en.taint_eviction, clients.get("node-controller")) {
        let te = TaintEvictionController::new(
            client.clone(),
            pods.clone(),
            factory.informer::<Node>(),
            broadcaster.recorder("taint-eviction-controller"),
            clock.clone(),
        );
        cfg.metrics.register("taint_eviction", te.queue(), None);
        let s = shutdown.clone();
        // Upstream's taint eviction queue has 8 workers (`UpdateWorkerSize`).
        tracker.spawn(async move { te.run(8, s).await });
    }
    if let (true, Some(client)) = (en.disruption, clients.get("disruption-controller")) {
        let dc = DisruptionController::new(
            client.clone(),
            factory.informer::<PodDisruptionBudget>(),
            pods.clone(),
            DisruptionListers {
                replicasets: factory.informer::<ReplicaSet>(),
                deployments: factory.informer::<k8s_openapi::api::apps::v1::Deployment>(),
                replication_controllers: factory.informer::<ReplicationController>(),
                statefulsets: factory.informer::<StatefulSet>(),
            },
            broadcaster.recorder("controllermanager"),
            clock.clone(),
        );
        cfg.metrics.register("disruption", dc.queue(), None);
        let s = shutdown.clone();
        tracker.spawn(async move { dc.run(s).await });
    }
    if let (true, Some(client)) = (
        en.clusterrole_aggregation,
        clients.get("clusterrole-aggregation-controller"),
    ) {
        let ca = ClusterRoleAggregationController::new(
            client.clone(),
            factory.informer::<ClusterRole>(),
        );
        cfg.metrics
            .register("clusterrole_aggregation", ca.queue(), None);
        let s = shutdown.clone();
        // Upstream runs it with 5 workers.
        tracker.spawn(async move { ca.run(5, s).await });
    }
    if let (true, Some(client)) = (en.service_cidr, clients.get("service-cidrs-controller")) {
        let sc = crate::servicecidrs::ServiceCidrController::new(
            client.clone(),
            factory.informer::<k8s_openapi::api::networking::v1::ServiceCIDR>(),
            factory.informer::<k8s_openapi::api::networking::v1::IPAddress>(),
            clock.clone(),
        );
        cfg.metrics.register("service_cidr", sc.queue(), None);
        let s = shutdown.clone();
        // Upstream runs it with 5 workers.
        tracker.spawn(async move { sc.run(5, s).await });
    }
    if let (true, Some(client)) = (en.podgc, clients.get("pod-garbage-collector")) {
        let gc = PodGcController::new(
            client.clone(),
            pods.clone(),
            factory.informer::<Node>(),
            clock.clone(),
            cfg.pod_gc,
        );
        let s = shutdown.clone();
        tracker.spawn(async move { gc.run(s).await });
    }
    if let (true, Some(client)) = (en.resourcequota, clients.get("resourcequota-controller")) {
        let rq = crate::resourcequota::ResourceQuotaController::new(
            client.clone(),
            crate::resourcequota::Informers {
                quotas: factory.informer(),
                pods: pods.clone(),
                services: factory.informer(),
                claims: factory.informer(),
                configmaps: factory.informer(),
                secrets: factory.informer(),
                replicationcontrollers: factory.informer(),
            },
            clock.clone(),
        );
        cfg.metrics.register("resourcequota", rq.queue(), None);
        let (w, s) = (cfg.resource_quota_workers, shutdown.clone());
        tracker.spawn(async move { rq.run(w, s).await });
    }
    tracker.close();
    let events = tokio::spawn(broadcaster.run(shutdown.clone()));
    let scheduler_events = tokio::spawn(scheduler_events.run(shutdown.clone()));
    factory.start(shutdown.clone());
    tracing::info!(?en, "controller manager started");

    shutdown.cancelled().await;
    if tokio::time::timeout(SHUTDOWN_DEADLINE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("controllers did not stop within the shutdown deadline");
    }
    if tokio::time::timeout(SHUTDOWN_DEADLINE, factory.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("informers did not stop within the shutdown deadline");
    }
    let _ = events.await;
    let _ = scheduler_events.await;
    tracing::info!("controller manager stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_flag_parses_like_kube_controller_manager() {
        let e = EnabledControllers::parse("*,-scheduler").unwrap_or(EnabledControllers::none());
        assert!(e.replicaset && e.garbagecollector && !e.scheduler);
        let only = EnabledControllers::parse("replicaset,namespace").unwrap_or_default();
        assert!(only.replicaset && only.namespace && !only.replicationcontroller);
        assert!(EnabledControllers::parse("bogus").is_err());
        // Upstream's canonical names work as well as the aliases.
        let canonical =
            EnabledControllers::parse("pod-garbage-collector-controller,replicaset-controller")
                .unwrap_or_default();
        assert!(canonical.podgc && canonical.replicaset && !canonical.namespace);
        let alias = EnabledControllers::parse("*,-podgc").unwrap_or_default();
        assert!(!alias.podgc && alias.deployment);
        let jobs =
            EnabledControllers::parse("job-controller,ttl-after-finished").unwrap_or_default();
        assert!(jobs.job && jobs.ttl_after_finished && !jobs.cronjob);
        let no_ttl =
            EnabledControllers::parse("*,-ttl-after-finished-controller,-job").unwrap_or_default();
        assert!(!no_ttl.ttl_after_finished && !no_ttl.job && no_ttl.cronjob);
        let storage = EnabledControllers::parse(
            "persistentvolume-binder-controller,persistentvolume-expander,local-path-provisioner",
        )
        .unwrap_or_default();
        assert!(storage.persistentvolume_binder && storage.persistentvolume_expander);
        assert!(storage.local_path_provisioner && !storage.job);
        let no_pv = EnabledControllers::parse("*,-persistentvolume-binder").unwrap_or_default();
        assert!(!no_pv.persistentvolume_binder && no_pv.persistentvolume_expander);
        let policy = EnabledControllers::parse(
            "taint-eviction-controller,disruption-controller,clusterrole-aggregation",
        )
        .unwrap_or_default();
        assert!(policy.taint_eviction && policy.disruption && policy.clusterrole_aggregation);
        assert!(!policy.nodelifecycle);
        let off = EnabledControllers::parse("*,-disruption,-clusterrole-aggregation-controller")
            .unwrap_or_default();
        assert!(!off.disruption && !off.clusterrole_aggregation && off.taint_eviction);
        assert!(EnabledControllers::parse("taint-eviction").is_err());
        let sts = EnabledControllers::parse("statefulset-controller").unwrap_or_default();
        assert!(sts.statefulset && !sts.job);
        let no_sts = EnabledControllers::parse("*,-statefulset").unwrap_or_default();
        assert!(!no_sts.statefulset && no_sts.job);
        let ds = EnabledControllers::parse("daemonset-controller").unwrap_or_default();
        assert!(ds.daemonset && !ds.job);
        let no_ds = EnabledControllers::parse("*,-daemonset").unwrap_or_default();
        assert!(!no_ds.daemonset && no_ds.job);
        let eps =
            EnabledControllers::parse("endpoint,endpointslice-controller,endpointslicemirroring")
                .unwrap_or_default();
        assert!(eps.endpoint && eps.endpointslice && eps.endpointslice_mirroring && !eps.job);
        let no_eps = EnabledControllers::parse(
            "*,-endpoints-controller,-endpointslice-mirroring-controller",
        )
        .unwrap_or_default();
        assert!(!no_eps.endpoint && no_eps.endpointslice && !no_eps.endpointslice_mirroring);
        let quota = EnabledControllers::parse("resourcequota-controller").unwrap_or_default();
        assert!(quota.resourcequota && !quota.job);
        assert!(
            !EnabledControllers::parse("*,-resourcequota")
                .unwrap_or_default()
                .resourcequota
        );
        let cidr = EnabledControllers::parse("service-cidr-controller").unwrap_or_default();
        assert!(cidr.service_cidr && !cidr.job);
        assert!(EnabledControllers::all().service_cidr);
        let protection =
            EnabledControllers::parse("pvc-protection,persistentvolume-protection-controller")
                .unwrap_or_default();
        assert!(protection.pvc_protection && protection.pv_protection && !protection.job);
        let unprotected = EnabledControllers::parse(
            "*,-persistentvolumeclaim-protection-controller,-pv-protection",
        )
        .unwrap_or_default();
        assert!(!unprotected.pvc_protection && !unprotected.pv_protection && unprotected.job);
    }

    #[test]
    fn defaults_match_upstream() {
        let c = ControllerManagerConfig::default();
        assert_eq!(c.workers, 5);
        assert_eq!((c.job_workers, c.ttl_after_finished_workers), (5, 5));
        assert_eq!(c.statefulset_workers, 5);
        assert!(c.controllers.statefulset);
        assert_eq!(c.daemonset_workers, 2);
        assert_eq!(c.resource_quota_workers, 5);
        assert_eq!(
            crate::resourcequota::DEFAULT_SYNC_PERIOD,
            Duration::from_secs(300)
        );
        assert_eq!(c.node_monitor_grace_period, Duration::from_secs(40));
        assert_eq!(c.pod_gc.terminated_pod_gc_threshold, 12500);
        assert_eq!(c.pod_gc.check_period, Duration::from_secs(20));
        assert_eq!(c.pod_gc.quarantine, Duration::from_secs(40));
        assert!(c.controllers.podgc);
        assert!(c.controllers.persistentvolume_binder && c.controllers.local_path_provisioner);
        assert!(c.controllers.taint_eviction && c.controllers.disruption);
        assert!(c.controllers.clusterrole_aggregation);
        assert!(c.controllers.pvc_protection && c.controllers.pv_protection);
        assert_eq!((c.endpoint_workers, c.endpointslice_workers), (5, 5));
        assert_eq!(c.endpointslice_mirroring_workers, 5);
        assert_eq!(c.max_endpoints_per_slice, 100);
        assert_eq!(c.mirroring_max_endpoints_per_subset, 1000);
    }
}
