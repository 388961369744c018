//! Pod and owner-reference predicates shared by the controllers (`controller_utils.go`, `podutil`).
//!
//! All functions are pure: they read an object and, where time matters, take `now` explicitly.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::cached_pod::CachedPod;

/// The ownerReference with `controller: true`, if any (`GetControllerOf`).
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The pod's phase, empty if unset.
pub fn phase(pod: &CachedPod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Not terminal and not being deleted (`IsPodActive`).
pub fn is_pod_active(pod: &CachedPod) -> bool {
    let p = phase(pod);
    p != "Succeeded" && p != "Failed" && pod.metadata.deletion_timestamp.is_none()
}

/// Not terminal but being deleted (`IsPodTerminating`).
pub fn is_pod_terminating(pod: &CachedPod) -> bool {
    let p = phase(pod);
    p != "Succeeded" && p != "Failed" && pod.metadata.deletion_timestamp.is_some()
}

/// The time of the pod's `Ready=True` transition, if it is ready.
pub fn ready_since(pod: &CachedPod) -> Option<Option<Timestamp>> {
    let cond = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    (cond.status == "True").then(|| cond.last_transition_time.as_ref().map(|t| t.0))
}

/// Condition `Ready` has status `True` (`IsPodReady`).
pub fn is_pod_ready(pod: &CachedPod) -> bool {
    ready_since(pod).is_some()
}

/// Ready for at least `min_ready_seconds` (`IsPodAvailable`, newest upstream: `transition + min ≤ now`).
pub fn is_pod_available(pod: &CachedPod, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(t)) => t
            .checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
            .is_ok_and(|avail| avail <= now),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Pod builders for unit tests.
    use super::*;
    use crate::cached_pod::{CachedPod, CachedPodSpec, CachedPodStatus};
    use k8s_openapi::api::core::v1::PodCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    pub fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    pub fn pod(name: &str) -> CachedPod {
        CachedPod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            spec: Some(CachedPodSpec::default()),
            status: Some(CachedPodStatus::default()),
        }
    }

    pub fn with_labels(mut p: CachedPod, pairs: &[(&str, &str)]) -> CachedPod {
        p.metadata.labels = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        p
    }

    pub fn with_phase(mut p: CachedPod, phase: &str) -> CachedPod {
        p.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        p
    }

    pub fn on_node(mut p: CachedPod, node: &str) -> CachedPod {
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        p
    }

    pub fn ready_at(mut p: CachedPod, at: Option<Timestamp>) -> CachedPod {
        let st = p.status.get_or_insert_with(Default::default);
        st.conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: at.map(Time),
            ..Default::default()
        }]);
        p
    }

    pub fn owned_by(mut p: CachedPod, kind: &str, name: &str, uid: &str) -> CachedPod {
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        p
    }
}

#[cfg(test)]
mod tests {

    use super::testing::*;
    use super::*;

    #[test]
    fn active_excludes_terminal_and_deleting() {
        assert!(is_pod_active(&pod("a")));
        assert!(!is_pod_active(&with_phase(pod("a"), "Succeeded")));
        assert!(!is_pod_active(&with_phase(pod("a"), "Failed")));
        let mut d = pod("a");
        d.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(1)));
        assert!(!is_pod_active(&d));
        assert!(is_pod_terminating(&d));
    }

    #[test]
    fn availability_honours_min_ready_seconds() {
        let p = ready_at(pod("a"), Some(ts(100)));
        assert!(is_pod_available(&p, 0, ts(100)));
        assert!(!is_pod_available(&p, 10, ts(109)));
        assert!(is_pod_available(&p, 10, ts(110)));
        assert!(!is_pod_available(&ready_at(pod("b"), None), 10, ts(1000)));
        assert!(!is_pod_available(&pod("c"), 0, ts(1000)));
    }
}
