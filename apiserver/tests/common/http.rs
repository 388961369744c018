//! Requests to an in-process router (`oneshot`, no sockets), with the response body as JSON.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// Sends one request; returns the status code and the body as JSON (`Null` if it is not JSON).
/// Fails the test on a 5xx: no input may make the server fail.
pub async fn call_raw(
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

/// A JSON request (`body` `Null` sends none).
pub async fn call(
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

pub async fn get(app: &Router, uri: &str) -> (u16, Value) {
    call(app, "GET", uri, "application/json", Value::Null).await
}

pub async fn post(app: &Router, uri: &str, body: Value) -> (u16, Value) {
    call(app, "POST", uri, "application/json", body).await
}

pub async fn put(app: &Router, uri: &str, body: Value) -> (u16, Value) {
    call(app, "PUT", uri, "application/json", body).await
}

/// A PATCH with the patch type's content type.
pub async fn patch(app: &Router, uri: &str, content_type: &str, body: Value) -> (u16, Value) {
    call(app, "PATCH", uri, content_type, body).await
}

pub async fn delete(app: &Router, uri: &str) -> (u16, Value) {
    call(app, "DELETE", uri, "application/json", Value::Null).await
}

/// `field: message` of each cause of a 422.
pub fn causes(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    format!(
                        "{}: {}",
                        c["field"].as_str().unwrap_or(""),
                        c["message"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The first `n` events of a watch (fewer if the stream ends), waiting at most 10 s.
pub async fn watch_lines(app: &Router, uri: &str, n: usize) -> Vec<Value> {
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
