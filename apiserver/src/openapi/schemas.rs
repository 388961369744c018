//! Schemas of the served kinds for `components.schemas`, generated from the `k8s-openapi` types
//! (their `schemars` implementations carry upstream's descriptions and names such as
//! `io.k8s.api.core.v1.PodSpec`), in OpenAPI 3 form (`#/components/schemas/` references). This
//! is what `kubectl explain` walks.

use k8s_openapi::api::{apps, coordination, core, events};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value};

fn register(gen: &mut SchemaGenerator, info: &api::ResourceInfo) -> bool {
    match (info.group, info.kind) {
        ("", "Pod") => gen.subschema_for::<core::v1::Pod>(),
        ("", "ReplicationController") => gen.subschema_for::<core::v1::ReplicationController>(),
        ("", "Namespace") => gen.subschema_for::<core::v1::Namespace>(),
        ("", "Node") => gen.subschema_for::<core::v1::Node>(),
        ("", "Event") => gen.subschema_for::<core::v1::Event>(),
        ("", "Service") => gen.subschema_for::<core::v1::Service>(),
        ("", "ConfigMap") => gen.subschema_for::<core::v1::ConfigMap>(),
        ("", "Secret") => gen.subschema_for::<core::v1::Secret>(),
        ("", "ServiceAccount") => gen.subschema_for::<core::v1::ServiceAccount>(),
        ("apps", "ReplicaSet") => gen.subschema_for::<apps::v1::ReplicaSet>(),
        ("apps", "Deployment") => gen.subschema_for::<apps::v1::Deployment>(),
        ("coordination.k8s.io", "Lease") => gen.subschema_for::<coordination::v1::Lease>(),
        ("events.k8s.io", "Event") => gen.subschema_for::<events::v1::Event>(),
        _ => return false,
    };
    true
}

/// The definitions of `kinds` and everything they reference, keyed by schema name. Kinds without
/// a typed schema are absent (the caller adds an open object schema).
pub fn definitions(kinds: &[&api::ResourceInfo]) -> Map<String, Value> {
    let mut gen = SchemaSettings::openapi3().into_generator();
    for info in kinds {
        register(&mut gen, info);
    }
    let mut defs = gen.take_definitions(true);
    // OpenAPI 3.0 ignores siblings of `$ref`; upstream wraps references that carry a description
    // in `allOf`, which is what kubectl explain expects.
    for v in defs.values_mut() {
        wrap_refs(v);
    }
    defs
}

fn wrap_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.len() > 1 {
                if let Some(r) = m.remove("$ref") {
                    m.insert(
                        "allOf".into(),
                        Value::Array(vec![serde_json::json!({ "$ref": r })]),
                    );
                }
            }
            for child in m.values_mut() {
                wrap_refs(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(wrap_refs),
        _ => {}
    }
}

/// An open object schema for a kind without a typed schema.
pub fn open_schema(info: &api::ResourceInfo) -> Value {
    serde_json::json!({
        "type": "object",
        "description": format!("{} ({}).", info.kind, info.api_version()),
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
