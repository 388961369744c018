//! Pure helpers of the deployment controller (`pkg/controller/deployment/util/deployment_util.go`):
//! the pod-template hash, maxSurge/maxUnavailable resolution, revision numbering, template equality
//! and the replica arithmetic of a rolling update.
//!
//! Every function here is deterministic and free of I/O; the controller calls them on cache snapshots.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Label (and selector key) carrying the pod-template hash on ReplicaSets and their pods.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// Revision of a Deployment / ReplicaSet.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions an RS had (when an old RS became new again).
pub const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// `spec.replicas` of the Deployment when the RS was last scaled.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` of the Deployment when the RS was last scaled.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations never copied to ReplicaSets (`skipCopyAnnotation`).
const SKIPPED_ANNOTATIONS: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    "deprecated.deployment.rollback.to",
];

/// Default `revisionHistoryLimit` (apps/v1).
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

// k8s.io/apimachinery/pkg/util/rand: SafeEncodeString's alphabet (no vowels, no confusable digits).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a, 32 bit (the hash `ComputeHash` uses).
fn fnv1a32(bytes: &[u8], mut h: u32) -> u32 {
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(16_777_619);
    }
    h
}

/// `ComputeHash`: FNV-1a of the template's canonical JSON (plus the collision count, if any),
/// rendered with the safe alphabet. Stable for equal templates; a collision count changes it.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let mut h = fnv1a32(&json, 2_166_136_261);
    if let Some(c) = collision_count {
        h = fnv1a32(&c.to_le_bytes(), h);
    }
    h.to_string()
        .bytes()
        .map(|d| char::from(SAFE_ALPHABET[usize::from(d) % SAFE_ALPHABET.len()]))
        .collect()
}

/// The template without the `pod-template-hash` label, for equality checks.
fn without_hash(t: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = t.clone();
    if let Some(meta) = t.metadata.as_mut() {
        if let Some(l) = meta.labels.as_mut() {
            l.remove(POD_TEMPLATE_HASH_LABEL);
            if l.is_empty() {
                meta.labels = None;
            }
        }
    }
    t
}

/// `EqualIgnoreHash`: templates equal apart from the `pod-template-hash` label.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    without_hash(a) == without_hash(b)
}

/// Resolve an absolute-or-percent value against `total`, rounding up or down.
pub fn scaled_value(v: Option<&IntOrString>, total: i32, round_up: bool) -> Option<i32> {
    match v {
        None => Some(0),
        Some(IntOrString::Int(i)) => Some(*i),
        Some(IntOrString::String(s)) => {
            let pct: i64 = s.strip_suffix('%')?.trim().parse().ok()?;
            let num = pct * i64::from(total);
            let out = if round_up {
                (num + 99).div_euclid(100)
            } else {
                num.div_euclid(100)
            };
            i32::try_from(out).ok()
        }
    }
}

/// `ResolveFenceposts`: (maxSurge rounded up, maxUnavailable rounded down) against `desired`; if both
/// come out zero, maxUnavailable is 1 so a rollout can still progress.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> (i32, i32) {
    let surge = scaled_value(max_surge, desired, true).unwrap_or(0).max(0);
    let unavailable = scaled_value(max_unavailable, desired, false)
        .unwrap_or(0)
        .max(0);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// `spec.replicas`, defaulting to 1.
pub fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Whether the strategy is `Recreate`.
pub fn is_recreate(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("Recreate")
}

/// (maxSurge, maxUnavailable) for the Deployment; (0, 0) for `Recreate`. Unavailable never exceeds
/// `replicas` (`MaxUnavailable`).
pub fn surge_and_unavailable(d: &Deployment) -> (i32, i32) {
    if is_recreate(d) {
        return (0, 0);
    }
    let default_pct = IntOrString::String("25%".into());
    let ru = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let surge = ru
        .map(|r| r.max_surge.as_ref())
        .unwrap_or(Some(&default_pct));
    let unavail = ru
        .map(|r| r.max_unavailable.as_ref())
        .unwrap_or(Some(&default_pct));
    let n = replicas(d);
    let (s, u) = resolve_fenceposts(surge, unavail, n);
    (s, u.min(n.max(0)))
}

/// `spec.replicas` of an RS (0 if unset, as the deployment controller counts).
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

/// `status.availableReplicas` of an RS.
pub fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// The revision recorded on an object (0 if none or unparsable).
pub fn revision_of(annotations: Option<&BTreeMap<String, String>>) -> i64 {
    annotations
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `MaxRevision` over `rss`.
pub fn max_revision<'a>(rss: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    rss.into_iter()
        .map(|r| revision_of(r.metadata.annotations.as_ref()))
        .max()
        .unwrap_or(0)
}

/// Sort key of `ReplicaSetsByCreationTimestamp`: oldest first, then by name.
pub fn by_creation(rs: &ReplicaSet) -> (i128, String) {
    let ts = rs
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_nanosecond())
        .unwrap_or(0);
    (ts, rs.metadata.name.clone().unwrap_or_default())
}

/// `FindNewReplicaSet`: the oldest RS whose template equals the Deployment's (ignoring the hash).
pub fn find_new_index(d: &Deployment, rss: &[ReplicaSet]) -> Option<usize> {
    let template = d.spec.as_ref().map(|s| &s.template)?;
    let mut idx: Vec<usize> = (0..rss.len()).collect();
    idx.sort_by_key(|i| by_creation(&rss[*i]));
    idx.into_iter().find(|i| {
        rss[*i]
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| equal_ignore_hash(t, template))
    })
}

/// `NewRSNewReplicas` for a rolling update: how many replicas the new RS may have now without the
/// total exceeding `replicas + maxSurge` and without the new RS exceeding `replicas`.
pub fn new_rs_new_replicas(d: &Deployment, all_total: i32, new_rs_replicas: i32) -> i32 {
    if is_recreate(d) {
        return replicas(d);
    }
    let (surge, _) = surge_and_unavailable(d);
    let desired = replicas(d);
    let max_total = desired + surge;
    if all_total >= max_total {
        return new_rs_replicas;
    }
    let scale_up = (max_total - all_total).min(desired - new_rs_replicas);
    new_rs_replicas + scale_up.max(0)
}

/// One old ReplicaSet as the rolling scale-down sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldRs {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.availableReplicas`.
    pub available: i32,
}

/// `reconcileOldReplicaSets` as arithmetic: given the old RSs (oldest first), the new RS's replicas
/// and availability, and the Deployment's desired count and maxUnavailable, return each old RS's new
/// `spec.replicas`. First unhealthy replicas are cleaned up, then available ones are scaled down
/// only as far as `desired - maxUnavailable` availability allows.
pub fn rolling_scale_down(
    old: &[OldRs],
    new_replicas: i32,
    new_available: i32,
    desired: i32,
    max_unavailable: i32,
) -> Vec<i32> {
    let mut out: Vec<i32> = old.iter().map(|r| r.replicas).collect();
    let old_total: i32 = old.iter().map(|r| r.replicas).sum();
    if old_total == 0 {
        return out;
    }
    let all_pods = old_total + new_replicas;
    let min_available = desired - max_unavailable;
    let new_unavailable = new_replicas - new_available;
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return out;
    }
    // cleanupUnhealthyReplicas: scale down replicas that are not available, up to max_scaled_down.
    let mut cleaned = 0;
    for (i, r) in old.iter().enumerate() {
        if cleaned >= max_scaled_down {
            break;
        }
        if r.replicas == 0 || r.replicas <= r.available {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(r.replicas - r.available);
        out[i] = r.replicas - down;
        cleaned += down;
    }
    // scaleDownOldReplicaSetsForRollingUpdate: the available pods above min_available. An RS's
    // status can lag its own scale-down (the replica-set controller reports the pods it is
    // deleting until its next sync), so an RS counts for at most its `spec.replicas`: what it will
    // keep. Upstream sums `status.availableReplicas` alone and can then scale down twice against
    // one stale count, dropping below `replicas - maxUnavailable`.
    let available: i32 = old
        .iter()
        .zip(&out)
        .map(|(r, keep)| r.available.min(*keep))
        .sum::<i32>()
        + new_available.min(new_replicas);
    if available <= min_available {
        return out;
    }
    let mut remaining = available - min_available;
    for slot in out.iter_mut() {
        if remaining <= 0 {
            break;
        }
        if *slot == 0 {
            continue;
        }
        let down = (*slot).min(remaining);
        *slot -= down;
        remaining -= down;
    }
    out
}

/// `SetNewReplicaSetAnnotations`: the Deployment's copyable annotations over the RS's, and the
/// revision raised to `revision` (never lowered; a replaced revision goes to the history).
pub fn rs_annotations(
    d: &Deployment,
    existing: Option<&BTreeMap<String, String>>,
    revision: i64,
) -> BTreeMap<String, String> {
    let mut out = existing.cloned().unwrap_or_default();
    if let Some(da) = d.metadata.annotations.as_ref() {
        for (k, v) in da {
            if !SKIPPED_ANNOTATIONS.contains(&k.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let old_rev = revision_of(existing);
    if revision > old_rev {
        if old_rev > 0 {
            let hist = match out.get(REVISION_HISTORY_ANNOTATION) {
                Some(h) if !h.is_empty() => format!("{h},{old_rev}"),
                _ => old_rev.to_string(),
            };
            out.insert(REVISION_HISTORY_ANNOTATION.into(), hist);
        }
        out.insert(REVISION_ANNOTATION.into(), revision.to_string());
    }
    out
}

/// `SetReplicasAnnotations`: record `replicas` and `replicas + maxSurge` of `d` on an RS's
/// annotations; returns whether anything changed.
pub fn set_replicas_annotations(d: &Deployment, out: &mut BTreeMap<String, String>) -> bool {
    let (surge, _) = surge_and_unavailable(d);
    let desired = replicas(d).to_string();
    let max = (replicas(d) + surge).to_string();
    let changed = out.get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired)
        || out.get(MAX_REPLICAS_ANNOTATION) != Some(&max);
    out.insert(DESIRED_REPLICAS_ANNOTATION.into(), desired);
    out.insert(MAX_REPLICAS_ANNOTATION.into(), max);
    changed
}

/// `desired-replicas` annotation of an RS, if present and valid.
pub fn desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(DESIRED_REPLICAS_ANNOTATION)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    fn deploy(replicas: i32, surge: IntOrString, unavail: IntOrString) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                template: template("nginx:1"),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(surge),
                        max_unavailable: Some(unavail),
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn hash_is_stable_safe_and_changes_with_template_and_collisions() {
        let a = compute_hash(&template("nginx:1"), None);
        assert_eq!(a, compute_hash(&template("nginx:1"), None));
        assert_ne!(a, compute_hash(&template("nginx:2"), None));
        assert_ne!(a, compute_hash(&template("nginx:1"), Some(1)));
        assert!(a.bytes().all(|b| SAFE_ALPHABET.contains(&b)), "{a}");
        assert!(!a.is_empty() && a.len() <= 10);
    }

    #[test]
    fn equality_ignores_only_the_hash_label() {
        let mut t = template("nginx:1");
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.insert(POD_TEMPLATE_HASH_LABEL.into(), "abc".into());
        }
        assert!(equal_ignore_hash(&t, &template("nginx:1")));
        assert!(!equal_ignore_hash(&t, &template("nginx:2")));
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        let p = |s: &str| IntOrString::String(s.into());
        assert_eq!(
            resolve_fenceposts(Some(&p("25%")), Some(&p("25%")), 10),
            (3, 2)
        );
        assert_eq!(
            resolve_fenceposts(Some(&p("25%")), Some(&p("25%")), 1),
            (1, 0)
        );
        assert_eq!(
            resolve_fenceposts(Some(&IntOrString::Int(0)), Some(&IntOrString::Int(0)), 5),
            (0, 1)
        );
        assert_eq!(
            resolve_fenceposts(Some(&p("0%")), Some(&p("0%")), 5),
            (0, 1)
        );
        assert_eq!(
            resolve_fenceposts(Some(&IntOrString::Int(2)), Some(&p("50%")), 5),
            (2, 2)
        );
        assert_eq!(scaled_value(Some(&p("bogus")), 5, true), None);
    }

    #[test]
    fn recreate_has_no_surge_and_unavailable_is_capped_by_replicas() {
        let mut d = deploy(2, IntOrString::Int(1), IntOrString::Int(5));
        assert_eq!(surge_and_unavailable(&d), (1, 2));
        if let Some(s) = d.spec.as_mut() {
            s.strategy = Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            });
        }
        assert_eq!(surge_and_unavailable(&d), (0, 0));
    }

    #[test]
    fn new_rs_grows_within_surge() {
        let d = deploy(10, IntOrString::Int(3), IntOrString::Int(2));
        // 10 old + 0 new: may add 3.
        assert_eq!(new_rs_new_replicas(&d, 10, 0), 3);
        // at max total: unchanged.
        assert_eq!(new_rs_new_replicas(&d, 13, 3), 3);
        // never above desired.
        assert_eq!(new_rs_new_replicas(&d, 9, 9), 10);
    }

    #[test]
    fn rolling_scale_down_keeps_min_available() {
        // 10 desired, maxUnavailable 2: old has 10 available, new 3 not yet available.
        let out = rolling_scale_down(
            &[OldRs {
                replicas: 10,
                available: 10,
            }],
            3,
            0,
            10,
            2,
        );
        assert_eq!(out, vec![8]);
        // Unhealthy old replicas are removed first, even below availability budget.
        let out = rolling_scale_down(
            &[OldRs {
                replicas: 10,
                available: 8,
            }],
            3,
            0,
            10,
            2,
        );
        assert_eq!(out, vec![8]);
        // Nothing may go while min availability is not met.
        let out = rolling_scale_down(
            &[OldRs {
                replicas: 8,
                available: 8,
            }],
            5,
            0,
            10,
            2,
        );
        assert_eq!(out, vec![8]);
        // New replicas available: old may shrink accordingly, oldest first.
        let out = rolling_scale_down(
            &[
                OldRs {
                    replicas: 2,
                    available: 2,
                },
                OldRs {
                    replicas: 6,
                    available: 6,
                },
            ],
            5,
            5,
            10,
            2,
        );
        assert_eq!(out, vec![0, 3]);
    }

    /// Regression: a watcher saw 4 Ready pods of 6 with maxUnavailable 1. The old RS had been
    /// scaled 6 → 5 but its status still said 6 available; counting that stale 6 let a second
    /// scale-down go to 3 while only one new pod was Ready.
    #[test]
    fn rolling_scale_down_ignores_stale_availability_above_spec() {
        let out = rolling_scale_down(
            &[OldRs {
                replicas: 5,
                available: 6,
            }],
            2,
            1,
            6,
            1,
        );
        // 5 old that will stay available + 1 new = 6: one may go, not two.
        assert_eq!(out, vec![4]);
    }

    #[test]
    fn revision_annotations_track_history() {
        let d = deploy(3, IntOrString::Int(1), IntOrString::Int(0));
        let mut a = rs_annotations(&d, None, 1);
        assert_eq!(a.get(REVISION_ANNOTATION).map(String::as_str), Some("1"));
        assert!(set_replicas_annotations(&d, &mut a));
        assert!(!set_replicas_annotations(&d, &mut a));
        assert_eq!(
            a.get(DESIRED_REPLICAS_ANNOTATION).map(String::as_str),
            Some("3")
        );
        assert_eq!(
            a.get(MAX_REPLICAS_ANNOTATION).map(String::as_str),
            Some("4")
        );
        // An old RS that becomes new again gets a new revision; the old one is history.
        let b = rs_annotations(&d, Some(&a), 3);
        assert_eq!(b.get(REVISION_ANNOTATION).map(String::as_str), Some("3"));
        assert_eq!(
            b.get(REVISION_HISTORY_ANNOTATION).map(String::as_str),
            Some("1")
        );
        // Never lowered.
        let c = rs_annotations(&d, Some(&b), 2);
        assert_eq!(c.get(REVISION_ANNOTATION).map(String::as_str), Some("3"));
    }
}
