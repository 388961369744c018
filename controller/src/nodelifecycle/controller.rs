//! `NodeLifecycleController`: watches node Leases and marks silent nodes unreachable, and keeps
//! each node's Ready `NoExecute` taint (`not-ready` / `unreachable`) in step with its Ready
//! condition.
//!
//! Every `monitor_period` (5 s upstream, `--node-monitor-period`) the controller records each node's
//! Lease `renewTime` and Ready heartbeat in its [`HealthTracker`] (local clock) and applies
//! [`decide_node`] (conditions via a status patch, taints via a spec patch guarded by the node's
//! resourceVersion). As in 1.33 it evicts nothing itself: the `NoExecute` taints it sets are
//! acted on by the taint eviction controller ([`crate::tainteviction`]). The loop reads only
//! informer caches besides its writes, and is stopped by the shutdown token between passes (a pass
//! in flight finishes within the runner's drain deadline).
//!
//! Beside the loop, every node add or update queues the node's name for the `NoSchedule` tainting
//! pass ([`no_schedule_taints`], upstream's `nodeUpdateQueue` and `doNoScheduleTaintingPass`),
//! run by [`NO_SCHEDULE_WORKERS`] workers: a new node's `not-ready` taint goes as soon as the node
//! reports Ready. The queue holds node names, so it is bounded by the node count; a failed write
//! (a conflict with another writer) is retried with the queue's per-key back-off.

use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::{
    Action, Client, DeletedObject, HandlerRegistration, HasSynced, Lister, Patch,
    RateLimitingQueue, ResourceEventHandler, Runner, SharedIndexInformer,
};
use jiff::SignedDuration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::decide::{decide_node, ready_heartbeat, HealthTracker, NodeDecision};
use super::no_schedule::no_schedule_taints;
use crate::clock::Clock;
use crate::{Error, Result};

/// Workers of the `NoSchedule` tainting pass (upstream's `nodeUpdateWorkerSize`).
pub const NO_SCHEDULE_WORKERS: usize = 8;

/// Namespace of node heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Timings of the node lifecycle controller.
#[derive(Debug, Clone, Copy)]
pub struct NodeLifecycleConfig {
    /// How often nodes are checked (`--node-monitor-period`, 5 s).
    pub monitor_period: Duration,
    /// Silence after which a node is unreachable (`--node-monitor-grace-period`, 40 s).
    pub grace_period: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        Self {
            monitor_period: Duration::from_secs(5),
            grace_period: Duration::from_secs(40),
        }
    }
}

/// The node lifecycle controller.
pub struct NodeLifecycleController {
    client: Client,
    nodes: SharedIndexInformer<Node>,
    leases: SharedIndexInformer<Lease>,
    node_lister: Lister<Node>,
    lease_lister: Lister<Lease>,
    clock: Arc<dyn Clock>,
    cfg: NodeLifecycleConfig,
    health: Mutex<HealthTracker>,
    /// Names of nodes whose `NoSchedule` taints may need changing.
    no_schedule: RateLimitingQueue<String>,
    node_events: HandlerRegistration,
}

/// Queues every added or updated node for the `NoSchedule` tainting pass.
struct NodeHandler(RateLimitingQueue<String>);

impl ResourceEventHandler<Node> for NodeHandler {
    fn on_add(&self, obj: &Arc<Node>, _in_initial_list: bool) {
        if let Some(name) = &obj.metadata.name {
            self.0.add(name.clone());
        }
    }

    fn on_update(&self, _old: &Arc<Node>, new: &Arc<Node>) {
        self.on_add(new, false);
    }

    fn on_delete(&self, _obj: DeletedObject<Node>) {}
}

impl NodeLifecycleController {
    /// Build on the shared node and lease informers.
    pub fn new(
        client: Client,
        nodes: SharedIndexInformer<Node>,
        leases: SharedIndexInformer<Lease>,
        clock: Arc<dyn Clock>,
        cfg: NodeLifecycleConfig,
    ) -> Self {
        let no_schedule = RateLimitingQueue::with_default_controller_rate_limiter("node_lifecycle");
        let node_events = nodes.add_event_handler(NodeHandler(no_schedule.clone()));
        Self {
            client,
            node_lister: nodes.lister(),
            lease_lister: leases.lister(),
            nodes,
            leases,
            clock,
            cfg,
            health: Mutex::new(HealthTracker::new()),
            no_schedule,
            node_events,
        }
    }

    /// The queue of the `NoSchedule` tainting pass (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.no_schedule.clone()
    }

    /// Wait for caches, then monitor every `monitor_period` until `shutdown` (upstream:
    /// `wait.UntilWithContext(monitorNodeHealth, nodeMonitorPeriod)`, on the [`client::Runner`]).
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!(grace = ?self.cfg.grace_period, "node lifecycle controller starting");
        let this = Arc::new(self);
        let synced: [&dyn HasSynced; 2] = [&this.nodes, &this.leases];
        let tainting: [&dyn HasSynced; 1] = [&this.node_events];
        let worker = this.clone();
        let taint_pass = Runner::new("nodelifecycle_no_schedule")
            .workers(NO_SCHEDULE_WORKERS)
            .run_workers(
                this.no_schedule.clone(),
                &tainting,
                &shutdown,
                move |name: String| {
                    let worker = worker.clone();
                    async move {
                        worker
                            .taint_no_schedule(&name)
                            .await
                            .map(|()| Action::AwaitChange)
                    }
                },
            );
        let monitor = Runner::new("nodelifecycle").run_periodic(
            this.cfg.monitor_period,
            &synced,
            &shutdown,
            || this.monitor(),
        );
        tokio::join!(taint_pass, monitor);
    }

    /// `doNoScheduleTaintingPass` for the node `name`, from the cache; the taint list is
    /// written guarded by the node's resourceVersion.
    async fn taint_no_schedule(&self, name: &str) -> Result<()> {
        let Some(node) = self.node_lister.get(name) else {
            return Ok(());
        };
        let Some(taints) = no_schedule_taints(&node, self.clock.now()) else {
            return Ok(());
        };
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match self
            .client
            .api::<Node>(None)
            .patch(name, &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                tracing::debug!(node = %name, "node condition taints updated");
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("update node condition taints", e)),
        }
    }

    /// One monitoring pass over every node.
    pub async fn monitor(&self) -> Result<()> {
        let now = self.clock.now();
        let grace = SignedDuration::try_from(self.cfg.grace_period)
            .unwrap_or(SignedDuration::from_secs(40));
        let nodes = self.node_lister.list(&Selector::everything());
        let mut first_err = None;
        for node in &nodes {
            let Some(name) = node.metadata.name.clone() else {
                continue;
            };
            let renew = self
                .lease_lister
                .get(&format!("{NODE_LEASE_NAMESPACE}/{name}"))
                .and_then(|l| {
                    l.spec
                        .as_ref()
                        .and_then(|s| s.renew_time.as_ref())
                        .map(|t| t.0)
                });
            let stale = {
                let mut h = self.health.lock();
                h.observe(&name, renew, ready_heartbeat(node), now);
                h.is_stale(&name, now, grace)
            };
            match decide_node(node, stale, now) {
                NodeDecision::Nothing => {}
                NodeDecision::Update { conditions, taints } => {
                    if let Err(e) = self.apply(node, &conditions, &taints).await {
                        first_err.get_or_insert(e);
                    }
                    let no_execute: Vec<&str> = taints
                        .iter()
                        .filter(|t| t.effect == "NoExecute")
                        .map(|t| t.key.as_str())
                        .collect();
                    tracing::info!(node = %name, stale, ?no_execute, "node conditions and NoExecute taints updated");
                }
            }
        }
        // Forget deleted nodes so the tracker stays bounded by the node count.
        {
            let names: std::collections::HashSet<&str> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            let mut h = self.health.lock();
            h.retain(|n| names.contains(n));
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn apply(
        &self,
        node: &Node,
        conditions: &[k8s_openapi::api::core::v1::NodeCondition],
        taints: &[k8s_openapi::api::core::v1::Taint],
    ) -> Result<()> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let api = self.client.api::<Node>(None);
        let cur_conditions = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or(&[]);
        // The taint patch below is guarded by the version the conditions' write leaves, not the
        // informer's from before it (which would always conflict after that write).
        let mut resource_version = node.metadata.resource_version.clone();
        if cur_conditions != conditions {
            let patch = serde_json::json!({"status": {"conditions": conditions}});
            let written = api
                .patch_status(name, &Patch::Strategic(patch))
                .await
                .map_err(|e| Error::api("update node conditions", e))?;
            resource_version = written.metadata.resource_version;
        }
        let cur_taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or(&[]);
        if cur_taints != taints {
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": resource_version},
                "spec": {"taints": taints},
            });
            api.patch(name, &Patch::Merge(patch))
                .await
                .map_err(|e| Error::api("update node taints", e))?;
        }
        Ok(())
    }
}
