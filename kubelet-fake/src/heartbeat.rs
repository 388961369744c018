//! Node registration and the one heartbeat wheel shared by all nodes.
//!
//! The wheel divides the renew interval (10 s) into 100 ms slots; node `i` lives in slot
//! `i mod slots`, so 1,000 nodes make a steady 100 heartbeats per second instead of a burst every
//! 10 s. A heartbeat is what the kubelet does on its two timers, merged: renew the node's Lease
//! (a PUT of the cached Lease with a new `renewTime`; on 404/409 fall back to GET or CREATE, as
//! `pkg/kubelet/nodelease` does) and compute the node status, posting it (JSON merge patch of
//! `nodes/status`) only if it changed or the report interval passed ([`crate::node`]).
//!
//! Events (the kubelet's setters, [`crate::events::node_condition_events`]): registration records
//! one event per condition the created Node has (or that an adopted Node lacked or had with
//! another status); a status post records one per condition whose status differs from the cached
//! Node's (e.g. back from `Unknown` after the node controller's grace period).
//!
//! Bounds: a node never has two heartbeats in flight (a per-node flag), so at most `nodes` tasks
//! exist, and at most `heartbeat_concurrency` of them talk to the apiserver at once (a semaphore).
//! A stopped node is skipped entirely.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use client::Patch;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::error::{Error, Result};
use crate::events::node_condition_events;
use crate::metrics::Counters;
use crate::node::{
    desired_status, lease_object, node_object, status_needs_update, NODE_LEASE_NAMESPACE,
};
use crate::runtime::Shared;

/// Width of one wheel slot.
pub const WHEEL_TICK: Duration = Duration::from_millis(100);
/// Registration attempts before [`crate::FakeKubelets::start`] gives up on a node.
const REGISTER_ATTEMPTS: u32 = 5;

/// Creates node `i` (or adopts an existing Node of that name) and records its UID.
pub(crate) async fn register(shared: &Shared, i: usize) -> Result<()> {
    let Some(node) = shared.node(i) else {
        return Ok(());
    };
    let name = node.id.name.clone();
    let api = node.client.api::<Node>(None);
    let obj = node_object(&node.id, &shared.cfg.node, Timestamp::now());
    let mut attempt = 0;
    loop {
        let outcome = match api.create(&obj).await {
            Ok(created) => Ok((created, false)),
            Err(e) if e.is_already_exists() => api.get(&name).await.map(|n| (n, true)),
            Err(e) => Err(e),
        };
        match outcome {
            Ok((n, adopted)) => {
                // A created Node's conditions are new: their events now. An adopted Node keeps its
                // stored status until the first status post, which compares against it and
                // records the changes then (once, as upstream's status setters do).
                if !adopted {
                    for (reason, message) in
                        node_condition_events(&name, &[], conditions(obj.status.as_ref()))
                    {
                        node.node_event(reason, &message);
                    }
                }
                *node.uid.lock() = n.metadata.uid;
                return Ok(());
            }
            Err(source) => {
                attempt += 1;
                if attempt >= REGISTER_ATTEMPTS {
                    return Err(Error::RegisterNode {
                        node: name,
                        source: Box::new(source),
                    });
                }
                debug!(node = %name, error = %source, attempt, "node registration failed; retrying");
                tokio::time::sleep(Duration::from_millis(100) * 2u32.pow(attempt)).await;
            }
        }
    }
}

fn conditions(s: Option<&k8s_openapi::api::core::v1::NodeStatus>) -> &[NodeCondition] {
    s.and_then(|s| s.conditions.as_deref()).unwrap_or_default()
}

/// One heartbeat of node `i`: lease renewal, then node status if due. No-op if the node is stopped
/// or already has a heartbeat in flight.
pub(crate) async fn heartbeat(shared: &Shared, i: usize) {
    let Some(node) = shared.node(i) else {
        return;
    };
    if !node.running.load(Ordering::SeqCst) || node.heartbeat_in_flight.swap(true, Ordering::SeqCst)
    {
        return;
    }
    renew_lease(shared, i).await;
    post_status(shared, i).await;
    node.heartbeat_in_flight.store(false, Ordering::SeqCst);
}

async fn renew_lease(shared: &Shared, i: usize) {
    let Some(node) = shared.node(i) else {
        return;
    };
    let name = node.id.name.as_str();
    let api = node.client.api::<Lease>(Some(NODE_LEASE_NAMESPACE));
    let renewed = |mut l: Lease| {
        let spec = l.spec.get_or_insert_with(Default::default);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.holder_identity = Some(name.to_string());
        spec.lease_duration_seconds =
            Some(i32::try_from(shared.cfg.lease_duration.as_secs()).unwrap_or(i32::MAX));
        l
    };
    let cached = node.lease.lock().clone();
    if let Some(lease) = cached {
        match api.replace(name, &renewed(lease)).await {
            Ok(stored) => {
                *node.lease.lock() = Some(stored);
                Counters::inc(&shared.counters.lease_renewals);
                return;
            }
            // Someone changed or removed it: re-read below.
            Err(e) if e.is_conflict() || e.is_not_found() => {}
            Err(e) => {
                Counters::inc(&shared.counters.lease_errors);
                warn!(node = name, error = %e, "lease renewal failed");
                return;
            }
        }
    }
    let result = match api.get(name).await {
        Ok(existing) => api.replace(name, &renewed(existing)).await,
        Err(e) if e.is_not_found() => {
            let uid = node.uid.lock().clone();
            let fresh = lease_object(
                name,
                uid.as_deref(),
                shared.cfg.lease_duration,
                Timestamp::now(),
            );
            api.create(&fresh).await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(stored) => {
            *node.lease.lock() = Some(stored);
            Counters::inc(&shared.counters.lease_renewals);
        }
        Err(e) => {
            *node.lease.lock() = None;
            Counters::inc(&shared.counters.lease_errors);
            warn!(node = name, error = %e, "lease get/create failed");
        }
    }
}

async fn post_status(shared: &Shared, i: usize) {
    let Some(node) = shared.node(i) else {
        return;
    };
    let name = node.id.name.as_str();
    let now = Timestamp::now();
    let cached = shared.node_informer.indexer().get_by_key(name);
    let current = cached.as_ref().and_then(|n| n.status.as_ref());
    let desired = desired_status(&node.id, &shared.cfg.node, current, now);
    let last = *node.last_report.lock();
    if !status_needs_update(
        current,
        &desired,
        last,
        shared.cfg.node_status_report_interval,
        now,
    ) {
        return;
    }
    if let Some(current) = current {
        for (reason, message) in
            node_condition_events(name, conditions(Some(current)), conditions(Some(&desired)))
        {
            node.node_event(reason, &message);
        }
    }
    let body = match serde_json::to_value(&desired) {
        Ok(v) => serde_json::json!({ "status": v }),
        Err(e) => {
            warn!(node = name, error = %e, "encoding node status failed");
            return;
        }
    };
    let api = node.client.api::<Node>(None);
    match api.patch_status(name, &Patch::Merge(body)).await {
        Ok(stored) => {
            *node.last_report.lock() = Some(now);
            if stored.metadata.uid.is_some() {
                *node.uid.lock() = stored.metadata.uid;
            }
            Counters::inc(&shared.counters.node_status_writes);
        }
        Err(e) if e.is_not_found() => {
            // Our Node was deleted: a kubelet registers again.
            Counters::inc(&shared.counters.node_status_errors);
            if let Err(e) = register(shared, i).await {
                warn!(node = name, error = %e, "re-registering deleted node failed");
            }
        }
        Err(e) => {
            Counters::inc(&shared.counters.node_status_errors);
            warn!(node = name, error = %e, "node status update failed");
        }
    }
}

/// Runs the wheel until `shutdown`; `urgent` asks for an immediate heartbeat of a node.
pub(crate) async fn wheel(
    shared: Arc<Shared>,
    mut urgent: mpsc::Receiver<usize>,
    shutdown: CancellationToken,
) {
    let slots =
        (shared.cfg.lease_renew_interval.as_millis() / WHEEL_TICK.as_millis()).max(1) as usize;
    let tick = shared.cfg.lease_renew_interval / u32::try_from(slots).unwrap_or(u32::MAX);
    let mut ticker = tokio::time::interval(tick.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first tick completes at once; node heartbeats were just done by start().
    ticker.tick().await;
    let permits = Arc::new(Semaphore::new(shared.cfg.heartbeat_concurrency));
    let tasks = TaskTracker::new();
    let spawn = |i: usize| {
        let Some(node) = shared.node(i) else {
            return;
        };
        if !node.running.load(Ordering::SeqCst) || node.heartbeat_in_flight.load(Ordering::SeqCst) {
            return;
        }
        let shared = shared.clone();
        let permits = permits.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            let permit = tokio::select! {
                _ = shutdown.cancelled() => return,
                p = permits.acquire_owned() => p,
            };
            if permit.is_ok() {
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = heartbeat(&shared, i) => {}
                }
            }
        });
    };
    let mut slot = 0usize;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(i) = urgent.recv() => {
                if let Some(node) = shared.node(i) {
                    // A restarted node posts its status at once, changed or not.
                    *node.last_report.lock() = None;
                    spawn(i);
                }
            }
            _ = ticker.tick() => {
                // Nodes added while running join their slot from the next round.
                for i in (slot..shared.node_count()).step_by(slots) {
                    spawn(i);
                }
                slot = (slot + 1) % slots;
            }
        }
    }
    tasks.close();
    tasks.wait().await;
}
