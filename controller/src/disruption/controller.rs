//! `DisruptionController`: informer wiring, the PDB sync and the stale-condition cleanup.
//!
//! Two work queues, each with one worker as upstream: PDB keys (a PDB changed, or a pod it
//! selects was added, changed or deleted) and pod keys whose `DisruptionTarget` condition may
//! have gone stale. A PDB sync ([`Inner::sync`]) reads its pods from the cache, finds the
//! expected count through the pods' controllers ([`super::finder`]), computes the status
//! ([`super::decide`]) and writes it with `UpdateStatus` only when it changed; an entry of
//! `disruptedPods` that is still pending brings the PDB back when it expires. A sync that fails
//! (except on a write conflict, which is simply retried) writes the fail-safe status instead:
//! `disruptionsAllowed: 0` and `DisruptionAllowed=False` with reason `SyncFailed`, so the
//! eviction subresource refuses until a later sync succeeds. Events are upstream's: `NoPods`,
//! `CalculateExpectedPodCountFailed`, `UnmanagedPods` on the PDB, `NotDeleted` and
//! `MultiplePodDisruptionBudgets` on pods.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::labels::{label_selector_as_selector, Selector};
use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Client, DeletedObject, HandlerRegistration,
    HasSynced, Lister, Patch, RateLimitingQueue, ResourceEventHandler, RestMapper, Runner,
    SharedIndexInformer,
};
use jiff::SignedDuration;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use tokio_util::sync::CancellationToken;

use super::decide::{
    count_healthy, disrupted_pods, expected_and_desired, fail_safe_status, needs_scale,
    next_status, stale_disruption_after, stale_disruption_reset, Counts,
};
use super::finder::Finders;
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::{Error, Result};

/// The workload informers whose listers the finders read.
pub struct DisruptionListers {
    /// apps/v1 ReplicaSets.
    pub replicasets: SharedIndexInformer<ReplicaSet>,
    /// apps/v1 Deployments.
    pub deployments: SharedIndexInformer<Deployment>,
    /// core/v1 ReplicationControllers.
    pub replication_controllers: SharedIndexInformer<ReplicationController>,
    /// apps/v1 StatefulSets.
    pub statefulsets: SharedIndexInformer<StatefulSet>,
}

struct Inner {
    client: Client,
    pdbs: Lister<PodDisruptionBudget>,
    pods: Lister<CachedPod>,
    finders: Finders,
    queue: RateLimitingQueue<String>,
    stale: RateLimitingQueue<String>,
    recorder: EventRecorder,
    clock: Arc<dyn Clock>,
}

/// The disruption controller (`disruption`).
pub struct DisruptionController {
    inner: Arc<Inner>,
    registrations: [HandlerRegistration; 2],
    listers: DisruptionListers,
}

/// Why a sync failed.
enum SyncError {
    /// A write conflict: retry without the fail-safe write.
    Conflict(Error),
    /// Anything else: the message of the `SyncFailed` condition.
    Failed(String),
}

impl DisruptionController {
    /// Build on the shared PDB, pod and workload informers.
    pub fn new(
        client: Client,
        pdbs: SharedIndexInformer<PodDisruptionBudget>,
        pods: SharedIndexInformer<CachedPod>,
        listers: DisruptionListers,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let finders = Finders {
            replicasets: listers.replicasets.lister(),
            deployments: listers.deployments.lister(),
            replication_controllers: listers.replication_controllers.lister(),
            statefulsets: listers.statefulsets.lister(),
            mapper: RestMapper::new(client.clone()),
            client: client.clone(),
        };
        let inner = Arc::new(Inner {
            client,
            pdbs: pdbs.lister(),
            pods: pods.lister(),
            finders,
            queue: RateLimitingQueue::with_default_controller_rate_limiter("disruption"),
            stale: RateLimitingQueue::with_default_controller_rate_limiter(
                "disruption_stale_pod_disruption",
            ),
            recorder,
            clock,
        });
        let registrations = [
            pdbs.add_event_handler(PdbHandler(inner.clone())),
            pods.add_event_handler(PodHandler(inner.clone())),
        ];
        Self {
            inner,
            registrations,
            listers,
        }
    }

    /// The PDB work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// Wait for the caches, then run one PDB worker and one stale-condition worker until
    /// `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let [a, b] = &self.registrations;
        let l = &self.listers;
        let synced: [&dyn HasSynced; 6] = [
            a,
            b,
            &l.replicasets,
            &l.deployments,
            &l.replication_controllers,
            &l.statefulsets,
        ];
        let pdbs = {
            let inner = self.inner.clone();
            Runner::new("disruption").run_workers(
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
        };
        let stale = {
            let inner = self.inner.clone();
            Runner::new("disruption_stale_pod_disruption").run_workers(
                self.inner.stale.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move {
                        Ok::<_, Error>(match inner.sync_stale_pod(&key).await? {
                            Some(after) => Action::RequeueAfter(after),
                            None => Action::AwaitChange,
                        })
                    }
                },
            )
        };
        tokio::join!(pdbs, stale);
    }
}

fn to_std(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

fn pdb_ref(pdb: &PodDisruptionBudget) -> ObjectReference {
    ObjectReference {
        api_version: Some("policy/v1".into()),
        kind: Some("PodDisruptionBudget".into()),
        namespace: pdb.metadata.namespace.clone(),
        name: pdb.metadata.name.clone(),
        uid: pdb.metadata.uid.clone(),
        resource_version: pdb.metadata.resource_version.clone(),
        ..Default::default()
    }
}

fn pod_ref(pod: &CachedPod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// A `*metav1.LabelSelector` as Go's `%v` prints it (its generated `String()`), for the text of
/// the `UnmanagedPods` event.
pub fn go_label_selector(s: Option<&LabelSelector>) -> String {
    let Some(s) = s else {
        return "nil".into();
    };
    let labels: BTreeMap<&String, &String> = s.match_labels.iter().flatten().collect();
    let mut out = String::from("&LabelSelector{MatchLabels:map[string]string{");
    for (k, v) in labels {
        out.push_str(&format!("{k}: {v},"));
    }
    out.push_str("},MatchExpressions:[]LabelSelectorRequirement{");
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]).join(" ");
        out.push_str(&format!(
            "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{values}],}},",
            e.key, e.operator
        ));
    }
    out.push_str("},}");
    out
}

impl Inner {
    /// `sync`: compute and write one PDB's status, or the fail-safe status.
    async fn sync(&self, key: &str) -> Result<Option<Duration>> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(None);
        };
        let Some(pdb) = self.pdbs.namespace(ns).get(name) else {
            return Ok(None);
        };
        match self.try_sync(&pdb).await {
            Ok(recheck) => Ok(recheck),
            Err(SyncError::Conflict(e)) => Err(e),
            Err(SyncError::Failed(message)) => {
                tracing::warn!(pdb = key, error = %message, "failed to sync PDB");
                let mut next = (*pdb).clone();
                next.status = Some(fail_safe_status(&pdb, &message, self.clock.now()));
                self.write_status(&next)
                    .await
                    .map_err(|e| Error::api("update PDB status", e))?;
                Ok(None)
            }
        }
    }

    /// `trySync`: `Some(d)` = look again after `d` (a `disruptedPods` entry expires).
    async fn try_sync(
        &self,
        pdb: &PodDisruptionBudget,
    ) -> std::result::Result<Option<Duration>, SyncError> {
        let ns = pdb.metadata.namespace.as_deref().unwrap_or_default();
        let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
        let sel = match label_selector_as_selector(selector) {
            Ok(s) => s,
            Err(e) => {
                self.pdb_event(
                    pdb,
                    EventType::Warning,
                    "NoPods",
                    &format!("Failed to get pods: {e}"),
                );
                return Err(SyncError::Failed(e.to_string()));
            }
        };
        let pods = self.pods.namespace(ns).list(&sel);
        if pods.is_empty() {
            self.pdb_event(pdb, EventType::Normal, "NoPods", "No matching pods found");
        }
        let pods: Vec<&CachedPod> = pods.iter().map(|p| p.as_ref()).collect();
        let (scale, unmanaged) = if needs_scale(pdb) {
            self.finders
                .expected_scale(&pods)
                .await
                .map_err(|e| self.expected_count_failed(pdb, e))?
        } else {
            (0, Vec::new())
        };
        let (expected, desired) = expected_and_desired(pdb, pods.len(), scale)
            .map_err(|e| self.expected_count_failed(pdb, e))?;
        if !unmanaged.is_empty() {
            tracing::debug!(pods = ?unmanaged, "unmanaged pods selected by a PDB");
            self.pdb_event(
                pdb,
                EventType::Warning,
                "UnmanagedPods",
                &format!(
                    "Pods selected by this PodDisruptionBudget (selector: {}) were found to be \
                     unmanaged. As a result, the status of the PDB cannot be calculated correctly, \
                     which may result in undefined behavior. To account for these pods please set \
                     \".spec.minAvailable\" field of the PDB to an integer value.",
                    go_label_selector(selector)
                ),
            );
        }
        let now = self.clock.now();
        let (disrupted, recheck, overdue) = disrupted_pods(&pods, pdb, now);
        for name in overdue {
            if let Some(p) = pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(&name))
            {
                // Upstream names the PDB "namespace/namespace" here; kept for fidelity.
                self.recorder.event(
                    &pod_ref(p),
                    EventType::Warning,
                    "NotDeleted",
                    &format!("Pod was expected by PDB {ns}/{ns} to be deleted but it wasn't"),
                );
            }
        }
        let counts = Counts {
            current_healthy: count_healthy(&pods, &disrupted, now),
            desired_healthy: desired,
            expected_pods: expected,
        };
        if let Some(status) = next_status(pdb, counts, disrupted, now) {
            let mut next = pdb.clone();
            next.status = Some(status);
            self.write_status(&next).await.map_err(|e| {
                if e.is_conflict() {
                    SyncError::Conflict(Error::api("update PDB status", e))
                } else {
                    SyncError::Failed(e.to_string())
                }
            })?;
        }
        Ok(recheck.map(|at| to_std(at.duration_since(now))))
    }

    fn expected_count_failed(&self, pdb: &PodDisruptionBudget, e: String) -> SyncError {
        self.pdb_event(
            pdb,
            EventType::Warning,
            "CalculateExpectedPodCountFailed",
            &format!("Failed to calculate the number of expected pods: {e}"),
        );
        SyncError::Failed(e)
    }

    /// `writePdbStatus` (`UpdateStatus`); a PDB deleted meanwhile is no error.
    async fn write_status(&self, pdb: &PodDisruptionBudget) -> client::Result<()> {
        let ns = pdb.metadata.namespace.as_deref();
        let name = pdb.metadata.name.as_deref().unwrap_or_default();
        match self
            .client
            .api::<PodDisruptionBudget>(ns)
            .replace_status(name, pdb)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn pdb_event(&self, pdb: &PodDisruptionBudget, t: EventType, reason: &str, message: &str) {
        self.recorder.event(&pdb_ref(pdb), t, reason, message);
    }

    /// `syncStalePodDisruption`: reset a stale `DisruptionTarget=True` to False.
    async fn sync_stale_pod(&self, key: &str) -> Result<Option<Duration>> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            return Ok(None);
        };
        let Some(pod) = self.pods.namespace(ns).get(name) else {
            return Ok(None);
        };
        let now = self.clock.now();
        match stale_disruption_after(&pod, now) {
            None => return Ok(None),
            Some(d) if d > SignedDuration::ZERO => return Ok(Some(to_std(d))),
            Some(_) => {}
        }
        let patch = stale_disruption_reset(&pod, now);
        match self
            .client
            .api::<Pod>(Some(ns))
            .patch_status(name, &Patch::Strategic(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(pod = key, "reset stale DisruptionTarget condition to False");
                Ok(None)
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(Error::api("reset pod DisruptionTarget condition", e)),
        }
    }

    /// `getPdbForPod`: the first (by name) PDB of the pod's namespace selecting it.
    fn pdb_for_pod(&self, pod: &CachedPod) -> Option<Arc<PodDisruptionBudget>> {
        let labels = pod.metadata.labels.as_ref().filter(|l| !l.is_empty())?;
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut pdbs: Vec<Arc<PodDisruptionBudget>> = self
            .pdbs
            .namespace(ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|b| {
                label_selector_as_selector(b.spec.as_ref().and_then(|s| s.selector.as_ref()))
                    .is_ok_and(|s| s.matches(labels))
            })
            .collect();
        pdbs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let first = pdbs.first()?.clone();
        if pdbs.len() > 1 {
            let msg = format!(
                "Pod {:?}/{:?} matches multiple PodDisruptionBudgets.  Chose {:?} arbitrarily.",
                ns,
                pod.metadata.name.as_deref().unwrap_or_default(),
                first.metadata.name.as_deref().unwrap_or_default()
            );
            self.recorder.event(
                &pod_ref(pod),
                EventType::Warning,
                "MultiplePodDisruptionBudgets",
                &msg,
            );
        }
        Some(first)
    }

    fn on_pod(&self, pod: &CachedPod, deleted: bool) {
        if let Some(pdb) = self.pdb_for_pod(pod) {
            self.queue.add(key_of_meta(&pdb.metadata));
        }
        if !deleted {
            if let Some(d) = stale_disruption_after(pod, self.clock.now()) {
                self.stale.add_after(key_of_meta(&pod.metadata), to_std(d));
            }
        }
    }
}

struct PdbHandler(Arc<Inner>);

impl ResourceEventHandler<PodDisruptionBudget> for PdbHandler {
    fn on_add(&self, obj: &Arc<PodDisruptionBudget>, _in_initial_list: bool) {
        self.0.queue.add(key_of_meta(&obj.metadata));
    }

    fn on_update(&self, _old: &Arc<PodDisruptionBudget>, new: &Arc<PodDisruptionBudget>) {
        self.0.queue.add(key_of_meta(&new.metadata));
    }

    fn on_delete(&self, obj: DeletedObject<PodDisruptionBudget>) {
        self.0.queue.add(key_of_meta(&obj.object().metadata));
    }
}

struct PodHandler(Arc<Inner>);

impl ResourceEventHandler<CachedPod> for PodHandler {
    fn on_add(&self, obj: &Arc<CachedPod>, _in_initial_list: bool) {
        self.0.on_pod(obj, false);
    }

    fn on_update(&self, _old: &Arc<CachedPod>, new: &Arc<CachedPod>) {
        self.0.on_pod(new, false);
    }

    fn on_delete(&self, obj: DeletedObject<CachedPod>) {
        self.0.on_pod(obj.object(), true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn label_selector_prints_like_go() {
        assert_eq!(go_label_selector(None), "nil");
        let s = LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["a".into(), "b".into()]),
            }]),
        };
        assert_eq!(
            go_label_selector(Some(&s)),
            "&LabelSelector{MatchLabels:map[string]string{app: web,},MatchExpressions:\
             []LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},},}"
        );
    }
}
