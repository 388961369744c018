//! `NodeLifecycleController`: watches node Leases and marks silent nodes unreachable.
//!
//! Every `monitor_period` (5 s upstream, `--node-monitor-period`) the controller records each node's
//! Lease `renewTime` and Ready heartbeat in its [`HealthTracker`] (local clock) and applies
//! [`decide_node`] (conditions via a status patch, taints via a spec patch guarded by the node's
//! resourceVersion). As in 1.33 it evicts nothing itself: the `NoExecute` unreachable taint it sets
//! is acted on by the taint eviction controller ([`crate::tainteviction`]). The loop reads only
//! informer caches besides its writes, and is stopped by the shutdown token between passes (a pass
//! in flight finishes within the runner's drain deadline).

use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::{Client, HasSynced, Lister, Patch, Runner, SharedIndexInformer};
use jiff::SignedDuration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::decide::{decide_node, ready_heartbeat, HealthTracker, NodeDecision};
use crate::clock::Clock;
use crate::{Error, Result};

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
        Self {
            client,
            node_lister: nodes.lister(),
            lease_lister: leases.lister(),
            nodes,
            leases,
            clock,
            cfg,
            health: Mutex::new(HealthTracker::new()),
        }
    }

    /// Wait for caches, then monitor every `monitor_period` until `shutdown` (upstream:
    /// `wait.UntilWithContext(monitorNodeHealth, nodeMonitorPeriod)`, on the [`client::Runner`]).
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!(grace = ?self.cfg.grace_period, "node lifecycle controller starting");
        let synced: [&dyn HasSynced; 2] = [&self.nodes, &self.leases];
        Runner::new("nodelifecycle")
            .run_periodic(self.cfg.monitor_period, &synced, &shutdown, || {
                self.monitor()
            })
            .await;
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
                    if stale {
                        tracing::info!(node = %name, "node stopped renewing its lease: marked unreachable");
                    } else {
                        tracing::info!(node = %name, "node lease renewed: unreachable taints removed");
                    }
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
        if cur_conditions != conditions {
            let patch = serde_json::json!({"status": {"conditions": conditions}});
            api.patch_status(name, &Patch::Strategic(patch))
                .await
                .map_err(|e| Error::api("update node conditions", e))?;
        }
        let cur_taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or(&[]);
        if cur_taints != taints {
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": taints},
            });
            api.patch(name, &Patch::Merge(patch))
                .await
                .map_err(|e| Error::api("update node taints", e))?;
        }
        Ok(())
    }
}
