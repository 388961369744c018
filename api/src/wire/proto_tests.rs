//! The decoder against messages encoded by k8s-pb's prost types (an independent encoder of the
//! same `generated.proto`), with the JSON Go's encoder writes for the decoded struct.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::{json, Value};

use super::*;

fn decode_as(name: &str, bytes: &[u8]) -> Value {
    Value::Object(decode(message(name).unwrap(), bytes).unwrap())
}

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

#[test]
fn a_pod_decodes_as_go_writes_it() {
    let pod = core::Pod {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            namespace: s("default"),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            creation_timestamp: Some(meta::Time {
                seconds: Some(1_700_000_000),
                nanos: Some(5),
            }),
            ..Default::default()
        }),
        spec: Some(core::PodSpec {
            volumes: vec![core::Volume {
                name: s("scratch"),
                volume_source: Some(core::VolumeSource {
                    empty_dir: Some(core::EmptyDirVolumeSource::default()),
                    ..Default::default()
                }),
            }],
            containers: vec![core::Container {
                name: s("c"),
                image: s("nginx"),
                ports: vec![core::ContainerPort {
                    container_port: Some(80),
                    ..Default::default()
                }],
                resources: Some(core::ResourceRequirements {
                    limits: [(
                        "cpu".to_owned(),
                        k8s_pb::apimachinery::pkg::api::resource::Quantity { string: s("500m") },
                    )]
                    .into(),
                    ..Default::default()
                }),
                security_context: Some(core::SecurityContext {
                    privileged: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            // Go writes non-pointer fields even when zero: they must vanish under omitempty.
            host_network: Some(false),
            node_name: s(""),
            tolerations: vec![core::Toleration {
                key: s("k"),
                toleration_seconds: Some(0),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let got = decode_as("io.k8s.api.core.v1.Pod", &pod.encode_to_vec());
    assert_eq!(
        got,
        json!({
            "metadata": {
                "name": "web", "namespace": "default",
                "creationTimestamp": "2023-11-14T22:13:20Z",
                "labels": {"app": "web"}
            },
            "spec": {
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "containers": [{
                    "name": "c", "image": "nginx",
                    "ports": [{"containerPort": 80}],
                    "resources": {"limits": {"cpu": "500m"}},
                    "securityContext": {"privileged": false}
                }],
                "tolerations": [{"key": "k", "tolerationSeconds": 0}]
            },
            "status": {}
        })
    );
}

#[test]
fn bytes_are_base64_and_maps_sorted() {
    let secret = core::Secret {
        metadata: Some(meta::ObjectMeta {
            name: s("s"),
            ..Default::default()
        }),
        data: [
            ("z".to_owned(), b"\x00\xff".to_vec()),
            ("a".to_owned(), b"hi".to_vec()),
        ]
        .into(),
        r#type: s("Opaque"),
        ..Default::default()
    };
    let got = decode_as("io.k8s.api.core.v1.Secret", &secret.encode_to_vec());
    assert_eq!(
        got,
        json!({
            "metadata": {"name": "s"},
            "data": {"a": "aGk=", "z": "AP8="},
            "type": "Opaque"
        })
    );
    let keys: Vec<_> = got["data"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["a", "z"]);
}

#[test]
fn int_or_string_and_required_fields() {
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
    let svc = core::Service {
        spec: Some(core::ServiceSpec {
            ports: vec![
                core::ServicePort {
                    port: Some(80),
                    target_port: Some(IntOrString {
                        r#type: Some(1),
                        str_val: s("http"),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                core::ServicePort {
                    port: Some(0),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode_as("io.k8s.api.core.v1.Service", &svc.encode_to_vec());
    // `port` has no omitempty (kept at 0); targetPort is a struct (never omitted, 0 when unset).
    assert_eq!(
        got["spec"]["ports"],
        json!([{"port": 80, "targetPort": "http"}, {"port": 0, "targetPort": 0}])
    );
    assert_eq!(got["metadata"], json!({}));
}

#[test]
fn named_lists_and_string_list_maps() {
    use k8s_pb::api::authorization::v1 as authz;
    let sar = authz::SubjectAccessReview {
        spec: Some(authz::SubjectAccessReviewSpec {
            user: s("alice"),
            extra: [(
                "scopes".to_owned(),
                authz::ExtraValue {
                    items: vec!["a".into(), "b".into()],
                },
            )]
            .into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode_as(
        "io.k8s.api.authorization.v1.SubjectAccessReview",
        &sar.encode_to_vec(),
    );
    assert_eq!(got["spec"]["user"], "alice");
    assert_eq!(got["spec"]["extra"], json!({"scopes": ["a", "b"]}));
}

#[test]
fn micro_time_keeps_microseconds() {
    use k8s_pb::api::coordination::v1 as coord;
    let lease = coord::Lease {
        spec: Some(coord::LeaseSpec {
            holder_identity: s("n1"),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_700_000_000),
                nanos: Some(123_456_789),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got = decode_as("io.k8s.api.coordination.v1.Lease", &lease.encode_to_vec());
    assert_eq!(got["spec"]["renewTime"], "2023-11-14T22:13:20.123456Z");
    assert_eq!(got["spec"]["holderIdentity"], "n1");
}

#[test]
fn broken_bytes_are_errors() {
    let pod = message("io.k8s.api.core.v1.Pod").unwrap();
    // A length that runs past the end.
    assert_eq!(decode(pod, &[0x0a, 0x05, 0x01]), Err(ProtoError::Truncated));
    // A varint that never ends.
    assert_eq!(decode(pod, &[0x08, 0xff, 0xff]), Err(ProtoError::Truncated));
    // Wire type 3 (groups) is not used by Kubernetes.
    assert!(matches!(
        decode(pod, &[0x0b]),
        Err(ProtoError::WireType(3, 1))
    ));
    // metadata (1) as a varint.
    assert!(decode(pod, &[0x08, 0x01]).is_err());
    // Unknown field numbers are skipped.
    assert!(decode(pod, &[0xf8, 0x3f, 0x01]).is_ok());
}

#[test]
fn every_typed_kind_has_a_message() {
    let mut missing = Vec::new();
    for ty in crate::wire::all() {
        let def = ty.def();
        let top = def.fields.first().map(|f| f.json) == Some("kind");
        // Served versions are the GA ones; CustomResourceDefinitions carry JSON schemas with
        // hand-written protobuf and are not decoded.
        let ga = !def.name.contains("alpha") && !def.name.contains("beta");
        if top && ga && !def.name.contains("apiextensions") && message(def.name).is_none() {
            missing.push(def.name);
        }
    }
    assert!(missing.is_empty(), "no protobuf layout for {missing:?}");
}

proptest::proptest! {
    #[test]
    fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        for name in ["io.k8s.api.core.v1.Pod", "io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.Secret"] {
            let _ = decode(message(name).unwrap(), &bytes);
        }
    }
}
