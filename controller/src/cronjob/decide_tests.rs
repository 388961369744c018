use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn cronjob(v: serde_json::Value) -> CronJob {
    serde_json::from_value(v).expect("cronjob")
}

fn every_minute() -> CronJob {
    cronjob(json!({
        "metadata": {"name": "tick", "namespace": "default", "uid": "u-1",
                     "creationTimestamp": "2026-12-04T10:00:30Z"},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {
                "metadata": {"labels": {"app": "tick"}, "annotations": {"team": "a"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"}}}
            }
        }
    }))
}

#[test]
fn the_most_recent_missed_time_counts_from_the_last_schedule_or_creation() {
    let sched = api::cron::parse("* * * * *").expect("schedule");
    let tz = TimeZone::UTC;
    let cj = every_minute();
    let now = ts("2026-12-04T10:03:10Z");
    let earliest = earliest_time(&cj, now);
    assert_eq!(earliest, ts("2026-12-04T10:00:30Z"));
    assert_eq!(
        most_recent_schedule(&sched, &tz, earliest, now),
        (Some(ts("2026-12-04T10:03:00Z")), 3)
    );
    // Nothing due yet: none, and the wait is until the next minute (plus the delta).
    let early = ts("2026-12-04T10:00:40Z");
    assert_eq!(
        most_recent_schedule(&sched, &tz, earliest, early),
        (None, 0)
    );
    assert_eq!(
        until_next(&sched, &tz, earliest, early),
        Some(std::time::Duration::from_millis(20_100))
    );
    // After a schedule at 10:03, the next is 10:04.
    let mut done = cj.clone();
    done.status = Some(k8s_openapi::api::batch::v1::CronJobStatus {
        last_schedule_time: Some(Time(ts("2026-12-04T10:03:00Z"))),
        ..Default::default()
    });
    assert_eq!(earliest_time(&done, now), ts("2026-12-04T10:03:00Z"));
    assert_eq!(
        most_recent_schedule(&sched, &tz, earliest_time(&done, now), now),
        (None, 0)
    );
}

#[test]
fn a_starting_deadline_moves_the_earliest_time_and_makes_old_times_too_late() {
    let mut cj = every_minute();
    cj.spec.as_mut().expect("spec").starting_deadline_seconds = Some(30);
    let now = ts("2026-12-04T12:00:45Z");
    assert_eq!(earliest_time(&cj, now), ts("2026-12-04T12:00:15Z"));
    assert!(too_late(&cj, ts("2026-12-04T12:00:00Z"), now));
    assert!(!too_late(&cj, ts("2026-12-04T12:00:30Z"), now));
}

#[test]
fn many_missed_times_are_counted_without_walking_them_all() {
    let sched = api::cron::parse("* * * * *").expect("schedule");
    let earliest = ts("2026-01-01T00:00:00Z");
    let now = ts("2026-12-04T10:03:10Z");
    let (recent, missed) = most_recent_schedule(&sched, &TimeZone::UTC, earliest, now);
    assert_eq!(recent, Some(ts("2026-12-04T10:03:00Z")));
    assert!(missed > MAX_MISSED, "{missed}");
}

#[test]
fn the_job_of_a_schedule_time_is_named_by_its_minute_and_owned_by_the_cronjob() {
    let cj = every_minute();
    let at = ts("2026-12-04T10:03:00Z");
    let job = job_from_template(&cj, at, &TimeZone::UTC);
    assert_eq!(job.metadata.name.as_deref(), Some("tick-29939643"));
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations[SCHEDULED_TIMESTAMP_ANNOTATION],
        "2026-12-04T10:03:00Z"
    );
    assert_eq!(annotations["team"], "a");
    assert_eq!(
        job.metadata.labels.clone().unwrap_or_default()["app"],
        "tick"
    );
    let owner = &job.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("CronJob", "u-1", Some(true))
    );
    assert!(job.spec.is_some());
    let tokyo = jiff::tz::db().get("Asia/Tokyo").expect("zone");
    let job = job_from_template(&cj, at, &tokyo);
    assert_eq!(
        job.metadata.annotations.unwrap_or_default()[SCHEDULED_TIMESTAMP_ANNOTATION],
        "2026-12-04T19:03:00+09:00"
    );
    assert_eq!(rfc1123z(at), "Fri, 04 Dec 2026 10:03:00 +0000");
}

#[test]
fn history_limits_remove_the_oldest_finished_jobs() {
    let mut cj = every_minute();
    let spec = cj.spec.as_mut().expect("spec");
    spec.successful_jobs_history_limit = Some(1);
    spec.failed_jobs_history_limit = Some(0);
    let job = |name: &str, start: &str, cond: &str| -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"startTime": start, "conditions": [{"type": cond, "status": "True"}]}
        }))
        .expect("job")
    };
    let jobs = [
        job("a", "2026-12-04T10:01:00Z", "Complete"),
        job("b", "2026-12-04T10:02:00Z", "Complete"),
        job("c", "2026-12-04T10:03:00Z", "Failed"),
        job("d", "2026-12-04T10:04:00Z", "Running"),
    ];
    let refs: Vec<&Job> = jobs.iter().collect();
    let names: Vec<_> = jobs_over_history_limits(&cj, &refs)
        .into_iter()
        .map(|j| j.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["a", "c"]);
}

#[test]
fn time_zones_are_checked_like_go() {
    let mut cj = every_minute();
    cj.spec.as_mut().expect("spec").time_zone = Some("Mars/Olympus".into());
    assert_eq!(
        time_zone(&cj).err().as_deref(),
        Some("unknown time zone Mars/Olympus")
    );
    cj.spec.as_mut().expect("spec").time_zone = Some("Europe/Berlin".into());
    assert!(time_zone(&cj).is_ok());
}
