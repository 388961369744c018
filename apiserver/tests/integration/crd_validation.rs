//! Custom resources validated as kube-apiserver validates them, through the router: pruning and
//! `fieldValidation`, defaults on create and on read, structural-schema errors all in one 422 with
//! upstream's text, CEL rules with their messages (Gateway API's own), server-side apply by the
//! schema's list types, and CRDs refused for what upstream refuses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::Router;
use serde_json::{json, Value};

use crate::common;
use common::http::{call_raw, causes, get, patch, post, put};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn widget_crd(spec_props: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": spec_props},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}}]
        }
    })
}

/// Creates (or replaces) a CRD and waits until it is Established.
async fn install(app: &Router, crd: Value) {
    let name = crd["metadata"]["name"].as_str().unwrap().to_string();
    let (code, body) = post(app, CRDS, crd.clone()).await;
    if code == 409 {
        let (_, current) = get(app, &format!("{CRDS}/{name}")).await;
        let mut next = crd;
        next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        let (code, body) = put(app, &format!("{CRDS}/{name}"), next).await;
        assert_eq!(code, 200, "{body}");
    } else {
        assert_eq!(code, 201, "{body}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, crd) = get(app, &format!("{CRDS}/{name}")).await;
        let established = crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        if established {
            // Served right after; the new schema too.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{crd}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn unknown_fields_are_pruned_refused_with_strict_and_warned_about_with_warn() {
    let app = common::router().await;
    install(&app, widget_crd(json!({"size": {"type": "integer"}}))).await;
    let body = widget("pruned", json!({"size": 1, "shape": "round"}));
    let (code, created) = post(&app, WIDGETS, body.clone()).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"], json!({"size": 1}));

    let mut strict = body.clone();
    strict["metadata"]["name"] = json!("strict");
    let (code, status) = call_raw(
        &app,
        "POST",
        &format!("{WIDGETS}?fieldValidation=Strict"),
        "application/json",
        "application/json",
        strict.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"strict decoding error: unknown field "spec.shape""#),
        "{status}"
    );
}

#[tokio::test]
async fn defaults_apply_on_create_and_to_objects_stored_before_the_default() {
    let app = common::router().await;
    install(&app, widget_crd(json!({"size": {"type": "integer"}}))).await;
    let (code, _) = post(&app, WIDGETS, widget("old", json!({}))).await;
    assert_eq!(code, 201);
    install(
        &app,
        widget_crd(
            json!({"size": {"type": "integer"}, "color": {"type": "string", "default": "blue"}}),
        ),
    )
    .await;
    let (_, created) = post(&app, WIDGETS, widget("new", json!({}))).await;
    assert_eq!(created["spec"]["color"], "blue", "{created}");
    let (_, old) = get(&app, &format!("{WIDGETS}/old")).await;
    assert_eq!(old["spec"]["color"], "blue", "{old}");
}

#[tokio::test]
async fn schema_errors_come_all_in_one_422_with_upstreams_text() {
    let app = common::router().await;
    install(
        &app,
        widget_crd(json!({
            "replicas": {"type": "integer", "minimum": 0},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "name": {"type": "string", "maxLength": 3}
        })),
    )
    .await;
    let (code, status) = post(
        &app,
        WIDGETS,
        widget(
            "bad",
            json!({"replicas": "three", "mode": "medium", "name": "toolong"}),
        ),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"Widget.example.com "bad" is invalid: ["#),
        "{message}"
    );
    let got = causes(&status);
    assert!(
        got.contains(&r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#.to_string()),
        "{got:?}"
    );
    assert!(
        got.contains(
            &r#"spec.mode: Unsupported value: "medium": supported values: "fast", "slow""#
                .to_string()
        ),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|c| c.starts_with("spec.name: Too long: may not be more than 3 bytes")),
        "{got:?}"
    );
}

#[tokio::test]
async fn cel_rules_refuse_with_their_messages() {
    let app = common::router().await;
    let mut crd = widget_crd(json!({"min": {"type": "integer"}, "max": {"type": "integer"}}));
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["x-kubernetes-validations"] =
        json!([{"rule": "self.min <= self.max", "message": "min must not exceed max"}]);
    install(&app, crd).await;
    let (code, _) = post(&app, WIDGETS, widget("ok", json!({"min": 1, "max": 2}))).await;
    assert_eq!(code, 201);
    let (code, status) = post(&app, WIDGETS, widget("bad", json!({"min": 3, "max": 2}))).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [r#"spec: Invalid value: "object": min must not exceed max"#]
    );
    // Mistyped data: the rules are not run on it.
    let (code, status) = post(
        &app,
        WIDGETS,
        widget("typed", json!({"min": "a", "max": 2})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let got = causes(&status);
    assert!(
        got.iter()
            .any(|c| c
                .contains("some validation rules were not checked because the object was invalid")),
        "{got:?}"
    );
}

#[tokio::test]
async fn gateway_api_rules_refuse_an_url_rewrite_filter_without_its_field() {
    let app = common::router().await;
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/crds/gateway-api/gateway.networking.k8s.io_httproutes.yaml");
    let text = std::fs::read_to_string(&path).expect("the Gateway API CRDs beside the checkout");
    let crd: Value = serde_yaml::from_str(&text).unwrap();
    install(&app, crd).await;
    let route = |filter: Value| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r"},
            "spec": {"parentRefs": [{"name": "gw"}],
                "rules": [{"filters": [filter], "backendRefs": [{"name": "svc", "port": 80}]}]}})
    };
    let uri = "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes";
    let (code, status) = post(&app, uri, route(json!({"type": "URLRewrite"}))).await;
    assert_eq!(code, 422, "{status}");
    let got = causes(&status);
    assert!(
        got.iter()
            .any(|c| c.ends_with("filter.urlRewrite must be specified for URLRewrite filter.type")),
        "{got:?}"
    );
    let ok = route(json!({"type": "URLRewrite", "urlRewrite": {"hostname": "example.com"}}));
    let (code, body) = post(&app, uri, ok).await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test]
async fn server_side_apply_merges_list_type_map_entries_by_key() {
    let app = common::router().await;
    install(
        &app,
        widget_crd(json!({"ports": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "port": {"type": "integer"}}}
        }})),
    )
    .await;
    let apply = |manager: &str, ports: Value| {
        let app = app.clone();
        let manager = manager.to_string();
        async move {
            patch(
                &app,
                &format!("{WIDGETS}/w?fieldManager={manager}"),
                "application/apply-patch+yaml",
                widget("w", json!({"ports": ports})),
            )
            .await
        }
    };
    let (code, _) = apply("a", json!([{"name": "http", "port": 80}])).await;
    assert_eq!(code, 201);
    let (code, merged) = apply("b", json!([{"name": "https", "port": 443}])).await;
    assert_eq!(code, 200, "{merged}");
    let names: Vec<&str> = merged["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["http", "https"]);
    let (code, conflict) = apply("b", json!([{"name": "http", "port": 8080}])).await;
    assert_eq!(code, 409, "{conflict}");
}

#[tokio::test]
async fn crds_are_refused_for_what_upstream_refuses() {
    let app = common::router().await;
    let mut builtin = widget_crd(json!({}));
    builtin["metadata"]["name"] = json!("widgets.apps.k8s.io");
    builtin["spec"]["group"] = json!("apps.k8s.io");
    builtin["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "unapproved"});
    let mut misnamed = widget_crd(json!({}));
    misnamed["metadata"]["name"] = json!("gadgets.example.com");
    let nonstructural = widget_crd(json!({"size": {}}));
    let mut bad_cel = widget_crd(json!({"size": {"type": "integer"}}));
    bad_cel["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["x-kubernetes-validations"] = json!([{"rule": "self.sise > 1"}]);
    let cases = [
        (misnamed, r#"metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group"#),
        (nonstructural, "spec.validation.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields"),
        (bad_cel, "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "),
    ];
    for (crd, want) in cases {
        let (code, status) = post(&app, CRDS, crd).await;
        assert_eq!(code, 422, "{status}");
        let got = causes(&status);
        assert!(
            got.iter().any(|c| c.starts_with(want)),
            "want {want}, got {got:?}"
        );
    }
    // apps.k8s.io is not built in (apps is): only a group the server serves is refused.
    let (code, status) = post(&app, CRDS, builtin).await;
    assert_eq!(code, 201, "{status}");
    let mut served = widget_crd(json!({}));
    served["metadata"]["name"] = json!("widgets.storage.k8s.io");
    served["spec"]["group"] = json!("storage.k8s.io");
    served["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "unapproved"});
    let (code, status) = post(&app, CRDS, served).await;
    assert_eq!(code, 422, "{status}");
    assert!(causes(&status)[0].starts_with(
        r#"spec.group: Invalid value: "storage.k8s.io": is served by the API server itself"#
    ));
}
