//! Adoption and release decisions (informer.md §6.7, `ControllerRefManager.ClaimPods`).
//!
//! [`decide`] classifies one active pod against an owner and returns what must happen as a value; the
//! controller performs the returned [`ClaimAction`]s with the strategic-merge patches built here, which
//! carry `metadata.uid` as a precondition so a pod replaced under the same name is never touched.

use api::labels::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{json, Value};

use crate::cached_pod::CachedPod;
use crate::pod_util::controller_of;

/// The owner as claiming sees it.
#[derive(Debug, Clone, Copy)]
pub struct ClaimOwner<'a> {
    /// The owner's UID.
    pub uid: &'a str,
    /// The owner has a deletionTimestamp: no adoption, no release.
    pub deleting: bool,
    /// The owner's pod selector.
    pub selector: &'a Selector,
}

/// What to do with one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimAction {
    /// Already ours and matching: claimed, no request.
    Claimed,
    /// Orphan that matches: patch in our controller reference; on success it is claimed.
    Adopt,
    /// Ours but no longer matching: patch our reference out; it is not claimed.
    Release,
    /// Someone else's, or not ours to touch now.
    Ignore,
}

/// Classify one (active) pod.
pub fn decide(owner: ClaimOwner<'_>, pod: &CachedPod) -> ClaimAction {
    let matches = owner.selector.matches(pod.metadata.labels.as_ref());
    match controller_of(&pod.metadata) {
        Some(r) if r.uid != owner.uid => ClaimAction::Ignore,
        Some(_) if matches => ClaimAction::Claimed,
        Some(_) if owner.deleting => ClaimAction::Ignore,
        Some(_) => ClaimAction::Release,
        None if owner.deleting || !matches || pod.metadata.deletion_timestamp.is_some() => {
            ClaimAction::Ignore
        }
        None => ClaimAction::Adopt,
    }
}

/// The controller reference put on created and adopted pods.
pub fn controller_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Strategic-merge patch appending `owner_ref` (ownerReferences merge by `uid`), only if the pod UID is
/// still `pod_uid`.
pub fn adopt_patch(owner_ref: &OwnerReference, pod_uid: &str) -> Value {
    json!({
        "metadata": {
            "ownerReferences": [owner_ref],
            "uid": pod_uid,
        }
    })
}

/// Strategic-merge patch deleting the owner reference with `owner_uid`, only if the pod UID is still
/// `pod_uid`.
pub fn release_patch(owner_uid: &str, pod_uid: &str) -> Value {
    json!({
        "metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
            "uid": pod_uid,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_util::testing::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn sel() -> Selector {
        Selector::from_map(&[("app".to_string(), "web".to_string())].into())
    }

    #[test]
    fn decisions_cover_every_branch() {
        let s = sel();
        let live = ClaimOwner {
            uid: "rs-1",
            deleting: false,
            selector: &s,
        };
        let dying = ClaimOwner {
            uid: "rs-1",
            deleting: true,
            selector: &s,
        };
        let ours = owned_by(
            with_labels(pod("a"), &[("app", "web")]),
            "ReplicaSet",
            "web",
            "rs-1",
        );
        let ours_mismatch = owned_by(
            with_labels(pod("b"), &[("app", "db")]),
            "ReplicaSet",
            "web",
            "rs-1",
        );
        let theirs = owned_by(
            with_labels(pod("c"), &[("app", "web")]),
            "ReplicaSet",
            "web",
            "rs-old",
        );
        let orphan = with_labels(pod("d"), &[("app", "web")]);
        let orphan_mismatch = with_labels(pod("e"), &[("app", "db")]);
        let mut orphan_deleting = orphan.clone();
        orphan_deleting.metadata.deletion_timestamp = Some(Time(ts(1)));

        assert_eq!(decide(live, &ours), ClaimAction::Claimed);
        assert_eq!(decide(dying, &ours), ClaimAction::Claimed);
        assert_eq!(decide(live, &ours_mismatch), ClaimAction::Release);
        assert_eq!(decide(dying, &ours_mismatch), ClaimAction::Ignore);
        assert_eq!(
            decide(live, &theirs),
            ClaimAction::Ignore,
            "stale ref to a recreated owner"
        );
        assert_eq!(decide(live, &orphan), ClaimAction::Adopt);
        assert_eq!(decide(dying, &orphan), ClaimAction::Ignore);
        assert_eq!(decide(live, &orphan_mismatch), ClaimAction::Ignore);
        assert_eq!(decide(live, &orphan_deleting), ClaimAction::Ignore);
    }

    #[test]
    fn patches_carry_uid_precondition() {
        let r = controller_ref("v1", "ReplicationController", "web", "rc-1");
        let a = adopt_patch(&r, "pod-uid");
        assert_eq!(a["metadata"]["uid"], "pod-uid");
        assert_eq!(a["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(
            a["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
            true
        );
        let rel = release_patch("rc-1", "pod-uid");
        assert_eq!(rel["metadata"]["ownerReferences"][0]["$patch"], "delete");
        assert_eq!(rel["metadata"]["ownerReferences"][0]["uid"], "rc-1");
    }
}
