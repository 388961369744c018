//! Which PersistentVolume a claim binds to (`persistentVolumeOrderedIndex.findByClaim` and
//! `FindMatchingVolume`, upstream `pkg/controller/volume/persistentvolume` and
//! `component-helpers/storage/volume`): a pure decision over the cached volumes.
//!
//! Volumes are grouped by their set of access modes; the groups that contain every mode the claim
//! asks for are tried from the fewest modes up, and within the first group that has a match the
//! smallest volume wins. A volume matches when it is big enough, has the claim's `volumeMode`, is
//! not being deleted, and either is pre-bound to this claim (`claimRef` naming it: always chosen,
//! unless its node affinity rules out the given node) or is `Available`, unclaimed, labelled as the
//! claim's selector asks, of the claim's class, and admits the node. Without a node, a claim whose
//! class waits for the first consumer matches pre-bound volumes only: the scheduler binds the rest.

use std::collections::BTreeSet;
use std::sync::Arc;

use api::quantity::Amount;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};

use super::affinity::volume_admits_node;
use super::{
    claim_class, is_volume_bound_to_claim, requested_storage, volume_capacity, volume_class,
};

fn modes_of_volume(pv: &PersistentVolume) -> BTreeSet<String> {
    let modes = pv.spec.as_ref().and_then(|s| s.access_modes.as_deref());
    modes.unwrap_or(&[]).iter().cloned().collect()
}

fn claim_modes(claim: &PersistentVolumeClaim) -> BTreeSet<String> {
    let modes = claim.spec.as_ref().and_then(|s| s.access_modes.as_deref());
    modes.unwrap_or(&[]).iter().cloned().collect()
}

fn volume_mode_of_volume(pv: &PersistentVolume) -> &str {
    let mode = pv.spec.as_ref().and_then(|s| s.volume_mode.as_deref());
    mode.unwrap_or("Filesystem")
}

fn volume_mode_of_claim(claim: &PersistentVolumeClaim) -> &str {
    let mode = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref());
    mode.unwrap_or("Filesystem")
}

/// `FindMatchingVolume` over one group of volumes.
fn find_in(
    claim: &PersistentVolumeClaim,
    volumes: &[&Arc<PersistentVolume>],
    node: Option<&Node>,
    delay_binding: bool,
) -> Option<Arc<PersistentVolume>> {
    let requested = requested_storage(claim);
    let class = claim_class(claim);
    let selector = claim.spec.as_ref().and_then(|s| s.selector.as_ref());
    let selector = match selector.map(api::labels::from_label_selector) {
        None => None,
        Some(Ok(s)) => Some(s),
        // An invalid selector matches nothing (validation refuses it anyway).
        Some(Err(_)) => return None,
    };
    let mut smallest: Option<(Amount, &Arc<PersistentVolume>)> = None;
    for &pv in volumes {
        let size = volume_capacity(pv);
        if size < requested
            || volume_mode_of_volume(pv) != volume_mode_of_claim(claim)
            || pv.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let admits_node = node.is_none_or(|n| volume_admits_node(pv, n));
        if is_volume_bound_to_claim(pv, claim) {
            // Pre-bound to this claim: that one or none.
            return admits_node.then(|| pv.clone());
        }
        if node.is_none() && delay_binding {
            continue;
        }
        let spec = pv.spec.as_ref();
        let available = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available");
        if !available
            || spec.and_then(|s| s.claim_ref.as_ref()).is_some()
            || selector
                .as_ref()
                .is_some_and(|s| !s.matches(pv.metadata.labels.as_ref()))
            || volume_class(pv) != class
            || !admits_node
        {
            continue;
        }
        if smallest.is_none_or(|(s, _)| size < s) {
            smallest = Some((size, pv));
        }
    }
    smallest.map(|(_, pv)| pv.clone())
}

/// `findBestMatchForClaim` (binder, `node` = `None`) and the scheduler's per-node search.
pub fn find_best_match(
    claim: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    node: Option<&Node>,
    delay_binding: bool,
) -> Option<Arc<PersistentVolume>> {
    let wanted = claim_modes(claim);
    let mut groups: Vec<(BTreeSet<String>, Vec<&Arc<PersistentVolume>>)> = Vec::new();
    for pv in volumes {
        let modes = modes_of_volume(pv);
        if !wanted.is_subset(&modes) {
            continue;
        }
        match groups.iter_mut().find(|(m, _)| *m == modes) {
            Some((_, g)) => g.push(pv),
            None => groups.push((modes, vec![pv])),
        }
    }
    groups.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(&b.0)));
    groups
        .iter()
        .find_map(|(_, g)| find_in(claim, g, node, delay_binding))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeSpec, PersistentVolumeStatus,
        VolumeNodeAffinity, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    fn pv(name: &str, size: &str, modes: &[&str], class: &str) -> Arc<PersistentVolume> {
        Arc::new(PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some([("storage".to_string(), Quantity(size.into()))].into()),
                access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                storage_class_name: Some(class.into()),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus {
                phase: Some("Available".into()),
                ..Default::default()
            }),
        })
    }

    fn claim(size: &str, modes: &[&str], class: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Quantity(size.into()))].into()),
                    ..Default::default()
                }),
                storage_class_name: Some(class.into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn name(pv: Option<Arc<PersistentVolume>>) -> Option<String> {
        pv.and_then(|p| p.metadata.name.clone())
    }

    #[test]
    fn smallest_big_enough_volume_of_the_class_wins() {
        let vols = vec![
            pv("big", "10Gi", &["ReadWriteOnce"], "manual"),
            pv("small", "1Gi", &["ReadWriteOnce"], "manual"),
            pv("mid", "2Gi", &["ReadWriteOnce"], "manual"),
            pv("other-class", "2Gi", &["ReadWriteOnce"], "fast"),
        ];
        let c = claim("1500Mi", &["ReadWriteOnce"], "manual");
        assert_eq!(
            name(find_best_match(&c, &vols, None, false)),
            Some("mid".into())
        );
        let huge = claim("20Gi", &["ReadWriteOnce"], "manual");
        assert_eq!(find_best_match(&huge, &vols, None, false), None);
    }

    #[test]
    fn fewest_access_modes_first_then_size() {
        let vols = vec![
            pv(
                "rwo-rwx-small",
                "1Gi",
                &["ReadWriteOnce", "ReadWriteMany"],
                "",
            ),
            pv("rwo-big", "5Gi", &["ReadWriteOnce"], ""),
            pv("rox", "1Gi", &["ReadOnlyMany"], ""),
        ];
        let c = claim("1Gi", &["ReadWriteOnce"], "");
        assert_eq!(
            name(find_best_match(&c, &vols, None, false)),
            Some("rwo-big".into())
        );
        let rwx = claim("1Gi", &["ReadWriteMany"], "");
        assert_eq!(
            name(find_best_match(&rwx, &vols, None, false)),
            Some("rwo-rwx-small".into())
        );
    }

    #[test]
    fn selector_phase_claim_ref_and_volume_mode_filter() {
        let mut labelled = (*pv("labelled", "1Gi", &["ReadWriteOnce"], "")).clone();
        labelled.metadata.labels = Some([("tier".to_string(), "db".to_string())].into());
        let mut released = (*pv("released", "1Gi", &["ReadWriteOnce"], "")).clone();
        released.status = Some(PersistentVolumeStatus {
            phase: Some("Released".into()),
            ..Default::default()
        });
        let mut block = (*pv("block", "1Gi", &["ReadWriteOnce"], "")).clone();
        if let Some(s) = block.spec.as_mut() {
            s.volume_mode = Some("Block".into());
        }
        let vols = vec![Arc::new(labelled), Arc::new(released), Arc::new(block)];
        let mut c = claim("1Gi", &["ReadWriteOnce"], "");
        assert_eq!(
            name(find_best_match(&c, &vols, None, false)),
            Some("labelled".into())
        );
        if let Some(s) = c.spec.as_mut() {
            s.selector = Some(LabelSelector {
                match_labels: Some([("tier".to_string(), "web".to_string())].into()),
                ..Default::default()
            });
        }
        assert_eq!(find_best_match(&c, &vols, None, false), None);
    }

    #[test]
    fn prebound_volume_wins_and_delay_binding_leaves_the_rest_to_the_scheduler() {
        let mut pre = (*pv("pre", "5Gi", &["ReadWriteOnce"], "other")).clone();
        if let Some(s) = pre.spec.as_mut() {
            s.claim_ref = Some(ObjectReference {
                namespace: Some("default".into()),
                name: Some("data".into()),
                ..Default::default()
            });
        }
        let free = pv("free", "1Gi", &["ReadWriteOnce"], "local");
        let c = claim("1Gi", &["ReadWriteOnce"], "local");
        assert_eq!(
            name(find_best_match(&c, std::slice::from_ref(&free), None, true)),
            None
        );
        assert_eq!(
            name(find_best_match(
                &c,
                std::slice::from_ref(&free),
                None,
                false
            )),
            Some("free".into())
        );
        let vols = vec![free, Arc::new(pre)];
        assert_eq!(
            name(find_best_match(&c, &vols, None, true)),
            Some("pre".into())
        );
    }

    #[test]
    fn node_affinity_restricts_the_scheduler_search() {
        let mut local = (*pv("local", "1Gi", &["ReadWriteOnce"], "local")).clone();
        if let Some(s) = local.spec.as_mut() {
            s.node_affinity = Some(VolumeNodeAffinity {
                required: Some(super::super::affinity::hostname_selector("node-1")),
            });
        }
        let node = |n: &str| Node {
            metadata: ObjectMeta {
                name: Some(n.into()),
                labels: Some([("kubernetes.io/hostname".to_string(), n.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let vols = vec![Arc::new(local)];
        let c = claim("1Gi", &["ReadWriteOnce"], "local");
        assert!(find_best_match(&c, &vols, Some(&node("node-1")), true).is_some());
        assert!(find_best_match(&c, &vols, Some(&node("node-2")), true).is_none());
    }
}
