//! Every served version of a CRD with `conversion: Webhook`, end to end: an apiserver on
//! 127.0.0.1 and the test webhook (`conversion/server.rs`: axum over rustls, generated CA in
//! `caBundle`) converting between `example.com/v1` (`spec.size`, the storage version) and
//! `example.com/v2` (`spec.replicas`).
//!
//! Covered: create at either version (stored in v1), get and list at both (a list is one
//! review; nothing is sent for objects already in the version), watch at v2 (from a snapshot:
//! one review), merge patch, server-side apply, status and scale at v2, objects stored in an
//! older storage version after the storage version changed, kube-rs reading v2; and failures
//! as upstream reports them: a
//! failing webhook, a wrong UID, a wrong object count, a webhook that is down (500s naming the
//! conversion webhook and the cause), a failed conversion on a write (nothing stored) and on a
//! watch (an ERROR event ends that watch, the server goes on).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::conversion_server as server;

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use server::{Mode, Server};

const V1: &str = "/apis/example.com/v1/namespaces/default/widgets";
const V2: &str = "/apis/example.com/v2/namespaces/default/widgets";
const CRD: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";

struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn call(&self, method: &str, path: &str, ct: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("content-type", ct);
        if let Some(b) = body {
            req = req.body(b.to_string());
        }
        let resp = req.send().await.unwrap();
        let code = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, "application/json", None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, "application/json", Some(body))
            .await
    }

    async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("PUT", path, "application/json", Some(body)).await
    }

    async fn merge(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("PATCH", path, "application/merge-patch+json", Some(body))
            .await
    }

    /// Opens a watch.
    async fn watch(&self, path: &str) -> reqwest::Response {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        resp
    }
}

/// A watch's lines until `n` arrived or the stream ended (10 s at most).
async fn lines(resp: &mut reqwest::Response, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .expect("watch event in time")
            .unwrap();
        let Some(chunk) = chunk else { break };
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            out.push(serde_json::from_slice(&line).unwrap());
        }
    }
    out
}

fn version(field: &str, storage: bool, name: &str) -> Value {
    json!({
        "name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "integer"}}},
            "status": {"type": "object", "properties": {"ready": {"type": "integer"}}}}}},
        "subresources": {"status": {}, "scale": {
            "specReplicasPath": format!(".spec.{field}"), "statusReplicasPath": ".status.ready"}},
    })
}

fn crd(url: &str, ca_pem: &str) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": url, "caBundle": ca}}},
            "versions": [version("size", true, "v1"), version("replicas", false, "v2")]},
    })
}

/// An apiserver serving the CRD, the webhook, and a client.
async fn setup() -> (apiserver::Server, Server, Api) {
    let hook = Server::start().await;
    hook.set(Mode::Versions);
    let server = common::start().await;
    let api = Api {
        base: server.url(),
        http: reqwest::Client::new(),
    };
    let url = format!("https://{}/convert", hook.addr);
    let (code, body) = api
        .post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd(&url, &hook.ca_pem),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let served = common::eventually(Duration::from_secs(10), || async {
        api.get(V2).await.0 == 200 && api.get(V1).await.0 == 200
    })
    .await;
    assert!(served, "both versions served");
    (server, hook, api)
}

/// Replaces the CRD's spec with `change` applied (retried on conflicts), then waits until the
/// change is served, as `served` tells.
async fn change_crd<F, Fut>(api: &Api, change: impl Fn(&mut Value), served: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..10 {
        let (_, mut current) = api.get(CRD).await;
        change(&mut current);
        if api.put(CRD, current).await.0 == 200 {
            break;
        }
    }
    assert!(common::eventually(Duration::from_secs(10), served).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_is_served_through_the_webhook() {
    let (_server, hook, api) = setup().await;
    // Created at the storage version: nothing to convert.
    let (code, a) = api
        .post(V1, json!({"metadata": {"name": "a"}, "spec": {"size": 3}}))
        .await;
    assert_eq!(
        (code, &a["apiVersion"], &a["spec"]),
        (201, &json!("example.com/v1"), &json!({"size": 3}))
    );
    assert_eq!(hook.reviews(), 0);

    // Read at v2: converted, pruned by v2's schema.
    let (code, a2) = api.get(&format!("{V2}/a")).await;
    assert_eq!(code, 200, "{a2}");
    assert_eq!(a2["apiVersion"], "example.com/v2");
    assert_eq!(a2["spec"], json!({"replicas": 3}));
    assert_eq!(a2["metadata"]["uid"], a["metadata"]["uid"]);
    assert_eq!(hook.reviews(), 1);
    {
        let seen = hook.hook.seen.lock();
        let review = &seen.reviews[0]["request"];
        assert_eq!(review["desiredAPIVersion"], "example.com/v2");
        assert_eq!(review["objects"][0]["apiVersion"], "example.com/v1");
    }

    // Created at v2: validated as v2, stored as v1 (read back at v1 without a review).
    let (code, b) = api
        .post(
            V2,
            json!({"metadata": {"name": "b"}, "spec": {"replicas": 5}}),
        )
        .await;
    assert_eq!(code, 201, "{b}");
    assert_eq!(
        (&b["apiVersion"], &b["spec"]),
        (&json!("example.com/v2"), &json!({"replicas": 5}))
    );
    let (code, bad) = api
        .post(
            V2,
            json!({"metadata": {"name": "x"}, "spec": {"replicas": "many"}}),
        )
        .await;
    assert_eq!(code, 422, "{bad}");
    assert!(
        bad["message"].as_str().unwrap().contains("spec.replicas"),
        "{bad}"
    );
    let before = hook.reviews();
    let (_, b1) = api.get(&format!("{V1}/b")).await;
    assert_eq!(
        (&b1["apiVersion"], &b1["spec"]),
        (&json!("example.com/v1"), &json!({"size": 5}))
    );
    assert_eq!(hook.reviews(), before);

    // A list at v2 is one review of every item; at v1, none.
    let (code, list) = api.get(V2).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["apiVersion"], "example.com/v2");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| i["apiVersion"] == "example.com/v2"));
    assert_eq!(items[1]["spec"], json!({"replicas": 5}));
    assert_eq!(hook.reviews(), before + 1);
    let (_, list1) = api.get(V1).await;
    assert!(list1["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["spec"]["size"].is_i64()));
    assert_eq!(hook.reviews(), before + 1);
    // A watch from a snapshot: its ADDED events in one review.
    let mut initial = api
        .watch(&format!("{V2}?watch=true&resourceVersion=0"))
        .await;
    let events = lines(&mut initial, 2).await;
    assert!(
        events
            .iter()
            .all(|e| e["type"] == "ADDED" && e["object"]["apiVersion"] == "example.com/v2"),
        "{events:?}"
    );
    assert_eq!(hook.reviews(), before + 2);
    drop(initial);

    // Watch at v2; patch at v2.
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = api
        .watch(&format!("{V2}?watch=true&resourceVersion={rv}"))
        .await;
    let (code, patched) = api
        .merge(&format!("{V2}/a"), json!({"spec": {"replicas": 7}}))
        .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        (&patched["apiVersion"], &patched["spec"]),
        (&json!("example.com/v2"), &json!({"replicas": 7}))
    );
    assert_eq!(
        api.get(&format!("{V1}/a")).await.1["spec"],
        json!({"size": 7})
    );
    let events = lines(&mut watch, 1).await;
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(events[0]["object"]["apiVersion"], "example.com/v2");
    assert_eq!(events[0]["object"]["spec"], json!({"replicas": 7}));

    // Server-side apply at v2: managed in v2's terms.
    let applied = json!({"apiVersion": "example.com/v2", "kind": "Widget",
        "metadata": {"name": "a"}, "spec": {"replicas": 9}});
    let (code, a) = api
        .call(
            "PATCH",
            &format!("{V2}/a?fieldManager=tester&force=true"),
            "application/apply-patch+yaml",
            Some(applied),
        )
        .await;
    assert_eq!(code, 200, "{a}");
    assert_eq!(a["spec"], json!({"replicas": 9}));
    let managed = a["metadata"]["managedFields"].as_array().unwrap();
    let tester = managed.iter().find(|m| m["manager"] == "tester").unwrap();
    assert_eq!(tester["apiVersion"], "example.com/v2");
    assert_eq!(
        api.get(&format!("{V1}/a")).await.1["spec"],
        json!({"size": 9})
    );

    // Status and scale at v2.
    let mut status = a.clone();
    status["status"] = json!({"ready": 2});
    let (code, s) = api.put(&format!("{V2}/a/status"), status).await;
    assert_eq!(
        (code, &s["status"], &s["apiVersion"]),
        (200, &json!({"ready": 2}), &json!("example.com/v2")),
        "{s}"
    );
    let (code, scale) = api.get(&format!("{V2}/a/scale")).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(
        (&scale["spec"]["replicas"], &scale["status"]["replicas"]),
        (&json!(9), &json!(2))
    );
    let (code, scale) = api
        .merge(&format!("{V2}/a/scale"), json!({"spec": {"replicas": 4}}))
        .await;
    assert_eq!(
        (code, &scale["spec"]["replicas"]),
        (200, &json!(4)),
        "{scale}"
    );
    assert_eq!(
        api.get(&format!("{V1}/a")).await.1["spec"],
        json!({"size": 4})
    );

    // kube-rs reads v2.
    let client = kube::Client::try_from(kube::Config::new(api.base.parse().unwrap())).unwrap();
    let ar = kube::api::ApiResource {
        group: "example.com".into(),
        version: "v2".into(),
        api_version: "example.com/v2".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client, "default", &ar);
    let got = widgets.get("b").await.unwrap();
    assert_eq!(got.data["spec"], json!({"replicas": 5}));
    let listed = widgets.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    assert_eq!(listed.items[0].data["spec"], json!({"replicas": 4}));

    // The storage version becomes v2: objects stored as v1 are still read at both versions,
    // new ones are stored as v2 (a create at v1 now takes a review each way).
    change_crd(
        &api,
        |crd| {
            crd["spec"]["versions"][0]["storage"] = json!(false);
            crd["spec"]["versions"][1]["storage"] = json!(true);
        },
        || async {
            let before = hook.reviews();
            let name = format!("probe-{before}");
            let created = api
                .post(V1, json!({"metadata": {"name": name}, "spec": {"size": 1}}))
                .await;
            assert_eq!(created.0, 201, "{}", created.1);
            hook.reviews() == before + 2
        },
    )
    .await;
    let (code, list) = api.get(V1).await;
    assert_eq!(code, 200, "{list}");
    let items = list["items"].as_array().unwrap();
    assert!(
        items
            .iter()
            .all(|i| i["apiVersion"] == "example.com/v1" && i["spec"]["size"].is_i64()),
        "{list}"
    );
    assert_eq!(
        api.get(&format!("{V2}/a")).await.1["spec"],
        json!({"replicas": 4})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_failures_are_upstreams_errors() {
    let (_server, hook, api) = setup().await;
    for name in ["a", "b"] {
        let (code, _) = api
            .post(V1, json!({"metadata": {"name": name}, "spec": {"size": 7}}))
            .await;
        assert_eq!(code, 201);
    }
    let failed = "conversion webhook for example.com/v1, Kind=Widget failed: cannot convert size 7";
    let error = |code: u16, body: &Value| {
        assert_eq!(code, 500, "{body}");
        assert_eq!(body["kind"], "Status");
        assert_eq!(body.get("reason"), None, "{body}");
        body["message"].as_str().unwrap_or_default().to_string()
    };
    hook.set(Mode::Fail);
    let (code, body) = api.get(&format!("{V2}/a")).await;
    assert_eq!(error(code, &body), failed);
    let (code, body) = api.get(V2).await;
    assert_eq!(error(code, &body), failed);
    hook.set(Mode::WrongUid);
    let (code, body) = api.get(&format!("{V2}/a")).await;
    assert!(error(code, &body).starts_with(
        "conversion webhook for example.com/v1, Kind=Widget failed: expected response.uid="
    ));
    hook.set(Mode::DropOne);
    let (code, body) = api.get(V2).await;
    assert_eq!(
        error(code, &body),
        "conversion webhook for example.com/v1, Kind=WidgetList returned 1 objects, expected 2"
    );

    // Writes: nothing is stored when the conversion to the storage version fails.
    hook.set(Mode::Fail);
    let (code, body) = api
        .post(
            V2,
            json!({"metadata": {"name": "c"}, "spec": {"replicas": 1}}),
        )
        .await;
    assert_eq!(
        error(code, &body),
        "conversion webhook for example.com/v2, Kind=Widget failed: cannot convert size 7"
    );
    assert_eq!(api.get(&format!("{V1}/c")).await.0, 404);
    let (code, body) = api
        .merge(&format!("{V2}/a"), json!({"spec": {"replicas": 1}}))
        .await;
    assert_eq!(error(code, &body), failed);
    assert_eq!(
        api.get(&format!("{V1}/a")).await.1["spec"],
        json!({"size": 7})
    );

    // A watch at v2 ends with an ERROR event on an event it cannot convert; the server goes on.
    hook.set(Mode::Versions);
    let (_, list) = api.get(V1).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = api
        .watch(&format!("{V2}?watch=true&resourceVersion={rv}"))
        .await;
    hook.set(Mode::Fail);
    let (code, _) = api
        .merge(&format!("{V1}/a"), json!({"spec": {"size": 8}}))
        .await;
    assert_eq!(code, 200);
    let events = lines(&mut watch, 2).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 500);
    assert_eq!(events[0]["object"]["reason"], "InternalError");
    assert_eq!(
        events[0]["object"]["message"],
        format!("Internal error occurred: {failed}")
    );
    assert_eq!(api.get(&format!("{V1}/a")).await.0, 200);

    // A webhook that is down: the transport's error after the URL.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("https://127.0.0.1:{port}/convert");
    let prefix = format!(
        "conversion webhook for example.com/v1, Kind=Widget failed: Post \"{url}?timeout=30s\": "
    );
    change_crd(
        &api,
        |crd| crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] = json!(url),
        || async {
            let (_, body) = api.get(&format!("{V2}/a")).await;
            body["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(&prefix))
        },
    )
    .await;
    let (code, body) = api.get(&format!("{V2}/a")).await;
    let message = error(code, &body);
    assert!(
        message.to_lowercase().contains("connection refused"),
        "{message}"
    );
    // The storage version needs no webhook.
    assert_eq!(api.get(&format!("{V1}/a")).await.0, 200);
}
