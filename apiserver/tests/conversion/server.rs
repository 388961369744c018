//! The test conversion webhook shared by the conversion e2e tests: axum over rustls on
//! 127.0.0.1, its CA and serving certificate generated here, answering `ConversionReview`s as
//! its [`Mode`] says and recording what it was sent.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use apiserver::registry::conversion_webhook::MAX_RESPONSE_BYTES;
use axum::extract::{RawQuery, State};
use axum::routing::post;
use axum::{Json, Router};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    WebhookClientConfig, WebhookConversion,
};
use k8s_openapi::ByteString;
use parking_lot::Mutex;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use serde_json::{json, Value};
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

/// How the test webhook answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Converts: sets apiVersion, renames `spec.size` → `spec.replicas`, changes a label and
    /// (ignored) the resourceVersion.
    Convert,
    /// Converts between `example.com/v1` (`spec.size`) and `example.com/v2` (`spec.replicas`)
    /// both ways, nothing else changed: a well-behaved webhook.
    Versions,
    WrongUid,
    Fail,
    /// One object fewer than sent.
    DropOne,
    WrongVersion,
    Rename,
    BadLabel,
    WrongReviewKind,
    /// A 500 with a Status body.
    StatusError,
    /// More than the client reads.
    Huge,
}

#[derive(Default)]
pub struct Seen {
    pub reviews: Vec<Value>,
    pub queries: Vec<Option<String>>,
}

pub struct Hook {
    pub mode: Mutex<Mode>,
    pub seen: Mutex<Seen>,
}

async fn review(
    State(hook): State<Arc<Hook>>,
    RawQuery(query): RawQuery,
    Json(review): Json<Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mode = *hook.mode.lock();
    {
        let mut seen = hook.seen.lock();
        seen.reviews.push(review.clone());
        seen.queries.push(query);
    }
    let req = &review["request"];
    let desired = req["desiredAPIVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut objects: Vec<Value> = req["objects"].as_array().cloned().unwrap_or_default();
    for o in &mut objects {
        o["apiVersion"] = json!(desired);
        if mode == Mode::Versions {
            let (from, to) = if desired.ends_with("/v2") {
                ("size", "replicas")
            } else {
                ("replicas", "size")
            };
            if let Some(v) = o["spec"].as_object_mut().and_then(|s| s.remove(from)) {
                o["spec"][to] = v;
            }
            continue;
        }
        if let Some(size) = o["spec"].as_object_mut().and_then(|s| s.remove("size")) {
            o["spec"]["replicas"] = size;
        }
        o["metadata"]["labels"] = json!({"converted": "yes"});
        o["metadata"]["resourceVersion"] = json!("not-kept");
    }
    let mut uid = req["uid"].clone();
    let mut result = json!({"status": "Success"});
    let mut kind = "ConversionReview";
    match mode {
        Mode::Convert | Mode::Versions => {}
        Mode::WrongUid => uid = json!("someone-else"),
        Mode::Fail => result = json!({"status": "Failure", "message": "cannot convert size 7"}),
        Mode::DropOne => {
            objects.pop();
        }
        Mode::WrongVersion => objects[0]["apiVersion"] = json!("example.com/v9"),
        Mode::Rename => objects[0]["metadata"]["name"] = json!("renamed"),
        Mode::BadLabel => objects[0]["metadata"]["labels"] = json!({"bad": "no spaces allowed"}),
        Mode::WrongReviewKind => kind = "AdmissionReview",
        Mode::StatusError => {
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "webhook is broken", "code": 500});
            return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, Json(status)).into_response();
        }
        Mode::Huge => {
            let pad = "x".repeat(MAX_RESPONSE_BYTES + 1024);
            objects[0]["pad"] = json!(pad);
        }
    }
    Json(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": kind,
        "response": {"uid": uid, "result": result, "convertedObjects": objects},
    }))
    .into_response()
}

/// A CA and a serving certificate for 127.0.0.1 signed by it.
pub struct Pki {
    pub ca_pem: String,
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
}

pub fn pki() -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "webhook test CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    leaf.distinguished_name.push(DnType::CommonName, "webhook");
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        cert_der: leaf_cert.der().to_vec(),
        key_der: leaf_key.serialize_der(),
    }
}

pub struct Server {
    pub addr: SocketAddr,
    pub ca_pem: String,
    pub hook: Arc<Hook>,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Server {
    pub async fn start() -> Server {
        let pki = pki();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![rustls::pki_types::CertificateDer::from(pki.cert_der)],
                rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.into()),
            )
            .unwrap();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let hook = Arc::new(Hook {
            mode: Mutex::new(Mode::Convert),
            seen: Mutex::new(Seen::default()),
        });
        let app = Router::new()
            .route("/convert", post(review))
            .with_state(hook.clone());
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
                let acceptor = acceptor.clone();
                let app = app.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Server {
            addr,
            ca_pem: pki.ca_pem,
            hook,
            stop,
        }
    }

    pub fn webhook(&self, ca_pem: &str) -> WebhookConversion {
        WebhookConversion {
            client_config: Some(WebhookClientConfig {
                url: Some(format!("https://{}/convert", self.addr)),
                ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
                service: None,
            }),
            conversion_review_versions: vec!["v1".into(), "v1beta1".into()],
        }
    }

    pub fn set(&self, mode: Mode) {
        *self.hook.mode.lock() = mode;
    }
}

impl Server {
    /// The number of reviews received so far.
    pub fn reviews(&self) -> usize {
        self.hook.seen.lock().reviews.len()
    }
}
