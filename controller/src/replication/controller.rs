//! `ReplicationManager`: the ReplicaSet / ReplicationController controller wired to informers
//! (informer.md §6.1, §6.4–§6.9).
//!
//! Event handlers only translate informer notifications into expectation updates and queue keys; all
//! work happens in `sync`, run by N workers (default 5) off a rate-limiting queue, which guarantees a
//! key is never synced by two workers at once. A sync reads only the informer caches, except the one
//! uncached GET that guards adoption. Every create or delete is preceded by the expectation it will
//! satisfy, so a sync never acts on a cache that has not yet seen its own previous writes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use api::labels::Selector;
use client::record::{EventRecorder, EventType};
use client::{
    key_of_meta, split_meta_namespace_key, Action, Api, Client, DeleteParams, DeletedObject,
    HandlerRegistration, HasSynced, Lister, Patch, RateLimitingQueue, ResourceEventHandler, Runner,
    SharedIndexInformer,
};
use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::adapter::ReplicaOwner;
use super::claim::{adopt_patch, controller_ref, decide, release_patch, ClaimAction, ClaimOwner};
use super::expectations::UidTrackingExpectations;
use super::manage::{
    pod_from_template, slow_start_batch, BURST_REPLICAS, SLOW_START_INITIAL_BATCH_SIZE,
};
use super::ranking::pods_to_delete;
use super::status::{calculate_status, needs_update, with_observed_generation};
use crate::cached_pod::CachedPod;
use crate::clock::Clock;
use crate::pod_util::{controller_of, is_pod_active, is_pod_ready};
use crate::{Error, Result};

/// Pod creates/deletes one manager has in flight at once. Batches (slow start: up to 256 at once) and
/// deletes (up to 500) are issued concurrently as upstream does, but through this many slots, so the
/// manager alone never fills its priority level's seats and queues (a request past them would be
/// answered 429 and wait for its retry, holding a whole slow-start batch). On a durable store the
/// writes in flight share one flush, so fewer slots than this leave the disk's group commit idle.
pub const MAX_CONCURRENT_WRITES: usize = 64;

/// Counters exported by a replication manager.
#[derive(Debug, Default)]
pub struct SyncMetrics {
    /// Completed syncs.
    pub syncs: AtomicU64,
    /// Syncs that returned an error (requeued with backoff).
    pub errors: AtomicU64,
    /// Times a key was found already being synced by another worker (must stay 0).
    pub concurrent_syncs: AtomicU64,
    /// Pods created.
    pub creates: AtomicU64,
    /// Pods deleted.
    pub deletes: AtomicU64,
}

struct Inner<K: ReplicaOwner + client::Resource> {
    client: Client,
    owners: Lister<K>,
    pods: Lister<CachedPod>,
    queue: RateLimitingQueue<String>,
    expectations: UidTrackingExpectations,
    recorder: EventRecorder,
    clock: Arc<dyn Clock>,
    metrics: Arc<SyncMetrics>,
    // Keys currently in `sync`: instrumentation of the queue's one-worker-per-key guarantee.
    in_flight: Mutex<std::collections::HashSet<String>>,
    // Bounds concurrent pod writes across all workers (see MAX_CONCURRENT_WRITES).
    writes: tokio::sync::Semaphore,
}

/// The replication controller for owner kind `K` (`ReplicaSet` or `ReplicationController`).
pub struct ReplicationManager<K: ReplicaOwner + client::Resource> {
    inner: Arc<Inner<K>>,
    // Handler-level sync: the informers synced and our handlers saw the initial lists.
    registrations: Vec<HandlerRegistration>,
}

impl<K: ReplicaOwner + client::Resource> ReplicationManager<K> {
    /// Build the manager and register its handlers on the two (shared) informers.
    pub fn new(
        client: Client,
        owner_informer: SharedIndexInformer<K>,
        pod_informer: SharedIndexInformer<CachedPod>,
        recorder: EventRecorder,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Arc::new(Inner {
            client,
            owners: owner_informer.lister(),
            pods: pod_informer.lister(),
            queue: RateLimitingQueue::with_default_controller_rate_limiter(K::QUEUE_NAME),
            expectations: UidTrackingExpectations::new(clock.clone()),
            recorder,
            clock,
            metrics: Arc::new(SyncMetrics::default()),
            in_flight: Mutex::new(Default::default()),
            writes: tokio::sync::Semaphore::new(MAX_CONCURRENT_WRITES),
        });
        let registrations = vec![
            owner_informer.add_event_handler(OwnerHandler(inner.clone())),
            pod_informer.add_event_handler(PodHandler(inner.clone())),
        ];
        Self {
            inner,
            registrations,
        }
    }

    /// The manager's counters.
    pub fn metrics(&self) -> Arc<SyncMetrics> {
        self.inner.metrics.clone()
    }

    /// The work queue (for metrics).
    pub fn queue(&self) -> RateLimitingQueue<String> {
        self.inner.queue.clone()
    }

    /// The expectations (read-only use in tests and diagnostics).
    pub fn expectations(&self) -> &UidTrackingExpectations {
        &self.inner.expectations
    }

    /// Wait for both caches, then run `workers` workers until `shutdown`; returns when they have
    /// drained the queue and exited (the [`client::Runner`]).
    pub async fn run(self, workers: usize, shutdown: CancellationToken) {
        let synced: Vec<&dyn HasSynced> = self
            .registrations
            .iter()
            .map(|r| r as &dyn HasSynced)
            .collect();
        let inner = self.inner.clone();
        Runner::new(K::QUEUE_NAME)
            .workers(workers)
            .run_workers(
                self.inner.queue.clone(),
                &synced,
                &shutdown,
                move |key: String| {
                    let inner = inner.clone();
                    async move { inner.counted_sync(&key).await.map(|()| Action::AwaitChange) }
                },
            )
            .await;
    }
}

/// Counts one sync in [`SyncMetrics`] when dropped, so a panicking sync is counted (as an error)
/// and leaves `in_flight` too.
struct SyncCount<'a, K: ReplicaOwner + client::Resource> {
    inner: &'a Inner<K>,
    key: &'a str,
    ok: bool,
}

impl<K: ReplicaOwner + client::Resource> Drop for SyncCount<'_, K> {
    fn drop(&mut self) {
        self.inner.in_flight.lock().remove(self.key);
        self.inner.metrics.syncs.fetch_add(1, Ordering::Relaxed);
        if !self.ok {
            self.inner.metrics.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<K: ReplicaOwner + client::Resource> Inner<K> {
    /// `sync`, counted, and checked against the queue's one-worker-per-key guarantee.
    async fn counted_sync(&self, key: &str) -> Result<()> {
        let fresh = self.in_flight.lock().insert(key.to_string());
        if !fresh {
            self.metrics
                .concurrent_syncs
                .fetch_add(1, Ordering::Relaxed);
        }
        let mut count = SyncCount {
            inner: self,
            key,
            ok: false,
        };
        let result = self.sync(key).await;
        count.ok = result.is_ok();
        result
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// `resolveControllerRef`.
    fn resolve(&self, namespace: &str, r: &OwnerReference) -> Option<Arc<K>> {
        if r.kind != K::KIND {
            return None;
        }
        let owner = self.owners.namespace(namespace).get(&r.name)?;
        (owner.metadata().uid.as_deref() == Some(r.uid.as_str())).then_some(owner)
    }

    /// `getPodReplicaSets`: owners in the pod's namespace whose (non-empty) selector matches it.
    fn matching_owners(&self, pod: &CachedPod) -> Vec<Arc<K>> {
        let Some(ns) = pod.metadata.namespace.as_deref() else {
            return Vec::new();
        };
        if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
            return Vec::new();
        }
        let found: Vec<Arc<K>> = self
            .owners
            .namespace(ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|o| match o.selector() {
                Ok(s) if s.is_empty() => false,
                Ok(s) => s.matches(pod.metadata.labels.as_ref()),
                Err(_) => false,
            })
            .collect();
        if found.len() > 1 {
            tracing::warn!(pod = %key_of_meta(&pod.metadata), "user error! more than one {} is selecting pods with labels", K::KIND);
        }
        found
    }

    fn enqueue(&self, owner: &K) {
        self.queue.add(key_of_meta(owner.metadata()));
    }

    // ---- owner handlers (§6.4)

    fn owner_deleted(&self, key: String) {
        self.expectations.delete_expectations(&key);
        self.queue.add(key);
    }

    // ---- pod handlers (§6.4)

    fn pod_added(&self, pod: &CachedPod) {
        if pod.metadata.deletion_timestamp.is_some() {
            // A restart may surface already-terminating pods: never count them as creations.
            self.pod_deleted(pod);
            return;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(r) = controller_of(&pod.metadata) {
            if let Some(owner) = self.resolve(ns, r) {
                let key = key_of_meta(owner.metadata());
                self.expectations.creation_observed(&key);
                self.queue.add(key);
            }
            return;
        }
        for owner in self.matching_owners(pod) {
            self.enqueue(&owner);
        }
    }

    fn pod_updated(&self, old: &CachedPod, new: &CachedPod) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        let label_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() {
            self.pod_deleted(new);
            if label_changed {
                self.pod_deleted(old);
            }
            return;
        }
        let ns = new.metadata.namespace.as_deref().unwrap_or_default();
        let (old_ref, new_ref) = (controller_of(&old.metadata), controller_of(&new.metadata));
        let ref_changed = old_ref != new_ref;
        if ref_changed {
            if let Some(owner) = old_ref.and_then(|r| self.resolve(ns, r)) {
                self.enqueue(&owner);
            }
        }
        if let Some(r) = new_ref {
            let Some(owner) = self.resolve(ns, r) else {
                return;
            };
            self.enqueue(&owner);
            let min_ready = owner
                .to_replica_set()
                .spec
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0);
            if !is_pod_ready(old) && is_pod_ready(new) && min_ready > 0 {
                let delay = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0) + 1);
                self.queue.add_after(key_of_meta(owner.metadata()), delay);
            }
            return;
        }
        if label_changed || ref_changed {
            for owner in self.matching_owners(new) {
                self.enqueue(&owner);
            }
        }
    }

    fn pod_deleted(&self, pod: &CachedPod) {
        let Some(r) = controller_of(&pod.metadata) else {
            return;
        };
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some(owner) = self.resolve(ns, r) else {
            return;
        };
        let key = key_of_meta(owner.metadata());
        self.expectations
            .deletion_observed(&key, &key_of_meta(&pod.metadata));
        self.queue.add(key);
    }

    // ---- sync (§6.5)

    async fn sync(&self, key: &str) -> Result<()> {
        let Ok((ns, name)) = split_meta_namespace_key(key) else {
            tracing::warn!(key, "not a namespace/name key; dropped");
            return Ok(());
        };
        let Some(owner) = self.owners.namespace(ns).get(name) else {
            tracing::debug!(key, "owner gone; dropping expectations");
            self.expectations.delete_expectations(key);
            return Ok(());
        };
        let rs = owner.to_replica_set();
        let needs_sync = self.expectations.satisfied_expectations(key);
        let selector = match owner.selector() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(key, error = %e, "invalid selector; not retrying");
                return Ok(());
            }
        };
        let all: Vec<Arc<CachedPod>> = self.pods.namespace(ns).list(&Selector::everything());
        let active: Vec<Arc<CachedPod>> = all.into_iter().filter(|p| is_pod_active(p)).collect();
        let claimed = self.claim_pods(&owner, &rs, &selector, active).await?;

        let deleting = rs.metadata.deletion_timestamp.is_some();
        let manage_err = if needs_sync && !deleting {
            self.manage_replicas(key, &owner, &rs, &claimed).await.err()
        } else {
            None
        };
        let msg = manage_err.as_ref().map(|e| e.to_string());
        let new_status = calculate_status(&rs, &claimed, msg.as_deref(), self.now());
        let updated = self.update_status(&owner, &rs, &new_status).await?;

        let spec = updated.spec.as_ref();
        let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
        let desired = spec.and_then(|s| s.replicas).unwrap_or(1);
        let st = updated.status.clone().unwrap_or_default();
        if manage_err.is_none()
            && min_ready > 0
            && st.ready_replicas.unwrap_or(0) == desired
            && st.available_replicas.unwrap_or(0) != desired
        {
            self.queue.add_after(
                key.to_string(),
                Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)),
            );
        }
        match manage_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn owner_ref(&self, rs: &ReplicaSet) -> OwnerReference {
        controller_ref(
            K::API_VERSION,
            K::KIND,
            rs.metadata.name.as_deref().unwrap_or_default(),
            rs.metadata.uid.as_deref().unwrap_or_default(),
        )
    }

    fn pods_api(&self, ns: &str) -> Api<Pod> {
        self.client.api::<Pod>(Some(ns))
    }

    /// `ClaimPods` (§6.7): adopt matching orphans, release non-matching pods, keep ours.
    async fn claim_pods(
        &self,
        owner: &K,
        rs: &ReplicaSet,
        selector: &Selector,
        active: Vec<Arc<CachedPod>>,
    ) -> Result<Vec<Arc<CachedPod>>> {
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let claim_owner = ClaimOwner {
            uid: &uid,
            deleting: rs.metadata.deletion_timestamp.is_some(),
            selector,
        };
        let mut claimed = Vec::new();
        let mut can_adopt: Option<std::result::Result<(), String>> = None;
        let mut errors = Vec::new();
        let api = self.pods_api(&ns);
        for pod in active {
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
            match decide(claim_owner, &pod) {
                ClaimAction::Claimed => claimed.push(pod),
                ClaimAction::Ignore => {}
                ClaimAction::Release => {
                    let patch = Patch::Strategic(release_patch(&uid, &pod_uid));
                    match api.patch(&pod_name, &patch).await {
                        Ok(_) => tracing::info!(pod = %pod_name, "released pod"),
                        Err(e) if e.is_not_found() || e.is_invalid() => {}
                        Err(e) => errors.push(format!("release {pod_name}: {e}")),
                    }
                }
                ClaimAction::Adopt => {
                    let ok = match &can_adopt {
                        Some(r) => r.clone(),
                        None => {
                            let r = self.can_adopt(owner, &uid).await;
                            can_adopt = Some(r.clone());
                            r
                        }
                    };
                    if let Err(e) = ok {
                        errors.push(e);
                        continue;
                    }
                    let patch = Patch::Strategic(adopt_patch(&self.owner_ref(rs), &pod_uid));
                    match api.patch(&pod_name, &patch).await {
                        Ok(adopted) => {
                            tracing::info!(pod = %pod_name, "adopted pod");
                            claimed.push(Arc::new(CachedPod::from(adopted)));
                        }
                        Err(e) if e.is_not_found() => {}
                        Err(e) => errors.push(format!("adopt {pod_name}: {e}")),
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(claimed)
        } else {
            Err(Error::Claim(errors.join("; ")))
        }
    }

    /// The uncached recheck before adopting (`RecheckDeletionTimestamp`).
    async fn can_adopt(&self, owner: &K, uid: &str) -> std::result::Result<(), String> {
        let meta = owner.metadata();
        let api: Api<K> = self.client.api::<K>(meta.namespace.as_deref());
        let name = meta.name.as_deref().unwrap_or_default();
        match api.get(name).await {
            Ok(fresh) if fresh.metadata().uid.as_deref() != Some(uid) => Err(format!(
                "original {} {name} is gone: got uid {:?}, wanted {uid}",
                K::KIND,
                fresh.metadata().uid
            )),
            Ok(fresh) if fresh.metadata().deletion_timestamp.is_some() => {
                Err(format!("{} {name} has just been deleted", K::KIND))
            }
            Ok(_) => Ok(()),
            Err(e) => Err(format!("can't recheck {} {name}: {e}", K::KIND)),
        }
    }

    fn object_ref(&self, rs: &ReplicaSet) -> ObjectReference {
        ObjectReference {
            api_version: Some(K::API_VERSION.into()),
            kind: Some(K::KIND.into()),
            namespace: rs.metadata.namespace.clone(),
            name: rs.metadata.name.clone(),
            uid: rs.metadata.uid.clone(),
            resource_version: rs.metadata.resource_version.clone(),
            field_path: None,
        }
    }

    /// `manageReplicas` (§6.6).
    async fn manage_replicas(
        &self,
        key: &str,
        _owner: &K,
        rs: &ReplicaSet,
        claimed: &[Arc<CachedPod>],
    ) -> Result<()> {
        let desired = rs
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1)
            .max(0) as usize;
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let name = rs.metadata.name.clone().unwrap_or_default();
        let oref = self.object_ref(rs);
        if claimed.len() < desired {
            let n = (desired - claimed.len()).min(BURST_REPLICAS);
            let template = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.clone())
                .unwrap_or_default();
            let pod = pod_from_template(&template, &ns, &name, self.owner_ref(rs))?;
            // Expectations before any request: the informer may deliver the ADDs before we return.
            self.expectations.expect_creations(key, n as i64);
            tracing::debug!(key, n, "creating pods");
            let api = self.pods_api(&ns);
            let (successes, err) = slow_start_batch(n, SLOW_START_INITIAL_BATCH_SIZE, || {
                let api = api.clone();
                let pod = pod.clone();
                let oref = oref.clone();
                async move {
                    let _slot = self.writes.acquire().await;
                    match api.create_metadata(&pod).await {
                        Ok(created) => {
                            self.metrics.creates.fetch_add(1, Ordering::Relaxed);
                            let pname = created.name.unwrap_or_default();
                            self.recorder.event(
                                &oref,
                                EventType::Normal,
                                "SuccessfulCreate",
                                &format!("Created pod: {pname}"),
                            );
                            Ok(())
                        }
                        Err(e) if namespace_terminating(&e) => Ok(()),
                        Err(e) => {
                            self.recorder.event(
                                &oref,
                                EventType::Warning,
                                "FailedCreate",
                                &format!("Error creating: {}", e.api_message()),
                            );
                            Err(e)
                        }
                    }
                }
            })
            .await;
            let skipped = n - successes;
            for _ in 0..skipped {
                // These creations will never be observed by the informer.
                self.expectations.creation_observed(key);
            }
            return match err {
                Some(e) => Err(Error::api("create pod", e)),
                None => Ok(()),
            };
        }
        if claimed.len() > desired {
            let n = (claimed.len() - desired).min(BURST_REPLICAS);
            let related = self.related_pods(rs);
            let victims = pods_to_delete(claimed, &related, n, self.now());
            let keys: Vec<String> = victims.iter().map(|p| key_of_meta(&p.metadata)).collect();
            self.expectations.expect_deletions(key, keys);
            tracing::debug!(key, n, "deleting pods");
            let api = self.pods_api(&ns);
            let results = join_all(victims.iter().map(|p| {
                let api = api.clone();
                let oref = oref.clone();
                async move {
                    let _slot = self.writes.acquire().await;
                    let pname = p.metadata.name.clone().unwrap_or_default();
                    match api.delete(&pname, &DeleteParams::default()).await {
                        Ok(()) => {
                            self.metrics.deletes.fetch_add(1, Ordering::Relaxed);
                            self.recorder.event(
                                &oref,
                                EventType::Normal,
                                "SuccessfulDelete",
                                &format!("Deleted pod: {pname}"),
                            );
                            Ok(())
                        }
                        Err(e) => {
                            // The informer will not see this deletion: lower the expectation now.
                            self.expectations
                                .deletion_observed(key, &key_of_meta(&p.metadata));
                            if e.is_not_found() {
                                Ok(())
                            } else {
                                self.recorder.event(
                                    &oref,
                                    EventType::Warning,
                                    "FailedDelete",
                                    &format!("Error deleting: {e}"),
                                );
                                Err(e)
                            }
                        }
                    }
                }
            }))
            .await;
            if let Some(e) = results.into_iter().find_map(|r| r.err()) {
                return Err(Error::api("delete pod", e));
            }
        }
        Ok(())
    }

    /// Pods of every owner sharing this owner's controller (Deployment siblings); none if standalone.
    fn related_pods(&self, rs: &ReplicaSet) -> Vec<Arc<CachedPod>> {
        let Some(parent) = controller_of(&rs.metadata).map(|r| r.uid.clone()) else {
            return Vec::new();
        };
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let sibling_uids: std::collections::HashSet<String> = self
            .owners
            .namespace(&ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|o| controller_of(o.metadata()).is_some_and(|r| r.uid == parent))
            .filter_map(|o| o.metadata().uid.clone())
            .collect();
        self.pods
            .namespace(&ns)
            .list(&Selector::everything())
            .into_iter()
            .filter(|p| controller_of(&p.metadata).is_some_and(|r| sibling_uids.contains(&r.uid)))
            .collect()
    }

    /// `updateReplicaSetStatus` (§6.9): no-op if unchanged; one GET + retry on failure.
    async fn update_status(
        &self,
        owner: &K,
        rs: &ReplicaSet,
        new: &k8s_openapi::api::apps::v1::ReplicaSetStatus,
    ) -> Result<ReplicaSet> {
        if !needs_update(rs, new) {
            return Ok(rs.clone());
        }
        let status = with_observed_generation(rs, new);
        let meta = owner.metadata();
        let name = meta.name.clone().unwrap_or_default();
        let api: Api<K> = self.client.api::<K>(meta.namespace.as_deref());
        let mut current = owner.clone();
        for attempt in 0..2 {
            match api
                .replace_status(&name, &current.with_status(&status))
                .await
            {
                Ok(written) => return Ok(written.to_replica_set()),
                Err(e) if attempt >= 1 => return Err(Error::api("update status", e)),
                Err(e) => {
                    tracing::debug!(name = %name, error = %e, "status update failed; refetching");
                    current = api
                        .get(&name)
                        .await
                        .map_err(|e| Error::api("get for status retry", e))?;
                }
            }
        }
        Ok(rs.clone())
    }
}

/// A create refused because the namespace is being deleted (`NamespaceTerminating` cause).
fn namespace_terminating(e: &client::Error) -> bool {
    e.status()
        .and_then(|s| s.details.as_ref())
        .and_then(|d| d.causes.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.reason.as_deref() == Some("NamespaceTerminating"))
        })
}

struct OwnerHandler<K: ReplicaOwner + client::Resource>(Arc<Inner<K>>);

impl<K: ReplicaOwner + client::Resource> ResourceEventHandler<K> for OwnerHandler<K> {
    fn on_add(&self, obj: &Arc<K>, _in_initial_list: bool) {
        self.0.enqueue(obj);
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if old.metadata().uid != new.metadata().uid {
            // Delete + recreate observed as one update (kubernetes #69376).
            self.0.owner_deleted(key_of_meta(old.metadata()));
        }
        self.0.enqueue(new);
    }

    fn on_delete(&self, obj: DeletedObject<K>) {
        self.0.owner_deleted(obj.key());
    }
}

struct PodHandler<K: ReplicaOwner + client::Resource>(Arc<Inner<K>>);

impl<K: ReplicaOwner + client::Resource> ResourceEventHandler<CachedPod> for PodHandler<K> {
    fn on_add(&self, obj: &Arc<CachedPod>, _in_initial_list: bool) {
        self.0.pod_added(obj);
    }

    fn on_update(&self, old: &Arc<CachedPod>, new: &Arc<CachedPod>) {
        self.0.pod_updated(old, new);
    }

    fn on_delete(&self, obj: DeletedObject<CachedPod>) {
        self.0.pod_deleted(obj.object());
    }
}
