//! The decisions of the protection controllers, free of I/O (upstream `protectionutil` and the
//! `podUsesPVC`/`isBeingUsed` helpers of `pvc_protection_controller.go` and
//! `pv_protection_controller.go`).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::cached_pod::{CachedContainerStatus, CachedPod};

/// `PVCProtectionFinalizer`.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
/// `PVProtectionFinalizer`.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";

/// What a protection controller does to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing.
    Nothing,
    /// Add the finalizer: the new finalizer list.
    AddFinalizer(Vec<String>),
    /// Remove the finalizer: the new finalizer list.
    RemoveFinalizer(Vec<String>),
}

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .any(|f| f == finalizer)
}

/// `IsDeletionCandidate`: being deleted and still holding `finalizer`.
pub fn is_deletion_candidate(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, finalizer)
}

/// `NeedToAddFinalizer`: not being deleted and without `finalizer`.
pub fn needs_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_none() && !has_finalizer(meta, finalizer)
}

/// `processPVC`/`processPV`: remove the finalizer of a deletion candidate not `in_use`, add it to
/// an object without it. `in_use` matters only for a deletion candidate (the caller need not
/// find it out for others).
pub fn decide(meta: &ObjectMeta, finalizer: &str, in_use: bool) -> Decision {
    let current = meta.finalizers.clone().unwrap_or_default();
    if is_deletion_candidate(meta, finalizer) {
        if in_use {
            return Decision::Nothing;
        }
        return Decision::RemoveFinalizer(current.into_iter().filter(|f| f != finalizer).collect());
    }
    if needs_finalizer(meta, finalizer) {
        let mut next = current;
        next.push(finalizer.to_string());
        return Decision::AddFinalizer(next);
    }
    Decision::Nothing
}

/// `podIsShutDown`: the kubelet is done with the pod (deleted with a zero grace period) or it
/// was force-deleted.
pub fn pod_is_shut_down(pod: &CachedPod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
        && pod.metadata.deletion_grace_period_seconds == Some(0)
}

/// `IsPodTerminated`: `Failed` or `Succeeded`, or being deleted with no container running (init,
/// regular and ephemeral containers alike).
pub fn pod_is_terminated(pod: &CachedPod) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return true;
    }
    let not_running = |statuses: Option<&Vec<CachedContainerStatus>>| {
        statuses.is_none_or(|all| {
            all.iter().all(|c| {
                c.state
                    .as_ref()
                    .is_some_and(|st| st.terminated.is_some() || st.waiting.is_some())
            })
        })
    };
    pod.metadata.deletion_timestamp.is_some()
        && status.is_none_or(|s| {
            not_running(s.init_container_statuses.as_ref())
                && not_running(s.container_statuses.as_ref())
                && not_running(s.ephemeral_container_statuses.as_ref())
        })
}

/// `ephemeral.VolumeClaimName`: the claim of the pod's ephemeral volume `volume`.
pub fn ephemeral_claim_name(pod: &CachedPod, volume: &str) -> String {
    format!(
        "{}-{volume}",
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `ephemeral.VolumeIsForPod`: the claim's controller is the pod.
fn claim_is_for_pod(pod: &CachedPod, pvc: &PersistentVolumeClaim) -> bool {
    crate::pod_util::controller_of(&pvc.metadata)
        .is_some_and(|r| Some(&r.uid) == pod.metadata.uid.as_ref())
}

/// `podUsesPVC`: a scheduled pod (only those reach a kubelet) with a volume of the claim, or
/// with a generic ephemeral volume whose claim this is while the pod is not shut down.
pub fn pod_uses_pvc(pod: &CachedPod, pvc: &PersistentVolumeClaim) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    if spec.node_name.as_deref().unwrap_or_default().is_empty() {
        return false;
    }
    let claim = pvc.metadata.name.as_deref().unwrap_or_default();
    spec.volumes.as_deref().unwrap_or(&[]).iter().any(|v| {
        v.persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == claim)
            || (!pod_is_shut_down(pod)
                && v.ephemeral.is_some()
                && ephemeral_claim_name(pod, &v.name) == claim
                && claim_is_for_pod(pod, pvc))
    })
}

/// The `namespace/claim` keys of the claims `pod` names (`PodPVCIndexFunc`, also the claims a
/// pod event queues).
pub fn claim_keys(pod: &CachedPod) -> Vec<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref());
    volumes
        .unwrap_or(&[])
        .iter()
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(c), _) => Some(format!("{ns}/{}", c.claim_name)),
            (None, Some(_)) => Some(format!("{ns}/{}", ephemeral_claim_name(pod, &v.name))),
            (None, None) => None,
        })
        .collect()
}

/// `enqueuePVCs`' filter: only a pod that is deleted, terminated or not scheduled may let a claim
/// go.
pub fn pod_event_may_free_claims(pod: &CachedPod, deleted: bool) -> bool {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    deleted || pod_is_terminated(pod) || !scheduled
}

/// `isBeingUsed` of a volume: it is `Bound`.
pub fn pv_in_use(pv: &PersistentVolume) -> bool {
    pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::cached_pod::{
        CachedContainerStatus, CachedPod, CachedPodSpec, CachedPodStatus, CachedVolume,
    };

    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, PersistentVolumeClaimVolumeSource,
        PersistentVolumeStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    use super::*;
    use crate::pod_util::testing::ts;

    fn meta(finalizers: &[&str], deleting: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some("c".into()),
            namespace: Some("ns".into()),
            finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
            deletion_timestamp: deleting.then(|| Time(ts(1))),
            ..Default::default()
        }
    }

    fn claim(name: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn pod_with(volumes: Vec<CachedVolume>, node: &str) -> CachedPod {
        CachedPod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("pod-uid".into()),
                ..Default::default()
            },
            spec: Some(CachedPodSpec {
                node_name: Some(node.into()),
                volumes: Some(volumes),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pvc_volume(claim: &str) -> CachedVolume {
        CachedVolume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_finalizer_goes_only_when_unused_and_is_added_when_missing() {
        let f = PVC_PROTECTION_FINALIZER;
        let deleting = meta(&["a", f], true);
        assert_eq!(decide(&deleting, f, true), Decision::Nothing);
        assert_eq!(
            decide(&deleting, f, false),
            Decision::RemoveFinalizer(vec!["a".into()])
        );
        let live = meta(&["a"], false);
        assert_eq!(
            decide(&live, f, true),
            Decision::AddFinalizer(vec!["a".into(), f.into()])
        );
        assert_eq!(decide(&meta(&[f], false), f, false), Decision::Nothing);
        // Being deleted without the finalizer: nothing to do.
        assert_eq!(decide(&meta(&["a"], true), f, false), Decision::Nothing);
    }

    #[test]
    fn a_scheduled_pod_with_the_claim_uses_it() {
        let c = claim("data");
        assert!(pod_uses_pvc(&pod_with(vec![pvc_volume("data")], "n1"), &c));
        assert!(!pod_uses_pvc(&pod_with(vec![pvc_volume("data")], ""), &c));
        assert!(!pod_uses_pvc(
            &pod_with(vec![pvc_volume("other")], "n1"),
            &c
        ));
        // A terminated pod still holds a claim volume (the kubelet may still unmount it).
        let mut done = pod_with(vec![pvc_volume("data")], "n1");
        done.status = Some(CachedPodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        assert!(pod_uses_pvc(&done, &c));
        assert_eq!(claim_keys(&done), vec!["ns/data".to_string()]);
    }

    #[test]
    fn an_ephemeral_claim_is_used_by_its_pod_until_it_shuts_down() {
        let eph = CachedVolume {
            name: "scratch".into(),
            ephemeral: Some(Box::default()),
            ..Default::default()
        };
        let mut c = claim("p-scratch");
        let mut pod = pod_with(vec![eph], "n1");
        assert!(!pod_uses_pvc(&pod, &c), "not the pod's claim");
        c.metadata.owner_references = Some(vec![OwnerReference {
            controller: Some(true),
            uid: "pod-uid".into(),
            ..Default::default()
        }]);
        assert!(pod_uses_pvc(&pod, &c));
        assert_eq!(claim_keys(&pod), vec!["ns/p-scratch".to_string()]);
        pod.metadata.deletion_timestamp = Some(Time(ts(5)));
        pod.metadata.deletion_grace_period_seconds = Some(0);
        assert!(!pod_uses_pvc(&pod, &c));
    }

    #[test]
    fn only_pods_that_may_free_a_claim_queue_it() {
        let mut pod = pod_with(vec![pvc_volume("data")], "n1");
        assert!(!pod_event_may_free_claims(&pod, false));
        assert!(pod_event_may_free_claims(&pod, true));
        pod.metadata.deletion_timestamp = Some(Time(ts(5)));
        pod.status = Some(CachedPodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![CachedContainerStatus {
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated::default()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert!(pod_is_terminated(&pod));
        assert!(pod_event_may_free_claims(&pod, false));
        // A running init or ephemeral container keeps the deleting pod alive.
        let running = CachedContainerStatus {
            state: Some(ContainerState {
                running: Some(Default::default()),
                ..Default::default()
            }),
            ..Default::default()
        };
        for field in ["init", "ephemeral"] {
            let mut alive = pod.clone();
            let status = alive.status.as_mut().unwrap();
            match field {
                "init" => status.init_container_statuses = Some(vec![running.clone()]),
                _ => status.ephemeral_container_statuses = Some(vec![running.clone()]),
            }
            assert!(!pod_is_terminated(&alive), "{field}");
        }
        assert!(pod_event_may_free_claims(&pod_with(vec![], ""), false));
    }

    #[test]
    fn a_volume_is_used_while_bound() {
        let mut pv = PersistentVolume::default();
        assert!(!pv_in_use(&pv));
        pv.status = Some(PersistentVolumeStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        assert!(pv_in_use(&pv));
        pv.status.as_mut().unwrap().phase = Some("Released".into());
        assert!(!pv_in_use(&pv));
    }
}
