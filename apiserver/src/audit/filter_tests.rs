use super::*;
use crate::audit::{AuditOptions, Policy};
use axum::routing::get;
use serde_json::{json, Value};
use std::time::Duration;

/// An auditor at `Metadata` for everything, writing to a file in `dir`, on a server without
/// authorization.
fn auditor(dir: &std::path::Path) -> Arc<Auditor> {
    let policy = Policy::from_bytes(
        b"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let options = AuditOptions {
        log_path: Some(dir.join("audit.log")),
        policy: Some(policy),
        ..Default::default()
    };
    Auditor::start(&options, false).unwrap().unwrap()
}

/// Stands in for authentication: every request acts as the admin.
async fn authn(req: Request, next: Next) -> Response {
    authenticated(&req, UserInfo::admin);
    next.run(req).await
}

fn app(auditor: &Arc<Auditor>, router: axum::Router) -> axum::Router {
    router
        .layer(axum::middleware::from_fn(authn))
        .layer(axum::middleware::from_fn_with_state(
            auditor.clone(),
            filter,
        ))
        .layer(axum::middleware::from_fn(init))
}

#[tokio::test]
async fn every_response_carries_the_audit_id_audited_or_not() {
    use tower::ServiceExt as _;
    let plain = axum::Router::new()
        .route("/x", get(|| async { "x" }))
        .layer(axum::middleware::from_fn(init));
    let given = plain.clone().oneshot(request("/x")).await.unwrap();
    assert_eq!(given.headers()[AUDIT_ID_HEADER], "id-1");
    let bare = axum::http::Request::builder()
        .uri("/x")
        .body(Body::empty())
        .unwrap();
    let generated = plain.oneshot(bare).await.unwrap();
    let id = generated.headers()[AUDIT_ID_HEADER].to_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
}

fn request(uri: &str) -> Request {
    axum::http::Request::builder()
        .uri(uri)
        .header(AUDIT_ID_HEADER, "id-1")
        .body(Body::empty())
        .unwrap()
}

async fn written(auditor: &Auditor, dir: &std::path::Path) -> Vec<Value> {
    auditor.close(Duration::from_secs(10)).await;
    std::fs::read_to_string(dir.join("audit.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_panicking_handler_is_audited_at_the_panic_stage_and_unwinds_on() {
    let dir = tempfile::tempdir().unwrap();
    let auditor = auditor(dir.path());
    async fn boom() -> &'static str {
        panic!("boom")
    }
    let app = app(
        &auditor,
        axum::Router::new().route("/api/v1/pods", get(boom)),
    );
    let outcome = AssertUnwindSafe(tower::ServiceExt::oneshot(app, request("/api/v1/pods")))
        .catch_unwind()
        .await;
    assert!(outcome.is_err());
    let events = written(&auditor, dir.path()).await;
    let stages: Vec<&str> = events
        .iter()
        .map(|e| e["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["RequestReceived", "Panic"]);
    assert_eq!(
        events[1]["responseStatus"],
        json!({"metadata": {}, "status": "Failure", "message": "APIServer panic'd: boom",
            "reason": "InternalError", "code": 500})
    );
}

#[tokio::test]
async fn a_long_running_request_completes_when_its_body_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let auditor = auditor(dir.path());
    async fn stream() -> Body {
        Body::from_stream(futures::stream::iter([Ok::<_, std::convert::Infallible>(
            bytes::Bytes::from_static(b"{}\n"),
        )]))
    }
    let app = app(
        &auditor,
        axum::Router::new().route("/api/v1/pods", get(stream)),
    );
    let resp = tower::ServiceExt::oneshot(app, request("/api/v1/pods?watch=true"))
        .await
        .unwrap();
    assert_eq!(resp.headers()[AUDIT_ID_HEADER], "id-1");
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.as_ref(), b"{}\n");
    let events = written(&auditor, dir.path()).await;
    let stages: Vec<&str> = events
        .iter()
        .map(|e| e["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );
    assert_eq!(events[0]["verb"], "watch");
    assert_eq!(events[0]["auditID"], "id-1");
    assert!(events[0].get("annotations").is_none());
    // No authorizer: allowed, as upstream's AlwaysAllow.
    assert_eq!(
        events[2]["annotations"],
        json!({"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""})
    );
}

#[test]
fn source_ips_follow_upstream() {
    let mut h = HeaderMap::new();
    let remote: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    assert_eq!(source_ips(&h, Some(remote)), ["127.0.0.1"]);
    h.insert(
        "x-forwarded-for",
        "10.0.0.1, bogus, 10.0.0.2".parse().unwrap(),
    );
    h.insert("x-real-ip", "10.0.0.2".parse().unwrap());
    assert_eq!(
        source_ips(&h, Some(remote)),
        ["10.0.0.1", "10.0.0.2", "127.0.0.1"]
    );
    h.insert("x-forwarded-for", "127.0.0.1".parse().unwrap());
    h.remove("x-real-ip");
    assert_eq!(source_ips(&h, Some(remote)), ["127.0.0.1"]);
}

#[test]
fn failed_authentication_names_what_was_tried() {
    let req = |auth: Option<&str>, uri: &str| {
        let mut b = axum::http::Request::builder().uri(uri);
        if let Some(a) = auth {
            b = b.header(header::AUTHORIZATION, a);
        }
        b.body(Body::empty()).unwrap()
    };
    assert_eq!(
        auth_methods(&req(None, "/api")),
        "Authentication failed, no credentials provided"
    );
    assert_eq!(
        auth_methods(&req(Some("Bearer abc"), "/api?access_token=x")),
        "Authentication failed, attempted: bearer, access_token"
    );
    assert_eq!(
        auth_methods(&req(Some("Basic YTpi"), "/api")),
        "Authentication failed, attempted: basic"
    );
}
