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
//! Pods get their tolerations of the `node.kubernetes.io/not-ready` and
//! `node.kubernetes.io/unreachable` taints from the apiserver's `DefaultTolerationSeconds`
//! admission plugin, so, as upstream, a pod without one (the plugin disabled) is evicted at once.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

use crate::scheduler::filter::tolerates;

pub use api::taints::{TAINT_NOT_READY, TAINT_UNREACHABLE};
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
    scheduled: Option<Scheduled>,
    now: Timestamp,
) -> Decision {
    if taints.is_empty() {
        return Decision::Cancel;
    }
    let Some(used) = matching_tolerations(taints, tolerations) else {
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
        assert_eq!(decide(&[], &t, None, ts(10)), Decision::EvictNow);
        assert_eq!(
            decide(&[tol("k", "other", None)], &t, None, ts(10)),
            Decision::EvictNow
        );
        assert_eq!(decide(&[], &[], None, ts(10)), Decision::Cancel);
        // Two taints, only one tolerated: evict now (upstream "not all taints are tolerated").
        let two = [taint("k", "v"), taint("j", "w")];
        assert_eq!(
            decide(&[tol("k", "v", None)], &two, None, ts(10)),
            Decision::EvictNow
        );
    }

    #[test]
    fn a_toleration_past_the_clock_range_never_fires_instead_of_firing_now() {
        let t = [taint("k", "v")];
        let d = decide(&[tol("k", "v", Some(1_000_000_000_000))], &t, None, ts(10));
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
            decide(&[tol("k", "v", None)], &t, None, ts(10)),
            Decision::Cancel,
            "tolerated forever"
        );
        assert_eq!(
            decide(&[tol("k", "v", Some(5))], &t, None, ts(10)),
            at(10, 15)
        );
        assert_eq!(
            decide(&[tol("k", "v", Some(0))], &t, None, ts(10)),
            at(10, 10)
        );
        assert_eq!(
            decide(&[tol("k", "v", Some(-3))], &t, None, ts(10)),
            at(10, 10)
        );
        // Already scheduled: the instant stands, even if the toleration shrank since.
        let s = Scheduled {
            created_at: ts(10),
            fire_at: ts(15),
        };
        assert_eq!(
            decide(&[tol("k", "v", Some(1))], &t, Some(s), ts(12)),
            at(10, 15)
        );
    }

    #[test]
    fn first_matching_toleration_per_taint_and_minimum_over_taints() {
        let two = [taint("k", "v"), taint("j", "w")];
        let tols = [tol("k", "v", Some(30)), tol("j", "w", Some(7))];
        assert_eq!(decide(&tols, &two, None, ts(0)), at(0, 7));
        // The first toleration matching "k" is forever; the second (60 s) is not used.
        let exists_k = Toleration {
            key: Some("k".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        let tols = [exists_k, tol("k", "v", Some(60))];
        assert_eq!(
            decide(&tols, &[taint("k", "v")], None, ts(0)),
            Decision::Cancel
        );
    }

    #[test]
    fn node_condition_taints_need_a_toleration() {
        let unreachable = [Taint {
            key: TAINT_UNREACHABLE.into(),
            value: None,
            effect: "NoExecute".into(),
            time_added: None,
        }];
        // No toleration (DefaultTolerationSeconds admission disabled): evicted at once.
        assert_eq!(decide(&[], &unreachable, None, ts(0)), Decision::EvictNow);
        let own = Toleration {
            key: Some(TAINT_UNREACHABLE.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: Some(20),
            value: None,
        };
        assert_eq!(decide(&[own], &unreachable, None, ts(0)), at(0, 20));
        // A toleration of every taint (operator Exists, no key) covers them too.
        let all = Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        };
        assert_eq!(decide(&[all], &unreachable, None, ts(0)), Decision::Cancel);
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
