//! batch/v1 CronJobs, as kube-apiserver 1.33 serves them: `SetDefaults_CronJob`
//! (concurrencyPolicy `Allow`, suspend false, history limits 3 and 1) and the job template's pod
//! defaults; validation of the schedule ([`cron`](super::cron)), the time zone, the concurrency
//! policy, the history limits and the job template (the Job spec rules, with a selector that will
//! be generated); the 52-character name limit on create; kubectl's printer.

use super::common::{default_field, object_at, validate_nonnegative};
use super::gofmt;
use super::job_spec;
use super::podtemplate;
use super::table::{age_cell, age_column, column, containers_and_images, name_column, since_cell};
use super::workloads::format_label_selector;
use super::Strategy;
use api::cron;
use api::validation::{FieldError, FieldErrorKind};
use serde_json::{json, Value};

/// batch/v1 CronJob.
pub struct CronJobStrategy;

/// The controller suffixes Job names with an 11-character `-<timestamp>`; Job names are DNS-1035
/// labels of at most 63 characters (`ValidateCronJobCreate`).
const MAX_CRONJOB_NAME_LENGTH: usize = 63 - 11;

const CONCURRENCY_POLICIES: &[&str] = &["Allow", "Forbid", "Replace"];

fn default_cronjob(obj: &mut Value) {
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    if spec.get("concurrencyPolicy").and_then(Value::as_str) == Some("") {
        spec.remove("concurrencyPolicy");
    }
    default_field(spec, "concurrencyPolicy", json!("Allow"));
    default_field(spec, "suspend", json!(false));
    default_field(spec, "successfulJobsHistoryLimit", json!(3));
    default_field(spec, "failedJobsHistoryLimit", json!(1));
    let Some(job_template) = spec
        .entry("jobTemplate")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    else {
        return;
    };
    let job_spec = job_template.entry("spec").or_insert_with(|| json!({}));
    if job_spec.is_object() {
        podtemplate::default_template(job_spec);
    }
}

/// `validateTimeZone`: an explicit IANA zone name the time-zone database knows.
fn validate_time_zone(tz: &str, errs: &mut Vec<FieldError>) {
    let path = "spec.timeZone";
    if tz.is_empty() {
        errs.push(FieldError::invalid(
            path,
            tz,
            "timeZone must be nil or non-empty string",
        ));
        return;
    }
    // IANA naming rules (https://data.iana.org/time-zones/theory.html#naming), with digits and
    // `+` tolerated for legacy names, as upstream checks before loading.
    let part_ok = |p: &str| {
        (1..=14).contains(&p.len())
            && p != "."
            && p != ".."
            && !p.starts_with('-')
            && p.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b".-_+".contains(&c))
    };
    if !tz.split('/').all(part_ok) {
        errs.push(FieldError::invalid(
            path,
            tz,
            format!("unknown time zone {tz}"),
        ));
        return;
    }
    if tz.eq_ignore_ascii_case("Local") {
        errs.push(FieldError::invalid(
            path,
            tz,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if let Err(e) = cron::load_location(tz) {
        errs.push(FieldError::invalid(path, tz, e));
    }
}

/// `validateCronJobSpec`; `old` is the stored spec on update.
fn validate_spec(spec: Option<&Value>, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let text = |s: Option<&Value>, k: &str| {
        s.and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let schedule = text(spec, "schedule").unwrap_or_default();
    let tz = spec
        .and_then(|s| s.get("timeZone"))
        .filter(|v| !v.is_null());
    if schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else {
        // A schedule stored before the timeZone field may keep its TZ prefix.
        let allow_tz = text(old, "schedule").is_some_and(|s| s.contains("TZ"));
        if let Err(e) = cron::parse(&schedule) {
            errs.push(FieldError::invalid("spec.schedule", &schedule, e));
        }
        if schedule.contains("TZ") {
            if !allow_tz {
                errs.push(FieldError::invalid(
                    "spec.schedule",
                    &schedule,
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                ));
            } else if tz.is_some() {
                errs.push(FieldError::invalid(
                    "spec.schedule",
                    &schedule,
                    "cannot use both timeZone field and TZ or CRON_TZ in schedule",
                ));
            }
        }
    }
    validate_nonnegative(
        spec,
        "startingDeadlineSeconds",
        "spec.startingDeadlineSeconds",
        &mut errs,
    );
    let old_tz = old.and_then(|s| s.get("timeZone")).filter(|v| !v.is_null());
    if old.is_none() || old_tz != tz {
        if let Some(tz) = tz {
            validate_time_zone(tz.as_str().unwrap_or(""), &mut errs);
        }
    }
    match text(spec, "concurrencyPolicy").unwrap_or_default().as_str() {
        "" => errs.push(FieldError::required("spec.concurrencyPolicy", "")),
        p if !CONCURRENCY_POLICIES.contains(&p) => errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            &json!(p),
            CONCURRENCY_POLICIES,
        )),
        _ => {}
    }
    let template_spec = spec.and_then(|s| s.pointer("/jobTemplate/spec"));
    errs.extend(job_spec::validate(template_spec, "spec.jobTemplate.spec"));
    if let Some(sel) = template_spec
        .and_then(|s| s.get("selector"))
        .filter(|s| !s.is_null())
    {
        errs.push(FieldError {
            field: "spec.jobTemplate.spec.selector".to_string(),
            kind: FieldErrorKind::Invalid,
            message: "`selector` will be auto-generated".to_string(),
            value: Some(gofmt::label_selector(sel)),
        });
    }
    if template_spec
        .and_then(|s| s.get("manualSelector"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        errs.push(FieldError::not_supported(
            "spec.jobTemplate.spec.manualSelector",
            &json!(true),
            &["nil", "false"],
        ));
    }
    for key in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        validate_nonnegative(spec, key, &format!("spec.{key}"), &mut errs);
    }
    errs
}

impl Strategy for CronJobStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_cronjob(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_cronjob)
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({}))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(obj.get("spec"), None);
        let name = api::meta::name(obj).unwrap_or("");
        if name.len() > MAX_CRONJOB_NAME_LENGTH {
            errs.push(FieldError::invalid(
                "metadata.name",
                name,
                format!("must be no more than {MAX_CRONJOB_NAME_LENGTH} characters"),
            ));
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_cronjob(new);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // No name-length rule: CronJobs stored before it must stay updatable and deletable.
        validate_spec(
            new.get("spec"),
            Some(old.get("spec").unwrap_or(&Value::Null)),
        )
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Schedule", "string", "", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.", 0),
            column("Timezone", "string", "", "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones", 0),
            column("Suspend", "boolean", "", "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.", 0),
            column("Active", "integer", "", "A list of pointers to currently running jobs.", 0),
            column("Last Schedule", "string", "", "Information when was the last time the job was successfully scheduled.", 0),
            age_column(),
            column("Containers", "string", "", "Names of each container in the template.", 1),
            column("Images", "string", "", "Images referenced by each container in the template.", 1),
            column("Selector", "string", "", "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors", 1),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let template_spec = obj.pointer("/spec/jobTemplate/spec");
        let (containers, images) =
            containers_and_images(template_spec.and_then(|s| s.pointer("/template/spec")));
        let suspend = match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        let last = match obj
            .pointer("/status/lastScheduleTime")
            .and_then(Value::as_str)
        {
            Some(t) => since_cell(Some(t), now),
            None => Value::from("<none>"),
        };
        let active = obj
            .pointer("/status/active")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(
                obj.pointer("/spec/schedule")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
            Value::from(
                obj.pointer("/spec/timeZone")
                    .and_then(Value::as_str)
                    .unwrap_or("<none>"),
            ),
            Value::from(suspend),
            Value::from(active),
            last,
            age_cell(obj, now),
            Value::from(containers),
            Value::from(images),
            Value::from(format_label_selector(
                template_spec.and_then(|s| s.get("selector")),
            )),
        ]
    }
}
