//! `DeploymentController`: Deployments → ReplicaSets (`pkg/controller/deployment`), on the shared
//! Deployment, ReplicaSet and Pod informers.
//!
//! Handlers only queue Deployment keys; `sync` runs on N workers off a rate-limiting queue (one worker
//! per key at a time). A sync reads the caches, claims ReplicaSets by selector, and then takes one
//! rollout step: create/find the new RS, scale it up within `maxSurge`, scale old RSs down within
//! `maxUnavailable` (Recreate: old to zero, wait for their pods to go, then the new one), clean up old
//! revisions, and write status. Every RS write is an update carrying the cached resourceVersion, so a
//! sync acting on a stale cache gets a conflict and is retried with backoff instead of overshooting.

use std::sync::Arc;

use api::labels::{self, Selector};
use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Client, DeletedObject, HandlerRegistration,
    HasSynced, Lister, Patch, RateLimitingQueue, ResourceEventHandler, Runner, SharedIndexInformer,
};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use tokio_util::sync::CancellationToken;

use super::progress::{self};
use super::util::*;
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::pod_util::{controller_of, phase};
use crate::replication::claim::{adopt_patch, controller_ref, release_patch};
use crate::{Error, Result};

const QUEUE_NAME: &str = "deployment";

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) deployments: Lister<Deployment>,
    pub(super) rss: Lister<ReplicaSet>,
    pub(super) pods: Lister<CachedPod>,
    pub(super) queue: RateLimitingQueue<String>,
    pub(super) recorder: EventRecorder,
    pub(super) clock: Arc<dyn Clock>,
}

/// The deployment controller.
pub struct DeploymentController {
    inner: Arc<Inner>,
    // Handler-level sync: informers synced and our handlers saw the initial lists.
    registrations: Vec<HandlerRegistration>,
}

impl DeploymentController {
    /// Build the controller and register its handlers on the three (shared) informers.
    pub fn new(
        client: Client,
        deployments: SharedIndexInformer<Deployment>,
        replica_sets: SharedIndexInformer<ReplicaSet>,
        pods: SharedIndexInformer<CachedPod>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            deployments: deployments.lister(),
            rss: replica_sets.lister(),
            pods: pods.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter(QUEUE_NAME),
            recorder,
            clock,
        });
        let registrations = vec![
            deployments.add_event_handler(DeploymentHandler(inner.clone())),
            replica_sets.add_event_handler(RsHandler(inner.clone())),
            pods.add_event_handler(PodHandler(inner.clone())),
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

    /// Wait for the caches, then run `workers` workers until `shutdown`; returns when they have
    /// drained the queue and exited (the [`client::Runner`]).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let synced: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        let inner = self.inner.clone();
        Runner::new(QUEUE_NAME)
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move { inner.sync_key(&key).await }
                },
            )
            .await;
    }
}

/// Rollout state threaded through one sync: the Deployment as last written.
pub(super) struct Rollout {
    pub(super) d: Deployment,
    pub(super) key: String,
}

impl Inner {
    /// `sync`, with a write conflict retried quietly: a write based on a stale cache is expected
    /// while RSs and the Deployment change fast (a rollout); the retry sees the newer objects.
    async fn sync_key(&self, key: &str) -> Result<Action> {
        match self.sync(key).await {
            Ok(()) => Ok(Action::AwaitChange),
            Err(e) if is_conflict(&e) => {
                tracing::debug!(controller = QUEUE_NAME, key, error = %e, "conflict; requeue");
                Ok(Action::Retry)
            }
            Err(e) => Err(e),
        }
    }

    pub(super) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn enqueue(&self, d: &Deployment) {
        self.queue.add(key_of_meta(&d.metadata));
    }

    /// The Deployment controlling `meta` (by controller reference, name and UID).
    fn resolve(&self, meta: &ObjectMeta) -> Option<Arc<Deployment>> {
        let r = controller_of(meta)?;
        if r.kind != "Deployment" {
            return None;
        }
        let ns = meta.namespace.as_deref().unwrap_or_default();
        let d = self.deployments.namespace(ns).get(&r.name)?;
        (d.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(d)
    }

    /// `getDeploymentsForReplicaSet`: Deployments whose selector matches an orphan RS.
    fn matching_deployments(&self, rs: &ReplicaSet) -> Vec<Arc<Deployment>> {
        let ns = rs.metadata.namespace.as_deref().unwrap_or_default();
        self.deployments
            .namespace(ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|d| selector_of(d).is_some_and(|s| s.matches(rs.metadata.labels.as_ref())))
            .collect()
    }

    fn rs_changed(&self, rs: &ReplicaSet) {
        match self.resolve(&rs.metadata) {
            Some(d) => self.enqueue(&d),
            None if controller_of(&rs.metadata).is_none() => {
                for d in self.matching_deployments(rs) {
                    self.enqueue(&d);
                }
            }
            None => {}
        }
    }

    // ---- sync (`syncDeployment`)

    pub(super) async fn sync(&self, key: &str) -> Result<()> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            tracing::warn!(key, "not a namespace/name key; dropped");
            return Ok(());
        };
        let Some(cached) = self.deployments.namespace(ns).get(name) else {
            tracing::debug!(key, "deployment gone");
            return Ok(());
        };
        let mut ro = Rollout {
            d: (*cached).clone(),
            key: key.to_string(),
        };
        let Some(selector) = selector_of(&ro.d) else {
            self.recorder.event(
                &object_ref(&ro.d),
                EventType::Warning,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            );
            return Ok(());
        };
        let rss = self.claim_replica_sets(&ro.d, &selector).await?;
        if ro.d.metadata.deletion_timestamp.is_some() {
            return self.sync_status_only(&mut ro, &rss).await;
        }
        self.check_paused_conditions(&mut ro).await?;
        let paused = ro.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        if paused || is_scaling_event(&ro.d, &rss) {
            return self.sync_scale(&mut ro, rss).await;
        }
        if is_recreate(&ro.d) {
            self.rollout_recreate(&mut ro, rss).await
        } else {
            self.rollout_rolling(&mut ro, rss).await
        }
    }

    /// `getReplicaSetsForDeployment` / `ClaimReplicaSets`: ours that match, plus adopted orphans
    /// that match; ours that no longer match are released.
    async fn claim_replica_sets(
        &self,
        d: &Deployment,
        selector: &Selector,
    ) -> Result<Vec<ReplicaSet>> {
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let deleting = d.metadata.deletion_timestamp.is_some();
        let api = self.client.api::<ReplicaSet>(Some(&ns));
        let mut out = Vec::new();
        let mut rechecked = false;
        for rs in self.rss.namespace(&ns).list(&Selector::everything()) {
            let matches = selector.matches(rs.metadata.labels.as_ref());
            let rs_name = rs.metadata.name.clone().unwrap_or_default();
            let rs_uid = rs.metadata.uid.clone().unwrap_or_default();
            match controller_of(&rs.metadata) {
                Some(r) if r.uid != uid => {}
                Some(_) if matches => out.push((*rs).clone()),
                Some(_) if deleting => {}
                Some(_) => {
                    let patch = Patch::Strategic(release_patch(&uid, &rs_uid));
                    match api.patch(&rs_name, &patch).await {
                        Ok(_) => tracing::info!(rs = %rs_name, "released replica set"),
                        Err(e) if e.is_not_found() || e.is_invalid() => {}
                        Err(e) => return Err(Error::api("release replica set", e)),
                    }
                }
                None if !matches || deleting || rs.metadata.deletion_timestamp.is_some() => {}
                None => {
                    if !rechecked {
                        // RecheckDeletionTimestamp: an uncached read before the first adoption.
                        let fresh = self
                            .client
                            .api::<Deployment>(Some(&ns))
                            .get(d.metadata.name.as_deref().unwrap_or_default())
                            .await
                            .map_err(|e| Error::api("recheck deployment", e))?;
                        if fresh.metadata.uid.as_deref() != Some(uid.as_str())
                            || fresh.metadata.deletion_timestamp.is_some()
                        {
                            return Err(Error::Claim(format!(
                                "deployment {ns}/{} is gone or being deleted",
                                d.metadata.name.as_deref().unwrap_or_default()
                            )));
                        }
                        rechecked = true;
                    }
                    let patch = Patch::Strategic(adopt_patch(&owner_ref(d), &rs_uid));
                    match api.patch(&rs_name, &patch).await {
                        Ok(adopted) => {
                            tracing::info!(rs = %rs_name, "adopted replica set");
                            out.push(adopted);
                        }
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(Error::api("adopt replica set", e)),
                    }
                }
            }
        }
        Ok(out)
    }

    /// `checkPausedConditions`: Progressing=Unknown with DeploymentPaused / DeploymentResumed.
    async fn check_paused_conditions(&self, ro: &mut Rollout) -> Result<()> {
        if progress::progress_deadline(&ro.d).is_none() {
            return Ok(());
        }
        let paused = ro.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        let mut st = ro.d.status.clone().unwrap_or_default();
        let reason =
            progress::get_condition(&st, progress::PROGRESSING).and_then(|c| c.reason.clone());
        let now = self.now();
        let c = if paused && reason.as_deref() != Some(progress::PAUSED) {
            progress::condition(
                progress::PROGRESSING,
                "Unknown",
                progress::PAUSED,
                "Deployment is paused".into(),
                now,
            )
        } else if !paused && reason.as_deref() == Some(progress::PAUSED) {
            progress::condition(
                progress::PROGRESSING,
                "Unknown",
                progress::RESUMED,
                "Deployment is resumed".into(),
                now,
            )
        } else {
            return Ok(());
        };
        progress::set_condition(&mut st, c);
        self.write_status(ro, st).await
    }
}

/// A write rejected with 409 (stale resourceVersion).
fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Api { source, .. } if source.is_conflict())
}

/// The Deployment's compiled selector; `None` if invalid or empty (selects everything).
fn selector_of(d: &Deployment) -> Option<Selector> {
    let sel = &d.spec.as_ref()?.selector;
    match labels::from_label_selector(sel) {
        Ok(s) if s.is_empty() => None,
        Ok(s) => Some(s),
        Err(_) => None,
    }
}

/// `isScalingEvent`: an active RS was last scaled for a different `spec.replicas`.
pub fn is_scaling_event(d: &Deployment, rss: &[ReplicaSet]) -> bool {
    let want = replicas(d);
    rss.iter()
        .filter(|r| rs_replicas(r) > 0)
        .filter_map(desired_replicas_annotation)
        .any(|v| v != want)
}

pub(super) fn owner_ref(d: &Deployment) -> OwnerReference {
    controller_ref(
        "apps/v1",
        "Deployment",
        d.metadata.name.as_deref().unwrap_or_default(),
        d.metadata.uid.as_deref().unwrap_or_default(),
    )
}

pub(super) fn object_ref(d: &Deployment) -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("Deployment".into()),
        namespace: d.metadata.namespace.clone(),
        name: d.metadata.name.clone(),
        uid: d.metadata.uid.clone(),
        resource_version: d.metadata.resource_version.clone(),
        field_path: None,
    }
}

struct DeploymentHandler(Arc<Inner>);

impl ResourceEventHandler<Deployment> for DeploymentHandler {
    fn on_add(&self, obj: &Arc<Deployment>, _in_initial_list: bool) {
        self.0.enqueue(obj);
    }

    fn on_update(&self, _old: &Arc<Deployment>, new: &Arc<Deployment>) {
        self.0.enqueue(new);
    }

    fn on_delete(&self, obj: DeletedObject<Deployment>) {
        self.0.queue.add(obj.key());
    }
}

struct RsHandler(Arc<Inner>);

impl ResourceEventHandler<ReplicaSet> for RsHandler {
    fn on_add(&self, obj: &Arc<ReplicaSet>, _in_initial_list: bool) {
        self.0.rs_changed(obj);
    }

    fn on_update(&self, old: &Arc<ReplicaSet>, new: &Arc<ReplicaSet>) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        if controller_of(&old.metadata) != controller_of(&new.metadata) {
            if let Some(d) = self.0.resolve(&old.metadata) {
                self.0.enqueue(&d);
            }
        }
        self.0.rs_changed(new);
    }

    fn on_delete(&self, obj: DeletedObject<ReplicaSet>) {
        if let Some(d) = self.0.resolve(&obj.object().metadata) {
            self.0.enqueue(&d);
        }
    }
}

struct PodHandler(Arc<Inner>);

impl PodHandler {
    /// A Recreate Deployment waits for its old pods: wake it when one of them goes.
    fn wake_recreate(&self, pod: &CachedPod) {
        let Some(r) = controller_of(&pod.metadata) else {
            return;
        };
        if r.kind != "ReplicaSet" {
            return;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some(rs) = self.0.rss.namespace(ns).get(&r.name) else {
            return;
        };
        if rs.metadata.uid.as_deref() != Some(r.uid.as_str()) {
            return;
        }
        if let Some(d) = self.0.resolve(&rs.metadata).filter(|d| is_recreate(d)) {
            self.0.enqueue(&d);
        }
    }
}

impl ResourceEventHandler<CachedPod> for PodHandler {
    fn on_add(&self, _obj: &Arc<CachedPod>, _in_initial_list: bool) {}

    fn on_update(&self, old: &Arc<CachedPod>, new: &Arc<CachedPod>) {
        if phase(old) != phase(new) && matches!(phase(new), "Failed" | "Succeeded") {
            self.wake_recreate(new);
        }
    }

    fn on_delete(&self, obj: DeletedObject<CachedPod>) {
        self.wake_recreate(obj.object());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, ReplicaSetSpec};

    fn rs(replicas: i32, desired: Option<&str>) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                annotations: desired
                    .map(|v| [(DESIRED_REPLICAS_ANNOTATION.to_string(), v.to_string())].into()),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn scaling_event_only_from_active_replica_sets_with_a_stale_desired_count() {
        let d = Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(5),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(!is_scaling_event(&d, &[rs(5, Some("5"))]));
        assert!(is_scaling_event(&d, &[rs(3, Some("3"))]));
        // Scaled-down old RSs and RSs without the annotation never count.
        assert!(!is_scaling_event(&d, &[rs(0, Some("3")), rs(5, None)]));
    }
}
