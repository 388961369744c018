//! apps/v1 DaemonSets, as kube-apiserver 1.33 serves them: `SetDefaults_DaemonSet`
//! (updateStrategy `RollingUpdate` with maxUnavailable 1 and maxSurge 0, revisionHistoryLimit 10)
//! and the template's pod defaults; the template generation, which apps/v1 carries in the
//! `deprecated.daemonset.template.generation` annotation (1 on create, +1 whenever the template
//! changes, never set by clients); validation (selector matching the template labels, the whole
//! pod template, restartPolicy `Always`, the rolling-update bounds); the immutable selector;
//! kubectl's printer. Also the int-or-percent rules the apps kinds share.

use super::common::{default_field, object_at, semantically_equal, validate_nonnegative};
use super::gofmt;
use super::podtemplate;
use super::table::{age_cell, age_column, column, containers_and_images, int_cell, name_column};
use super::workloads::{format_label_selector, format_labels, validate_selector_unchanged};
use super::Strategy;
use api::labels::{self, Selector};
use api::validation::{go_quote, FieldError, FieldErrorKind};
use serde_json::{json, Value};

/// apps/v1 DaemonSet.
pub struct DaemonSetStrategy;

/// Where apps/v1 keeps the internal `spec.templateGeneration`.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// The number of a valid percent string (`"25%"` → 25).
fn percent(v: &Value) -> Option<i64> {
    let digits = v.as_str()?.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `getIntOrPercentValue`: the percent's number, the integer, or `Atoi` of another string (0
/// when it is none).
pub(super) fn int_or_percent_value(v: &Value) -> i64 {
    percent(v)
        .or_else(|| v.as_i64())
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(0)
}

fn invalid_int_or_string(path: &str, v: &Value, msg: &str) -> FieldError {
    FieldError {
        field: path.to_string(),
        kind: FieldErrorKind::Invalid,
        message: msg.to_string(),
        value: Some(gofmt::int_or_string(v)),
    }
}

/// `ValidatePositiveIntOrPercent`.
pub(super) fn validate_positive_int_or_percent(v: &Value, path: &str) -> Vec<FieldError> {
    match v {
        Value::String(_) if percent(v).is_none() => {
            vec![invalid_int_or_string(path, v, PERCENT_MSG)]
        }
        Value::String(_) => Vec::new(),
        _ if v.as_i64().is_some_and(|n| n >= 0) => Vec::new(),
        _ => vec![FieldError::invalid_value(
            path,
            v,
            "must be greater than or equal to 0",
        )],
    }
}

/// `IsNotMoreThan100Percent`.
pub(super) fn validate_not_more_than_100_percent(v: &Value, path: &str) -> Vec<FieldError> {
    match percent(v) {
        Some(p) if p > 100 => vec![invalid_int_or_string(
            path,
            v,
            "must not be greater than 100%",
        )],
        _ => Vec::new(),
    }
}

fn default_daemonset(obj: &mut Value) {
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    if let Some(us) = spec
        .entry("updateStrategy")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        if us
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            us.insert("type".to_string(), json!("RollingUpdate"));
        }
        if us.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            default_field(us, "rollingUpdate", json!({}));
            if let Some(ru) = us.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                default_field(ru, "maxUnavailable", json!(1));
                default_field(ru, "maxSurge", json!(0));
            }
        }
    }
    default_field(spec, "revisionHistoryLimit", json!(10));
    if let Some(spec) = obj.get_mut("spec") {
        podtemplate::default_template(spec);
    }
}

/// The template generation of a stored or submitted DaemonSet (0 when unset or unparsable).
fn template_generation(obj: &Value) -> i64 {
    api::meta::annotations(obj)
        .get(TEMPLATE_GENERATION_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn set_template_generation(obj: &mut Value, generation: i64) {
    if let Some(meta) = api::meta::metadata_mut(obj) {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                TEMPLATE_GENERATION_ANNOTATION.to_string(),
                Value::from(generation.to_string()),
            );
        }
    }
}

fn validate_update_strategy(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    let path = "spec.updateStrategy";
    let us = spec.and_then(|s| s.get("updateStrategy"));
    match us
        .and_then(|u| u.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(ru) = us
                .and_then(|u| u.get("rollingUpdate"))
                .filter(|r| !r.is_null())
            else {
                errs.push(FieldError::required(format!("{path}.rollingUpdate"), ""));
                return;
            };
            let zero = json!(0);
            let mu = ru
                .get("maxUnavailable")
                .filter(|v| !v.is_null())
                .unwrap_or(&zero);
            let ms = ru.get("maxSurge").filter(|v| !v.is_null()).unwrap_or(&zero);
            let (mup, msp) = (
                format!("{path}.rollingUpdate.maxUnavailable"),
                format!("{path}.rollingUpdate.maxSurge"),
            );
            errs.extend(validate_positive_int_or_percent(mu, &mup));
            errs.extend(validate_positive_int_or_percent(ms, &msp));
            errs.extend(validate_not_more_than_100_percent(mu, &mup));
            errs.extend(validate_not_more_than_100_percent(ms, &msp));
            match (int_or_percent_value(mu) != 0, int_or_percent_value(ms) != 0) {
                (true, true) => errs.push(invalid_int_or_string(
                    &msp,
                    ms,
                    "may not be set when maxUnavailable is non-zero",
                )),
                (false, false) => {
                    errs.push(FieldError::required(mup, "cannot be 0 when maxSurge is 0"))
                }
                _ => {}
            }
        }
        _ => errs.push(FieldError {
            field: path.to_string(),
            kind: FieldErrorKind::NotSupported,
            message: format!(
                "supported values: {}, {}",
                go_quote("RollingUpdate"),
                go_quote("OnDelete")
            ),
            value: Some(gofmt::update_strategy(
                "apps.DaemonSetUpdateStrategy",
                "apps.RollingUpdateDaemonSet",
                us,
            )),
        }),
    }
}

/// `ValidateDaemonSetSpec`.
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    let template = spec.and_then(|s| s.get("template"));
    let selector = match obj.pointer("/spec/selector").filter(|s| !s.is_null()) {
        // A nil selector selects nothing, so the template never matches.
        None => Some(Selector::nothing()),
        Some(v) => match labels::from_label_selector_json(v) {
            Ok(s) => Some(s),
            Err(e) => {
                errs.push(FieldError::invalid_value("spec.selector", v, e.to_string()));
                None
            }
        },
    };
    if let Some(sel) = &selector {
        podtemplate::check_selector_matches(sel, template, "spec.template", &mut errs);
    }
    if let Some(v) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) {
        let count = |k: &str| {
            v.get(k).and_then(Value::as_object).map_or(0, |m| m.len())
                + v.get(k).and_then(Value::as_array).map_or(0, Vec::len)
        };
        if count("matchLabels") + count("matchExpressions") == 0 {
            errs.push(FieldError {
                field: "spec.selector".to_string(),
                kind: FieldErrorKind::Invalid,
                message: "empty selector is invalid for daemonset".to_string(),
                value: Some(gofmt::label_selector(v)),
            });
        }
    }
    errs.extend(podtemplate::validate(template, "spec.template"));
    let rp = podtemplate::restart_policy(template);
    if rp != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            &json!(rp),
            &["Always"],
        ));
    }
    if template
        .and_then(|t| t.pointer("/spec/activeDeadlineSeconds"))
        .is_some_and(|v| !v.is_null())
    {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in DaemonSet is not Supported",
        ));
    }
    validate_nonnegative(spec, "minReadySeconds", "spec.minReadySeconds", &mut errs);
    validate_update_strategy(spec, &mut errs);
    validate_nonnegative(
        spec,
        "revisionHistoryLimit",
        "spec.revisionHistoryLimit",
        &mut errs,
    );
    errs
}

impl Strategy for DaemonSetStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_daemonset(obj);
        let generation = template_generation(obj).max(1);
        set_template_generation(obj, generation);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_daemonset)
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({
            "currentNumberScheduled": 0,
            "desiredNumberScheduled": 0,
            "numberMisscheduled": 0,
            "numberReady": 0,
        }))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        default_daemonset(new);
        let mut generation = template_generation(old);
        if !semantically_equal(new.pointer("/spec/template"), old.pointer("/spec/template")) {
            generation += 1;
        }
        set_template_generation(new, generation);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(new);
        validate_selector_unchanged(new, old, &mut errs);
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Desired", "integer", "", "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/", 0),
            column("Current", "integer", "", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/", 0),
            column("Ready", "integer", "", "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.", 0),
            column("Up-to-date", "integer", "", "The total number of nodes that are running updated daemon pod", 0),
            column("Available", "integer", "", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)", 0),
            column("Node Selector", "string", "", "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/", 0),
            age_column(),
            column("Containers", "string", "", "Names of each container in the template.", 1),
            column("Images", "string", "", "Images referenced by each container in the template.", 1),
            column("Selector", "string", "", "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors", 1),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let (containers, images) = containers_and_images(obj.pointer("/spec/template/spec"));
        let node_selector =
            api::meta::as_string_map(obj.pointer("/spec/template/spec/nodeSelector"));
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            int_cell(obj.pointer("/status/desiredNumberScheduled")),
            int_cell(obj.pointer("/status/currentNumberScheduled")),
            int_cell(obj.pointer("/status/numberReady")),
            int_cell(obj.pointer("/status/updatedNumberScheduled")),
            int_cell(obj.pointer("/status/numberAvailable")),
            Value::from(format_labels(&node_selector)),
            age_cell(obj, now),
            Value::from(containers),
            Value::from(images),
            Value::from(format_label_selector(obj.pointer("/spec/selector"))),
        ]
    }
}
