//! The conversion webhook client (upstream's `apiextensions-apiserver/pkg/apiserver/conversion`
//! webhook converter): a `ConversionReview` (`apiextensions.k8s.io/v1`) posted over HTTPS to a
//! CRD's `clientConfig.url`, trusting its `caBundle`.
//!
//! WORK IN PROGRESS (issue 15): placeholder for the interface; the client lands next.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookConversion;
use serde_json::Value;

/// Why a conversion failed; its text is the message of the 500 the request gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConversionError(pub String);

/// Converts `objects` to `desired_api_version` through the webhook.
pub async fn convert(
    _webhook: &WebhookConversion,
    _objects: Vec<Value>,
    _desired_api_version: &str,
) -> Result<Vec<Value>, ConversionError> {
    Err(ConversionError(
        "conversion webhooks are not wired yet".into(),
    ))
}
