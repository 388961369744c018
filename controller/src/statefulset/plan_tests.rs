//! Tests of the sync's decisions ([`super::plan`]).
#![allow(clippy::unwrap_used)]

use super::*;
use crate::cached_pod::CachedPod;
use crate::pod_util::testing::{ready_at, ts, with_phase};
use crate::statefulset::identity::tests::set;
use crate::statefulset::identity::{new_versioned_pod, REVISION_LABEL};
use k8s_openapi::api::apps::v1::{RollingUpdateStatefulSetStrategy, StatefulSetUpdateStrategy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const CUR: &str = "web-aaa";
const UPD: &str = "web-bbb";

/// A pod of `s` at `revision`, in `phase`, ready when Running.
fn pod(s: &StatefulSet, ordinal: i32, revision: &str, phase: &str) -> Arc<CachedPod> {
    let mut p = CachedPod::from(new_versioned_pod(s, s, revision, revision, ordinal));
    p.metadata.uid = Some(format!("uid-{ordinal}"));
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(REVISION_LABEL.into(), revision.into());
    let mut p = with_phase(p, phase);
    if phase == "Running" {
        p = ready_at(p, Some(ts(0)));
    }
    Arc::new(p)
}

fn run(s: &StatefulSet, update: &StatefulSet, pods: &[Arc<CachedPod>]) -> Plan {
    let none = |_: &str| None;
    plan(&Snapshot {
        set: s,
        current_set: s,
        update_set: update,
        current_revision: CUR,
        update_revision: UPD,
        collision_count: 0,
        pods,
        claim: &none,
        now: ts(100),
    })
}

fn summary(p: &Plan) -> Vec<String> {
    p.steps
        .iter()
        .map(|s| match s {
            Step::Create { view, .. } => {
                format!("create {}", view.metadata.name.as_deref().unwrap())
            }
            Step::CreateClaims(p) => format!("claims {}", p.metadata.name.as_deref().unwrap()),
            Step::Update(p) => format!("update {}", p.metadata.name.as_deref().unwrap()),
            Step::FixClaims(p) => format!("fixclaims {}", p.metadata.name.as_deref().unwrap()),
            Step::Delete(p, why) => {
                format!("delete {} {why:?}", p.metadata.name.as_deref().unwrap())
            }
        })
        .collect()
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_in_order() {
    let s = set(3, "nginx:1");
    assert_eq!(summary(&run(&s, &s, &[])), ["create web-0"]);
    let p0 = pod(&s, 0, UPD, "Running");
    assert_eq!(
        summary(&run(&s, &s, std::slice::from_ref(&p0))),
        ["create web-1"]
    );
    // web-1 not ready yet: create its missing claims, and wait.
    let p1 = pod(&s, 1, UPD, "Pending");
    assert_eq!(summary(&run(&s, &s, &[p0.clone(), p1])), ["claims web-1"]);
    // A gap below is filled before anything above.
    let p2 = pod(&s, 2, UPD, "Running");
    assert_eq!(summary(&run(&s, &s, &[p0, p2])), ["create web-1"]);
}

#[test]
fn parallel_creates_and_deletes_everything_at_once() {
    let mut s = set(3, "nginx:1");
    s.spec.as_mut().unwrap().pod_management_policy = Some("Parallel".into());
    let p = run(&s, &s, &[]);
    assert!(!p.monotonic);
    assert_eq!(
        summary(&p),
        ["create web-0", "create web-1", "create web-2"]
    );
    s.spec.as_mut().unwrap().replicas = Some(1);
    let pods: Vec<_> = (0..3).map(|i| pod(&s, i, UPD, "Pending")).collect();
    assert_eq!(
        summary(&run(&s, &s, &pods)),
        [
            "claims web-0",
            "delete web-2 ScaleDown",
            "delete web-1 ScaleDown"
        ]
    );
}

#[test]
fn scale_down_removes_the_highest_ordinal_first_and_waits_for_it() {
    let s = set(1, "nginx:1");
    let pods: Vec<_> = (0..3).map(|i| pod(&s, i, UPD, "Running")).collect();
    assert_eq!(summary(&run(&s, &s, &pods)), ["delete web-2 ScaleDown"]);
    let mut terminating = (*pods[2]).clone();
    terminating.metadata.deletion_timestamp = Some(Time(ts(50)));
    let plan = run(
        &s,
        &s,
        &[pods[0].clone(), pods[1].clone(), Arc::new(terminating)],
    );
    assert!(plan.steps.is_empty(), "waits for web-2 to go");
    // An unhealthy replica halts scale-down too.
    let sick = pod(&s, 0, UPD, "Pending");
    assert_eq!(
        summary(&run(&s, &s, &[sick, pods[1].clone(), pods[2].clone()])),
        ["claims web-0"]
    );
}

#[test]
fn a_failed_pod_is_replaced() {
    let s = set(2, "nginx:1");
    let pods = [pod(&s, 0, UPD, "Failed"), pod(&s, 1, UPD, "Running")];
    assert_eq!(summary(&run(&s, &s, &pods)), ["delete web-0 Finished"]);
}

#[test]
fn rolling_update_goes_down_from_the_top_and_honours_the_partition() {
    let mut s = set(3, "nginx:2");
    s.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateStatefulSetStrategy {
            partition: Some(1),
            max_unavailable: None,
        }),
    });
    let old: Vec<_> = (0..3).map(|i| pod(&s, i, CUR, "Running")).collect();
    let p = run(&s, &s, &old);
    assert_eq!(summary(&p), ["delete web-2 Update"]);
    assert_eq!(p.status.current_replicas, Some(3));
    assert_eq!(p.status.updated_replicas, Some(0));
    // web-2 updated but not ready yet: wait.
    let pending = pod(&s, 2, UPD, "Pending");
    assert_eq!(
        summary(&run(&s, &s, &[old[0].clone(), old[1].clone(), pending])),
        ["claims web-2"]
    );
    // web-2 updated and ready: web-1 next; web-0 stays below the partition.
    let new2 = pod(&s, 2, UPD, "Running");
    assert_eq!(
        summary(&run(
            &s,
            &s,
            &[old[0].clone(), old[1].clone(), new2.clone()]
        )),
        ["delete web-1 Update"]
    );
    let new1 = pod(&s, 1, UPD, "Running");
    let p = run(&s, &s, &[old[0].clone(), new1, new2]);
    assert!(p.steps.is_empty());
    assert_eq!(
        (p.status.current_replicas, p.status.updated_replicas),
        (Some(1), Some(2))
    );
}

#[test]
fn on_delete_never_deletes_for_an_update() {
    let mut s = set(2, "nginx:2");
    s.spec.as_mut().unwrap().update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    });
    let old: Vec<_> = (0..2).map(|i| pod(&s, i, CUR, "Running")).collect();
    assert!(run(&s, &s, &old).steps.is_empty());
}

#[test]
fn status_counts_and_the_rolling_update_completes() {
    let s = set(2, "nginx:1");
    let pods = [pod(&s, 0, UPD, "Running"), pod(&s, 1, UPD, "Running")];
    let mut p = run(&s, &s, &pods);
    assert_eq!(p.status.replicas, 2);
    assert_eq!(p.status.ready_replicas, Some(2));
    assert_eq!(p.status.available_replicas, Some(2));
    assert_eq!(p.status.updated_replicas, Some(2));
    assert_eq!(p.status.current_replicas, Some(0));
    assert_eq!(p.status.observed_generation, Some(1));
    complete_rolling_update(&s, &mut p.status);
    assert_eq!(p.status.current_revision.as_deref(), Some(UPD));
    assert_eq!(p.status.current_replicas, Some(2));
    assert!(inconsistent_status(&s, &p.status));
    let mut written = s.clone();
    written.status = Some(p.status.clone());
    assert!(!inconsistent_status(&written, &p.status));
}

#[test]
fn min_ready_seconds_holds_the_next_pod() {
    let mut s = set(2, "nginx:1");
    s.spec.as_mut().unwrap().min_ready_seconds = Some(200);
    let p0 = pod(&s, 0, UPD, "Running"); // ready at 0, now is 100
    assert!(run(&s, &s, &[p0]).steps.is_empty());
}

#[test]
fn a_huge_set_builds_only_the_pods_one_sync_creates() {
    let mut s = set(i32::MAX, "nginx:1");
    // OrderedReady: the first missing ordinal only.
    assert_eq!(summary(&run(&s, &s, &[])), ["create web-0"]);
    // Parallel: at most MAX_CREATES_PER_SYNC, lowest ordinals first, around the pods found.
    s.spec.as_mut().unwrap().pod_management_policy = Some("Parallel".into());
    let p1 = pod(&s, 1, UPD, "Running");
    let plan = run(&s, &s, std::slice::from_ref(&p1));
    let steps = summary(&plan);
    assert_eq!(steps.len(), MAX_CREATES_PER_SYNC);
    assert_eq!(&steps[..2], ["create web-0", "create web-2"]);
    assert_eq!(
        steps.last().map(String::as_str),
        Some(format!("create web-{MAX_CREATES_PER_SYNC}").as_str())
    );
    assert_eq!(plan.status.replicas, 1);
}
