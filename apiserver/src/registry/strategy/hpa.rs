//! `autoscaling` HorizontalPodAutoscalers, served as `autoscaling/v2` and `autoscaling/v1` over one
//! storage in the v2 form (upstream's storage version), as upstream's
//! `pkg/registry/autoscaling/horizontalpodautoscaler` and `pkg/apis/autoscaling/validation` define
//! them.
//!
//! - Storage: the v1 strategy converts with [`hpa_convert`](super::hpa_convert) in
//!   [`to_storage`](Strategy::to_storage)/[`from_storage`](Strategy::from_storage); everything
//!   else (defaults, validation, printer) works on the stored v2 form, as upstream's work on its
//!   internal form, so field paths are v2's at both versions (a v1 `targetCPUUtilizationPercentage:
//!   0` is `spec.metrics[0].resource.target.averageUtilization: Invalid value: 0`, as upstream).
//! - Defaults (`v2/defaults.go`): `minReplicas` 1, the cpu 80% metric when there is none, and a
//!   `behavior` that is set gets every unset scaling rule filled. `tolerance` is dropped unless the
//!   stored object already had one (`HPAConfigurableTolerance` is off in 1.33).
//! - Status is a subresource and reset on create; generation is not tracked (1.33).
//! - Table: NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE, upstream's `formatHPAMetrics`.
//!
//! An object whose fields have the wrong JSON types is refused with a 422 on `spec` naming the
//! decoding error (upstream answers 400 from its decoder; here conversion cannot fail).

use super::common::{default_field, object_at};
use super::hpa_convert::{self, cpu_utilization_metric, DEFAULT_CPU_UTILIZATION};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, FieldError};
use k8s_openapi::api::autoscaling::{v1, v2};
use serde_json::{json, Value};

/// The storage form's apiVersion.
const STORAGE_API_VERSION: &str = "autoscaling/v2";
/// `MaxPeriodSeconds` of a scaling policy.
const MAX_PERIOD_SECONDS: i32 = 1800;
/// `MaxStabilizationWindowSeconds` of scaling rules.
const MAX_STABILIZATION_WINDOW_SECONDS: i32 = 3600;

/// The strategy of one served version.
pub struct HorizontalPodAutoscalerStrategy {
    /// true for `autoscaling/v1` (converted to and from the stored v2 form).
    pub v1: bool,
}

/// The typed v2 form of a stored object, or the decoding error.
fn typed(obj: &Value) -> Result<v2::HorizontalPodAutoscaler, String> {
    if obj.get("apiVersion").and_then(Value::as_str) != Some(STORAGE_API_VERSION) {
        // A v1 body that did not decode stays in its own form (see to_storage).
        return match serde_json::from_value::<v1::HorizontalPodAutoscaler>(obj.clone()) {
            Err(e) => Err(e.to_string()),
            Ok(_) => Err("not in the storage form".into()),
        };
    }
    serde_json::from_value(obj.clone()).map_err(|e| e.to_string())
}

fn decode_error(e: String) -> Vec<FieldError> {
    vec![FieldError::invalid(
        "spec",
        "",
        format!("cannot be decoded as a HorizontalPodAutoscaler: {e}"),
    )]
}

// ---- defaults ----

fn scale_up_defaults() -> Value {
    json!({
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ],
    })
}

fn scale_down_defaults() -> Value {
    json!({
        "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
    })
}

/// `copyHPAScalingRules`: the defaults with every non-null field of `given`.
fn scaling_rules(given: Option<&Value>, mut defaults: Value) -> Value {
    if let (Some(Value::Object(g)), Some(d)) = (given, defaults.as_object_mut()) {
        for k in [
            "selectPolicy",
            "stabilizationWindowSeconds",
            "policies",
            "tolerance",
        ] {
            if let Some(v) = g.get(k).filter(|v| !v.is_null()) {
                d.insert(k.to_string(), v.clone());
            }
        }
    }
    defaults
}

/// `SetDefaults_HorizontalPodAutoscaler` (v2) on the stored form.
fn set_defaults(obj: &mut Value) {
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    default_field(spec, "minReplicas", json!(1));
    let no_metrics = match spec.get("metrics") {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    };
    if no_metrics {
        let cpu = cpu_utilization_metric(DEFAULT_CPU_UTILIZATION);
        spec.insert(
            "metrics".into(),
            json!([serde_json::to_value(cpu).unwrap_or_default()]),
        );
    }
    if let Some(Value::Object(b)) = spec.get_mut("behavior") {
        let up = scaling_rules(b.get("scaleUp"), scale_up_defaults());
        let down = scaling_rules(b.get("scaleDown"), scale_down_defaults());
        b.insert("scaleUp".into(), up);
        b.insert("scaleDown".into(), down);
    }
}

fn has_tolerance(obj: &Value) -> bool {
    ["scaleUp", "scaleDown"].iter().any(|r| {
        obj.pointer(&format!("/spec/behavior/{r}/tolerance"))
            .is_some_and(|t| !t.is_null())
    })
}

/// `dropDisabledFields`: `tolerance` (feature gate off in 1.33) unless already in use.
fn drop_tolerance(obj: &mut Value, old: Option<&Value>) {
    if old.is_some_and(has_tolerance) {
        return;
    }
    for r in ["scaleUp", "scaleDown"] {
        if let Some(Value::Object(rules)) = obj.pointer_mut(&format!("/spec/behavior/{r}")) {
            rules.remove("tolerance");
        }
    }
}

// ---- validation (pkg/apis/autoscaling/validation) ----

fn positive(q: &str) -> bool {
    api::quantity::Amount::parse(q).is_ok_and(|a| a.is_positive())
}

/// A Quantity in a message: its text, as Go's `Stringer` rendering.
fn invalid_quantity(path: String, q: &str, msg: &str) -> FieldError {
    FieldError {
        field: path,
        kind: validation::FieldErrorKind::Invalid,
        message: msg.to_string(),
        value: Some(q.to_string()),
    }
}

fn validate_path_segment(value: &str, path: String, errs: &mut Vec<FieldError>) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else {
        for msg in validation::is_valid_path_segment_name(value) {
            errs.push(FieldError::invalid(path.clone(), value, msg));
        }
    }
}

fn validate_ref(kind: &str, name: &str, path: &str, errs: &mut Vec<FieldError>) {
    validate_path_segment(kind, format!("{path}.kind"), errs);
    validate_path_segment(name, format!("{path}.name"), errs);
}

fn validate_spec(spec: &v2::HorizontalPodAutoscalerSpec, min_bound: i32) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(min) = spec.min_replicas.filter(|m| *m < min_bound) {
        errs.push(FieldError::invalid_value(
            "spec.minReplicas",
            &json!(min),
            format!("must be greater than or equal to {min_bound}"),
        ));
    }
    if spec.max_replicas < 1 {
        errs.push(FieldError::invalid_value(
            "spec.maxReplicas",
            &json!(spec.max_replicas),
            "must be greater than 0",
        ));
    }
    if spec.min_replicas.is_some_and(|m| spec.max_replicas < m) {
        errs.push(FieldError::invalid_value(
            "spec.maxReplicas",
            &json!(spec.max_replicas),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let r = &spec.scale_target_ref;
    validate_ref(&r.kind, &r.name, "spec.scaleTargetRef", &mut errs);
    let metrics = spec.metrics.as_deref().unwrap_or_default();
    for (i, m) in metrics.iter().enumerate() {
        validate_metric_spec(m, &format!("spec.metrics[{i}]"), &mut errs);
    }
    if spec.min_replicas == Some(0)
        && !metrics
            .iter()
            .any(|m| m.type_ == "Object" || m.type_ == "External")
    {
        errs.push(FieldError::forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    if let Some(b) = &spec.behavior {
        validate_scaling_rules(b.scale_up.as_ref(), "spec.behavior.scaleUp", &mut errs);
        validate_scaling_rules(b.scale_down.as_ref(), "spec.behavior.scaleDown", &mut errs);
    }
    errs
}

const SELECT_POLICIES: &[&str] = &["Disabled", "Max", "Min"];
const POLICY_TYPES: &[&str] = &["Percent", "Pods"];
const METRIC_SOURCE_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

fn validate_scaling_rules(
    rules: Option<&v2::HPAScalingRules>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(rules) = rules else { return };
    if let Some(w) = rules.stabilization_window_seconds {
        let p = format!("{path}.stabilizationWindowSeconds");
        if w < 0 {
            errs.push(FieldError::invalid_value(
                p.clone(),
                &json!(w),
                "must be greater than or equal to zero",
            ));
        }
        if w > MAX_STABILIZATION_WINDOW_SECONDS {
            errs.push(FieldError::invalid_value(
                p,
                &json!(w),
                format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(s) = rules
        .select_policy
        .as_deref()
        .filter(|s| !SELECT_POLICIES.contains(s))
    {
        errs.push(FieldError::not_supported(
            format!("{path}.selectPolicy"),
            &json!(s),
            SELECT_POLICIES,
        ));
    }
    let policies = rules.policies.as_deref().unwrap_or_default();
    if policies.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, p) in policies.iter().enumerate() {
        let pp = format!("{path}.policies[{i}]");
        if !POLICY_TYPES.contains(&p.type_.as_str()) {
            errs.push(FieldError::not_supported(
                format!("{pp}.type"),
                &json!(p.type_),
                POLICY_TYPES,
            ));
        }
        if p.value <= 0 {
            errs.push(FieldError::invalid_value(
                format!("{pp}.value"),
                &json!(p.value),
                "must be greater than zero",
            ));
        }
        if p.period_seconds <= 0 {
            errs.push(FieldError::invalid_value(
                format!("{pp}.periodSeconds"),
                &json!(p.period_seconds),
                "must be greater than zero",
            ));
        }
        if p.period_seconds > MAX_PERIOD_SECONDS {
            errs.push(FieldError::invalid_value(
                format!("{pp}.periodSeconds"),
                &json!(p.period_seconds),
                format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
}

fn validate_metric_spec(m: &v2::MetricSpec, path: &str, errs: &mut Vec<FieldError>) {
    let ty = m.type_.as_str();
    if ty.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            &json!(ty),
            METRIC_SOURCE_TYPES,
        ));
    }
    // The sources present, in upstream's order; only the first is validated.
    let mut present: Vec<&str> = Vec::new();
    if let Some(s) = &m.object {
        present.push("object");
        if present.len() == 1 {
            let p = format!("{path}.object");
            validate_ref(
                &s.described_object.kind,
                &s.described_object.name,
                &format!("{p}.describedObject"),
                errs,
            );
            validate_metric_identifier(&s.metric, &format!("{p}.metric"), errs);
            validate_metric_target(&s.target, &format!("{p}.target"), errs);
            if s.target.value.is_none() && s.target.average_value.is_none() {
                errs.push(FieldError::required(
                    format!("{p}.target.averageValue"),
                    "must set either a target value or averageValue",
                ));
            }
        }
    }
    if let Some(s) = &m.external {
        present.push("external");
        if present.len() == 1 {
            let p = format!("{path}.external");
            validate_metric_identifier(&s.metric, &format!("{p}.metric"), errs);
            validate_metric_target(&s.target, &format!("{p}.target"), errs);
            match (&s.target.value, &s.target.average_value) {
                (None, None) => errs.push(FieldError::required(
                    format!("{p}.target.averageValue"),
                    "must set either a target value for metric or a per-pod target",
                )),
                (Some(_), Some(_)) => errs.push(FieldError::forbidden(
                    format!("{p}.target.value"),
                    "may not set both a target value for metric and a per-pod target",
                )),
                _ => {}
            }
        }
    }
    if let Some(s) = &m.pods {
        present.push("pods");
        if present.len() == 1 {
            let p = format!("{path}.pods");
            validate_metric_identifier(&s.metric, &format!("{p}.metric"), errs);
            validate_metric_target(&s.target, &format!("{p}.target"), errs);
            if s.target.average_value.is_none() {
                errs.push(FieldError::required(
                    format!("{p}.target.averageValue"),
                    "must specify a positive target averageValue",
                ));
            }
        }
    }
    if let Some(s) = &m.resource {
        present.push("resource");
        if present.len() == 1 {
            let p = format!("{path}.resource");
            if s.name.is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.name"),
                    "must specify a resource name",
                ));
            }
            validate_resource_target(&s.target, &p, errs);
        }
    }
    if let Some(s) = &m.container_resource {
        present.push("containerResource");
        if present.len() == 1 {
            let p = format!("{path}.containerResource");
            if s.name.is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.name"),
                    "must specify a resource name",
                ));
            } else {
                validate_container_resource_name(&s.name, &format!("{p}.name"), errs);
            }
            if s.container.is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.container"),
                    "must specify a container",
                ));
            } else {
                for msg in validation::is_dns1123_label(&s.container) {
                    errs.push(FieldError::invalid(
                        format!("{p}.container"),
                        &s.container,
                        msg,
                    ));
                }
            }
            validate_resource_target(&s.target, &p, errs);
        }
    }
    let expected = match ty {
        "Object" => Some(("object", m.object.is_some())),
        "Pods" => Some(("pods", m.pods.is_some())),
        "Resource" => Some(("resource", m.resource.is_some())),
        "External" => Some(("external", m.external.is_some())),
        "ContainerResource" => Some(("containerResource", m.container_resource.is_some())),
        _ => None,
    };
    match expected {
        Some((field, false)) => errs.push(FieldError::required(
            format!("{path}.{field}"),
            "must populate information for the given metric source",
        )),
        Some(_) => {}
        None => errs.push(FieldError::not_supported(
            format!("{path}.type"),
            &json!(ty),
            METRIC_SOURCE_TYPES,
        )),
    }
    if present.len() != 1 {
        let expected = expected.map(|(f, _)| f).unwrap_or("");
        let mut others: Vec<&str> = present.into_iter().filter(|f| *f != expected).collect();
        others.sort_unstable();
        for f in others {
            errs.push(FieldError::forbidden(
                format!("{path}.{f}"),
                "must populate the given metric source only",
            ));
        }
    }
}

/// The target rules shared by Resource and ContainerResource sources.
fn validate_resource_target(t: &v2::MetricTarget, p: &str, errs: &mut Vec<FieldError>) {
    validate_metric_target(t, &format!("{p}.target"), errs);
    match (&t.average_utilization, &t.average_value) {
        (None, None) => errs.push(FieldError::required(
            format!("{p}.target.averageUtilization"),
            "must set either a target raw value or a target utilization",
        )),
        (Some(_), Some(_)) => errs.push(FieldError::forbidden(
            format!("{p}.target.averageValue"),
            "may not set both a target raw value and a target utilization",
        )),
        _ => {}
    }
}

/// `ValidateContainerResourceName`: a name without a domain must be a standard container resource.
fn validate_container_resource_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    for msg in validation::is_qualified_name(name) {
        errs.push(FieldError::invalid(path, name, msg));
    }
    let standard =
        matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !name.contains('/') && !standard {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource for containers",
        ));
    }
}

fn validate_metric_target(t: &v2::MetricTarget, path: &str, errs: &mut Vec<FieldError>) {
    if t.type_.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(t.type_.as_str(), "Utilization" | "Value" | "AverageValue") {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            &t.type_,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for (key, q) in [("value", &t.value), ("averageValue", &t.average_value)] {
        if let Some(q) = q.as_ref().filter(|q| !positive(&q.0)) {
            errs.push(invalid_quantity(
                format!("{path}.{key}"),
                &q.0,
                "must be positive",
            ));
        }
    }
    if let Some(u) = t.average_utilization.filter(|u| *u < 1) {
        errs.push(FieldError::invalid_value(
            format!("{path}.averageUtilization"),
            &json!(u),
            "must be greater than 0",
        ));
    }
}

fn validate_metric_identifier(id: &v2::MetricIdentifier, path: &str, errs: &mut Vec<FieldError>) {
    if id.name.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.name"),
            "must specify a metric name",
        ));
    } else {
        for msg in validation::is_valid_path_segment_name(&id.name) {
            errs.push(FieldError::invalid(format!("{path}.name"), &id.name, msg));
        }
    }
}

/// `ValidateHorizontalPodAutoscalerStatusUpdate`'s own rules.
fn validate_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let status = obj.get("status");
    super::common::validate_nonnegative(
        status,
        "currentReplicas",
        "status.currentReplicas",
        &mut errs,
    );
    super::common::validate_nonnegative(
        status,
        "desiredReplicas",
        "status.desiredReplicas",
        &mut errs,
    );
    errs
}

// ---- printer (printers.go formatHPAMetrics) ----

fn quantity_text(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or("0").to_string()
}

fn format_metrics(obj: &Value) -> String {
    let specs = obj
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = obj
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let status_of = |i: usize, key: &str| {
        statuses
            .get(i)
            .and_then(|s| s.get(key))
            .filter(|s| s.is_object())
    };
    let mut list: Vec<String> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let ty = spec.get("type").and_then(Value::as_str).unwrap_or("");
        let key = match ty {
            "External" => "external",
            "Pods" => "pods",
            "Object" => "object",
            "Resource" => "resource",
            "ContainerResource" => "containerResource",
            _ => {
                list.push("<unknown type>".into());
                continue;
            }
        };
        let src = spec.get(key).unwrap_or(&Value::Null);
        let target = |k: &str| {
            src.pointer(&format!("/target/{k}"))
                .filter(|v| !v.is_null())
        };
        let current = |k: &str| {
            status_of(i, key)
                .and_then(|s| s.pointer(&format!("/current/{k}")))
                .filter(|v| !v.is_null())
        };
        let unknown = || "<unknown>".to_string();
        let item = match key {
            "external" | "object" => {
                if let Some(avg) = target("averageValue") {
                    let cur = current("averageValue")
                        .map(|v| quantity_text(Some(v)))
                        .unwrap_or_else(unknown);
                    format!("{cur}/{} (avg)", quantity_text(Some(avg)))
                } else {
                    let cur = status_of(i, key)
                        .map(|_| quantity_text(current("value")))
                        .unwrap_or_else(unknown);
                    format!("{cur}/{}", quantity_text(target("value")))
                }
            }
            "pods" => {
                let cur = status_of(i, key)
                    .map(|_| quantity_text(current("averageValue")))
                    .unwrap_or_else(unknown);
                format!("{cur}/{}", quantity_text(target("averageValue")))
            }
            _ => {
                let name = src.get("name").and_then(Value::as_str).unwrap_or("");
                if let Some(avg) = target("averageValue") {
                    let cur = status_of(i, key)
                        .map(|_| quantity_text(current("averageValue")))
                        .unwrap_or_else(unknown);
                    format!("{name}: {cur}/{}", quantity_text(Some(avg)))
                } else {
                    let cur = current("averageUtilization")
                        .and_then(Value::as_i64)
                        .map(|u| format!("{u}%"))
                        .unwrap_or_else(unknown);
                    let tgt = target("averageUtilization")
                        .and_then(Value::as_i64)
                        .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
                    format!("{name}: {cur}/{tgt}")
                }
            }
        };
        list.push(item);
    }
    const MAXIMUM: usize = 2;
    let count = list.len();
    if count > MAXIMUM {
        list.truncate(MAXIMUM);
        return format!("{} + {} more...", list.join(", "), count - MAXIMUM);
    }
    list.join(", ")
}

impl Strategy for HorizontalPodAutoscalerStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        set_defaults(obj);
        drop_tolerance(obj, None);
    }

    /// `v2/defaults.go` on the stored v2 form (not the feature-gated `tolerance` drop).
    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, set_defaults)
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"desiredReplicas": 0}))
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        match typed(obj) {
            Ok(h) => validate_spec(&h.spec.unwrap_or_default(), 1),
            Err(e) => decode_error(e),
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_defaults(new);
        drop_tolerance(new, Some(old));
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let old_zero = old.pointer("/spec/minReplicas").and_then(Value::as_i64) == Some(0);
        let mut errs = match typed(new) {
            Ok(h) => validate_spec(&h.spec.unwrap_or_default(), if old_zero { 0 } else { 1 }),
            Err(e) => decode_error(e),
        };
        errs.extend(validate_status(new));
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Reference", "string", "", "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.", 0),
            column("Targets", "string", "", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization.", 0),
            column("MinPods", "string", "", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.", 0),
            column("MaxPods", "string", "", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.", 0),
            column("Replicas", "string", "", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.", 0),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        // Rows are printed from the v2 form, as upstream prints from its internal one.
        let v2_form;
        let obj = if obj.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1") {
            v2_form = HorizontalPodAutoscalerStrategy { v1: true }.to_storage(obj.clone());
            &v2_form
        } else {
            obj
        };
        let text = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let min = obj
            .pointer("/spec/minReplicas")
            .and_then(Value::as_i64)
            .map_or_else(|| "<unset>".to_string(), |m| m.to_string());
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(format!(
                "{}/{}",
                text("/spec/scaleTargetRef/kind"),
                text("/spec/scaleTargetRef/name")
            )),
            Value::from(format_metrics(obj)),
            Value::from(min),
            Value::from(
                obj.pointer("/spec/maxReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
            ),
            Value::from(
                obj.pointer("/status/currentReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
            ),
            age_cell(obj, now),
        ]
    }

    fn to_storage(&self, obj: Value) -> Value {
        if !self.v1 {
            return obj;
        }
        match serde_json::from_value::<v1::HorizontalPodAutoscaler>(obj.clone()) {
            Ok(h) => serde_json::to_value(hpa_convert::v1_to_v2(h)).unwrap_or(obj),
            // Kept as sent: validation reports the decoding error.
            Err(_) => obj,
        }
    }

    fn from_storage(&self, obj: Value) -> Value {
        if !self.v1 {
            return obj;
        }
        match serde_json::from_value::<v2::HorizontalPodAutoscaler>(obj.clone()) {
            Ok(h) => serde_json::to_value(hpa_convert::v2_to_v1(h)).unwrap_or(obj),
            Err(_) => obj,
        }
    }
}
