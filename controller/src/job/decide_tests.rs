use super::*;
use crate::cached_pod::CachedPod;
use crate::job::counting::*;
use crate::job::indexed::*;
use crate::job::indexes::Intervals;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn job(spec: serde_json::Value) -> Job {
    let mut v = json!({
        "metadata": {"name": "pi", "namespace": "default", "uid": "job-uid"},
        "spec": {"template": {"metadata": {"labels": {"batch.kubernetes.io/job-name": "pi"}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}}
    });
    if let (Some(base), Some(extra)) = (v["spec"].as_object_mut(), spec.as_object()) {
        for (k, val) in extra {
            base.insert(k.clone(), val.clone());
        }
    }
    serde_json::from_value(v).expect("job")
}

fn pod(name: &str, phase: &str) -> CachedPod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "finalizers": [JOB_TRACKING_FINALIZER],
                     "creationTimestamp": "2026-12-04T10:00:00Z"},
        "status": {"phase": phase}
    }))
    .expect("pod")
}

fn exited(mut p: CachedPod, container: &str, code: i32, at: &str) -> CachedPod {
    p.status = Some(
        serde_json::from_value(json!({
            "phase": if code == 0 { "Succeeded" } else { "Failed" },
            "containerStatuses": [{"name": container, "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "finishedAt": at}}}]
        }))
        .expect("status"),
    );
    p
}

fn indexed(mut p: CachedPod, ix: i32) -> CachedPod {
    p.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(COMPLETION_INDEX_ANNOTATION.into(), ix.to_string());
    p
}

fn arcs(pods: Vec<CachedPod>) -> Vec<Arc<CachedPod>> {
    pods.into_iter().map(Arc::new).collect()
}

#[test]
fn backoff_doubles_from_ten_seconds_and_caps() {
    assert_eq!(backoff_for(1), SignedDuration::from_secs(10));
    assert_eq!(backoff_for(2), SignedDuration::from_secs(20));
    assert_eq!(backoff_for(6), SignedDuration::from_secs(320));
    assert_eq!(backoff_for(7), MAX_POD_FAILURE_BACKOFF);
    assert_eq!(backoff_for(50), MAX_POD_FAILURE_BACKOFF);
    let last = ts("2026-12-04T10:00:00Z");
    assert_eq!(
        remaining_backoff(2, Some(last), ts("2026-12-04T10:00:05Z")),
        SignedDuration::from_secs(15)
    );
    assert_eq!(
        remaining_backoff(2, Some(last), ts("2026-12-04T10:00:25Z")),
        SignedDuration::ZERO
    );
    assert_eq!(remaining_backoff(0, Some(last), last), SignedDuration::ZERO);
}

#[test]
fn backoff_record_counts_failures_after_the_last_success() {
    let f1 = exited(pod("a", "Failed"), "c", 1, "2026-12-04T10:00:01Z");
    let f2 = exited(pod("b", "Failed"), "c", 1, "2026-12-04T10:00:03Z");
    let s = exited(pod("c", "Succeeded"), "c", 0, "2026-12-04T10:00:02Z");
    let r = new_backoff_record(BackoffRecord::default(), &[], &[&f1]);
    assert_eq!(r.failures_after_last_success, 1);
    let r = new_backoff_record(r, &[], &[&f2]);
    assert_eq!(r.failures_after_last_success, 2);
    assert_eq!(r.last_failure_time, Some(ts("2026-12-04T10:00:03Z")));
    // A success resets the count to the failures after it.
    let r = new_backoff_record(r, &[&s], &[&f1, &f2]);
    assert_eq!(r.failures_after_last_success, 1);
    let r = new_backoff_record(r, &[&s], &[]);
    assert_eq!(r, BackoffRecord::default());
}

#[test]
fn finished_time_prefers_container_exits() {
    let p = exited(pod("a", "Failed"), "c", 1, "2026-12-04T10:00:07Z");
    assert_eq!(finished_time(&p), ts("2026-12-04T10:00:07Z"));
    assert_eq!(
        finished_time(&pod("b", "Failed")),
        ts("2026-12-04T10:00:00Z")
    );
}

#[test]
fn deleted_pods_count_as_failed_unless_only_failed_pods_are_replaced() {
    let j = job(json!({}));
    let mut p = pod("a", "Running");
    p.metadata.deletion_timestamp = Some(Time(ts("2026-12-04T10:00:00Z")));
    assert!(is_pod_failed(&p, &j));
    let strict = job(json!({"podReplacementPolicy": "Failed"}));
    assert!(!is_pod_failed(&p, &strict));
    assert!(is_pod_failed(&pod("b", "Failed"), &strict));
}

#[test]
fn pod_failure_policy_rules_match_in_order() {
    let j = job(json!({"podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [42]}}
    ]}}));
    let policy = j.spec.as_ref().and_then(|s| s.pod_failure_policy.as_ref());
    let fatal = exited(pod("a", "Failed"), "c", 42, "2026-12-04T10:00:01Z");
    let m = match_pod_failure_policy(policy, &fatal);
    assert_eq!(
        m.fail_job.as_deref(),
        Some("Container c for pod default/a failed with exit code 42 matching FailJob rule at index 1")
    );
    assert_eq!(fail_job_message(&j, &arcs(vec![fatal])), m.fail_job);
    let other = exited(pod("b", "Failed"), "c", 3, "2026-12-04T10:00:01Z");
    let m = match_pod_failure_policy(policy, &other);
    assert_eq!((m.count_failed, m.action.as_deref()), (true, Some("Count")));
    let mut disrupted = other.clone();
    if let Some(s) = disrupted.status.as_mut() {
        s.conditions =
            serde_json::from_value(json!([{"type": "DisruptionTarget", "status": "True"}])).ok();
    }
    let m = match_pod_failure_policy(policy, &disrupted);
    assert!(!m.count_failed);
    assert_eq!(counted_failures(&j, &[&disrupted, &other]), 1);
}

#[test]
fn wanted_pods_follow_completions_and_parallelism() {
    let j = job(json!({"completions": 5, "parallelism": 2}));
    assert_eq!(want_active(&j, 0, 0), 2);
    assert_eq!(want_active(&j, 4, 2), 1);
    assert_eq!(want_active(&j, 6, 0), 0);
    let queue = job(json!({"parallelism": 3}));
    assert_eq!(want_active(&queue, 0, 1), 3);
    assert_eq!(want_active(&queue, 1, 2), 2, "after a success, nothing new");
}

#[test]
fn pending_indexes_skip_done_failed_and_busy() {
    let done = Intervals::parse("0,2", 6);
    let failed = Intervals::parse("4", 6);
    let busy: BTreeSet<i32> = [1].into();
    assert_eq!(
        first_pending_indexes(5, 6, &done, Some(&failed), &busy),
        vec![3, 5]
    );
    assert_eq!(first_pending_indexes(1, 6, &done, None, &busy), vec![3]);
}

#[test]
fn pending_indexes_agree_with_a_plain_walk_and_never_walk_completions() {
    let plain =
        |count: usize, n: i32, done: &Intervals, failed: &Intervals, busy: &BTreeSet<i32>| {
            (0..n)
                .filter(|i| !done.has(*i) && !failed.has(*i) && !busy.contains(i))
                .take(count)
                .collect::<Vec<i32>>()
        };
    // Every set of done indexes below 8, against a few failed and busy sets.
    for bits in 0u32..256 {
        let done = Intervals::default().with((0..8).filter(|i| bits & (1 << i) != 0));
        for failed in ["", "3", "1-2,6"] {
            let failed = Intervals::parse(failed, 9);
            for busy in [BTreeSet::new(), BTreeSet::from([0, 5, 8])] {
                for count in [1, 3, 9] {
                    assert_eq!(
                        first_pending_indexes(count, 9, &done, Some(&failed), &busy),
                        plain(count, 9, &done, &failed, &busy),
                        "{done:?} {failed:?} {busy:?} {count}"
                    );
                }
            }
        }
    }
    // All but the last of 2^31 - 1 done, in one interval: found at once.
    let n = i32::MAX;
    let done = Intervals::parse(&format!("0-{}", n - 2), n);
    assert_eq!(
        first_pending_indexes(5, n, &done, None, &BTreeSet::new()),
        vec![n - 1]
    );
}

#[test]
fn duplicate_and_invalid_index_pods_are_removed() {
    let pods = arcs(vec![
        indexed(pod("a", "Running"), 0),
        indexed(pod("b", "Running"), 0),
        indexed(pod("c", "Running"), 7),
        pod("d", "Running"),
        indexed(pod("e", "Running"), 1),
    ]);
    let (rm, left) = duplicated_index_pods(&pods, 3);
    let names = |v: &[Arc<CachedPod>]| {
        let mut n: Vec<String> = v.iter().filter_map(|p| p.metadata.name.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(names(&rm), ["b", "c", "d"]);
    assert_eq!(names(&left), ["a", "e"]);
}

#[test]
fn indexed_pods_carry_their_index() {
    let j = job(json!({"completionMode": "Indexed", "completions": 3}));
    let owner = crate::replication::claim::controller_ref("batch/v1", "Job", "pi", "job-uid");
    let p = pod_for_job(&j, owner.clone(), Some(2), None);
    assert_eq!(p.metadata.generate_name.as_deref(), Some("pi-2-"));
    let ann = p.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(ann[COMPLETION_INDEX_ANNOTATION], "2");
    let labels = p.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels[COMPLETION_INDEX_ANNOTATION], "2");
    assert_eq!(labels["batch.kubernetes.io/job-name"], "pi");
    let spec = p.spec.clone().unwrap_or_default();
    assert_eq!(spec.hostname.as_deref(), Some("pi-2"));
    let env = spec.containers[0].env.clone().unwrap_or_default();
    assert_eq!(env[0].name, JOB_COMPLETION_INDEX_ENV);
    assert_eq!(
        p.metadata.finalizers,
        Some(vec![JOB_TRACKING_FINALIZER.to_string()])
    );
    assert_eq!(p.metadata.owner_references, Some(vec![owner.clone()]));
    let plain = pod_for_job(&job(json!({})), owner, None, None);
    assert_eq!(plain.metadata.generate_name.as_deref(), Some("pi-"));
    assert!(plain.spec.unwrap_or_default().hostname.is_none());
    assert_eq!(generate_name(&"x".repeat(70), Some(12)).len(), 58);
}

#[test]
fn success_policy_rules() {
    let j = job(
        json!({"completionMode": "Indexed", "completions": 10, "successPolicy": {"rules": [
            {"succeededIndexes": "0-2"},
            {"succeededCount": 5}
        ]}}),
    );
    let policy = j.spec.as_ref().and_then(|s| s.success_policy.as_ref());
    assert_eq!(
        match_success_policy(policy, 10, &Intervals::parse("0-1,5", 10)),
        None
    );
    assert_eq!(
        match_success_policy(policy, 10, &Intervals::parse("0-2", 10)).as_deref(),
        Some("Matched rules at index 0")
    );
    assert_eq!(
        match_success_policy(policy, 10, &Intervals::parse("3-7", 10)).as_deref(),
        Some("Matched rules at index 1")
    );
}

#[test]
fn index_failure_counts_pass_to_the_replacement() {
    let j = job(json!({"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1}));
    let mut first = indexed(
        exited(pod("a", "Failed"), "c", 1, "2026-12-04T10:00:01Z"),
        0,
    );
    assert!(!is_index_failed(&j, &first), "first failure: retried");
    assert_eq!(index_failure_annotations(&j, Some(&first)), (1, 0));
    first
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(INDEX_FAILURE_COUNT_ANNOTATION.into(), "1".into());
    assert!(is_index_failed(&j, &first), "second failure: index failed");
    let failed = failed_indexes(&j, &arcs(vec![first]), &BTreeSet::new());
    assert_eq!(failed.to_string(), "0");
}

#[test]
fn counting_plans_uncounted_pods_then_finalizer_removal() {
    let j = job(json!({"completions": 3}));
    let pods = arcs(vec![
        exited(pod("a", "Succeeded"), "c", 0, "2026-12-04T10:00:01Z"),
        exited(pod("b", "Failed"), "c", 1, "2026-12-04T10:00:01Z"),
        pod("c", "Running"),
    ]);
    let none = BTreeSet::new();
    let prev = Intervals::default();
    let delayed = BTreeMap::new();
    let input = CountInput {
        job: &j,
        pods: &pods,
        uncounted_succeeded: &none,
        uncounted_failed: &none,
        expected_rm: &none,
        failing: false,
        finishing: false,
        prev_succeeded: &prev,
        delayed: &delayed,
    };
    let plan = plan_counting(&input);
    assert_eq!(plan.succeeded, ["uid-a"]);
    assert_eq!(plan.failed, ["uid-b"]);
    assert_eq!(
        plan.unfinalize.len(),
        2,
        "the running pod keeps its finalizer"
    );
    // A failing Job counts its running pods as failed too.
    let plan = plan_counting(&CountInput {
        failing: true,
        finishing: true,
        ..input
    });
    assert_eq!(plan.failed, ["uid-b", "uid-c"]);

    // After the finalizers went, the uncounted UIDs move into the counters.
    let mut counted = j.clone();
    counted.status = serde_json::from_value(json!({"succeeded": 1,
        "uncountedTerminatedPods": {"succeeded": ["uid-a"], "failed": ["uid-b"]}}))
    .ok();
    let still: BTreeSet<String> = ["uid-b".to_string()].into();
    assert!(clean_uncounted(&mut counted, &still));
    let st = counted.status.unwrap_or_default();
    assert_eq!((st.succeeded, st.failed), (Some(2), None));
    let left = st.uncounted_terminated_pods.unwrap_or_default();
    assert_eq!(
        (left.succeeded, left.failed),
        (None, Some(vec!["uid-b".to_string()]))
    );
}

#[test]
fn conditions_are_replaced_only_on_change() {
    let now = ts("2026-12-04T10:00:00Z");
    let later = ts("2026-12-04T10:01:00Z");
    let mut list = Vec::new();
    assert!(!ensure_condition(
        &mut list,
        "Suspended",
        "False",
        "JobResumed",
        "Job resumed",
        now
    ));
    assert!(ensure_condition(
        &mut list,
        "Suspended",
        "True",
        "JobSuspended",
        "Job suspended",
        now
    ));
    assert!(!ensure_condition(
        &mut list,
        "Suspended",
        "True",
        "JobSuspended",
        "Job suspended",
        later
    ));
    assert!(ensure_condition(
        &mut list,
        "Suspended",
        "False",
        "JobResumed",
        "Job resumed",
        later
    ));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].last_transition_time, Some(Time(later)));
}

#[test]
fn deadline_and_restart_limits() {
    let mut j = job(json!({"activeDeadlineSeconds": 30, "backoffLimit": 2}));
    j.status = serde_json::from_value(json!({"startTime": "2026-12-04T10:00:00Z"})).ok();
    assert_eq!(
        until_active_deadline(&j, ts("2026-12-04T10:00:10Z")),
        Some(SignedDuration::from_secs(20))
    );
    let mut on_failure = job(json!({"backoffLimit": 2}));
    if let Some(s) = on_failure
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        s.restart_policy = Some("OnFailure".into());
    }
    let mut running = pod("a", "Running");
    running.status = serde_json::from_value(json!({"phase": "Running", "containerStatuses": [
        {"name": "c", "image": "", "imageID": "", "ready": true, "restartCount": 2}]}))
    .ok();
    assert!(past_backoff_limit_on_failure(
        &on_failure,
        &arcs(vec![running.clone()])
    ));
    assert!(!past_backoff_limit_on_failure(&j, &arcs(vec![running])));
}
