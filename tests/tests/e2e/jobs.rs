//! The Job and TTL-after-finished controllers against a Sandbox with a fake node whose pods exit
//! after a short `run-for`: NonIndexed and Indexed Jobs complete (finalizers removed, every pod
//! counted once), failing pods hit the back-off limit (the back-off measured on a fake clock the
//! test moves), a pod failure policy fails the Job at once, the active deadline, suspend and
//! resume, per-index back-off and the success policy end Indexed Jobs, a TTL of 0 deletes the
//! finished Job, the pods of a deleted Job lose their finalizer, and `kubectl create job` works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use tests::eventually;

use minik8s::client::{Api, ListParams, Patch};
use minik8s::k8s_openapi::api::batch::v1::Job;
use minik8s::k8s_openapi::api::core::v1::{Event, Pod};
use serde_json::json;

const FINALIZER: &str = "batch.kubernetes.io/job-tracking";

async fn sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .start()
        .await
        .unwrap()
}

/// A Job whose pods run for `run_for` and exit with `exit_code`.
fn job(name: &str, spec: serde_json::Value, run_for: &str, exit_code: i32) -> Job {
    let mut v = json!({
        "metadata": {"name": name},
        "spec": {"template": {
            "metadata": {"annotations": {
                "kubelet-fake.minik8s.io/run-for": run_for,
                "kubelet-fake.minik8s.io/exit-code": exit_code.to_string()
            }},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
        }}
    });
    for (k, val) in spec.as_object().cloned().unwrap_or_default() {
        v["spec"][k] = val;
    }
    serde_json::from_value(v).unwrap()
}

fn condition<'a>(
    job: &'a Job,
    type_: &str,
) -> Option<&'a minik8s::k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

async fn finished(jobs: &Api<Job>, name: &str, type_: &str) -> Job {
    eventually(&format!("job {name} {type_}"), || async {
        let j = jobs.get(name).await.ok()?;
        condition(&j, type_).is_some().then_some(j)
    })
    .await
}

async fn pods_of(pods: &Api<Pod>, job: &str) -> Vec<Pod> {
    let lp = ListParams {
        label_selector: Some(format!("batch.kubernetes.io/job-name={job}")),
        ..Default::default()
    };
    pods.list(&lp).await.unwrap().items
}

/// Whether an event with `reason` is recorded in `default`, waiting for it with a deadline: events
/// are written by the controller's broadcaster after the status the test saw.
async fn has_event(client: &minik8s::client::Client, reason: &str) -> bool {
    let events: Api<Event> = client.api(Some("default"));
    eventually(&format!("a {reason} event"), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some(reason))
            .then_some(true)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_completes_with_every_pod_counted_and_unfinalized() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    jobs.create(&job(
        "three",
        json!({"completions": 3, "parallelism": 2}),
        "100ms",
        0,
    ))
    .await
    .unwrap();
    let done = finished(&jobs, "three", "Complete").await;
    let status = done.status.clone().unwrap();
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.failed.unwrap_or(0), 0);
    assert_eq!(status.active.unwrap_or(0), 0);
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    // 1.33: the interim condition comes first.
    let types: Vec<&str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, ["SuccessCriteriaMet", "Complete"]);
    let complete = condition(&done, "Complete").unwrap();
    assert_eq!(complete.reason.as_deref(), Some("CompletionsReached"));
    let uncounted = status.uncounted_terminated_pods.unwrap_or_default();
    assert!(uncounted.succeeded.unwrap_or_default().is_empty());

    let all = eventually("finalizers removed", || async {
        let all = pods_of(&pods, "three").await;
        all.iter()
            .all(|p| {
                !p.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == FINALIZER)
            })
            .then_some(all)
    })
    .await;
    assert_eq!(all.len(), 3, "one pod per completion");
    for p in &all {
        let name = p.metadata.name.clone().unwrap();
        assert!(name.starts_with("three-"), "{name}");
        let owner = &p.metadata.owner_references.clone().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
        let labels = p.metadata.labels.clone().unwrap();
        assert_eq!(
            labels["batch.kubernetes.io/controller-uid"],
            done.metadata.uid.clone().unwrap()
        );
        assert_eq!(labels["job-name"], "three");
    }
    assert!(has_event(&client, "SuccessfulCreate").await);
    assert!(has_event(&client, "Completed").await);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_job_completes_every_index() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    let spec = json!({"completions": 10, "parallelism": 3, "completionMode": "Indexed"});
    jobs.create(&job("idx", spec, "100ms", 0)).await.unwrap();
    let done = finished(&jobs, "idx", "Complete").await;
    let status = done.status.unwrap();
    assert_eq!(status.completed_indexes.as_deref(), Some("0-9"));
    assert_eq!(status.succeeded, Some(10));
    let mut indexes: Vec<String> = pods_of(&pods, "idx")
        .await
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
        .map(|p| {
            let ix = p.metadata.annotations.clone().unwrap()
                ["batch.kubernetes.io/job-completion-index"]
                .clone();
            let spec = p.spec.clone().unwrap();
            assert_eq!(spec.hostname, Some(format!("idx-{ix}")));
            assert!(p
                .metadata
                .name
                .clone()
                .unwrap()
                .starts_with(&format!("idx-{ix}-")));
            ix
        })
        .collect();
    indexes.sort_by_key(|i| i.parse::<i32>().unwrap());
    indexes.dedup();
    assert_eq!(indexes.len(), 10, "{indexes:?}");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_pods_back_off_then_exceed_the_backoff_limit() {
    let clock = controller::clock::FakeClock::new(minik8s::k8s_openapi::jiff::Timestamp::now());
    let cm_clock = clock.clone();
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .configure(move |c| {
            c.controller_manager.clock = cm_clock;
            c.controller_manager.controllers =
                controller::EnabledControllers::parse("job,scheduler,nodelifecycle").unwrap();
        })
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    jobs.create(&job("flaky", json!({"backoffLimit": 1}), "100ms", 1))
        .await
        .unwrap();
    // The first failure is counted; the replacement waits for the back-off (10 s on the clock).
    eventually("the first failure counted", || async {
        let s = jobs.get("flaky").await.ok()?.status?;
        (s.failed == Some(1) && s.active.unwrap_or(0) == 0).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        pods_of(&pods, "flaky").await.len(),
        1,
        "no pod before the back-off"
    );

    clock.advance(minik8s::k8s_openapi::jiff::SignedDuration::from_secs(30));
    let touch = json!({"metadata": {"labels": {"touched": "1"}}});
    jobs.patch("flaky", &Patch::Merge(touch)).await.unwrap();
    let failed = finished(&jobs, "flaky", "Failed").await;
    let cond = condition(&failed, "Failed").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(
        cond.message.as_deref(),
        Some("Job has reached the specified backoff limit")
    );
    assert!(condition(&failed, "FailureTarget").is_some());
    let status = failed.status.unwrap();
    assert_eq!(status.failed, Some(2));
    assert!(status.completion_time.is_none());
    assert_eq!(pods_of(&pods, "flaky").await.len(), 2);
    assert!(has_event(&client, "BackoffLimitExceeded").await);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_job_rule_and_the_active_deadline_fail_the_job() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    let policy = json!({"backoffLimit": 6, "podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}
    ]}});
    jobs.create(&job("fatal", policy, "100ms", 42))
        .await
        .unwrap();
    let deadline = json!({"activeDeadlineSeconds": 1, "parallelism": 2, "completions": 2});
    jobs.create(&job("slow", deadline, "1h", 0)).await.unwrap();

    let failed = finished(&jobs, "fatal", "Failed").await;
    let cond = condition(&failed, "Failed").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("PodFailurePolicy"));
    let msg = cond.message.clone().unwrap();
    assert!(
        msg.contains("failed with exit code 42 matching FailJob rule at index 0"),
        "{msg}"
    );
    assert_eq!(failed.status.unwrap().failed, Some(1));

    let slow = finished(&jobs, "slow", "Failed").await;
    let cond = condition(&slow, "Failed").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        cond.message.as_deref(),
        Some("Job was active longer than specified deadline")
    );
    let status = slow.status.unwrap();
    assert_eq!((status.active, status.terminating), (Some(0), Some(0)));
    assert_eq!(status.failed, Some(2), "the running pods count as failed");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspending_deletes_the_pods_and_resuming_recreates_them() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    let spec = json!({"parallelism": 2, "completions": 4, "suspend": true});
    jobs.create(&job("nap", spec, "1h", 0)).await.unwrap();
    let j = eventually("Suspended", || async {
        let j = jobs.get("nap").await.ok()?;
        condition(&j, "Suspended").is_some().then_some(j)
    })
    .await;
    let cond = condition(&j, "Suspended").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("JobSuspended"));
    assert!(j.status.unwrap().start_time.is_none(), "never started");
    assert!(pods_of(&pods, "nap").await.is_empty());

    let set = |on: bool| Patch::Merge(json!({"spec": {"suspend": on}}));
    jobs.patch("nap", &set(false)).await.unwrap();
    let j = eventually("resumed with 2 active", || async {
        let j = jobs.get("nap").await.ok()?;
        let c = j
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Suspended")?
            .clone();
        (c.status == "False" && j.status.as_ref()?.active == Some(2)).then_some((j, c))
    })
    .await;
    assert_eq!(j.1.reason.as_deref(), Some("JobResumed"));
    assert!(j.0.status.unwrap().start_time.is_some());
    assert!(has_event(&client, "Resumed").await);

    jobs.patch("nap", &set(true)).await.unwrap();
    eventually("suspended again, pods gone", || async {
        let j = jobs.get("nap").await.ok()?;
        let active = j.status.as_ref()?.active.unwrap_or(0);
        let gone = pods_of(&pods, "nap").await.is_empty();
        (condition(&j, "Suspended").is_some() && active == 0 && gone).then_some(())
    })
    .await;
    assert!(has_event(&client, "SuccessfulDelete").await);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_with_ttl_zero_is_deleted() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    jobs.create(&job(
        "brief",
        json!({"ttlSecondsAfterFinished": 0}),
        "100ms",
        0,
    ))
    .await
    .unwrap();
    eventually("the finished Job deleted", || async {
        match jobs.get("brief").await {
            Err(e) if e.is_not_found() => Some(()),
            _ => None,
        }
    })
    .await;
    eventually("its pods collected", || async {
        pods_of(&pods, "brief").await.is_empty().then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_job_completes() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let out = tokio::task::spawn_blocking(move || {
        k.ok(&["create", "job", "pi", "--image=busybox", "--", "echo", "hi"])
    })
    .await
    .unwrap();
    assert!(out.contains("job.batch/pi created"), "{out}");
    let done = finished(&jobs, "pi", "Complete").await;
    assert_eq!(done.status.unwrap().succeeded, Some(1));
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let table = tokio::task::spawn_blocking(move || k.ok(&["get", "job", "pi"]))
        .await
        .unwrap();
    assert!(
        table.contains("Complete") && table.contains("1/1"),
        "{table}"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_of_a_deleted_job_lose_their_finalizer() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    let pods: Api<Pod> = client.api(Some("default"));
    jobs.create(&job(
        "left",
        json!({"parallelism": 2, "completions": 2}),
        "1h",
        0,
    ))
    .await
    .unwrap();
    eventually("2 active pods with the finalizer", || async {
        let all = pods_of(&pods, "left").await;
        let tracked = all
            .iter()
            .filter(|p| {
                p.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == FINALIZER)
            })
            .count();
        (tracked == 2).then_some(())
    })
    .await;
    let orphan = minik8s::client::DeleteParams {
        propagation_policy: Some(minik8s::client::PropagationPolicy::Orphan),
        ..Default::default()
    };
    jobs.delete("left", &orphan).await.unwrap();
    eventually("orphaned pods without the finalizer", || async {
        let all = pods_of(&pods, "left").await;
        let freed = all.iter().all(|p| {
            p.metadata
                .owner_references
                .as_ref()
                .is_none_or(|r| r.is_empty())
                && !p
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == FINALIZER)
        });
        (all.len() == 2 && freed).then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_index_back_off_and_the_success_policy_end_indexed_jobs() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let jobs: Api<Job> = client.api(Some("default"));
    // Every index fails at its first failure: the Job fails with all indexes failed.
    let per_index = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3,
                           "backoffLimitPerIndex": 0});
    jobs.create(&job("fragile", per_index, "100ms", 1))
        .await
        .unwrap();
    // Index 0 succeeding is enough: the Job completes without running the other indexes.
    let policy = json!({"completionMode": "Indexed", "completions": 5, "parallelism": 1,
                        "successPolicy": {"rules": [{"succeededIndexes": "0"}]}});
    jobs.create(&job("leader", policy, "100ms", 0))
        .await
        .unwrap();

    let failed = finished(&jobs, "fragile", "Failed").await;
    let cond = condition(&failed, "Failed").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("FailedIndexes"));
    assert_eq!(cond.message.as_deref(), Some("Job has failed indexes"));
    let status = failed.status.unwrap();
    assert_eq!(status.failed_indexes.as_deref(), Some("0-2"));
    assert_eq!(status.failed, Some(3));

    let done = finished(&jobs, "leader", "Complete").await;
    let cond = condition(&done, "Complete").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("SuccessPolicy"));
    assert_eq!(cond.message.as_deref(), Some("Matched rules at index 0"));
    let status = done.status.unwrap();
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    assert_eq!(status.succeeded, Some(1));
    sandbox.stop().await;
}

/// Regression: finished pods kept their addresses, so a node's /24 (253 usable addresses) ran out
/// after about 250 completions and the Job's later pods waited for an address forever
/// (`minik8s bench job` with 1,000 completions never completed). A finished pod's address goes
/// back to the node's pool, as a kubelet's sandbox teardown frees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_runs_more_finished_pods_than_its_cidr_has_addresses() {
    let sandbox = sandbox().await;
    let jobs: Api<Job> = sandbox.client().api(Some("default"));
    let spec = json!({"completions": 300, "parallelism": 50});
    jobs.create(&job("many", spec, "0s", 0)).await.unwrap();
    let done = finished(&jobs, "many", "Complete").await;
    assert_eq!(done.status.and_then(|s| s.succeeded), Some(300));
}
