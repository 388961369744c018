//! `persistentVolumeClaimRetentionPolicy` as owner references on the claims (upstream
//! `stateful_set_utils.go`, 1.33, where the StatefulSetAutoDeletePVC feature is GA).
//!
//! The garbage collector does the deleting; this module only decides which controller
//! references a claim should carry:
//!
//! | whenScaled | whenDeleted | claim of a pod in range | claim of a scaled-down pod |
//! |---|---|---|---|
//! | Retain | Retain | none | none |
//! | Retain | Delete | the set | the set |
//! | Delete | Retain | none | the pod |
//! | Delete | Delete | the set | the pod |
//!
//! Claims with a stale reference (the set's or pod's name with another UID) are left alone, and
//! so are claims another controller manages (our references are removed from them). Pure.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::identity::{in_ordinal_range, owner_ref};
use crate::cached_pod::CachedPod;
use crate::replication::claim::controller_ref;

/// One side of the retention policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Keep the claims (the default).
    Retain,
    /// Delete them through an owner reference.
    Delete,
}

/// `(whenDeleted, whenScaled)`, unknown values read as Retain.
pub fn policy(set: &StatefulSet) -> (Retention, Retention) {
    let p = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let read = |v: Option<&String>| match v.map(String::as_str) {
        Some("Delete") => Retention::Delete,
        _ => Retention::Retain,
    };
    (
        read(p.and_then(|p| p.when_deleted.as_ref())),
        read(p.and_then(|p| p.when_scaled.as_ref())),
    )
}

/// Who a claim refers to: name, kind and UID.
struct Target<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
}

fn set_target(set: &StatefulSet) -> Target<'_> {
    Target {
        api_version: "apps/v1",
        kind: "StatefulSet",
        name: set.metadata.name.as_deref().unwrap_or_default(),
        uid: set.metadata.uid.as_deref().unwrap_or_default(),
    }
}

fn pod_target(pod: &CachedPod) -> Target<'_> {
    Target {
        api_version: "v1",
        kind: "Pod",
        name: pod.metadata.name.as_deref().unwrap_or_default(),
        uid: pod.metadata.uid.as_deref().unwrap_or_default(),
    }
}

/// `matchesRef`: same kind, group-version and name (not UID).
fn matches(r: &OwnerReference, t: &Target<'_>) -> bool {
    r.api_version == t.api_version && r.kind == t.kind && r.name == t.name
}

fn refs(claim: &PersistentVolumeClaim) -> &[OwnerReference] {
    claim
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
}

/// `hasOwnerRef`: a reference with the owner's UID.
fn has_owner_ref(claim: &PersistentVolumeClaim, t: &Target<'_>) -> bool {
    refs(claim).iter().any(|r| r.uid == t.uid)
}

/// `hasStaleOwnerRef`: the first reference naming the owner has another UID.
fn has_stale(claim: &PersistentVolumeClaim, t: &Target<'_>) -> bool {
    refs(claim)
        .iter()
        .find(|r| matches(r, t))
        .is_some_and(|r| r.uid != t.uid)
}

/// `PodClaimIsStale` for one claim: it refers to a pod of this name with another UID (a pod
/// about to be created has no UID, so any such reference is stale).
pub fn has_stale_pod_ref(claim: &PersistentVolumeClaim, pod: &CachedPod) -> bool {
    has_stale(claim, &pod_target(pod))
}

/// `hasUnexpectedController`: under a non-Retain policy, a controller other than the set and
/// pod, or a reference to them with a stale UID.
pub fn has_unexpected_controller(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &CachedPod,
) -> bool {
    if policy(set) == (Retention::Retain, Retention::Retain) {
        return false;
    }
    let (s, p) = (set_target(set), pod_target(pod));
    refs(claim).iter().any(|r| {
        if matches(r, &s) {
            r.uid != s.uid
        } else if matches(r, &p) {
            r.uid != p.uid
        } else {
            r.controller == Some(true)
        }
    })
}

/// `hasNonControllerOwner`: the set or pod owns the claim without being its controller.
fn has_non_controller_owner(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &CachedPod,
) -> bool {
    let (s, p) = (set_target(set), pod_target(pod));
    refs(claim)
        .iter()
        .any(|r| (r.uid == s.uid || r.uid == p.uid) && r.controller != Some(true))
}

/// `isClaimOwnerUpToDate`: the claim's references already follow the policy (or must not be
/// touched).
pub fn is_claim_owner_up_to_date(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &CachedPod,
) -> bool {
    let (s, p) = (set_target(set), pod_target(pod));
    if has_stale(claim, &s) || has_stale(claim, &p) {
        return true;
    }
    if has_unexpected_controller(claim, set, pod) {
        return !(has_owner_ref(claim, &s) || has_owner_ref(claim, &p));
    }
    if has_non_controller_owner(claim, set, pod) {
        return false;
    }
    let (want_set, want_pod) = wanted(set, pod);
    has_owner_ref(claim, &s) == want_set && has_owner_ref(claim, &p) == want_pod
}

/// Which of (set, pod) should control the claim under the policy.
fn wanted(set: &StatefulSet, pod: &CachedPod) -> (bool, bool) {
    let scaled_down = !in_ordinal_range(pod, set);
    match policy(set) {
        (Retention::Retain, Retention::Retain) => (false, false),
        (Retention::Delete, Retention::Retain) => (true, false),
        (Retention::Retain, Retention::Delete) => (false, scaled_down),
        (Retention::Delete, Retention::Delete) => (!scaled_down, scaled_down),
    }
}

/// `updateClaimOwnerRefForSetAndPod`: scrub our references, then add the controller references
/// the policy wants (none if another controller manages the claim).
pub fn update_claim_owner_refs(
    claim: &mut PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &CachedPod,
) {
    let unexpected = has_unexpected_controller(claim, set, pod);
    let (s, p) = (set_target(set), pod_target(pod));
    let mut out: Vec<OwnerReference> = refs(claim)
        .iter()
        .filter(|r| !matches(r, &s) && !matches(r, &p))
        .cloned()
        .collect();
    if !unexpected {
        let (want_set, want_pod) = wanted(set, pod);
        if want_pod {
            out.push(controller_ref(p.api_version, p.kind, p.name, p.uid));
        }
        if want_set {
            out.push(owner_ref(set));
        }
    }
    claim.metadata.owner_references = Some(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn set(deleted: &str, scaled: &str, replicas: i32) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("set-uid".into()),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                persistent_volume_claim_retention_policy: Some(
                    StatefulSetPersistentVolumeClaimRetentionPolicy {
                        when_deleted: Some(deleted.into()),
                        when_scaled: Some(scaled.into()),
                    },
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn pod(ordinal: i32, uid: &str) -> CachedPod {
        CachedPod {
            metadata: ObjectMeta {
                name: Some(format!("web-{ordinal}")),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn claim() -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("www-web-2".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn owners(c: &PersistentVolumeClaim) -> Vec<(String, bool)> {
        refs(c)
            .iter()
            .map(|r| (r.kind.clone(), r.controller == Some(true)))
            .collect()
    }

    fn settle(s: &StatefulSet, p: &CachedPod) -> PersistentVolumeClaim {
        let mut c = claim();
        assert_eq!(
            is_claim_owner_up_to_date(&c, s, p),
            wanted(s, p) == (false, false)
        );
        update_claim_owner_refs(&mut c, s, p);
        assert!(is_claim_owner_up_to_date(&c, s, p));
        c
    }

    #[test]
    fn the_policy_table() {
        let in_range = pod(2, "pod-uid");
        // replicas 2: ordinal 2 is scaled down.
        for (deleted, scaled, live, down) in [
            ("Retain", "Retain", vec![], vec![]),
            ("Delete", "Retain", vec!["StatefulSet"], vec!["StatefulSet"]),
            ("Retain", "Delete", vec![], vec!["Pod"]),
            ("Delete", "Delete", vec!["StatefulSet"], vec!["Pod"]),
        ] {
            let kinds = |c: &PersistentVolumeClaim| {
                owners(c)
                    .into_iter()
                    .map(|(k, ctl)| {
                        assert!(ctl, "references are controller references");
                        k
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                kinds(&settle(&set(deleted, scaled, 3), &in_range)),
                live,
                "{deleted}/{scaled} in range"
            );
            assert_eq!(
                kinds(&settle(&set(deleted, scaled, 2), &in_range)),
                down,
                "{deleted}/{scaled} scaled down"
            );
        }
    }

    #[test]
    fn switching_policy_moves_the_reference() {
        let p = pod(2, "pod-uid");
        let mut c = settle(&set("Delete", "Delete", 3), &p);
        let retain = set("Retain", "Retain", 3);
        assert!(!is_claim_owner_up_to_date(&c, &retain, &p));
        update_claim_owner_refs(&mut c, &retain, &p);
        assert!(owners(&c).is_empty());
    }

    #[test]
    fn stale_and_foreign_references_are_respected() {
        let s = set("Delete", "Delete", 3);
        let p = pod(2, "pod-uid");
        let mut stale = claim();
        stale.metadata.owner_references =
            Some(vec![controller_ref("v1", "Pod", "web-2", "old-pod")]);
        assert!(has_stale_pod_ref(&stale, &p));
        assert!(
            is_claim_owner_up_to_date(&stale, &s, &p),
            "stale claims are not touched"
        );
        assert!(!has_stale_pod_ref(&claim(), &p));

        let mut foreign = claim();
        foreign.metadata.owner_references = Some(vec![
            controller_ref("example.com/v1", "Backup", "b", "b-uid"),
            owner_ref(&s),
        ]);
        assert!(has_unexpected_controller(&foreign, &s, &p));
        assert!(!is_claim_owner_up_to_date(&foreign, &s, &p));
        update_claim_owner_refs(&mut foreign, &s, &p);
        assert_eq!(owners(&foreign), [("Backup".to_string(), true)]);
        assert!(is_claim_owner_up_to_date(&foreign, &s, &p));
        // Under Retain/Retain, another controller is no concern.
        assert!(!has_unexpected_controller(
            &foreign,
            &set("Retain", "Retain", 3),
            &p
        ));
    }

    #[test]
    fn a_non_controller_reference_is_upgraded() {
        let s = set("Delete", "Retain", 3);
        let p = pod(1, "pod-uid");
        let mut c = claim();
        let mut r = owner_ref(&s);
        r.controller = None;
        c.metadata.owner_references = Some(vec![r]);
        assert!(!is_claim_owner_up_to_date(&c, &s, &p));
        update_claim_owner_refs(&mut c, &s, &p);
        assert_eq!(owners(&c), [("StatefulSet".to_string(), true)]);
    }
}
