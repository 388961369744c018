//! What a CRD serves: one [`Resource`] per served version, under its accepted names, with the
//! version's [`CustomResourceStrategy`] and OpenAPI schema. Objects of every version share one
//! storage segment, `<plural>.<group>` of the CRD's spec names (as upstream keys them by the
//! spec's group and plural, whatever names are accepted).

use std::sync::Arc;

use api::resources::Subresource;
use api::ResourceInfo;
use serde_json::{json, Value};

use crate::registry::conversion::CustomResourceConverter;
use crate::registry::strategy::{CustomResourceStrategy, CustomVersion};
use crate::registry::Resource;

/// `(group, version, plural)` of a served resource.
pub type Served = (String, String, String);

/// Kubernetes' version priority (`version.CompareKubeAwareVersionStrings`): GA before beta before
/// alpha, higher numbers first, other strings last in alphabetical order.
pub fn version_priority(v: &str) -> (u8, i64, i64, String) {
    let parse = |s: &str| -> Option<(i64, u8, i64)> {
        let rest = s.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: i64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((major, 0, 0));
        }
        let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
            (1, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (2, n)
        } else {
            return None;
        };
        Some((major, level, num.parse().ok()?))
    };
    match parse(v) {
        Some((major, level, minor)) => (level, -major, -minor, String::new()),
        None => (3, 0, 0, v.to_string()),
    }
}

fn names(crd: &Value) -> serde_json::Map<String, Value> {
    crate::registry::strategy::accepted_names(crd)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The storage segment of a CRD's objects.
pub fn storage_segment(crd: &Value) -> String {
    let text = |p: &str| crd.pointer(p).and_then(Value::as_str).unwrap_or("");
    format!("{}.{}", text("/spec/names/plural"), text("/spec/group"))
}

/// Whether a served version's schema declares a `default` (then objects are defaulted when
/// read from storage).
pub fn has_defaults(crd: &Value) -> bool {
    served_versions(crd).into_iter().any(|v| {
        v.pointer("/schema/openAPIV3Schema")
            .is_some_and(crate::registry::strategy::has_defaults)
    })
}

/// Whether the CRD converts through a webhook.
pub fn webhook_conversion(crd: &Value) -> bool {
    crd.pointer("/spec/conversion/strategy")
        .and_then(Value::as_str)
        == Some("Webhook")
}

/// The served versions of `crd`, in version priority order (with `Webhook` conversion too: the
/// store converts through the webhook, [`crate::registry::conversion`]).
pub fn served_versions(crd: &Value) -> Vec<&Value> {
    let mut versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
                .collect()
        })
        .unwrap_or_default();
    versions.sort_by_key(|v| version_priority(v.get("name").and_then(Value::as_str).unwrap_or("")));
    versions
}

/// The resources `crd` serves under its accepted names.
pub fn resources(crd: &Value) -> Vec<Resource> {
    let accepted = names(crd);
    let text = |k: &str| {
        accepted
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let namespaced = crd.pointer("/spec/scope").and_then(Value::as_str) != Some("Cluster");
    let storage = storage_segment(crd);
    let converter = CustomResourceConverter::from_crd(crd);
    served_versions(crd)
        .into_iter()
        .map(|version| {
            let name = version.get("name").and_then(Value::as_str).unwrap_or("");
            let mut info = ResourceInfo::new(group, name, &text("kind"), &text("plural"));
            info.singular = text("singular");
            info.namespaced = namespaced;
            info.short_names = strings(accepted.get("shortNames"));
            info.categories = strings(accepted.get("categories"));
            info.list_kind = text("listKind");
            info.storage = storage.clone();
            let subresources = version.get("subresources");
            if subresources
                .and_then(|s| s.get("status"))
                .is_some_and(Value::is_object)
            {
                info = info.with_status();
            }
            if subresources
                .and_then(|s| s.get("scale"))
                .is_some_and(Value::is_object)
            {
                info = info.subresource(Subresource::scale());
            }
            let strategy = CustomResourceStrategy::new(CustomVersion::from_crd(crd, version));
            let openapi = openapi_schema(crd, version, &info);
            Resource::new(info, Arc::new(strategy))
                .with_openapi(openapi)
                .with_converter(converter.clone())
        })
        .collect()
}

/// The OpenAPI v3 schema of a version as upstream's builder publishes it: the CRD schema with
/// `apiVersion`, `kind` and `metadata` described, and the kind's group-version-kind.
fn openapi_schema(crd: &Value, version: &Value, info: &ResourceInfo) -> Value {
    let mut schema = version
        .pointer("/schema/openAPIV3Schema")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let _ = crd;
    if let Some(o) = schema.as_object_mut() {
        let props = o.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({
                "type": "string",
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
            }));
            p.insert("kind".into(), json!({
                "type": "string",
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            }));
            p.insert("metadata".into(), json!({
                "type": "object",
                "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
            }));
        }
        o.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{ "group": info.group, "version": info.version, "kind": info.kind }]),
        );
    }
    schema
}

/// The OpenAPI schema name of a custom kind (upstream's: the group reversed, `com.example.v1.Widget`).
pub fn schema_name(info: &ResourceInfo) -> String {
    let reversed: Vec<&str> = info.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), info.version, info.kind)
}

/// The `(group, version, plural)` of resources built by [`resources`].
pub fn keys(resources: &[Resource]) -> Vec<Served> {
    resources
        .iter()
        .map(|r| {
            (
                r.info.group.clone(),
                r.info.version.clone(),
                r.info.plural.clone(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_kubernetes_sorts_them() {
        let mut vs = vec![
            "v1alpha1", "foo", "v1", "v2beta1", "v2", "v1beta2", "v10", "bar",
        ];
        vs.sort_by_key(|v| version_priority(v));
        assert_eq!(
            vs,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "bar", "foo"]
        );
    }

    #[test]
    fn a_crd_serves_its_served_versions_under_its_accepted_names() {
        let crd = json!({
            "spec": {"group": "example.com", "scope": "Cluster",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                    {"name": "v2", "served": true, "storage": false,
                     "subresources": {"scale": {"specReplicasPath": ".spec.r", "statusReplicasPath": ".status.r"}}},
                    {"name": "v3", "served": false, "storage": false}]},
            "status": {"acceptedNames": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                "listKind": "WidgetList", "shortNames": ["wd"], "categories": ["all"]}},
        });
        let rs = resources(&crd);
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].info.version, "v2");
        assert!(!rs[0].info.namespaced);
        assert_eq!(rs[0].info.storage, "widgets.example.com");
        assert_eq!(rs[0].info.short_names, ["wd"]);
        assert_eq!(rs[0].info.categories, ["all"]);
        assert!(rs[0].info.subresource_named("scale").is_some());
        assert!(rs[1].info.has_status_subresource());
        assert_eq!(schema_name(&rs[1].info), "com.example.v1.Widget");
        let mut webhook = crd.clone();
        webhook["spec"]["conversion"] = json!({"strategy": "Webhook"});
        let rs = resources(&webhook);
        assert_eq!(rs.len(), 2);
        assert!(rs.iter().all(|r| r.converter().is_some()));
        assert!(resources(&crd).iter().all(|r| r.converter().is_none()));
    }
}
