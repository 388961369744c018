//! Pods' subresources, `policy/v1` and Services' node ports through the router with `oneshot`:
//! PodDisruptionBudget CRUD and validation, `pods/eviction` allowed, blocked (429 with upstream's
//! message and cause) and with several budgets, Eviction and DeleteOptions bodies in protobuf,
//! the streaming subresources' Status, ephemeral containers, in-place resize, and node port
//! allocation, conflict, release and survival across a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use k8s_pb::api::policy::v1 as pbpolicy;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;
use common::{router as app, router_over as app_over};

const PB: &str = "application/vnd.kubernetes.protobuf";

struct Resp {
    code: u16,
    body: Value,
}

async fn raw(app: &Router, method: &str, uri: &str, content_type: &str, body: Vec<u8>) -> Resp {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Resp { code, body }
}

async fn call(app: &Router, method: &str, uri: &str, content_type: &str, body: &str) -> Resp {
    let r = raw(app, method, uri, content_type, body.as_bytes().to_vec()).await;
    assert!(r.code < 500, "{method} {uri}: {} {}", r.code, r.body);
    r
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

async fn merge(app: &Router, uri: &str, patch: Value) -> Resp {
    call(
        app,
        "PATCH",
        uri,
        "application/merge-patch+json",
        &patch.to_string(),
    )
    .await
}

async fn delete(app: &Router, uri: &str) -> Resp {
    call(app, "DELETE", uri, "application/json", "").await
}

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let u = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(u.encode_to_vec());
    out
}

const PODS: &str = "/api/v1/namespaces/default/pods";
const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

/// A running, ready pod `name` labelled `app=<app>` on node `n1`.
async fn running_pod(app: &Router, name: &str, label: &str) {
    let pod = json!({"metadata": {"name": name, "labels": {"app": label}},
        "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}}}]}});
    let r = post(app, PODS, &pod).await;
    assert_eq!(r.code, 201, "{}", r.body);
    let mut p = r.body;
    p["status"] = json!({"phase": "Running", "qosClass": "Burstable",
        "conditions": [{"type": "Ready", "status": "True"}]});
    let r = put(app, &format!("{PODS}/{name}/status"), &p).await;
    assert_eq!(r.code, 200, "{}", r.body);
}

fn eviction(name: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}})
}

#[tokio::test]
async fn pod_disruption_budgets_crud_and_validation() {
    let app = app().await;
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    let r = post(&app, PDBS, &pdb).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["metadata"]["generation"], 1);
    assert_eq!(r.body["status"]["disruptionsAllowed"], 0);
    // Updates of the spec are allowed (since 1.15) and bump the generation.
    let r = merge(
        &app,
        &format!("{PDBS}/web"),
        json!({"spec": {"minAvailable": "50%"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["metadata"]["generation"], 2);
    // Status writes go through the status subresource only.
    let r = merge(
        &app,
        &format!("{PDBS}/web/status"),
        json!({"status": {"observedGeneration": 2, "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["status"]["disruptionsAllowed"], 1);
    let r = merge(
        &app,
        &format!("{PDBS}/web/status"),
        json!({"status": {"currentHealthy": -1}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        "PodDisruptionBudget.policy \"web\" is invalid: status.currentHealthy: Invalid value: -1: must be greater than or equal to 0"
    );
    // kubectl's columns.
    let req = Request::builder()
        .uri(PDBS)
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let table: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age"
        ]
    );
    assert_eq!(
        table["rows"][0]["cells"].as_array().unwrap()[1..4],
        [json!("50%"), json!("N/A"), json!(1)]
    );
    // Invalid specs: 422 with upstream's messages.
    let both = json!({"metadata": {"name": "both"}, "spec": {"minAvailable": 1, "maxUnavailable": "10%", "unhealthyPodEvictionPolicy": "Sometimes"}});
    let r = post(&app, PDBS, &both).await;
    assert_eq!(r.code, 422);
    let causes: Vec<&str> = r.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(causes, ["spec", "spec.unhealthyPodEvictionPolicy"]);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .contains("minAvailable and maxUnavailable cannot be both set"));
    let r = post(
        &app,
        PDBS,
        &json!({"metadata": {"name": "x"}, "spec": {"maxUnavailable": "200%"}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .contains("spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"200%\"}: must not be greater than 100%"));
    // Protobuf, as kubectl create poddisruptionbudget sends it.
    let p = pbpolicy::PodDisruptionBudget {
        metadata: Some(pbmeta::ObjectMeta {
            name: Some("pb".into()),
            ..Default::default()
        }),
        spec: Some(pbpolicy::PodDisruptionBudgetSpec {
            max_unavailable: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                r#type: Some(0),
                int_val: Some(1),
                str_val: Some(String::new()),
            }),
            selector: Some(pbmeta::LabelSelector {
                match_labels: [("app".to_string(), "db".to_string())].into(),
                match_expressions: vec![],
            }),
            ..Default::default()
        }),
        status: Some(Default::default()),
    };
    let body = envelope("policy/v1", "PodDisruptionBudget", p.encode_to_vec());
    let r = raw(&app, "POST", PDBS, PB, body).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["spec"]["maxUnavailable"], 1);
    let r = delete(&app, &format!("{PDBS}/pb")).await;
    assert_eq!(r.code, 200);
}

#[tokio::test]
async fn eviction_honours_budgets() {
    let app = app().await;
    running_pod(&app, "free", "other").await;
    // No budget: the pod is deleted; the answer is a Success Status with code 201.
    let r = post(&app, &format!("{PODS}/free/eviction"), &eviction("free")).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["status"], "Success");
    assert_eq!(get(&app, &format!("{PODS}/free")).await.code, 404);
    // Evicting a missing pod is a 404; a body naming another pod is a 400.
    assert_eq!(
        post(&app, &format!("{PODS}/free/eviction"), &eviction("free"))
            .await
            .code,
        404
    );
    running_pod(&app, "web-1", "web").await;
    let r = post(&app, &format!("{PODS}/web-1/eviction"), &eviction("web-2")).await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.body["message"],
        "name in URL does not match name in Eviction object"
    );

    // A budget whose status was never computed blocks, as upstream.
    let pdb = json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    assert_eq!(post(&app, PDBS, &pdb).await.code, 201);
    let r = post(&app, &format!("{PODS}/web-1/eviction"), &eviction("web-1")).await;
    assert_eq!(r.code, 429, "{}", r.body);
    assert_eq!(r.body["reason"], "TooManyRequests");
    assert_eq!(
        r.body["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        r.body["details"]["causes"],
        json!([{"reason": "DisruptionBudget", "message": "The disruption budget web is still being processed by the server."}])
    );
    assert_eq!(r.body["details"]["retryAfterSeconds"], 10);
    // Computed, with no disruption allowed: 429 naming the healthy counts.
    let st = |allowed: i64| json!({"status": {"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}});
    assert_eq!(
        merge(&app, &format!("{PDBS}/web/status"), st(0)).await.code,
        200
    );
    let r = post(&app, &format!("{PODS}/web-1/eviction"), &eviction("web-1")).await;
    assert_eq!(r.code, 429);
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        "The disruption budget web needs 1 healthy pods and has 2 currently"
    );
    // One disruption allowed: a dry run changes nothing, then the eviction decrements it.
    assert_eq!(
        merge(&app, &format!("{PDBS}/web/status"), st(1)).await.code,
        200
    );
    let r = post(
        &app,
        &format!("{PODS}/web-1/eviction?dryRun=All"),
        &eviction("web-1"),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(get(&app, &format!("{PODS}/web-1")).await.code, 200);
    assert_eq!(
        get(&app, &format!("{PDBS}/web")).await.body["status"]["disruptionsAllowed"],
        1
    );
    let r = post(&app, &format!("{PODS}/web-1/eviction"), &eviction("web-1")).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(get(&app, &format!("{PODS}/web-1")).await.code, 404);
    let after = get(&app, &format!("{PDBS}/web")).await.body;
    assert_eq!(after["status"]["disruptionsAllowed"], 0);
    assert!(after["status"]["disruptedPods"]["web-1"].is_string());
    assert_eq!(
        after["status"]["conditions"][0]["reason"],
        "InsufficientPods"
    );

    // A pending pod bypasses budgets.
    let pending = json!({"metadata": {"name": "web-p", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    assert_eq!(post(&app, PODS, &pending).await.code, 201);
    let r = post(&app, &format!("{PODS}/web-p/eviction"), &eviction("web-p")).await;
    assert_eq!(r.code, 201, "{}", r.body);

    // Two budgets over one pod: upstream's 500 Failure Status.
    running_pod(&app, "web-3", "web").await;
    let other = json!({"metadata": {"name": "web2"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    assert_eq!(post(&app, PDBS, &other).await.code, 201);
    let r = raw(
        &app,
        "POST",
        &format!("{PODS}/web-3/eviction"),
        "application/json",
        eviction("web-3").to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.code, 500);
    assert_eq!(r.body["status"], "Failure");
    assert_eq!(
        r.body["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
}

#[tokio::test]
async fn protobuf_eviction_and_delete_options_bodies() {
    let app = app().await;
    running_pod(&app, "a", "x").await;
    let e = pbpolicy::Eviction {
        metadata: Some(pbmeta::ObjectMeta {
            name: Some("a".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        delete_options: Some(pbmeta::DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        }),
    };
    let body = envelope("policy/v1", "Eviction", e.encode_to_vec());
    let r = raw(&app, "POST", &format!("{PODS}/a/eviction"), PB, body).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(get(&app, &format!("{PODS}/a")).await.code, 404);

    // DELETE with a protobuf DeleteOptions body (kubectl without eviction), here with a
    // precondition that fails and then with a dry run.
    running_pod(&app, "b", "x").await;
    let opts = |uid: Option<&str>, dry: bool| pbmeta::DeleteOptions {
        preconditions: uid.map(|u| pbmeta::Preconditions {
            uid: Some(u.into()),
            resource_version: None,
        }),
        dry_run: if dry { vec!["All".into()] } else { vec![] },
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let del = |o: pbmeta::DeleteOptions| envelope("v1", "DeleteOptions", o.encode_to_vec());
    let r = raw(
        &app,
        "DELETE",
        &format!("{PODS}/b"),
        PB,
        del(opts(Some("nope"), false)),
    )
    .await;
    assert_eq!(r.code, 409, "{}", r.body);
    let r = raw(
        &app,
        "DELETE",
        &format!("{PODS}/b"),
        PB,
        del(opts(None, true)),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(get(&app, &format!("{PODS}/b")).await.code, 200);
    let r = raw(
        &app,
        "DELETE",
        &format!("{PODS}/b"),
        PB,
        del(opts(None, false)),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(get(&app, &format!("{PODS}/b")).await.code, 404);
    // pods/binding from protobuf, as a scheduler speaking protobuf sends it.
    let pending = json!({"metadata": {"name": "unbound"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    assert_eq!(post(&app, PODS, &pending).await.code, 201);
    let b = k8s_pb::api::core::v1::Binding {
        metadata: Some(pbmeta::ObjectMeta {
            name: Some("unbound".into()),
            ..Default::default()
        }),
        target: Some(k8s_pb::api::core::v1::ObjectReference {
            kind: Some("Node".into()),
            name: Some("n1".into()),
            ..Default::default()
        }),
    };
    let body = envelope("v1", "Binding", b.encode_to_vec());
    let r = raw(&app, "POST", &format!("{PODS}/unbound/binding"), PB, body).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        get(&app, &format!("{PODS}/unbound")).await.body["spec"]["nodeName"],
        "n1"
    );
    // Garbage protobuf is a 400, never a 5xx.
    let r = raw(
        &app,
        "DELETE",
        &format!("{PODS}/b"),
        PB,
        b"k8s\0\xff\xff".to_vec(),
    )
    .await;
    assert_eq!(r.code, 400);
}

#[tokio::test]
async fn streaming_subresources_answer_a_clear_status() {
    let app = app().await;
    running_pod(&app, "web", "web").await;
    for (method, sub) in [
        ("GET", "log"),
        ("POST", "exec?command=ls&stdout=true"),
        ("GET", "attach"),
        ("POST", "portforward"),
        ("GET", "proxy"),
        ("GET", "proxy/healthz"),
    ] {
        let r = call(
            &app,
            method,
            &format!("{PODS}/web/{sub}"),
            "application/json",
            "",
        )
        .await;
        assert_eq!(r.code, 400, "{sub}: {}", r.body);
        assert_eq!(r.body["kind"], "Status");
        assert_eq!(r.body["reason"], "BadRequest");
        let msg = r.body["message"].as_str().unwrap();
        assert!(msg.contains("is not simulated yet"), "{msg}");
    }
    let r = get(&app, &format!("{PODS}/web/log")).await;
    assert_eq!(
        r.body["message"],
        "pods/log is not simulated yet: the fake kubelets of minik8s do not serve container logs (pod \"web\" in namespace \"default\")"
    );
    let r = get(&app, &format!("{PODS}/web/log?container=nope")).await;
    assert_eq!(
        (r.code, r.body["message"].clone()),
        (400, json!("container nope is not valid for pod web"))
    );
    // The object is looked up first: a missing pod is a NotFound Status.
    let r = get(&app, &format!("{PODS}/nope/log")).await;
    assert_eq!(r.code, 404);
    assert_eq!(r.body["message"], "pods \"nope\" not found");
    let r = get(&app, &format!("{PODS}/nope:8080/proxy/x")).await;
    assert_eq!(
        (r.code, r.body["message"].clone()),
        (404, json!("pods \"nope\" not found"))
    );
    // log takes GET only.
    assert_eq!(
        call(
            &app,
            "POST",
            &format!("{PODS}/web/log"),
            "application/json",
            ""
        )
        .await
        .code,
        405
    );
    // nodes/proxy and services/proxy.
    let node = json!({"metadata": {"name": "n1"}});
    assert_eq!(post(&app, "/api/v1/nodes", &node).await.code, 201);
    let r = get(&app, "/api/v1/nodes/n1/proxy/metrics").await;
    assert_eq!(r.code, 400);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .starts_with("nodes/proxy is not simulated yet"));
    assert_eq!(get(&app, "/api/v1/nodes/n2/proxy").await.code, 404);
    let svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
    assert_eq!(
        post(&app, "/api/v1/namespaces/default/services", &svc)
            .await
            .code,
        201
    );
    let r = get(&app, "/api/v1/namespaces/default/services/s:80/proxy/").await;
    assert_eq!(r.code, 400, "{}", r.body);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .starts_with("services/proxy is not simulated yet"));
}

#[tokio::test]
async fn ephemeral_containers_and_resize() {
    let app = app().await;
    running_pod(&app, "web", "web").await;
    let ec = format!("{PODS}/web/ephemeralcontainers");
    let r = get(&app, &ec).await;
    assert_eq!((r.code, r.body["kind"].clone()), (200, json!("Pod")));
    let r = merge(
        &app,
        &ec,
        json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox:1.36", "targetContainerName": "c", "stdin": true, "tty": true}]}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.body["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"],
        "File"
    );
    // The main resource cannot add them, and existing ones may not change.
    let r = merge(&app, &ec, json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox:2", "targetContainerName": "c"}]}})).await;
    assert_eq!(r.code, 422);
    assert!(r.body["message"]
        .as_str()
        .unwrap()
        .contains("existing ephemeral containers \"debug\" may not be changed"));
    let mut pod = get(&app, &format!("{PODS}/web")).await.body;
    pod["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "x", "image": "busybox:1", "ports": [{"containerPort": 1}]}));
    let r = put(&app, &ec, &pod).await;
    assert_eq!(r.code, 422);
    assert!(r.body["message"].as_str().unwrap().contains(
        "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container"
    ));

    // The main resource keeps them whatever an update says (kubectl replace after kubectl debug).
    let mut pod = get(&app, &format!("{PODS}/web")).await.body;
    pod["spec"]
        .as_object_mut()
        .unwrap()
        .remove("ephemeralContainers");
    pod["metadata"]["labels"]["extra"] = json!("1");
    let r = put(&app, &format!("{PODS}/web"), &pod).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["spec"]["ephemeralContainers"][0]["name"], "debug");

    // Resize: cpu and memory change in place, nothing else does.
    let rs = format!("{PODS}/web/resize");
    let r = merge(
        &app,
        &rs,
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "150m", "memory": "64Mi"}, "limits": {"cpu": "300m", "memory": "64Mi"}}}]}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.body["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "300m"
    );
    let r = get(&app, &format!("{PODS}/web")).await;
    assert_eq!(
        r.body["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "150m"
    );
    // The pod's own update still refuses resource changes.
    let r = merge(
        &app,
        &format!("{PODS}/web"),
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
    )
    .await;
    assert_eq!(r.code, 422);
    let r = merge(
        &app,
        &rs,
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "300m", "memory": "64Mi"}, "limits": {"cpu": "300m", "memory": "64Mi"}}}]}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        "Pod \"web\" is invalid: spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"
    );
}

#[tokio::test]
async fn node_ports_are_allocated_released_and_survive_a_restart() {
    // One store under two apiservers in turn: the second one starts from what is stored, as
    // after a restart.
    let storage: Arc<dyn store::Store> =
        Arc::new(store::MemoryStore::new(store::StoreConfig::default()).unwrap());
    let open = || storage.clone();
    let svcs = "/api/v1/namespaces/default/services";
    let app = app_over(open()).await;
    let np =
        json!({"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
    let r = post(&app, svcs, &np).await;
    assert_eq!(r.code, 201, "{}", r.body);
    let port = r.body["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&port), "{port}");
    assert_eq!(r.body["spec"]["ipFamilyPolicy"], "SingleStack");
    let fixed = json!({"metadata": {"name": "fixed"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}});
    assert_eq!(post(&app, svcs, &fixed).await.code, 201);
    // Taken and out of range: upstream's messages.
    let taken = json!({"metadata": {"name": "taken"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}});
    let r = post(&app, svcs, &taken).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        "Service \"taken\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    let far = json!({"metadata": {"name": "far"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 40000}]}});
    let r = post(&app, svcs, &far).await;
    assert_eq!(
        r.body["message"],
        "Service \"far\" is invalid: spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767"
    );
    // A LoadBalancer with externalTrafficPolicy Local also gets a health-check node port.
    let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 443}]}});
    let r = post(&app, svcs, &lb).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert!(r.body["spec"]["healthCheckNodePort"].as_i64().is_some());
    assert_eq!(r.body["spec"]["allocateLoadBalancerNodePorts"], true);
    // An update that omits the node port keeps it (kubectl apply).
    let mut upd = get(&app, &format!("{svcs}/np")).await.body;
    upd["spec"]["ports"][0]
        .as_object_mut()
        .unwrap()
        .remove("nodePort");
    let r = put(&app, &format!("{svcs}/np"), &upd).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["spec"]["ports"][0]["nodePort"], port);
    drop(app);

    // After a restart the allocations are still held (rebuilt from the stored services).
    let app = app_over(open()).await;
    let again = json!({"metadata": {"name": "again"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": port}]}});
    let r = post(&app, svcs, &again).await;
    assert_eq!(r.code, 422, "{}", r.body);
    // A type change away releases the port; a delete releases it too.
    let r = merge(
        &app,
        &format!("{svcs}/np"),
        json!({"spec": {"type": "ClusterIP"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(r.body["spec"]["ports"][0].get("nodePort").is_none());
    assert_eq!(post(&app, svcs, &again).await.code, 201);
    assert_eq!(delete(&app, &format!("{svcs}/fixed")).await.code, 200);
    assert_eq!(post(&app, svcs, &taken).await.code, 201);
    // ExternalName ↔ ClusterIP: a cluster IP is allocated, then dropped and released.
    let ext = json!({"metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "example.com"}});
    assert_eq!(post(&app, svcs, &ext).await.code, 201);
    let r = merge(
        &app,
        &format!("{svcs}/ext"),
        json!({"spec": {"type": "ClusterIP", "externalName": null, "ports": [{"port": 80}]}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let ip = r.body["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("10."), "{ip}");
    assert_eq!(r.body["spec"]["clusterIPs"], json!([ip]));
    let r = merge(
        &app,
        &format!("{svcs}/ext"),
        json!({"spec": {"type": "ExternalName", "externalName": "example.com", "ports": null}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(r.body["spec"].get("clusterIP").is_none(), "{}", r.body);
    let reuse =
        json!({"metadata": {"name": "reuse"}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}});
    assert_eq!(post(&app, svcs, &reuse).await.code, 201);
    // Changing a ClusterIP service to NodePort allocates one.
    let r = merge(
        &app,
        &format!("{svcs}/np"),
        json!({"spec": {"type": "NodePort"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(r.body["spec"]["ports"][0]["nodePort"].as_i64().is_some());
}
