//! The conversion webhook client end to end: a test webhook server (axum over rustls, its CA and
//! serving certificate generated here) on 127.0.0.1, reached through `clientConfig.url` with
//! the CA in `caBundle`, as an envtest suite points a CRD at its local webhook.
//!
//! Covered: a successful conversion (objects in the desired version not sent, metadata restored
//! except labels and annotations, the request's form and `?timeout=30s`), every response check
//! with upstream's message, a Status error body, an untrusted CA, nothing listening, an
//! oversized response and a `service` reference.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use apiserver::registry::conversion_webhook::{convert, ConversionError, MAX_RESPONSE_BYTES};
use axum::extract::{RawQuery, State};
use axum::routing::post;
use axum::{Json, Router};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    ServiceReference, WebhookClientConfig, WebhookConversion,
};
use k8s_openapi::ByteString;
use parking_lot::Mutex;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use serde_json::{json, Value};
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

/// How the test webhook answers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// Converts: sets apiVersion, renames `spec.size` → `spec.replicas`, changes a label and
    /// (ignored) the resourceVersion.
    Convert,
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
struct Seen {
    reviews: Vec<Value>,
    queries: Vec<Option<String>>,
}

struct Hook {
    mode: Mutex<Mode>,
    seen: Mutex<Seen>,
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
        Mode::Convert => {}
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
struct Pki {
    ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

fn pki() -> Pki {
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

struct Server {
    addr: SocketAddr,
    ca_pem: String,
    hook: Arc<Hook>,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Server {
    async fn start() -> Server {
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

    fn webhook(&self, ca_pem: &str) -> WebhookConversion {
        WebhookConversion {
            client_config: Some(WebhookClientConfig {
                url: Some(format!("https://{}/convert", self.addr)),
                ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
                service: None,
            }),
            conversion_review_versions: vec!["v1".into(), "v1beta1".into()],
        }
    }

    fn set(&self, mode: Mode) {
        *self.hook.mode.lock() = mode;
    }
}

fn widget(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": format!("example.com/{version}"),
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "resourceVersion": "12", "generation": 3, "labels": {"app": "w"}},
        "spec": {"size": 7},
    })
}

#[tokio::test]
async fn converts_through_a_local_https_webhook_trusting_its_ca_bundle() {
    let server = Server::start().await;
    let webhook = server.webhook(&server.ca_pem);
    let objects = vec![widget("a", "v1"), widget("b", "v2"), widget("c", "v1")];
    let out = convert(&webhook, objects, "example.com/v2").await.unwrap();
    assert_eq!(out.len(), 3);
    for o in &out {
        assert_eq!(o["apiVersion"], "example.com/v2");
    }
    // Converted: the webhook's spec and labels, the original's other metadata.
    assert_eq!(out[0]["spec"], json!({"replicas": 7}));
    assert_eq!(out[0]["metadata"]["labels"], json!({"converted": "yes"}));
    assert_eq!(out[0]["metadata"]["resourceVersion"], "12");
    assert_eq!(out[0]["metadata"]["generation"], 3);
    assert_eq!(out[2]["metadata"]["name"], "c");
    // Already in v2: untouched, and not sent.
    assert_eq!(out[1], widget("b", "v2"));
    let seen = server.hook.seen.lock();
    assert_eq!(seen.queries, [Some("timeout=30s".to_string())]);
    let review = &seen.reviews[0];
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(review["kind"], "ConversionReview");
    assert_eq!(review["request"]["desiredAPIVersion"], "example.com/v2");
    let sent: Vec<&str> = review["request"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(sent, ["a", "c"]);
    assert!(!review["request"]["uid"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn bad_responses_fail_with_upstreams_messages() {
    let server = Server::start().await;
    let webhook = server.webhook(&server.ca_pem);
    let one = || vec![widget("a", "v1")];
    let two = || vec![widget("a", "v1"), widget("b", "v1")];
    let cases: Vec<(Mode, Vec<Value>, String)> = vec![
        (Mode::Fail, one(), "conversion webhook for example.com/v1, Kind=Widget failed: cannot convert size 7".into()),
        (Mode::DropOne, two(), "conversion webhook for example.com/v1, Kind=WidgetList returned 1 objects, expected 2".into()),
        (Mode::WrongVersion, one(), "conversion webhook for example.com/v1, Kind=Widget returned invalid object at index 0: invalid groupVersion (expected example.com/v2, received example.com/v9)".into()),
        (Mode::WrongVersion, two(), "conversion webhook for example.com/v1, Kind=WidgetList returned invalid converted object at index 1: invalid groupVersion (expected example.com/v2, received example.com/v9)".into()),
        (Mode::Rename, one(), "conversion webhook for example.com/v1, Kind=Widget returned invalid object: must have the same name: a != renamed".into()),
        (Mode::Rename, two(), "conversion webhook for example.com/v1, Kind=WidgetList returned invalid converted object at index 1: must have the same name: a != renamed".into()),
        (Mode::WrongReviewKind, one(), "conversion webhook for example.com/v1, Kind=Widget failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1, Kind=AdmissionReview".into()),
        (Mode::StatusError, one(), "conversion webhook for example.com/v1, Kind=Widget failed: webhook is broken".into()),
    ];
    for (mode, objects, want) in cases {
        server.set(mode);
        let got = convert(&webhook, objects, "example.com/v2").await;
        assert_eq!(got, Err(ConversionError(want)), "{mode:?}");
    }
    server.set(Mode::WrongUid);
    let err = convert(&webhook, one(), "example.com/v2")
        .await
        .unwrap_err()
        .0;
    assert!(
        err.starts_with(
            "conversion webhook for example.com/v1, Kind=Widget failed: expected response.uid="
        ) && err.ends_with(r#", got "someone-else""#),
        "{err}"
    );
    server.set(Mode::BadLabel);
    let err = convert(&webhook, one(), "example.com/v2")
        .await
        .unwrap_err()
        .0;
    assert!(
        err.starts_with(r#"conversion webhook for example.com/v1, Kind=Widget returned invalid metadata: metadata.labels.bad: Invalid value: "no spaces allowed""#),
        "{err}"
    );
    server.set(Mode::Huge);
    let err = convert(&webhook, one(), "example.com/v2")
        .await
        .unwrap_err()
        .0;
    assert_eq!(
        err,
        format!("conversion webhook for example.com/v1, Kind=Widget failed: response body larger than {MAX_RESPONSE_BYTES} bytes")
    );
}

#[tokio::test]
async fn an_untrusted_certificate_and_a_service_reference_are_refused() {
    let server = Server::start().await;
    // Another CA than the one that signed the server's certificate.
    let other = pki();
    let err = convert(
        &server.webhook(&other.ca_pem),
        vec![widget("a", "v1")],
        "example.com/v2",
    )
    .await
    .unwrap_err()
    .0;
    assert!(
        err.starts_with(&format!(
            "conversion webhook for example.com/v1, Kind=Widget failed: Post \"https://{}/convert?timeout=30s\": ",
            server.addr
        )) && err.to_lowercase().contains("certificate"),
        "{err}"
    );
    assert!(server.hook.seen.lock().reviews.is_empty());

    // Nothing listening: the transport's error after the URL, as Go's `Post "url": dial tcp …`.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut webhook = server.webhook(&server.ca_pem);
    if let Some(c) = webhook.client_config.as_mut() {
        c.url = Some(format!("https://127.0.0.1:{port}/convert"));
    }
    let err = convert(&webhook, vec![widget("a", "v1")], "example.com/v2")
        .await
        .unwrap_err()
        .0;
    assert!(
        err.starts_with(&format!(
            "conversion webhook for example.com/v1, Kind=Widget failed: Post \"https://127.0.0.1:{port}/convert?timeout=30s\": "
        )) && err.to_lowercase().contains("connection refused"),
        "{err}"
    );

    let webhook = WebhookConversion {
        client_config: Some(WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: "system".into(),
                name: "webhook-service".into(),
                path: Some("/convert".into()),
                port: Some(443),
            }),
            ..Default::default()
        }),
        conversion_review_versions: vec!["v1".into()],
    };
    let err = convert(&webhook, vec![widget("a", "v1")], "example.com/v2")
        .await
        .unwrap_err()
        .0;
    assert_eq!(
        err,
        "conversion webhook for example.com/v1, Kind=Widget failed: clientConfig.service system/webhook-service \
         cannot be reached: a minik8s sandbox has no service network; point clientConfig.url at the test's own \
         webhook server (https://127.0.0.1:PORT/PATH), as envtest does"
    );
}
