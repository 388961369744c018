//! Each simulated node's event recorder: a client-go broadcaster per node (its own correlator,
//! bounded queue of 1,000 that drops when full, `source: {component: kubelet, host: <node>}`),
//! its writes limited to the kubelet's `eventRecordQPS`/`eventBurst` per node and sharing
//! `eventWriteConcurrency` permits with every other node of the process (they share one
//! apiserver's in-flight budget, which kubelets on separate machines do not).
//!
//! Recording never waits: [`EventRecorder::event`] is a `try_send`, so a status writer holding a
//! node's lock can hand over the events of the transition it just evaluated.

use std::sync::Arc;

use client::{Client, EventBroadcaster, EventRecorder, EventType};
use k8s_openapi::api::core::v1::ObjectReference;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::events::{self, PodEvent, Severity};
use crate::kubelet_config::KubeletConfig;
use crate::runtime::NodeState;
use crate::transform::KubeletPod;

/// Starts node `name`'s event broadcaster on `tasks` and returns its recorder. The broadcaster
/// stops when `stop` (a child of the kubelets' shutdown) is cancelled: at shutdown, or when the
/// node is removed.
pub(crate) fn start_recorder(
    client: &Client,
    cfg: &KubeletConfig,
    name: &str,
    permits: &Arc<Semaphore>,
    tasks: &TaskTracker,
    stop: &CancellationToken,
) -> EventRecorder {
    let broadcaster = EventBroadcaster::new(client.clone(), "kubelet")
        .with_host(name)
        .with_rate_limit(cfg.event_record_qps, cfg.event_burst)
        .with_write_permits(permits.clone());
    let recorder = broadcaster.recorder("");
    tasks.spawn(broadcaster.run(stop.clone()));
    recorder
}

impl NodeState {
    /// The events of a kubelet starting: `Starting`, then the container manager's
    /// `NodeAllocatableEnforced`.
    pub(crate) fn kubelet_started(&self) {
        self.node_event(events::STARTING, events::STARTING_MESSAGE);
        self.node_event(
            events::NODE_ALLOCATABLE_ENFORCED,
            events::NODE_ALLOCATABLE_MESSAGE,
        );
    }

    /// Records an event about this node (the kubelet's `nodeRef`).
    pub(crate) fn node_event(&self, reason: &str, message: &str) {
        self.recorder.event(
            &events::node_ref(&self.id.name),
            EventType::Normal,
            reason,
            message,
        );
    }

    /// Records events about `pod` (and its containers, by field path), in order. Consecutive
    /// events about one container (`Pulled`, `Created`, `Started`) share one reference while
    /// they wait to be written.
    pub(crate) fn record_pod_events(&self, pod: &KubeletPod, evs: Vec<PodEvent>) {
        let mut last: Option<Arc<ObjectReference>> = None;
        for e in evs {
            let type_ = match e.severity {
                Severity::Normal => EventType::Normal,
                Severity::Warning => EventType::Warning,
            };
            let obj = match last.take() {
                Some(obj) if obj.field_path == e.field_path => obj,
                _ => Arc::new(events::pod_ref(pod, e.field_path.as_deref())),
            };
            self.recorder.event_about(&obj, type_, e.reason, &e.message);
            last = Some(obj);
        }
    }
}
