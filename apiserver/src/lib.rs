//! The Kubernetes REST API over the `store` crate.
//!
//! Layout: [`server`] accepts connections (header-read timeout, a connection bound sized from the
//! raised fd limit of [`fdlimit`], graceful shutdown); [`app`] builds the router: probes, metrics, discovery, OpenAPI, and the resource
//! handlers of [`handlers`] (HTTP only), behind the loopback guard of [`http::loopback`] (no
//! browser origins, no foreign `Host`), authentication ([`authn`]), the request time limit of
//! [`http::limits`] and API Priority and Fairness ([`flowcontrol`]), whose request bodies
//! [`http::preread`] has already read (under a deadline and a minimum rate), and authorization
//! ([`authz`]) in secure mode. With an audit policy, the [`audit`] middleware wraps
//! authentication and everything inside it, so refused requests are audited too.
//! The [`registry`] does the rest: its runtime [`ResourceRegistry`](registry::ResourceRegistry)
//! says what is served, its generic [`Store`](registry::Store) implements every verb (one
//! `guaranteed_update` for every read-modify-write), and per-kind behaviour comes from its
//! strategies. Lists and watches are served from the [`watch_cache`]; patches from [`patch`].
//! Every failure is rendered once, as a Kubernetes `Status`, by [`error::ApiError`].

pub mod patch;
pub mod protobuf;
pub mod registry;

pub mod admission;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod bootstrap;
pub mod components;
pub mod config;
pub mod discovery;
pub mod error;
pub mod event_ttl;
pub mod fdlimit;
pub mod flowcontrol;
pub mod handlers;
pub mod health;
pub mod http;
pub mod metrics;
pub mod openapi;
pub mod server;
pub mod state;
pub mod table;
pub mod watch_cache;
pub mod webhook;

pub use config::Config;
pub use error::ApiError;
pub use server::{run, start, Server};
pub use state::AppState;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;

/// `/version`, indented as kube-apiserver writes it (`json.MarshalIndent`, no trailing newline).
async fn version() -> Response {
    let body = serde_json::to_vec_pretty(&discovery::version()).unwrap_or_default();
    let mut resp = body.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

async fn ok() -> &'static str {
    "ok"
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    state.metrics.set_revision(state.cache.revision());
    let mut text = state.metrics.render();
    state.flowcontrol.render_metrics(&mut text);
    if let Some(audit) = &state.audit {
        audit.render_metrics(&mut text);
    }
    let mut r = text.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

async fn api_root(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let served = state.resources.snapshot();
    discovery::root(&served, &headers, true, &state.config.advertise_address)
}

async fn apis_root(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let served = state.resources.snapshot();
    discovery::root(&served, &headers, false, &state.config.advertise_address)
}

async fn not_found() -> Response {
    ApiError::unknown_path().into_response()
}

/// Records count and latency of every request by verb, resource and code.
async fn record(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let (verb, resource) = handlers::classify(&state, &req);
    // Debug level: an enabled span formats its fields on every request (about 1 % of the CPU of
    // `minik8s bench scale` at info), while at info a request only logs on failure, with its verb
    // and resource.
    let span = tracing::debug_span!("request", method = %req.method(), path = %req.uri().path(), verb, resource = %resource);
    // The request is consumed by the handler; what the failure log names is kept, as
    // reference-counted clones (no copy; read only if the request fails).
    let method = req.method().clone();
    let uri = req.uri().clone();
    let user_agent = req.headers().get(header::USER_AGENT).cloned();
    let resp = tracing::Instrument::instrument(next.run(req), span).await;
    let status = resp.status();
    state
        .metrics
        .record_request(verb, &resource, status.as_u16(), started.elapsed());
    if http::httplog::worth_logging(&method, status) {
        state.httplog.log(&http::httplog::FailedRequest {
            method: &method,
            path: uri.path(),
            user_agent: user_agent
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default(),
            status,
            failure: resp.extensions().get::<http::httplog::Failure>(),
        });
    }
    resp
}

/// The router of one apiserver.
pub fn app(state: AppState) -> Router {
    // A secure server authenticates every request: the guard protects only a server without.
    let guard = state.config.loopback_guard && state.security.is_none();
    // The middlewares' state: axum clones it for every request, one reference count.
    let shared = state.clone();
    let router = Router::new()
        .route("/version", get(version))
        .route("/healthz", get(ok))
        .route("/livez", get(ok))
        .route("/readyz", get(health::readyz))
        .route("/readyz/{check}", get(health::readyz_check))
        .route("/metrics", get(metrics_text))
        .route(
            "/debug/api_priority_and_fairness/dump_priority_levels",
            get(flowcontrol::debug::dump_priority_levels),
        )
        .route("/api", get(api_root))
        .route(
            "/.well-known/openid-configuration",
            get(authn::oidc::openid_configuration),
        )
        .route(authn::oidc::JWKS_PATH, get(authn::oidc::jwks))
        .route("/apis", get(apis_root))
        .route("/openapi/v3", get(openapi::index))
        .route("/openapi/v3/{*path}", get(openapi::document))
        .route("/openapi/v2", get(openapi::v2::handler))
        .route("/api/{version}", any(handlers::core_root))
        .route("/api/{version}/{*rest}", any(handlers::core))
        .route("/apis/{group}", any(handlers::group_root))
        .route("/apis/{group}/{version}", any(handlers::named_root))
        .route("/apis/{group}/{version}/{*rest}", any(handlers::named))
        .fallback(not_found);
    // From the outside in: authentication, the body pre-read, the request deadline, priority and
    // fairness (which classifies by the authenticated user), authorization. Upstream's deadline
    // wraps authentication too; here authentication is bounded by the header deadline and the
    // body by the pre-read's own deadline, so the 504 limit starts once the request is whole.
    let router = if state.security.is_some() {
        router.layer(middleware::from_fn_with_state(
            shared.clone(),
            authz::filter::filter,
        ))
    } else {
        router
    };
    let router = router
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            flowcontrol::filter::filter,
        ))
        .layer(middleware::from_fn_with_state(
            state.config.request_timeout,
            http::limits::timeout,
        ));
    // The audit event keeps the request body the pre-read has just read.
    let router = if state.audit.is_some() {
        router.layer(middleware::from_fn(audit::capture_body))
    } else {
        router
    };
    let router = router
        // Outside the seats: a body is read whole before its request takes one (and after
        // authentication, so an unauthenticated client's body is never read).
        .layer(middleware::from_fn_with_state(
            http::preread::PreRead::new(&state.config),
            http::preread::preread,
        ))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            authn::filter::filter,
        ));
    // Outside authentication, so the requests it refuses are audited too (upstream's
    // `WithAudit` with `WithFailedAuthenticationAudit`); installed only with an audit policy.
    let router = match &state.audit {
        Some(auditor) => router.layer(middleware::from_fn_with_state(
            auditor.clone(),
            audit::filter::filter,
        )),
        None => router,
    };
    // Refused browser requests are counted and logged by `record` but take no in-flight seat.
    let router = if guard {
        router.layer(http::loopback::LoopbackGuardLayer)
    } else {
        router
    };
    router
        .layer(middleware::from_fn_with_state(shared, record))
        .layer(middleware::from_fn(audit::filter::init))
        .with_state(state)
}
