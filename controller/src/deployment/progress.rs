//! Deployment status and conditions (`sync.go` `calculateStatus`, `progress.go` `syncRolloutStatus`,
//! `util.DeploymentComplete/DeploymentProgressing/DeploymentTimedOut`).
//!
//! Pure functions of (Deployment, its ReplicaSets, now): the controller writes the result only when
//! it differs from the stored status, so an idle Deployment causes no writes.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::util::{replicas, surge_and_unavailable};

/// Condition type `Progressing`.
pub const PROGRESSING: &str = "Progressing";
/// Condition type `Available`.
pub const AVAILABLE: &str = "Available";
/// Progressing reason: a new RS was created.
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
/// Progressing reason: an existing RS matches the template.
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
/// Progressing reason: the rollout made progress.
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
/// Progressing reason: the rollout completed.
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// Progressing reason: no progress within `progressDeadlineSeconds`.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
/// Progressing reason (Unknown): paused.
pub const PAUSED: &str = "DeploymentPaused";
/// Progressing reason (Unknown): resumed.
pub const RESUMED: &str = "DeploymentResumed";
/// Available reason when enough replicas are available.
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
/// Available reason when too few replicas are available.
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// A new condition stamped `now`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// `GetDeploymentCondition`.
pub fn get_condition<'a>(s: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// `SetDeploymentCondition`: replace the condition of that type; keep the transition time if the
/// status did not change; no-op if status and reason are unchanged.
pub fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    let conds = s.conditions.get_or_insert_with(Vec::new);
    if let Some(cur) = conds.iter().find(|x| x.type_ == c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    conds.retain(|x| x.type_ != c.type_);
    conds.push(c);
}

/// `RemoveDeploymentCondition`.
pub fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(c) = s.conditions.as_mut() {
        c.retain(|x| x.type_ != type_);
    }
}

fn sum(rss: &[&ReplicaSet], f: impl Fn(&ReplicaSet) -> Option<i32>) -> i32 {
    rss.iter().map(|r| f(r).unwrap_or(0)).sum()
}

/// `calculateStatus`: counts from the RSs' statuses, conditions carried over, `Available` set.
pub fn calculate_status(
    d: &Deployment,
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    now: Timestamp,
) -> DeploymentStatus {
    let old = d.status.clone().unwrap_or_default();
    let available = sum(all, |r| {
        r.status.as_ref().and_then(|s| s.available_replicas)
    });
    let total = sum(all, |r| r.spec.as_ref().and_then(|s| s.replicas));
    let mut st = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(sum(all, |r| r.status.as_ref().map(|s| s.replicas))),
        updated_replicas: Some(
            new_rs
                .and_then(|r| r.status.as_ref())
                .map(|s| s.replicas)
                .unwrap_or(0),
        ),
        ready_replicas: Some(sum(all, |r| {
            r.status.as_ref().and_then(|s| s.ready_replicas)
        })),
        available_replicas: Some(available),
        unavailable_replicas: Some((total - available).max(0)),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        terminating_replicas: None,
    };
    let (_, max_unavailable) = surge_and_unavailable(d);
    let c = if available >= replicas(d) - max_unavailable {
        condition(
            AVAILABLE,
            "True",
            MIN_AVAILABLE,
            "Deployment has minimum availability.".into(),
            now,
        )
    } else {
        condition(
            AVAILABLE,
            "False",
            MIN_UNAVAILABLE,
            "Deployment does not have minimum availability.".into(),
            now,
        )
    };
    set_condition(&mut st, c);
    st
}

/// `progressDeadlineSeconds` (None when unset or `MaxInt32`, which means "no deadline").
pub fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .filter(|s| *s != i32::MAX)
}

/// `DeploymentComplete`.
pub fn is_complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let n = replicas(d);
    s.updated_replicas == Some(n)
        && s.replicas == Some(n)
        && s.available_replicas == Some(n)
        && s.observed_generation >= d.metadata.generation
}

/// `DeploymentProgressing`: some count moved in the right direction since the stored status.
pub fn is_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let old_old = old.replicas.unwrap_or(0) - old.updated_replicas.unwrap_or(0);
    let new_old = new.replicas.unwrap_or(0) - new.updated_replicas.unwrap_or(0);
    new.updated_replicas > old.updated_replicas
        || new_old < old_old
        || new.ready_replicas > old.ready_replicas
        || new.available_replicas > old.available_replicas
}

/// `DeploymentTimedOut`: the Progressing condition was last updated more than the deadline ago.
pub fn is_timed_out(d: &Deployment, s: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = progress_deadline(d) else {
        return false;
    };
    let Some(c) = get_condition(s, PROGRESSING) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(TIMED_OUT) => return true,
        Some(NEW_RS_AVAILABLE) => return false,
        _ => {}
    }
    let Some(from) = c.last_update_time.as_ref().map(|t| t.0) else {
        return false;
    };
    now > from
        .saturating_add(SignedDuration::from_secs(i64::from(deadline)))
        .unwrap_or(from)
}

/// `syncRolloutStatus`'s status: `calculate_status` plus the Progressing transitions. Returns the
/// status and, if the rollout is still in progress, how long until it would time out (the
/// controller requeues the key then).
pub fn rollout_status(
    d: &Deployment,
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    now: Timestamp,
) -> (DeploymentStatus, Option<SignedDuration>) {
    let mut st = calculate_status(d, all, new_rs, now);
    let Some(deadline) = progress_deadline(d) else {
        remove_condition(&mut st, PROGRESSING);
        return (st, None);
    };
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let current = get_condition(&st, PROGRESSING).cloned();
    let complete_already = st.replicas == st.updated_replicas
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    let rs_name = new_rs
        .and_then(|r| r.metadata.name.clone())
        .unwrap_or_default();
    if !complete_already && !paused {
        if is_complete(d, &st) {
            set_condition(
                &mut st,
                condition(
                    PROGRESSING,
                    "True",
                    NEW_RS_AVAILABLE,
                    format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
                    now,
                ),
            );
        } else if is_progressing(d, &st) {
            let mut c = condition(
                PROGRESSING,
                "True",
                RS_UPDATED,
                format!("ReplicaSet \"{rs_name}\" is progressing."),
                now,
            );
            if let Some(cur) = current.as_ref().filter(|c| c.status == "True") {
                c.last_transition_time = cur.last_transition_time.clone();
            }
            // Always refresh lastUpdateTime: progress resets the deadline.
            remove_condition(&mut st, PROGRESSING);
            set_condition(&mut st, c);
        } else if is_timed_out(d, &st, now) {
            set_condition(
                &mut st,
                condition(
                    PROGRESSING,
                    "False",
                    TIMED_OUT,
                    format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
                    now,
                ),
            );
        }
    }
    // requeueStuckDeployment: wake up when the deadline would pass.
    let requeue = get_condition(&st, PROGRESSING)
        .filter(|c| c.status == "True" && c.reason.as_deref() != Some(NEW_RS_AVAILABLE) && !paused)
        .filter(|_| !is_complete(d, &st))
        .and_then(|c| c.last_update_time.as_ref().map(|t| t.0))
        .map(|from| {
            let due = from
                .saturating_add(SignedDuration::from_secs(i64::from(deadline)))
                .unwrap_or(from);
            let left = due.duration_since(now);
            left.max(SignedDuration::ZERO) + SignedDuration::from_secs(1)
        });
    (st, requeue)
}

/// Whether the status differs enough to be written (`lastUpdateTime`-only changes of an unchanged
/// condition do not count).
pub fn status_differs(old: Option<&DeploymentStatus>, new: &DeploymentStatus) -> bool {
    let Some(old) = old else { return true };
    let strip = |s: &DeploymentStatus| {
        let mut s = s.clone();
        if let Some(cs) = s.conditions.as_mut() {
            for c in cs.iter_mut() {
                c.last_transition_time = None;
                c.message = None;
            }
            cs.sort_by(|a, b| a.type_.cmp(&b.type_));
        }
        s
    };
    let (a, b) = (strip(old), strip(new));
    if a != b {
        return true;
    }
    // Same shape: differ only if a Progressing lastUpdateTime moved (progress resets the deadline).
    get_condition(old, PROGRESSING).map(|c| &c.last_update_time)
        != get_condition(new, PROGRESSING).map(|c| &c.last_update_time)
        && get_condition(new, PROGRESSING).and_then(|c| c.reason.as_deref()) == Some(RS_UPDATED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, ReplicaSetSpec, ReplicaSetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn deploy(replicas: i32, deadline: i32) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                progress_deadline_seconds: Some(deadline),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn rs(name: &str, spec: i32, actual: i32, available: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(spec),
                ..Default::default()
            }),
            status: Some(ReplicaSetStatus {
                replicas: actual,
                ready_replicas: Some(available),
                available_replicas: Some(available),
                ..Default::default()
            }),
        }
    }

    fn reason(s: &DeploymentStatus, t: &str) -> Option<String> {
        get_condition(s, t).and_then(|c| c.reason.clone())
    }

    #[test]
    fn status_counts_and_available_condition() {
        let d = deploy(4, 600);
        let (new, old) = (rs("new", 2, 2, 1), rs("old", 3, 3, 3));
        let st = calculate_status(&d, &[&new, &old], Some(&new), ts(100));
        assert_eq!(st.replicas, Some(5));
        assert_eq!(st.updated_replicas, Some(2));
        assert_eq!(st.available_replicas, Some(4));
        assert_eq!(st.unavailable_replicas, Some(1));
        assert_eq!(st.observed_generation, Some(1));
        // 4 desired, maxUnavailable 25% = 1: 4 available is enough.
        assert_eq!(reason(&st, AVAILABLE).as_deref(), Some(MIN_AVAILABLE));
        let few = rs("new", 4, 4, 2);
        let st = calculate_status(&d, &[&few], Some(&few), ts(100));
        assert_eq!(reason(&st, AVAILABLE).as_deref(), Some(MIN_UNAVAILABLE));
    }

    #[test]
    fn progress_then_complete_then_stays_complete() {
        let mut d = deploy(2, 10);
        let new = rs("web-abc", 2, 2, 1);
        let (st, requeue) = rollout_status(&d, &[&new], Some(&new), ts(100));
        assert_eq!(reason(&st, PROGRESSING).as_deref(), Some(RS_UPDATED));
        assert_eq!(requeue, Some(SignedDuration::from_secs(11)));
        d.status = Some(st);
        let done = rs("web-abc", 2, 2, 2);
        let (st, requeue) = rollout_status(&d, &[&done], Some(&done), ts(105));
        assert_eq!(reason(&st, PROGRESSING).as_deref(), Some(NEW_RS_AVAILABLE));
        assert_eq!(requeue, None);
        d.status = Some(st.clone());
        // Much later, complete stays complete (never times out).
        let (st2, _) = rollout_status(&d, &[&done], Some(&done), ts(10_000));
        assert_eq!(reason(&st2, PROGRESSING).as_deref(), Some(NEW_RS_AVAILABLE));
        assert!(!status_differs(Some(&st), &st2));
    }

    #[test]
    fn no_progress_past_the_deadline_times_out() {
        let mut d = deploy(2, 10);
        let stuck = rs("web-abc", 2, 2, 0);
        let mut st = DeploymentStatus::default();
        set_condition(
            &mut st,
            condition(PROGRESSING, "True", NEW_RS_CREATED, "x".into(), ts(100)),
        );
        st.replicas = Some(2);
        st.updated_replicas = Some(2);
        st.ready_replicas = Some(0);
        st.available_replicas = Some(0);
        d.status = Some(st);
        let (st, requeue) = rollout_status(&d, &[&stuck], Some(&stuck), ts(105));
        assert_eq!(reason(&st, PROGRESSING).as_deref(), Some(NEW_RS_CREATED));
        assert_eq!(requeue, Some(SignedDuration::from_secs(6)));
        let (st, requeue) = rollout_status(&d, &[&stuck], Some(&stuck), ts(111));
        assert_eq!(reason(&st, PROGRESSING).as_deref(), Some(TIMED_OUT));
        assert_eq!(
            get_condition(&st, PROGRESSING).map(|c| c.status.as_str()),
            Some("False")
        );
        assert_eq!(requeue, None);
    }

    #[test]
    fn set_condition_keeps_transition_time_for_same_status() {
        let mut st = DeploymentStatus::default();
        set_condition(
            &mut st,
            condition(PROGRESSING, "True", NEW_RS_CREATED, "a".into(), ts(1)),
        );
        set_condition(
            &mut st,
            condition(PROGRESSING, "True", RS_UPDATED, "b".into(), ts(5)),
        );
        let c = get_condition(&st, PROGRESSING)
            .cloned()
            .unwrap_or_else(|| condition("", "", "", String::new(), ts(0)));
        assert_eq!(c.last_transition_time, Some(Time(ts(1))));
        assert_eq!(c.last_update_time, Some(Time(ts(5))));
        assert_eq!(st.conditions.as_ref().map(Vec::len), Some(1));
    }
}
