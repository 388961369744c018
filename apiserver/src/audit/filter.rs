//! The audit steps of the serving chain: upstream's `WithAuditInit` + `WithAudit` +
//! `WithFailedAuthenticationAudit` (`endpoints/filters/audit.go`, `authn_audit.go`).
//!
//! [`filter`] sits just outside authentication, so every request that reaches authentication is
//! seen, the ones refused there (401) and everywhere inside (400, 403, 408, 413, 429, 504)
//! included. It gives the request its audit ID (the client's `Audit-ID` header, else a new
//! UUID), answers it in the `Audit-ID` response header, and leaves an [`AuditContext`] in the
//! request's extensions for the steps inside, which report to it:
//! - authentication calls [`authenticated`] with the user it authenticated: the policy decides
//!   the level from that user and the request, and the `RequestReceived` event is written
//!   then (as upstream, where `WithAudit` runs inside authentication); or
//!   [`authentication_failed`]: the policy is asked without a user, and the 401 is written at
//!   `ResponseStarted` with upstream's `Authentication failed, …` message;
//! - impersonation calls [`acting_as`] (the event's `impersonatedUser`);
//! - authorization calls [`authorized`] (the `authorization.k8s.io/decision` and `/reason`
//!   annotations; a server without authorization allows everything, as upstream's
//!   `AlwaysAllow`, with an empty reason);
//! - [`capture_body`], just inside the body pre-read, keeps the request body (already in
//!   memory, never re-buffered) for `requestObject` and `objectRef`;
//! - admission's audit annotations land in the same map ([`annotations_of`]).
//!
//! When the response exists, `ResponseComplete` is written with its code (and the Status of an
//! error); a long-running request (watch, logs, exec, proxy) writes `ResponseStarted` when its
//! headers go out and `ResponseComplete` when its body ends or is dropped. A panic inside writes
//! `Panic` and unwinds on. Stages the policy omits are not written; a request at level `None`
//! costs the policy lookup only. Without an audit policy none of this is installed.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use futures::FutureExt as _;
use http_body::Body as _;
use http_body_util::BodyExt as _;

use super::event::{Captured, Core, ObjectRef, Record, Response as ResponseInfo};
use super::policy::{Level, RequestAuditConfig, Stage};
use super::Auditor;
use crate::authn::UserInfo;
use crate::http::request_info::RequestInfo;
use crate::registry::AuditAnnotations;

/// The audit ID header, in requests and responses.
pub const AUDIT_ID_HEADER: &str = "audit-id";

/// A request's audit ID, set by [`init`] for every request, audited or not.
#[derive(Debug, Clone)]
pub struct AuditId(pub Arc<str>);

/// Upstream's `WithAuditInit`, the outermost layer whether or not auditing is on: the request's
/// audit ID is the client's non-empty `Audit-ID` header, else a new UUID, and every response
/// carries it back.
pub async fn init(mut req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(AUDIT_ID_HEADER)
        .filter(|v| !v.is_empty())
        .and_then(|v| Some((v.clone(), Arc::<str>::from(v.to_str().ok()?))));
    let (value, id) = given.unwrap_or_else(|| {
        let id = uuid::Uuid::new_v4().to_string();
        // A UUID's text is always a header value.
        let value = HeaderValue::from_str(&id).unwrap_or(HeaderValue::from_static(""));
        (value, id.into())
    });
    req.extensions_mut().insert(AuditId(id));
    let mut resp = next.run(req).await;
    resp.headers_mut().insert(AUDIT_ID_HEADER, value);
    resp
}
/// Longest User-Agent recorded (upstream's `maxUserAgentLength`).
const MAX_USER_AGENT: usize = 1024;
/// Largest response body kept for `responseObject` or a Status (a body of unknown size never is).
const MAX_RESPONSE_BODY: u64 = 16 * 1024 * 1024;

/// The audit state of one request, in its extensions.
pub struct AuditContext {
    auditor: Arc<Auditor>,
    id: Arc<str>,
    received: jiff::Timestamp,
    uri: axum::http::Uri,
    user_agent: String,
    source_ips: Vec<String>,
    /// What the request does (also left in its extensions for the layers inside).
    info: RequestInfo,
    /// Authorization's and admission's annotations (bounded; a key keeps its first value).
    annotations: AuditAnnotations,
    state: parking_lot::Mutex<Progress>,
}

/// What the steps inside have reported.
#[derive(Default)]
struct Progress {
    decided: Decided,
    impersonated: Option<Arc<UserInfo>>,
    request_body: Option<Captured>,
}

#[derive(Default)]
enum Decided {
    /// Authentication has not reported (the request never reached it).
    #[default]
    Pending,
    /// Level `None`.
    Skip,
    Audit {
        core: Arc<Core>,
        config: RequestAuditConfig,
        long_running: bool,
    },
    FailedAuthentication {
        core: Arc<Core>,
        config: RequestAuditConfig,
        message: String,
    },
}

impl AuditContext {
    fn new(auditor: Arc<Auditor>, req: &Request, info: RequestInfo) -> Self {
        let id = match req.extensions().get::<AuditId>() {
            Some(AuditId(id)) => id.clone(),
            None => uuid::Uuid::new_v4().to_string().into(),
        };
        let mut user_agent: String = req
            .headers()
            .get(header::USER_AGENT)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        if user_agent.len() > MAX_USER_AGENT {
            let mut end = MAX_USER_AGENT;
            while !user_agent.is_char_boundary(end) {
                end -= 1;
            }
            user_agent.truncate(end);
            user_agent.push_str("...TRUNCATED");
        }
        let remote = req
            .extensions()
            .get::<ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        AuditContext {
            auditor,
            id,
            received: jiff::Timestamp::now(),
            uri: req.uri().clone(),
            user_agent,
            source_ips: source_ips(req.headers(), remote),
            info,
            annotations: AuditAnnotations::default(),
            state: Default::default(),
        }
    }

    /// Decides the level of the request by `user` (`None`: authentication failed).
    fn decide(&self, user: Option<UserInfo>) -> Option<(Arc<Core>, RequestAuditConfig)> {
        let known = user.is_some();
        let attrs = crate::authz::request_info::attributes(user.unwrap_or_default(), &self.info);
        let config = self.auditor.policy.evaluate(&attrs, known);
        self.auditor.sink.metrics.observe_level(config.level);
        if config.level == Level::None {
            self.state.lock().decided = Decided::Skip;
            return None;
        }
        let object_ref = attrs.resource_request.then(|| ObjectRef {
            resource: attrs.resource.clone(),
            namespace: attrs.namespace.clone(),
            name: attrs.name.clone(),
            api_group: attrs.api_group.clone(),
            api_version: self.info.api_version.clone(),
            subresource: attrs.subresource.clone(),
        });
        let core = Arc::new(Core {
            level: config.level,
            audit_id: self.id.clone(),
            request_uri: self
                .uri
                .path_and_query()
                .map_or_else(|| self.uri.path().to_string(), |p| p.as_str().to_string()),
            verb: attrs.verb.clone(),
            user: known.then(|| Arc::new(attrs.user)),
            source_ips: self.source_ips.clone(),
            user_agent: self.user_agent.clone(),
            object_ref,
            received: self.received,
            omit_managed_fields: config.omit_managed_fields,
        });
        Some((core, config))
    }

    fn record(&self, core: &Arc<Core>, stage: Stage, response: Option<ResponseInfo>) -> Record {
        let state = self.state.lock();
        Record {
            core: core.clone(),
            stage,
            stage_timestamp: if stage == Stage::RequestReceived {
                core.received
            } else {
                jiff::Timestamp::now()
            },
            impersonated: state.impersonated.clone(),
            response,
            request_body: state.request_body.clone(),
            annotations: self.annotations.all(),
        }
    }

    fn emit(&self, config: &RequestAuditConfig, record: Record) {
        if config.writes(record.stage) {
            self.auditor.sink.process(record);
        }
    }
}

/// The audit context of a request, if it is audited.
fn context_of(extensions: &axum::http::Extensions) -> Option<&Arc<AuditContext>> {
    extensions.get::<Arc<AuditContext>>()
}

/// Authentication reports the user it authenticated (before impersonation).
pub fn authenticated(req: &Request, user: impl FnOnce() -> UserInfo) {
    let Some(ac) = context_of(req.extensions()) else {
        return;
    };
    let Some((core, config)) = ac.decide(Some(user())) else {
        return;
    };
    let long_running = long_running(&core);
    ac.emit(&config, ac.record(&core, Stage::RequestReceived, None));
    ac.state.lock().decided = Decided::Audit {
        core,
        config,
        long_running,
    };
}

/// Authentication reports that no credential held (the request is answered 401).
pub fn authentication_failed(req: &Request) {
    let Some(ac) = context_of(req.extensions()) else {
        return;
    };
    let Some((core, config)) = ac.decide(None) else {
        return;
    };
    let message = auth_methods(req);
    ac.state.lock().decided = Decided::FailedAuthentication {
        core,
        config,
        message,
    };
}

/// Authentication reports whom the request acts as, once impersonation was allowed: an
/// impersonating request records the user as `impersonatedUser`.
pub fn acting_as(req: &Request, user: &Arc<UserInfo>) {
    let Some(ac) = context_of(req.extensions()) else {
        return;
    };
    if req.headers().contains_key("impersonate-user") {
        ac.state.lock().impersonated = Some(user.clone());
    }
}

/// Authorization reports its decision.
pub fn authorized(extensions: &axum::http::Extensions, allowed: bool, reason: &str) {
    if let Some(ac) = context_of(extensions) {
        annotate_decision(&ac.annotations, allowed, reason);
    }
}

fn annotate_decision(annotations: &AuditAnnotations, allowed: bool, reason: &str) {
    let decision = if allowed { "allow" } else { "forbid" };
    annotations.add("authorization.k8s.io/decision".into(), decision.into());
    annotations.add("authorization.k8s.io/reason".into(), reason.into());
}

/// Where admission leaves the request's audit annotations: the audited request's own map, else
/// a map nobody reads.
pub fn annotations_of(extensions: &axum::http::Extensions) -> AuditAnnotations {
    context_of(extensions)
        .map(|ac| ac.annotations.clone())
        .unwrap_or_default()
}

/// upstream's `getAuthMethods`: what a request that failed authentication tried.
fn auth_methods(req: &Request) -> String {
    let mut tried = Vec::new();
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim();
    let scheme = auth.split(' ').next().unwrap_or_default();
    if scheme.eq_ignore_ascii_case("basic") && auth.len() > scheme.len() {
        tried.push("basic");
    }
    if scheme.eq_ignore_ascii_case("bearer") && auth.split(' ').count() > 1 {
        tried.push("bearer");
    }
    let token_in_query = form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
        .any(|(k, v)| k == "access_token" && !v.trim().is_empty());
    if token_in_query {
        tried.push("access_token");
    }
    if req
        .extensions()
        .get::<crate::http::tls::PeerCertificate>()
        .is_some()
    {
        tried.push("x509");
    }
    if tried.is_empty() {
        "Authentication failed, no credentials provided".to_string()
    } else {
        format!("Authentication failed, attempted: {}", tried.join(", "))
    }
}

/// upstream's `utilnet.SourceIPs`: the `X-Forwarded-For` chain, `X-Real-Ip` unless already in
/// it, and the connection's address unless it ends the chain.
fn source_ips(headers: &HeaderMap, remote: Option<std::net::IpAddr>) -> Vec<String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<std::net::IpAddr>()
            .ok()
            .map(|ip| ip.to_canonical())
    };
    let mut ips: Vec<std::net::IpAddr> = headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').filter_map(parse).collect())
        .unwrap_or_default();
    if let Some(real) = headers
        .get("x-real-ip")
        .and_then(|v| v.to_str().ok())
        .and_then(parse)
    {
        if !ips.contains(&real) {
            ips.push(real);
        }
    }
    // An IPv4 client of a dual-stack listener is shown as Go shows it, `10.0.0.1`.
    if let Some(remote) = remote.map(|ip| ip.to_canonical()) {
        if ips.last() != Some(&remote) {
            ips.push(remote);
        }
    }
    ips.iter().map(|ip| ip.to_string()).collect()
}

/// Upstream's long-running check (`watch`, `proxy`, and the streaming subresources).
fn long_running(core: &Core) -> bool {
    let sub = core
        .object_ref
        .as_ref()
        .map_or("", |r| r.subresource.as_str());
    core.object_ref.is_some()
        && (matches!(core.verb.as_str(), "watch" | "proxy")
            || matches!(sub, "attach" | "exec" | "proxy" | "log" | "portforward"))
}

/// The outer audit middleware (see the module header).
pub async fn filter(
    axum::extract::State(auditor): axum::extract::State<Arc<Auditor>>,
    mut req: Request,
    next: Next,
) -> Response {
    let info = RequestInfo::of(&mut req).clone();
    let ac = Arc::new(AuditContext::new(auditor, &req, info));
    req.extensions_mut().insert(ac.clone());
    let resp = match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            panicked(&ac, panic.as_ref());
            std::panic::resume_unwind(panic)
        }
    };
    finish(&ac, resp).await
}

fn panicked(ac: &AuditContext, panic: &(dyn std::any::Any + Send)) {
    let decided = std::mem::take(&mut ac.state.lock().decided);
    if let Decided::Audit { core, config, .. } = decided {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let response = ResponseInfo {
            code: 500,
            message: Some(format!("APIServer panic'd: {what}")),
            internal_error: true,
            body: None,
        };
        ac.emit(&config, ac.record(&core, Stage::Panic, Some(response)));
    }
}

/// Writes the stages after the request's and hands the response on.
async fn finish(ac: &Arc<AuditContext>, resp: Response) -> Response {
    let decided = std::mem::take(&mut ac.state.lock().decided);
    let code = resp.status().as_u16();
    match decided {
        Decided::Pending | Decided::Skip => resp,
        Decided::FailedAuthentication {
            core,
            config,
            message,
        } => {
            let response = ResponseInfo {
                code,
                message: Some(message),
                ..Default::default()
            };
            ac.emit(
                &config,
                ac.record(&core, Stage::ResponseStarted, Some(response)),
            );
            resp
        }
        Decided::Audit {
            core,
            config,
            long_running,
        } => {
            if !ac.auditor.authorizes {
                annotate_decision(&ac.annotations, true, "");
            }
            if long_running {
                let response = ResponseInfo {
                    code,
                    body: None,
                    ..Default::default()
                };
                ac.emit(
                    &config,
                    ac.record(&core, Stage::ResponseStarted, Some(response.clone())),
                );
                let (parts, body) = resp.into_parts();
                let completion = Completion {
                    ac: ac.clone(),
                    core,
                    config,
                    response,
                };
                return Response::from_parts(
                    parts,
                    Body::new(Completing {
                        inner: body,
                        completion: Some(completion),
                    }),
                );
            }
            let wants_body = core.level == Level::RequestResponse
                || code >= 400
                || matches!(core.verb.as_str(), "delete" | "deletecollection");
            let (resp, body) = if wants_body {
                keep_body(resp).await
            } else {
                (resp, None)
            };
            let response = ResponseInfo {
                code,
                body,
                ..Default::default()
            };
            ac.emit(
                &config,
                ac.record(&core, Stage::ResponseComplete, Some(response)),
            );
            resp
        }
    }
}

/// The response body, when it is whole in memory and not too large; the response unchanged.
async fn keep_body(resp: Response) -> (Response, Option<Captured>) {
    let exact = resp.body().size_hint().exact();
    if !exact.is_some_and(|n| n > 0 && n <= MAX_RESPONSE_BODY) {
        return (resp, None);
    }
    let content_type = content_type(resp.headers());
    let (parts, body) = resp.into_parts();
    match body.collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            let captured = Captured {
                bytes: bytes.clone(),
                content_type,
            };
            (
                Response::from_parts(parts, Body::from(bytes)),
                Some(captured),
            )
        }
        // A body that fails to produce its bytes fails the same way for the client.
        Err(e) => (
            axum::response::IntoResponse::into_response(crate::error::ApiError::internal(
                "reading the response body",
                e.into_inner(),
            )),
            None,
        ),
    }
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Keeps the request body for the event: just inside the body pre-read, so the body is already
/// whole in memory (a body of unknown size, a long-running request's, is never read here).
pub async fn capture_body(req: Request, next: Next) -> Response {
    let Some(ac) = context_of(req.extensions()).cloned() else {
        return next.run(req).await;
    };
    let wanted = matches!(
        ac.state.lock().decided,
        Decided::Audit {
            long_running: false,
            ..
        }
    );
    let exact = req.body().size_hint().exact();
    if !wanted
        || req.headers().contains_key(header::UPGRADE)
        || !exact.is_some_and(|n| n > 0 && n <= MAX_RESPONSE_BODY)
    {
        return next.run(req).await;
    }
    let content_type = content_type(req.headers());
    let (parts, body) = req.into_parts();
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            return axum::response::IntoResponse::into_response(
                crate::error::ApiError::bad_request(format!(
                    "unable to read the request body: {e}"
                )),
            )
        }
    };
    ac.state.lock().request_body = Some(Captured {
        bytes: bytes.clone(),
        content_type,
    });
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The `ResponseComplete` of a long-running request, written when its body ends.
struct Completion {
    ac: Arc<AuditContext>,
    core: Arc<Core>,
    config: RequestAuditConfig,
    response: ResponseInfo,
}

/// A long-running response's body that writes `ResponseComplete` when it is dropped (at its end,
/// or when the client goes away).
struct Completing {
    inner: Body,
    completion: Option<Completion>,
}

impl Drop for Completing {
    fn drop(&mut self) {
        if let Some(c) = self.completion.take() {
            let record =
                c.ac.record(&c.core, Stage::ResponseComplete, Some(c.response));
            c.ac.emit(&c.config, record);
        }
    }
}

impl http_body::Body for Completing {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
