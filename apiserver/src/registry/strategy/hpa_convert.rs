//! Conversion of HorizontalPodAutoscalers between `autoscaling/v1` and the storage form
//! `autoscaling/v2`, as upstream's `pkg/apis/autoscaling/v1/conversion.go` does it, through the
//! k8s-openapi types.
//!
//! - v1 `spec.targetCPUUtilizationPercentage` is the v2 metric of type `Resource` for `cpu` with
//!   an `Utilization` target; the first cpu Resource metric gives it back.
//! - Every other v2 metric, the v2 `status.currentMetrics` and `status.conditions` travel in v1
//!   as the annotations `autoscaling.alpha.kubernetes.io/metrics`, `.../current-metrics` and
//!   `.../conditions`, JSON in the shape of Go's `k8s.io/api/autoscaling/v1` `MetricSpec` and
//!   `MetricStatus` (the pre-v2 field names: `targetAverageValue`, `metricName`, …). Those Go types
//!   are not part of the OpenAPI (they exist only inside annotations), so k8s-openapi has none and
//!   the annotation payloads are reshaped as JSON here.
//! - The v2 `spec.behavior` travels as `autoscaling.alpha.kubernetes.io/behavior`, encoded as
//!   upstream encodes its internal type (Go field names: `{"ScaleUp":{"StabilizationWindowSeconds":
//!   0,...}}`; decoding, like Go's, matches field names case-insensitively).
//! - A v1 object without any metric gets the implicit cpu 80% metric (upstream's conversion does
//!   this, since only it sees the annotation metrics).
//!
//! Going v1 → v2, an annotation that does not decode is left in place (upstream refuses the body).

use k8s_openapi::api::autoscaling::{v1, v2};
use serde_json::{json, Map, Value};

/// Non-cpu-utilization metric specs of an object read at v1.
pub const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// The metric statuses of an object read at v1.
pub const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// The conditions of an object read at v1.
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// The v2 scaling behavior of an object read at v1 (upstream marshals its internal type, which has
/// no JSON tags: Go field names, `null` for unset pointers).
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// `autoscaling.DefaultCPUUtilization`.
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;

/// The cpu `Utilization` metric of a v1 `targetCPUUtilizationPercentage`.
pub fn cpu_utilization_metric(percent: i32) -> v2::MetricSpec {
    v2::MetricSpec {
        type_: "Resource".into(),
        resource: Some(v2::ResourceMetricSource {
            name: "cpu".into(),
            target: v2::MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(percent),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn is_cpu_resource(m: &v2::MetricSpec) -> Option<&v2::ResourceMetricSource> {
    m.resource
        .as_ref()
        .filter(|r| m.type_ == "Resource" && r.name == "cpu")
}

/// A stored (v2) object as `autoscaling/v1` serves it.
pub fn v2_to_v1(hpa: v2::HorizontalPodAutoscaler) -> v1::HorizontalPodAutoscaler {
    let mut meta = hpa.metadata;
    let spec = hpa.spec.unwrap_or_default();
    let status = hpa.status.unwrap_or_default();
    let metrics = spec.metrics.unwrap_or_default();
    let target_cpu = metrics
        .iter()
        .find_map(is_cpu_resource)
        .and_then(|r| r.target.average_utilization);
    let others: Vec<Value> = metrics
        .iter()
        .filter(|m| is_cpu_resource(m).is_none_or(|r| r.target.average_utilization.is_none()))
        .map(|m| metric_spec_to_v1(&serde_json::to_value(m).unwrap_or_default()))
        .collect();
    let current = status.current_metrics.unwrap_or_default();
    let current_cpu = current
        .iter()
        .filter(|m| m.type_ == "Resource")
        .filter_map(|m| m.resource.as_ref())
        .filter(|r| r.name == "cpu")
        .filter_map(|r| r.current.average_utilization)
        .next_back();
    let conditions = status.conditions.unwrap_or_default();
    if let Some(b) = &spec.behavior {
        let ann = meta.annotations.get_or_insert_with(Default::default);
        ann.insert(BEHAVIOR_ANNOTATION.into(), go_behavior(b));
    }
    if !others.is_empty() || !current.is_empty() || !conditions.is_empty() {
        let ann = meta.annotations.get_or_insert_with(Default::default);
        if !others.is_empty() {
            ann.insert(METRICS_ANNOTATION.into(), Value::Array(others).to_string());
        }
        if !current.is_empty() {
            let list: Vec<Value> = current
                .iter()
                .map(|m| metric_status_to_v1(&serde_json::to_value(m).unwrap_or_default()))
                .collect();
            ann.insert(
                CURRENT_METRICS_ANNOTATION.into(),
                Value::Array(list).to_string(),
            );
        }
        if !conditions.is_empty() {
            let enc = serde_json::to_string(&conditions).unwrap_or_default();
            ann.insert(CONDITIONS_ANNOTATION.into(), enc);
        }
    }
    let r = spec.scale_target_ref;
    v1::HorizontalPodAutoscaler {
        metadata: meta,
        spec: Some(v1::HorizontalPodAutoscalerSpec {
            max_replicas: spec.max_replicas,
            min_replicas: spec.min_replicas,
            scale_target_ref: v1::CrossVersionObjectReference {
                api_version: r.api_version,
                kind: r.kind,
                name: r.name,
            },
            target_cpu_utilization_percentage: target_cpu,
        }),
        status: Some(v1::HorizontalPodAutoscalerStatus {
            current_cpu_utilization_percentage: current_cpu,
            current_replicas: status.current_replicas.unwrap_or(0),
            desired_replicas: status.desired_replicas,
            last_scale_time: status.last_scale_time,
            observed_generation: status.observed_generation,
        }),
    }
}

/// Takes the annotation `key` out of `ann` when its JSON list decodes with `decode`.
fn take_list<T>(
    ann: &mut std::collections::BTreeMap<String, String>,
    key: &str,
    decode: impl Fn(&Value) -> Option<T>,
) -> Option<Vec<T>> {
    let enc = ann.get(key)?;
    let items: Vec<Value> = serde_json::from_str(enc).ok()?;
    let out: Option<Vec<T>> = items.iter().map(decode).collect();
    let out = out?;
    ann.remove(key);
    Some(out)
}

/// An `autoscaling/v1` object in the storage form (v2).
pub fn v1_to_v2(hpa: v1::HorizontalPodAutoscaler) -> v2::HorizontalPodAutoscaler {
    let mut meta = hpa.metadata;
    let spec = hpa.spec.unwrap_or_default();
    let status = hpa.status.unwrap_or_default();
    let mut ann = meta.annotations.take().unwrap_or_default();
    let mut metrics: Vec<v2::MetricSpec> = take_list(&mut ann, METRICS_ANNOTATION, |v| {
        serde_json::from_value(metric_spec_to_v2(v)).ok()
    })
    .unwrap_or_default();
    if let Some(p) = spec.target_cpu_utilization_percentage {
        metrics.push(cpu_utilization_metric(p));
    }
    if metrics.is_empty() {
        metrics.push(cpu_utilization_metric(DEFAULT_CPU_UTILIZATION));
    }
    let current = take_list(&mut ann, CURRENT_METRICS_ANNOTATION, |v| {
        serde_json::from_value::<v2::MetricStatus>(metric_status_to_v2(v)).ok()
    })
    .or_else(|| {
        status.current_cpu_utilization_percentage.map(|p| {
            vec![v2::MetricStatus {
                type_: "Resource".into(),
                resource: Some(v2::ResourceMetricStatus {
                    name: "cpu".into(),
                    current: v2::MetricValueStatus {
                        average_utilization: Some(p),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]
        })
    });
    let behavior = ann.get(BEHAVIOR_ANNOTATION).and_then(|enc| {
        let v: Value = serde_json::from_str(enc).ok()?;
        serde_json::from_value::<v2::HorizontalPodAutoscalerBehavior>(from_go_fields(&v)).ok()
    });
    if behavior.is_some() {
        ann.remove(BEHAVIOR_ANNOTATION);
    }
    let conditions = take_list(&mut ann, CONDITIONS_ANNOTATION, |v| {
        serde_json::from_value::<v2::HorizontalPodAutoscalerCondition>(v.clone()).ok()
    });
    if !ann.is_empty() {
        meta.annotations = Some(ann);
    }
    let r = spec.scale_target_ref;
    v2::HorizontalPodAutoscaler {
        metadata: meta,
        spec: Some(v2::HorizontalPodAutoscalerSpec {
            behavior,
            max_replicas: spec.max_replicas,
            metrics: Some(metrics),
            min_replicas: spec.min_replicas,
            scale_target_ref: v2::CrossVersionObjectReference {
                api_version: r.api_version,
                kind: r.kind,
                name: r.name,
            },
        }),
        status: Some(v2::HorizontalPodAutoscalerStatus {
            conditions,
            current_metrics: current,
            current_replicas: Some(status.current_replicas).filter(|n| *n != 0),
            desired_replicas: status.desired_replicas,
            last_scale_time: status.last_scale_time,
            observed_generation: status.observed_generation,
        }),
    }
}

// ---- annotation payloads: Go's autoscaling/v1 MetricSpec / MetricStatus shapes ----

/// A JSON object of the present (non-null) entries.
fn obj(entries: &[(&str, Option<&Value>)]) -> Value {
    let mut m = Map::new();
    for (k, v) in entries {
        if let Some(v) = v.filter(|v| !v.is_null()) {
            m.insert((*k).to_string(), v.clone());
        }
    }
    Value::Object(m)
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

/// Go's zero `resource.Quantity` marshals as `"0"`: non-pointer quantities of the v1 shapes.
fn or_zero(v: Option<&Value>) -> Value {
    v.filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| json!("0"))
}

/// The source member of a metric (`object`, `pods`, …) converted by `f`, with `type`.
fn reshape(m: &Value, f: impl Fn(&str, &Value) -> Option<Value>) -> Value {
    let mut out = Map::new();
    if let Some(t) = m.get("type") {
        out.insert("type".into(), t.clone());
    }
    for key in [
        "object",
        "pods",
        "resource",
        "containerResource",
        "external",
    ] {
        if let Some(src) = m.get(key).filter(|s| s.is_object()) {
            if let Some(v) = f(key, src) {
                out.insert(key.into(), v);
            }
        }
    }
    Value::Object(out)
}

/// v2 `MetricSpec` JSON → v1 annotation `MetricSpec` JSON.
fn metric_spec_to_v1(m: &Value) -> Value {
    reshape(m, |key, s| {
        let t = |k: &str| at(s, &["target", k]);
        let name = at(s, &["metric", "name"]);
        let selector = at(s, &["metric", "selector"]);
        Some(match key {
            "object" => {
                let target_value = or_zero(t("value"));
                obj(&[
                    ("target", s.get("describedObject")),
                    ("metricName", name),
                    ("targetValue", Some(&target_value)),
                    ("selector", selector),
                    ("averageValue", t("averageValue")),
                ])
            }
            "pods" => {
                let avg = or_zero(t("averageValue"));
                obj(&[
                    ("metricName", name),
                    ("targetAverageValue", Some(&avg)),
                    ("selector", selector),
                ])
            }
            "resource" | "containerResource" => obj(&[
                ("name", s.get("name")),
                ("targetAverageUtilization", t("averageUtilization")),
                ("targetAverageValue", t("averageValue")),
                ("container", s.get("container")),
            ]),
            _ => obj(&[
                ("metricName", name),
                ("metricSelector", selector),
                ("targetValue", t("value")),
                ("targetAverageValue", t("averageValue")),
            ]),
        })
    })
}

/// v1 annotation `MetricSpec` JSON → v2 `MetricSpec` JSON.
fn metric_spec_to_v2(m: &Value) -> Value {
    reshape(m, |key, s| {
        let metric = obj(&[
            ("name", s.get("metricName")),
            (
                "selector",
                s.get(if key == "external" {
                    "metricSelector"
                } else {
                    "selector"
                }),
            ),
        ]);
        let target = |ty: &str, entries: &[(&str, Option<&Value>)]| {
            let mut t = obj(entries);
            if let Some(m) = t.as_object_mut() {
                m.insert("type".into(), json!(ty));
            }
            t
        };
        Some(match key {
            "object" => {
                let avg = s.get("averageValue").filter(|v| !v.is_null());
                let ty = if avg.is_none() {
                    "Value"
                } else {
                    "AverageValue"
                };
                let value = or_zero(s.get("targetValue"));
                json!({
                    "describedObject": s.get("target").cloned().unwrap_or_else(|| json!({})),
                    "metric": metric,
                    "target": target(ty, &[("value", Some(&value)), ("averageValue", avg)]),
                })
            }
            "pods" => {
                let avg = or_zero(s.get("targetAverageValue"));
                json!({"metric": metric, "target": target("AverageValue", &[("averageValue", Some(&avg))])})
            }
            "resource" | "containerResource" => {
                let util = s.get("targetAverageUtilization").filter(|v| !v.is_null());
                let ty = if util.is_none() {
                    "AverageValue"
                } else {
                    "Utilization"
                };
                let mut out = obj(&[("name", s.get("name")), ("container", s.get("container"))]);
                if let Some(o) = out.as_object_mut() {
                    o.insert(
                        "target".into(),
                        target(
                            ty,
                            &[
                                ("averageValue", s.get("targetAverageValue")),
                                ("averageUtilization", util),
                            ],
                        ),
                    );
                }
                out
            }
            _ => {
                let value = s.get("targetValue").filter(|v| !v.is_null());
                let ty = if value.is_none() {
                    "AverageValue"
                } else {
                    "Value"
                };
                json!({
                    "metric": metric,
                    "target": target(ty, &[("value", value), ("averageValue", s.get("targetAverageValue"))]),
                })
            }
        })
    })
}

/// v2 `MetricStatus` JSON → v1 annotation `MetricStatus` JSON.
fn metric_status_to_v1(m: &Value) -> Value {
    reshape(m, |key, s| {
        let c = |k: &str| at(s, &["current", k]);
        let name = at(s, &["metric", "name"]);
        let selector = at(s, &["metric", "selector"]);
        Some(match key {
            "object" => {
                let value = or_zero(c("value"));
                obj(&[
                    ("target", s.get("describedObject")),
                    ("metricName", name),
                    ("currentValue", Some(&value)),
                    ("selector", selector),
                    ("averageValue", c("averageValue")),
                ])
            }
            "pods" => {
                let avg = or_zero(c("averageValue"));
                obj(&[
                    ("metricName", name),
                    ("currentAverageValue", Some(&avg)),
                    ("selector", selector),
                ])
            }
            "resource" | "containerResource" => {
                let avg = or_zero(c("averageValue"));
                obj(&[
                    ("name", s.get("name")),
                    ("currentAverageUtilization", c("averageUtilization")),
                    ("currentAverageValue", Some(&avg)),
                    ("container", s.get("container")),
                ])
            }
            _ => {
                let value = or_zero(c("value"));
                obj(&[
                    ("metricName", name),
                    ("metricSelector", selector),
                    ("currentValue", Some(&value)),
                    ("currentAverageValue", c("averageValue")),
                ])
            }
        })
    })
}

/// v1 annotation `MetricStatus` JSON → v2 `MetricStatus` JSON.
fn metric_status_to_v2(m: &Value) -> Value {
    reshape(m, |key, s| {
        let metric = obj(&[
            ("name", s.get("metricName")),
            (
                "selector",
                s.get(if key == "external" {
                    "metricSelector"
                } else {
                    "selector"
                }),
            ),
        ]);
        Some(match key {
            "object" => json!({
                "describedObject": s.get("target").cloned().unwrap_or_else(|| json!({})),
                "metric": metric,
                "current": obj(&[("value", Some(&or_zero(s.get("currentValue")))), ("averageValue", s.get("averageValue"))]),
            }),
            "pods" => json!({
                "metric": metric,
                "current": {"averageValue": or_zero(s.get("currentAverageValue"))},
            }),
            "resource" | "containerResource" => {
                let mut out = obj(&[("name", s.get("name")), ("container", s.get("container"))]);
                if let Some(o) = out.as_object_mut() {
                    o.insert(
                        "current".into(),
                        obj(&[
                            ("averageValue", Some(&or_zero(s.get("currentAverageValue")))),
                            ("averageUtilization", s.get("currentAverageUtilization")),
                        ]),
                    );
                }
                out
            }
            _ => json!({
                "metric": metric,
                "current": obj(&[("value", Some(&or_zero(s.get("currentValue")))), ("averageValue", s.get("currentAverageValue"))]),
            }),
        })
    })
}

// ---- the behavior annotation: Go's encoding of the internal type ----

fn go_opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_string())
}

fn go_str(v: Option<&str>) -> String {
    v.map_or_else(|| "null".to_string(), |s| Value::from(s).to_string())
}

fn go_rules(r: Option<&v2::HPAScalingRules>) -> String {
    let Some(r) = r else {
        return "null".into();
    };
    let policies = r.policies.as_ref().map_or_else(
        || "null".to_string(),
        |ps| {
            let items: Vec<String> = ps
                .iter()
                .map(|p| {
                    format!(
                        r#"{{"Type":{},"Value":{},"PeriodSeconds":{}}}"#,
                        Value::from(p.type_.as_str()),
                        p.value,
                        p.period_seconds
                    )
                })
                .collect();
            format!("[{}]", items.join(","))
        },
    );
    format!(
        r#"{{"StabilizationWindowSeconds":{},"SelectPolicy":{},"Policies":{},"Tolerance":{}}}"#,
        go_opt(r.stabilization_window_seconds),
        go_str(r.select_policy.as_deref()),
        policies,
        go_str(r.tolerance.as_ref().map(|q| q.0.as_str())),
    )
}

/// `json.Marshal` of upstream's internal `HorizontalPodAutoscalerBehavior`.
fn go_behavior(b: &v2::HorizontalPodAutoscalerBehavior) -> String {
    format!(
        r#"{{"ScaleUp":{},"ScaleDown":{}}}"#,
        go_rules(b.scale_up.as_ref()),
        go_rules(b.scale_down.as_ref())
    )
}

/// The v2 JSON of a Go-encoded behavior: field names matched case-insensitively, nulls dropped.
fn from_go_fields(v: &Value) -> Value {
    const FIELDS: &[&str] = &[
        "scaleUp",
        "scaleDown",
        "stabilizationWindowSeconds",
        "selectPolicy",
        "policies",
        "tolerance",
        "type",
        "value",
        "periodSeconds",
    ];
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .filter_map(|(k, v)| {
                    let name = FIELDS.iter().find(|f| f.eq_ignore_ascii_case(k))?;
                    Some((name.to_string(), from_go_fields(v)))
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(from_go_fields).collect()),
        other => other.clone(),
    }
}
