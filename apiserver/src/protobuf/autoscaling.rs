//! `autoscaling/v1` and `autoscaling/v2` HorizontalPodAutoscalers from protobuf, as `kubectl
//! autoscale` sends them: the whole spec (v2: every metric source and the scaling behavior).
//! Status is not decoded (the strategy resets it).

use k8s_pb::api::autoscaling::{v1, v2};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use super::{label_selector, object_meta, Obj};

fn quantity(q: Option<Quantity>) -> Option<Value> {
    q.and_then(|q| q.string).map(Value::String)
}

fn ref_v1(r: Option<v1::CrossVersionObjectReference>) -> Value {
    let r = r.unwrap_or_default();
    Obj::default()
        .s("kind", r.kind)
        .s("name", r.name)
        .s("apiVersion", r.api_version)
        .done()
}

fn ref_v2(r: Option<v2::CrossVersionObjectReference>) -> Value {
    let r = r.unwrap_or_default();
    Obj::default()
        .s("kind", r.kind)
        .s("name", r.name)
        .s("apiVersion", r.api_version)
        .done()
}

/// A decoded `autoscaling/v1` HorizontalPodAutoscaler (without `apiVersion`/`kind`).
pub(super) fn hpa_v1(h: v1::HorizontalPodAutoscaler) -> Value {
    let spec = h.spec.map(|s| {
        Obj::default()
            .v("scaleTargetRef", Some(ref_v1(s.scale_target_ref)))
            .i("minReplicas", s.min_replicas.map(i64::from))
            .i("maxReplicas", Some(i64::from(s.max_replicas.unwrap_or(0))))
            .i(
                "targetCPUUtilizationPercentage",
                s.target_cpu_utilization_percentage.map(i64::from),
            )
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(h.metadata)))
        .v("spec", spec)
        .done()
}

fn target(t: Option<v2::MetricTarget>) -> Value {
    let t = t.unwrap_or_default();
    Obj::default()
        .s("type", t.r#type)
        .v("value", quantity(t.value))
        .v("averageValue", quantity(t.average_value))
        .i("averageUtilization", t.average_utilization.map(i64::from))
        .done()
}

fn identifier(m: Option<v2::MetricIdentifier>) -> Value {
    let m = m.unwrap_or_default();
    Obj::default()
        .s("name", m.name)
        .v("selector", label_selector(m.selector))
        .done()
}

fn metric(m: v2::MetricSpec) -> Value {
    let object = m.object.map(|o| {
        Obj::default()
            .v("describedObject", Some(ref_v2(o.described_object)))
            .v("target", Some(target(o.target)))
            .v("metric", Some(identifier(o.metric)))
            .done()
    });
    let pods = m.pods.map(|p| {
        Obj::default()
            .v("metric", Some(identifier(p.metric)))
            .v("target", Some(target(p.target)))
            .done()
    });
    let resource = m.resource.map(|r| {
        Obj::default()
            .s("name", r.name)
            .v("target", Some(target(r.target)))
            .done()
    });
    let container = m.container_resource.map(|r| {
        Obj::default()
            .s("name", r.name)
            .v("target", Some(target(r.target)))
            .s("container", r.container)
            .done()
    });
    let external = m.external.map(|e| {
        Obj::default()
            .v("metric", Some(identifier(e.metric)))
            .v("target", Some(target(e.target)))
            .done()
    });
    Obj::default()
        .s("type", m.r#type)
        .v("object", object)
        .v("pods", pods)
        .v("resource", resource)
        .v("containerResource", container)
        .v("external", external)
        .done()
}

fn rules(r: Option<v2::HpaScalingRules>) -> Option<Value> {
    let r = r?;
    let policies = r
        .policies
        .into_iter()
        .map(|p| {
            Obj::default()
                .s("type", p.r#type)
                .i("value", p.value.map(i64::from))
                .i("periodSeconds", p.period_seconds.map(i64::from))
                .done()
        })
        .collect();
    Some(
        Obj::default()
            .i(
                "stabilizationWindowSeconds",
                r.stabilization_window_seconds.map(i64::from),
            )
            .s("selectPolicy", r.select_policy)
            .list("policies", policies)
            .v("tolerance", quantity(r.tolerance))
            .done(),
    )
}

/// A decoded `autoscaling/v2` HorizontalPodAutoscaler (without `apiVersion`/`kind`).
pub(super) fn hpa_v2(h: v2::HorizontalPodAutoscaler) -> Value {
    let spec = h.spec.map(|s| {
        let behavior = s.behavior.map(|b| {
            Obj::default()
                .v("scaleUp", rules(b.scale_up))
                .v("scaleDown", rules(b.scale_down))
                .done()
        });
        Obj::default()
            .v("scaleTargetRef", Some(ref_v2(s.scale_target_ref)))
            .i("minReplicas", s.min_replicas.map(i64::from))
            .i("maxReplicas", Some(i64::from(s.max_replicas.unwrap_or(0))))
            .list("metrics", s.metrics.into_iter().map(metric).collect())
            .v("behavior", behavior)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(h.metadata)))
        .v("spec", spec)
        .done()
}

#[cfg(test)]
mod tests {
    use super::super::{decode_object, MAGIC};
    use k8s_pb::api::autoscaling::{v1, v2};
    use k8s_pb::apimachinery::pkg::api::resource::Quantity;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;
    use serde_json::json;

    fn envelope(api_version: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some("HorizontalPodAutoscaler".into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(u.encode_to_vec());
        out
    }

    fn meta() -> Option<meta::ObjectMeta> {
        Some(meta::ObjectMeta {
            name: Some("web".into()),
            ..Default::default()
        })
    }

    #[test]
    fn decodes_hpas_like_kubectl_autoscale_at_both_versions() {
        let h = v1::HorizontalPodAutoscaler {
            metadata: meta(),
            spec: Some(v1::HorizontalPodAutoscalerSpec {
                scale_target_ref: Some(v1::CrossVersionObjectReference {
                    kind: Some("Deployment".into()),
                    name: Some("web".into()),
                    api_version: Some("apps/v1".into()),
                }),
                min_replicas: Some(2),
                max_replicas: Some(5),
                target_cpu_utilization_percentage: Some(60),
            }),
            status: Some(Default::default()),
        };
        assert_eq!(
            decode_object(&envelope("autoscaling/v1", h.encode_to_vec())),
            Ok(
                json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}})
            )
        );
        let h = v2::HorizontalPodAutoscaler {
            metadata: meta(),
            spec: Some(v2::HorizontalPodAutoscalerSpec {
                scale_target_ref: Some(v2::CrossVersionObjectReference {
                    kind: Some("Deployment".into()),
                    name: Some("web".into()),
                    api_version: Some("apps/v1".into()),
                }),
                min_replicas: None,
                max_replicas: Some(5),
                metrics: vec![v2::MetricSpec {
                    r#type: Some("Resource".into()),
                    resource: Some(v2::ResourceMetricSource {
                        name: Some("cpu".into()),
                        target: Some(v2::MetricTarget {
                            r#type: Some("Utilization".into()),
                            average_utilization: Some(60),
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                }],
                behavior: Some(v2::HorizontalPodAutoscalerBehavior {
                    scale_up: None,
                    scale_down: Some(v2::HpaScalingRules {
                        stabilization_window_seconds: Some(30),
                        policies: vec![v2::HpaScalingPolicy {
                            r#type: Some("Pods".into()),
                            value: Some(1),
                            period_seconds: Some(60),
                        }],
                        tolerance: Some(Quantity {
                            string: Some("0.05".into()),
                        }),
                        ..Default::default()
                    }),
                }),
            }),
            status: None,
        };
        assert_eq!(
            decode_object(&envelope("autoscaling/v2", h.encode_to_vec())),
            Ok(
                json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "maxReplicas": 5,
                         "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
                         "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}], "tolerance": "0.05"}}}})
            )
        );
    }
}
