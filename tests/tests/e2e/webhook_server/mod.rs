//! The admission webhook server of `admission_webhooks.rs`: axum over rustls on 127.0.0.1, its
//! CA and serving certificate generated per test (the conversion tests' `pki`), answering each
//! path as [`review`] says and recording every review it receives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

use super::conversion_server;

/// Reviews received, by path.
#[derive(Default)]
pub struct Seen(pub Mutex<Vec<(String, Value)>>);

/// A JSONPatch response allowing the request.
fn patched(uid: &Value, ops: Value) -> Value {
    let patch = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch}})
}

fn answer(uid: &Value, response: Value) -> Value {
    let mut r = response;
    r["uid"] = uid.clone();
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r})
}

/// The webhooks, by path:
/// - `allow`: allows; `deny`: refuses with a message; `warn`: allows with a warning;
/// - `add-label`: adds the label `mutated-by=webhook` (and a field ConfigMaps do not have);
/// - `count`: counts its calls in the annotation `count`; `label-once`: adds `once=yes` when
///   missing (a change that asks earlier `IfNeeded` webhooks to run again);
/// - `scale-max-5`: refuses a Scale of more than 5 replicas; `scale-cap-4`: lowers a Scale's
///   replicas above 4 to 4; `deny-binding`: refuses a Binding to the node `reserved`;
///   `deny-eviction`: refuses an Eviction with `deleteOptions.gracePeriodSeconds: 0`;
///   `deny-exec`: refuses every request (a connect's options are its object);
/// - `hang`: answers after 20 s (past any test timeout);
/// - `meddle`: on pod updates changes what the write may not change: the main resource's
///   `status.message`, a `/status` write's first container image, and makes a
///   `/ephemeralcontainers` write's first ephemeral container privileged.
async fn review(
    State(seen): State<Arc<Seen>>,
    Path(path): Path<String>,
    Json(review): Json<Value>,
) -> Json<Value> {
    seen.0.lock().push((path.clone(), review.clone()));
    let req = &review["request"];
    let uid = &req["uid"];
    let obj = &req["object"];
    let labels = obj["metadata"]["labels"].clone();
    let with = |mut map: Value, k: &str, v: &str| {
        if !map.is_object() {
            map = json!({});
        }
        map[k] = json!(v);
        map
    };
    Json(match path.as_str() {
        "deny" => answer(
            uid,
            json!({"allowed": false, "status": {"code": 403, "message": "configmaps named deny-* are not welcome"}}),
        ),
        "warn" => answer(
            uid,
            json!({"allowed": true, "warnings": ["careful: this is a test warning"],
                "auditAnnotations": {"seen": "yes"}}),
        ),
        "add-label" => patched(
            uid,
            json!([{"op": "add", "path": "/metadata/labels", "value": with(labels, "mutated-by", "webhook")},
                {"op": "add", "path": "/notAField", "value": 1}]),
        ),
        "count" => {
            let annotations = obj["metadata"]["annotations"].clone();
            let n: u32 = annotations["count"]
                .as_str()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let value = with(annotations, "count", &(n + 1).to_string());
            patched(
                uid,
                json!([{"op": "add", "path": "/metadata/annotations", "value": value}]),
            )
        }
        "label-once" if labels.get("once").is_none() => patched(
            uid,
            json!([{"op": "add", "path": "/metadata/labels", "value": with(labels, "once", "yes")}]),
        ),
        "meddle" => {
            let op = match req["subResource"].as_str().unwrap_or("") {
                "" => json!({"op": "add", "path": "/status/message", "value": "meddled"}),
                "status" => {
                    json!({"op": "replace", "path": "/spec/containers/0/image", "value": "meddled"})
                }
                _ => json!({"op": "add", "path": "/spec/ephemeralContainers/0/securityContext",
                    "value": {"privileged": true}}),
            };
            patched(uid, json!([op]))
        }
        "scale-max-5" if obj["spec"]["replicas"].as_i64().unwrap_or(0) > 5 => answer(
            uid,
            json!({"allowed": false, "status": {"code": 403, "message": "replicas must be at most 5"}}),
        ),
        "scale-cap-4" if obj["spec"]["replicas"].as_i64().unwrap_or(0) > 4 => patched(
            uid,
            json!([{"op": "replace", "path": "/spec/replicas", "value": 4}]),
        ),
        "deny-binding" if obj["target"]["name"] == "reserved" => answer(
            uid,
            json!({"allowed": false, "status": {"code": 403, "message": "node reserved is reserved"}}),
        ),
        "deny-eviction" if obj["deleteOptions"]["gracePeriodSeconds"] == 0 => answer(
            uid,
            json!({"allowed": false, "status": {"code": 403, "message": "evictions must be graceful"}}),
        ),
        "deny-exec" => answer(
            uid,
            json!({"allowed": false, "status": {"code": 403, "message": "no exec in this cluster"}}),
        ),
        "hang" => {
            tokio::time::sleep(Duration::from_secs(20)).await;
            answer(uid, json!({"allowed": true}))
        }
        _ => answer(uid, json!({"allowed": true})),
    })
}

pub struct Hooks {
    pub addr: SocketAddr,
    ca_b64: String,
    pub seen: Arc<Seen>,
    stop: CancellationToken,
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Hooks {
    pub async fn start() -> Hooks {
        let pki = conversion_server::pki();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![rustls::pki_types::CertificateDer::from(
                    pki.cert_der.clone(),
                )],
                rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.clone().into()),
            )
            .unwrap();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let seen = Arc::new(Seen::default());
        let app = Router::new()
            .route("/{path}", post(review))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = tokio::select! {
                    _ = token.cancelled() => return,
                    a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                };
                let (acceptor, app, token) = (acceptor.clone(), app.clone(), token.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service);
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = conn => {}
                    }
                });
            }
        });
        Hooks {
            addr,
            ca_b64: base64::engine::general_purpose::STANDARD.encode(&pki.ca_pem),
            seen,
            stop,
        }
    }

    pub fn calls(&self, path: &str) -> Vec<Value> {
        let seen = self.seen.0.lock();
        seen.iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// The last review `path` received for the object `name` (controllers write configmaps
    /// too).
    pub fn last_call(&self, path: &str, name: &str) -> Value {
        let calls = self.calls(path);
        let found = calls
            .into_iter()
            .rev()
            .find(|r| r["request"]["name"] == name);
        found.unwrap_or_else(|| panic!("no review of {name} at /{path}"))
    }

    /// A webhook on configmap creates and updates calling `path`, that never sees probes.
    pub fn webhook(&self, name: &str, path: &str) -> Value {
        json!({
            "name": name,
            "clientConfig": {"url": format!("https://{}/{path}", self.addr), "caBundle": self.ca_b64},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["configmaps"]}],
            "objectSelector": {"matchExpressions": [{"key": "probe", "operator": "DoesNotExist"}]},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    }

    /// Creates the configuration `name` of `kind` with `webhooks` and a probe webhook, and waits
    /// until the apiserver calls the probe.
    pub async fn install(
        &self,
        client: &kube::Client,
        kind: &str,
        name: &str,
        webhooks: Vec<Value>,
    ) {
        let mut webhooks = webhooks;
        let mut probe = self.webhook(
            &format!("probe.{name}.example.com"),
            &format!("probe-{name}"),
        );
        probe["objectSelector"] = json!({"matchLabels": {"probe": "yes"}});
        webhooks.push(probe);
        let plural = format!("{}s", kind.to_lowercase());
        let ar = kube::api::ApiResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: kind.into(),
            plural,
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let mut obj = DynamicObject::new(name, &ar);
        obj.data = json!({"webhooks": webhooks});
        api.create(&PostParams::default(), &obj).await.unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let path = format!("probe-{name}");
        tests::eventually(&format!("{kind} {name} to take effect"), || async {
            let probe: ConfigMap = serde_json::from_value(json!({
                "metadata": {"generateName": "probe-", "labels": {"probe": "yes"}}}))
            .unwrap();
            let _ = cms.create(&dry, &probe).await;
            (!self.calls(&path).is_empty()).then_some(())
        })
        .await;
    }
}
