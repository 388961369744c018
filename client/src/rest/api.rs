//! Typed access to one resource type: `Api<K>` builds Kubernetes REST paths from the `k8s-openapi`
//! resource traits and (de)serializes `K`.
//!
//! Paths: core group → `/api/v1`, others → `/apis/{group}/{version}`; then `/namespaces/{ns}` when the
//! `Api` is namespaced, then the plural. An `Api` without namespace lists/watches across all
//! namespaces; its `create` uses the object's own `metadata.namespace`.
//!
//! Verbs and their retry class (see [`client`](super::client)): get/list/watch/replace/delete are
//! idempotent and retried on 5xx; create/patch/subresource POSTs only on 429 and connection refused.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::object::Object;
use crate::rest::client::{Client, Request};
use crate::rest::resource::ApiResource;
use crate::rest::watch::{decode_body, WatchStream};

/// The bounds of every object an [`Api`] sends and receives: typed k8s-openapi objects and
/// [`DynamicObject`](crate::dynamic::DynamicObject)s.
pub trait ApiObject: Object + Clone + DeserializeOwned + Serialize + Send + Sync + 'static {}
impl<K> ApiObject for K where
    K: Object + Clone + DeserializeOwned + Serialize + Send + Sync + 'static
{
}

/// The bounds every typed resource in this crate satisfies: an [`ApiObject`] whose type names
/// its group, version, kind and plural.
pub trait Resource:
    k8s_openapi::Resource<Scope: 'static> + k8s_openapi::Metadata<Ty = ObjectMeta> + ApiObject
{
}
impl<K> Resource for K where
    K: k8s_openapi::Resource<Scope: 'static> + k8s_openapi::Metadata<Ty = ObjectMeta> + ApiObject
{
}

/// Grace added to a watch's `timeoutSeconds` for the client-side request timeout, so a dead
/// connection is detected even if the server never closes it (kube-rs uses +5 s idle; we bound the
/// whole request).
pub const WATCH_CLIENT_GRACE: Duration = Duration::from_secs(30);

/// Options of LIST and WATCH.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<u32>,
    pub continue_token: Option<String>,
    pub timeout_seconds: Option<u32>,
    pub allow_bookmarks: bool,
    pub resource_version: Option<String>,
}

impl ListParams {
    pub fn labels(mut self, s: impl Into<String>) -> Self {
        self.label_selector = Some(s.into());
        self
    }
    pub fn fields(mut self, s: impl Into<String>) -> Self {
        self.field_selector = Some(s.into());
        self
    }
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = Some(n);
        self
    }
    fn query(&self) -> Vec<(String, String)> {
        let mut q = Vec::new();
        let mut push = |k: &str, v: String| q.push((k.to_string(), v));
        if let Some(s) = &self.label_selector {
            push("labelSelector", s.clone());
        }
        if let Some(s) = &self.field_selector {
            push("fieldSelector", s.clone());
        }
        if let Some(n) = self.limit {
            push("limit", n.to_string());
        }
        if let Some(c) = &self.continue_token {
            push("continue", c.clone());
        }
        if let Some(t) = self.timeout_seconds {
            push("timeoutSeconds", t.to_string());
        }
        q
    }
}

/// One page of a LIST.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectList<K> {
    pub items: Vec<K>,
    /// `metadata.resourceVersion` of the list: the store revision it was read at.
    pub resource_version: String,
    /// `metadata.continue`: present when more pages follow.
    pub continue_token: Option<String>,
}

#[derive(Deserialize)]
struct RawList<K> {
    // Go servers may encode an empty list as `"items": null`.
    #[serde(default = "none")]
    items: Option<Vec<K>>,
    #[serde(default)]
    metadata: RawListMeta,
}

#[derive(Deserialize, Default)]
struct RawListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_: Option<String>,
}

/// A patch body and its content type.
#[derive(Clone, Debug, PartialEq)]
pub enum Patch {
    /// `application/merge-patch+json` (RFC 7386).
    Merge(serde_json::Value),
    /// `application/strategic-merge-patch+json`.
    Strategic(serde_json::Value),
    /// `application/json-patch+json` (RFC 6902), the value is the operations array.
    Json(serde_json::Value),
    /// Server-side apply, `application/apply-patch+yaml` (JSON is valid YAML).
    Apply {
        body: serde_json::Value,
        field_manager: String,
        force: bool,
    },
}

impl Patch {
    fn content_type(&self) -> &'static str {
        match self {
            Patch::Merge(_) => "application/merge-patch+json",
            Patch::Strategic(_) => "application/strategic-merge-patch+json",
            Patch::Json(_) => "application/json-patch+json",
            Patch::Apply { .. } => "application/apply-patch+yaml",
        }
    }
    fn body(&self) -> &serde_json::Value {
        match self {
            Patch::Merge(v) | Patch::Strategic(v) | Patch::Json(v) => v,
            Patch::Apply { body, .. } => body,
        }
    }
}

/// `DeleteOptions.propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PropagationPolicy {
    Orphan,
    Background,
    Foreground,
}

/// `DeleteOptions.preconditions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// Body of a DELETE (`meta/v1 DeleteOptions`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<PropagationPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
}

/// REST access to one resource, optionally within one namespace: typed (`K` a k8s-openapi type)
/// or dynamic (`K` = [`DynamicObject`](crate::dynamic::DynamicObject), client-go's
/// `dynamic.NamespaceableResourceInterface`).
pub struct Api<K> {
    client: Client,
    /// Where requests go (group, version, plural) and what the objects are called in errors.
    resource: Arc<ApiResource>,
    namespace: Option<String>,
    /// Lists and watches cut `metadata.managedFields` out before decoding (see
    /// [`without_managed_fields`](Api::without_managed_fields)).
    strip_managed_fields: bool,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Api {
            client: self.client.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            strip_managed_fields: self.strip_managed_fields,
            _k: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Api<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("resource", &self.resource.plural)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl Client {
    /// Typed access within `namespace` (`None`: cluster-scoped kinds, or all namespaces).
    pub fn api<K: Resource>(&self, namespace: Option<&str>) -> Api<K> {
        Api {
            client: self.clone(),
            resource: Arc::new(ApiResource::of::<K>()),
            namespace: namespace.map(str::to_string),
            strip_managed_fields: false,
            _k: PhantomData,
        }
    }
    /// Typed access across all namespaces.
    pub fn all<K: Resource>(&self) -> Api<K> {
        self.api(None)
    }

    /// Dynamic access to `resource` within `namespace` (`None`: cluster-scoped resources, or all
    /// namespaces): client-go's `dynamic.Interface.Resource(gvr).Namespace(ns)`. The resource
    /// usually comes from a [`RestMapper`](crate::dynamic::RestMapper).
    pub fn dynamic(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
    ) -> Api<crate::dynamic::DynamicObject> {
        self.api_with(resource, namespace)
    }

    /// Access to `resource` with objects decoded as `K` (a typed view of a resource the type
    /// does not name, e.g. a custom resource's own Rust struct).
    pub fn api_with<K: ApiObject>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
    ) -> Api<K> {
        Api {
            client: self.clone(),
            resource: Arc::new(resource.clone()),
            namespace: namespace.map(str::to_string),
            strip_managed_fields: false,
            _k: PhantomData,
        }
    }
}

fn none<T>() -> Option<T> {
    None
}

/// A response decoded no further than its `metadata` (the rest is skipped by the parser).
#[derive(Deserialize)]
struct MetadataOnly {
    #[serde(
        default,
        deserialize_with = "crate::rest::strip::meta_without_managed_fields"
    )]
    metadata: ObjectMeta,
}

/// The `metadata` of a response object, without its managedFields (callers want the name or the
/// resourceVersion; the entries are a large part of the text and would be built for nothing).
fn decode_metadata(what: &str, bytes: &[u8]) -> Result<ObjectMeta> {
    let m: MetadataOnly = decode(what, bytes)?;
    Ok(m.metadata)
}

fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Decode {
        what: what.to_string(),
        source: e,
    })
}

fn encode<T: Serialize>(what: &str, v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| Error::Decode {
        what: what.to_string(),
        source: e,
    })
}

impl<K: ApiObject> Api<K> {
    /// This `Api`'s LISTs and WATCHes deliver objects without `metadata.managedFields`: client-go's
    /// `TransformStripManagedFields`, for caches whose readers never look at the entries (every
    /// controller here). The entries are cut from the text before decoding, so they cost neither
    /// the decoding nor the memory. Objects written back from such a cache carry no
    /// `managedFields`, which the apiserver reads as "keep the stored entries".
    pub fn without_managed_fields(mut self) -> Self {
        self.strip_managed_fields = true;
        self
    }

    /// The namespace this `Api` is bound to.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The `Client` this `Api` sends through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The resource this `Api` addresses.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    fn collection_path(&self, namespace: Option<&str>) -> String {
        self.resource.collection_path(namespace)
    }

    fn item_path(&self, name: &str) -> String {
        format!(
            "{}/{}",
            self.collection_path(self.namespace.as_deref()),
            name
        )
    }

    pub async fn get(&self, name: &str) -> Result<K> {
        let req = Request::new(Method::GET, self.item_path(name));
        decode(&self.resource.kind, &self.client.send_bytes(&req).await?)
    }

    /// `get` with absence as a value: `Ok(None)` on 404.
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>> {
        match self.get(name).await {
            Ok(o) => Ok(Some(o)),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One LIST request (one page when `limit` is set).
    pub async fn list(&self, p: &ListParams) -> Result<ObjectList<K>> {
        let mut req = Request::new(Method::GET, self.collection_path(self.namespace.as_deref()));
        req.query = p.query();
        if let Some(rv) = &p.resource_version {
            req.query.push(("resourceVersion".into(), rv.clone()));
        }
        let body = self.client.send_bytes(&req).await?;
        let body = if self.strip_managed_fields {
            crate::rest::strip::list_without_managed_fields(&body)
        } else {
            std::borrow::Cow::Borrowed(body.as_ref())
        };
        let raw: RawList<K> = match decode(&self.resource.kind, &body) {
            Ok(raw) => raw,
            // One object that does not decode must not fail the whole list (and wedge the
            // informer relisting it): decode item by item, skipping the bad ones.
            Err(whole) => match serde_json::from_slice::<RawList<serde_json::Value>>(&body) {
                Ok(raw) => RawList {
                    items: Some(crate::rest::undecodable::decode_items(
                        &self.resource.kind,
                        raw.items.unwrap_or_default(),
                    )),
                    metadata: raw.metadata,
                },
                Err(_) => return Err(whole),
            },
        };
        let mut items = raw.items.unwrap_or_default();
        if self.strip_managed_fields {
            // A no-op unless the text was laid out in a way the cutter does not follow.
            for o in &mut items {
                o.meta_mut().managed_fields = None;
            }
        }
        Ok(ObjectList {
            items,
            resource_version: raw.metadata.resource_version.unwrap_or_default(),
            continue_token: raw.metadata.continue_.filter(|c| !c.is_empty()),
        })
    }

    /// Opens a WATCH from `resource_version` (`p.resource_version` is ignored).
    pub async fn watch(&self, p: &ListParams, resource_version: &str) -> Result<WatchStream<K>> {
        let mut req = Request::new(Method::GET, self.collection_path(self.namespace.as_deref()));
        let mut p = p.clone();
        p.limit = None;
        p.continue_token = None;
        req.query = p.query();
        req.query.push(("watch".into(), "true".into()));
        req.query
            .push(("resourceVersion".into(), resource_version.to_string()));
        if p.allow_bookmarks {
            req.query
                .push(("allowWatchBookmarks".into(), "true".into()));
        }
        // No timeoutSeconds: the server's own limit applies; bound the client side generously.
        let secs = u64::from(p.timeout_seconds.unwrap_or(1800));
        req.timeout = Some(Duration::from_secs(secs) + WATCH_CLIENT_GRACE);
        let resp = self.client.send(&req).await?;
        Ok(decode_body(resp.bytes_stream(), self.strip_managed_fields))
    }

    pub async fn create(&self, obj: &K) -> Result<K> {
        decode(&self.resource.kind, &self.send_create(obj).await?)
    }

    /// [`create`](Self::create) for a writer that needs only the created object's metadata (its
    /// generated name): the response is decoded no further than `metadata`, without
    /// managedFields.
    pub async fn create_metadata(&self, obj: &K) -> Result<ObjectMeta> {
        decode_metadata(&self.resource.kind, &self.send_create(obj).await?)
    }

    /// POST of `obj` to its collection; the raw response body.
    async fn send_create(&self, obj: &K) -> Result<bytes::Bytes> {
        let ns = self
            .namespace
            .clone()
            .or_else(|| obj.meta().namespace.clone().filter(|n| !n.is_empty()));
        let mut req = Request::new(Method::POST, self.collection_path(ns.as_deref()));
        req.body = Some((encode(&self.resource.kind, obj)?, "application/json"));
        self.client.send_bytes(&req).await
    }

    pub async fn replace(&self, name: &str, obj: &K) -> Result<K> {
        let mut req = Request::new(Method::PUT, self.item_path(name));
        req.body = Some((encode(&self.resource.kind, obj)?, "application/json"));
        decode(&self.resource.kind, &self.client.send_bytes(&req).await?)
    }

    pub async fn replace_status(&self, name: &str, obj: &K) -> Result<K> {
        decode(
            &self.resource.kind,
            &self.send_replace_status(name, obj).await?,
        )
    }

    /// [`replace_status`](Self::replace_status) for a writer that needs only the stored object's
    /// metadata (its new resourceVersion): the response is decoded no further than `metadata`,
    /// without managedFields.
    pub async fn replace_status_metadata(&self, name: &str, obj: &K) -> Result<ObjectMeta> {
        decode_metadata(
            &self.resource.kind,
            &self.send_replace_status(name, obj).await?,
        )
    }

    /// PUT of `obj` to the `status` subresource; the raw response body.
    async fn send_replace_status(&self, name: &str, obj: &K) -> Result<bytes::Bytes> {
        let mut req = Request::new(Method::PUT, format!("{}/status", self.item_path(name)));
        req.body = Some((encode(&self.resource.kind, obj)?, "application/json"));
        self.client.send_bytes(&req).await
    }

    fn patch_request(&self, path: String, patch: &Patch) -> Result<Request> {
        let mut req = Request::new(Method::PATCH, path);
        req.body = Some((encode("patch", patch.body())?, patch.content_type()));
        if let Patch::Apply {
            field_manager,
            force,
            ..
        } = patch
        {
            req.query
                .push(("fieldManager".into(), field_manager.clone()));
            if *force {
                req.query.push(("force".into(), "true".into()));
            }
        }
        Ok(req)
    }

    pub async fn patch(&self, name: &str, patch: &Patch) -> Result<K> {
        let req = self.patch_request(self.item_path(name), patch)?;
        decode(&self.resource.kind, &self.client.send_bytes(&req).await?)
    }

    pub async fn patch_status(&self, name: &str, patch: &Patch) -> Result<K> {
        let req = self.patch_request(format!("{}/status", self.item_path(name)), patch)?;
        decode(&self.resource.kind, &self.client.send_bytes(&req).await?)
    }

    /// DELETE with options. The response (object or `Status`) is not decoded.
    pub async fn delete(&self, name: &str, opts: &DeleteParams) -> Result<()> {
        let mut req = Request::new(Method::DELETE, self.item_path(name));
        req.body = Some((encode("DeleteOptions", opts)?, "application/json"));
        self.client.send_bytes(&req).await.map(|_| ())
    }

    /// GET of a subresource, e.g. `deployments/{name}/scale`, undecoded.
    pub async fn get_subresource(&self, name: &str, sub: &str) -> Result<serde_json::Value> {
        let req = Request::new(Method::GET, format!("{}/{}", self.item_path(name), sub));
        decode(sub, &self.client.send_bytes(&req).await?)
    }

    /// POST to a subresource, e.g. `pods/{name}/binding`.
    pub async fn create_subresource<B: Serialize>(
        &self,
        name: &str,
        sub: &str,
        body: &B,
    ) -> Result<serde_json::Value> {
        let mut req = Request::new(Method::POST, format!("{}/{}", self.item_path(name), sub));
        req.body = Some((encode(sub, body)?, "application/json"));
        let bytes = self.client.send_bytes(&req).await?;
        if bytes.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        decode(sub, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_metadata_is_objectmeta_without_entries() {
        let meta = serde_json::json!({
            "name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "9",
            "generateName": "p-", "generation": 2, "selfLink": "/x",
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "deletionTimestamp": "2024-01-01T00:01:00Z", "deletionGracePeriodSeconds": 30,
            "labels": {"a": "1"}, "annotations": {"b": "2"}, "finalizers": ["f"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                "name": "rc", "uid": "r", "controller": true}],
        });
        let mut with_entries = meta.clone();
        with_entries["managedFields"] = serde_json::json!([{"manager": "m",
            "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]);
        let body = serde_json::json!({"kind": "Pod", "metadata": with_entries, "spec": {}});
        let got = decode_metadata("Pod", body.to_string().as_bytes()).unwrap();
        let want: ObjectMeta = serde_json::from_value(meta).unwrap();
        assert_eq!(got, want);
        // No metadata at all: the empty one.
        assert_eq!(
            decode_metadata("Pod", b"{}").unwrap(),
            ObjectMeta::default()
        );
    }
}
