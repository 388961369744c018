//! Unit tests of [`super::decide`]: per-node pods, failed-pod back-off, surge, rolling update
//! with maxUnavailable and maxSurge, status counts.

use crate::cached_pod::CachedPod;
use crate::cached_pod::{CachedPodSpec, CachedPodStatus};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::backoff::FailedPodsBackoff;
use super::decide::*;
use super::placement::CONTROLLER_REVISION_HASH_LABEL;

fn at(secs: i64) -> Timestamp {
    Timestamp::UNIX_EPOCH + SignedDuration::from_secs(secs)
}

/// A pod on `node` created at `created`, of revision `hash`, in `phase`, Ready since `ready`.
fn pod(
    name: &str,
    node: &str,
    created: i64,
    hash: &str,
    phase: &str,
    ready: Option<i64>,
) -> Arc<CachedPod> {
    Arc::new(CachedPod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            creation_timestamp: Some(Time(at(created))),
            labels: Some([(CONTROLLER_REVISION_HASH_LABEL.to_string(), hash.to_string())].into()),
            ..Default::default()
        },
        spec: Some(CachedPodSpec {
            node_name: Some(node.into()),
            ..Default::default()
        }),
        status: Some(CachedPodStatus {
            phase: Some(phase.into()),
            conditions: ready.map(|t| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(at(t))),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
    })
}

fn ctx(hash: &str, surge: bool, now: i64) -> DecideCtx<'_> {
    DecideCtx {
        hash,
        generation: None,
        min_ready_seconds: 0,
        allows_surge: surge,
        backoff_prefix: "uid/1".into(),
        now: at(now),
    }
}

fn rolling_ds(max_unavailable: IntOrString, max_surge: IntOrString) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta::default(),
        spec: Some(DaemonSetSpec {
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(max_unavailable),
                    max_surge: Some(max_surge),
                }),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn missing_pod_is_created_and_extra_pods_pruned_oldest_kept() {
    let mut b = FailedPodsBackoff::default();
    let c = ctx("new", false, 100);
    let d = pods_should_be_on_node("n1", (true, true), None, &c, &mut b);
    assert!(d.create && d.delete.is_empty());
    let none = pods_should_be_on_node("n1", (false, false), None, &c, &mut b);
    assert_eq!(none, NodeDecision::default());
    let pods = [
        pod("young", "n1", 50, "new", "Running", Some(60)),
        pod("old", "n1", 10, "new", "Running", Some(20)),
    ];
    let d = pods_should_be_on_node("n1", (true, true), Some(&pods), &c, &mut b);
    assert_eq!(d.delete, ["young"]);
    assert!(!d.create);
    // Not eligible any more: every pod goes; NoSchedule-only taint: they stay.
    let d = pods_should_be_on_node("n1", (false, false), Some(&pods), &c, &mut b);
    assert_eq!(d.delete, ["young", "old"]);
    let d = pods_should_be_on_node("n1", (false, true), Some(&pods[1..]), &c, &mut b);
    assert!(d.delete.is_empty() && !d.create);
}

#[test]
fn failed_pods_are_replaced_with_backoff_and_an_event() {
    let mut b = FailedPodsBackoff::default();
    let failed = [pod("f", "n1", 10, "new", "Failed", None)];
    let d = pods_should_be_on_node(
        "n1",
        (true, true),
        Some(&failed),
        &ctx("new", false, 100),
        &mut b,
    );
    assert_eq!(d.delete, ["f"]);
    assert_eq!(
        d.events,
        [(
            true,
            FAILED_DAEMON_POD,
            "Found failed daemon pod default/f on node n1, will try to kill it".to_string()
        )]
    );
    // The replacement failed again within the 1 s window: wait, and look again after it.
    let again = [pod("g", "n1", 100, "new", "Failed", None)];
    let d = pods_should_be_on_node(
        "n1",
        (true, true),
        Some(&again),
        &ctx("new", false, 100),
        &mut b,
    );
    assert!(d.delete.is_empty());
    assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
    let d = pods_should_be_on_node(
        "n1",
        (true, true),
        Some(&again),
        &ctx("new", false, 101),
        &mut b,
    );
    assert_eq!(d.delete, ["g"]);
    assert_eq!(
        b.get("uid/1/n1"),
        Duration::from_secs(2),
        "the window doubled"
    );
    // Succeeded pods are deleted with a Normal event.
    let done = [pod("s", "n1", 10, "new", "Succeeded", None)];
    let d = pods_should_be_on_node(
        "n1",
        (true, true),
        Some(&done),
        &ctx("new", false, 100),
        &mut b,
    );
    assert_eq!(d.delete, ["s"]);
    assert_eq!(
        d.events.first().map(|e| (e.0, e.1)),
        Some((false, SUCCEEDED_DAEMON_POD))
    );
}

#[test]
fn surge_keeps_one_old_until_the_new_is_available() {
    let mut b = FailedPodsBackoff::default();
    let c = ctx("new", true, 100);
    let waiting = [
        pod("old", "n1", 10, "old", "Running", Some(20)),
        pod("new", "n1", 90, "new", "Running", None),
    ];
    let d = pods_should_be_on_node("n1", (true, true), Some(&waiting), &c, &mut b);
    assert!(d.delete.is_empty());
    let ready = [
        pod("old", "n1", 10, "old", "Running", Some(20)),
        pod("new", "n1", 90, "new", "Running", Some(95)),
        pod("new2", "n1", 91, "new", "Running", None),
    ];
    let d = pods_should_be_on_node("n1", (true, true), Some(&ready), &c, &mut b);
    assert_eq!(d.delete, ["new2", "old"]);
}

#[test]
fn rolling_update_respects_max_unavailable() {
    let ds = rolling_ds(IntOrString::Int(2), IntOrString::Int(0));
    let mut map = NodeToPods::new();
    for i in 0..5 {
        let n = format!("n{i}");
        map.insert(
            n.clone(),
            vec![pod(&format!("p{i}"), &n, 10, "old", "Running", Some(20))],
        );
    }
    let c = ctx("new", false, 100);
    let step = rolling_update(&ds, &map, 5, |_| true, &c);
    assert_eq!(step.delete, ["p0", "p1"]);
    assert!(step.create.is_empty());
    // One new pod not yet available counts against the budget; a node without a pod too.
    map.insert(
        "n0".into(),
        vec![pod("q0", "n0", 90, "new", "Running", None)],
    );
    map.insert("n1".into(), vec![]);
    let step = rolling_update(&ds, &map, 5, |_| true, &c);
    assert!(step.delete.is_empty());
    // An unavailable old pod is always replaced.
    map.insert(
        "n2".into(),
        vec![pod("p2", "n2", 10, "old", "Running", None)],
    );
    let step = rolling_update(&ds, &map, 5, |_| true, &c);
    assert_eq!(step.delete, ["p2"]);
    // Percentages round up; 0 and 0 mean one at a time.
    let pct = rolling_ds(IntOrString::String("30%".into()), IntOrString::Int(0));
    assert_eq!(unavailable_count(&pct, 5), Some(2));
    let zero = rolling_ds(IntOrString::Int(0), IntOrString::Int(0));
    let mut all_old = NodeToPods::new();
    for i in 0..3 {
        let n = format!("n{i}");
        all_old.insert(
            n.clone(),
            vec![pod(&format!("p{i}"), &n, 10, "old", "Running", Some(20))],
        );
    }
    assert_eq!(
        rolling_update(&zero, &all_old, 3, |_| true, &c).delete,
        ["p0"]
    );
}

#[test]
fn rolling_update_with_surge_creates_before_deleting() {
    let ds = rolling_ds(IntOrString::Int(0), IntOrString::Int(1));
    assert!(allows_surge(&ds));
    let mut map = NodeToPods::new();
    for i in 0..3 {
        let n = format!("n{i}");
        map.insert(
            n.clone(),
            vec![pod(&format!("p{i}"), &n, 10, "old", "Running", Some(20))],
        );
    }
    let c = ctx("new", true, 100);
    let step = rolling_update(&ds, &map, 3, |_| true, &c);
    assert_eq!(step.create, ["n0"]);
    assert!(step.delete.is_empty());
    // The surged pod is not available yet: nothing else starts.
    map.entry("n0".into())
        .or_default()
        .push(pod("q0", "n0", 90, "new", "Running", None));
    let step = rolling_update(&ds, &map, 3, |_| true, &c);
    assert_eq!(step, RollingStep::default());
    // Available: the old one goes and the next node surges.
    map.insert(
        "n0".into(),
        vec![
            pod("p0", "n0", 10, "old", "Running", Some(20)),
            pod("q0", "n0", 90, "new", "Running", Some(95)),
        ],
    );
    let step = rolling_update(&ds, &map, 3, |_| true, &c);
    assert_eq!(step.delete, ["p0"]);
    assert_eq!(step.create, ["n1"]);
}

#[test]
fn status_counts_oldest_pod_per_node() {
    let mut map = NodeToPods::new();
    map.insert(
        "a".into(),
        vec![pod("a1", "a", 10, "new", "Running", Some(20))],
    );
    map.insert("b".into(), vec![pod("b1", "b", 10, "old", "Running", None)]);
    map.insert(
        "x".into(),
        vec![pod("x1", "x", 10, "new", "Running", Some(20))],
    );
    let mut c = ctx("new", false, 100);
    let nodes = [("a", true), ("b", true), ("c", true), ("x", false)];
    let s = status_counts(nodes.iter().copied(), &map, &c);
    assert_eq!(
        s,
        StatusCounts {
            desired: 3,
            current: 2,
            misscheduled: 1,
            ready: 1,
            updated: 1,
            available: 1,
            unavailable: 2,
        }
    );
    c.min_ready_seconds = 100;
    let s = status_counts(nodes.iter().copied(), &map, &c);
    assert_eq!((s.ready, s.available, s.unavailable), (1, 0, 3));
    let unscheduled = {
        let mut p = (*pod("u", "", 10, "new", "Pending", None)).clone();
        if let Some(s) = p.spec.as_mut() {
            s.node_name = None;
        }
        Arc::new(p)
    };
    let mut m = NodeToPods::new();
    m.insert("gone".into(), vec![unscheduled]);
    m.insert("a".into(), vec![pod("a1", "a", 10, "new", "Running", None)]);
    assert_eq!(unscheduled_pods_without_node(|n| n == "a", &m), ["u"]);
}
