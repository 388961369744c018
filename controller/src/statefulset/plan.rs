//! What one StatefulSet sync does, decided from a snapshot (upstream `updateStatefulSet`,
//! `processReplica`, `processCondemned`, the rolling update and `updateStatus`, 1.33 with
//! MaxUnavailableStatefulSet off).
//!
//! The pods are split into *replicas* (ordinals `start..=end`, missing ones built at the right
//! revision when the plan reaches them) and *condemned* (valid ordinals outside, highest first).
//! The plan then lists, at most [`MAX_CREATES_PER_SYNC`] creations included, in
//! order, the steps upstream would take:
//!
//! 1. replicas, lowest ordinal first: delete failed/succeeded pods; create missing ones (unless a
//!    claim still refers to an old pod); create missing claims of pending pods; restore identity,
//!    storage and claim ownership. With `OrderedReady` the plan stops at the first step that
//!    must wait: a pod just created, terminating, or not Running+Ready+available.
//! 2. condemned pods' claim ownership (retention policy), then their deletion, highest ordinal
//!    first; `OrderedReady` waits for a terminating one and only deletes an unhealthy pod if it
//!    is the first unhealthy one.
//! 3. `RollingUpdate`: delete the highest-ordinal pod at or above the partition that is not at
//!    the update revision, one at a time, waiting for unavailable pods. `OnDelete`: nothing.
//!
//! The executor performs the steps in order and stops at the first failure; with `Parallel`
//! it may run the creations of step 1 concurrently. Pure: time comes in as `now`.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use super::identity::{
    allows_burst, claims_for, identity_matches, in_ordinal_range, is_created, is_on_delete,
    is_running_and_available, is_running_and_ready, is_terminating, is_unavailable,
    min_ready_seconds, new_versioned_pod, ordinal, partition, pod_revision, start_ordinal,
    storage_matches,
};
use super::retention::{has_stale_pod_ref, is_claim_owner_up_to_date, policy, Retention};
use crate::cached_pod::CachedPod;
use crate::pod_util::phase;

/// Why a pod is deleted (for logs; the event is the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// It failed or succeeded; a new one takes its ordinal.
    Finished,
    /// Its ordinal is beyond the replicas.
    ScaleDown,
    /// It is not at the update revision.
    Update,
}

/// One request of the sync.
#[derive(Debug, Clone)]
pub enum Step {
    /// Create the claims, then the pod, then set the claims' owners: the pod whole, and as the
    /// claims and events read it.
    Create { pod: Box<Pod>, view: Box<CachedPod> },
    /// Create the missing claims of a pending pod and set their owners.
    CreateClaims(Arc<CachedPod>),
    /// Restore the pod's identity and storage, and its claims' owners.
    Update(Arc<CachedPod>),
    /// Set the owners of a condemned pod's claims.
    FixClaims(Arc<CachedPod>),
    /// Delete the pod.
    Delete(Arc<CachedPod>, DeleteReason),
}

/// The plan: the status to write and the steps to take.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Counts of the pods as found (`updateStatus`); the executor lowers `currentReplicas` by
    /// one for an update deletion that succeeds.
    pub status: StatefulSetStatus,
    /// Steps in order.
    pub steps: Vec<Step>,
    /// `OrderedReady`: steps run one after another.
    pub monotonic: bool,
}

/// What the planner reads.
pub struct Snapshot<'a> {
    /// The set as stored.
    pub set: &'a StatefulSet,
    /// The set at its current revision.
    pub current_set: &'a StatefulSet,
    /// The set at its update revision.
    pub update_set: &'a StatefulSet,
    /// Name of the current revision.
    pub current_revision: &'a str,
    /// Name of the update revision.
    pub update_revision: &'a str,
    /// The set's collision count after revisions were made.
    pub collision_count: i32,
    /// The set's pods (claimed).
    pub pods: &'a [Arc<CachedPod>],
    /// Claim lookup by name in the set's namespace.
    pub claim: &'a dyn Fn(&str) -> Option<Arc<PersistentVolumeClaim>>,
    /// Now.
    pub now: Timestamp,
}

/// `updateStatus`/`computeReplicaStatus` over `pods` into `status`.
pub fn count(status: &mut StatefulSetStatus, s: &Snapshot<'_>, pods: &[&CachedPod]) {
    let min_ready = min_ready_seconds(s.set);
    let (mut replicas, mut ready, mut available, mut current, mut updated) = (0, 0, 0, 0, 0);
    for pod in pods {
        if is_created(pod) {
            replicas += 1;
        }
        if is_running_and_ready(pod) {
            ready += 1;
            if is_running_and_available(pod, min_ready, s.now) {
                available += 1;
            }
        }
        if is_created(pod) && !is_terminating(pod) {
            let rev = pod_revision(pod);
            current += i32::from(rev == s.current_revision);
            updated += i32::from(rev == s.update_revision);
        }
    }
    status.replicas = replicas;
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.current_replicas = Some(current);
    status.updated_replicas = Some(updated);
}

/// `ClaimsMatchRetentionPolicy` (missing claims match: they are made later).
fn claims_match(s: &Snapshot<'_>, pod: &CachedPod) -> bool {
    claims_for(s.update_set, ordinal(pod)).iter().all(|(_, c)| {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        (s.claim)(name).is_none_or(|found| is_claim_owner_up_to_date(&found, s.update_set, pod))
    })
}

/// `PodClaimIsStale`: under `whenScaled: Delete`, a claim of this ordinal refers to another pod.
fn claim_is_stale(s: &Snapshot<'_>, pod: &CachedPod) -> bool {
    if policy(s.set).1 == Retention::Retain {
        return false;
    }
    claims_for(s.set, ordinal(pod)).iter().any(|(_, c)| {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        (s.claim)(name).is_some_and(|found| has_stale_pod_ref(&found, pod))
    })
}

/// A replica slot: a pod found, or one to create.
enum Slot {
    Found(Arc<CachedPod>),
    /// A pod to create: whole, and as the plan reads a pod.
    New {
        pod: Box<Pod>,
        view: Box<CachedPod>,
    },
}

impl Slot {
    fn pod(&self) -> &CachedPod {
        match self {
            Slot::Found(p) => p,
            Slot::New { view, .. } => view,
        }
    }
}

/// Most pods one sync creates: the rest come with the syncs their creations trigger. Upstream
/// creates every missing replica of a `Parallel` set in one sync (and builds a pod for every
/// missing ordinal); here a set of a billion replicas must not hold the process's memory.
pub const MAX_CREATES_PER_SYNC: usize = 500;

/// The replica ordinals `start..start + n`: the pods found at some, a new pod built for any
/// other only when the plan looks at it (never one per ordinal up front).
struct Replicas<'s, 'a> {
    s: &'s Snapshot<'a>,
    start: i32,
    n: usize,
    /// By index (ordinal − start).
    found: BTreeMap<usize, Arc<CachedPod>>,
}

impl Replicas<'_, '_> {
    fn slot(&self, i: usize) -> Slot {
        match self.found.get(&i) {
            Some(p) => Slot::Found(p.clone()),
            None => {
                let pod = new_versioned_pod(
                    self.s.current_set,
                    self.s.update_set,
                    self.s.current_revision,
                    self.s.update_revision,
                    self.start
                        .saturating_add(i32::try_from(i).unwrap_or(i32::MAX)),
                );
                Slot::New {
                    view: Box::new(CachedPod::from(pod.clone())),
                    pod: Box::new(pod),
                }
            }
        }
    }
}

/// Decide the sync (see the module header).
pub fn plan(s: &Snapshot<'_>) -> Plan {
    let set = s.set;
    let min_ready = min_ready_seconds(set);
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        current_revision: Some(s.current_revision.to_string()),
        update_revision: Some(s.update_revision.to_string()),
        collision_count: Some(s.collision_count),
        ..Default::default()
    };
    let all: Vec<&CachedPod> = s.pods.iter().map(|p| &**p).collect();
    count(&mut status, s, &all);

    let start = start_ordinal(set);
    let mut replicas = Replicas {
        s,
        start,
        n: usize::try_from(super::identity::replicas(set)).unwrap_or(0),
        found: BTreeMap::new(),
    };
    let mut condemned: Vec<Arc<CachedPod>> = Vec::new();
    for pod in s.pods {
        if in_ordinal_range(pod, set) {
            if let Some(i) = ordinal(pod)
                .checked_sub(start)
                .and_then(|i| usize::try_from(i).ok())
                .filter(|i| *i < replicas.n)
            {
                replicas.found.insert(i, pod.clone());
            }
        } else if ordinal(pod) >= 0 {
            condemned.push(pod.clone());
        }
    }
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(p)));

    // The first unavailable pod, among replicas (a missing one is), else the lowest condemned
    // one: only whether it is a condemned pod matters below.
    let replica_unavailable = replicas.found.len() < replicas.n
        || replicas
            .found
            .values()
            .any(|p| is_unavailable(p, min_ready, s.now));
    let first_unavailable: Option<&CachedPod> = if replica_unavailable {
        None
    } else {
        condemned
            .iter()
            .rev()
            .map(|p| &**p)
            .find(|p| is_unavailable(p, min_ready, s.now))
    };

    // Status over the replicas and condemned pods, as upstream recounts before returning (a
    // replica still to create counts for nothing).
    let counted: Vec<&CachedPod> = replicas
        .found
        .values()
        .chain(condemned.iter())
        .map(|p| &**p)
        .collect();
    let monotonic = !allows_burst(set);
    let mut out = Plan {
        status: status.clone(),
        steps: Vec::new(),
        monotonic,
    };
    if set.metadata.deletion_timestamp.is_some() {
        return out;
    }
    count(&mut out.status, s, &counted);

    // 1. replicas.
    let mut creates = 0;
    for i in 0..replicas.n {
        let slot = replicas.slot(i);
        if matches!(slot, Slot::New { .. }) {
            // A create past the limit waits for the next sync (the rest of this one waits too).
            if creates == MAX_CREATES_PER_SYNC {
                return out;
            }
            creates += 1;
        }
        if process_replica(s, slot, monotonic, &mut out.steps) {
            return out;
        }
    }
    // 2. condemned: claims, then deletions.
    for pod in &condemned {
        if !claims_match(s, pod) {
            out.steps.push(Step::FixClaims(pod.clone()));
        }
    }
    for pod in &condemned {
        if is_terminating(pod) {
            if monotonic {
                return out;
            }
            continue;
        }
        let is_first = first_unavailable.is_some_and(|f| std::ptr::eq(f, &**pod));
        if monotonic && !is_first && is_unavailable(pod, min_ready, s.now) {
            return out;
        }
        out.steps
            .push(Step::Delete(pod.clone(), DeleteReason::ScaleDown));
        if monotonic {
            return out;
        }
    }
    // 3. rolling update.
    if is_on_delete(set) {
        return out;
    }
    let update_min = usize::try_from(partition(set).unwrap_or(0)).unwrap_or(0);
    for i in (update_min..replicas.n).rev() {
        let slot = replicas.slot(i);
        let pod = slot.pod();
        if pod_revision(pod) != s.update_revision && !is_terminating(pod) {
            if let Slot::Found(p) = slot {
                out.steps
                    .push(Step::Delete(p.clone(), DeleteReason::Update));
            }
            return out;
        }
        if is_unavailable(pod, min_ready, s.now) {
            return out;
        }
    }
    out
}

/// `processReplica`: push its steps; `true` when the plan must stop here.
fn process_replica(s: &Snapshot<'_>, slot: Slot, monotonic: bool, steps: &mut Vec<Step>) -> bool {
    let pod = match slot {
        Slot::New { pod, view } => {
            if claim_is_stale(s, &view) {
                return true;
            }
            steps.push(Step::Create { pod, view });
            return monotonic;
        }
        Slot::Found(pod) => pod,
    };
    let pod = &pod;
    let p = phase(pod);
    if p == "Failed" || p == "Succeeded" {
        if !is_terminating(pod) {
            steps.push(Step::Delete(pod.clone(), DeleteReason::Finished));
        }
        return monotonic;
    }
    if p == "Pending" {
        steps.push(Step::CreateClaims(pod.clone()));
    }
    if monotonic
        && (is_terminating(pod)
            || !is_running_and_ready(pod)
            || !is_running_and_available(pod, min_ready_seconds(s.set), s.now))
    {
        return true;
    }
    if !(identity_matches(s.set, pod) && storage_matches(s.set, pod) && claims_match(s, pod)) {
        steps.push(Step::Update(pod.clone()));
    }
    false
}

/// `completeRollingUpdate`: once every replica is updated and ready, the update revision is
/// the current one.
pub fn complete_rolling_update(set: &StatefulSet, status: &mut StatefulSetStatus) {
    let want = super::identity::replicas(set);
    if !is_on_delete(set)
        && status.updated_replicas == Some(want)
        && status.ready_replicas == Some(want)
        && status.replicas == want
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
}

/// `inconsistentStatus`: the status to write differs from the stored one.
pub fn inconsistent_status(set: &StatefulSet, status: &StatefulSetStatus) -> bool {
    let old = set.status.clone().unwrap_or_default();
    status.observed_generation.unwrap_or(0) > old.observed_generation.unwrap_or(0)
        || status.replicas != old.replicas
        || status.current_replicas.unwrap_or(0) != old.current_replicas.unwrap_or(0)
        || status.ready_replicas.unwrap_or(0) != old.ready_replicas.unwrap_or(0)
        || status.updated_replicas.unwrap_or(0) != old.updated_replicas.unwrap_or(0)
        || status.current_revision != old.current_revision
        || status.available_replicas.unwrap_or(0) != old.available_replicas.unwrap_or(0)
        || status.update_revision != old.update_revision
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
