//! `TaintEvictionController`: the informer wiring, the scheduled evictions and the writes.
//!
//! The work queue holds pod keys. A node whose `NoExecute` taints change queues every pod on it
//! (found through a `spec.nodeName` index on the shared pod informer); a pod that is added, or
//! whose node or tolerations change, is queued if its node has such taints or an eviction is
//! scheduled for it; a deleted pod is queued so its scheduled eviction is cancelled. A sync
//! reads the caches, applies [`decide`], and keeps the scheduled evictions (one per pod, so
//! bounded by the pod count) in a map; a future eviction requeues the key for its instant (the
//! delaying queue is upstream's timed worker). An eviction records `TaintManagerEviction`
//! ("Marking for deletion Pod ns/name"), sets the pod's `DisruptionTarget` condition (reason
//! `DeletionByTaintManager`) on a fresh read, then deletes the pod with its UID as a
//! precondition; a cancelled one records "Cancelling deletion of Pod ns/name". Failed writes are
//! retried with the queue's per-key back-off.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Client, DeleteParams, DeletedObject,
    HandlerRegistration, Indexer, Lister, Preconditions, RateLimitingQueue, ResourceEventHandler,
    Runner, SharedIndexInformer,
};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::decide::{decide, no_execute_taints, Decision, Scheduled};
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::{Error, Result};

/// The pod index by node (upstream's `spec.nodeName` index on the shared pod informer).
pub const NODE_NAME_INDEX: &str = "spec.nodeName";
/// The event reason of both the eviction and its cancellation.
pub const REASON_EVICTION: &str = "TaintManagerEviction";
/// `DisruptionTarget` pod condition type.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// `PodReasonDeletionByTaintManager`.
pub const REASON_DELETION_BY_TAINT_MANAGER: &str = "DeletionByTaintManager";

struct Inner {
    client: Client,
    pods: Lister<CachedPod>,
    pod_index: Indexer<CachedPod>,
    nodes: Lister<Node>,
    queue: RateLimitingQueue<String>,
    // Per pod key, the eviction scheduled for it; written by the workers (one key is never
    // synced by two workers at once), read by the pod handler.
    scheduled: Mutex<HashMap<String, Scheduled>>,
    recorder: EventRecorder,
    clock: Arc<dyn Clock>,
}

/// The taint eviction controller (`taint-eviction-controller`).
pub struct TaintEvictionController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 2],
}

impl TaintEvictionController {
    /// Build on the shared pod and node informers.
    pub fn new(
        client: Client,
        pods: SharedIndexInformer<CachedPod>,
        nodes: SharedIndexInformer<Node>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let by_node: client::IndexFunc<CachedPod> = Arc::new(|p: &CachedPod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty())
                .into_iter()
                .collect()
        });
        // Another controller may have added the same index: that one serves as well.
        if let Err(e) = pods.add_indexers([(NODE_NAME_INDEX.to_string(), by_node)].into()) {
            tracing::debug!(error = %e, "pod node-name index not added");
        }
        let inner = Arc::new(Inner {
            client,
            pods: pods.lister(),
            pod_index: pods.indexer(),
            nodes: nodes.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter("taint_eviction"),
            scheduled: Mutex::new(HashMap::new()),
            recorder,
            clock,
        });
        let registrations = [
            pods.add_event_handler(PodHandler(inner.clone())),
            nodes.add_event_handler(NodeHandler(inner.clone())),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then run `workers` workers until `shutdown` (upstream runs 8).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let [a, b] = &self.registrations;
        let synced: [&dyn client::HasSynced; 2] = [a, b];
        let inner = self.inner.clone();
        Runner::new("taint_eviction")
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        Ok::<_, Error>(match inner.sync(&key).await? {
                            Some(after) => Action::RequeueAfter(after),
                            None => Action::AwaitChange,
                        })
                    }
                },
            )
            .await;
    }
}

fn pod_ref(ns: &str, name: &str, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(ns.into()),
        name: Some(name.into()),
        uid,
        ..Default::default()
    }
}

impl Inner {
    /// `handlePodUpdate` + `processPodOnNode` for one pod; `Some(d)`: look again after `d`.
    async fn sync(&self, key: &str) -> Result<Option<Duration>> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(None);
        };
        let Some(pod) = self.pods.namespace(ns).get(name) else {
            self.cancel(key, ns, name, None);
            return Ok(None);
        };
        if pod.metadata.deletion_timestamp.is_some() {
            // Already going: nothing left to evict, nothing to announce.
            self.scheduled.lock().remove(key);
            return Ok(None);
        }
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| self.nodes.get(n));
        let taints = node.as_deref().map(no_execute_taints).unwrap_or_default();
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or(&[]);
        let now = self.clock.now();
        let existing = self.scheduled.lock().get(key).copied();
        let decision = decide(tolerations, &taints, existing, now);
        match decision {
            Decision::Cancel => {
                self.cancel(key, ns, name, pod.metadata.uid.clone());
                Ok(None)
            }
            Decision::Schedule(s) if s.fire_at > now => {
                self.scheduled.lock().insert(key.to_string(), s);
                let wait = Duration::try_from(s.fire_at.duration_since(now)).unwrap_or_default();
                tracing::debug!(pod = key, ?wait, "eviction scheduled");
                Ok(Some(wait))
            }
            Decision::Schedule(_) | Decision::EvictNow => {
                self.evict(key, &pod).await?;
                self.scheduled.lock().remove(key);
                Ok(None)
            }
        }
    }

    /// `cancelWorkWithEvent`: forget a scheduled eviction, announcing it if there was one.
    fn cancel(&self, key: &str, ns: &str, name: &str, uid: Option<String>) {
        if self.scheduled.lock().remove(key).is_some() {
            tracing::info!(pod = key, "cancelling scheduled taint eviction");
            self.recorder.event(
                &pod_ref(ns, name, uid),
                EventType::Normal,
                REASON_EVICTION,
                &format!("Cancelling deletion of Pod {ns}/{name}"),
            );
        }
    }

    /// `deletePodHandler` + `addConditionAndDeletePod`.
    async fn evict(&self, key: &str, cached: &CachedPod) -> Result<()> {
        let ns = cached.metadata.namespace.as_deref().unwrap_or_default();
        let name = cached.metadata.name.as_deref().unwrap_or_default();
        tracing::info!(pod = key, "deleting pod for a NoExecute taint");
        self.recorder.event(
            &pod_ref(ns, name, cached.metadata.uid.clone()),
            EventType::Normal,
            REASON_EVICTION,
            &format!("Marking for deletion Pod {ns}/{name}"),
        );
        let api = self.client.api::<Pod>(Some(ns));
        let mut fresh = match api.get(name).await {
            Ok(p) => p,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(Error::api("get pod", e)),
        };
        if fresh.metadata.uid != cached.metadata.uid || fresh.metadata.deletion_timestamp.is_some()
        {
            return Ok(());
        }
        if set_disruption_target(&mut fresh, Time(self.clock.now())) {
            match api.replace_status(name, &fresh).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(Error::api("set pod DisruptionTarget condition", e)),
            }
        }
        let opts = DeleteParams {
            preconditions: Some(Preconditions {
                uid: cached.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &opts).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(Error::api("delete pod", e)),
        }
    }

    fn enqueue_pods_on(&self, node: &str) {
        for p in self.pod_index.by_index(NODE_NAME_INDEX, node) {
            self.queue.add(key_of_meta(&p.metadata));
        }
    }

    /// A pod concerns this controller if its node has `NoExecute` taints or it has an eviction
    /// scheduled (which may need cancelling).
    fn concerns(&self, pod: &CachedPod) -> bool {
        let tainted = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| self.nodes.get(n))
            .is_some_and(|n| !no_execute_taints(&n).is_empty());
        tainted
            || self
                .scheduled
                .lock()
                .contains_key(&key_of_meta(&pod.metadata))
    }
}

/// `UpdatePodCondition` for `DisruptionTarget=True` (reason `DeletionByTaintManager`): whether
/// the pod's status changed. The transition time moves only when the status does.
pub fn set_disruption_target(pod: &mut Pod, now: Time) -> bool {
    let want = PodCondition {
        type_: DISRUPTION_TARGET.into(),
        status: "True".into(),
        reason: Some(REASON_DELETION_BY_TAINT_MANAGER.into()),
        message: Some("Taint manager: deleting due to NoExecute taint".into()),
        last_transition_time: Some(now),
        ..Default::default()
    };
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == DISRUPTION_TARGET) {
        None => {
            conditions.push(want);
            true
        }
        Some(c) => {
            let mut next = want;
            if c.status == next.status {
                next.last_transition_time = c.last_transition_time.clone();
            }
            next.last_probe_time = c.last_probe_time.clone();
            let changed = *c != next;
            *c = next;
            changed
        }
    }
}

struct PodHandler(Arc<Inner>);

impl ResourceEventHandler<CachedPod> for PodHandler {
    fn on_add(&self, obj: &Arc<CachedPod>, _in_initial_list: bool) {
        if self.0.concerns(obj) {
            self.0.queue.add(key_of_meta(&obj.metadata));
        }
    }

    fn on_update(&self, old: &Arc<CachedPod>, new: &Arc<CachedPod>) {
        let (o, n) = (old.spec.as_ref(), new.spec.as_ref());
        let moved = o.and_then(|s| s.node_name.as_ref()) != n.and_then(|s| s.node_name.as_ref());
        let retolerated =
            o.and_then(|s| s.tolerations.as_ref()) != n.and_then(|s| s.tolerations.as_ref());
        if (moved || retolerated) && self.0.concerns(new) {
            self.0.queue.add(key_of_meta(&new.metadata));
        }
    }

    fn on_delete(&self, obj: DeletedObject<CachedPod>) {
        let key = key_of_meta(&obj.object().metadata);
        if self.0.scheduled.lock().contains_key(&key) {
            self.0.queue.add(key);
        }
    }
}

struct NodeHandler(Arc<Inner>);

impl ResourceEventHandler<Node> for NodeHandler {
    fn on_add(&self, obj: &Arc<Node>, _in_initial_list: bool) {
        if !no_execute_taints(obj).is_empty() {
            self.0
                .enqueue_pods_on(obj.metadata.name.as_deref().unwrap_or_default());
        }
    }

    fn on_update(&self, old: &Arc<Node>, new: &Arc<Node>) {
        if no_execute_taints(old) != no_execute_taints(new) {
            self.0
                .enqueue_pods_on(new.metadata.name.as_deref().unwrap_or_default());
        }
    }

    fn on_delete(&self, obj: DeletedObject<Node>) {
        // Its pods lose their taints: scheduled evictions are cancelled.
        self.0
            .enqueue_pods_on(obj.object().metadata.name.as_deref().unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_util::testing::ts;

    #[test]
    fn disruption_target_is_set_once() {
        let mut p = Pod::default();
        assert!(set_disruption_target(&mut p, Time(ts(10))));
        assert!(!set_disruption_target(&mut p, Time(ts(20))));
        let c = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == DISRUPTION_TARGET))
            .cloned()
            .unwrap_or_default();
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("DeletionByTaintManager"));
        assert_eq!(c.last_transition_time, Some(Time(ts(10))));
    }
}
