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
use std::time::Duration;

use client::record::{EventRecorder, EventType};
use client::{
    Api, Client, DeleteParams, DeletedObject, HandlerRegistration, HasSynced, LabelMatcher, Lister,
    Patch, RateLimitingQueue, ResourceEventHandler, SharedIndexInformer,
};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::progress::{self, calculate_status, rollout_status, status_differs};
use super::util::*;
use crate::clock::Clock;
use crate::pod_util::{controller_of, key_of, phase, split_key};
use crate::replication::claim::{adopt_patch, controller_ref, release_patch};
use crate::selector::Selector;
use crate::{Error, Result};

const QUEUE_NAME: &str = "deployment";

struct Inner {
    client: Client,
    deployments: Lister<Deployment>,
    rss: Lister<ReplicaSet>,
    pods: Lister<Pod>,
    queue: RateLimitingQueue<String>,
    recorder: EventRecorder,
    clock: Arc<dyn Clock>,
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
        pods: SharedIndexInformer<Pod>,
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

    /// Wait for the caches, then run `workers` workers until `shutdown`; returns when they exited.
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let refs: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        if !client::wait_for_cache_sync(&refs, &shutdown).await {
            tracing::info!(controller = QUEUE_NAME, "stopped before caches synced");
            self.inner.queue.shut_down();
            return;
        }
        tracing::info!(
            controller = QUEUE_NAME,
            workers,
            "caches synced; starting workers"
        );
        let tracker = TaskTracker::new();
        for _ in 0..workers.max(1) {
            let inner = self.inner.clone();
            tracker.spawn(async move { inner.worker().await });
        }
        tracker.close();
        shutdown.cancelled().await;
        self.inner.queue.shut_down();
        tracker.wait().await;
    }
}

/// Rollout state threaded through one sync: the Deployment as last written.
struct Rollout {
    d: Deployment,
    key: String,
}

impl Inner {
    async fn worker(self: Arc<Self>) {
        while let Some(key) = self.queue.get().await {
            let span = tracing::debug_span!("sync", controller = QUEUE_NAME, key = %key);
            match crate::guarded(self.sync(&key).instrument(span)).await {
                Ok(()) => self.queue.forget(&key),
                Err(e) => {
                    if is_conflict(&e) {
                        // A write based on a stale cache: expected while RSs and the Deployment
                        // change fast (a rollout); the retry sees the newer objects.
                        tracing::debug!(controller = QUEUE_NAME, key = %key, error = %e, "conflict; requeue");
                    } else {
                        tracing::warn!(controller = QUEUE_NAME, key = %key, error = %e, "sync failed; requeue");
                    }
                    self.queue.add_rate_limited(key.clone());
                }
            }
            self.queue.done(&key);
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn enqueue(&self, d: &Deployment) {
        self.queue.add(key_of(&d.metadata));
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
            .list(&LabelMatcher::everything())
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

    async fn sync(&self, key: &str) -> Result<()> {
        let (ns, name) = split_key(key);
        let ns = ns.unwrap_or_default();
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
        for rs in self.rss.namespace(&ns).list(&LabelMatcher::everything()) {
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

    /// `getAllReplicaSetsAndSyncRevision`: (new RS, old RSs), creating the new one if asked, and
    /// bringing revision annotations of the new RS and the Deployment up to date.
    async fn get_all(
        &self,
        ro: &mut Rollout,
        mut rss: Vec<ReplicaSet>,
        create: bool,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>)> {
        let new_idx = find_new_index(&ro.d, &rss);
        let existing = new_idx.map(|i| rss.remove(i));
        let mut old = rss;
        old.sort_by_key(by_creation);
        let new_revision = max_revision(&old) + 1;
        let new_rs = match existing {
            Some(rs) => Some(self.sync_existing_new_rs(ro, rs, new_revision).await?),
            None if create => Some(self.create_new_rs(ro, &old, new_revision).await?),
            None => None,
        };
        if let Some(rs) = new_rs.as_ref() {
            let rev = revision_of(rs.metadata.annotations.as_ref());
            if revision_of(ro.d.metadata.annotations.as_ref()) != rev {
                let mut d = ro.d.clone();
                d.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(REVISION_ANNOTATION.into(), rev.to_string());
                let name = d.metadata.name.clone().unwrap_or_default();
                ro.d = self
                    .deployments_api(&ro.d)
                    .replace(&name, &d)
                    .await
                    .map_err(|e| Error::api("update deployment revision", e))?;
            }
        }
        Ok((new_rs, old))
    }

    async fn sync_existing_new_rs(
        &self,
        ro: &mut Rollout,
        rs: ReplicaSet,
        revision: i64,
    ) -> Result<ReplicaSet> {
        let annotations = rs_annotations(&ro.d, rs.metadata.annotations.as_ref(), revision);
        let min_ready = ro.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
        let rs_min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds);
        let mut rs = rs;
        if rs.metadata.annotations.as_ref() != Some(&annotations)
            || min_ready.unwrap_or(0) != rs_min_ready.unwrap_or(0)
        {
            rs.metadata.annotations = Some(annotations);
            if let Some(s) = rs.spec.as_mut() {
                s.min_ready_seconds = min_ready;
            }
            rs = self.replace_rs(&rs).await?;
        }
        let st = ro.d.status.clone().unwrap_or_default();
        if progress::progress_deadline(&ro.d).is_some()
            && progress::get_condition(&st, progress::PROGRESSING).is_none()
        {
            let mut st = st;
            let msg = format!(
                "Found new replica set \"{}\"",
                rs.metadata.name.as_deref().unwrap_or_default()
            );
            progress::set_condition(
                &mut st,
                progress::condition(
                    progress::PROGRESSING,
                    "True",
                    progress::FOUND_NEW_RS,
                    msg,
                    self.now(),
                ),
            );
            self.write_status(ro, st).await?;
        }
        Ok(rs)
    }

    async fn create_new_rs(
        &self,
        ro: &mut Rollout,
        old: &[ReplicaSet],
        revision: i64,
    ) -> Result<ReplicaSet> {
        let d = &ro.d;
        let spec = d.spec.clone().unwrap_or_default();
        let collision = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = compute_hash(&spec.template, collision);
        let mut template = spec.template.clone();
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let mut selector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let dname = d.metadata.name.clone().unwrap_or_default();
        let name = format!("{dname}-{hash}");
        let all_total: i32 = old.iter().map(rs_pods_bound).sum();
        let replicas = new_rs_new_replicas(d, all_total, 0);
        let mut annotations = rs_annotations(d, None, revision);
        set_replicas_annotations(d, &mut annotations);
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: d.metadata.namespace.clone(),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: Some(annotations),
                owner_references: Some(vec![owner_ref(d)]),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let api = self
            .client
            .api::<ReplicaSet>(d.metadata.namespace.as_deref());
        let created = match api.create(&rs).await {
            Ok(c) => c,
            Err(e) if e.is_already_exists() => {
                let existing = api
                    .get(&name)
                    .await
                    .map_err(|e| Error::api("get existing replica set", e))?;
                let ours = controller_of(&existing.metadata)
                    .is_some_and(|r| Some(r.uid.as_str()) == d.metadata.uid.as_deref());
                let same = existing
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|t| equal_ignore_hash(t, &spec.template));
                if ours && same {
                    // Our own earlier create that the cache had not shown yet.
                    return Ok(existing);
                }
                // A hash collision: bump collisionCount so the next attempt gets a new name.
                let mut st = d.status.clone().unwrap_or_default();
                st.collision_count = Some(collision.unwrap_or(0) + 1);
                tracing::info!(rs = %name, "pod-template hash collision; bumping collisionCount");
                self.write_status(ro, st).await?;
                return Err(Error::Claim(format!(
                    "hash collision on replica set {name}"
                )));
            }
            Err(e) => return Err(Error::api("create replica set", e)),
        };
        if replicas > 0 {
            self.recorder.event(
                &object_ref(&ro.d),
                EventType::Normal,
                "ScalingReplicaSet",
                &format!("Scaled up replica set {name} from 0 to {replicas}"),
            );
        }
        if progress::progress_deadline(&ro.d).is_some() {
            let mut st = ro.d.status.clone().unwrap_or_default();
            progress::set_condition(
                &mut st,
                progress::condition(
                    progress::PROGRESSING,
                    "True",
                    progress::NEW_RS_CREATED,
                    format!("Created new replica set \"{name}\""),
                    self.now(),
                ),
            );
            self.write_status(ro, st).await?;
        }
        Ok(created)
    }

    /// `scaleReplicaSet`: set replicas and the desired/max annotations; event on a size change.
    async fn scale_rs(&self, ro: &Rollout, rs: &ReplicaSet, to: i32) -> Result<(bool, ReplicaSet)> {
        let from = rs_replicas(rs);
        let mut next = rs.clone();
        let ann_changed = set_replicas_annotations(
            &ro.d,
            next.metadata
                .annotations
                .get_or_insert_with(Default::default),
        );
        if from == to && !ann_changed {
            return Ok((false, next));
        }
        next.spec.get_or_insert_with(Default::default).replicas = Some(to);
        let written = self.replace_rs(&next).await?;
        if from != to {
            let dir = if to > from { "up" } else { "down" };
            let name = rs.metadata.name.as_deref().unwrap_or_default();
            self.recorder.event(
                &object_ref(&ro.d),
                EventType::Normal,
                "ScalingReplicaSet",
                &format!("Scaled {dir} replica set {name} from {from} to {to}"),
            );
        }
        Ok((from != to, written))
    }

    async fn replace_rs(&self, rs: &ReplicaSet) -> Result<ReplicaSet> {
        let api = self
            .client
            .api::<ReplicaSet>(rs.metadata.namespace.as_deref());
        api.replace(rs.metadata.name.as_deref().unwrap_or_default(), rs)
            .await
            .map_err(|e| Error::api("update replica set", e))
    }

    fn deployments_api(&self, d: &Deployment) -> Api<Deployment> {
        self.client
            .api::<Deployment>(d.metadata.namespace.as_deref())
    }

    async fn write_status(&self, ro: &mut Rollout, st: DeploymentStatus) -> Result<()> {
        let mut d = ro.d.clone();
        d.status = Some(st);
        let name = d.metadata.name.clone().unwrap_or_default();
        ro.d = self
            .deployments_api(&ro.d)
            .replace_status(&name, &d)
            .await
            .map_err(|e| Error::api("update deployment status", e))?;
        Ok(())
    }

    // ---- strategies

    /// `rolloutRolling`.
    async fn rollout_rolling(&self, ro: &mut Rollout, rss: Vec<ReplicaSet>) -> Result<()> {
        let (new_rs, old) = self.get_all(ro, rss, true).await?;
        let Some(mut new_rs) = new_rs else {
            return Ok(());
        };
        let desired = replicas(&ro.d);
        let mut old = old;
        // reconcileNewReplicaSet.
        let n = rs_replicas(&new_rs);
        // maxSurge bounds the pods, not only the specs: an RS counts with the pods it still has.
        let all_total: i32 = old.iter().map(rs_pods_bound).sum::<i32>() + rs_pods_bound(&new_rs);
        let target = if n > desired {
            desired
        } else {
            new_rs_new_replicas(&ro.d, all_total, n)
        };
        if target != n {
            let (_, w) = self.scale_rs(ro, &new_rs, target).await?;
            new_rs = w;
            return self.sync_rollout_status(ro, &new_rs, &old).await;
        }
        // reconcileOldReplicaSets.
        let (_, max_unavailable) = surge_and_unavailable(&ro.d);
        let view: Vec<OldRs> = old
            .iter()
            .map(|r| OldRs {
                replicas: rs_replicas(r),
                available: rs_available(r),
            })
            .collect();
        let targets = rolling_scale_down(&view, n, rs_available(&new_rs), desired, max_unavailable);
        let mut scaled = false;
        for (rs, to) in old.iter_mut().zip(targets) {
            if to != rs_replicas(rs) {
                let (_, w) = self.scale_rs(ro, rs, to).await?;
                *rs = w;
                scaled = true;
            }
        }
        if !scaled {
            let stored = ro.d.status.clone().unwrap_or_default();
            if progress::is_complete(&ro.d, &stored) {
                self.cleanup(ro, &old).await?;
            }
        }
        self.sync_rollout_status(ro, &new_rs, &old).await
    }

    /// `rolloutRecreate`.
    async fn rollout_recreate(&self, ro: &mut Rollout, rss: Vec<ReplicaSet>) -> Result<()> {
        let (new_rs, mut old) = self.get_all(ro, rss, false).await?;
        let mut scaled = false;
        for rs in old.iter_mut() {
            if rs_replicas(rs) != 0 {
                let (_, w) = self.scale_rs(ro, rs, 0).await?;
                *rs = w;
                scaled = true;
            }
        }
        if scaled || self.old_pods_running(new_rs.as_ref(), &old) {
            return self.sync_status_opt(ro, new_rs.as_ref(), &old).await;
        }
        let new_rs = match new_rs {
            Some(rs) => rs,
            None => {
                let all = old.clone();
                match self.get_all(ro, all, true).await? {
                    (Some(rs), _) => rs,
                    (None, _) => return Ok(()),
                }
            }
        };
        let (_, new_rs) = self.scale_rs(ro, &new_rs, replicas(&ro.d)).await?;
        let stored = ro.d.status.clone().unwrap_or_default();
        if progress::is_complete(&ro.d, &stored) {
            self.cleanup(ro, &old).await?;
        }
        self.sync_rollout_status(ro, &new_rs, &old).await
    }

    /// `oldPodsRunning`: any old RS still reports replicas, or any pod of an old RS is not terminal.
    fn old_pods_running(&self, new_rs: Option<&ReplicaSet>, old: &[ReplicaSet]) -> bool {
        if old
            .iter()
            .any(|r| r.status.as_ref().is_some_and(|s| s.replicas > 0))
        {
            return true;
        }
        let new_uid = new_rs.and_then(|r| r.metadata.uid.clone());
        let old_uids: std::collections::HashSet<String> = old
            .iter()
            .filter_map(|r| r.metadata.uid.clone())
            .filter(|u| Some(u) != new_uid.as_ref())
            .collect();
        let Some(ns) = old.first().and_then(|r| r.metadata.namespace.clone()) else {
            return false;
        };
        self.pods
            .namespace(&ns)
            .list(&LabelMatcher::everything())
            .iter()
            .filter(|p| controller_of(&p.metadata).is_some_and(|r| old_uids.contains(&r.uid)))
            .any(|p| !matches!(phase(p), "Failed" | "Succeeded"))
    }

    /// `sync`: scaling (paused or a replicas change mid-rollout) without rollout progress.
    async fn sync_scale(&self, ro: &mut Rollout, rss: Vec<ReplicaSet>) -> Result<()> {
        let (new_rs, mut old) = self.get_all(ro, rss, false).await?;
        let mut new_rs = new_rs;
        self.scale(ro, &mut new_rs, &mut old).await?;
        let paused = ro.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        if paused {
            self.cleanup(ro, &old).await?;
        }
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.extend(new_rs.as_ref());
        let st = calculate_status(&ro.d, &all, new_rs.as_ref(), self.now());
        if status_differs(ro.d.status.as_ref(), &st) {
            self.write_status(ro, st).await?;
        }
        Ok(())
    }

    /// `scale` (`sync.go`): runs on a scaling event or while paused, never as a rollout step.
    ///
    /// - one active RS (or none: the newest) takes the whole `spec.replicas`;
    /// - a saturated new RS (full size, scaled for this size, all available) zeroes the old ones;
    /// - otherwise, for `RollingUpdate`, the change is spread over the active RSs in proportion to
    ///   their size ([`proportional_scale`]), so a resize neither speeds up nor slows down the
    ///   rollout; every active RS is written with its new size and `desired`/`max-replicas`
    ///   annotations, largest first.
    ///
    /// `Recreate` never has two active RSs for long; if it does (a strategy switch mid-rollout),
    /// upstream leaves them as they are. Here their annotations are still brought up to date, which
    /// ends the scaling event so the Recreate rollout can proceed instead of stalling on it.
    async fn scale(
        &self,
        ro: &Rollout,
        new_rs: &mut Option<ReplicaSet>,
        old: &mut [ReplicaSet],
    ) -> Result<()> {
        let desired = replicas(&ro.d);
        let active_old: Vec<usize> = (0..old.len())
            .filter(|i| rs_replicas(&old[*i]) > 0)
            .collect();
        let new_active = new_rs.as_ref().is_some_and(|r| rs_replicas(r) > 0);
        let n_active = active_old.len() + usize::from(new_active);
        if n_active <= 1 {
            // FindActiveOrLatest. Unlike upstream, an RS already at the right size is still
            // written when its annotations are stale, which ends the scaling event.
            if let Some(i) = active_old.first().copied().filter(|_| !new_active) {
                let (_, w) = self.scale_rs(ro, &old[i], desired).await?;
                old[i] = w;
            } else if let Some(rs) = new_rs.as_ref() {
                let (_, w) = self.scale_rs(ro, rs, desired).await?;
                *new_rs = Some(w);
            } else if let Some(last) = old.last_mut() {
                let (_, w) = self.scale_rs(ro, last, desired).await?;
                *last = w;
            }
            return Ok(());
        }
        if new_rs.as_ref().is_some_and(|rs| is_saturated(&ro.d, rs)) {
            for i in active_old {
                let (_, w) = self.scale_rs(ro, &old[i], 0).await?;
                old[i] = w;
            }
            return Ok(());
        }
        // Every RS of the Deployment, oldest first (the tie-break of the proportional order).
        // `None` stands for the new RS.
        let mut slots: Vec<Option<usize>> = (0..old.len()).map(Some).collect();
        if new_rs.is_some() {
            slots.push(None);
        }
        let rs_at = |slot: Option<usize>| -> Option<&ReplicaSet> {
            match slot {
                Some(i) => old.get(i),
                None => new_rs.as_ref(),
            }
        };
        slots.sort_by_key(|slot| rs_at(*slot).map(by_creation));
        let sized: Vec<SizedRs> = slots
            .iter()
            .map(|slot| {
                rs_at(*slot).map_or(
                    SizedRs {
                        replicas: 0,
                        max_replicas: None,
                    },
                    |rs| SizedRs {
                        replicas: rs_replicas(rs),
                        max_replicas: max_replicas_annotation(rs),
                    },
                )
            })
            .collect();
        let sizes: Vec<(Option<usize>, i32)> = if is_recreate(&ro.d) {
            sized
                .iter()
                .enumerate()
                .filter(|(_, r)| r.replicas > 0)
                .map(|(k, r)| (slots[k], r.replicas))
                .collect()
        } else {
            let (max_surge, _) = surge_and_unavailable(&ro.d);
            let target = ScaleTarget {
                replicas: desired,
                max_surge,
                status_replicas: ro.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0),
            };
            proportional_scale(&sized, target)
                .into_iter()
                .map(|(k, n)| (slots[k], n))
                .collect()
        };
        for (slot, to) in sizes {
            match slot {
                Some(i) => {
                    let (_, w) = self.scale_rs(ro, &old[i], to).await?;
                    old[i] = w;
                }
                None => {
                    if let Some(rs) = new_rs.as_ref() {
                        let (_, w) = self.scale_rs(ro, rs, to).await?;
                        *new_rs = Some(w);
                    }
                }
            }
        }
        Ok(())
    }

    /// `cleanupDeployment`: delete the oldest fully scaled-down RSs beyond `revisionHistoryLimit`.
    async fn cleanup(&self, ro: &Rollout, old: &[ReplicaSet]) -> Result<()> {
        let limit =
            ro.d.spec
                .as_ref()
                .and_then(|s| s.revision_history_limit)
                .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
                .max(0) as usize;
        let mut cleanable: Vec<&ReplicaSet> = old
            .iter()
            .filter(|r| r.metadata.deletion_timestamp.is_none())
            .collect();
        if cleanable.len() <= limit {
            return Ok(());
        }
        let diff = cleanable.len() - limit;
        cleanable.sort_by_key(|r| (revision_of(r.metadata.annotations.as_ref()), by_creation(r)));
        for rs in cleanable.into_iter().take(diff) {
            let st = rs.status.clone().unwrap_or_default();
            if st.replicas != 0
                || rs_replicas(rs) != 0
                || rs.metadata.generation > st.observed_generation
            {
                continue;
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            tracing::debug!(rs = %name, "cleaning up old replica set");
            let api = self
                .client
                .api::<ReplicaSet>(rs.metadata.namespace.as_deref());
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Error::api("delete old replica set", e)),
            }
        }
        Ok(())
    }

    /// `syncStatusOnly` (Deployment being deleted).
    async fn sync_status_only(&self, ro: &mut Rollout, rss: &[ReplicaSet]) -> Result<()> {
        let new_idx = find_new_index(&ro.d, rss);
        let all: Vec<&ReplicaSet> = rss.iter().collect();
        let st = calculate_status(&ro.d, &all, new_idx.map(|i| &rss[i]), self.now());
        if status_differs(ro.d.status.as_ref(), &st) {
            self.write_status(ro, st).await?;
        }
        Ok(())
    }

    async fn sync_status_opt(
        &self,
        ro: &mut Rollout,
        new_rs: Option<&ReplicaSet>,
        old: &[ReplicaSet],
    ) -> Result<()> {
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.extend(new_rs);
        self.write_rollout_status(ro, &all, new_rs).await
    }

    async fn sync_rollout_status(
        &self,
        ro: &mut Rollout,
        new_rs: &ReplicaSet,
        old: &[ReplicaSet],
    ) -> Result<()> {
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.push(new_rs);
        self.write_rollout_status(ro, &all, Some(new_rs)).await
    }

    /// `syncRolloutStatus`: write status when it changed; requeue for the progress deadline.
    async fn write_rollout_status(
        &self,
        ro: &mut Rollout,
        all: &[&ReplicaSet],
        new_rs: Option<&ReplicaSet>,
    ) -> Result<()> {
        let (st, requeue) = rollout_status(&ro.d, all, new_rs, self.now());
        if status_differs(ro.d.status.as_ref(), &st) {
            let timed_out = progress::get_condition(&st, progress::PROGRESSING)
                .is_some_and(|c| c.reason.as_deref() == Some(progress::TIMED_OUT));
            let was =
                ro.d.status
                    .as_ref()
                    .and_then(|s| progress::get_condition(s, progress::PROGRESSING))
                    .is_some_and(|c| c.reason.as_deref() == Some(progress::TIMED_OUT));
            if timed_out && !was {
                let name = new_rs
                    .and_then(|r| r.metadata.name.clone())
                    .unwrap_or_default();
                self.recorder.event(
                    &object_ref(&ro.d),
                    EventType::Warning,
                    progress::TIMED_OUT,
                    &format!("ReplicaSet \"{name}\" has timed out progressing."),
                );
            }
            self.write_status(ro, st).await?;
        }
        if let Some(after) = requeue {
            let after = Duration::try_from(after).unwrap_or(Duration::from_secs(1));
            self.queue.add_after(ro.key.clone(), after);
        }
        Ok(())
    }
}

/// A write rejected with 409 (stale resourceVersion).
fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Api { source, .. } if source.is_conflict())
}

/// The Deployment's compiled selector; `None` if invalid or empty (selects everything).
fn selector_of(d: &Deployment) -> Option<Selector> {
    let sel = &d.spec.as_ref()?.selector;
    match Selector::from_label_selector(sel) {
        Ok(Selector::Requirements(r)) if r.is_empty() => None,
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

fn owner_ref(d: &Deployment) -> OwnerReference {
    controller_ref(
        "apps/v1",
        "Deployment",
        d.metadata.name.as_deref().unwrap_or_default(),
        d.metadata.uid.as_deref().unwrap_or_default(),
    )
}

fn object_ref(d: &Deployment) -> ObjectReference {
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
    fn wake_recreate(&self, pod: &Pod) {
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

impl ResourceEventHandler<Pod> for PodHandler {
    fn on_add(&self, _obj: &Arc<Pod>, _in_initial_list: bool) {}

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if phase(old) != phase(new) && matches!(phase(new), "Failed" | "Succeeded") {
            self.wake_recreate(new);
        }
    }

    fn on_delete(&self, obj: DeletedObject<Pod>) {
        self.wake_recreate(obj.object());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentSpec;

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
