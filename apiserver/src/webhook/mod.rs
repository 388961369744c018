//! The one HTTPS client every webhook of the apiserver is called through (upstream's
//! `k8s.io/apiserver/pkg/util/webhook`): CRD conversion webhooks
//! ([`crate::registry::conversion_webhook`]) and admission webhooks
//! ([`crate::admission::webhook`]).
//!
//! - A hook is reached at `clientConfig.url` over HTTPS, trusting only its `caBundle` when one
//!   is given (the system roots otherwise). A `clientConfig.service` reference is refused with
//!   [`service_unreachable`]: a sandbox has no service network.
//! - The request is a JSON POST to `url?timeout=<timeout>` (client-go appends the request's
//!   timeout), HTTP/1.1. The whole exchange, connect to last byte, is bounded by the caller's
//!   timeout; when it expires the error is Go's `Post "<url>": context deadline exceeded`.
//! - A response body is read up to a bound ([`MAX_RESPONSE_BYTES`], or
//!   [`RESPONSE_TO_REQUEST_RATIO`] times the request if larger) and decoded as JSON; a non-2xx
//!   answer is rendered as client-go renders a failed request.
//! - Clients are cached per (url, caBundle), at most [`CLIENT_CACHE_SIZE`] (upstream's
//!   `ClientManager` LRU size), so calls to one hook share connections.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::Value;

/// The smallest bound on a response body. Upstream reads any size; a response is bounded here
/// by the larger of this and [`RESPONSE_TO_REQUEST_RATIO`] × the request.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// A converted or patched object may grow (new fields), but not without bound.
pub const RESPONSE_TO_REQUEST_RATIO: usize = 4;

/// Hook clients kept (upstream's `webhook.ClientManager` LRU holds 200).
pub const CLIENT_CACHE_SIZE: usize = 200;

/// Where a hook is: a webhook's `clientConfig`, whatever API it comes from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Endpoint<'a> {
    /// `clientConfig.url`.
    pub url: Option<&'a str>,
    /// `clientConfig.service` as (namespace, name).
    pub service: Option<(&'a str, &'a str)>,
    /// `clientConfig.caBundle` (PEM), empty for the system roots.
    pub ca_bundle: &'a [u8],
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No client could be made for the endpoint (upstream's `could not get REST client`).
    #[error("{0}")]
    Client(String),
    /// The request was sent and failed: transport error, deadline, non-2xx answer, or a body
    /// that is not JSON.
    #[error("{0}")]
    Call(String),
}

/// The error for a `clientConfig.service` reference.
pub fn service_unreachable(namespace: &str, name: &str) -> String {
    format!(
        "clientConfig.service {namespace}/{name} cannot be reached: a minik8s sandbox has no service network; \
         point clientConfig.url at the test's own webhook server (https://127.0.0.1:PORT/PATH), as envtest does"
    )
}

/// Go's `time.Duration.String()` of whole or fractional seconds (`10s`, `1.5s`, `500ms`).
pub fn go_duration(d: Duration) -> String {
    if d.as_millis() < 1000 && d.subsec_nanos() > 0 && d.as_secs() == 0 {
        return format!("{}ms", d.as_millis());
    }
    if d.subsec_nanos() == 0 {
        return format!("{}s", d.as_secs());
    }
    format!("{}s", d.as_secs_f64())
}

/// POSTs `body` to the endpoint within `timeout` and decodes the JSON answer.
pub async fn post_json(
    endpoint: Endpoint<'_>,
    body: &Value,
    timeout: Duration,
) -> Result<Value, CallError> {
    if let Some((ns, name)) = endpoint.service {
        return Err(CallError::Client(service_unreachable(ns, name)));
    }
    let Some(url) = endpoint.url else {
        return Err(CallError::Client(
            "webhook configuration must have either service or URL".into(),
        ));
    };
    let mut parsed =
        reqwest::Url::parse(url).map_err(|e| CallError::Client(format!("Unparsable URL: {e}")))?;
    parsed
        .query_pairs_mut()
        .append_pair("timeout", &go_duration(timeout));
    let client = hook_client(url, endpoint.ca_bundle).map_err(CallError::Client)?;
    let body = serde_json::to_vec(body).map_err(|e| CallError::Client(e.to_string()))?;
    let limit = MAX_RESPONSE_BYTES.max(body.len().saturating_mul(RESPONSE_TO_REQUEST_RATIO));
    let shown = parsed.to_string();
    let exchange = async {
        let resp = client
            .post(parsed)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("Post {shown:?}: {}", error_chain(&e)))?;
        let code = resp.status();
        let mut bytes: Vec<u8> = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("Post {shown:?}: {}", error_chain(&e)))?;
            if bytes.len() + chunk.len() > limit {
                return Err(format!("response body larger than {limit} bytes"));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !code.is_success() {
            return Err(unsuccessful(code, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(answer) => answer.map_err(CallError::Call),
        Err(_) => Err(CallError::Call(format!(
            "Post {shown:?}: context deadline exceeded"
        ))),
    }
}

/// A hook client's identity: its URL and CA bundle.
type ClientKey = (String, Vec<u8>);

/// The hook clients.
static CLIENTS: LazyLock<Mutex<HashMap<ClientKey, reqwest::Client>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn hook_client(url: &str, ca_bundle: &[u8]) -> Result<reqwest::Client, String> {
    let key = (url.to_string(), ca_bundle.to_vec());
    if let Some(c) = CLIENTS.lock().get(&key) {
        return Ok(c.clone());
    }
    let mut b = reqwest::Client::builder().http1_only().use_rustls_tls();
    if !ca_bundle.is_empty() {
        let certs = reqwest::Certificate::from_pem_bundle(ca_bundle)
            .map_err(|e| format!("unable to load caBundle: {e}"))?;
        if certs.is_empty() {
            return Err("unable to load caBundle: no PEM certificates".into());
        }
        b = b.tls_built_in_root_certs(false);
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    let client = b.build().map_err(|e| e.to_string())?;
    let mut cache = CLIENTS.lock();
    if cache.len() >= CLIENT_CACHE_SIZE {
        if let Some(k) = cache.keys().next().cloned() {
            cache.remove(&k);
        }
    }
    cache.insert(key, client.clone());
    Ok(client)
}

/// A failed response as client-go renders it: a `Status` body's message, else the generic text
/// for the code.
fn unsuccessful(code: http::StatusCode, body: &[u8]) -> String {
    if let Ok(s) = serde_json::from_slice::<Value>(body) {
        if s.get("kind").and_then(Value::as_str) == Some("Status") {
            if let Some(m) = s.get("message").and_then(Value::as_str) {
                return m.to_string();
            }
        }
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(1024)]).into_owned();
    match code.as_u16() {
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "Unauthorized".into(),
        403 => "forbidden".into(),
        404 => "the server could not find the requested resource".into(),
        405 => "the server does not allow this method on the requested resource".into(),
        409 => "the server reported a conflict".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        500 => format!("an error on the server ({text:?}) has prevented the request from succeeding"),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        c => format!("the server responded with the status code {c} but did not return more information"),
    }
}

/// An error and its causes, `a: b: c`, without the transport's own wrappers (which repeat the
/// URL the message already names), as Go's `Post "url": cause`.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        let m = c.to_string();
        let wrapper =
            m.starts_with("error sending request for url") || m.starts_with("client error (");
        if !wrapper && !parts.iter().any(|p| p.contains(&m)) {
            parts.push(m);
        }
        cur = c.source();
    }
    if parts.is_empty() {
        return e.to_string();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
    }

    #[tokio::test]
    async fn a_service_reference_and_a_missing_url_fail_before_sending() {
        let service = Endpoint {
            service: Some(("ns", "hook")),
            ..Default::default()
        };
        let err = post_json(service, &Value::Null, Duration::from_secs(1)).await;
        assert!(
            matches!(&err, Err(CallError::Client(m)) if m.starts_with("clientConfig.service ns/hook cannot be reached")),
            "{err:?}"
        );
        let none = post_json(Endpoint::default(), &Value::Null, Duration::from_secs(1)).await;
        assert_eq!(
            none,
            Err(CallError::Client(
                "webhook configuration must have either service or URL".into()
            ))
        );
    }

    #[tokio::test]
    async fn a_server_that_is_down_is_a_call_error_naming_the_url() {
        // A port just bound and released: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let url = format!("https://127.0.0.1:{port}/hook");
        let endpoint = Endpoint {
            url: Some(&url),
            ..Default::default()
        };
        let err = post_json(endpoint, &Value::Null, Duration::from_secs(5)).await;
        let Err(CallError::Call(m)) = err else {
            panic!("{err:?}")
        };
        assert!(
            m.starts_with(&format!("Post \"{url}?timeout=5s\": ")),
            "{m}"
        );
    }
}
