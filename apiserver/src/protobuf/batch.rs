//! batch/v1 Jobs and CronJobs from protobuf: what `kubectl create job` and `kubectl create
//! cronjob` send (the Job spec's counts, modes and policies by name, the pod template with the
//! fields the parent module converts). Pod failure and success policies are dropped.

use super::{label_selector, object_meta, template, Obj};
use k8s_pb::api::batch::v1 as batch;
use serde_json::Value;

fn job_spec(s: batch::JobSpec) -> Value {
    Obj::default()
        .i("parallelism", s.parallelism.map(i64::from))
        .i("completions", s.completions.map(i64::from))
        .i("activeDeadlineSeconds", s.active_deadline_seconds)
        .i("backoffLimit", s.backoff_limit.map(i64::from))
        .i(
            "backoffLimitPerIndex",
            s.backoff_limit_per_index.map(i64::from),
        )
        .i("maxFailedIndexes", s.max_failed_indexes.map(i64::from))
        .v("selector", label_selector(s.selector))
        .b("manualSelector", s.manual_selector)
        .v("template", template(s.template))
        .i(
            "ttlSecondsAfterFinished",
            s.ttl_seconds_after_finished.map(i64::from),
        )
        .s("completionMode", s.completion_mode)
        .b("suspend", s.suspend)
        .s("podReplacementPolicy", s.pod_replacement_policy)
        .s("managedBy", s.managed_by)
        .done()
}

/// A decoded `batch/v1` Job (without `apiVersion`/`kind`).
pub(super) fn job(j: batch::Job) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(j.metadata)))
        .v("spec", j.spec.map(job_spec))
        .done()
}

/// A decoded `batch/v1` CronJob (without `apiVersion`/`kind`).
pub(super) fn cron_job(c: batch::CronJob) -> Value {
    let spec = c.spec.map(|s| {
        let job_template = s.job_template.map(|t| {
            Obj::default()
                .v("metadata", Some(object_meta(t.metadata)))
                .v("spec", t.spec.map(job_spec))
                .done()
        });
        Obj::default()
            .s("schedule", s.schedule)
            .s("timeZone", s.time_zone)
            .i("startingDeadlineSeconds", s.starting_deadline_seconds)
            .s("concurrencyPolicy", s.concurrency_policy)
            .b("suspend", s.suspend)
            .v("jobTemplate", job_template)
            .i(
                "successfulJobsHistoryLimit",
                s.successful_jobs_history_limit.map(i64::from),
            )
            .i(
                "failedJobsHistoryLimit",
                s.failed_jobs_history_limit.map(i64::from),
            )
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(c.metadata)))
        .v("spec", spec)
        .done()
}

#[cfg(test)]
mod tests {
    use super::super::{decode_object, MAGIC};
    use k8s_pb::api::batch::v1 as batch;
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;
    use serde_json::json;

    fn envelope(kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("batch/v1".into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(u.encode_to_vec());
        out
    }

    fn pod_template(restart_policy: &str) -> Option<core::PodTemplateSpec> {
        Some(core::PodTemplateSpec {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(core::PodSpec {
                containers: vec![core::Container {
                    name: Some("pi".into()),
                    image: Some("perl".into()),
                    ..Default::default()
                }],
                restart_policy: Some(restart_policy.into()),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn decodes_jobs_and_cronjobs_like_kubectl_create() {
        let j = batch::Job {
            metadata: Some(meta::ObjectMeta {
                name: Some("pi".into()),
                ..Default::default()
            }),
            spec: Some(batch::JobSpec {
                template: pod_template("Never"),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        assert_eq!(
            decode_object(&envelope("Job", j.encode_to_vec())),
            Ok(
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
                "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "Never"}}}})
            )
        );
        let c = batch::CronJob {
            metadata: Some(meta::ObjectMeta {
                name: Some("hello".into()),
                ..Default::default()
            }),
            spec: Some(batch::CronJobSpec {
                schedule: Some("*/1 * * * *".into()),
                concurrency_policy: Some(String::new()),
                suspend: Some(false),
                job_template: Some(batch::JobTemplateSpec {
                    metadata: Some(meta::ObjectMeta {
                        name: Some("hello".into()),
                        ..Default::default()
                    }),
                    spec: Some(batch::JobSpec {
                        template: pod_template("OnFailure"),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        assert_eq!(
            decode_object(&envelope("CronJob", c.encode_to_vec())),
            Ok(
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "hello"},
                "spec": {"schedule": "*/1 * * * *", "suspend": false,
                    "jobTemplate": {"metadata": {"name": "hello"}, "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "OnFailure"}}}}}})
            )
        );
    }
}
