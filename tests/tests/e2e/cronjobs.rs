//! The CronJob controller against a Sandbox, on a fake clock that the test moves: a due schedule
//! time starts its Job (named by the minute, owned by the CronJob, in `status.active`), a finished
//! Job leaves the active list and sets `lastSuccessfulTime`, `Forbid` holds the next run while one
//! is active (and starts it once that one finished), and `kubectl create job --from=cronjob/...` works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use minik8s::client::{Api, Patch};
use minik8s::k8s_openapi::api::batch::v1::{CronJob, Job};
use minik8s::k8s_openapi::api::core::v1::Event;

async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A change to the CronJob, so the controller syncs it now (the fake clock does not fire its timer).
async fn touch(cronjobs: &Api<CronJob>, n: u32) {
    let patch = serde_json::json!({"metadata": {"labels": {"touched": n.to_string()}}});
    cronjobs.patch("tick", &Patch::Merge(patch)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_schedule_starts_its_job_and_a_finished_job_is_seen() {
    let clock = controller::clock::FakeClock::new(minik8s::k8s_openapi::jiff::Timestamp::now());
    let cm_clock = clock.clone();
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .nodes(0)
        .configure(move |c| {
            c.controller_manager.clock = cm_clock;
            c.controller_manager.controllers =
                controller::EnabledControllers::parse("cronjob").unwrap();
        })
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let cronjobs: Api<CronJob> = client.api(Some("default"));
    let jobs: Api<Job> = client.api(Some("default"));
    let cj: CronJob = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"
            }}}}
        }
    }))
    .unwrap();
    let created = cronjobs.create(&cj).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();

    // Nothing is due before the next minute boundary.
    touch(&cronjobs, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(jobs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .is_empty());

    clock.advance(minik8s::k8s_openapi::jiff::SignedDuration::from_secs(61));
    touch(&cronjobs, 2).await;
    let job = eventually("the scheduled Job", || async {
        jobs.list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .next()
    })
    .await;
    let name = job.metadata.name.clone().unwrap();
    assert!(name.starts_with("tick-"), "{name}");
    let owner = &job.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("CronJob", uid.as_str())
    );
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key("batch.kubernetes.io/cronjob-scheduled-timestamp"));
    let cj = eventually("the Job in status.active", || async {
        let cj = cronjobs.get("tick").await.unwrap();
        let active = cj.status.as_ref()?.active.clone()?;
        (active.len() == 1 && active[0].name.as_deref() == Some(name.as_str())).then_some(cj)
    })
    .await;
    assert!(cj.status.unwrap().last_schedule_time.is_some());

    // Forbid: the next minute starts nothing while the Job runs.
    clock.advance(minik8s::k8s_openapi::jiff::SignedDuration::from_secs(60));
    touch(&cronjobs, 3).await;
    eventually("the JobAlreadyActive event", || async {
        let events: Api<Event> = client.api(Some("default"));
        let list = events.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("JobAlreadyActive"))
            .then_some(())
    })
    .await;
    assert_eq!(jobs.list(&Default::default()).await.unwrap().items.len(), 1);

    // The Job finishes (as the job controller would write it): the CronJob sees it.
    let done = serde_json::json!({"status": {
        "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:05Z",
        "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"}
        ]
    }});
    jobs.patch_status(&name, &Patch::Merge(done)).await.unwrap();
    // It leaves the active list, and the run Forbid held back (its minute has come) starts.
    eventually(
        "the completed Job seen and the held run started",
        || async {
            let s = cronjobs.get("tick").await.unwrap().status?;
            let active = s.active.unwrap_or_default();
            let next = active.len() == 1 && active[0].name.as_deref() != Some(name.as_str());
            (next && s.last_successful_time.is_some()).then_some(())
        },
    )
    .await;
    assert_eq!(jobs.list(&Default::default()).await.unwrap().items.len(), 2);

    // kubectl's manual run from the template.
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    tokio::task::spawn_blocking(move || k.ok(&["create", "job", "manual", "--from=cronjob/tick"]))
        .await
        .unwrap();
    let manual = jobs.get("manual").await.unwrap();
    let annotations = manual.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations["cronjob.kubernetes.io/instantiate"], "manual");
    sandbox.stop().await;
}
