//! The real Gateway API CRDs (`../shared/crds/gateway-api/`): every version's schema passes the
//! apiserver's schema checks, sample objects validate, and a mistyped field gets upstream's
//! message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schema::{validate_crd_schema, ListType, Structural};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;

fn crd_dir() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for base in [
        here.join("../../shared/crds/gateway-api"),
        PathBuf::from("/work/shared/crds/gateway-api"),
    ] {
        if base.is_dir() {
            return base;
        }
    }
    panic!("the shared CRDs are missing (expected ../shared/crds/gateway-api beside the checkout)");
}

fn crds() -> Vec<CustomResourceDefinition> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(crd_dir())
        .expect("crd dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v: Value = Value::deserialize(doc).expect("yaml");
            if v.get("kind") == Some(&json!("CustomResourceDefinition")) {
                out.push(serde_json::from_value(v).expect("crd"));
            }
        }
    }
    out
}

fn structural(plural: &str, version: &str) -> Structural {
    let crd = crds()
        .into_iter()
        .find(|c| c.spec.names.plural == plural)
        .expect("crd");
    let v = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .expect("version");
    let props = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    Structural::new(props)
}

#[test]
fn every_gateway_api_crd_version_passes_the_schema_checks() {
    let crds = crds();
    assert!(crds.len() >= 10, "found {} CRDs", crds.len());
    for crd in &crds {
        for (i, v) in crd.spec.versions.iter().enumerate() {
            let props = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema");
            let errs =
                validate_crd_schema(props, &format!("spec.versions[{i}].schema.openAPIV3Schema"));
            assert!(
                errs.is_empty(),
                "{} {}: {:?}",
                crd.spec.names.plural,
                v.name,
                errs.iter().map(|e| e.to_string()).collect::<Vec<_>>()
            );
            if v.subresources.as_ref().is_some_and(|s| s.status.is_some()) {
                let errs = schema::validate_status_root(props, "spec.validation.openAPIV3Schema");
                assert!(errs.is_empty(), "{}: {:?}", crd.spec.names.plural, errs);
            }
        }
    }
}

fn check_valid(s: &Structural, mut obj: Value) -> Value {
    let pruned = s.prune(&mut obj);
    assert!(pruned.is_empty(), "pruned {pruned:?}");
    s.apply_defaults(&mut obj);
    let errs: Vec<String> = s.validate(&obj).iter().map(|e| e.to_string()).collect();
    assert!(errs.is_empty(), "{errs:?}");
    obj
}

#[test]
fn sample_gateway_class_gateway_and_httproute_validate() {
    let gc = structural("gatewayclasses", "v1");
    check_valid(
        &gc,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "example"},
               "spec": {"controllerName": "example.com/gateway-controller"}}),
    );
    let gw = structural("gateways", "v1");
    let obj = check_valid(
        &gw,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "gw", "namespace": "default"},
               "spec": {"gatewayClassName": "example",
                        "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}),
    );
    // Defaults applied: allowedRoutes.namespaces.from = Same.
    assert_eq!(
        obj["spec"]["listeners"][0]["allowedRoutes"]["namespaces"]["from"],
        json!("Same")
    );
    let hr = structural("httproutes", "v1");
    let obj = check_valid(
        &hr,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
               "metadata": {"name": "r", "namespace": "default"},
               "spec": {"parentRefs": [{"name": "gw"}],
                        "hostnames": ["example.com"],
                        "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                   "backendRefs": [{"name": "svc", "port": 8080}]}]}}),
    );
    assert_eq!(
        obj["spec"]["rules"][0]["backendRefs"][0]["weight"],
        json!(1)
    );
    assert_eq!(hr.list_type(&["spec", "hostnames"]), Some(ListType::Atomic));
    assert_eq!(
        gw.list_type(&["spec", "listeners"]),
        Some(ListType::Map(vec!["name".into()]))
    );
    assert_eq!(
        hr.schema_at_json_path(".spec.rules[0].backendRefs")
            .and_then(|s| s.type_.as_deref()),
        Some("array")
    );
}

#[test]
fn mistyped_and_invalid_fields_get_upstream_messages() {
    let gw = structural("gateways", "v1");
    let obj = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                     "metadata": {"name": "gw"},
                     "spec": {"gatewayClassName": 5,
                              "listeners": [{"name": "http", "protocol": "HTTP", "port": 70000}]}});
    let errs: Vec<String> = gw.validate(&obj).iter().map(|e| e.to_string()).collect();
    assert!(
        errs.contains(&r#"spec.gatewayClassName: Invalid value: "integer": spec.gatewayClassName in body must be of type string: "integer""#.to_string()),
        "{errs:?}"
    );
    assert!(
        errs.contains(&"spec.listeners[0].port: Invalid value: 70000: spec.listeners[0].port in body should be less than or equal to 65535".to_string()),
        "{errs:?}"
    );
    let dup = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                     "metadata": {"name": "gw"},
                     "spec": {"gatewayClassName": "x",
                              "listeners": [{"name": "a", "protocol": "HTTP", "port": 80},
                                            {"name": "a", "protocol": "HTTP", "port": 81}]}});
    let errs: Vec<String> = gw.validate(&dup).iter().map(|e| e.to_string()).collect();
    assert!(
        errs.contains(
            &r#"spec.listeners[1]: Duplicate value: map[string]interface {}{"name":"a"}"#
                .to_string()
        ),
        "{errs:?}"
    );
}
