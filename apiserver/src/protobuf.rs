//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`).
//!
//! Wire format: the 4-byte magic `k8s\0`, then a `runtime.Unknown` message carrying the `TypeMeta`
//! (apiVersion, kind) and the raw protobuf of the object. The raw bytes are decoded by
//! [`api::wire::proto`] with the layout of the kind's Go type (generated from the release's Go
//! struct tags, every field of every served kind) into the JSON a Go client would have sent for the
//! same struct, which the registry then treats as any JSON body. `DeleteOptions` is accepted under
//! every group-version (client-go envelopes it under the client's), and the `policy/v1beta1`
//! Eviction as the v1 one (`EvictionREST` accepts both). Kinds without a Go type here (custom
//! resources, CustomResourceDefinitions, whose schemas travel as hand-encoded JSON) are
//! [`ProtobufError::UnsupportedKind`] (the HTTP side answers 415).

use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value};

/// The protobuf media type.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The envelope magic.
pub const MAGIC: &[u8; 4] = b"k8s\0";

const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// Missing magic or undecodable `runtime.Unknown` (400).
    #[error("the protobuf envelope is invalid")]
    BadEnvelope,
    /// A kind this server does not decode from protobuf (415).
    #[error("protobuf decoding is not supported for {api_version}, Kind={kind}")]
    UnsupportedKind { api_version: String, kind: String },
    /// The raw object bytes are not a valid message of the kind (400).
    #[error("unable to decode protobuf object: {0}")]
    Decode(String),
}

/// Decodes a protobuf request body into the JSON object (with `apiVersion` and `kind`).
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    let rest = body
        .strip_prefix(MAGIC.as_slice())
        .ok_or(ProtobufError::BadEnvelope)?;
    let unknown = Unknown::decode(rest).map_err(|_| ProtobufError::BadEnvelope)?;
    let tm = unknown.type_meta.unwrap_or_default();
    let api_version = tm.api_version.unwrap_or_default();
    let kind = tm.kind.unwrap_or_default();
    if unknown
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.is_empty())
    {
        return Err(ProtobufError::Decode(
            "content encodings are not supported".into(),
        ));
    }
    let Some(msg) = schema_of(&api_version, &kind).and_then(api::wire::proto::message) else {
        return Err(ProtobufError::UnsupportedKind { api_version, kind });
    };
    let raw = unknown.raw.unwrap_or_default();
    let fields =
        api::wire::proto::decode(msg, &raw).map_err(|e| ProtobufError::Decode(e.to_string()))?;
    let mut obj = Map::with_capacity(fields.len() + 2);
    obj.insert("kind".into(), Value::String(kind));
    obj.insert("apiVersion".into(), Value::String(api_version));
    obj.extend(fields);
    Ok(Value::Object(obj))
}

/// The Go type a body of `apiVersion`/`kind` decodes into.
fn schema_of(api_version: &str, kind: &str) -> Option<&'static str> {
    match (api_version, kind) {
        (_, "DeleteOptions") => Some(DELETE_OPTIONS),
        ("policy/v1beta1", "Eviction") => Some("io.k8s.api.policy.v1.Eviction"),
        _ => api::wire::Type::of_kind(api_version, kind).map(|t| t.def().name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// The 54-byte body `kubectl create namespace foo` sent (spec Appendix A.31).
    const NS_FOO: &[u8] = b"k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12\x1b\n\x13\n\x03foo\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x00\x1a\x02\n\x00\x1a\x00\"\x00";
    /// `kubectl create configmap cm1 --from-literal=a=b` (A.32).
    const CM1: &[u8] = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12\x1d\x0a\x13\x0a\x03cm1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x06\x0a\x01a\x12\x01b\x1a\x00\"\x00";

    #[test]
    fn decodes_recorded_kubectl_bodies() {
        assert_eq!(
            decode_object(NS_FOO),
            Ok(
                json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"foo"},"spec":{},"status":{}})
            )
        );
        assert_eq!(
            decode_object(CM1),
            Ok(
                json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1"},"data":{"a":"b"}})
            )
        );
    }

    /// Bodies captured from the real `kubectl create <generator>` (v1.33, via the dispatcher).
    #[test]
    fn decodes_captured_kubectl_generator_bodies() {
        let deploy: &[u8] = b"k8s\x00\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12\xbd\x01\x0a\x1f\x0a\x03web\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12\x8b\x01\x08\x02\x12\x0c\x0a\x0a\x0a\x03app\x12\x03web\x1aq\x0a\x1c\x0a\x00\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12Q\x123\x0a\x05nginx\x12\x0anginx:1.25*\x002\x0a\x0a\x00\x10\x00\x18P\x22\x00*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x22\x02\x0a\x00(\x008\x00\x1a\x0c\x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(deploy),
            Ok(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}], "resources": {}}]}
                    },
                    "strategy": {}
                },
                "status": {}
            }))
        );
        // The decoded object is a valid create for its strategy.
        let mut obj = decode_object(deploy).unwrap_or_default();
        api::meta::set_namespace(&mut obj, "default");
        let st = crate::registry::builtin::find("apps", "deployments");
        st.iter().for_each(|st| st.prepare_for_create(&mut obj));
        assert_eq!(st.map(|st| st.validate_create(&obj)), Some(vec![]));
        let secret: &[u8] = b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\x1e\x0a\x12\x0a\x02s1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x06\x0a\x01a\x12\x01b\x1a\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(secret),
            Ok(
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"a": "Yg=="}})
            )
        );
        let docker: &[u8] = b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\x8c\x01\x0a\x13\x0a\x03reg\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12U\x0a\x11.dockerconfigjson\x12@{\x22auths\x22:{\x22r.io\x22:{\x22username\x22:\x22u\x22,\x22password\x22:\x22p\x22,\x22auth\x22:\x22dTpw\x22}}}\x1a\x1ekubernetes.io/dockerconfigjson\x1a\x00\x22\x00";
        let d = decode_object(docker).unwrap_or_default();
        assert_eq!(
            d.pointer("/type"),
            Some(&json!("kubernetes.io/dockerconfigjson"))
        );
        assert!(d.pointer("/data/.dockerconfigjson").is_some());
        let svc: &[u8] = b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12l\x0a!\x0a\x04svc1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0b\x0a\x03app\x12\x04svc1\x12C\x0a\x1b\x0a\x0780-8080\x12\x03TCP\x18P\x22\x07\x08\x00\x10\x90?\x1a\x00(\x00\x12\x0b\x0a\x03app\x12\x04svc1\x1a\x00\x22\x09ClusterIP:\x00B\x00R\x00Z\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(svc),
            Ok(json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "svc1", "labels": {"app": "svc1"}},
                "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                         "selector": {"app": "svc1"}, "type": "ClusterIP"},
                "status": {"loadBalancer": {}}
            }))
        );
        let np: &[u8] = b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12j\x0a\x1f\x0a\x03np1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03np1\x12C\x0a\x1d\x0a\x0780-8080\x12\x03TCP\x18P\x22\x07\x08\x00\x10\x90?\x1a\x00(\x80\xeb\x01\x12\x0a\x0a\x03app\x12\x03np1\x1a\x00\x22\x08NodePort:\x00B\x00R\x00Z\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        let n = decode_object(np).unwrap_or_default();
        assert_eq!(n.pointer("/spec/ports/0/nodePort"), Some(&json!(30080)));
        assert_eq!(n.pointer("/spec/type"), Some(&json!("NodePort")));
        let ext: &[u8] = b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12Z\x0a\x1f\x0a\x03ex1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03ex1\x123\x12\x0a\x0a\x03app\x12\x03ex1\x1a\x00\x22\x0cExternalName:\x00B\x00R\x0bexample.comZ\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        let e = decode_object(ext).unwrap_or_default();
        assert_eq!(e.pointer("/spec/externalName"), Some(&json!("example.com")));
        assert!(e.pointer("/spec/ports").is_none());
        let sa: &[u8] = b"k8s\x00\x0a\x14\x0a\x02v1\x12\x0eServiceAccount\x12\x15\x0a\x13\x0a\x03sa1\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(sa),
            Ok(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa1"}}))
        );
        let cm2: &[u8] = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12%\x0a\x13\x0a\x03cm2\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x06\x0a\x01x\x12\x01y\x12\x06\x0a\x01z\x12\x01w\x1a\x00\x22\x00";
        assert_eq!(
            decode_object(cm2).ok().and_then(|c| c.get("data").cloned()),
            Some(json!({"x": "y", "z": "w"}))
        );
    }

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = k8s_pb::apimachinery::pkg::runtime::Unknown {
            type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(u.encode_to_vec());
        out
    }

    #[test]
    fn decodes_a_deployment_like_kubectl_create_deployment() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let d = apps::Deployment {
            metadata: Some(meta::ObjectMeta {
                name: Some("web".into()),
                labels: labels.clone(),
                ..Default::default()
            }),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(2),
                selector: Some(meta::LabelSelector {
                    match_labels: labels.clone(),
                    match_expressions: vec![],
                }),
                template: Some(core::PodTemplateSpec {
                    metadata: Some(meta::ObjectMeta {
                        labels,
                        ..Default::default()
                    }),
                    spec: Some(core::PodSpec {
                        containers: vec![core::Container {
                            name: Some("nginx".into()),
                            image: Some("nginx:1.25".into()),
                            resources: Some(Default::default()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                }),
                strategy: Some(Default::default()),
                min_ready_seconds: Some(0),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        let got = decode_object(&envelope("apps/v1", "Deployment", d.encode_to_vec()));
        assert_eq!(
            got,
            Ok(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "resources": {}}]}},
                    "strategy": {}
                },
                "status": {}
            }))
        );
    }

    #[test]
    fn secret_data_is_base64_and_service_ports_convert() {
        let s = core::Secret {
            metadata: Some(meta::ObjectMeta {
                name: Some("s".into()),
                ..Default::default()
            }),
            data: [("k".to_string(), b"v".to_vec())].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let got = decode_object(&envelope("v1", "Secret", s.encode_to_vec()));
        assert_eq!(
            got.ok().and_then(|v| v.pointer("/data/k").cloned()),
            Some(json!("dg=="))
        );
        let svc = core::Service {
            metadata: Some(meta::ObjectMeta {
                name: Some("svc".into()),
                ..Default::default()
            }),
            spec: Some(core::ServiceSpec {
                ports: vec![core::ServicePort {
                    name: Some("80-8080".into()),
                    port: Some(80),
                    protocol: Some("TCP".into()),
                    target_port: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                        r#type: Some(0),
                        int_val: Some(8080),
                        str_val: Some(String::new()),
                    }),
                    ..Default::default()
                }],
                r#type: Some("ClusterIP".into()),
                selector: [("app".to_string(), "svc".to_string())].into(),
                ..Default::default()
            }),
            status: None,
        };
        let got =
            decode_object(&envelope("v1", "Service", svc.encode_to_vec())).unwrap_or_default();
        assert_eq!(
            got.pointer("/spec/ports/0"),
            Some(&json!({"name":"80-8080","protocol":"TCP","port":80,"targetPort":8080}))
        );
        assert_eq!(got.pointer("/spec/type"), Some(&json!("ClusterIP")));
    }

    #[test]
    fn errors() {
        assert_eq!(decode_object(b"{}"), Err(ProtobufError::BadEnvelope));
        assert_eq!(
            decode_object(b"k8s\x00\xff\xff"),
            Err(ProtobufError::BadEnvelope)
        );
        assert_eq!(
            decode_object(&envelope("example.com/v1", "Widget", vec![])),
            Err(ProtobufError::UnsupportedKind {
                api_version: "example.com/v1".into(),
                kind: "Widget".into()
            })
        );
        assert!(matches!(
            decode_object(&envelope("v1", "Namespace", vec![0xff, 0xff, 0xff])),
            Err(ProtobufError::Decode(_))
        ));
    }
}

#[cfg(test)]
#[path = "protobuf/tests.rs"]
mod kind_tests;
