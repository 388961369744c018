//! Conversion of a custom resource between the versions of its CRD when the CRD converts through
//! a webhook (`spec.conversion.strategy: Webhook`): upstream's `crConverter` around the webhook
//! converter, and the pruning `schemaCoercingConverter` applies to what the webhook returns.
//!
//! It is an async step of the generic store, not a [`Strategy`](super::Strategy) hook: the
//! strategies' `to_storage`/`from_storage` are synchronous and stay the whole conversion of the
//! kinds that need no I/O (autoscaling v1/v2, events, custom resources with `None`), whose reads
//! stay a byte copy of the stored text. Only resources built with a [`CustomResourceConverter`]
//! (see [`Resource::converter`](super::Resource::converter)) take this step:
//! - reads ([`Store::get`](super::Store::get), list pages, watch events, every write's response)
//!   convert stored objects, whatever version they were stored in (an older storage version
//!   listed in `status.storedVersions` too), to the request's version; a list page or a burst of
//!   watch events is one `ConversionReview`;
//! - writes run the request version's defaults, validation and admission on the object in the
//!   request's version (upstream decodes, validates, then encodes to the storage version), then
//!   convert it to the storage version before it is stored;
//! - objects already in the wanted version are not sent; nothing is sent for an empty batch.
//!
//! Bounds: each call is the webhook client's ([`TIMEOUT`](super::conversion_webhook::TIMEOUT),
//! response size), inside the request's own deadline. A failure is the request's 500 with the
//! webhook's message ([`From<ConversionError> for ApiError`](ConversionError)), as
//! `ErrorToAPIStatus` renders an error that is not a Status.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookConversion;
use serde_json::Value;

use super::conversion_webhook::{self, ConversionError};
use crate::error::ApiError;

/// Most objects sent in one `ConversionReview`: a larger batch (a list without `limit`, a watch
/// from a snapshot) goes in several reviews, so no request to the webhook and no response read
/// from it grows with the collection.
pub const MAX_OBJECTS_PER_REVIEW: usize = 256;

/// What a batch of objects is to the messages of a failed conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// One object (a get, a write).
    Object,
    /// The items of one response (a list page, watch events).
    Items,
}

/// The conversion of one CRD's objects through its webhook, shared by every served version.
#[derive(Debug)]
pub struct CustomResourceConverter {
    group: String,
    storage_api_version: String,
    webhook: WebhookConversion,
    /// Every version of `spec.versions` (served or not: objects may be stored in any), with its
    /// structural schema, which prunes what the webhook returns.
    versions: HashMap<String, Option<Arc<schema::Structural>>>,
}

impl CustomResourceConverter {
    /// The converter of `crd`; `None` unless it converts through a webhook.
    pub fn from_crd(crd: &Value) -> Option<Arc<Self>> {
        if !super::customresource::serving::webhook_conversion(crd) {
            return None;
        }
        let text = |p: &str| crd.pointer(p).and_then(Value::as_str).unwrap_or("");
        let group = text("/spec/group").to_string();
        let webhook = crd
            .pointer("/spec/conversion/webhook")
            .cloned()
            .and_then(|w| serde_json::from_value(w).ok())
            .unwrap_or_default();
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| {
                        let name = v.get("name").and_then(Value::as_str)?;
                        let structural = v
                            .pointer("/schema/openAPIV3Schema")
                            .filter(|s| !s.is_null())
                            .and_then(|s| serde_json::from_value(s.clone()).ok())
                            .map(|props| Arc::new(schema::Structural::new(&props)));
                        Some((name.to_string(), structural))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let storage = super::strategy::storage_version(crd).unwrap_or_default();
        Some(Arc::new(CustomResourceConverter {
            storage_api_version: format!("{group}/{storage}"),
            group,
            webhook,
            versions,
        }))
    }

    /// `apiVersion` objects are stored in.
    pub fn storage_api_version(&self) -> &str {
        &self.storage_api_version
    }

    /// The version of `api_version` if it is one of the CRD's.
    fn valid_version<'a>(&self, api_version: &'a str) -> Option<&'a str> {
        let (group, version) = api_version.split_once('/')?;
        (group == self.group && self.versions.contains_key(version)).then_some(version)
    }

    /// Converts `objects` to `api_version`, in order; objects already in it come back as they
    /// are (the same `Arc`), the others are sent in reviews of at most [`MAX_OBJECTS_PER_REVIEW`]
    /// (one after another, so a list of any size never makes one unbounded request or response)
    /// and pruned by the target version's schema. Upstream's checks first: the target and every
    /// object must be in a version of the CRD.
    pub async fn convert(
        &self,
        objects: &[Arc<Value>],
        api_version: &str,
        batch: Batch,
    ) -> Result<Vec<Arc<Value>>, ConversionError> {
        let Some(target) = self.valid_version(api_version) else {
            return Err(ConversionError(format!(
                "request to convert CR to an invalid group/version: {api_version}"
            )));
        };
        let mut to_send = Vec::new();
        for (i, o) in objects.iter().enumerate() {
            let from = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            if self.valid_version(from).is_none() {
                return Err(ConversionError(match batch {
                    Batch::Object => {
                        format!("request to convert CR from an invalid group/version: {from}")
                    }
                    Batch::Items => format!(
                        "request to convert CR list failed, list index {i} has invalid group/version: {from}"
                    ),
                }));
            }
            if from != api_version {
                to_send.push(i);
            }
        }
        if to_send.is_empty() {
            return Ok(objects.to_vec());
        }
        let mut converted = Vec::with_capacity(to_send.len());
        for chunk in to_send.chunks(MAX_OBJECTS_PER_REVIEW) {
            let sent: Vec<Value> = chunk.iter().map(|&i| Value::clone(&objects[i])).collect();
            converted.extend(match batch {
                Batch::Object => {
                    conversion_webhook::convert(&self.webhook, sent, api_version).await
                }
                Batch::Items => {
                    conversion_webhook::convert_items(&self.webhook, sent, api_version).await
                }
            }?);
        }
        let schema = self.versions.get(target).and_then(Option::as_ref);
        let mut out = objects.to_vec();
        for (i, mut obj) in to_send.into_iter().zip(converted) {
            if let Some(s) = schema {
                s.prune(&mut obj);
                s.coerce_embedded_metadata(&mut obj, false)
                    .map_err(|e| ConversionError(e.to_string()))?;
            }
            out[i] = Arc::new(obj);
        }
        Ok(out)
    }

    /// [`convert`](Self::convert) of one object.
    pub async fn convert_one(
        &self,
        object: Arc<Value>,
        api_version: &str,
    ) -> Result<Arc<Value>, ConversionError> {
        let mut out = self
            .convert(std::slice::from_ref(&object), api_version, Batch::Object)
            .await?;
        Ok(out.pop().unwrap_or(object))
    }
}

/// A failed conversion is the request's 500, its message the conversion's (upstream's storage
/// returns the converter's error as is and `ErrorToAPIStatus` makes it a reason-less 500).
impl From<ConversionError> for ApiError {
    fn from(e: ConversionError) -> Self {
        api::status::unknown(&e.0).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({
            "spec": {"group": "example.com",
                "names": {"plural": "widgets", "kind": "Widget"},
                "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}},
                "versions": [
                    {"name": "v1", "served": true, "storage": false},
                    {"name": "v2", "served": true, "storage": true},
                    {"name": "v3", "served": false, "storage": false}]},
        })
    }

    fn widget(version: &str, name: &str) -> Arc<Value> {
        Arc::new(
            json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget",
            "metadata": {"name": name}}),
        )
    }

    #[test]
    fn only_webhook_crds_have_a_converter() {
        let mut none = crd();
        none["spec"]["conversion"] = json!({"strategy": "None"});
        assert!(CustomResourceConverter::from_crd(&none).is_none());
        let c = CustomResourceConverter::from_crd(&crd());
        assert_eq!(
            c.as_ref().map(|c| c.storage_api_version()),
            Some("example.com/v2")
        );
    }

    #[tokio::test]
    async fn objects_in_the_wanted_version_are_not_sent_and_versions_are_checked() {
        // No client config: any call would fail.
        let Some(c) = CustomResourceConverter::from_crd(&crd()) else {
            panic!("a webhook CRD has a converter");
        };
        let objs = vec![widget("v2", "a"), widget("v2", "b")];
        let out = c.convert(&objs, "example.com/v2", Batch::Items).await;
        assert!(out.is_ok_and(|o| o.iter().zip(&objs).all(|(a, b)| Arc::ptr_eq(a, b))));
        assert!(c.convert(&[], "example.com/v1", Batch::Items).await.is_ok());
        // An unserved version is still one of the CRD's.
        assert!(c
            .convert_one(widget("v3", "a"), "example.com/v3")
            .await
            .is_ok());
        assert_eq!(
            c.convert_one(widget("v2", "a"), "example.com/v9").await,
            Err(ConversionError(
                "request to convert CR to an invalid group/version: example.com/v9".into()
            ))
        );
        assert_eq!(
            c.convert_one(widget("v9", "a"), "example.com/v2").await,
            Err(ConversionError(
                "request to convert CR from an invalid group/version: example.com/v9".into()
            ))
        );
        let list = vec![widget("v2", "a"), widget("v9", "b")];
        assert_eq!(
            c.convert(&list, "example.com/v2", Batch::Items).await,
            Err(ConversionError(
                "request to convert CR list failed, list index 1 has invalid group/version: example.com/v9".into()
            ))
        );
        let err = c.convert_one(widget("v1", "a"), "example.com/v2").await;
        assert_eq!(
            err,
            Err(ConversionError("conversion webhook for example.com/v1, Kind=Widget failed: webhook configuration must have either service or URL".into()))
        );
        let status = ApiError::from(err.err().unwrap_or(ConversionError(String::new())));
        assert_eq!(status.code(), 500);
        assert_eq!(status.to_status().get("reason"), None);
    }
}
