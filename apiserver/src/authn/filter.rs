//! The authentication step of every request (upstream's `WithAuthentication` followed by
//! `WithImpersonation`): the one place that decides who a request acts as.
//!
//! On a secure server the request is authenticated ([`super::authenticator`]; 401 `Unauthorized`
//! when no credential holds), its `Authorization` header is dropped (as upstream, so no later
//! stage or log sees the credential), and impersonation is checked ([`super::impersonation`]).
//! Without authentication every request acts as the admin or whom it impersonates, as before.
//! The outcome is stored in the request's extensions; every later stage (handlers, admission,
//! managed fields, the review APIs, authorization) reads it with [`user_of`].

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Extensions, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::identity::UserInfo;
use crate::error::ApiError;
use crate::http::tls::PeerCertificate;
use crate::registry::store::CachedObjects;
use crate::state::AppState;

/// The user a request acts as, as [`filter`] stored it; a request that did not pass through the
/// filter (a router assembled without it) acts as without authentication.
pub fn user_of(extensions: &Extensions, headers: &HeaderMap) -> Arc<UserInfo> {
    match extensions.get::<Arc<UserInfo>>() {
        Some(user) => user.clone(),
        None => Arc::new(UserInfo::of_request(headers)),
    }
}

/// The middleware.
pub async fn filter(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let user = match &state.security {
        None => {
            crate::audit::authenticated(&req, UserInfo::admin);
            UserInfo::of_request(req.headers())
        }
        Some(security) => {
            let peer = req.extensions().get::<PeerCertificate>();
            let Some(user) =
                super::authenticator::authenticate(&state, security, req.headers(), peer)
            else {
                crate::audit::authentication_failed(&req);
                return ApiError::from(api::status::unauthorized("Unauthorized")).into_response();
            };
            crate::audit::authenticated(&req, || user.clone());
            req.headers_mut().remove(header::AUTHORIZATION);
            let objects = CachedObjects::new(&state);
            match super::impersonation::impersonate(&objects, user, req.headers()) {
                Ok(user) => user,
                Err(e) => return e.into_response(),
            }
        }
    };
    let user = Arc::new(user);
    crate::audit::acting_as(&req, &user);
    req.extensions_mut().insert(user);
    next.run(req).await
}
