//! batch/v1 Jobs, as kube-apiserver 1.33 serves them: `SetDefaults_Job` (completions and
//! parallelism 1, backoffLimit 6, completionMode `NonIndexed`, suspend and manualSelector false,
//! podReplacementPolicy), the generated selector and pod labels (`batch.kubernetes.io/controller-uid`,
//! `batch.kubernetes.io/job-name` and their legacy unprefixed forms), validation (the spec rules of
//! [`job_spec`](super::job_spec), the generated-selector check, indexed pod host names), the update
//! rules (selector, template and most policies immutable; completions only with parallelism for
//! elastic indexed Jobs; scheduling directives of a suspended, never-started Job mutable),
//! `status.successful` field selectors and kubectl's printer.
//!
//! The stored object shows what a reader of upstream's storage sees: the Job's own labels default
//! to the template's labels, generated ones included, when the client set none.

use super::common::{default_field, object_at, semantically_equal, set_field};
use super::gofmt;
use super::job_spec;
use super::podtemplate;
use super::table::{age_cell, age_column, column, containers_and_images, name_column};
use super::workloads::format_label_selector;
use super::{Propagation, Strategy};
use api::labels::{self, Selector};
use api::validation::{self, FieldError, FieldErrorKind};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// `batch.kubernetes.io/controller-uid`: selects the pods of exactly one Job.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// `batch.kubernetes.io/job-name`.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The unprefixed labels upstream still sets for compatibility.
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";

/// batch/v1 Job.
pub struct JobStrategy;

/// `SetDefaults_Job` on the spec, and the template's pod defaults.
pub(super) fn default_job_spec(spec: &mut Map<String, Value>) {
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".to_string(), json!(1));
        spec.insert("parallelism".to_string(), json!(1));
    }
    default_field(spec, "parallelism", json!(1));
    let per_index = spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null());
    default_field(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    default_field(spec, "completionMode", json!("NonIndexed"));
    default_field(spec, "suspend", json!(false));
    let failure_policy = spec.get_mut("podFailurePolicy").filter(|p| !p.is_null());
    let has_failure_policy = failure_policy.is_some();
    if let Some(rules) = failure_policy
        .and_then(|p| p.get_mut("rules"))
        .and_then(Value::as_array_mut)
    {
        for pattern in rules
            .iter_mut()
            .filter_map(|r| r.get_mut("onPodConditions"))
            .filter_map(Value::as_array_mut)
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            if pattern
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                pattern.insert("status".to_string(), json!("True"));
            }
        }
    }
    default_field(
        spec,
        "podReplacementPolicy",
        json!(if has_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    default_field(spec, "manualSelector", json!(false));
}

/// Defaults of a whole Job: the spec's, the template's pod defaults, and the Job's labels from
/// the template's when it has none.
fn default_job(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        default_job_spec(spec);
    }
    if let Some(spec) = obj.get_mut("spec") {
        podtemplate::default_template(spec);
    }
    let template_labels = obj.pointer("/spec/template/metadata/labels").cloned();
    if let Some(l) = template_labels.filter(Value::is_object) {
        if api::meta::labels(obj).is_empty() {
            if let Some(m) = api::meta::metadata_mut(obj) {
                m.insert("labels".to_string(), l);
            }
        }
    }
}

fn manual_selector(obj: &Value) -> bool {
    obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true)
}

/// `generateSelector`: the name and uid labels on the template (unless the client set them: a
/// conflicting value is then refused by validation) and `controller-uid` in the selector.
fn generate_selector(obj: &mut Value) {
    let name = api::meta::name(obj).unwrap_or("").to_string();
    let uid = api::meta::uid(obj).unwrap_or("").to_string();
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    let template = spec.entry("template").or_insert_with(|| json!({}));
    let labels = object_at(template, "metadata")
        .map(|m| m.entry("labels").or_insert_with(|| json!({})))
        .and_then(|l| {
            if !l.is_object() {
                *l = json!({});
            }
            l.as_object_mut()
        });
    if let Some(labels) = labels {
        for (key, value) in [
            (LEGACY_JOB_NAME_LABEL, &name),
            (JOB_NAME_LABEL, &name),
            (LEGACY_CONTROLLER_UID_LABEL, &uid),
            (CONTROLLER_UID_LABEL, &uid),
        ] {
            labels
                .entry(key)
                .or_insert_with(|| Value::from(value.as_str()));
        }
    }
    let selector = spec.entry("selector").or_insert_with(|| json!({}));
    if !selector.is_object() {
        *selector = json!({});
    }
    if let Some(ml) = object_at(selector, "matchLabels") {
        ml.entry(CONTROLLER_UID_LABEL)
            .or_insert_with(|| Value::from(uid.as_str()));
    }
}

/// Validation options upstream derives from the stored Job on update.
#[derive(Clone, Copy)]
struct Options {
    /// The template must carry the prefixed labels too (always on create; on update only if
    /// the stored Job's template had them).
    require_prefixed_labels: bool,
    /// Node affinity, node selector, tolerations, scheduling gates and template labels and
    /// annotations may change: the stored Job is suspended and was never started.
    mutable_scheduling: bool,
}

/// `ValidateHasLabel`.
fn has_label(template_labels: &Map<String, Value>, key: &str, want: &str) -> Option<FieldError> {
    let field = format!("spec.template.metadata.labels[{key}]");
    let msg = format!("must be '{want}'");
    match template_labels.get(key).and_then(Value::as_str) {
        None => Some(FieldError::required(field, msg)),
        Some(v) if v != want => Some(FieldError {
            field,
            kind: FieldErrorKind::Invalid,
            message: msg,
            value: Some(gofmt::go_map(&api::meta::as_string_map(Some(
                &Value::Object(template_labels.clone()),
            )))),
        }),
        Some(_) => None,
    }
}

/// `validateGeneratedSelector`: with a generated selector, the template has the name and uid
/// labels and the selector selects them.
fn validate_generated_selector(obj: &Value, opts: Options, errs: &mut Vec<FieldError>) {
    if manual_selector(obj) {
        return;
    }
    let Some(selector) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return;
    };
    let name = api::meta::name(obj).unwrap_or("");
    let uid = api::meta::uid(obj).unwrap_or("");
    if uid.is_empty() {
        errs.push(FieldError::required("metadata.uid", ""));
    }
    let empty = Map::new();
    let tl = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut expected = vec![
        (LEGACY_CONTROLLER_UID_LABEL, uid),
        (LEGACY_JOB_NAME_LABEL, name),
    ];
    if opts.require_prefixed_labels {
        expected.push((CONTROLLER_UID_LABEL, uid));
        expected.push((JOB_NAME_LABEL, name));
    }
    errs.extend(expected.iter().filter_map(|(k, v)| has_label(tl, k, v)));
    let expected: BTreeMap<String, String> = expected
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Ok(sel) = labels::from_label_selector_json(selector) {
        if !sel.matches(&expected) {
            errs.push(FieldError {
                field: "spec.selector".to_string(),
                kind: FieldErrorKind::Invalid,
                message: "`selector` not auto-generated".to_string(),
                value: Some(gofmt::label_selector(selector)),
            });
        }
    }
}

/// `ValidateJobSpec`: the shared spec rules, then the selector (required, well-formed, matching
/// the template's labels).
fn validate_spec_and_selector(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec");
    errs.extend(job_spec::validate(spec, "spec"));
    let selector = match obj.pointer("/spec/selector").filter(|s| !s.is_null()) {
        None => {
            errs.push(FieldError::required("spec.selector", ""));
            Some(Selector::nothing())
        }
        Some(v) => match labels::from_label_selector_json(v) {
            Ok(s) => Some(s),
            Err(e) => {
                errs.push(FieldError::invalid_value("spec.selector", v, e.to_string()));
                None
            }
        },
    };
    if let Some(sel) = selector {
        podtemplate::check_selector_matches(
            &sel,
            spec.and_then(|s| s.get("template")),
            "spec.template",
            errs,
        );
    }
}

/// `ValidateJob` without object meta (validated generically).
fn validate_job(obj: &Value, opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_generated_selector(obj, opts, &mut errs);
    validate_spec_and_selector(obj, &mut errs);
    let indexed = obj.pointer("/spec/completionMode").and_then(Value::as_str) == Some("Indexed");
    let completions = obj.pointer("/spec/completions").and_then(Value::as_i64);
    if let (true, Some(c)) = (indexed, completions.filter(|c| *c > 0)) {
        // Indexed pods are named `<job>-<index>` and use it as their host name.
        let name = api::meta::name(obj).unwrap_or("");
        let hostname = format!("{name}-{}", c - 1);
        if !validation::is_dns1123_label(&hostname).is_empty() {
            errs.push(FieldError::invalid(
                "metadata.name",
                name,
                format!("will not able to create pod with invalid DNS label: {hostname}"),
            ));
        }
    }
    errs
}

/// `ValidateImmutableField` with the new value rendered as JSON (Go prints the struct).
fn immutable(new: Option<&Value>, old: Option<&Value>, field: &str, errs: &mut Vec<FieldError>) {
    if !semantically_equal(new, old) {
        errs.push(FieldError::invalid_value(
            field,
            new.unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
}

/// `validatePodTemplateUpdate`: the template is immutable, except the scheduling directives of
/// a suspended Job that never started.
fn validate_template_update(new: &Value, old: &Value, opts: Options, errs: &mut Vec<FieldError>) {
    let template = new.pointer("/spec/template");
    let mut old_template = old.pointer("/spec/template").cloned();
    if let (true, Some(ot)) = (opts.mutable_scheduling, old_template.as_mut()) {
        let take = |ot: &mut Value, pointer: &str, key: &str| {
            let parent = match ot.pointer_mut(pointer) {
                Some(p) => p,
                None => return,
            };
            match template.and_then(|t| t.pointer(&format!("{pointer}/{key}"))) {
                Some(v) => set_field(parent, key, v.clone()),
                None => {
                    if let Some(o) = parent.as_object_mut() {
                        o.remove(key);
                    }
                }
            }
        };
        take(ot, "/spec", "nodeSelector");
        take(ot, "/spec", "tolerations");
        take(ot, "/spec", "schedulingGates");
        take(ot, "/metadata", "annotations");
        take(ot, "/metadata", "labels");
        let new_affinity = template.and_then(|t| t.pointer("/spec/affinity"));
        if let Some(spec) = ot.get_mut("spec").and_then(Value::as_object_mut) {
            let node_affinity = new_affinity.and_then(|a| a.get("nodeAffinity")).cloned();
            match (new_affinity.is_some(), spec.get_mut("affinity")) {
                (false, Some(Value::Object(a))) => {
                    a.remove("nodeAffinity");
                    if a.is_empty() {
                        spec.remove("affinity");
                    }
                }
                (true, Some(Value::Object(a))) => {
                    match node_affinity {
                        Some(n) => a.insert("nodeAffinity".to_string(), n),
                        None => a.remove("nodeAffinity"),
                    };
                }
                (true, _) => {
                    let mut a = Map::new();
                    if let Some(n) = node_affinity {
                        a.insert("nodeAffinity".to_string(), n);
                    }
                    spec.insert("affinity".to_string(), Value::Object(a));
                }
                (false, _) => {}
            }
        }
    }
    immutable(template, old_template.as_ref(), "spec.template", errs);
}

/// `validateCompletions`: immutable, except for Indexed Jobs (elastic indexed Jobs, GA), whose
/// completions may change together with an equal parallelism.
fn validate_completions_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let (nc, oc) = (
        new.pointer("/spec/completions"),
        old.pointer("/spec/completions"),
    );
    let indexed = new.pointer("/spec/completionMode").and_then(Value::as_str) == Some("Indexed");
    if !indexed {
        immutable(nc, oc, "spec.completions", errs);
        return;
    }
    let Some(c) = nc.filter(|c| !c.is_null()) else {
        return;
    };
    if semantically_equal(nc, oc) {
        return;
    }
    if Some(c) != new.pointer("/spec/parallelism") {
        errs.push(FieldError::invalid_value(
            "spec.completions",
            c,
            "can only be modified in tandem with spec.parallelism",
        ));
    }
}

/// `ValidateJobSpecUpdate`'s immutability rules.
fn validate_spec_update(new: &Value, old: &Value, opts: Options, errs: &mut Vec<FieldError>) {
    validate_completions_update(new, old, errs);
    let (ns, os) = (new.pointer("/spec/selector"), old.pointer("/spec/selector"));
    if !semantically_equal(ns, os) {
        errs.push(FieldError {
            field: "spec.selector".to_string(),
            kind: FieldErrorKind::Invalid,
            message: "field is immutable".to_string(),
            value: Some(match ns.filter(|s| s.is_object()) {
                Some(s) => gofmt::label_selector(s),
                None => "null".to_string(),
            }),
        });
    }
    validate_template_update(new, old, opts, errs);
    for key in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        immutable(
            new.pointer(&format!("/spec/{key}")),
            old.pointer(&format!("/spec/{key}")),
            &format!("spec.{key}"),
            errs,
        );
    }
}

fn has_condition(obj: &Value, ty: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(ty)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The STATUS column (`printJob`).
fn job_status(obj: &Value) -> &'static str {
    if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if api::meta::deletion_timestamp(obj).is_some() {
        "Terminating"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

/// The COMPLETIONS column: `succeeded/completions`, `succeeded/1 of parallelism` for a work
/// queue with parallelism > 1.
fn completions_cell(obj: &Value) -> String {
    let succeeded = obj
        .pointer("/status/succeeded")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    match obj.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let parallelism = obj
                .pointer("/spec/parallelism")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    }
}

/// The DURATION column: start to completion, or start to now while running; empty before start.
fn duration_cell(obj: &Value, now: jiff::Timestamp) -> String {
    let time = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .and_then(api::meta::parse_time)
    };
    match (time("/status/startTime"), time("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => api::human_duration_since(start, now),
        (Some(start), Some(end)) => api::human_duration_since(start, end),
    }
}

impl JobStrategy {
    fn options_for_update(old: &Value) -> Options {
        let tl = podtemplate::labels(old.pointer("/spec/template"));
        Options {
            require_prefixed_labels: tl.contains_key(JOB_NAME_LABEL)
                && tl.contains_key(CONTROLLER_UID_LABEL),
            mutable_scheduling: old.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
                && old.pointer("/status/startTime").is_none_or(Value::is_null),
        }
    }
}

impl Strategy for JobStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_job(obj);
        if !manual_selector(obj) {
            generate_selector(obj);
        }
        // What storage readers see: the labels default from the template, generated ones too.
        default_job(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_job)
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({}))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_job(
            obj,
            Options {
                require_prefixed_labels: true,
                mutable_scheduling: false,
            },
        )
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_job(new);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let opts = Self::options_for_update(old);
        let mut errs = validate_job(new, opts);
        validate_spec_update(new, old, opts, &mut errs);
        errs
    }

    fn default_propagation_policy(&self) -> Propagation {
        // jobStrategy.DefaultGarbageCollectionPolicy: batch/v1 orphans "for back compatibility".
        Propagation::Orphan
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Status", "string", "", "Status of the job.", 0),
            column("Completions", "string", "", "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.", 0),
            column("Duration", "string", "", "Time required to complete the job.", 0),
            age_column(),
            column("Containers", "string", "", "Names of each container in the template.", 1),
            column("Images", "string", "", "Images referenced by each container in the template.", 1),
            column("Selector", "string", "", "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors", 1),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let (containers, images) = containers_and_images(obj.pointer("/spec/template/spec"));
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(job_status(obj)),
            Value::from(completions_cell(obj)),
            Value::from(duration_cell(obj, now)),
            age_cell(obj, now),
            Value::from(containers),
            Value::from(images),
            Value::from(format_label_selector(obj.pointer("/spec/selector"))),
        ]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "status.successful" => Some(
                obj.pointer("/status/succeeded")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    .to_string(),
            ),
            _ => None,
        }
    }
}
