//! The HTTP transport: one `reqwest` connection pool per [`Client`], bearer auth, a client-side token
//! bucket, and bounded retries.
//!
//! Guarantees:
//! * Every non-2xx response becomes a classified [`Error`] decoded from the body's `Status`
//!   (a body that is not a `Status` gets a synthetic one carrying the status code).
//! * Rate limit: when `qps > 0` each request (including every retry) takes one token first
//!   (client-go `rest.Config.QPS/Burst`); `qps <= 0` means no client-side limit.
//! * Retries (at most [`MAX_RETRIES`]): 429 (honouring `Retry-After`) and connection-refused for every
//!   verb — the server did not act on the request; 5xx and other transport errors only for idempotent
//!   verbs (GET, PUT, DELETE). Delays: `Retry-After` if given (capped), else exponential from
//!   [`RETRY_BASE`] doubling to [`RETRY_CAP`]. (client-go retries only with `Retry-After`, up to 10 times.)

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use reqwest::{Method, Response};
use tracing::Instrument;

use crate::error::{synthetic_status, Error, Result};
use crate::flowcontrol::TokenBucket;
use crate::rest::config::Config;
use crate::rest::token_source::{bearer, CachedToken};

/// Default maximum retries of one request (so at most `MAX_RETRIES + 1` attempts).
pub const MAX_RETRIES: u32 = 5;
/// First retry delay when the server gave no `Retry-After`.
pub const RETRY_BASE: Duration = Duration::from_millis(100);
/// Largest retry delay, also the cap applied to a server's `Retry-After`.
pub const RETRY_CAP: Duration = Duration::from_secs(10);

/// What a request carries to authenticate (besides a client certificate).
#[derive(Clone)]
enum Auth {
    None,
    Token(HeaderValue),
    Renewed(Arc<CachedToken>),
}

/// A cheap-to-clone handle on a configured apiserver connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    server: String,
    auth: Auth,
    limiter: Option<Arc<TokenBucket>>,
    timeout: Duration,
    max_retries: u32,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.server)
            .finish()
    }
}

/// A request to send: method, path + query, optional body and its content type.
pub(crate) struct Request {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub body: Option<(Vec<u8>, &'static str)>,
    /// `None`: the client's default timeout; `Some(d)`: this one (watches).
    pub timeout: Option<Duration>,
}

impl Request {
    pub fn new(method: Method, path: String) -> Self {
        Request {
            method,
            path,
            query: Vec::new(),
            body: None,
            timeout: None,
        }
    }
    fn idempotent(&self) -> bool {
        matches!(
            self.method,
            Method::GET | Method::PUT | Method::DELETE | Method::HEAD
        )
    }
}

/// Idle connections kept to the server. This client speaks HTTP/1.1, one connection per
/// request in flight; a bound below a client's bursts (a controller's 500 creates, a node's
/// status writes for all its pods) closed connections after each burst and opened them again
/// for the next, which over TLS is a full handshake each time (client-go multiplexes on one
/// HTTP/2 connection instead). Idle ones close after the pool's idle timeout (90 s).
const MAX_IDLE_CONNECTIONS: usize = 1024;

impl Client {
    /// Builds the connection pool. Fails on an unparsable server URL or CA bundle.
    pub fn new(cfg: Config) -> Result<Self> {
        let server = cfg.server.trim_end_matches('/').to_string();
        let url = reqwest::Url::parse(&server)
            .map_err(|e| Error::Config(format!("server {server:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "server {server:?}: scheme must be http or https"
            )));
        }
        let mut b = reqwest::Client::builder()
            .user_agent(cfg.user_agent.clone())
            .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
            .tcp_nodelay(true)
            // As kube-rs: an apiserver never redirects, and following cost a URL formatted per
            // request.
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = &cfg.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| Error::Config(format!("certificate authority: {e}")))?;
            if certs.is_empty() {
                return Err(Error::Config(
                    "certificate authority: no PEM certificates".into(),
                ));
            }
            b = b.tls_built_in_root_certs(false);
            for c in certs {
                b = b.add_root_certificate(c);
            }
        }
        if cfg.insecure_skip_verify {
            b = b.danger_accept_invalid_certs(true);
        }
        if let Some(pem) = &cfg.identity_pem {
            let identity = reqwest::Identity::from_pem(pem)
                .map_err(|e| Error::Config(format!("client certificate: {e}")))?;
            b = b.identity(identity);
        }
        let http = b
            .build()
            .map_err(|e| Error::Config(format!("http client: {e}")))?;
        let auth = match (&cfg.token_source, &cfg.token) {
            (Some(dynamic), _) => Auth::Renewed(Arc::new(CachedToken::new(dynamic)?)),
            (None, Some(t)) => Auth::Token(bearer(t)?),
            (None, None) => Auth::None,
        };
        let limiter =
            (cfg.qps > 0.0).then(|| Arc::new(TokenBucket::new(f64::from(cfg.qps), cfg.burst)));
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                server,
                auth,
                limiter,
                timeout: cfg.timeout,
                max_retries: MAX_RETRIES,
            }),
        })
    }

    /// The same connection pool and limiter with a different retry budget (0 = no retries).
    pub fn with_max_retries(&self, max_retries: u32) -> Self {
        let i = &self.inner;
        Client {
            inner: Arc::new(Inner {
                http: i.http.clone(),
                server: i.server.clone(),
                auth: i.auth.clone(),
                limiter: i.limiter.clone(),
                timeout: i.timeout,
                max_retries,
            }),
        }
    }

    /// Base URL, without trailing slash.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// Sends the request (with rate limit and retries) and returns a successful response.
    pub(crate) async fn send(&self, req: &Request) -> Result<Response> {
        let span = tracing::debug_span!("request", method = %req.method, path = %req.path);
        self.send_retrying(req).instrument(span).await
    }

    async fn send_retrying(&self, req: &Request) -> Result<Response> {
        let mut attempt = 0u32;
        loop {
            if let Some(l) = &self.inner.limiter {
                l.acquire().await;
            }
            let result = self.send_once(req).await;
            let err = match result {
                Ok(resp) => return Ok(resp),
                Err(e) => e,
            };
            let retry_after = match &err {
                Error::TooManyRequests { retry_after, .. } => Some(*retry_after),
                Error::Http(e) if e.is_connect() => Some(None),
                Error::Http(_) if req.idempotent() => Some(None),
                Error::Api { code, .. } if *code >= 500 && req.idempotent() => Some(None),
                _ => None,
            };
            let Some(retry_after) = retry_after else {
                return Err(err);
            };
            if attempt >= self.inner.max_retries {
                return Err(err);
            }
            let delay = retry_after
                .unwrap_or_else(|| RETRY_BASE.saturating_mul(1u32 << attempt.min(16)))
                .min(RETRY_CAP);
            tracing::debug!(method = %req.method, path = %req.path, attempt, ?delay, error = %err, "retrying request");
            attempt += 1;
            tokio::time::sleep(delay).await;
        }
    }

    async fn send_once(&self, req: &Request) -> Result<Response> {
        let url = format!("{}{}", self.inner.server, req.path);
        let mut rb = self
            .inner
            .http
            .request(req.method.clone(), url)
            .header(ACCEPT, "application/json")
            .timeout(req.timeout.unwrap_or(self.inner.timeout));
        if !req.query.is_empty() {
            rb = rb.query(&req.query);
        }
        let sent = match &self.inner.auth {
            Auth::None => None,
            Auth::Token(h) => Some(h.clone()),
            Auth::Renewed(tokens) => Some(tokens.header().await?),
        };
        if let Some(auth) = &sent {
            rb = rb.header(AUTHORIZATION, auth.clone());
        }
        if let Some((body, ct)) = &req.body {
            rb = rb.header(CONTENT_TYPE, *ct).body(body.clone());
        }
        let resp = rb.send().await.map_err(Error::Http)?;
        let code = resp.status().as_u16();
        if resp.status().is_success() {
            return Ok(resp);
        }
        if let (Auth::Renewed(tokens), Some(sent), 401) = (&self.inner.auth, &sent, code) {
            tokens.reset(sent);
        }
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = resp.bytes().await.unwrap_or_default();
        Err(Error::from_status(
            code,
            decode_status(code, &body),
            retry_after,
        ))
    }

    /// Sends and reads the whole body.
    pub(crate) async fn send_bytes(&self, req: &Request) -> Result<Bytes> {
        let resp = self.send(req).await?;
        resp.bytes().await.map_err(Error::Http)
    }
}

fn decode_status(code: u16, body: &[u8]) -> Status {
    match serde_json::from_slice::<Status>(body) {
        Ok(s) if s.code.is_some() || s.reason.is_some() || s.message.is_some() => s,
        _ => {
            let text = String::from_utf8_lossy(&body[..body.len().min(1024)]).into_owned();
            let reason = http::StatusCode::from_u16(code)
                .ok()
                .and_then(|c| c.canonical_reason())
                .unwrap_or("Unknown")
                .replace(' ', "");
            synthetic_status(code, &reason, text)
        }
    }
}
