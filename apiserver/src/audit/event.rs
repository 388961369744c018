//! One audit event (`audit.k8s.io/v1` `Event`) as the request path hands it to the writer, and
//! its JSON line.
//!
//! The request path does as little as it can: a [`Record`] holds reference-counted parts (the
//! request's shared [`Core`], the bodies as the `Bytes` the server already holds) and the writer
//! thread turns it into JSON, so parsing and encoding bodies never costs a request time.
//! The line has the Go type's field order and `omitempty` rules: `kind`, `apiVersion`, `level`,
//! `auditID`, `stage`, `requestURI`, `verb`, `user`, `impersonatedUser`, `sourceIPs`,
//! `userAgent`, `objectRef`, `responseStatus`, `requestObject`, `responseObject`,
//! `requestReceivedTimestamp`, `stageTimestamp` (both `MicroTime`: RFC 3339 with microseconds,
//! UTC) and `annotations` (sorted, as Go encodes a map).
//!
//! Bodies: `requestObject` and `responseObject` are the bodies as sent and as answered, in JSON
//! (YAML converted, protobuf decoded as the server decodes it); a body that does not decode
//! (a protobuf kind without a Go type here, any other media type) is left out. With `omitManagedFields`
//! the object's `metadata.managedFields` (of a list's items and a Table's rows too) are dropped.
//! A request body's `metadata` completes `objectRef` (name, namespace, uid, resourceVersion) as
//! upstream's `LogRequestObject` does, except for patches. An error's `Status` body fills
//! `responseStatus` (status, message, reason, details, code); other responses have only the code.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::policy::{Level, Stage};
use crate::authn::UserInfo;

/// What every stage of one request's event shares.
#[derive(Debug)]
pub struct Core {
    pub level: Level,
    pub audit_id: Arc<str>,
    pub request_uri: String,
    pub verb: String,
    /// The authenticated user; `None` when authentication failed (`"user":{}`).
    pub user: Option<Arc<UserInfo>>,
    pub source_ips: Vec<String>,
    pub user_agent: String,
    pub object_ref: Option<ObjectRef>,
    pub received: jiff::Timestamp,
    pub omit_managed_fields: bool,
}

/// `ObjectReference` of the event: what the request's URL names.
#[derive(Debug, Clone, Default)]
pub struct ObjectRef {
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub api_group: String,
    pub api_version: String,
    pub subresource: String,
}

/// A body the event may record, with its media type.
#[derive(Debug, Clone)]
pub struct Captured {
    pub bytes: Bytes,
    pub content_type: String,
}

/// The `responseStatus` of a stage after the request's.
#[derive(Debug, Clone, Default)]
pub struct Response {
    pub code: u16,
    /// Fixed text (a failed authentication's, a panic's) instead of the body's Status.
    pub message: Option<String>,
    /// `Failure` with `InternalError` (a panic).
    pub internal_error: bool,
    /// The response body, to read a `Status` from and (at `RequestResponse`) to record.
    pub body: Option<Captured>,
}

/// One event at one stage.
#[derive(Debug)]
pub struct Record {
    pub core: Arc<Core>,
    pub stage: Stage,
    pub stage_timestamp: jiff::Timestamp,
    pub impersonated: Option<Arc<UserInfo>>,
    pub response: Option<Response>,
    /// The request body (object-bearing verbs at `Metadata` and above).
    pub request_body: Option<Captured>,
    pub annotations: BTreeMap<String, String>,
}

impl Record {
    /// Bytes of bodies this record keeps alive while it waits for the writer.
    pub fn body_bytes(&self) -> usize {
        let req = self.request_body.as_ref().map_or(0, |b| b.bytes.len());
        let resp = self
            .response
            .as_ref()
            .and_then(|r| r.body.as_ref())
            .map_or(0, |b| b.bytes.len());
        req + resp
    }

    /// The JSON line (without its newline).
    pub fn to_json(&self) -> Value {
        let core = &self.core;
        let mut ev = Map::new();
        ev.insert("kind".into(), json!("Event"));
        ev.insert("apiVersion".into(), json!("audit.k8s.io/v1"));
        ev.insert("level".into(), json!(core.level.as_str()));
        ev.insert("auditID".into(), json!(&*core.audit_id));
        ev.insert("stage".into(), json!(self.stage.as_str()));
        ev.insert("requestURI".into(), json!(core.request_uri));
        ev.insert("verb".into(), json!(core.verb));
        let user = core
            .user
            .as_ref()
            .map_or_else(|| json!({}), |u| u.to_json());
        ev.insert("user".into(), user);
        if let Some(i) = &self.impersonated {
            ev.insert("impersonatedUser".into(), i.to_json());
        }
        if !core.source_ips.is_empty() {
            ev.insert("sourceIPs".into(), json!(core.source_ips));
        }
        if !core.user_agent.is_empty() {
            ev.insert("userAgent".into(), json!(core.user_agent));
        }
        let request_object = self
            .request_body
            .as_ref()
            .and_then(|b| decode(b, core.omit_managed_fields));
        let object_ref = object_ref(
            core.object_ref.as_ref(),
            (core.verb != "patch")
                .then_some(request_object.as_ref())
                .flatten(),
        );
        if let Some(r) = object_ref {
            ev.insert("objectRef".into(), r);
        }
        if let Some(resp) = &self.response {
            ev.insert("responseStatus".into(), response_status(resp));
        }
        if core.level >= Level::Request {
            if let Some(obj) = request_object {
                ev.insert("requestObject".into(), obj);
            }
        }
        if core.level >= Level::RequestResponse {
            let body = self.response.as_ref().and_then(|r| r.body.as_ref());
            if let Some(obj) = body.and_then(|b| decode(b, core.omit_managed_fields)) {
                ev.insert("responseObject".into(), obj);
            }
        }
        ev.insert(
            "requestReceivedTimestamp".into(),
            json!(micro_time(core.received)),
        );
        ev.insert(
            "stageTimestamp".into(),
            json!(micro_time(self.stage_timestamp)),
        );
        if !self.annotations.is_empty() {
            ev.insert("annotations".into(), json!(self.annotations));
        }
        Value::Object(ev)
    }
}

/// `metav1.MicroTime` in JSON: RFC 3339, six fractional digits, UTC.
pub fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// The body as JSON (protobuf decoded as the server decodes request bodies), or `None`.
fn decode(body: &Captured, omit_managed_fields: bool) -> Option<Value> {
    let media = body.content_type.split(';').next().unwrap_or("").trim();
    let mut value: Value = if media.ends_with("yaml") {
        serde_yaml::from_slice(&body.bytes).ok()?
    } else if media.is_empty() || media.ends_with("json") {
        serde_json::from_slice(&body.bytes).ok()?
    } else if media == crate::protobuf::PROTOBUF_MEDIA_TYPE {
        crate::protobuf::decode_object(&body.bytes).ok()?
    } else {
        return None;
    };
    if omit_managed_fields {
        drop_managed_fields(&mut value);
    }
    Some(value)
}

/// Removes `metadata.managedFields` of an object, of a list's items, and of a Table's rows.
fn drop_managed_fields(v: &mut Value) {
    fn of_object(v: &mut Value) {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
    }
    of_object(v);
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(of_object);
    }
    if let Some(rows) = v.get_mut("rows").and_then(Value::as_array_mut) {
        for row in rows {
            if let Some(o) = row.get_mut("object") {
                of_object(o);
            }
        }
    }
}

/// `objectRef`: the URL's reference, completed from the request object's metadata.
fn object_ref(from_url: Option<&ObjectRef>, request_object: Option<&Value>) -> Option<Value> {
    let meta = request_object.and_then(|o| o.get("metadata"));
    if from_url.is_none() && meta.is_none() {
        return None;
    }
    let base = from_url.cloned().unwrap_or_default();
    let field = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let or_meta = |own: &str, k: &str| {
        if own.is_empty() {
            field(k)
        } else {
            own.to_string()
        }
    };
    let mut r = Map::new();
    let mut put = |k: &str, v: String| {
        if !v.is_empty() {
            r.insert(k.into(), Value::String(v));
        }
    };
    put("resource", base.resource.clone());
    put("namespace", or_meta(&base.namespace, "namespace"));
    put("name", or_meta(&base.name, "name"));
    put("uid", field("uid"));
    put("apiGroup", base.api_group.clone());
    put("apiVersion", base.api_version.clone());
    put("resourceVersion", field("resourceVersion"));
    put("subresource", base.subresource.clone());
    Some(Value::Object(r))
}

/// `responseStatus`: the code, and a Status body's bounded fields.
fn response_status(resp: &Response) -> Value {
    let mut s = Map::new();
    s.insert("metadata".into(), json!({}));
    if resp.internal_error {
        s.insert("status".into(), json!("Failure"));
    }
    if let Some(m) = &resp.message {
        s.insert("message".into(), json!(m));
        if resp.internal_error {
            s.insert("reason".into(), json!("InternalError"));
        }
    } else if let Some(status) = resp.body.as_ref().and_then(status_of) {
        for k in ["status", "message", "reason", "details"] {
            if let Some(v) = status.get(k).filter(|v| !is_empty(v)) {
                s.insert(k.into(), v.clone());
            }
        }
    }
    s.insert("code".into(), json!(resp.code));
    Value::Object(s)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The body as a `Status`, if it is one.
fn status_of(body: &Captured) -> Option<Value> {
    let v: Value = serde_json::from_slice(&body.bytes).ok()?;
    (v.get("kind").and_then(Value::as_str) == Some("Status")).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(level: Level, verb: &str) -> Arc<Core> {
        Arc::new(Core {
            level,
            audit_id: "id-1".into(),
            request_uri: "/api/v1/namespaces/default/configmaps".into(),
            verb: verb.into(),
            user: Some(Arc::new(UserInfo::admin())),
            source_ips: vec!["127.0.0.1".into()],
            user_agent: "kubectl/v1.33.0".into(),
            object_ref: Some(ObjectRef {
                resource: "configmaps".into(),
                namespace: "default".into(),
                api_version: "v1".into(),
                ..Default::default()
            }),
            received: jiff::Timestamp::from_microsecond(1_765_000_000_123_456).unwrap(),
            omit_managed_fields: true,
        })
    }

    fn json_body(v: Value) -> Option<Captured> {
        Some(Captured {
            bytes: Bytes::from(v.to_string()),
            content_type: "application/json".into(),
        })
    }

    #[test]
    fn a_create_at_request_response_has_go_field_order_and_both_objects() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "managedFields": [{"manager": "x"}]}});
        let r = Record {
            core: core(Level::RequestResponse, "create"),
            stage: Stage::ResponseComplete,
            stage_timestamp: jiff::Timestamp::from_microsecond(1_765_000_000_200_000).unwrap(),
            impersonated: None,
            response: Some(Response {
                code: 201,
                body: json_body(obj.clone()),
                ..Default::default()
            }),
            request_body: json_body(obj),
            annotations: BTreeMap::from([(
                "authorization.k8s.io/decision".to_string(),
                "allow".to_string(),
            )]),
        };
        let v = r.to_json();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "kind",
                "apiVersion",
                "level",
                "auditID",
                "stage",
                "requestURI",
                "verb",
                "user",
                "sourceIPs",
                "userAgent",
                "objectRef",
                "responseStatus",
                "requestObject",
                "responseObject",
                "requestReceivedTimestamp",
                "stageTimestamp",
                "annotations"
            ]
        );
        assert_eq!(
            v["objectRef"],
            json!({"resource": "configmaps", "namespace": "default", "name": "a", "apiVersion": "v1"})
        );
        assert_eq!(v["responseStatus"], json!({"metadata": {}, "code": 201}));
        assert_eq!(v["requestObject"]["metadata"], json!({"name": "a"}));
        assert_eq!(v["requestReceivedTimestamp"], "2025-12-06T05:46:40.123456Z");
        assert_eq!(v["stageTimestamp"], "2025-12-06T05:46:40.200000Z");
    }

    #[test]
    fn an_error_status_fills_the_response_status_and_metadata_records_no_objects() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": "configmaps \"a\" not found", "reason": "NotFound",
            "details": {"name": "a", "kind": "configmaps"}, "code": 404});
        let r = Record {
            core: core(Level::Metadata, "get"),
            stage: Stage::ResponseComplete,
            stage_timestamp: jiff::Timestamp::now(),
            impersonated: Some(Arc::new(UserInfo {
                username: "bob".into(),
                ..Default::default()
            })),
            response: Some(Response {
                code: 404,
                body: json_body(status),
                ..Default::default()
            }),
            request_body: None,
            annotations: BTreeMap::new(),
        };
        let v = r.to_json();
        assert_eq!(
            v["responseStatus"],
            json!({"metadata": {}, "status": "Failure", "message": "configmaps \"a\" not found",
                "reason": "NotFound", "details": {"name": "a", "kind": "configmaps"}, "code": 404})
        );
        assert_eq!(v["impersonatedUser"], json!({"username": "bob"}));
        assert!(v.get("responseObject").is_none() && v.get("annotations").is_none());
    }

    #[test]
    fn undecodable_protobuf_is_left_out_and_yaml_is_converted() {
        let pb = Captured {
            bytes: Bytes::from_static(b"k8s\0\x0a"),
            content_type: "application/vnd.kubernetes.protobuf".into(),
        };
        assert_eq!(decode(&pb, false), None);
        let yaml = Captured {
            bytes: Bytes::from_static(b"kind: ConfigMap\nmetadata:\n  name: y\n"),
            content_type: "application/apply-patch+yaml".into(),
        };
        assert_eq!(
            decode(&yaml, false),
            Some(json!({"kind": "ConfigMap", "metadata": {"name": "y"}}))
        );
    }
}
