//! `DynamicObject`: any Kubernetes object as JSON with its `apiVersion`, `kind` and `metadata`
//! (client-go's `unstructured.Unstructured`, kube-rs's `DynamicObject`).
//!
//! `metadata` is decoded into `ObjectMeta`, so the informer machinery (keys, namespace index,
//! label selectors, resourceVersions) reads it as it reads typed objects; every other top-level
//! field (`spec`, `status`, `data`, …) stays JSON in `data`, in the order it arrived. Encoding
//! writes `apiVersion`, `kind`, `metadata` (in `ObjectMeta`'s field order), then `data`, so an
//! object read and written back keeps every field (nothing is pruned or defaulted on the
//! client; a metadata field `ObjectMeta` does not know is dropped, as client-go's typed
//! `ObjectMeta` accessors drop it).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{self, DeserializeOwned, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::object::Object;
use crate::rest::{ApiResource, GroupVersionKind};

/// An object of any kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DynamicObject {
    /// `apiVersion` (`""` when the body had none).
    pub api_version: String,
    /// `kind` (`""` when the body had none).
    pub kind: String,
    pub metadata: ObjectMeta,
    /// Every other top-level field.
    pub data: Map<String, Value>,
}

impl DynamicObject {
    /// An empty object of `resource`'s kind named `name`.
    pub fn new(name: impl Into<String>, resource: &ApiResource) -> Self {
        DynamicObject {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            data: Map::new(),
        }
    }

    /// In namespace `ns`.
    pub fn within(mut self, ns: impl Into<String>) -> Self {
        self.metadata.namespace = Some(ns.into());
        self
    }

    /// With top-level field `field` (e.g. `spec`) set to `value`.
    pub fn with(mut self, field: impl Into<String>, value: Value) -> Self {
        self.data.insert(field.into(), value);
        self
    }

    /// The object's group, version and kind, from `apiVersion` and `kind`.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::from_api_version(&self.api_version, self.kind.clone())
    }

    /// `metadata.name` (`""` when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `metadata.namespace`, when set and not empty.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref().filter(|n| !n.is_empty())
    }

    /// A top-level field, e.g. `spec`.
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.data.get(field)
    }

    /// A nested value by JSON pointer below the top level, e.g. `/spec/replicas`.
    pub fn pointer(&self, pointer: &str) -> Option<&Value> {
        let rest = pointer.strip_prefix('/')?;
        let (first, tail) = match rest.split_once('/') {
            Some((f, t)) => (f, Some(t)),
            None => (rest, None),
        };
        let top = self.data.get(first)?;
        match tail {
            Some(t) => top.pointer(&format!("/{t}")),
            None => Some(top),
        }
    }

    /// The object as JSON.
    pub fn to_value(&self) -> Value {
        // Serializing strings, maps and ObjectMeta into a Value cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The object decoded as `T` (e.g. a custom resource's own Rust type).
    pub fn try_parse<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.to_value()).map_err(|e| Error::Decode {
            what: self.kind.clone(),
            source: e,
        })
    }

    /// A typed object as a `DynamicObject`.
    pub fn from_typed<T: Serialize>(obj: &T) -> Result<Self> {
        let decode = |e| Error::Decode {
            what: std::any::type_name::<T>().to_string(),
            source: e,
        };
        let v = serde_json::to_value(obj).map_err(decode)?;
        serde_json::from_value(v).map_err(decode)
    }
}

impl Object for DynamicObject {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

const API_VERSION: &str = "apiVersion";
const KIND: &str = "kind";
const METADATA: &str = "metadata";

impl Serialize for DynamicObject {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if !self.api_version.is_empty() {
            m.serialize_entry(API_VERSION, &self.api_version)?;
        }
        if !self.kind.is_empty() {
            m.serialize_entry(KIND, &self.kind)?;
        }
        m.serialize_entry(METADATA, &self.metadata)?;
        for (k, v) in &self.data {
            if k != API_VERSION && k != KIND && k != METADATA {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for DynamicObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DynamicObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<DynamicObject, A::Error> {
                let mut o = DynamicObject::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        API_VERSION => {
                            o.api_version = map.next_value::<Option<String>>()?.unwrap_or_default()
                        }
                        KIND => o.kind = map.next_value::<Option<String>>()?.unwrap_or_default(),
                        METADATA => {
                            o.metadata = map.next_value::<Option<ObjectMeta>>()?.unwrap_or_default()
                        }
                        _ => {
                            let v: Value = map.next_value()?;
                            if o.data.insert(key.clone(), v).is_some() {
                                return Err(de::Error::custom(format!("duplicate field {key:?}")));
                            }
                        }
                    }
                }
                Ok(o)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn round_trips_in_order_with_metadata_decoded() -> Result<()> {
        let text = r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"labels":{"a":"b"},"name":"w","namespace":"ns","resourceVersion":"7"},"spec":{"size":3,"b":[1,2]},"status":{"ok":true}}"#;
        let o: DynamicObject = serde_json::from_str(text).map_err(|e| Error::Decode {
            what: "w".into(),
            source: e,
        })?;
        assert_eq!(
            o.gvk(),
            GroupVersionKind::new("example.com", "v1", "Widget")
        );
        assert_eq!(o.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(o.namespace(), Some("ns"));
        assert_eq!(o.pointer("/spec/size"), Some(&json!(3)));
        assert_eq!(o.pointer("/status"), Some(&json!({"ok": true})));
        assert_eq!(o.pointer("/spec/missing"), None);
        assert_eq!(serde_json::to_string(&o).ok().as_deref(), Some(text));
        Ok(())
    }

    #[test]
    fn typed_conversions_and_bad_input() -> Result<()> {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("c".into());
        cm.data = Some([("k".to_string(), "v".to_string())].into());
        let mut typed = serde_json::to_value(&cm).unwrap_or_default();
        typed["apiVersion"] = json!("v1");
        typed["kind"] = json!("ConfigMap");
        let d: DynamicObject = serde_json::from_value(typed).map_err(|e| Error::Decode {
            what: "c".into(),
            source: e,
        })?;
        assert_eq!(d.kind, "ConfigMap");
        let back: ConfigMap = d.try_parse()?;
        assert_eq!(back.data, cm.data);
        // k8s-openapi writes apiVersion and kind itself.
        let d = DynamicObject::from_typed(&cm)?;
        assert_eq!(
            (d.api_version.as_str(), d.kind.as_str()),
            ("v1", "ConfigMap")
        );
        // Not an object, or metadata of the wrong shape: decode errors, not panics.
        assert!(serde_json::from_str::<DynamicObject>("[1]").is_err());
        assert!(serde_json::from_str::<DynamicObject>(r#"{"metadata":3}"#).is_err());
        assert!(serde_json::from_str::<DynamicObject>(r#"{"spec":1,"spec":2}"#).is_err());
        // Nulls read as absent.
        let n: DynamicObject = serde_json::from_str(r#"{"apiVersion":null,"metadata":null}"#)
            .map_err(|e| Error::Decode {
                what: "n".into(),
                source: e,
            })?;
        assert_eq!(n, DynamicObject::default());
        Ok(())
    }
}
