//! The conversion webhook client (upstream's `apiextensions-apiserver/pkg/apiserver/conversion`
//! webhook converter): a `ConversionReview` posted over HTTPS to a CRD's `clientConfig.url`,
//! trusting its `caBundle`, and the response validated as upstream validates it.
//!
//! The steps of [`convert`], each upstream's:
//! 1. Objects already in the desired version are not sent; an object with nothing but
//!    `apiVersion` and `kind` is converted by rewriting `apiVersion` (the nop converter).
//! 2. The review version is the first of `conversionReviewVersions` this client speaks (`v1`,
//!    `v1beta1`); none → `no supported conversion review versions`.
//! 3. POST to `url?timeout=30s` through the shared webhook client ([`crate::webhook`]: caBundle
//!    trust, [`TIMEOUT`] for the whole exchange, a bounded response; a `service` reference is
//!    refused: a sandbox has no service network).
//! 4. The response: `apiVersion`/`kind` `apiextensions.k8s.io/v1, Kind=ConversionReview` (v1 only), a
//!    `response`, the request's `uid` (v1 only), `result.status` `Success`, as many
//!    `convertedObjects` as were sent.
//! 5. Each converted object: the desired group/version, the same kind, name, namespace and UID;
//!    its `metadata` is the original's with only `labels` and `annotations` taken from the
//!    webhook (validated as labels and annotations are).
//!
//! Errors carry upstream's text, prefixed `conversion webhook for <gvk> failed: ` where upstream
//! prefixes it ([`convert_items`] names the items' kind there, as upstream's per-object decoding
//! of a list does). The request path calls it through [`super::conversion`].

use std::time::Duration;

use api::validation::{validate_annotations, validate_labels, FieldError};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookConversion;
use serde_json::{json, Map, Value};

/// Why a conversion failed; its text is the message of the 500 the request gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConversionError(pub String);

/// The whole request's bound: conversion webhooks have no `timeoutSeconds`; upstream's hook
/// client uses the webhook default of 30 s (kubernetes/kubernetes#91338).
pub const TIMEOUT: Duration = Duration::from_secs(30);

pub use crate::webhook::{MAX_RESPONSE_BYTES, RESPONSE_TO_REQUEST_RATIO};

const REVIEW_GROUP_VERSION: &str = "apiextensions.k8s.io/v1";

/// Converts `objects` to `desired_api_version` through the webhook. Objects come back in the
/// order given; one object is reported as upstream reports a single object, several as a list.
pub async fn convert(
    webhook: &WebhookConversion,
    objects: Vec<Value>,
    desired_api_version: &str,
) -> Result<Vec<Value>, ConversionError> {
    convert_as(webhook, objects, desired_api_version, false).await
}

/// [`convert`] of the items of one response (a list page, a burst of watch events) in one
/// review, with a failed call named after the items' kind (`…, Kind=Widget failed: …`), as
/// upstream names it when it decodes a list's items from storage one by one.
pub async fn convert_items(
    webhook: &WebhookConversion,
    objects: Vec<Value>,
    desired_api_version: &str,
) -> Result<Vec<Value>, ConversionError> {
    convert_as(webhook, objects, desired_api_version, true).await
}

async fn convert_as(
    webhook: &WebhookConversion,
    objects: Vec<Value>,
    desired_api_version: &str,
    items: bool,
) -> Result<Vec<Value>, ConversionError> {
    let input = Input::of(&objects);
    let failed_gvk = if items {
        Input::of(&objects[..objects.len().min(1)]).gvk
    } else {
        input.gvk.clone()
    };
    if objects.iter().all(is_empty_object) {
        return Ok(objects
            .into_iter()
            .map(|o| with_api_version(o, desired_api_version))
            .collect());
    }
    let to_send: Vec<usize> = (0..objects.len())
        .filter(|&i| api_version(&objects[i]) != desired_api_version)
        .collect();
    if to_send.is_empty() {
        return Ok(objects);
    }
    let review_version = review_version(webhook)?;
    let uid = uuid::Uuid::new_v4().to_string();
    let request = json!({
        "kind": "ConversionReview",
        "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
        "request": {
            "uid": uid,
            "desiredAPIVersion": desired_api_version,
            "objects": to_send.iter().map(|&i| &objects[i]).collect::<Vec<_>>(),
        },
    });
    let fail =
        |m: String| ConversionError(format!("conversion webhook for {failed_gvk} failed: {m}"));
    let response = post(webhook, &request).await.map_err(fail)?;
    let converted =
        converted_objects(&response, &uid, review_version == ReviewVersion::V1).map_err(fail)?;
    if converted.len() != to_send.len() {
        return Err(ConversionError(format!(
            "conversion webhook for {} returned {} objects, expected {}",
            input.gvk,
            converted.len(),
            to_send.len()
        )));
    }
    let mut out = objects;
    for (n, (i, converted)) in to_send.into_iter().zip(converted).enumerate() {
        out[i] = input.accept(&out[i], converted, n, desired_api_version)?;
    }
    // Objects not sent were in the desired version already.
    Ok(out)
}

/// What upstream's messages name: the input's group/version/kind, and whether it was a list.
struct Input {
    gvk: String,
    is_list: bool,
}

impl Input {
    fn of(objects: &[Value]) -> Input {
        let first = objects.first();
        let api_version = first.map(api_version).unwrap_or_default();
        let kind = first.map(kind).unwrap_or_default();
        let is_list = objects.len() != 1;
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let kind = if is_list {
            format!("{kind}List")
        } else {
            kind.to_string()
        };
        Input {
            gvk: format!("{group}/{version}, Kind={kind}"),
            is_list,
        }
    }

    /// Validates the `n`th converted object against `original` and restores its metadata.
    fn accept(
        &self,
        original: &Value,
        converted: Value,
        n: usize,
        desired: &str,
    ) -> Result<Value, ConversionError> {
        let gvk = &self.gvk;
        let err = |m: String| Err(ConversionError(m));
        if let Err(m) = unstructured(&converted) {
            return if self.is_list {
                err(format!(
                    "conversion webhook for {gvk} returned invalid converted object at index {n}: {m}"
                ))
            } else {
                err(m)
            };
        }
        // Upstream counts the object before these checks in a list: its index is one past.
        let (what, index) = if self.is_list {
            ("invalid converted object", n + 1)
        } else {
            ("invalid object", 0)
        };
        if api_version(&converted) != desired {
            return err(format!(
                "conversion webhook for {gvk} returned {what} at index {index}: invalid groupVersion (expected {desired}, received {})",
                api_version(&converted)
            ));
        }
        if kind(&converted) != kind(original) {
            return err(format!(
                "conversion webhook for {gvk} returned {what} at index {index}: invalid kind (expected {}, received {})",
                kind(original),
                kind(&converted)
            ));
        }
        if let Err(m) = same_identity(original, &converted) {
            return if self.is_list {
                err(format!(
                    "conversion webhook for {gvk} returned invalid converted object at index {index}: {m}"
                ))
            } else {
                err(format!(
                    "conversion webhook for {gvk} returned invalid object: {m}"
                ))
            };
        }
        match restore_object_meta(original, converted) {
            Ok(v) => Ok(v),
            Err(m) if self.is_list => err(format!(
                "conversion webhook for {gvk} returned invalid metadata in object at index {index}: {m}"
            )),
            Err(m) => err(format!("conversion webhook for {gvk} returned invalid metadata: {m}")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReviewVersion {
    V1,
    V1beta1,
}

impl std::fmt::Display for ReviewVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReviewVersion::V1 => "v1",
            ReviewVersion::V1beta1 => "v1beta1",
        })
    }
}

fn review_version(webhook: &WebhookConversion) -> Result<ReviewVersion, ConversionError> {
    webhook
        .conversion_review_versions
        .iter()
        .find_map(|v| match v.as_str() {
            "v1" => Some(ReviewVersion::V1),
            "v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        })
        .ok_or_else(|| ConversionError("no supported conversion review versions".into()))
}

fn api_version(v: &Value) -> &str {
    v.get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn kind(v: &Value) -> &str {
    v.get("kind").and_then(Value::as_str).unwrap_or_default()
}

fn meta_str<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `isEmptyUnstructuredObject`: nothing but `apiVersion` and `kind`.
fn is_empty_object(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.len() == 2 && m.contains_key("apiVersion") && m.contains_key("kind"))
}

fn with_api_version(mut v: Value, api_version: &str) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version.to_string()));
    }
    v
}

/// What decoding a `RawExtension` as `Unstructured` refuses: not an object, or no kind.
fn unstructured(v: &Value) -> Result<(), String> {
    let Some(m) = v.as_object() else {
        return Err("json: cannot unmarshal into Go value of type map[string]interface {}".into());
    };
    match m.get("kind") {
        Some(Value::String(k)) if !k.is_empty() => Ok(()),
        _ => Err(format!("Object 'Kind' is missing in '{v}'")),
    }
}

/// `validateConvertedObject`: kind, name, namespace and UID unchanged.
fn same_identity(original: &Value, converted: &Value) -> Result<(), String> {
    if kind(original) != kind(converted) {
        return Err(format!(
            "must have the same kind: {} != {}",
            kind(original),
            kind(converted)
        ));
    }
    for (field, what) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let (a, b) = (meta_str(original, field), meta_str(converted, field));
        if a != b {
            return Err(format!("must have the same {what}: {a} != {b}"));
        }
    }
    Ok(())
}

/// Go's `%T` of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// `restoreObjectMeta`: the original's metadata, with `labels` and `annotations` from the
/// converted object (validated when they changed).
fn restore_object_meta(original: &Value, mut converted: Value) -> Result<Value, String> {
    let response_meta = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ))
        }
    };
    let mut meta: Map<String, Value> = match original.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    for (field, path) in [
        ("labels", "metadata.labels"),
        ("annotations", "metadata.annotation"),
    ] {
        let response_field = match response_meta.get(field) {
            None | Some(Value::Null) => {
                meta.remove(field);
                continue;
            }
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ))
            }
        };
        let original_field = match meta.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in original object",
                    go_type(other)
                ))
            }
        };
        let mut changed = original_field.map_or(0, Map::len) != response_field.len();
        for (k, v) in response_field {
            if !v.is_string() {
                return Err(format!(
                    "metadata.{field}[{k}] must be a string, but is {} in converted object",
                    go_type(v)
                ));
            }
            if original_field.and_then(|o| o.get(k)) != Some(v) {
                changed = true;
            }
        }
        if changed {
            let value = Value::Object(response_field.clone());
            let errs = if field == "labels" {
                validate_labels(&value, path)
            } else {
                validate_annotations(&value, path)
            };
            if let Some(m) = aggregate(&errs) {
                return Err(m);
            }
        }
        meta.insert(field.to_string(), Value::Object(response_field.clone()));
    }
    if let Some(m) = converted.as_object_mut() {
        m.insert("metadata".into(), Value::Object(meta));
    }
    Ok(converted)
}

/// `field.ErrorList.ToAggregate().Error()`: one error bare, several as `[a, b]`.
fn aggregate(errs: &[FieldError]) -> Option<String> {
    let mut msgs: Vec<String> = Vec::new();
    for e in errs {
        let m = e.to_string();
        if !msgs.contains(&m) {
            msgs.push(m);
        }
    }
    match msgs.len() {
        0 => None,
        1 => msgs.pop(),
        _ => Some(format!("[{}]", msgs.join(", "))),
    }
}

/// `getConvertedObjectsFromResponse`.
fn converted_objects(response: &Value, uid: &str, v1: bool) -> Result<Vec<Value>, String> {
    if v1 {
        let (group_version, kind) = (api_version(response), kind(response));
        if group_version != REVIEW_GROUP_VERSION || kind != "ConversionReview" {
            let (g, v) = group_version.split_once('/').unwrap_or(("", group_version));
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {g}/{v}, Kind={kind}"
            ));
        }
    }
    let Some(r) = response.get("response").filter(|r| !r.is_null()) else {
        return Err("no response provided".into());
    };
    if v1 {
        let got = r.get("uid").and_then(Value::as_str).unwrap_or_default();
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
    }
    let result = r.get("result");
    let status = result
        .and_then(|s| s.get("status"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if status != "Success" {
        let message = result
            .and_then(|s| s.get("message"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !message.is_empty() {
            return Err(message.to_string());
        }
        return Err(format!(
            "response.result.status was '{status}', not 'Success'"
        ));
    }
    Ok(match r.get("convertedObjects") {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    })
}

/// POSTs the review through the shared webhook client ([`crate::webhook`]) and decodes the
/// response (the error text is what follows upstream's `conversion webhook for <gvk> failed: `).
async fn post(webhook: &WebhookConversion, review: &Value) -> Result<Value, String> {
    let config = webhook.client_config.as_ref();
    let endpoint = crate::webhook::Endpoint {
        url: config.and_then(|c| c.url.as_deref()),
        service: config
            .and_then(|c| c.service.as_ref())
            .map(|s| (s.namespace.as_str(), s.name.as_str())),
        ca_bundle: config
            .and_then(|c| c.ca_bundle.as_ref())
            .map(|b| b.0.as_slice())
            .unwrap_or_default(),
    };
    crate::webhook::post_json(endpoint, review, TIMEOUT)
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_restored_except_labels_and_annotations() {
        let original = json!({"apiVersion": "a.io/v1", "kind": "W",
            "metadata": {"name": "w", "uid": "u", "resourceVersion": "5", "labels": {"a": "1"}}});
        let converted = json!({"apiVersion": "a.io/v2", "kind": "W",
            "metadata": {"name": "w", "uid": "u", "resourceVersion": "999", "generation": 7,
                "labels": {"a": "2"}, "annotations": {"x": "y"}}, "spec": {}});
        let out = restore_object_meta(&original, converted);
        assert_eq!(
            out,
            Ok(json!({"apiVersion": "a.io/v2", "kind": "W",
                "metadata": {"name": "w", "uid": "u", "resourceVersion": "5",
                    "labels": {"a": "2"}, "annotations": {"x": "y"}}, "spec": {}}))
        );
        let bad = json!({"metadata": {"labels": {"a": 1}}});
        assert_eq!(
            restore_object_meta(&original, bad),
            Err("metadata.labels[a] must be a string, but is float64 in converted object".into())
        );
        assert_eq!(
            restore_object_meta(&original, json!({"kind": "W"})),
            Err("missing metadata in converted object".into())
        );
        assert_eq!(
            restore_object_meta(&original, json!({"metadata": []})),
            Err("invalid metadata of type []interface {} in converted object".into())
        );
        let invalid = json!({"metadata": {"labels": {"a": "not a valid value!"}}});
        let err = restore_object_meta(&original, invalid)
            .err()
            .unwrap_or_default();
        assert!(
            err.starts_with("metadata.labels.a: Invalid value: \"not a valid value!\""),
            "{err}"
        );
    }

    #[test]
    fn response_validation_messages() {
        let ok = json!({"apiVersion": REVIEW_GROUP_VERSION, "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": [{}]}});
        assert_eq!(converted_objects(&ok, "u", true).map(|v| v.len()), Ok(1));
        assert_eq!(
            converted_objects(&ok, "other", true),
            Err(r#"expected response.uid="other", got "u""#.into())
        );
        let wrong = json!({"apiVersion": "v1", "kind": "Status"});
        assert_eq!(
            converted_objects(&wrong, "u", true),
            Err("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /v1, Kind=Status".into())
        );
        let none = json!({"apiVersion": REVIEW_GROUP_VERSION, "kind": "ConversionReview"});
        assert_eq!(
            converted_objects(&none, "u", true),
            Err("no response provided".into())
        );
        let failed = json!({"apiVersion": REVIEW_GROUP_VERSION, "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure", "message": "no way"}}});
        assert_eq!(converted_objects(&failed, "u", true), Err("no way".into()));
        let bare = json!({"apiVersion": REVIEW_GROUP_VERSION, "kind": "ConversionReview",
            "response": {"uid": "u", "result": {}}});
        assert_eq!(
            converted_objects(&bare, "u", true),
            Err("response.result.status was '', not 'Success'".into())
        );
        // v1beta1 checks neither the type nor the uid.
        let beta = json!({"response": {"result": {"status": "Success"}, "convertedObjects": []}});
        assert_eq!(converted_objects(&beta, "u", false), Ok(vec![]));
    }

    #[tokio::test]
    async fn empty_objects_and_objects_in_the_desired_version_are_not_sent() {
        // No client config at all: anything sent would fail.
        let webhook = WebhookConversion::default();
        let empty = vec![json!({"apiVersion": "a.io/v1", "kind": "W"})];
        assert_eq!(
            convert(&webhook, empty, "a.io/v2").await,
            Ok(vec![json!({"apiVersion": "a.io/v2", "kind": "W"})])
        );
        let current = vec![json!({"apiVersion": "a.io/v2", "kind": "W", "metadata": {}})];
        assert_eq!(
            convert(&webhook, current.clone(), "a.io/v2").await,
            Ok(current)
        );
        let old = vec![json!({"apiVersion": "a.io/v1", "kind": "W", "metadata": {}})];
        assert_eq!(
            convert(&webhook, old.clone(), "a.io/v2").await,
            Err(ConversionError(
                "no supported conversion review versions".into()
            ))
        );
        let webhook = WebhookConversion {
            conversion_review_versions: vec!["v2".into(), "v1".into()],
            ..Default::default()
        };
        assert_eq!(
            convert(&webhook, old, "a.io/v2").await,
            Err(ConversionError(
                "conversion webhook for a.io/v1, Kind=W failed: webhook configuration must have either service or URL".into()
            ))
        );
    }
}
