//! The service-account issuer's OIDC discovery, as kube-apiserver serves it
//! (`pkg/serviceaccount/openidmetadata.go`): `/.well-known/openid-configuration` and the key set
//! at `/openid/v1/jwks`, so a relying party can verify this server's tokens.

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::state::AppState;

/// The path of the key set.
pub const JWKS_PATH: &str = "/openid/v1/jwks";

/// The discovery document. `jwks_uri` is this server's own key-set URL (upstream: the
/// external address over https; this server speaks http).
pub fn configuration(issuer: &str, advertise_address: &str) -> Value {
    json!({
        "issuer": issuer,
        "jwks_uri": format!("http://{advertise_address}{JWKS_PATH}"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    })
}

fn respond(body: &Value, content_type: &'static str) -> Response {
    let mut r = serde_json::to_vec(body).unwrap_or_default().into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    r
}

/// `GET /.well-known/openid-configuration`.
pub async fn openid_configuration(State(state): State<AppState>) -> Response {
    let body = configuration(state.credentials.issuer(), &state.config.advertise_address);
    respond(&body, "application/json")
}

/// `GET /openid/v1/jwks`.
pub async fn jwks(State(state): State<AppState>) -> Response {
    let body = json!({ "keys": [state.credentials.jwk()] });
    respond(&body, "application/jwk-set+json")
}
