//! `minik8s bench job`: a Job with `completions` and `parallelism` on a whole control plane (the
//! Job controller, scheduler and fake kubelets in this process, talking over HTTP), timed from the
//! create until the Job's `Complete` condition.
//!
//! The pods exit 0 as soon as they start (`kubelet-fake.minik8s.io/run-for: 0s`), so the figure
//! is the control plane's own cost per completion: create, bind, start, finish, count (the Job's
//! tracking finalizer and status writes), not a container's run time. Progress is read from the
//! Job's status by a GET every 20 ms (one small object; no watch to decode). Bounded by
//! `deadline`.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;

use super::scale::{print_requests, request_counts};
use super::{ms, Error};

fn job(name: &str, completions: usize, parallelism: usize) -> Result<Job, Error> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": 6,
            "template": {
                "metadata": {"annotations": {"kubelet-fake.minik8s.io/run-for": "0s"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
            }
        }
    }))
    .map_err(|e| Error::Failed(format!("job: {e}")))
}

fn complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// Runs the benchmark on a fresh in-memory control plane with `nodes` fake nodes.
pub async fn job_bench(
    completions: usize,
    parallelism: usize,
    nodes: usize,
    deadline: Duration,
) -> Result<(), Error> {
    let (plane, _) = super::plane::start_ready(super::plane::config(nodes, None), deadline).await?;
    let client = plane.client();

    let http = reqwest::Client::new();
    let jobs = client.api::<Job>(Some("default"));
    let counts0 = request_counts(&http, plane.url()).await?;
    let cpu0 = kubelet_fake::bench::process_usage();
    let t0 = Instant::now();
    jobs.create(&job("bench", completions, parallelism)?)
        .await
        .map_err(|e| Error::Failed(format!("create job: {e}")))?;
    // When succeeded first reached each quarter of the completions.
    let mut quarters: Vec<Option<Duration>> = vec![None; 4];
    let done = loop {
        if t0.elapsed() > deadline {
            return Err(Error::Failed(format!(
                "the Job did not complete within {deadline:?}"
            )));
        }
        let current = jobs
            .get("bench")
            .await
            .map_err(|e| Error::Failed(format!("get job: {e}")))?;
        let succeeded = current
            .status
            .as_ref()
            .and_then(|s| s.succeeded)
            .unwrap_or(0) as usize;
        for (q, slot) in quarters.iter_mut().enumerate() {
            if slot.is_none() && succeeded * 4 >= completions * (q + 1) {
                *slot = Some(t0.elapsed());
            }
        }
        if complete(&current) {
            break t0.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let cpu = super::scale::cpu_since(cpu0);
    let marks: Vec<String> = quarters
        .iter()
        .enumerate()
        .map(|(q, t)| match t {
            Some(t) => format!("{}% {}", 25 * (q + 1), ms(*t)),
            None => format!("{}% -", 25 * (q + 1)),
        })
        .collect();
    println!(
        "job: completions {completions}, parallelism {parallelism}, {nodes} nodes: Complete in {} ({:.0} completions/s, {cpu}); succeeded by {}",
        ms(done),
        completions as f64 / done.as_secs_f64(),
        marks.join(", ")
    );
    let counts1 = request_counts(&http, plane.url()).await?;
    print_requests("job", &counts0, &counts1);
    plane.shutdown().await;
    Ok(())
}
