//! Wire fidelity through the router: bodies byte for byte as kube-apiserver writes them — Status
//! errors, objects in Go field order, the newline after every JSON body — and `/openapi/v2`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;
use common::router as app;

struct Raw {
    code: u16,
    content_type: String,
    text: String,
}

impl Raw {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

async fn call(app: &Router, method: &str, uri: &str, headers: &[(&str, &str)], body: &str) -> Raw {
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
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    assert!(code < 500, "{method} {uri}: {code} {text}");
    Raw {
        code,
        content_type,
        text,
    }
}

async fn get(app: &Router, uri: &str) -> Raw {
    call(app, "GET", uri, &[], "").await
}

async fn post(app: &Router, uri: &str, body: &Value) -> Raw {
    call(
        app,
        "POST",
        uri,
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn status_bodies_are_kube_apiservers_byte_for_byte() {
    let app = app().await;
    let r = get(&app, "/api/v1/namespaces/default/pods/x").await;
    assert_eq!(r.code, 404);
    assert_eq!(
        r.text,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"pods \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"x\",\"kind\":\"pods\"},\"code\":404}\n"
    );
    let r = get(&app, "/apis/apps/v1/namespaces/default/deployments/x").await;
    assert_eq!(
        r.text,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"deployments.apps \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"x\",\"group\":\"apps\",\"kind\":\"deployments\"},\"code\":404}\n"
    );
    let r = get(&app, "/api/v1/nothings").await;
    assert_eq!(
        r.text,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"the server could not find the requested resource\",\"reason\":\"NotFound\",\"details\":{},\"code\":404}\n"
    );

    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(
        post(&app, "/api/v1/namespaces/default/configmaps", &cm)
            .await
            .code,
        201
    );
    let r = post(&app, "/api/v1/namespaces/default/configmaps", &cm).await;
    assert_eq!(r.code, 409);
    assert_eq!(
        r.text,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"c\\\" already exists\",\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"c\",\"kind\":\"configmaps\"},\"code\":409}\n"
    );

    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}});
    let r = post(&app, "/api/v1/namespaces/default/configmaps", &bad).await;
    assert_eq!(r.code, 422);
    let msg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    assert_eq!(
        r.text,
        format!(
            "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":\"ConfigMap \\\"Bad_Name\\\" is invalid: metadata.name: Invalid value: \\\"Bad_Name\\\": {msg}\",\"reason\":\"Invalid\",\"details\":{{\"name\":\"Bad_Name\",\"kind\":\"ConfigMap\",\"causes\":[{{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value: \\\"Bad_Name\\\": {msg}\",\"field\":\"metadata.name\"}}]}},\"code\":422}}\n"
        )
    );
}

#[tokio::test]
async fn a_created_deployment_comes_in_go_field_order() {
    let app = app().await;
    let d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"b": "2", "a": "1"}},
        "spec": {
            "template": {"spec": {"containers": [{"image": "nginx", "name": "nginx"}]},
                         "metadata": {"labels": {"app": "web"}}},
            "selector": {"matchLabels": {"app": "web"}},
        },
    });
    let r = post(
        &app,
        "/apis/apps/v1/namespaces/default/deployments?fieldManager=test",
        &d,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    assert!(r.text.ends_with("}\n"));
    let created = r.json();
    let check = |o: &Value| {
        assert_eq!(
            keys(o),
            ["kind", "apiVersion", "metadata", "spec", "status"]
        );
        assert_eq!(
            keys(&o["metadata"]),
            [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "labels",
                "managedFields"
            ]
        );
        assert_eq!(keys(&o["metadata"]["labels"]), ["a", "b"]);
        assert_eq!(
            keys(&o["metadata"]["managedFields"][0]),
            [
                "manager",
                "operation",
                "apiVersion",
                "time",
                "fieldsType",
                "fieldsV1"
            ]
        );
        assert_eq!(
            keys(&o["spec"]),
            [
                "replicas",
                "selector",
                "template",
                "strategy",
                "revisionHistoryLimit",
                "progressDeadlineSeconds"
            ]
        );
        assert_eq!(keys(&o["spec"]["strategy"]), ["type", "rollingUpdate"]);
        assert_eq!(
            keys(&o["spec"]["strategy"]["rollingUpdate"]),
            ["maxUnavailable", "maxSurge"]
        );
        let pod = &o["spec"]["template"]["spec"];
        assert_eq!(
            keys(pod),
            [
                "containers",
                "restartPolicy",
                "terminationGracePeriodSeconds",
                "dnsPolicy",
                "securityContext",
                "schedulerName"
            ]
        );
        assert_eq!(
            keys(&pod["containers"][0]),
            [
                "name",
                "image",
                "resources",
                "terminationMessagePath",
                "terminationMessagePolicy",
                "imagePullPolicy"
            ]
        );
    };
    check(&created);
    // Reads are the stored text: the same order, in a GET, a list and a watch event.
    let r = get(&app, "/apis/apps/v1/namespaces/default/deployments/web").await;
    assert!(r.text.ends_with("}\n"));
    check(&r.json());
    let r = get(&app, "/apis/apps/v1/namespaces/default/deployments").await;
    assert!(r.text.ends_with("]}\n"));
    let list = r.json();
    assert_eq!(keys(&list), ["kind", "apiVersion", "metadata", "items"]);
    check(&list["items"][0]);
}

#[tokio::test]
async fn a_created_pod_comes_in_go_field_order() {
    let app = app().await;
    let p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"volumes": [{"name": "v"}], "containers": [{"image": "nginx", "name": "c",
                 "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]},
    });
    let r = post(&app, "/api/v1/namespaces/default/pods", &p).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let pod = r.json();
    assert_eq!(
        keys(&pod),
        ["kind", "apiVersion", "metadata", "spec", "status"]
    );
    let spec = &pod["spec"];
    let k = keys(spec);
    let pos = |f: &str| k.iter().position(|x| *x == f).unwrap_or(usize::MAX);
    // PodSpec's Go order: Volumes, InitContainers, Containers, ..., RestartPolicy,
    // TerminationGracePeriodSeconds, DNSPolicy, ..., SecurityContext, SchedulerName, ...
    assert_eq!(k[0], "volumes");
    assert_eq!(k[1], "containers");
    assert!(pos("restartPolicy") < pos("terminationGracePeriodSeconds"));
    assert!(pos("terminationGracePeriodSeconds") < pos("dnsPolicy"));
    assert!(pos("dnsPolicy") < pos("securityContext"));
    assert!(pos("securityContext") < pos("schedulerName"));
    assert_eq!(keys(&spec["volumes"][0])[0], "name");
    assert_eq!(keys(&spec["containers"][0])[..2], ["name", "image"]);
}

#[tokio::test]
async fn every_json_body_ends_with_a_newline() {
    let app = app().await;
    for uri in [
        "/api",
        "/apis",
        "/api/v1",
        "/apis/apps/v1",
        "/api/v1/namespaces",
        "/api/v1/namespaces/default",
        "/api/v1/namespaces/default/pods/none",
    ] {
        let r = get(&app, uri).await;
        assert!(r.content_type.starts_with("application/json"), "{uri}");
        assert!(r.text.ends_with('\n'), "{uri}: {:?}", r.text);
    }
    let table = call(
        &app,
        "GET",
        "/api/v1/namespaces",
        &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        "",
    )
    .await;
    assert!(table.text.ends_with("]}\n"));
    let deleted = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/none",
        &[],
        "",
    )
    .await;
    assert!(deleted.text.ends_with("}\n"));
}

#[tokio::test]
async fn openapi_v2_has_every_served_kind() {
    let app = app().await;
    let r = get(&app, "/openapi/v2").await;
    assert_eq!(r.code, 200);
    assert_eq!(r.content_type, "application/json");
    let doc = r.json();
    assert_eq!(doc["swagger"], "2.0");
    let defs = doc["definitions"].as_object().unwrap();
    let text = r.text.as_str();
    assert!(!text.contains("#/components/schemas/"));
    let discovery = get(&app, "/api/v1").await.json();
    let mut kinds = Vec::new();
    for r in discovery["resources"].as_array().unwrap() {
        if !r["name"].as_str().unwrap().contains('/') {
            kinds.push((
                "",
                "v1".to_string(),
                r["kind"].as_str().unwrap().to_string(),
            ));
        }
    }
    let groups = get(&app, "/apis").await.json();
    for g in groups["groups"].as_array().unwrap() {
        for v in g["versions"].as_array().unwrap() {
            let gv = v["groupVersion"].as_str().unwrap();
            let list = get(&app, &format!("/apis/{gv}")).await.json();
            for r in list["resources"].as_array().unwrap() {
                if !r["name"].as_str().unwrap().contains('/') {
                    let (g, v) = gv.split_once('/').unwrap();
                    let _ = g;
                    kinds.push((
                        gv.split_once('/').map(|x| x.0).unwrap_or(""),
                        v.to_string(),
                        r["kind"].as_str().unwrap().to_string(),
                    ));
                }
            }
        }
    }
    assert!(kinds.len() > 10);
    for (group, version, kind) in &kinds {
        let want = json!({"group": group, "version": version, "kind": kind});
        let found = defs.values().any(|d| {
            d["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|l| l.contains(&want))
        });
        assert!(found, "{want} has no definition");
    }
    // The patch extensions kubectl's client-side strategic merge reads.
    let containers = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(
        containers["items"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.Container"
    );
    let volumes = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["volumes"];
    assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
    // gnostic's protobuf form, as client-go asks for it (kubectl 1.27 explain, --validate).
    let r = call(
        &app,
        "GET",
        "/openapi/v2",
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )],
        "",
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.content_type,
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    assert!(r.text.starts_with("\n\u{3}2.0"), "Document.swagger first");
    // Anything else: 406.
    let r = call(&app, "GET", "/openapi/v2", &[("accept", "text/html")], "").await;
    assert_eq!(r.code, 406);
}
