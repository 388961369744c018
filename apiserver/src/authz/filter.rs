//! The authorization step of every request on a secure server (upstream's `WithAuthorization`):
//! the request's attributes ([`super::request_info`]) are decided by [`super::authorize`]; a
//! refusal is 403 with upstream's message. It runs after authentication and the in-flight
//! limits, before any handler.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::authn::filter::user_of;
use crate::error::ApiError;
use crate::http::request_info::RequestInfo;
use crate::registry::store::CachedObjects;
use crate::state::AppState;

/// The middleware.
pub async fn filter(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let user = user_of(req.extensions(), req.headers());
    let attrs = super::request_info::attributes((*user).clone(), RequestInfo::of(&mut req));
    let (decision, by) = super::authorize_by(&CachedObjects::new(&state), &attrs);
    state.metrics.record_authorization(by, decision.allowed);
    crate::audit::authorized(req.extensions(), decision.allowed, &decision.reason);
    if !decision.allowed {
        tracing::debug!(user = %attrs.user.username, verb = %attrs.verb, reason = %decision.reason, "forbidden");
        return ApiError::from(super::request_info::forbidden(&attrs, &decision.reason))
            .into_response();
    }
    next.run(req).await
}
