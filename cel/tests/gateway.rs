//! Gateway API's own CRDs (`shared/crds/gateway-api`): every rule compiles within the cost
//! budget, and HTTPRoutes are validated with upstream's messages and paths.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_cel::Validator;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};
use std::path::PathBuf;

fn crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/crds/gateway-api")
}

fn crds() -> Vec<(String, CustomResourceDefinition)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(crd_dir())
        .expect("crd dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        if file.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = match serde::Deserialize::deserialize(doc) {
                Ok(v) => v,
                Err(_) => continue,
            };
            if value.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                continue;
            }
            let crd: CustomResourceDefinition = serde_json::from_value(value).expect("crd");
            out.push((file.display().to_string(), crd));
        }
    }
    out
}

fn validator(name: &str, version: &str) -> Validator {
    let (_, crd) = crds()
        .into_iter()
        .find(|(_, c)| c.metadata.name.as_deref() == Some(name))
        .expect("crd");
    let (i, v) = crd
        .spec
        .versions
        .iter()
        .enumerate()
        .find(|(_, v)| v.name == version)
        .expect("version");
    let schema = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    Validator::compile(
        schema,
        &format!("spec.versions[{i}].schema.openAPIV3Schema"),
    )
    .expect("compiles")
}

#[test]
fn every_gateway_api_rule_compiles_within_budget() {
    let mut total = 0;
    let all = crds();
    assert!(all.len() >= 9, "found {} CRDs", all.len());
    for (file, crd) in &all {
        for (i, v) in crd.spec.versions.iter().enumerate() {
            let Some(schema) = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
            else {
                continue;
            };
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            match Validator::compile(schema, &path) {
                Ok(val) => total += val.len(),
                Err(errs) => panic!("{file} {}: {errs:#?}", v.name),
            }
        }
    }
    assert!(total > 200, "compiled {total} rules");
}

#[test]
fn httproute_v1_has_its_89_rules() {
    assert_eq!(
        validator("httproutes.gateway.networking.k8s.io", "v1").len(),
        89
    );
}

fn route(filters: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
            "hostnames": ["example.com"],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "filters": filters,
                "backendRefs": [{"group": "", "kind": "Service", "name": "svc", "port": 80, "weight": 1}]
            }]
        }
    })
}

fn render(errs: &[api::validation::FieldError]) -> Vec<String> {
    errs.iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

#[test]
fn a_valid_httproute_passes() {
    let v = validator("httproutes.gateway.networking.k8s.io", "v1");
    // As after defaulting, which runs before CEL.
    let ok = route(json!([{"type": "URLRewrite", "urlRewrite": {"hostname": "x.example.com"}}]));
    assert_eq!(render(&v.validate(&ok, None)), Vec::<String>::new());
    assert_eq!(render(&v.validate(&ok, Some(&ok))), Vec::<String>::new());
}

#[test]
fn url_rewrite_filter_without_url_rewrite_is_refused() {
    let v = validator("httproutes.gateway.networking.k8s.io", "v1");
    let bad = route(json!([{"type": "URLRewrite"}]));
    let errs = render(&v.validate(&bad, None));
    assert!(
        errs.contains(&"spec.rules[0].filters[0]: Invalid value: \"object\": filter.urlRewrite must be specified for URLRewrite filter.type".to_owned()),
        "{errs:#?}"
    );
}

#[test]
fn path_match_rules_report_at_the_path() {
    let v = validator("httproutes.gateway.networking.k8s.io", "v1");
    let mut bad = route(json!([]));
    bad["spec"]["rules"][0]["matches"][0]["path"] =
        json!({"type": "PathPrefix", "value": "no-slash"});
    let errs = render(&v.validate(&bad, None));
    assert!(
        errs.iter().any(|e| e.starts_with("spec.rules[0].matches[0].path: Invalid value: \"object\": value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']")),
        "{errs:#?}"
    );
}

#[test]
fn refs_to_the_same_parent_with_and_without_section_are_refused() {
    let v = validator("httproutes.gateway.networking.k8s.io", "v1");
    let mut bad = route(json!([]));
    bad["spec"]["parentRefs"] = json!([
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw", "sectionName": "http"},
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
    ]);
    let errs = render(&v.validate(&bad, None));
    assert!(
        errs.contains(&"spec.parentRefs: Invalid value: \"array\": sectionName must be specified when parentRefs includes 2 or more references to the same parent".to_owned()),
        "{errs:#?}"
    );
}

#[test]
fn gateway_listener_rules() {
    let v = validator("gateways.gateway.networking.k8s.io", "v1");
    let gw = |listeners: Value, addresses: Value| {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw"},
            "spec": {"gatewayClassName": "c", "listeners": listeners, "addresses": addresses}
        })
    };
    let ok = gw(
        json!([{"name": "http", "port": 80, "protocol": "HTTP"}]),
        json!([{"type": "Hostname", "value": "lb.example.com"}]),
    );
    assert_eq!(render(&v.validate(&ok, None)), Vec::<String>::new());
    let bad = gw(
        json!([
            {"name": "http", "port": 80, "protocol": "HTTP", "tls": {"mode": "Terminate"}},
            {"name": "http", "port": 81, "protocol": "HTTP"}
        ]),
        json!([{"type": "Hostname", "value": "Not_A_Host"}]),
    );
    let errs = render(&v.validate(&bad, None));
    for want in [
        "spec.listeners: Invalid value: \"array\": tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",
        "spec.listeners: Invalid value: \"array\": Listener name must be unique within the Gateway",
        "spec.addresses[0]: Invalid value: \"object\": Hostname value must be empty or contain only valid characters (matching ^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)",
    ] {
        assert!(errs.contains(&want.to_owned()), "missing {want}\n{errs:#?}");
    }
}
