//! Protobuf bodies of `storage.k8s.io/v1` and `node.k8s.io/v1` objects: every field of
//! StorageClass, CSIDriver, CSINode, CSIStorageCapacity and RuntimeClass, and a VolumeAttachment's
//! spec with a persistent-volume source (an inline PersistentVolumeSpec is not decoded; status is
//! reset by the strategy).

use k8s_pb::api::core::v1 as core;
use k8s_pb::api::node::v1 as node;
use k8s_pb::api::storage::v1 as storage;
use serde_json::{json, Value};

use super::{label_selector, object_meta, quantities, Obj};

fn topology_terms(terms: Vec<core::TopologySelectorTerm>) -> Vec<Value> {
    terms
        .into_iter()
        .map(|t| {
            let exprs = t
                .match_label_expressions
                .into_iter()
                .map(|r| {
                    Obj::default()
                        .s("key", r.key)
                        .strs("values", r.values)
                        .done()
                })
                .collect();
            Obj::default().list("matchLabelExpressions", exprs).done()
        })
        .collect()
}

pub(super) fn storage_class(c: storage::StorageClass) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(c.metadata)))
        .s("provisioner", c.provisioner)
        .map("parameters", c.parameters)
        .s("reclaimPolicy", c.reclaim_policy)
        .strs("mountOptions", c.mount_options)
        .b("allowVolumeExpansion", c.allow_volume_expansion)
        .s("volumeBindingMode", c.volume_binding_mode)
        .list("allowedTopologies", topology_terms(c.allowed_topologies))
        .done()
}

pub(super) fn csi_driver(d: storage::CSIDriver) -> Value {
    let spec = d.spec.map(|s| {
        let tokens = s
            .token_requests
            .into_iter()
            .map(|t| {
                Obj::default()
                    .s("audience", t.audience)
                    .i("expirationSeconds", t.expiration_seconds)
                    .done()
            })
            .collect();
        Obj::default()
            .b("attachRequired", s.attach_required)
            .b("podInfoOnMount", s.pod_info_on_mount)
            .strs("volumeLifecycleModes", s.volume_lifecycle_modes)
            .b("storageCapacity", s.storage_capacity)
            .s("fsGroupPolicy", s.fs_group_policy)
            .list("tokenRequests", tokens)
            .b("requiresRepublish", s.requires_republish)
            .b("seLinuxMount", s.se_linux_mount)
            .i(
                "nodeAllocatableUpdatePeriodSeconds",
                s.node_allocatable_update_period_seconds,
            )
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(d.metadata)))
        .v("spec", spec)
        .done()
}

pub(super) fn csi_node(n: storage::CSINode) -> Value {
    let drivers = n
        .spec
        .unwrap_or_default()
        .drivers
        .into_iter()
        .map(|d| {
            let allocatable = d
                .allocatable
                .map(|a| Obj::default().i("count", a.count.map(i64::from)).done());
            Obj::default()
                .s("name", d.name)
                .s("nodeID", d.node_id)
                .strs("topologyKeys", d.topology_keys)
                .v("allocatable", allocatable)
                .done()
        })
        .collect::<Vec<_>>();
    // `drivers` has no omitempty: an empty spec still lists it.
    Obj::default()
        .v("metadata", Some(object_meta(n.metadata)))
        .v("spec", Some(json!({ "drivers": drivers })))
        .done()
}

fn quantity(q: Option<k8s_pb::apimachinery::pkg::api::resource::Quantity>) -> Option<Value> {
    q.and_then(|q| q.string).map(Value::from)
}

pub(super) fn csi_storage_capacity(c: storage::CSIStorageCapacity) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(c.metadata)))
        .v("nodeTopology", label_selector(c.node_topology))
        .s("storageClassName", c.storage_class_name)
        .v("capacity", quantity(c.capacity))
        .v("maximumVolumeSize", quantity(c.maximum_volume_size))
        .done()
}

pub(super) fn volume_attachment(a: storage::VolumeAttachment) -> Value {
    let spec = a.spec.map(|s| {
        let source = s.source.unwrap_or_default();
        let source = Obj::default()
            .s("persistentVolumeName", source.persistent_volume_name)
            .done();
        Obj::default()
            .s("attacher", s.attacher)
            .v("source", Some(source))
            .s("nodeName", s.node_name)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(a.metadata)))
        .v("spec", spec)
        .done()
}

pub(super) fn runtime_class(rc: node::RuntimeClass) -> Value {
    let overhead = rc
        .overhead
        .map(|o| Obj::default().v("podFixed", quantities(o.pod_fixed)).done());
    let scheduling = rc.scheduling.map(|s| {
        let tolerations = s.tolerations.into_iter().map(super::toleration).collect();
        Obj::default()
            .map("nodeSelector", s.node_selector)
            .list("tolerations", tolerations)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(rc.metadata)))
        .s("handler", rc.handler)
        .v("overhead", overhead)
        .v("scheduling", scheduling)
        .done()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::networking::tests::{envelope, meta};
    use prost::Message;

    fn decode(api_version: &str, kind: &str, raw: Vec<u8>) -> Value {
        crate::protobuf::decode_object(&envelope(api_version, kind, raw)).unwrap_or_default()
    }

    #[test]
    fn decodes_storage_and_node_kinds() {
        let sc = storage::StorageClass {
            metadata: meta("fast", ""),
            provisioner: Some("example.com/fast".into()),
            parameters: [("type".to_string(), "ssd".to_string())].into(),
            reclaim_policy: Some("Retain".into()),
            mount_options: vec![],
            allow_volume_expansion: Some(true),
            volume_binding_mode: Some("WaitForFirstConsumer".into()),
            allowed_topologies: vec![],
        };
        let obj = decode("storage.k8s.io/v1", "StorageClass", sc.encode_to_vec());
        assert_eq!(
            obj,
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
                "provisioner": "example.com/fast", "parameters": {"type": "ssd"}, "reclaimPolicy": "Retain",
                "allowVolumeExpansion": true, "volumeBindingMode": "WaitForFirstConsumer"})
        );
        let d = storage::CSIDriver {
            metadata: meta("csi.example.com", ""),
            spec: Some(storage::CSIDriverSpec {
                attach_required: Some(false),
                volume_lifecycle_modes: vec!["Ephemeral".into()],
                ..Default::default()
            }),
        };
        let obj = decode("storage.k8s.io/v1", "CSIDriver", d.encode_to_vec());
        assert_eq!(
            obj["spec"],
            json!({"attachRequired": false, "volumeLifecycleModes": ["Ephemeral"]})
        );
        let n = storage::CSINode {
            metadata: meta("node-1", ""),
            spec: Some(storage::CSINodeSpec { drivers: vec![] }),
        };
        let obj = decode("storage.k8s.io/v1", "CSINode", n.encode_to_vec());
        assert_eq!(obj["spec"], json!({"drivers": []}));
        let c = storage::CSIStorageCapacity {
            metadata: meta("c", "default"),
            node_topology: None,
            storage_class_name: Some("fast".into()),
            capacity: Some(k8s_pb::apimachinery::pkg::api::resource::Quantity {
                string: Some("10Gi".into()),
            }),
            maximum_volume_size: None,
        };
        let obj = decode("storage.k8s.io/v1", "CSIStorageCapacity", c.encode_to_vec());
        assert_eq!(obj["capacity"], "10Gi");
        assert_eq!(obj["metadata"]["namespace"], "default");
        let va = storage::VolumeAttachment {
            metadata: meta("va", ""),
            spec: Some(storage::VolumeAttachmentSpec {
                attacher: Some("csi.example.com".into()),
                source: Some(storage::VolumeAttachmentSource {
                    persistent_volume_name: Some("pv-1".into()),
                    inline_volume_spec: None,
                }),
                node_name: Some("node-1".into()),
            }),
            status: None,
        };
        let obj = decode("storage.k8s.io/v1", "VolumeAttachment", va.encode_to_vec());
        assert_eq!(
            obj["spec"],
            json!({"attacher": "csi.example.com", "source": {"persistentVolumeName": "pv-1"}, "nodeName": "node-1"})
        );
        let rc = node::RuntimeClass {
            metadata: meta("gvisor", ""),
            handler: Some("runsc".into()),
            overhead: None,
            scheduling: Some(node::Scheduling {
                node_selector: [("sandbox".to_string(), "true".to_string())].into(),
                tolerations: vec![],
            }),
        };
        let obj = decode("node.k8s.io/v1", "RuntimeClass", rc.encode_to_vec());
        assert_eq!(obj["handler"], "runsc");
        assert_eq!(
            obj["scheduling"],
            json!({"nodeSelector": {"sandbox": "true"}})
        );
    }
}
