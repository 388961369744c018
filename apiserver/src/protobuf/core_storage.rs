//! Protobuf bodies of core v1 PersistentVolumes, PodTemplates, Endpoints and Bindings, and of
//! discovery.k8s.io/v1 EndpointSlices (what Go clients that speak protobuf send). A PV's
//! hostPath, nfs, local and csi sources are decoded (with capacity, access modes, claimRef,
//! reclaim policy, class, mount options, volume mode and node affinity); other sources are
//! dropped. Status is never decoded.

use k8s_pb::api::core::v1 as core;
use k8s_pb::api::discovery::v1 as discovery;
use serde_json::Value;

use super::{object_meta, quantities, template, Obj};

fn object_ref(r: Option<core::ObjectReference>) -> Option<Value> {
    r.map(|r| {
        Obj::default()
            .s("kind", r.kind)
            .s("namespace", r.namespace)
            .s("name", r.name)
            .s("uid", r.uid)
            .s("apiVersion", r.api_version)
            .s("resourceVersion", r.resource_version)
            .s("fieldPath", r.field_path)
            .done()
    })
}

fn requirements(rs: Vec<core::NodeSelectorRequirement>) -> Vec<Value> {
    rs.into_iter()
        .map(|r| {
            Obj::default()
                .s("key", r.key)
                .s("operator", r.operator)
                .strs("values", r.values)
                .done()
        })
        .collect()
}

fn node_affinity(a: Option<core::VolumeNodeAffinity>) -> Option<Value> {
    a.map(|a| {
        let required = a.required.map(|r| {
            let terms: Vec<Value> = r
                .node_selector_terms
                .into_iter()
                .map(|t| {
                    Obj::default()
                        .list("matchExpressions", requirements(t.match_expressions))
                        .list("matchFields", requirements(t.match_fields))
                        .done()
                })
                .collect();
            Obj::default().list("nodeSelectorTerms", terms).done()
        });
        Obj::default().v("required", required).done()
    })
}

fn source(s: core::PersistentVolumeSource, spec: Obj) -> Obj {
    let host_path = s.host_path.map(|h| {
        Obj::default()
            .s("path", h.path)
            .v("type", h.r#type.map(Value::from))
            .done()
    });
    let nfs = s.nfs.map(|n| {
        Obj::default()
            .s("server", n.server)
            .s("path", n.path)
            .b_t("readOnly", n.read_only)
            .done()
    });
    let local = s.local.map(|l| {
        Obj::default()
            .s("path", l.path)
            .s("fsType", l.fs_type)
            .done()
    });
    let csi = s.csi.map(|c| {
        Obj::default()
            .s("driver", c.driver)
            .s("volumeHandle", c.volume_handle)
            .b_t("readOnly", c.read_only)
            .s("fsType", c.fs_type)
            .map("volumeAttributes", c.volume_attributes)
            .done()
    });
    spec.v("hostPath", host_path)
        .v("nfs", nfs)
        .v("local", local)
        .v("csi", csi)
}

pub(super) fn persistent_volume(pv: core::PersistentVolume) -> Value {
    let spec = pv.spec.map(|s| {
        let base = Obj::default().v("capacity", quantities(s.capacity));
        let with_source = match s.persistent_volume_source {
            Some(src) => source(src, base),
            None => base,
        };
        with_source
            .strs("accessModes", s.access_modes)
            .v("claimRef", object_ref(s.claim_ref))
            .s(
                "persistentVolumeReclaimPolicy",
                s.persistent_volume_reclaim_policy,
            )
            .s("storageClassName", s.storage_class_name)
            .strs("mountOptions", s.mount_options)
            .s("volumeMode", s.volume_mode)
            .v("nodeAffinity", node_affinity(s.node_affinity))
            .s("volumeAttributesClassName", s.volume_attributes_class_name)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(pv.metadata)))
        .v("spec", spec)
        .done()
}

/// A Binding, as a scheduler that speaks protobuf posts it to `pods/binding` or `bindings`.
pub(super) fn binding(b: core::Binding) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(b.metadata)))
        .v("target", object_ref(b.target))
        .done()
}

pub(super) fn pod_template(t: core::PodTemplate) -> Value {
    Obj::default()
        .v("metadata", Some(object_meta(t.metadata)))
        .v("template", template(t.template))
        .done()
}

fn endpoint_addresses(addrs: Vec<core::EndpointAddress>) -> Vec<Value> {
    addrs
        .into_iter()
        .map(|a| {
            Obj::default()
                .s("ip", a.ip)
                .s("hostname", a.hostname)
                .s("nodeName", a.node_name)
                .v("targetRef", object_ref(a.target_ref))
                .done()
        })
        .collect()
}

pub(super) fn endpoints(e: core::Endpoints) -> Value {
    let subsets: Vec<Value> = e
        .subsets
        .into_iter()
        .map(|s| {
            let ports: Vec<Value> = s
                .ports
                .into_iter()
                .map(|p| {
                    Obj::default()
                        .s("name", p.name)
                        .i("port", p.port.map(i64::from))
                        .s("protocol", p.protocol)
                        .s("appProtocol", p.app_protocol)
                        .done()
                })
                .collect();
            Obj::default()
                .list("addresses", endpoint_addresses(s.addresses))
                .list(
                    "notReadyAddresses",
                    endpoint_addresses(s.not_ready_addresses),
                )
                .list("ports", ports)
                .done()
        })
        .collect();
    Obj::default()
        .v("metadata", Some(object_meta(e.metadata)))
        .list("subsets", subsets)
        .done()
}

pub(super) fn endpoint_slice(s: discovery::EndpointSlice) -> Value {
    let endpoints: Vec<Value> = s
        .endpoints
        .into_iter()
        .map(|e| {
            let conditions = e.conditions.map(|c| {
                Obj::default()
                    .b("ready", c.ready)
                    .b("serving", c.serving)
                    .b("terminating", c.terminating)
                    .done()
            });
            let hints = e.hints.map(|h| {
                let zones: Vec<Value> = h
                    .for_zones
                    .into_iter()
                    .map(|z| Obj::default().s("name", z.name).done())
                    .collect();
                Obj::default().list("forZones", zones).done()
            });
            Obj::default()
                .strs("addresses", e.addresses)
                .v("conditions", conditions)
                .s("hostname", e.hostname)
                .v("targetRef", object_ref(e.target_ref))
                .map("deprecatedTopology", e.deprecated_topology)
                .s("nodeName", e.node_name)
                .s("zone", e.zone)
                .v("hints", hints)
                .done()
        })
        .collect();
    let ports: Vec<Value> = s
        .ports
        .into_iter()
        .map(|p| {
            Obj::default()
                .v("name", p.name.map(Value::from))
                .s("protocol", p.protocol)
                .i("port", p.port.map(i64::from))
                .s("appProtocol", p.app_protocol)
                .done()
        })
        .collect();
    Obj::default()
        .v("metadata", Some(object_meta(s.metadata)))
        .s("addressType", s.address_type)
        .list("endpoints", endpoints)
        .list("ports", ports)
        .done()
}

#[cfg(test)]
mod tests {
    use super::super::{decode_object, MAGIC};
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::api::discovery::v1 as discovery;
    use k8s_pb::apimachinery::pkg::api::resource::Quantity;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message;
    use serde_json::json;

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

    fn named(name: &str) -> Option<meta::ObjectMeta> {
        Some(meta::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        })
    }

    #[test]
    fn decodes_volumes_quotas_endpoints_and_slices() {
        let pv = core::PersistentVolume {
            metadata: named("pv1"),
            spec: Some(core::PersistentVolumeSpec {
                capacity: [(
                    "storage".to_string(),
                    Quantity {
                        string: Some("1Gi".into()),
                    },
                )]
                .into(),
                persistent_volume_source: Some(core::PersistentVolumeSource {
                    host_path: Some(core::HostPathVolumeSource {
                        path: Some("/d".into()),
                        r#type: None,
                    }),
                    ..Default::default()
                }),
                access_modes: vec!["ReadWriteOnce".into()],
                ..Default::default()
            }),
            status: None,
        };
        assert_eq!(
            decode_object(&envelope("v1", "PersistentVolume", pv.encode_to_vec())),
            Ok(
                json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
                "spec": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/d"}, "accessModes": ["ReadWriteOnce"]}})
            )
        );
        let q = core::ResourceQuota {
            metadata: named("q"),
            spec: Some(core::ResourceQuotaSpec {
                hard: [(
                    "pods".to_string(),
                    Quantity {
                        string: Some("10".into()),
                    },
                )]
                .into(),
                scopes: vec!["NotTerminating".into()],
                scope_selector: None,
            }),
            status: None,
        };
        assert_eq!(
            decode_object(&envelope("v1", "ResourceQuota", q.encode_to_vec())),
            Ok(
                json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                "spec": {"hard": {"pods": "10"}, "scopes": ["NotTerminating"]}})
            )
        );
        let ep = core::Endpoints {
            metadata: named("web"),
            subsets: vec![core::EndpointSubset {
                addresses: vec![core::EndpointAddress {
                    ip: Some("10.0.0.1".into()),
                    ..Default::default()
                }],
                not_ready_addresses: vec![],
                ports: vec![core::EndpointPort {
                    port: Some(80),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }],
            }],
        };
        let b = core::Binding {
            metadata: named("p"),
            target: Some(core::ObjectReference {
                kind: Some("Node".into()),
                name: Some("n1".into()),
                ..Default::default()
            }),
        };
        assert_eq!(
            decode_object(&envelope("v1", "Binding", b.encode_to_vec())),
            Ok(
                json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}})
            )
        );
        assert_eq!(
            decode_object(&envelope("v1", "Endpoints", ep.encode_to_vec())),
            Ok(
                json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
                "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80, "protocol": "TCP"}]}]})
            )
        );
        let slice = discovery::EndpointSlice {
            metadata: named("web-1"),
            address_type: Some("IPv4".into()),
            endpoints: vec![discovery::Endpoint {
                addresses: vec!["10.0.0.1".into()],
                conditions: Some(discovery::EndpointConditions {
                    ready: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ports: vec![discovery::EndpointPort {
                name: Some(String::new()),
                port: Some(80),
                ..Default::default()
            }],
        };
        assert_eq!(
            decode_object(&envelope(
                "discovery.k8s.io/v1",
                "EndpointSlice",
                slice.encode_to_vec()
            )),
            Ok(
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "web-1"},
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": false}}],
                "ports": [{"name": "", "port": 80}]})
            )
        );
    }
}
