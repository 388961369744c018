//! networking.k8s.io, node.k8s.io and storage.k8s.io over HTTP (router with `oneshot`, no
//! sockets): for every kind, create a minimal valid object, get, list with a label selector,
//! watch, update, merge/JSON/strategic patch, server-side apply, delete, and bad input as a 422
//! with upstream's field paths (never a 5xx); then the kind-specific behaviour: defaults, status
//! subresources, generation, immutable fields, tables, protobuf bodies, the default ServiceCIDR.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common;
use common::router as app;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn call_raw(
    app: &Router,
    method: &str,
    uri: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("accept", accept)
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert!(code < 500, "{method} {uri}: {code} {v}");
    (code, v)
}

async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    content_type: &str,
    body: Value,
) -> (u16, Value) {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    call_raw(app, method, uri, content_type, "application/json", bytes).await
}

async fn get(app: &Router, uri: &str) -> (u16, Value) {
    call(app, "GET", uri, "application/json", Value::Null).await
}

async fn post(app: &Router, uri: &str, body: Value) -> (u16, Value) {
    call(app, "POST", uri, "application/json", body).await
}

async fn put(app: &Router, uri: &str, body: Value) -> (u16, Value) {
    call(app, "PUT", uri, "application/json", body).await
}

async fn patch(app: &Router, uri: &str, kind: &str, body: Value) -> (u16, Value) {
    call(app, "PATCH", uri, kind, body).await
}

/// `field: message` of each cause of a 422.
fn causes(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// The first `n` events of a watch.
async fn watch_lines(app: &Router, uri: &str, n: usize) -> Vec<Value> {
    let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{uri}");
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("watch event in time");
        let Some(frame) = frame else { break };
        if let Ok(data) = frame.unwrap().into_data() {
            buf.extend_from_slice(&data);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                out.push(serde_json::from_slice(&line).unwrap());
            }
        }
    }
    out
}

/// One kind of the table: where it lives, a minimal valid object named `name`, and a bad one
/// with the causes upstream reports.
struct Kind {
    collection: &'static str,
    name: &'static str,
    valid: Value,
    invalid: Value,
    causes: &'static [&'static str],
}

fn kinds() -> Vec<Kind> {
    vec![
        Kind {
            collection: "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
            name: "web",
            valid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
                "spec": {"rules": [{"host": "foo.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
            invalid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "bad"},
                "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {"service": {"name": "web"}}}]}}]}}),
            causes: &["spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"],
        },
        Kind {
            collection: "/apis/networking.k8s.io/v1/ingressclasses",
            name: "nginx",
            valid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"},
                "spec": {"controller": "k8s.io/ingress-nginx"}}),
            invalid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "bad"}, "spec": {}}),
            causes: &["spec.controller: Required value"],
        },
        Kind {
            collection: "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
            name: "deny",
            valid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "deny"},
                "spec": {"podSelector": {}}}),
            invalid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "bad"},
                "spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/40"}}]}]}}),
            causes: &["spec.ingress[0].from[0].ipBlock.cidr: Invalid value: \"10.0.0.0/40\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"],
        },
        Kind {
            collection: "/apis/networking.k8s.io/v1/ipaddresses",
            name: "10.96.100.1",
            valid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.96.100.1"},
                "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "web"}}}),
            invalid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "not-an-ip"},
                "spec": {"parentRef": {"resource": "services", "name": "web"}}}),
            causes: &["metadata.name: Invalid value: \"not-an-ip\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"],
        },
        Kind {
            collection: "/apis/networking.k8s.io/v1/servicecidrs",
            name: "extra",
            valid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
                "spec": {"cidrs": ["10.100.0.0/16"]}}),
            invalid: json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "bad"},
                "spec": {"cidrs": ["10.100.0.1/16"]}}),
            causes: &["spec.cidrs[0]: Invalid value: \"10.100.0.1/16\": must not have bits set beyond the prefix length"],
        },
        Kind {
            collection: "/apis/node.k8s.io/v1/runtimeclasses",
            name: "gvisor",
            valid: json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"}, "handler": "runsc"}),
            invalid: json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "bad"}, "handler": "Run_SC"}),
            causes: &["handler: Invalid value: \"Run_SC\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"],
        },
        Kind {
            collection: "/apis/storage.k8s.io/v1/storageclasses",
            name: "fast",
            valid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
                "provisioner": "kubernetes.io/no-provisioner"}),
            invalid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "bad"},
                "provisioner": "x.io/p", "reclaimPolicy": "Recycle"}),
            causes: &["reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\""],
        },
        Kind {
            collection: "/apis/storage.k8s.io/v1/csidrivers",
            name: "csi.example.com",
            valid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"}, "spec": {}}),
            invalid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "bad.example.com"},
                "spec": {"fsGroupPolicy": "Sometimes"}}),
            causes: &[
                "spec.fsGroupPolicy: Unsupported value: \"Sometimes\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
                "spec.fsGroupPolicy: Unsupported value: \"Sometimes\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
            ],
        },
        Kind {
            collection: "/apis/storage.k8s.io/v1/csinodes",
            name: "node-1",
            valid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-1"},
                "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "node-1"}]}}),
            invalid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-2"},
                "spec": {"drivers": [{"name": "csi.example.com"}]}}),
            causes: &["spec.drivers[0].nodeID: Required value"],
        },
        Kind {
            collection: "/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities",
            name: "cap",
            valid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "cap"},
                "storageClassName": "fast", "capacity": "10Gi"}),
            invalid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "bad"},
                "storageClassName": "fast", "capacity": "-1Gi"}),
            causes: &["capacity: Invalid value: \"-1Gi\": must be greater than or equal to 0"],
        },
        Kind {
            collection: "/apis/storage.k8s.io/v1/volumeattachments",
            name: "va",
            valid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"},
                "spec": {"attacher": "csi.example.com", "nodeName": "node-1", "source": {"persistentVolumeName": "pv-1"}}}),
            invalid: json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "bad"},
                "spec": {"attacher": "csi.example.com", "nodeName": "node-1", "source": {}}}),
            causes: &["spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"],
        },
    ]
}

#[tokio::test]
async fn every_kind_round_trips_through_the_generic_verbs() {
    let app = app().await;
    for k in kinds() {
        let item = format!("{}/{}", k.collection, k.name);
        let (code, list) = get(&app, k.collection).await;
        assert_eq!(code, 200, "{}", k.collection);
        let rv0 = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();

        let mut obj = k.valid.clone();
        obj["metadata"]["labels"] = json!({"suite": "net-storage"});
        let (code, created) = post(&app, k.collection, obj).await;
        assert_eq!(code, 201, "{}: {created}", k.collection);
        let (code, got) = get(&app, &item).await;
        assert_eq!(code, 200);
        assert_eq!(got["metadata"]["uid"], created["metadata"]["uid"]);

        let (_, selected) = get(
            &app,
            &format!("{}?labelSelector=suite%3Dnet-storage", k.collection),
        )
        .await;
        assert_eq!(names(&selected), [k.name], "{}", k.collection);
        let (_, other) = get(
            &app,
            &format!("{}?labelSelector=suite%3Dother", k.collection),
        )
        .await;
        assert!(names(&other).is_empty(), "{}", k.collection);

        let ev = watch_lines(
            &app,
            &format!("{}?watch=true&resourceVersion={rv0}", k.collection),
            1,
        )
        .await;
        assert_eq!(ev[0]["type"], "ADDED", "{}", k.collection);
        assert_eq!(ev[0]["object"]["metadata"]["name"], k.name);

        let mut updated = got.clone();
        updated["metadata"]["labels"]["step"] = json!("put");
        let (code, after_put) = put(&app, &item, updated).await;
        assert_eq!(code, 200, "{}: {after_put}", k.collection);
        assert_eq!(after_put["metadata"]["labels"]["step"], "put");

        let (code, merged) = patch(
            &app,
            &item,
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"step": "merge"}}}),
        )
        .await;
        assert_eq!(code, 200, "{merged}");
        assert_eq!(merged["metadata"]["labels"]["step"], "merge");
        let (code, jsonp) = patch(
            &app,
            &item,
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/annotations", "value": {"note": "json"}}]),
        )
        .await;
        assert_eq!(code, 200, "{jsonp}");
        assert_eq!(jsonp["metadata"]["annotations"]["note"], "json");
        let (code, strategic) = patch(
            &app,
            &item,
            "application/strategic-merge-patch+json",
            json!({"metadata": {"labels": {"step": "strategic"}}}),
        )
        .await;
        assert_eq!(code, 200, "{strategic}");
        assert_eq!(strategic["metadata"]["labels"]["step"], "strategic");

        let mut apply = k.valid.clone();
        apply["metadata"]["labels"] = json!({"applied": "yes"});
        let (code, applied) = patch(
            &app,
            &format!("{item}?fieldManager=net-test&force=true"),
            "application/apply-patch+yaml",
            apply,
        )
        .await;
        assert_eq!(code, 200, "{}: {applied}", k.collection);
        assert_eq!(applied["metadata"]["labels"]["applied"], "yes");
        let managers: Vec<&str> = applied["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(managers.contains(&"net-test"), "{managers:?}");

        let (code, status) = post(&app, k.collection, k.invalid.clone()).await;
        assert_eq!(code, 422, "{}: {status}", k.collection);
        assert_eq!(causes(&status), k.causes, "{}", k.collection);

        let (code, _) = call(&app, "DELETE", &item, "application/json", Value::Null).await;
        assert_eq!(code, 200, "{item}");
        let (code, _) = get(&app, &item).await;
        assert_eq!(code, 404, "{item}");
    }
}

#[tokio::test]
async fn ingress_status_is_a_subresource_and_generation_tracks_the_spec() {
    let app = app().await;
    let coll = "/apis/networking.k8s.io/v1/namespaces/default/ingresses";
    let mut ing = kinds().remove(0).valid;
    ing["status"] = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}});
    let (code, created) = post(&app, coll, ing).await;
    assert_eq!(code, 201);
    assert_eq!(created["status"], json!({"loadBalancer": {}}));
    assert_eq!(created["metadata"]["generation"], 1);
    let (code, st) = patch(&app, &format!("{coll}/web/status"), "application/merge-patch+json",
        json!({"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.7"}]}}, "spec": {"ingressClassName": "ignored"}})).await;
    assert_eq!(code, 200, "{st}");
    assert_eq!(st["status"]["loadBalancer"]["ingress"][0]["ip"], "10.0.0.7");
    assert!(st["spec"].get("ingressClassName").is_none());
    assert_eq!(st["metadata"]["generation"], 1);
    let (code, bad) = patch(
        &app,
        &format!("{coll}/web/status"),
        "application/merge-patch+json",
        json!({"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.300"}]}}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(causes(&bad), ["status.loadBalancer.ingress[0].ip: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]);
    let (_, spec) = patch(
        &app,
        &format!("{coll}/web"),
        "application/merge-patch+json",
        json!({"spec": {"ingressClassName": "nginx"}}),
    )
    .await;
    assert_eq!(spec["metadata"]["generation"], 2);
    assert_eq!(
        spec["status"]["loadBalancer"]["ingress"][0]["ip"],
        "10.0.0.7"
    );
    let (_, table) = call_raw(&app, "GET", coll, "application/json", TABLE, Vec::new()).await;
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Class", "Hosts", "Address", "Ports", "Age"]);
    assert_eq!(
        table["rows"][0]["cells"].as_array().unwrap()[..5],
        [
            json!("web"),
            json!("nginx"),
            json!("foo.com"),
            json!("10.0.0.7"),
            json!("80")
        ]
    );
}

#[tokio::test]
async fn immutable_fields_and_defaults() {
    let app = app().await;
    let sc = "/apis/storage.k8s.io/v1/storageclasses";
    let (_, created) = post(&app, sc, json!({"metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner"})).await;
    assert_eq!(created["reclaimPolicy"], "Delete");
    assert_eq!(created["volumeBindingMode"], "Immediate");
    let (code, status) = patch(
        &app,
        &format!("{sc}/std"),
        "application/merge-patch+json",
        json!({"provisioner": "other.io/x", "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        causes(&status),
        [
            "provisioner: Forbidden: updates to provisioner are forbidden.",
            "volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable",
        ]
    );
    let (_, table) = call_raw(&app, "GET", sc, "application/json", TABLE, Vec::new()).await;
    assert_eq!(table["rows"][0]["cells"][0], "std (default)");

    let drivers = "/apis/storage.k8s.io/v1/csidrivers";
    let (_, d) = post(
        &app,
        drivers,
        json!({"metadata": {"name": "csi.example.com"}, "spec": {}}),
    )
    .await;
    assert_eq!(d["spec"]["attachRequired"], true);
    assert_eq!(d["spec"]["seLinuxMount"], false);
    assert_eq!(d["spec"]["volumeLifecycleModes"], json!(["Persistent"]));
    let (code, status) = patch(
        &app,
        &format!("{drivers}/csi.example.com"),
        "application/merge-patch+json",
        json!({"spec": {"attachRequired": false}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        causes(&status),
        ["spec.attachedRequired: Invalid value: false: field is immutable"]
    );

    let classes = "/apis/networking.k8s.io/v1/ingressclasses";
    post(
        &app,
        classes,
        json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}}),
    )
    .await;
    let (code, status) = patch(
        &app,
        &format!("{classes}/nginx"),
        "application/merge-patch+json",
        json!({"spec": {"controller": "k8s.io/other"}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        causes(&status),
        ["spec.controller: Invalid value: \"k8s.io/other\": field is immutable"]
    );

    let vas = "/apis/storage.k8s.io/v1/volumeattachments";
    post(&app, vas, json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv"}}})).await;
    let (code, status) = patch(
        &app,
        &format!("{vas}/va"),
        "application/merge-patch+json",
        json!({"spec": {"nodeName": "n2"}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(status["details"]["causes"][0]["field"], "spec");
    let (code, st) = patch(
        &app,
        &format!("{vas}/va/status"),
        "application/merge-patch+json",
        json!({"status": {"attached": true}}),
    )
    .await;
    assert_eq!(code, 200, "{st}");
    assert_eq!(st["status"]["attached"], true);

    let netpols = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies";
    let (_, np) = post(
        &app,
        netpols,
        json!({"metadata": {"name": "np"}, "spec": {"podSelector": {"matchLabels": {"app": "db"}},
        "egress": [{"ports": [{"port": 5432}]}]}}),
    )
    .await;
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
    let (_, table) = call_raw(&app, "GET", netpols, "application/json", TABLE, Vec::new()).await;
    assert_eq!(table["rows"][0]["cells"][1], "app=db");
}

#[tokio::test]
async fn the_default_service_cidr_exists_and_is_ready() {
    let app = app().await;
    let (code, cidr) = get(&app, "/apis/networking.k8s.io/v1/servicecidrs/kubernetes").await;
    assert_eq!(code, 200);
    assert_eq!(cidr["spec"]["cidrs"], json!(["10.96.0.0/12"]));
    assert_eq!(cidr["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(cidr["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        cidr["status"]["conditions"][0]["message"],
        "Kubernetes default Service CIDR is ready"
    );
    let (code, status) = patch(
        &app,
        "/apis/networking.k8s.io/v1/servicecidrs/kubernetes",
        "application/merge-patch+json",
        json!({"spec": {"cidrs": ["10.97.0.0/16"]}}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        causes(&status),
        ["spec.cidrs[0]: Invalid value: \"10.97.0.0/16\": field is immutable"]
    );
}

/// Waits (bounded) until `GET uri` answers `code`, returning the last body.
async fn until_code(app: &Router, uri: &str, code: u16) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (got, body) = get(app, uri).await;
        if got == code || tokio::time::Instant::now() > deadline {
            assert_eq!(got, code, "{uri}: {body}");
            return body;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn every_cluster_ip_has_an_ip_address_naming_its_service() {
    let app = app().await;
    const IPS: &str = "/apis/networking.k8s.io/v1/ipaddresses";
    let kubernetes = until_code(&app, &format!("{IPS}/10.96.0.1"), 200).await;
    assert_eq!(
        kubernetes["spec"]["parentRef"],
        json!({"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"})
    );
    assert_eq!(
        kubernetes["metadata"]["labels"],
        json!({"ipaddress.kubernetes.io/ip-family": "IPv4",
               "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"})
    );
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
    let (code, svc) = post(&app, "/api/v1/namespaces/default/services", svc).await;
    assert_eq!(code, 201, "{svc}");
    let ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    let addr = until_code(&app, &format!("{IPS}/{ip}"), 200).await;
    assert_eq!(addr["spec"]["parentRef"]["name"], "web");
    assert_eq!(addr["spec"]["parentRef"]["namespace"], "default");
    // A headless Service holds no address.
    let headless = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hl"},
        "spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
    assert_eq!(
        post(&app, "/api/v1/namespaces/default/services", headless)
            .await
            .0,
        201
    );
    // Deleting the Service releases its address.
    let (code, _) = call(
        &app,
        "DELETE",
        "/api/v1/namespaces/default/services/web",
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    until_code(&app, &format!("{IPS}/{ip}"), 404).await;
    // An address someone else created is left alone.
    let foreign = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": "10.96.0.200"},
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "gone"}}});
    assert_eq!(post(&app, IPS, foreign).await.0, 201);
    // A check that nothing happens: the follower gets a moment to (wrongly) delete it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(get(&app, &format!("{IPS}/10.96.0.200")).await.0, 200);
}

#[tokio::test]
async fn garbage_bodies_are_never_5xx() {
    let app = app().await;
    for k in kinds() {
        for body in [
            json!({"metadata": {"name": "x"}, "spec": 7}),
            json!({"metadata": {"name": "x"}, "spec": {"rules": "no", "cidrs": 5, "drivers": {}}}),
            json!([1, 2]),
            json!({"metadata": {"name": "x"}, "handler": 3, "provisioner": [], "storageClassName": {}}),
        ] {
            // Unknown fields are dropped (fieldValidation defaults to Warn): a body may be
            // stored after all, but never as a 5xx or an ill-typed object.
            let (code, obj) = post(&app, k.collection, body).await;
            if code == 201 {
                let (_, got) = get(&app, &format!("{}/x", k.collection)).await;
                assert_eq!(got["metadata"]["uid"], obj["metadata"]["uid"]);
                call(
                    &app,
                    "DELETE",
                    &format!("{}/x", k.collection),
                    "application/json",
                    Value::Null,
                )
                .await;
            } else {
                assert!((400..500).contains(&code), "{}: {code}", k.collection);
            }
        }
    }
}

#[tokio::test]
async fn protobuf_bodies_create_objects() {
    use prost::Message;
    let app = app().await;
    let sc = k8s_pb::api::storage::v1::StorageClass {
        metadata: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("pb".into()),
            ..Default::default()
        }),
        provisioner: Some("example.com/pb".into()),
        ..Default::default()
    };
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("storage.k8s.io/v1".into()),
            kind: Some("StorageClass".into()),
        }),
        raw: Some(sc.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    let (code, created) = call_raw(
        &app,
        "POST",
        "/apis/storage.k8s.io/v1/storageclasses",
        "application/vnd.kubernetes.protobuf",
        "application/json",
        body,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["provisioner"], "example.com/pb");
    assert_eq!(created["reclaimPolicy"], "Delete");
}

#[tokio::test]
async fn csinode_drivers_merge_by_name() {
    let app = app().await;
    let nodes = "/apis/storage.k8s.io/v1/csinodes";
    post(&app, nodes, json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "a.example.com", "nodeID": "n1"}]}})).await;
    let (code, merged) = patch(
        &app,
        &format!("{nodes}/n1"),
        "application/strategic-merge-patch+json",
        json!({"spec": {"drivers": [{"name": "b.example.com", "nodeID": "n1"}]}}),
    )
    .await;
    assert_eq!(code, 200, "{merged}");
    let names: Vec<&str> = merged["spec"]["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.example.com", "b.example.com"]);
}

#[tokio::test]
async fn new_ingresses_get_the_default_ingress_class() {
    let app = app().await;
    let classes = "/apis/networking.k8s.io/v1/ingressclasses";
    let ings = "/apis/networking.k8s.io/v1/namespaces/default/ingresses";
    let backend = json!({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}});
    let (_, none) = post(
        &app,
        ings,
        json!({"metadata": {"name": "before"}, "spec": backend}),
    )
    .await;
    assert!(none["spec"].get("ingressClassName").is_none(), "{none}");
    for name in ["a-default", "b-default"] {
        post(&app, classes, json!({"metadata": {"name": name, "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
            "spec": {"controller": "k8s.io/x"}})).await;
    }
    post(
        &app,
        classes,
        json!({"metadata": {"name": "other"}, "spec": {"controller": "k8s.io/x"}}),
    )
    .await;
    let (_, got) = post(
        &app,
        ings,
        json!({"metadata": {"name": "after"}, "spec": backend}),
    )
    .await;
    // The newer default wins, and within one second (creation times are whole seconds) the
    // first name: either can be chosen here.
    let class = got["spec"]["ingressClassName"].as_str().unwrap();
    assert!(["a-default", "b-default"].contains(&class), "{got}");
    let mut annotated = json!({"metadata": {"name": "annotated", "annotations": {"kubernetes.io/ingress.class": "legacy"}}, "spec": backend});
    let (_, got) = post(&app, ings, annotated.take()).await;
    assert!(got["spec"].get("ingressClassName").is_none(), "{got}");
    let (_, got) = post(&app, ings, json!({"metadata": {"name": "explicit"}, "spec": {"ingressClassName": "other", "defaultBackend": backend["defaultBackend"]}})).await;
    assert_eq!(got["spec"]["ingressClassName"], "other");
}
