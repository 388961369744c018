//! A StatefulSet's pods and claims as values (upstream `stateful_set_utils.go`): ordinals and
//! names, the stable identity (name, `statefulset.kubernetes.io/pod-name`,
//! `apps.kubernetes.io/pod-index`, hostname and subdomain), the claims of the volume claim
//! templates, building a pod of a given revision, and the revision patch that records a template.
//!
//! Everything here is deterministic and free of I/O.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{json, Value};

use crate::cached_pod::CachedPod;
use crate::history;
use crate::pod_util::{is_pod_available, is_pod_ready, phase};
use crate::replication::claim::controller_ref;

/// Label with the pod's own name (`StatefulSetPodNameLabel`), e.g. for per-pod Services.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Label with the pod's ordinal (`PodIndexLabel`; the feature is on by default in 1.33).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// Label with the name of the ControllerRevision a pod was made from (`StatefulSetRevisionLabel`).
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The StatefulSet's controller reference on its pods and revisions.
pub fn owner_ref(set: &StatefulSet) -> OwnerReference {
    controller_ref(
        "apps/v1",
        "StatefulSet",
        set.metadata.name.as_deref().unwrap_or_default(),
        set.metadata.uid.as_deref().unwrap_or_default(),
    )
}

/// `getParentNameAndOrdinal`: the name split as `(.*)-([0-9]+)$`, the ordinal a 32-bit integer.
pub fn parent_and_ordinal(name: &str) -> Option<(&str, i32)> {
    let (parent, digits) = name.rsplit_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, digits.parse().ok()?))
}

/// `getOrdinal`: the pod's ordinal, -1 when its name has none.
pub fn ordinal(pod: &CachedPod) -> i32 {
    meta_ordinal(&pod.metadata)
}

/// [`ordinal`] of a pod's metadata (of a pod being built or repaired).
fn meta_ordinal(meta: &ObjectMeta) -> i32 {
    parent_and_ordinal(meta.name.as_deref().unwrap_or_default()).map_or(-1, |(_, o)| o)
}

fn name(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

/// `spec.replicas` (default 1).
pub fn replicas(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `getStartOrdinal`: `spec.ordinals.start`, else 0.
pub fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

/// `getEndOrdinal` (inclusive). Saturating: `ordinals.start` may be as large as `i32::MAX`
/// (upstream's Go `int` is 64 bits and never overflows here).
pub fn end_ordinal(set: &StatefulSet) -> i32 {
    start_ordinal(set)
        .saturating_add(replicas(set))
        .saturating_sub(1)
}

/// `podInOrdinalRange`.
pub fn in_ordinal_range(pod: &CachedPod, set: &StatefulSet) -> bool {
    let o = ordinal(pod);
    o >= start_ordinal(set) && o <= end_ordinal(set)
}

/// `getPodName`: `<set>-<ordinal>`.
pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", name(set))
}

/// `getPersistentVolumeClaimName`: `<template>-<set>-<ordinal>`.
pub fn claim_name(set: &StatefulSet, template: &str, ordinal: i32) -> String {
    format!("{template}-{}-{ordinal}", name(set))
}

/// `isMemberOf`: the pod's name says it belongs to the set.
pub fn is_member_of(set: &StatefulSet, pod: &CachedPod) -> bool {
    parent_and_ordinal(pod.metadata.name.as_deref().unwrap_or_default())
        .is_some_and(|(p, _)| p == name(set))
}

fn label<'a>(pod: &'a CachedPod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// `identityMatches`: name, namespace and the pod-name label are the set's.
pub fn identity_matches(set: &StatefulSet, pod: &CachedPod) -> bool {
    let pod_name_ = pod.metadata.name.as_deref().unwrap_or_default();
    parent_and_ordinal(pod_name_).is_some_and(|(parent, o)| {
        parent == name(set)
            && pod_name_ == pod_name(set, o)
            && pod.metadata.namespace == set.metadata.namespace
            && label(pod, POD_NAME_LABEL) == Some(pod_name_)
    })
}

fn claim_templates(set: &StatefulSet) -> &[PersistentVolumeClaim] {
    set.spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_deref())
        .unwrap_or_default()
}

/// `storageMatches`: every claim template is mounted from the pod's own claim.
pub fn storage_matches(set: &StatefulSet, pod: &CachedPod) -> bool {
    let o = ordinal(pod);
    if o < 0 {
        return false;
    }
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    claim_templates(set).iter().all(|t| {
        let tname = t.metadata.name.as_deref().unwrap_or_default();
        volumes.iter().any(|v| {
            v.name == tname
                && v.persistent_volume_claim
                    .as_ref()
                    .map(|c| c.claim_name.as_str())
                    == Some(claim_name(set, tname, o).as_str())
        })
    })
}

/// `getPersistentVolumeClaims`: per template name, the claim of the pod with `ordinal`, labelled
/// with the set's selector `matchLabels` (over the template's own labels).
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<(String, PersistentVolumeClaim)> {
    let match_labels = set
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default();
    claim_templates(set)
        .iter()
        .map(|t| {
            let tname = t.metadata.name.clone().unwrap_or_default();
            let mut claim = t.clone();
            claim.metadata.name = Some(claim_name(set, &tname, ordinal));
            claim.metadata.namespace = set.metadata.namespace.clone();
            let mut labels = claim.metadata.labels.take().unwrap_or_default();
            labels.extend(match_labels.clone());
            claim.metadata.labels = (!labels.is_empty()).then_some(labels);
            claim.status = None;
            (tname, claim)
        })
        .collect()
}

/// `updateStorage`: mount each template's claim under the template's name, keeping the pod's
/// other volumes.
pub fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let claims = claims_for(set, meta_ordinal(&pod.metadata));
    let spec = pod.spec.get_or_insert_with(Default::default);
    let current = spec.volumes.take().unwrap_or_default();
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(tname, claim)| Volume {
            name: tname.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.metadata.name.clone().unwrap_or_default(),
                read_only: None,
            }),
            ..Default::default()
        })
        .collect();
    volumes.extend(
        current
            .into_iter()
            .filter(|v| claims.iter().all(|(t, _)| *t != v.name)),
    );
    spec.volumes = Some(volumes);
}

/// `updateIdentity`: name, namespace, the pod-name and pod-index labels.
pub fn update_identity(set: &StatefulSet, pod: &mut Pod) {
    let o = meta_ordinal(&pod.metadata);
    let n = pod_name(set, o);
    pod.metadata.name = Some(n.clone());
    pod.metadata.namespace = set.metadata.namespace.clone();
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.to_string(), n);
    labels.insert(POD_INDEX_LABEL.to_string(), o.to_string());
}

/// `initIdentity`: [`update_identity`] plus the immutable hostname and subdomain (`serviceName`).
pub fn init_identity(set: &StatefulSet, pod: &mut Pod) {
    update_identity(set, pod);
    let hostname = pod.metadata.name.clone();
    let service = set
        .spec
        .as_ref()
        .map(|s| s.service_name.clone())
        .unwrap_or_default();
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = hostname;
    spec.subdomain = service.filter(|s| !s.is_empty());
}

/// `newStatefulSetPod`: the pod with `ordinal` from the set's template, owned by the set.
pub fn new_pod(set: &StatefulSet, ordinal: i32) -> Pod {
    let template = set.spec.as_ref().map(|s| &s.template);
    let tmeta = template
        .and_then(|t| t.metadata.clone())
        .unwrap_or_default();
    let mut pod = Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(set, ordinal)),
            namespace: set.metadata.namespace.clone(),
            labels: tmeta.labels,
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner_ref(set)]),
            ..Default::default()
        },
        spec: template.and_then(|t| t.spec.clone()),
        status: None,
    };
    init_identity(set, &mut pod);
    update_storage(set, &mut pod);
    pod
}

fn is_rolling_update(set: &StatefulSet) -> bool {
    let type_ = set
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref());
    type_.is_none_or(|t| t == "RollingUpdate")
}

/// `spec.updateStrategy.rollingUpdate.partition`, if a rollingUpdate is given (default 0).
pub fn partition(set: &StatefulSet) -> Option<i32> {
    let ru = set
        .spec
        .as_ref()?
        .update_strategy
        .as_ref()?
        .rolling_update
        .as_ref()?;
    Some(ru.partition.unwrap_or(0))
}

/// `updateStrategy.type` is `OnDelete`.
pub fn is_on_delete(set: &StatefulSet) -> bool {
    !is_rolling_update(set)
}

/// `newVersionedStatefulSetPod`: below the partition (or, with no rollingUpdate, below the
/// current replicas) a pod of the current revision, else of the update revision.
pub fn new_versioned_pod(
    current_set: &StatefulSet,
    update_set: &StatefulSet,
    current_revision: &str,
    update_revision: &str,
    ordinal: i32,
) -> Pod {
    let start = start_ordinal(current_set);
    let current_replicas = current_set
        .status
        .as_ref()
        .and_then(|s| s.current_replicas)
        .unwrap_or(0);
    // Upstream's condition, with Go's precedence (&& binds tighter than ||).
    let use_current = match partition(current_set) {
        None => is_rolling_update(current_set) && ordinal < start.saturating_add(current_replicas),
        Some(p) => ordinal < start.saturating_add(p),
    };
    let (set, revision) = if use_current {
        (current_set, current_revision)
    } else {
        (update_set, update_revision)
    };
    let mut pod = new_pod(set, ordinal);
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(REVISION_LABEL.to_string(), revision.to_string());
    pod
}

/// `getPodRevision`.
pub fn pod_revision(pod: &CachedPod) -> &str {
    label(pod, REVISION_LABEL).unwrap_or_default()
}

/// `getPatch`: the strategic-merge patch that puts the set's pod template back.
pub fn revision_patch(set: &StatefulSet) -> Value {
    let template = set.spec.as_ref().map(|s| &s.template);
    let mut t = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut t {
        m.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": t}})
}

/// `newRevision`: the set's template as revision number `revision`, with the template's labels
/// and the set's annotations.
pub fn new_revision(set: &StatefulSet, revision: i64, collision_count: i32) -> ControllerRevision {
    let labels = set
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    let mut cr = history::new_controller_revision(
        &set.metadata,
        owner_ref(set),
        labels,
        revision_patch(set),
        revision,
        Some(collision_count),
    );
    cr.metadata.annotations = Some(set.metadata.annotations.clone().unwrap_or_default());
    cr
}

/// `ApplyRevision`: the set with the revision's template. `None` if the data holds no template.
pub fn apply_revision(set: &StatefulSet, revision: &ControllerRevision) -> Option<StatefulSet> {
    let mut t = revision
        .data
        .as_ref()?
        .0
        .get("spec")?
        .get("template")?
        .clone();
    if let Value::Object(m) = &mut t {
        m.remove("$patch");
    }
    let template: PodTemplateSpec = serde_json::from_value(t).ok()?;
    let mut out = set.clone();
    out.spec.get_or_insert_with(Default::default).template = template;
    Some(out)
}

/// `isCreated`: the apiserver has it (it has a phase).
pub fn is_created(pod: &CachedPod) -> bool {
    !phase(pod).is_empty()
}

/// `isTerminating`.
pub fn is_terminating(pod: &CachedPod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `isRunningAndReady`.
pub fn is_running_and_ready(pod: &CachedPod) -> bool {
    phase(pod) == "Running" && is_pod_ready(pod)
}

/// `isRunningAndAvailable`: ready for `minReadySeconds`.
pub fn is_running_and_available(pod: &CachedPod, min_ready_seconds: i32, now: Timestamp) -> bool {
    is_pod_available(pod, min_ready_seconds, now)
}

/// `isUnavailable`: not available, or terminating.
pub fn is_unavailable(pod: &CachedPod, min_ready_seconds: i32, now: Timestamp) -> bool {
    !is_running_and_available(pod, min_ready_seconds, now) || is_terminating(pod)
}

/// `allowsBurst`: `podManagementPolicy: Parallel`.
pub fn allows_burst(set: &StatefulSet) -> bool {
    set.spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        == Some("Parallel")
}

/// `spec.minReadySeconds`.
pub fn min_ready_seconds(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "identity_tests.rs"]
pub(crate) mod tests;
