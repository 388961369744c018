//! CustomResourceDefinitions through the router with `oneshot`: the CRD object (defaults,
//! conditions, naming conflicts, the cleanup finalizer), custom resources served from the moment
//! the CRD is Established (every verb, status and scale subresources, printer columns in the
//! Table, field selectors, strategic merge refused, several versions over one storage version),
//! and discovery and OpenAPI following CRD changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;

struct Resp {
    code: u16,
    body: Value,
}

async fn call_with(
    app: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Resp {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert!(code < 500, "{method} {uri}: {code} {body}");
    Resp { code, body }
}

async fn call(app: &Router, method: &str, uri: &str, ct: &str, body: &str) -> Resp {
    call_with(app, method, uri, &[("content-type", ct)], body).await
}

async fn post(app: &Router, uri: &str, body: &Value) -> Resp {
    call(app, "POST", uri, "application/json", &body.to_string()).await
}

async fn get(app: &Router, uri: &str) -> Resp {
    call(app, "GET", uri, "application/json", "").await
}

async fn put(app: &Router, uri: &str, body: &Value) -> Resp {
    call(app, "PUT", uri, "application/json", &body.to_string()).await
}

async fn patch(app: &Router, uri: &str, ct: &str, body: &Value) -> Resp {
    call(app, "PATCH", uri, ct, &body.to_string()).await
}

async fn delete(app: &Router, uri: &str) -> Resp {
    call(app, "DELETE", uri, "application/json", "").await
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer"},
                        "color": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}}}},
                    "status": {"type": "object", "properties": {
                        "replicas": {"type": "integer"},
                        "selector": {"type": "string"},
                        "phase": {"type": "string"}}}}}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}},
                "additionalPrinterColumns": [
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 1}],
                "selectableFields": [{"jsonPath": ".spec.color"}]
            }]
        }
    })
}

fn widget(name: &str, color: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": name}, "spec": {"color": color, "replicas": 1}})
}

fn condition<'a>(crd: &'a Value, ty: &str) -> Option<&'a Value> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
}

/// Polls `uri` until `pred` holds for its body (at most 20 s); returns the last body and whether
/// it held.
async fn wait_for(app: &Router, uri: &str, pred: impl Fn(&Value) -> bool) -> (bool, Value) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let body = get(app, uri).await.body;
        if pred(&body) {
            return (true, body);
        }
        if std::time::Instant::now() > deadline {
            return (false, body);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Creates `crd` and waits until it is Established; returns the CRD as it then is.
async fn establish(app: &Router, crd: &Value) -> Value {
    let created = post(app, CRDS, crd).await;
    assert_eq!(created.code, 201, "{}", created.body);
    let name = crd["metadata"]["name"].as_str().unwrap().to_string();
    let (ok, last) = wait_for(app, &format!("{CRDS}/{name}"), |crd| {
        condition(crd, "Established").is_some_and(|c| c["status"] == "True")
    })
    .await;
    assert!(ok, "not established: {last}");
    last
}

#[tokio::test]
async fn a_crd_is_defaulted_accepted_and_established() {
    let app = common::router().await;
    let crd = establish(&app, &widget_crd()).await;
    assert_eq!(crd["spec"]["names"]["singular"], "widget");
    assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
    assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(crd["metadata"]["generation"], 1);
    let accepted = condition(&crd, "NamesAccepted").unwrap();
    assert_eq!(accepted["status"], "True");
    assert_eq!(accepted["reason"], "NoConflicts");
    assert_eq!(accepted["message"], "no conflicts found");
    let established = condition(&crd, "Established").unwrap();
    assert_eq!(established["reason"], "InitialNamesAccepted");
    assert_eq!(
        crd["status"]["acceptedNames"],
        json!({"plural": "widgets", "singular": "widget", "kind": "Widget",
               "listKind": "WidgetList", "shortNames": ["wd"], "categories": ["all"]})
    );
    // Discovery: legacy group, group-version and aggregated.
    let groups = get(&app, "/apis").await;
    let group = groups.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "example.com")
        .cloned()
        .unwrap();
    assert_eq!(group["preferredVersion"]["groupVersion"], "example.com/v1");
    let list = get(&app, "/apis/example.com/v1").await;
    let names: Vec<&str> = list.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["widgets", "widgets/status", "widgets/scale"]);
    assert_eq!(list.body["resources"][0]["shortNames"], json!(["wd"]));
    assert_eq!(list.body["resources"][0]["categories"], json!(["all"]));
    let aggregated = call_with(
        &app,
        "GET",
        "/apis",
        &[(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        "",
    )
    .await;
    assert!(aggregated.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["metadata"]["name"] == "example.com"));
    // The Local APIService of the group-version.
    let ok = common::eventually(Duration::from_secs(10), || {
        let app = app.clone();
        async move {
            get(
                &app,
                "/apis/apiregistration.k8s.io/v1/apiservices/v1.example.com",
            )
            .await
            .code
                == 200
        }
    })
    .await;
    assert!(ok, "no APIService v1.example.com");
    // OpenAPI v3 of the group-version.
    let doc = get(&app, "/openapi/v3/apis/example.com/v1").await;
    assert_eq!(doc.code, 200);
    let schema = &doc.body["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["color"]["type"],
        "string"
    );
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "version": "v1", "kind": "Widget"}])
    );
}

#[tokio::test]
async fn custom_resources_take_every_verb() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    let created = post(&app, WIDGETS, &widget("a", "blue")).await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert_eq!(created.body["metadata"]["generation"], 1);
    assert_eq!(created.body["apiVersion"], "example.com/v1");
    assert!(created.body.get("status").is_none());
    assert_eq!(post(&app, WIDGETS, &widget("b", "red")).await.code, 201);
    let dup = post(&app, WIDGETS, &widget("a", "blue")).await;
    assert_eq!(dup.code, 409);
    assert_eq!(
        dup.body["message"],
        "widgets.example.com \"a\" already exists"
    );
    let got = get(&app, &format!("{WIDGETS}/a")).await;
    assert_eq!(got.body["spec"]["color"], "blue");
    let list = get(&app, WIDGETS).await;
    assert_eq!(list.body["kind"], "WidgetList");
    assert_eq!(list.body["items"].as_array().unwrap().len(), 2);
    // Field selectors: metadata.name and the CRD's selectable fields.
    let by_name = get(&app, &format!("{WIDGETS}?fieldSelector=metadata.name%3Da")).await;
    assert_eq!(by_name.body["items"].as_array().unwrap().len(), 1);
    let by_color = get(&app, &format!("{WIDGETS}?fieldSelector=spec.color%3Dred")).await;
    let items = by_color.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "b");
    let unsupported = get(&app, &format!("{WIDGETS}?fieldSelector=spec.size%3D1")).await;
    assert_eq!(unsupported.code, 400);
    // Update: spec changes bump generation; status sent to the main resource is ignored.
    let mut a = got.body.clone();
    a["spec"]["color"] = json!("green");
    a["status"] = json!({"phase": "Ignored"});
    let updated = put(&app, &format!("{WIDGETS}/a"), &a).await;
    assert_eq!(updated.code, 200, "{}", updated.body);
    assert_eq!(updated.body["metadata"]["generation"], 2);
    assert!(updated.body.get("status").is_none());
    // Merge, JSON patch and apply; strategic merge is refused.
    let merged = patch(
        &app,
        &format!("{WIDGETS}/a"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(merged.body["spec"]["replicas"], 3);
    let jsonp = patch(
        &app,
        &format!("{WIDGETS}/a"),
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/spec/color", "value": "pink"}]),
    )
    .await;
    assert_eq!(jsonp.body["spec"]["color"], "pink");
    let smp = patch(
        &app,
        &format!("{WIDGETS}/a"),
        "application/strategic-merge-patch+json",
        &json!({"spec": {"replicas": 4}}),
    )
    .await;
    assert_eq!(smp.code, 415);
    assert_eq!(
        smp.body["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    let applied = call(
        &app,
        "PATCH",
        &format!("{WIDGETS}/c?fieldManager=me"),
        "application/apply-patch+yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: c\nspec:\n  color: black\n",
    )
    .await;
    assert_eq!(applied.code, 201, "{}", applied.body);
    assert_eq!(
        applied.body["metadata"]["managedFields"][0]["manager"],
        "me"
    );
    // Delete and delete-collection.
    assert_eq!(delete(&app, &format!("{WIDGETS}/c")).await.code, 200);
    assert_eq!(get(&app, &format!("{WIDGETS}/c")).await.code, 404);
    assert_eq!(delete(&app, WIDGETS).await.code, 200);
    assert_eq!(
        get(&app, WIDGETS).await.body["items"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    // Cluster-wide list of a namespaced custom resource.
    assert_eq!(get(&app, "/apis/example.com/v1/widgets").await.code, 200);
}

#[tokio::test]
async fn status_and_scale_subresources() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    post(&app, WIDGETS, &widget("a", "blue")).await;
    let status = patch(
        &app,
        &format!("{WIDGETS}/a/status"),
        "application/merge-patch+json",
        &json!({"spec": {"color": "ignored"}, "status": {"replicas": 1, "selector": "app=a", "phase": "Ready"}}),
    )
    .await;
    assert_eq!(status.code, 200, "{}", status.body);
    assert_eq!(status.body["status"]["phase"], "Ready");
    assert_eq!(status.body["spec"]["color"], "blue");
    assert_eq!(status.body["metadata"]["generation"], 1);
    let scale = get(&app, &format!("{WIDGETS}/a/scale")).await;
    assert_eq!(scale.body["kind"], "Scale");
    assert_eq!(scale.body["apiVersion"], "autoscaling/v1");
    assert_eq!(scale.body["spec"]["replicas"], 1);
    assert_eq!(
        scale.body["status"],
        json!({"replicas": 1, "selector": "app=a"})
    );
    let scaled = patch(
        &app,
        &format!("{WIDGETS}/a/scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 5}}),
    )
    .await;
    assert_eq!(scaled.code, 200, "{}", scaled.body);
    assert_eq!(scaled.body["spec"]["replicas"], 5);
    let obj = get(&app, &format!("{WIDGETS}/a")).await;
    assert_eq!(obj.body["spec"]["replicas"], 5);
    assert_eq!(obj.body["metadata"]["generation"], 2);
    let negative = patch(
        &app,
        &format!("{WIDGETS}/a/scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": -1}}),
    )
    .await;
    assert_eq!(negative.code, 422);
}

#[tokio::test]
async fn the_table_has_the_printer_columns() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    post(&app, WIDGETS, &widget("a", "blue")).await;
    let table = call_with(
        &app,
        "GET",
        WIDGETS,
        &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        "",
    )
    .await;
    assert_eq!(table.body["kind"], "Table");
    let cols: Vec<(&str, &str, i64)> = table.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["type"].as_str().unwrap(),
                c["priority"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cols,
        [
            ("Name", "string", 0),
            ("Color", "string", 0),
            ("Replicas", "integer", 0),
            ("Phase", "string", 1)
        ]
    );
    assert_eq!(
        table.body["rows"][0]["cells"],
        json!(["a", "blue", 1, null])
    );
}

#[tokio::test]
async fn a_second_crd_with_a_taken_kind_is_not_accepted() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    let mut other = widget_crd();
    other["metadata"]["name"] = json!("gadgets.example.com");
    other["spec"]["names"] =
        json!({"plural": "gadgets", "kind": "Widget", "listKind": "GadgetList"});
    let created = post(&app, CRDS, &other).await;
    assert_eq!(created.code, 201, "{}", created.body);
    let (ok, last) = wait_for(&app, &format!("{CRDS}/gadgets.example.com"), |crd| {
        condition(crd, "NamesAccepted").is_some()
    })
    .await;
    assert!(ok, "{last}");
    let cond = condition(&last, "NamesAccepted").unwrap();
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "KindConflict");
    assert_eq!(cond["message"], "\"Widget\" is already in use");
    // The names that do not conflict are accepted anyway.
    assert_eq!(last["status"]["acceptedNames"]["plural"], "gadgets");
    assert_eq!(last["status"]["acceptedNames"]["kind"], "");
    let est = condition(&last, "Established").unwrap();
    assert_eq!(est["status"], "False");
    assert_eq!(est["reason"], "NotAccepted");
    assert_eq!(get(&app, "/apis/example.com/v1/gadgets").await.code, 404);
    // The first CRD keeps serving its kind.
    assert_eq!(post(&app, WIDGETS, &widget("a", "blue")).await.code, 201);
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_instances_then_the_crd() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    post(&app, WIDGETS, &widget("a", "blue")).await;
    post(&app, WIDGETS, &widget("b", "red")).await;
    let deleted = delete(&app, &format!("{CRDS}/widgets.example.com")).await;
    assert_eq!(deleted.code, 200, "{}", deleted.body);
    let gone = common::eventually(Duration::from_secs(10), || {
        let app = app.clone();
        async move { get(&app, &format!("{CRDS}/widgets.example.com")).await.code == 404 }
    })
    .await;
    assert!(gone, "the CRD stayed");
    let unserved = common::eventually(Duration::from_secs(10), || {
        let app = app.clone();
        async move { get(&app, WIDGETS).await.code == 404 }
    })
    .await;
    assert!(unserved, "widgets still served");
    assert_eq!(get(&app, "/apis/example.com").await.code, 404);
    // Recreated, it starts empty: the instances went with it.
    establish(&app, &widget_crd()).await;
    let list = get(&app, WIDGETS).await;
    assert_eq!(list.body["items"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn a_terminating_crd_refuses_creates_while_instances_remain() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    let mut held = widget("held", "blue");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&app, WIDGETS, &held).await;
    delete(&app, &format!("{CRDS}/widgets.example.com")).await;
    let (terminating, crd) = wait_for(&app, &format!("{CRDS}/widgets.example.com"), |crd| {
        condition(crd, "Terminating").is_some_and(|c| c["reason"] == "InstanceDeletionInProgress")
    })
    .await;
    assert!(terminating, "{crd}");
    assert_eq!(
        crd["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    let refused = common::eventually(Duration::from_secs(10), || {
        let app = app.clone();
        async move { post(&app, WIDGETS, &widget("new", "red")).await.code == 405 }
    })
    .await;
    assert!(refused);
    let r = post(&app, WIDGETS, &widget("new", "red")).await;
    assert_eq!(
        r.body["message"],
        "create not allowed while custom resource definition is terminating"
    );
    // Releasing the instance lets the CRD go.
    patch(
        &app,
        &format!("{WIDGETS}/held"),
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    )
    .await;
    let gone = common::eventually(Duration::from_secs(20), || {
        let app = app.clone();
        async move { get(&app, &format!("{CRDS}/widgets.example.com")).await.code == 404 }
    })
    .await;
    assert!(gone);
}

#[tokio::test]
async fn a_new_version_is_served_from_the_storage_version_and_recorded() {
    let app = common::router().await;
    let crd = establish(&app, &widget_crd()).await;
    post(&app, WIDGETS, &widget("a", "blue")).await;
    let mut updated = crd.clone();
    let mut v2 = updated["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["additionalPrinterColumns"] =
        json!([{"name": "Colour", "type": "string", "jsonPath": ".spec.color"}]);
    updated["spec"]["versions"][0]["storage"] = json!(false);
    updated["spec"]["versions"].as_array_mut().unwrap().push(v2);
    let r = put(&app, &format!("{CRDS}/widgets.example.com"), &updated).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["status"]["storedVersions"], json!(["v1", "v2"]));
    assert_eq!(r.body["metadata"]["generation"], 2);
    let v2_uri = "/apis/example.com/v2/namespaces/default/widgets";
    let served = common::eventually(Duration::from_secs(10), || {
        let app = app.clone();
        async move { get(&app, &format!("{v2_uri}/a")).await.code == 200 }
    })
    .await;
    assert!(served);
    let a = get(&app, &format!("{v2_uri}/a")).await;
    assert_eq!(a.body["apiVersion"], "example.com/v2");
    assert_eq!(a.body["spec"]["color"], "blue");
    let group = get(&app, "/apis/example.com").await;
    assert_eq!(group.body["preferredVersion"]["version"], "v2");
    let table = call_with(
        &app,
        "GET",
        v2_uri,
        &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        "",
    )
    .await;
    assert_eq!(table.body["columnDefinitions"][1]["name"], "Colour");
    // A write through v1 is stored in the storage version and read back through either.
    let mut b = widget("b", "red");
    b["apiVersion"] = json!("example.com/v1");
    assert_eq!(post(&app, WIDGETS, &b).await.code, 201);
    let b2 = get(&app, &format!("{v2_uri}/b")).await;
    assert_eq!(b2.body["apiVersion"], "example.com/v2");
    let wrong = post(&app, v2_uri, &widget("c", "x")).await;
    assert_eq!(wrong.code, 400);
}

#[tokio::test]
async fn cluster_scoped_custom_resources_and_protobuf_accept() {
    let app = common::router().await;
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.example.org");
    crd["spec"]["group"] = json!("example.org");
    crd["spec"]["scope"] = json!("Cluster");
    crd["spec"]["names"] = json!({"plural": "gadgets", "kind": "Gadget"});
    establish(&app, &crd).await;
    let g = json!({"apiVersion": "example.org/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"color": "x"}});
    let created = post(&app, "/apis/example.org/v1/gadgets", &g).await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert!(created.body["metadata"].get("namespace").is_none());
    // kubectl asks for protobuf first; custom resources answer JSON.
    let r = call_with(
        &app,
        "GET",
        "/apis/example.org/v1/gadgets/g",
        &[(
            "accept",
            "application/vnd.kubernetes.protobuf,application/json",
        )],
        "",
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["metadata"]["name"], "g");
}

#[tokio::test]
async fn the_gateway_api_crds_install_and_become_established() {
    let app = common::router().await;
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/crds");
    let mut names = Vec::new();
    let mut files: Vec<_> = walk(&dir);
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let Ok(v) = <Value as serde::Deserialize>::deserialize(doc) else {
                continue;
            };
            if v["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let r = post(&app, CRDS, &v).await;
            assert_eq!(r.code, 201, "{}: {}", file.display(), r.body);
            names.push(v["metadata"]["name"].as_str().unwrap().to_string());
        }
    }
    assert!(names.len() >= 5, "found only {names:?}");
    for name in &names {
        let ok = common::eventually(Duration::from_secs(10), || {
            let app = app.clone();
            let uri = format!("{CRDS}/{name}");
            async move {
                let crd = get(&app, &uri).await.body;
                condition(&crd, "Established").is_some_and(|c| c["status"] == "True")
            }
        })
        .await;
        assert!(ok, "{name} not established");
    }
    let list = get(&app, "/apis/gateway.networking.k8s.io/v1").await;
    assert!(list.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "httproutes"));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
    out
}

#[tokio::test]
async fn warn_field_validation_answers_with_warning_headers() {
    // A built-in kind's unknown fields (custom resources' come from pruning, with the schema).
    let app = common::router().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                    "data": {"a": "b"}, "extra": 1});
    let req = Request::builder()
        .method("POST")
        .uri("/api/v1/namespaces/default/configmaps?fieldValidation=Warn")
        .header("content-type", "application/json")
        .body(Body::from(cm.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let warnings: Vec<&str> = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(warnings, ["299 - \"unknown field \\\"extra\\\"\""]);
}

#[tokio::test]
async fn names_freed_by_a_deleted_crd_go_to_one_of_the_crds_waiting_for_them() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    for plural in ["gadgets", "gizmos"] {
        let name = format!("{plural}.example.com");
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!(name);
        crd["spec"]["names"] =
            json!({"plural": plural, "kind": "Widget", "listKind": format!("{plural}List")});
        assert_eq!(post(&app, CRDS, &crd).await.code, 201);
        let (ok, body) = wait_for(&app, &format!("{CRDS}/{name}"), |c| {
            condition(c, "NamesAccepted").is_some_and(|c| c["status"] == "False")
        })
        .await;
        assert!(ok, "{body}");
    }
    delete(&app, &format!("{CRDS}/widgets.example.com")).await;
    let accepted = |c: &Value| condition(c, "NamesAccepted").is_some_and(|c| c["status"] == "True");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let winners = loop {
        let g = get(&app, &format!("{CRDS}/gadgets.example.com")).await.body;
        let z = get(&app, &format!("{CRDS}/gizmos.example.com")).await.body;
        let winners = [accepted(&g), accepted(&z)];
        if winners.contains(&true) || std::time::Instant::now() > deadline {
            break winners;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(winners.iter().filter(|w| **w).count(), 1, "{winners:?}");
    let plural = if winners[0] { "gadgets" } else { "gizmos" };
    let served = wait_for(&app, "/apis/example.com/v1", |l| {
        l["resources"][0]["name"] == plural && l["resources"][0]["kind"] == "Widget"
    })
    .await;
    assert!(served.0, "{}", served.1);
}

#[tokio::test]
async fn a_restarted_server_serves_its_stored_crds() {
    let store: std::sync::Arc<dyn store::Store> =
        std::sync::Arc::new(store::MemoryStore::new(store::StoreConfig::default()).unwrap());
    let (app, state) = common::router_and_state_over(store.clone()).await;
    establish(&app, &widget_crd()).await;
    assert_eq!(post(&app, WIDGETS, &widget("a", "blue")).await.code, 201);
    state.shutdown.cancel();
    // A second server over the same store: the CRD is served again from what is stored.
    let (again, _state) = common::router_and_state_over(store).await;
    let (ok, body) = wait_for(&again, &format!("{WIDGETS}/a"), |w| {
        w["spec"]["color"] == "blue"
    })
    .await;
    assert!(ok, "{body}");
}

#[tokio::test]
async fn a_custom_resource_over_the_request_limit_is_refused() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    let mut big = widget("big", "blue");
    big["spec"]["tags"] = json!(vec!["x".repeat(1024); 3 * 1024 + 1]);
    let r = post(&app, WIDGETS, &big).await;
    assert_eq!(r.code, 413, "{}", r.body);
}

#[tokio::test]
async fn versions_of_a_group_follow_kubernetes_version_priority_across_crds() {
    let app = common::router().await;
    establish(&app, &widget_crd()).await;
    let mut gadgets = widget_crd();
    gadgets["metadata"]["name"] = json!("gadgets.example.com");
    gadgets["spec"]["names"] = json!({"plural": "gadgets", "kind": "Gadget"});
    gadgets["spec"]["versions"][0]["name"] = json!("v2");
    establish(&app, &gadgets).await;
    let group = get(&app, "/apis/example.com").await.body;
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    assert_eq!(versions, ["v2", "v1"]);
    assert_eq!(group["preferredVersion"]["groupVersion"], "example.com/v2");
}
