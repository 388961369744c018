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

/// The most pods an RS can still have that are not terminating: `spec.replicas`, or
/// `status.replicas` while it reports more (scaled down, but the replica-set controller has not yet
/// deleted the surplus; its status counts the pods it saw before deleting, so it never reports fewer
/// than remain). Upstream sizes the new RS on `spec.replicas` alone, and a 1,000-replica rollout
/// then had up to 1,329 live pods against a bound of 1,250: the new RS's creates raced the old
/// RS's deletes.
pub fn rs_pods_bound(rs: &ReplicaSet) -> i32 {
    rs_replicas(rs).max(rs.status.as_ref().map_or(0, |s| s.replicas))
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

/// One ReplicaSet as proportional scaling sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizedRs {
    /// `spec.replicas`.
    pub replicas: i32,
    /// The `max-replicas` annotation: `replicas + maxSurge` of the Deployment when this RS was last
    /// scaled, i.e. the total its current size was a share of.
    pub max_replicas: Option<i32>,
}

/// The Deployment as proportional scaling sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleTarget {
    /// `spec.replicas`.
    pub replicas: i32,
    /// Resolved maxSurge (0 for `Recreate`).
    pub max_surge: i32,
    /// `status.replicas`: the size an RS without a `max-replicas` annotation is taken as a share of.
    pub status_replicas: i32,
}

/// `getReplicaSetFraction`: how many replicas `rs` should gain (or lose, if negative) to keep its
/// share of the Deployment now that the total is `replicas + maxSurge` instead of the total it
/// was last scaled for. Scaling to zero takes the whole RS.
fn replica_set_fraction(rs: SizedRs, d: ScaleTarget) -> i32 {
    if d.replicas == 0 {
        return -rs.replicas;
    }
    let target = i64::from(d.replicas) + i64::from(d.max_surge);
    // A missing (or unusable) annotation falls back to the Deployment's current size. Upstream
    // would divide by zero when that is 0 too; no share is computed then (the leftover rule
    // still keeps the total right).
    let base = match rs.max_replicas.filter(|m| *m > 0) {
        Some(m) => i64::from(m),
        None if d.status_replicas > 0 => i64::from(d.status_replicas),
        None => return 0,
    };
    let r = i64::from(rs.replicas);
    // round(r * target / base), halves away from zero (every term is positive here).
    let size = (2 * r * target + base) / (2 * base);
    i32::try_from(size - r).unwrap_or(i32::MAX)
}

/// `GetProportion`: `rs`'s share of `to_add` given that `added` of it is already handed out,
/// never overshooting what is left in the direction of the scaling.
fn proportion(rs: SizedRs, d: ScaleTarget, to_add: i32, added: i32) -> i32 {
    if rs.replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = replica_set_fraction(rs, d);
    let left = to_add - added;
    if to_add > 0 {
        fraction.min(left)
    } else {
        fraction.max(left)
    }
}

/// The proportional step of `scale` (`pkg/controller/deployment/sync.go`): the Deployment was
/// resized while several ReplicaSets are active, so the difference between `replicas + maxSurge`
/// (0 when scaling to 0) and the sum of the active RSs is spread over them in proportion to their
/// size, and rounding leftovers go to the first RS in upstream's order.
///
/// `rss` must be ordered oldest first (`ReplicaSetsByCreationTimestamp`), which breaks ties:
/// scaling up visits the largest RS first and, among equals, the newest (`ReplicaSetsBySizeNewer`);
/// scaling down visits the largest first and, among equals, the oldest (`ReplicaSetsBySizeOlder`).
///
/// Returns `(index into rss, new size)` for every active RS (size > 0), in the order to write them;
/// RSs of size 0 are not listed and never grow. With nothing to add, every active RS keeps its size
/// (it is still written, for its annotations).
pub fn proportional_scale(rss: &[SizedRs], d: ScaleTarget) -> Vec<(usize, i32)> {
    let mut order: Vec<usize> = (0..rss.len()).filter(|i| rss[*i].replicas > 0).collect();
    let total: i64 = order.iter().map(|i| i64::from(rss[*i].replicas)).sum();
    let allowed = if d.replicas > 0 {
        i64::from(d.replicas) + i64::from(d.max_surge)
    } else {
        0
    };
    let to_add = i32::try_from(allowed - total).unwrap_or(0);
    match to_add.signum() {
        1 => order.sort_by_key(|i| (std::cmp::Reverse(rss[*i].replicas), std::cmp::Reverse(*i))),
        -1 => order.sort_by_key(|i| (std::cmp::Reverse(rss[*i].replicas), *i)),
        _ => {}
    }
    let mut added = 0;
    let mut out: Vec<(usize, i32)> = order
        .iter()
        .map(|i| {
            let p = proportion(rss[*i], d, to_add, added);
            added += p;
            (*i, rss[*i].replicas + p)
        })
        .collect();
    if let Some(first) = out.first_mut() {
        first.1 = (first.1 + to_add - added).max(0);
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

/// `getMaxReplicasAnnotation`: the `max-replicas` annotation of an RS, if present and valid.
pub fn max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(MAX_REPLICAS_ANNOTATION)?
        .parse()
        .ok()
}

/// `IsSaturated`: the new RS runs the Deployment's full count, was last scaled for it, and all of
/// it is available.
pub fn is_saturated(d: &Deployment, rs: &ReplicaSet) -> bool {
    let want = replicas(d);
    rs_replicas(rs) == want
        && desired_replicas_annotation(rs) == Some(want)
        && rs_available(rs) == want
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

    /// Regression (rollout_bench, 1,000 replicas, maxSurge 250): the old RS had been scaled
    /// 1000 -> 750 but still had 1,000 pods; counting its spec let the new RS grow to 500 at once,
    /// and 1,329 pods were live. Counted at its status it may not grow until the pods are gone.
    #[test]
    fn new_rs_waits_for_the_old_pods_to_be_deleted() {
        let d = deploy(
            1000,
            IntOrString::String("25%".into()),
            IntOrString::String("25%".into()),
        );
        let old = ReplicaSet {
            spec: Some(k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(750),
                ..Default::default()
            }),
            status: Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
                replicas: 1000,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(rs_pods_bound(&old), 1000);
        assert_eq!(new_rs_new_replicas(&d, rs_pods_bound(&old) + 250, 250), 250);
        // Once the replica-set controller reports the deletions, the new RS may grow.
        let mut done = old.clone();
        if let Some(s) = done.status.as_mut() {
            s.replicas = 750;
        }
        assert_eq!(
            new_rs_new_replicas(&d, rs_pods_bound(&done) + 250, 250),
            500
        );
        // An RS still creating (status below spec) counts at its spec.
        if let Some(s) = done.status.as_mut() {
            s.replicas = 10;
        }
        assert_eq!(rs_pods_bound(&done), 750);
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

    /// Proportional scaling: `sizes` are `(replicas, max-replicas annotation)` oldest first; the
    /// Deployment goes to `replicas` with `surge`. Returns every RS's size afterwards, in input order.
    fn scaled(sizes: &[(i32, Option<i32>)], replicas: i32, surge: i32, status: i32) -> Vec<i32> {
        let rss: Vec<SizedRs> = sizes
            .iter()
            .map(|(r, m)| SizedRs {
                replicas: *r,
                max_replicas: *m,
            })
            .collect();
        let d = ScaleTarget {
            replicas,
            max_surge: surge,
            status_replicas: status,
        };
        let mut out: Vec<i32> = rss.iter().map(|r| r.replicas).collect();
        for (i, n) in proportional_scale(&rss, d) {
            out[i] = n;
        }
        out
    }

    // The cases of upstream's `TestScale` (maxSurge 0 unless stated), oldest RS first.
    #[test]
    fn proportional_scale_up_and_down_keeps_shares() {
        // 5 -> 10: 3 + 2 become 6 + 4.
        assert_eq!(scaled(&[(3, Some(5)), (2, Some(5))], 10, 0, 5), vec![6, 4]);
        // 5 -> 3: 3 + 2 become 2 + 1.
        assert_eq!(scaled(&[(3, Some(5)), (2, Some(5))], 3, 0, 5), vec![2, 1]);
        // 9 -> 4: the small old RS goes, the new one keeps its share.
        assert_eq!(scaled(&[(1, Some(9)), (8, Some(9))], 4, 0, 9), vec![0, 4]);
        // 7 -> 10 over three RSs.
        let three = [(2, Some(7)), (3, Some(7)), (2, Some(7))];
        assert_eq!(scaled(&three, 10, 0, 7), vec![3, 4, 3]);
        // 13 -> 8 over three RSs.
        let three = [(3, Some(13)), (8, Some(13)), (2, Some(13))];
        assert_eq!(scaled(&three, 8, 0, 13), vec![2, 5, 1]);
        // Scaling to zero empties every RS.
        let three = [(1, Some(6)), (2, Some(6)), (3, Some(6))];
        assert_eq!(scaled(&three, 0, 0, 6), vec![0, 0, 0]);
    }

    #[test]
    fn proportional_scale_with_surge() {
        // 10 -> 20 with maxSurge 2 (annotation 12): 6 + 6 become 11 + 11 (22 = 20 + 2).
        assert_eq!(
            scaled(&[(6, Some(12)), (6, Some(12))], 20, 2, 12),
            vec![11, 11]
        );
        // 10 (surge 3) -> 50 (surge 6): 8 old + 5 new of 13 become 34 + 22 of 56.
        assert_eq!(
            scaled(&[(8, Some(13)), (5, Some(13))], 50, 6, 13),
            vec![34, 22]
        );
        // maxSurge 25 %: 10 (+3) -> 20 (+5) with a fully surged rollout at 8 old + 5 new.
        assert_eq!(
            scaled(&[(8, Some(13)), (5, Some(13))], 20, 5, 13),
            vec![15, 10]
        );
        // The same mid-rollout at 6 old + 4 new (3 below the surge): shares are taken of the 13 the
        // RSs were last scaled for (12 and 8), and the 5 left over go to the largest.
        assert_eq!(
            scaled(&[(6, Some(13)), (4, Some(13))], 20, 5, 10),
            vec![17, 8]
        );
        // And back down 20 (+5) -> 10 (+3): 15 + 10 of 25 become 8 + 5 of 13.
        assert_eq!(
            scaled(&[(15, Some(25)), (10, Some(25))], 10, 3, 25),
            vec![8, 5]
        );
    }

    #[test]
    fn proportional_scale_leftovers_follow_upstream_order() {
        // 3 -> 4 over 1 + 1 + 1: every share rounds to 0; the newest takes the leftover.
        let ones = [(1, Some(3)), (1, Some(3)), (1, Some(3))];
        assert_eq!(scaled(&ones, 4, 0, 3), vec![1, 1, 2]);
        // 3 -> 2: the oldest gives the leftover up.
        assert_eq!(scaled(&ones, 2, 0, 3), vec![0, 1, 1]);
        // 4 -> 5 over 2 + 2 (no new RS): the newer of the two equals rounds up first.
        assert_eq!(scaled(&[(2, Some(4)), (2, Some(4))], 5, 0, 4), vec![2, 3]);
        // Written largest first: scaling up 2 + 3 + 2, the 3 first, then the newest 2.
        let rss = [2, 3, 2].map(|r| SizedRs {
            replicas: r,
            max_replicas: Some(7),
        });
        let d = ScaleTarget {
            replicas: 10,
            max_surge: 0,
            status_replicas: 7,
        };
        let order: Vec<usize> = proportional_scale(&rss, d)
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(order, vec![1, 2, 0]);
    }

    #[test]
    fn proportional_scale_leaves_empty_replica_sets_alone() {
        let rss = [(0, Some(5)), (3, Some(5)), (2, Some(5))];
        assert_eq!(scaled(&rss, 10, 0, 5), vec![0, 6, 4]);
        let listed: Vec<usize> = proportional_scale(
            &rss.map(|(r, m)| SizedRs {
                replicas: r,
                max_replicas: m,
            }),
            ScaleTarget {
                replicas: 10,
                max_surge: 0,
                status_replicas: 5,
            },
        )
        .into_iter()
        .map(|(i, _)| i)
        .collect();
        assert!(!listed.contains(&0), "{listed:?}");
        // Nothing to add: sizes stay, every active RS is still listed (for its annotations).
        assert_eq!(scaled(&[(3, Some(6)), (3, Some(6))], 6, 0, 6), vec![3, 3]);
    }

    #[test]
    fn proportional_scale_without_annotation_uses_status_replicas() {
        assert_eq!(scaled(&[(3, None), (2, None)], 10, 0, 5), vec![6, 4]);
        // An unusable base computes no share; the leftover keeps the total right.
        assert_eq!(scaled(&[(3, None), (2, Some(0))], 10, 0, 0), vec![8, 2]);
    }

    #[test]
    fn saturation_needs_size_annotation_and_availability() {
        let d = deploy(3, IntOrString::Int(1), IntOrString::Int(0));
        let mut rs = ReplicaSet {
            spec: Some(k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: Some(3),
                ..Default::default()
            }),
            status: Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
                available_replicas: Some(3),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(!is_saturated(&d, &rs), "no desired-replicas annotation");
        let mut a = BTreeMap::new();
        set_replicas_annotations(&d, &mut a);
        rs.metadata.annotations = Some(a);
        assert!(is_saturated(&d, &rs));
        assert_eq!(max_replicas_annotation(&rs), Some(4));
        if let Some(s) = rs.status.as_mut() {
            s.available_replicas = Some(2);
        }
        assert!(!is_saturated(&d, &rs), "not all available");
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
