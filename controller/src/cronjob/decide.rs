//! The CronJob controller's decisions as values: which schedule time is due, when to look again,
//! what Job a schedule time starts, which finished Jobs the history limits remove.

use std::collections::BTreeMap;

use api::cron::Schedule;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// How many missed schedule times are still normal (more: a `TooManyMissedTimes` warning).
pub const MAX_MISSED: usize = 100;
/// Added to the wait until the next schedule time, so the sync lands after it (`nextScheduleDelta`).
pub const NEXT_SCHEDULE_DELTA: SignedDuration = SignedDuration::from_millis(100);
/// The annotation naming a Job's schedule time (`batch.kubernetes.io/cronjob-scheduled-timestamp`).
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The zone a CronJob's schedule is read in: its `timeZone`, else the controller's local zone
/// (UTC here, as in a container). `Err` with Go's message for an unknown zone.
pub fn time_zone(cj: &CronJob) -> Result<TimeZone, String> {
    match cj.spec.as_ref().and_then(|s| s.time_zone.as_deref()) {
        None | Some("") | Some("UTC") | Some("Local") => Ok(TimeZone::UTC),
        Some(name) => {
            api::cron::load_location(name)?;
            jiff::tz::db()
                .get(name)
                .map_err(|_| format!("unknown time zone {name}"))
        }
    }
}

/// When missed schedule times count from: the last schedule time (else the creation time), no
/// earlier than `startingDeadlineSeconds` before `now`.
pub fn earliest_time(cj: &CronJob, now: Timestamp) -> Timestamp {
    let mut earliest = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(|t| t.0)
        .or_else(|| cj.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(now);
    if let Some(deadline) = cj.spec.as_ref().and_then(|s| s.starting_deadline_seconds) {
        if let Ok(limit) = now.checked_sub(SignedDuration::from_secs(deadline)) {
            earliest = earliest.max(limit);
        }
    }
    earliest
}

/// The most recent schedule time after `earliest` that is not after `now`, and how many there were
/// (`mostRecentScheduleTime`). Past [`MAX_MISSED`] the count is estimated from the schedule's period,
/// as upstream does, so the work is bounded however long the controller was away.
pub fn most_recent_schedule(
    sched: &Schedule,
    tz: &TimeZone,
    earliest: Timestamp,
    now: Timestamp,
) -> (Option<Timestamp>, usize) {
    let mut last = None;
    let mut count = 0;
    let mut t = earliest;
    while let Some(next) = sched.next_after(t, tz) {
        if next > now {
            return (last, count);
        }
        last = Some(next);
        count += 1;
        t = next;
        if count > MAX_MISSED {
            break;
        }
    }
    let Some(first) = sched.next_after(earliest, tz) else {
        return (last, count);
    };
    let Some(second) = sched.next_after(first, tz) else {
        return (last, count);
    };
    // Too many: jump by whole periods (exact for regular schedules), then step to the last one.
    let period = second.duration_since(first);
    if period <= SignedDuration::ZERO {
        return (last, count);
    }
    let span = now.duration_since(first);
    let periods = span.as_secs() / period.as_secs().max(1);
    let mut t = first
        .checked_add(SignedDuration::from_secs(
            periods.saturating_sub(1) * period.as_secs(),
        ))
        .unwrap_or(first);
    let mut estimated = usize::try_from(periods).unwrap_or(usize::MAX);
    for _ in 0..MAX_MISSED {
        match sched.next_after(t, tz) {
            Some(next) if next <= now => {
                t = next;
                estimated = estimated.saturating_add(1);
            }
            _ => break,
        }
    }
    (Some(t.max(last.unwrap_or(t))), estimated.max(count))
}

/// How long until the sync after `now`: the next schedule time after the most recent one (or
/// after `earliest`), plus [`NEXT_SCHEDULE_DELTA`]; `None` if the schedule never fires again.
pub fn until_next(
    sched: &Schedule,
    tz: &TimeZone,
    from: Timestamp,
    now: Timestamp,
) -> Option<std::time::Duration> {
    let mut next = sched.next_after(from, tz)?;
    if next <= now {
        next = sched.next_after(now, tz)?;
    }
    let wait = next.duration_since(now) + NEXT_SCHEDULE_DELTA;
    std::time::Duration::try_from(wait).ok()
}

/// Whether `scheduled` is too late to start (`startingDeadlineSeconds` passed).
pub fn too_late(cj: &CronJob, scheduled: Timestamp, now: Timestamp) -> bool {
    cj.spec
        .as_ref()
        .and_then(|s| s.starting_deadline_seconds)
        .and_then(|d| scheduled.checked_add(SignedDuration::from_secs(d)).ok())
        .is_some_and(|deadline| deadline < now)
}

/// The Job name of a schedule time (`getJobName`): minutes since the epoch.
pub fn job_name(cj_name: &str, scheduled: Timestamp) -> String {
    format!("{cj_name}-{}", scheduled.as_second().div_euclid(60))
}

/// The Job a schedule time starts (`getJobFromTemplate2`): the template's labels, annotations and
/// spec, the schedule-time annotation (RFC 3339 in the CronJob's zone) and the CronJob as
/// controller.
pub fn job_from_template(cj: &CronJob, scheduled: Timestamp, tz: &TimeZone) -> Job {
    let template = cj.spec.as_ref().map(|s| &s.job_template);
    let name = cj.metadata.name.clone().unwrap_or_default();
    let mut annotations = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.insert(
        SCHEDULED_TIMESTAMP_ANNOTATION.to_string(),
        scheduled
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
            .replace("+00:00", "Z"),
    );
    let labels: Option<BTreeMap<String, String>> = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(&name, scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels,
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "CronJob".into(),
                name,
                uid: cj.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: template.and_then(|t| t.spec.clone()),
        status: None,
    }
}

/// `Complete` or `Failed` if the Job has finished (that condition `True`).
pub fn finished(job: &Job) -> Option<&'static str> {
    let conds = job.status.as_ref()?.conditions.as_ref()?;
    conds
        .iter()
        .find_map(|c| match (c.type_.as_str(), c.status.as_str()) {
            ("Complete", "True") => Some("Complete"),
            ("Failed", "True") => Some("Failed"),
            _ => None,
        })
}

/// The finished Jobs the history limits remove (`cleanupFinishedJobs`): beyond
/// `successfulJobsHistoryLimit` Complete ones and `failedJobsHistoryLimit` Failed ones, the oldest by
/// start time (names breaking ties; Jobs without a start time last).
pub fn jobs_over_history_limits<'a>(cj: &CronJob, jobs: &[&'a Job]) -> Vec<&'a Job> {
    let spec = cj.spec.as_ref();
    let mut out = Vec::new();
    for (kind, limit) in [
        (
            "Complete",
            spec.and_then(|s| s.successful_jobs_history_limit),
        ),
        ("Failed", spec.and_then(|s| s.failed_jobs_history_limit)),
    ] {
        let Some(limit) = limit else { continue };
        let mut of_kind: Vec<&Job> = jobs
            .iter()
            .copied()
            .filter(|j| finished(j) == Some(kind))
            .collect();
        let keep = usize::try_from(limit.max(0)).unwrap_or(0);
        if of_kind.len() <= keep {
            continue;
        }
        of_kind.sort_by(|a, b| {
            let start = |j: &Job| {
                j.status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .map(|t| t.0)
            };
            match (start(a), start(b)) {
                (Some(x), Some(y)) if x != y => x.cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                _ => a.metadata.name.cmp(&b.metadata.name),
            }
        });
        let n = of_kind.len() - keep;
        out.extend(of_kind.into_iter().take(n));
    }
    out
}

/// Go's `time.RFC1123Z` of an instant in UTC (`Mon, 02 Jan 2006 15:04:05 +0000`), as the
/// `MissSchedule` event writes it.
pub fn rfc1123z(t: Timestamp) -> String {
    t.to_zoned(TimeZone::UTC)
        .strftime("%a, %d %b %Y %H:%M:%S %z")
        .to_string()
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
