//! Protobuf bodies of core v1 ResourceQuotas (`kubectl create quota`), LimitRanges and
//! PersistentVolumeClaims: their spec fields (status is never decoded; the strategies reset it).
//! A claim's `dataSource`/`dataSourceRef` are not decoded.

use k8s_pb::api::core::v1 as core;
use serde_json::Value;

use super::{label_selector, object_meta, quantities, Obj};

pub(super) fn resource_quota(q: core::ResourceQuota) -> Value {
    let spec = q.spec.map(|s| {
        let selector = s.scope_selector.map(|sel| {
            let exprs: Vec<Value> = sel
                .match_expressions
                .into_iter()
                .map(|e| {
                    Obj::default()
                        .s("scopeName", e.scope_name)
                        .s("operator", e.operator)
                        .strs("values", e.values)
                        .done()
                })
                .collect();
            Obj::default().list("matchExpressions", exprs).done()
        });
        Obj::default()
            .v("hard", quantities(s.hard))
            .strs("scopes", s.scopes)
            .v("scopeSelector", selector)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(q.metadata)))
        .v("spec", spec)
        .done()
}

pub(super) fn limit_range(l: core::LimitRange) -> Value {
    let spec = l.spec.map(|s| {
        let items: Vec<Value> = s
            .limits
            .into_iter()
            .map(|i| {
                Obj::default()
                    .s("type", i.r#type)
                    .v("max", quantities(i.max))
                    .v("min", quantities(i.min))
                    .v("default", quantities(i.default))
                    .v("defaultRequest", quantities(i.default_request))
                    .v(
                        "maxLimitRequestRatio",
                        quantities(i.max_limit_request_ratio),
                    )
                    .done()
            })
            .collect();
        Obj::default().list("limits", items).done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(l.metadata)))
        .v("spec", spec)
        .done()
}

pub(super) fn persistent_volume_claim(c: core::PersistentVolumeClaim) -> Value {
    let spec = c.spec.map(|s| {
        let resources = s.resources.map(|r| {
            Obj::default()
                .v("limits", quantities(r.limits))
                .v("requests", quantities(r.requests))
                .done()
        });
        Obj::default()
            .strs("accessModes", s.access_modes)
            .v("selector", label_selector(s.selector))
            .v("resources", resources)
            .s("volumeName", s.volume_name)
            .v("storageClassName", s.storage_class_name.map(Value::from))
            .s("volumeMode", s.volume_mode)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(c.metadata)))
        .v("spec", spec)
        .done()
}
