//! Hostile input against one shared Sandbox (reliability T6-T7, issue 21 items 1 and 2):
//!
//! - the JSON-patch copy bomb (one `add`, then 22 `copy` of `/metadata/annotations` into
//!   itself) is answered 422 with upstream's `AccumulatedCopySizeError` text while `/healthz`
//!   keeps answering, and changes nothing; a patch of 10001 operations is 413;
//! - its merge, strategic-merge and apply siblings (a result over 3 MiB: 413; a patch nested
//!   past the limit: 400) change nothing either;
//! - an ill-typed body of every built-in kind (one field of the kind's own schema given a value
//!   of the wrong JSON type) is refused on create (400 `cannot be handled as a`) and on update,
//!   ill-typed patches of every patch type on existing objects are refused (422 on `patch`),
//!   and afterwards no ill-typed object is listed;
//! - a poison pod written into the store directly (bypassing the API, as a store written by an
//!   older server could hold one) does not wedge the informers: the scheduler still schedules
//!   and the fake kubelet runs a new pod, and the skipped object is counted.
//!
//! The sandbox is shared by every test of this binary: it runs on a runtime of its own that
//! lives as long as the process, and each test blocks on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

struct Shared {
    runtime: tokio::runtime::Runtime,
    sandbox: minik8s::Sandbox,
    http: reqwest::Client,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sandbox = runtime
            .block_on(minik8s::Sandbox::builder().in_memory().start())
            .unwrap();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        Shared {
            runtime,
            sandbox,
            http,
        }
    })
}

/// One request to the shared sandbox: (status code, JSON body).
async fn send(method: &str, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    send_to(shared().sandbox.url(), method, path, content_type, body).await
}

/// One request to the server at `base`.
async fn send_to(
    base: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let s = shared();
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let resp = s
        .http
        .request(method, format!("{base}{path}"))
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn send_json(method: &str, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
    send(
        method,
        path,
        content_type,
        serde_json::to_vec(body).unwrap(),
    )
    .await
}

async fn get(path: &str) -> (u16, Value) {
    send("GET", path, "application/json", Vec::new()).await
}

fn message(status: &Value) -> &str {
    status["message"].as_str().unwrap_or("")
}

/// Creates `obj` at `collection` and returns it as stored.
async fn create(collection: &str, obj: Value) -> Value {
    let (code, body) = send_json("POST", collection, "application/json", &obj).await;
    assert_eq!(code, 201, "create at {collection}: {body}");
    body
}

const CM: &str = "/api/v1/namespaces/default/configmaps";
const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_PATCH: &str = "application/strategic-merge-patch+json";
const APPLY_PATCH: &str = "application/apply-patch+yaml";

#[test]
fn the_copy_bomb_is_refused_while_healthz_answers() {
    shared().runtime.block_on(async {
        create(CM, json!({"metadata": {"name": "bomb", "annotations": {"keep": "me"}}})).await;
        let mut ops = vec![json!({"op": "add", "path": "/metadata/annotations/a", "value": "x".repeat(32)})];
        for i in 0..22 {
            ops.push(json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/c{i}")}));
        }
        let (path, ops) = (format!("{CM}/bomb"), Value::Array(ops));
        let bomb = send_json("PATCH", &path, JSON_PATCH, &ops);
        let healthz = async {
            let (code, _) = get("/healthz").await;
            code
        };
        let ((code, status), healthz) = tokio::join!(bomb, healthz);
        assert_eq!(healthz, 200);
        assert_eq!(code, 422, "{status}");
        assert_eq!(status["reason"], "Invalid");
        let m = message(&status);
        assert!(
            m.contains("Unable to complete the copy, the accumulated size increase of copy is ")
                && m.ends_with(", exceeding the limit 3145728"),
            "{m}"
        );
        let (code, _) = get("/healthz").await;
        assert_eq!(code, 200);
        let (_, stored) = get(&format!("{CM}/bomb")).await;
        assert_eq!(stored["metadata"]["annotations"], json!({"keep": "me"}));

        let many: Vec<Value> = (0..10_001)
            .map(|_| json!({"op": "test", "path": "/metadata/name", "value": "bomb"}))
            .collect();
        let (code, status) =
            send_json("PATCH", &format!("{CM}/bomb"), JSON_PATCH, &Value::Array(many)).await;
        assert_eq!(code, 413, "{status}");
        assert_eq!(
            message(&status),
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    });
}

#[test]
fn merge_strategic_and_apply_siblings_are_bounded() {
    shared().runtime.block_on(async {
        // A ControllerRevision's `data` is free-form and has no size limit of its own: 1 MiB
        // stored (the store takes at most 1.5 MiB), 2.2 MiB more patched in makes a result over
        // the 3 MiB limit.
        let revisions = "/apis/apps/v1/namespaces/default/controllerrevisions";
        let big = format!("{revisions}/big");
        create(
            revisions,
            json!({"metadata": {"name": "big"}, "revision": 1,
                   "data": {"a": "y".repeat(1024 * 1024)}}),
        )
        .await;
        let more = json!({"data": {"b": "z".repeat(2200 * 1024)}});
        for ty in [MERGE_PATCH, STRATEGIC_PATCH] {
            let (code, status) = send_json("PATCH", &big, ty, &more).await;
            assert_eq!(code, 413, "{ty}: {status}");
            assert_eq!(
                message(&status),
                "Request entity too large: limit is 3145728"
            );
        }
        let apply = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                           "metadata": {"name": "big"}, "revision": 1,
                           "data": {"b": "z".repeat(2200 * 1024)}});
        let (code, status) = send_json(
            "PATCH",
            &format!("{big}?fieldManager=hostile&force=true"),
            APPLY_PATCH,
            &apply,
        )
        .await;
        assert_eq!(code, 413, "apply: {status}");
        let (_, stored) = get(&big).await;
        assert!(stored["data"].get("b").is_none(), "nothing was added");
        create(CM, json!({"metadata": {"name": "deep"}})).await;

        // Nested past the patch limit: refused before it is applied.
        let mut deep = json!("leaf");
        for _ in 0..120 {
            deep = json!({ "n": deep });
        }
        for ty in [MERGE_PATCH, STRATEGIC_PATCH] {
            let patch = json!({"metadata": {"annotations": {"a": "b"}}, "x": deep});
            let (code, status) = send_json("PATCH", &format!("{CM}/deep"), ty, &patch).await;
            assert_eq!(code, 400, "{ty}: {status}");
        }
        let (code, _) = get("/healthz").await;
        assert_eq!(code, 200);
    });
}

/// A built-in resource that can be created and listed.
struct Kind {
    collection: String,
    kind: String,
    version: String,
    /// Its `/openapi/v3/…` document.
    openapi: String,
}

/// Every built-in resource that can be created and listed.
fn creatable() -> Vec<Kind> {
    api::resources::builtin()
        .into_iter()
        .filter(|r| r.verbs.iter().any(|v| v == "create") && r.verbs.iter().any(|v| v == "list"))
        .map(|r| {
            let base = if r.group.is_empty() {
                format!("/api/{}", r.version)
            } else {
                format!("/apis/{}/{}", r.group, r.version)
            };
            let collection = if r.namespaced {
                format!("{base}/namespaces/default/{}", r.plural)
            } else {
                format!("{base}/{}", r.plural)
            };
            Kind {
                collection,
                openapi: base.trim_start_matches('/').to_string(),
                kind: r.kind,
                version: r.version,
            }
        })
        .collect()
}

/// A field of the kind's own schema (not type meta, metadata or status) and a value of the
/// wrong JSON type for it; `metadata.labels` for kinds without one.
fn bad_field(schema: &Value, schemas: &Value) -> (String, Value) {
    let mut props: Vec<(&String, &Value)> = schema["properties"]
        .as_object()
        .map(|p| p.iter().collect())
        .unwrap_or_default();
    props.sort_by_key(|(k, _)| k.as_str() != "spec");
    for (name, prop) in props {
        if ["apiVersion", "kind", "metadata", "status"].contains(&name.as_str()) {
            continue;
        }
        let target = prop["allOf"][0]["$ref"]
            .as_str()
            .or_else(|| prop["$ref"].as_str())
            .and_then(|r| r.rsplit('/').next())
            .map(|d| &schemas[d]);
        if prop.to_string().contains("RawExtension") {
            continue; // any JSON is a RawExtension
        }
        let ty = target.unwrap_or(prop)["type"].as_str().unwrap_or("");
        let wrong = match ty {
            "object" | "array" | "boolean" | "integer" | "number" => json!("x"),
            "string" if prop["format"] != "byte" => json!(5),
            _ => continue,
        };
        return (name.clone(), wrong);
    }
    (
        "metadata".to_string(),
        json!({"name": "ill-typed", "labels": 5}),
    )
}

#[test]
fn ill_typed_bodies_of_every_builtin_kind_are_refused_and_never_stored() {
    shared().runtime.block_on(async {
        let kinds = creatable();
        assert!(kinds.len() > 40, "every built-in kind: {}", kinds.len());
        for Kind {
            collection,
            kind,
            version,
            openapi,
        } in &kinds
        {
            let (_, doc) = get(&format!("/openapi/v3/{openapi}")).await;
            let schemas = &doc["components"]["schemas"];
            let Some(schema) = schemas.as_object().and_then(|s| {
                s.values().find(|d| {
                    d["x-kubernetes-group-version-kind"]
                        .as_array()
                        .is_some_and(|g| {
                            g.iter().any(|g| {
                                g["kind"] == kind.as_str() && g["version"] == version.as_str()
                            })
                        })
                })
            }) else {
                panic!("{kind} has a schema")
            };
            let (field, wrong) = bad_field(schema, schemas);
            let mut body = json!({"metadata": {"name": "ill-typed"}});
            body[&field] = wrong;
            let (code, status) = send_json("POST", collection, "application/json", &body).await;
            let expected =
                format!("{kind} in version \"{version}\" cannot be handled as a {kind}: ");
            assert_eq!(code, 400, "create {kind} with a bad {field}: {status}");
            assert!(message(&status).starts_with(&expected), "{kind}: {status}");
            let (code, status) = send_json(
                "PUT",
                &format!("{collection}/ill-typed"),
                "application/json",
                &body,
            )
            .await;
            assert_eq!(code, 400, "update {kind} with a bad {field}: {status}");
            assert!(message(&status).starts_with(&expected), "{kind}: {status}");
        }
        for Kind {
            collection, kind, ..
        } in &kinds
        {
            let (code, list) = get(collection).await;
            if code != 200 {
                continue;
            }
            let names: Vec<&str> = list["items"]
                .as_array()
                .map(|i| {
                    i.iter()
                        .filter_map(|o| o["metadata"]["name"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                !names.contains(&"ill-typed"),
                "an ill-typed {kind} was stored"
            );
        }
    });
}

#[test]
fn the_issues_ill_typed_writes_are_refused_with_upstreams_messages() {
    shared().runtime.block_on(async {
        let (code, status) = send_json(
            "POST",
            "/api/v1/nodes",
            "application/json",
            &json!({"metadata": {"name": "typed-node"}, "spec": "x"}),
        )
        .await;
        assert_eq!(code, 400);
        assert_eq!(status["reason"], "BadRequest");
        assert_eq!(
            message(&status),
            "Node in version \"v1\" cannot be handled as a Node: json: cannot unmarshal string into Go struct field Node.spec of type v1.NodeSpec"
        );
        let (code, status) = send_json(
            "POST",
            CM,
            "application/json",
            &json!({"metadata": {"name": "typed-cm"}, "data": 5}),
        )
        .await;
        assert_eq!(code, 400);
        assert_eq!(
            message(&status),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type map[string]string"
        );
        let (code, status) = send_json(
            "POST",
            "/api/v1/namespaces/default/secrets",
            "application/json",
            &json!({"metadata": {"name": "typed-secret"}, "data": {"k": "not base64!"}}),
        )
        .await;
        assert_eq!(code, 400);
        assert_eq!(
            message(&status),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3"
        );

        // Every patch type on an existing pod, and its status.
        let pods = "/api/v1/namespaces/default/pods";
        create(
            pods,
            json!({"metadata": {"name": "typed-pod"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        )
        .await;
        let go = "json: cannot unmarshal number into Go struct field PodSpec.spec.tolerations of type []v1.Toleration";
        let cases = [
            (STRATEGIC_PATCH, json!({"spec": {"tolerations": 5}})),
            (MERGE_PATCH, json!({"spec": {"tolerations": 5}})),
            (JSON_PATCH, json!([{"op": "add", "path": "/spec/tolerations", "value": 5}])),
        ];
        for (ty, patch) in cases {
            let (code, status) =
                send_json("PATCH", &format!("{pods}/typed-pod"), ty, &patch).await;
            assert_eq!(code, 422, "{ty}: {status}");
            assert_eq!(status["reason"], "Invalid");
            assert_eq!(status["details"]["causes"][0]["field"], "patch", "{status}");
            let m = message(&status);
            assert!(m.starts_with(" \"\" is invalid: patch: Invalid value: "), "{m}");
            assert!(m.ends_with(go), "{ty}: {m}");
        }
        let (code, status) = send_json(
            "PATCH",
            &format!("{pods}/typed-pod?fieldManager=hostile&force=true"),
            APPLY_PATCH,
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typed-pod"},
                    "spec": {"tolerations": 5}}),
        )
        .await;
        assert!(code == 422 || code == 400, "apply: {status}");
        let (code, status) = send_json(
            "PATCH",
            &format!("{pods}/typed-pod/status"),
            MERGE_PATCH,
            &json!({"status": {"conditions": "x"}}),
        )
        .await;
        assert_eq!(code, 422, "status: {status}");
        assert!(
            message(&status).ends_with("json: cannot unmarshal string into Go struct field PodStatus.status.conditions of type []v1.PodCondition"),
            "{status}"
        );
        create(
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"metadata": {"name": "typed-deploy"}, "spec": {
                "selector": {"matchLabels": {"app": "t"}},
                "template": {"metadata": {"labels": {"app": "t"}},
                             "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        )
        .await;
        let (code, status) = send_json(
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/typed-deploy/scale",
            MERGE_PATCH,
            &json!({"spec": {"replicas": "x"}}),
        )
        .await;
        assert_eq!(code, 422, "scale: {status}");
        assert!(
            message(&status).ends_with("json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"),
            "{status}"
        );
        let (code, status) = send_json(
            "PUT",
            "/apis/apps/v1/namespaces/default/deployments/typed-deploy/scale",
            "application/json",
            &json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                    "metadata": {"name": "typed-deploy", "namespace": "default"},
                    "spec": {"replicas": true}}),
        )
        .await;
        assert_eq!(code, 400, "scale: {status}");
        assert_eq!(
            message(&status),
            "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal bool into Go struct field ScaleSpec.spec.replicas of type int32"
        );

        let (code, status) = send_json(
            "POST",
            &format!("{pods}/typed-pod/binding"),
            "application/json",
            &json!({"metadata": {"name": "typed-pod"}, "target": 5}),
        )
        .await;
        assert_eq!(code, 400, "binding: {status}");
        assert_eq!(
            message(&status),
            "Binding in version \"v1\" cannot be handled as a Binding: json: cannot unmarshal number into Go struct field Binding.target of type v1.ObjectReference"
        );
        let (code, status) = send_json(
            "PUT",
            "/api/v1/namespaces/default/finalize",
            "application/json",
            &json!({"metadata": {"name": "default"}, "spec": {"finalizers": 5}}),
        )
        .await;
        assert_eq!(code, 400, "finalize: {status}");
        assert!(
            message(&status).starts_with("Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot unmarshal number into Go struct field NamespaceSpec.spec.finalizers"),
            "{status}"
        );

        let (_, pod) = get(&format!("{pods}/typed-pod")).await;
        assert!(pod["spec"].get("tolerations").is_none_or(Value::is_array), "{pod}");
        for gone in [
            "/api/v1/nodes/typed-node",
            "/api/v1/namespaces/default/configmaps/typed-cm",
            "/api/v1/namespaces/default/secrets/typed-secret",
        ] {
            assert_eq!(get(gone).await.0, 404, "{gone} was stored");
        }
    });
}

#[test]
fn a_poison_object_in_the_store_does_not_wedge_the_informers() {
    use store::Store as _;
    shared().runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let start = || {
            minik8s::Sandbox::builder()
                .data_dir(dir.path())
                .nodes(1)
                .start()
        };
        {
            let store =
                store::SledStore::open(&dir.path().join("store"), store::StoreConfig::default())
                    .unwrap();
            let poison = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "poison", "namespace": "default",
                             "uid": "00000000-0000-0000-0000-00000000dead",
                             "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": 5},
            });
            let created = store
                .create(
                    "/registry/pods/default/poison",
                    serde_json::to_vec(&poison).unwrap().into(),
                )
                .await
                .unwrap();
            assert!(matches!(created, store::CreateOutcome::Created(_)));
            store.flush_and_close().await.unwrap();
        }
        let skipped_before = client::rest::undecodable::undecodable_objects();
        // The store's file lock goes with its last handle: start once it is free.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let sandbox = loop {
            match start().await {
                Ok(sandbox) => break sandbox,
                Err(e) if std::time::Instant::now() < deadline => {
                    eprintln!("not yet: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("the sandbox starts on the poisoned store: {e}"),
            }
        };
        let base = sandbox.url().to_string();
        let pods = "/api/v1/namespaces/default/pods";
        let (code, body) = send_to(
            &base,
            "POST",
            pods,
            "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "healthy"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}))
            .unwrap(),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        tests::eventually("the healthy pod scheduled and running", || async {
            let (_, pod) = send_to(&base, "GET", &format!("{pods}/healthy"), "", Vec::new()).await;
            let scheduled = pod["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            (scheduled && pod["status"]["phase"] == "Running").then_some(())
        })
        .await;
        assert!(
            client::rest::undecodable::undecodable_objects() > skipped_before,
            "the poison pod was reported"
        );
        // The poison is still stored and served as it is: nothing decoded it away.
        let (code, _) = send_to(&base, "GET", &format!("{pods}/poison"), "", Vec::new()).await;
        assert_eq!(code, 200);
        sandbox.stop().await;
    });
}
