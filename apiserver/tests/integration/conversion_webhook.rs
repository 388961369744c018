//! The conversion webhook client end to end: a test webhook server (axum over rustls, its CA and
//! serving certificate generated here) on 127.0.0.1, reached through `clientConfig.url` with
//! the CA in `caBundle`, as an envtest suite points a CRD at its local webhook.
//!
//! Covered: a successful conversion (objects in the desired version not sent, metadata restored
//! except labels and annotations, the request's form and `?timeout=30s`), every response check
//! with upstream's message, a Status error body, an untrusted CA, nothing listening, an
//! oversized response and a `service` reference.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::conversion_server as server;

use apiserver::registry::conversion_webhook::{convert, ConversionError, MAX_RESPONSE_BYTES};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    ServiceReference, WebhookClientConfig, WebhookConversion,
};
use serde_json::{json, Value};
use server::{pki, Mode, Server};

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
