//! Unit tests of the disruption decisions, after upstream's `disruption_test.go` cases.

use super::*;
use crate::cached_pod::CachedPod;
use crate::pod_util::testing::{pod, ready_at, ts};
use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("b".into()),
            namespace: Some("default".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: min,
            max_unavailable: max,
            ..Default::default()
        }),
        status: None,
    }
}

fn int(i: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(i))
}

fn pct(s: &str) -> Option<IntOrString> {
    Some(IntOrString::String(s.into()))
}

fn ready(name: &str) -> CachedPod {
    ready_at(pod(name), Some(ts(1)))
}

fn counts(current: i32, desired: i32, expected: i32) -> Counts {
    Counts {
        current_healthy: current,
        desired_healthy: desired,
        expected_pods: expected,
    }
}

#[test]
fn expected_and_desired_follow_min_available_and_max_unavailable() {
    // A number: the matching pods are the expected ones; no scale needed.
    let b = pdb(int(3), None);
    assert!(!needs_scale(&b));
    assert_eq!(expected_and_desired(&b, 4, 0), Ok((4, 3)));
    // A percentage of the controllers' scale, rounded up (upstream: 28% of 7 → 2).
    let b = pdb(pct("28%"), None);
    assert!(needs_scale(&b));
    assert_eq!(expected_and_desired(&b, 3, 7), Ok((7, 2)));
    // maxUnavailable as a number and as a percentage (rounded up), never below 0.
    assert_eq!(expected_and_desired(&pdb(None, int(1)), 3, 3), Ok((3, 2)));
    assert_eq!(
        expected_and_desired(&pdb(None, pct("30%")), 9, 10),
        Ok((10, 7))
    );
    assert_eq!(expected_and_desired(&pdb(None, int(5)), 2, 2), Ok((2, 0)));
    assert_eq!(
        expected_and_desired(&pdb(None, pct("abc")), 1, 1),
        Err("invalid type: string is not a percentage".to_string())
    );
    assert_eq!(
        scaled_value(&IntOrString::String("50%".into()), 5, false),
        Ok(2)
    );
}

#[test]
fn status_counts_ready_pods_and_allows_the_surplus() {
    let (a, b, c) = (ready("a"), ready("b"), pod("c"));
    let pods = [&a, &b, &c];
    let budget = pdb(int(1), None);
    let healthy = count_healthy(&pods, &BTreeMap::new(), ts(10));
    assert_eq!(healthy, 2);
    let st =
        next_status(&budget, counts(healthy, 1, 3), BTreeMap::new(), ts(10)).unwrap_or_default();
    assert_eq!(
        (st.current_healthy, st.desired_healthy, st.expected_pods),
        (2, 1, 3)
    );
    assert_eq!(st.disruptions_allowed, 1);
    assert_eq!(st.observed_generation, Some(1));
    let cond = st.conditions.clone().unwrap_or_default();
    assert_eq!(cond.len(), 1);
    assert_eq!(
        (cond[0].status.as_str(), cond[0].reason.as_str()),
        ("True", SUFFICIENT_PODS)
    );
    // Written once: the same counts are no change.
    let mut stored = budget.clone();
    stored.status = Some(st);
    assert_eq!(
        next_status(&stored, counts(2, 1, 3), BTreeMap::new(), ts(20)),
        None
    );
    // One fewer ready pod: nothing allowed, InsufficientPods, transition time moves.
    let st = next_status(&stored, counts(1, 1, 3), BTreeMap::new(), ts(30)).unwrap_or_default();
    assert_eq!(st.disruptions_allowed, 0);
    let cond = &st.conditions.unwrap_or_default()[0];
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", INSUFFICIENT_PODS)
    );
    assert_eq!(cond.last_transition_time, Time(ts(30)));
}

#[test]
fn no_expected_pods_means_no_disruption() {
    let st = next_status(&pdb(None, int(0)), counts(2, 0, 0), BTreeMap::new(), ts(1))
        .unwrap_or_default();
    assert_eq!(st.disruptions_allowed, 0);
}

#[test]
fn disrupted_pods_are_not_healthy_until_deleted_or_timed_out() {
    let (a, b) = (ready("a"), ready("b"));
    let mut gone = ready("gone");
    gone.metadata.deletion_timestamp = Some(Time(ts(5)));
    let pods = [&a, &b, &gone];
    let mut budget = pdb(int(1), None);
    budget.status = Some(PodDisruptionBudgetStatus {
        disrupted_pods: Some(
            [
                ("a".to_string(), Time(ts(100))),
                ("b".to_string(), Time(ts(0))),
                ("gone".to_string(), Time(ts(100))),
                ("absent".to_string(), Time(ts(100))),
            ]
            .into(),
        ),
        ..Default::default()
    });
    // At 150: "a" is pending (until 220), "b" overstayed (120), the others are dropped.
    let (kept, recheck, overdue) = disrupted_pods(&pods, &budget, ts(150));
    assert_eq!(kept.keys().collect::<Vec<_>>(), ["a"]);
    assert_eq!(recheck, Some(ts(220)));
    assert_eq!(overdue, ["b"]);
    assert_eq!(count_healthy(&pods, &kept, ts(150)), 1);
    // After the timeout "a" counts again.
    assert_eq!(count_healthy(&pods, &kept, ts(221)), 2);
}

#[test]
fn fail_safe_allows_nothing_and_says_why() {
    let mut budget = pdb(pct("50%"), None);
    let ok = next_status(&budget, counts(3, 1, 3), BTreeMap::new(), ts(1));
    budget.status = ok;
    let st = fail_safe_status(&budget, "found no controllers for pod \"a\"", ts(2));
    assert_eq!(st.disruptions_allowed, 0);
    assert_eq!(st.current_healthy, 3);
    let cond = &st.conditions.unwrap_or_default()[0];
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", SYNC_FAILED)
    );
    assert_eq!(cond.message, "found no controllers for pod \"a\"");
}

#[test]
fn stale_disruption_target_is_reset_after_two_minutes() {
    let mut p = ready("p");
    assert_eq!(stale_disruption_after(&p, ts(10)), None);
    if let Some(st) = p.status.as_mut() {
        st.conditions
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::core::v1::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("EvictionByEvictionAPI".into()),
                last_transition_time: Some(Time(ts(100))),
                ..Default::default()
            });
    }
    assert_eq!(
        stale_disruption_after(&p, ts(160)),
        Some(SignedDuration::from_secs(60))
    );
    assert_eq!(
        stale_disruption_after(&p, ts(400)),
        Some(SignedDuration::ZERO)
    );
    p.metadata.deletion_timestamp = Some(Time(ts(150)));
    assert_eq!(stale_disruption_after(&p, ts(400)), None);
}

#[test]
fn a_stale_reset_sends_the_condition_alone_at_the_pods_version() {
    let mut p = ready("web-0");
    p.metadata.resource_version = Some("42".into());
    let patch = stale_disruption_reset(&p, ts(400));
    assert_eq!(
        patch,
        serde_json::json!({
            "metadata": {"resourceVersion": "42"},
            "status": {"conditions": [{"type": "DisruptionTarget", "status": "False",
                "lastTransitionTime": serde_json::to_value(Time(ts(400))).unwrap()}]},
        })
    );
}
