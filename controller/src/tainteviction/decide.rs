//! Taint-eviction decisions (upstream `pkg/controller/tainteviction/taint_eviction.go`,
//! `processPodOnNode`, `getMinTolerationTime` and `v1helper.GetMatchingTolerations`), free of
//! I/O and driven by an explicit `now`.
//!
//! Only a node's `NoExecute` taints matter. Each taint is matched by the pod's **first**
//! toleration that tolerates it; a taint no toleration tolerates means "evict now". Otherwise
//! the smallest `tolerationSeconds` of the used tolerations is the time the pod may stay (none
//! set: forever; zero or less: none at all), counted from when the controller first saw the
//! pod under those taints — not from the taint's `timeAdded` — and, as upstream's timed work
//! queue, a scheduled eviction keeps its instant until it is cancelled (taints gone, tolerated
//! forever, pod gone).
//!
//! One deviation, stated here and in [`with_default_tolerations`]: minik8s's apiserver has no
//! `DefaultTolerationSeconds` admission plugin yet, so a pod without a toleration for the
//! `node.kubernetes.io/not-ready` or `node.kubernetes.io/unreachable` `NoExecute` taint is judged
//! as if the plugin had given it one (`Exists`, `tolerationSeconds` = the configured default,
//! 300 s upstream), so a node that merely goes silent does not lose its pods at once.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

use crate::scheduler::filter::tolerates;

pub use api::taints::{TAINT_NOT_READY, TAINT_UNREACHABLE};
/// `--default-not-ready-toleration-seconds` / `--default-unreachable-toleration-seconds`: 300 s.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The node's `NoExecute` taints (`getNoExecuteTaints`).
pub fn no_execute_taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter(|t| t.effect == "NoExecute")
        .cloned()
        .collect()
}

/// The pod's tolerations plus those the `DefaultTolerationSeconds` admission plugin would have
/// added: for each of the not-ready and unreachable `NoExecute` taints the pod does not already
/// tolerate, `Exists` for `default_seconds`.
pub fn with_default_tolerations(
    tolerations: &[Toleration],
    default_seconds: i64,
) -> Vec<Toleration> {
    let mut out = tolerations.to_vec();
    for key in [TAINT_NOT_READY, TAINT_UNREACHABLE] {
        let probe = Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            value: None,
            time_added: None,
        };
        if !tolerations.iter().any(|t| tolerates(t, &probe)) {
            out.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(default_seconds),
                value: None,
            });
        }
    }
    out
}

/// `GetMatchingTolerations`: `None` if some taint is not tolerated, else for each taint the
/// first toleration that tolerates it.
pub fn matching_tolerations<'a>(
    taints: &[Taint],
    tolerations: &'a [Toleration],
) -> Option<Vec<&'a Toleration>> {
    let mut used = Vec::with_capacity(taints.len());
    for taint in taints {
        used.push(tolerations.iter().find(|t| tolerates(t, taint))?);
    }
    Some(used)
}

/// How long the used tolerations let a pod stay (`getMinTolerationTime`): `None` = forever.
pub fn min_toleration(used: &[&Toleration]) -> Option<SignedDuration> {
    if used.is_empty() {
        return Some(SignedDuration::ZERO);
    }
    let mut min: Option<i64> = None;
    for t in used {
        match t.toleration_seconds {
            Some(s) if s <= 0 => return Some(SignedDuration::ZERO),
            Some(s) => min = Some(min.map_or(s, |m| m.min(s))),
            None => {}
        }
    }
    min.map(SignedDuration::from_secs)
}

/// An eviction the controller has scheduled for a pod (upstream's `TimedWorker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    /// When the controller first saw the pod under its current taints.
    pub created_at: Timestamp,
    /// When the pod is to be deleted.
    pub fire_at: Timestamp,
}

/// What to do with one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No `NoExecute` taint, or all tolerated forever: cancel any scheduled eviction.
    Cancel,
    /// A taint is not tolerated: delete the pod now.
    EvictNow,
    /// Delete the pod at this instant (kept if already scheduled).
    Schedule(Scheduled),
}

/// `processPodOnNode` for a pod with `tolerations` on a node with `NoExecute` `taints`.
pub fn decide(
    tolerations: &[Toleration],
    taints: &[Taint],
    default_seconds: i64,
    scheduled: Option<Scheduled>,
    now: Timestamp,
) -> Decision {
    if taints.is_empty() {
        return Decision::Cancel;
    }
    let tolerations = with_default_tolerations(tolerations, default_seconds);
    let Some(used) = matching_tolerations(taints, &tolerations) else {
        return Decision::EvictNow;
    };
    let Some(stay) = min_toleration(&used) else {
        return Decision::Cancel;
    };
    // An eviction once scheduled keeps its instant (upstream keeps the existing timed work).
    if let Some(s) = scheduled {
        return Decision::Schedule(s);
    }
    Decision::Schedule(Scheduled {
        created_at: now,
        // A `tolerationSeconds` past jiff's range (meant as "forever") must not evict at once.
        fire_at: now.checked_add(stay).unwrap_or(Timestamp::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_util::testing::ts;

    fn taint(key: &str, value: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: "NoExecute".into(),
            time_added: None,
        }
    }

    fn tol(key: &str, value: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Equal".into()),
            value: Some(value.into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: secs,
        }
    }

    fn at(created: i64, fire: i64) -> Decision {
        Decision::Schedule(Scheduled {
            created_at: ts(created),
            fire_at: ts(fire),
        })
    }

    #[test]
    fn untolerated_taint_evicts_now_and_no_taint_cancels() {
        let t = [taint("k", "v")];
        assert_eq!(decide(&[], &t, 300, None, ts(10)), Decision::EvictNow);
        assert_eq!(
            decide(&[tol("k", "other", None)], &t, 300, None, ts(10)),
            Decision::EvictNow
        );
        assert_eq!(decide(&[], &[], 300, None, ts(10)), Decision::Cancel);
        // Two taints, only one tolerated: evict now (upstream "not all taints are tolerated").
        let two = [taint("k", "v"), taint("j", "w")];
        assert_eq!(
            decide(&[tol("k", "v", None)], &two, 300, None, ts(10)),
            Decision::EvictNow
        );
    }

    #[test]
    fn a_toleration_past_the_clock_range_never_fires_instead_of_firing_now() {
        let t = [taint("k", "v")];
        let d = decide(
            &[tol("k", "v", Some(1_000_000_000_000))],
            &t,
            300,
            None,
            ts(10),
        );
        assert_eq!(
            d,
            Decision::Schedule(Scheduled {
                created_at: ts(10),
                fire_at: Timestamp::MAX,
            })
        );
    }

    #[test]
    fn toleration_seconds_schedule_from_first_sight() {
        let t = [taint("k", "v")];
        assert_eq!(
            decide(&[tol("k", "v", None)], &t, 300, None, ts(10)),
            Decision::Cancel,
            "tolerated forever"
        );
        assert_eq!(
            decide(&[tol("k", "v", Some(5))], &t, 300, None, ts(10)),
            at(10, 15)
        );
        assert_eq!(
            decide(&[tol("k", "v", Some(0))], &t, 300, None, ts(10)),
            at(10, 10)
        );
        assert_eq!(
            decide(&[tol("k", "v", Some(-3))], &t, 300, None, ts(10)),
            at(10, 10)
        );
        // Already scheduled: the instant stands, even if the toleration shrank since.
        let s = Scheduled {
            created_at: ts(10),
            fire_at: ts(15),
        };
        assert_eq!(
            decide(&[tol("k", "v", Some(1))], &t, 300, Some(s), ts(12)),
            at(10, 15)
        );
    }

    #[test]
    fn first_matching_toleration_per_taint_and_minimum_over_taints() {
        let two = [taint("k", "v"), taint("j", "w")];
        let tols = [tol("k", "v", Some(30)), tol("j", "w", Some(7))];
        assert_eq!(decide(&tols, &two, 300, None, ts(0)), at(0, 7));
        // The first toleration matching "k" is forever; the second (60 s) is not used.
        let exists_k = Toleration {
            key: Some("k".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        let tols = [exists_k, tol("k", "v", Some(60))];
        assert_eq!(
            decide(&tols, &[taint("k", "v")], 300, None, ts(0)),
            Decision::Cancel
        );
    }

    #[test]
    fn node_condition_taints_get_the_default_toleration() {
        let unreachable = [Taint {
            key: TAINT_UNREACHABLE.into(),
            value: None,
            effect: "NoExecute".into(),
            time_added: None,
        }];
        assert_eq!(decide(&[], &unreachable, 300, None, ts(0)), at(0, 300));
        // The pod's own toleration wins over the default.
        let own = Toleration {
            key: Some(TAINT_UNREACHABLE.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: Some(20),
            value: None,
        };
        assert_eq!(decide(&[own], &unreachable, 300, None, ts(0)), at(0, 20));
        // A toleration of every taint (operator Exists, no key) covers them too.
        let all = Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        };
        assert_eq!(
            decide(&[all], &unreachable, 300, None, ts(0)),
            Decision::Cancel
        );
    }

    #[test]
    fn only_no_execute_taints_count() {
        let mut n = Node::default();
        n.spec.get_or_insert_with(Default::default).taints = Some(vec![
            Taint {
                effect: "NoSchedule".into(),
                ..taint("a", "1")
            },
            taint("b", "2"),
        ]);
        let t = no_execute_taints(&n);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].key, "b");
    }
}
