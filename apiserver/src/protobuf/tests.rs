//! Protobuf bodies of the kinds kubectl's generators and common manifests send, decoded by the
//! generic decoder into the JSON a Go client would send for the same struct.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod autoscaling {
    use super::super::{decode_object, MAGIC};
    use k8s_pb::api::autoscaling::{v1, v2};
    use k8s_pb::apimachinery::pkg::api::resource::Quantity;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;
    use serde_json::json;

    fn envelope(api_version: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some("HorizontalPodAutoscaler".into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(u.encode_to_vec());
        out
    }

    fn meta() -> Option<meta::ObjectMeta> {
        Some(meta::ObjectMeta {
            name: Some("web".into()),
            ..Default::default()
        })
    }

    #[test]
    fn decodes_hpas_like_kubectl_autoscale_at_both_versions() {
        let h = v1::HorizontalPodAutoscaler {
            metadata: meta(),
            spec: Some(v1::HorizontalPodAutoscalerSpec {
                scale_target_ref: Some(v1::CrossVersionObjectReference {
                    kind: Some("Deployment".into()),
                    name: Some("web".into()),
                    api_version: Some("apps/v1".into()),
                }),
                min_replicas: Some(2),
                max_replicas: Some(5),
                target_cpu_utilization_percentage: Some(60),
            }),
            status: Some(Default::default()),
        };
        assert_eq!(
            decode_object(&envelope("autoscaling/v1", h.encode_to_vec())),
            Ok(
                json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60},
                "status": {"currentReplicas": 0, "desiredReplicas": 0}})
            )
        );
        let h = v2::HorizontalPodAutoscaler {
            metadata: meta(),
            spec: Some(v2::HorizontalPodAutoscalerSpec {
                scale_target_ref: Some(v2::CrossVersionObjectReference {
                    kind: Some("Deployment".into()),
                    name: Some("web".into()),
                    api_version: Some("apps/v1".into()),
                }),
                min_replicas: None,
                max_replicas: Some(5),
                metrics: vec![v2::MetricSpec {
                    r#type: Some("Resource".into()),
                    resource: Some(v2::ResourceMetricSource {
                        name: Some("cpu".into()),
                        target: Some(v2::MetricTarget {
                            r#type: Some("Utilization".into()),
                            average_utilization: Some(60),
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                }],
                behavior: Some(v2::HorizontalPodAutoscalerBehavior {
                    scale_up: None,
                    scale_down: Some(v2::HpaScalingRules {
                        stabilization_window_seconds: Some(30),
                        policies: vec![v2::HpaScalingPolicy {
                            r#type: Some("Pods".into()),
                            value: Some(1),
                            period_seconds: Some(60),
                        }],
                        tolerance: Some(Quantity {
                            string: Some("0.05".into()),
                        }),
                        ..Default::default()
                    }),
                }),
            }),
            status: None,
        };
        assert_eq!(
            decode_object(&envelope("autoscaling/v2", h.encode_to_vec())),
            Ok(
                json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "maxReplicas": 5,
                         "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
                         "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}], "tolerance": "0.05"}}},
                "status": {"desiredReplicas": 0, "currentMetrics": []}})
            )
        );
    }
}

mod batch {
    use super::super::{decode_object, MAGIC};
    use k8s_pb::api::batch::v1 as batch;
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;
    use serde_json::json;

    fn envelope(kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("batch/v1".into()),
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

    fn pod_template(restart_policy: &str) -> Option<core::PodTemplateSpec> {
        Some(core::PodTemplateSpec {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(core::PodSpec {
                containers: vec![core::Container {
                    name: Some("pi".into()),
                    image: Some("perl".into()),
                    ..Default::default()
                }],
                restart_policy: Some(restart_policy.into()),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn decodes_jobs_and_cronjobs_like_kubectl_create() {
        let j = batch::Job {
            metadata: Some(meta::ObjectMeta {
                name: Some("pi".into()),
                ..Default::default()
            }),
            spec: Some(batch::JobSpec {
                template: pod_template("Never"),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        assert_eq!(
            decode_object(&envelope("Job", j.encode_to_vec())),
            Ok(
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
                "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "pi", "image": "perl", "resources": {}}], "restartPolicy": "Never"}}},
                "status": {}})
            )
        );
        let c = batch::CronJob {
            metadata: Some(meta::ObjectMeta {
                name: Some("hello".into()),
                ..Default::default()
            }),
            spec: Some(batch::CronJobSpec {
                schedule: Some("*/1 * * * *".into()),
                concurrency_policy: Some(String::new()),
                suspend: Some(false),
                job_template: Some(batch::JobTemplateSpec {
                    metadata: Some(meta::ObjectMeta {
                        name: Some("hello".into()),
                        ..Default::default()
                    }),
                    spec: Some(batch::JobSpec {
                        template: pod_template("OnFailure"),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        assert_eq!(
            decode_object(&envelope("CronJob", c.encode_to_vec())),
            Ok(
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "hello"},
                "spec": {"schedule": "*/1 * * * *", "suspend": false,
                    "jobTemplate": {"metadata": {"name": "hello"}, "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "pi", "image": "perl", "resources": {}}], "restartPolicy": "OnFailure"}}}}},
                "status": {}})
            )
        );
    }
}

mod core_storage {
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
                "spec": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/d"}, "accessModes": ["ReadWriteOnce"]},
                "status": {}})
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
                "spec": {"hard": {"pods": "10"}, "scopes": ["NotTerminating"]}, "status": {}})
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

mod networking {
    use k8s_pb::api::networking::v1 as net;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message;
    use serde_json::json;

    /// A protobuf request body: the magic, then a `runtime.Unknown` around `raw`.
    pub(super) fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
            type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = crate::protobuf::MAGIC.to_vec();
        out.extend(unknown.encode_to_vec());
        out
    }

    pub(super) fn meta(name: &str, namespace: &str) -> Option<meta::ObjectMeta> {
        Some(meta::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        })
    }

    #[test]
    fn decodes_an_ingress_as_kubectl_create_ingress_sends_it() {
        let path = net::HttpIngressPath {
            path: Some("/".into()),
            path_type: Some("Exact".into()),
            backend: Some(net::IngressBackend {
                service: Some(net::IngressServiceBackend {
                    name: Some("svc".into()),
                    port: Some(net::ServiceBackendPort {
                        name: Some(String::new()),
                        number: Some(80),
                    }),
                }),
                resource: None,
            }),
        };
        let ing = net::Ingress {
            metadata: meta("web", ""),
            spec: Some(net::IngressSpec {
                ingress_class_name: Some("nginx".into()),
                default_backend: None,
                tls: vec![net::IngressTls {
                    hosts: vec!["foo.com".into()],
                    secret_name: Some("tls".into()),
                }],
                rules: vec![net::IngressRule {
                    host: Some("foo.com".into()),
                    ingress_rule_value: Some(net::IngressRuleValue {
                        http: Some(net::HttpIngressRuleValue { paths: vec![path] }),
                    }),
                }],
            }),
            status: Some(Default::default()),
        };
        let body = envelope("networking.k8s.io/v1", "Ingress", ing.encode_to_vec());
        assert_eq!(
            crate::protobuf::decode_object(&body),
            Ok(json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": {"name": "web"},
                "spec": {
                    "ingressClassName": "nginx",
                    "tls": [{"hosts": ["foo.com"], "secretName": "tls"}],
                    "rules": [{"host": "foo.com", "http": {"paths": [{"path": "/", "pathType": "Exact",
                        "backend": {"service": {"name": "svc", "port": {"number": 80}}}}]}}],
                },
                "status": {"loadBalancer": {}},
            }))
        );
    }

    #[test]
    fn decodes_network_policies_classes_addresses_and_cidrs() {
        let np = net::NetworkPolicy {
            metadata: meta("np", "default"),
            spec: Some(net::NetworkPolicySpec {
                pod_selector: None,
                ingress: vec![net::NetworkPolicyIngressRule {
                    ports: vec![net::NetworkPolicyPort {
                        protocol: Some("TCP".into()),
                        port: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                            r#type: Some(0),
                            int_val: Some(80),
                            str_val: None,
                        }),
                        end_port: Some(90),
                    }],
                    from: vec![net::NetworkPolicyPeer {
                        pod_selector: None,
                        namespace_selector: None,
                        ip_block: Some(net::IpBlock {
                            cidr: Some("10.0.0.0/8".into()),
                            except: vec!["10.1.0.0/16".into()],
                        }),
                    }],
                }],
                egress: vec![],
                policy_types: vec!["Ingress".into()],
            }),
        };
        let body = envelope("networking.k8s.io/v1", "NetworkPolicy", np.encode_to_vec());
        let obj = crate::protobuf::decode_object(&body).unwrap_or_default();
        assert_eq!(
            obj["spec"],
            json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{
                "ports": [{"protocol": "TCP", "port": 80, "endPort": 90}],
                "from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]})
        );
        let class = net::IngressClass {
            metadata: meta("nginx", ""),
            spec: Some(net::IngressClassSpec {
                controller: Some("k8s.io/ingress-nginx".into()),
                parameters: None,
            }),
        };
        let body = envelope(
            "networking.k8s.io/v1",
            "IngressClass",
            class.encode_to_vec(),
        );
        let obj = crate::protobuf::decode_object(&body).unwrap_or_default();
        assert_eq!(obj["spec"], json!({"controller": "k8s.io/ingress-nginx"}));
        let ip = net::IPAddress {
            metadata: meta("10.0.0.1", ""),
            spec: Some(net::IPAddressSpec {
                parent_ref: Some(net::ParentReference {
                    group: Some(String::new()),
                    resource: Some("services".into()),
                    namespace: Some("default".into()),
                    name: Some("web".into()),
                }),
            }),
        };
        let body = envelope("networking.k8s.io/v1", "IPAddress", ip.encode_to_vec());
        let obj = crate::protobuf::decode_object(&body).unwrap_or_default();
        assert_eq!(
            obj["spec"],
            json!({"parentRef": {"resource": "services", "namespace": "default", "name": "web"}})
        );
        let cidr = net::ServiceCIDR {
            metadata: meta("extra", ""),
            spec: Some(net::ServiceCIDRSpec {
                cidrs: vec!["10.100.0.0/16".into()],
            }),
            status: None,
        };
        let body = envelope("networking.k8s.io/v1", "ServiceCIDR", cidr.encode_to_vec());
        let obj = crate::protobuf::decode_object(&body).unwrap_or_default();
        assert_eq!(obj["spec"], json!({"cidrs": ["10.100.0.0/16"]}));
    }
}

mod policy {
    use super::super::{decode_object, MAGIC};
    use k8s_pb::api::policy::v1 as policy;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
    use prost::Message;
    use serde_json::json;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = Unknown {
            type_meta: Some(TypeMeta {
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
    fn decodes_pdbs_evictions_and_delete_options() {
        let p = policy::PodDisruptionBudget {
            metadata: Some(meta::ObjectMeta {
                name: Some("web".into()),
                ..Default::default()
            }),
            spec: Some(policy::PodDisruptionBudgetSpec {
                min_available: Some(IntOrString {
                    r#type: Some(1),
                    int_val: Some(0),
                    str_val: Some("50%".into()),
                }),
                selector: Some(meta::LabelSelector {
                    match_labels: [("app".to_string(), "web".to_string())].into(),
                    match_expressions: vec![],
                }),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        assert_eq!(
            decode_object(&envelope(
                "policy/v1",
                "PodDisruptionBudget",
                p.encode_to_vec()
            )),
            Ok(
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web"},
                "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
                "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}})
            )
        );
        let opts = meta::DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(meta::Preconditions {
                uid: Some("u1".into()),
                resource_version: None,
            }),
            propagation_policy: Some("Foreground".into()),
            dry_run: vec!["All".into()],
            ..Default::default()
        };
        let want_opts = json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"},
            "propagationPolicy": "Foreground", "dryRun": ["All"]});
        let mut d = want_opts.clone();
        d["apiVersion"] = json!("v1");
        d["kind"] = json!("DeleteOptions");
        assert_eq!(
            decode_object(&envelope("v1", "DeleteOptions", opts.encode_to_vec())),
            Ok(d)
        );
        let e = policy::Eviction {
            metadata: Some(meta::ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }),
            delete_options: Some(opts),
        };
        let b = k8s_pb::api::core::v1::Binding {
            metadata: Some(meta::ObjectMeta {
                name: Some("web-1".into()),
                ..Default::default()
            }),
            target: Some(k8s_pb::api::core::v1::ObjectReference {
                kind: Some("Node".into()),
                name: Some("n1".into()),
                ..Default::default()
            }),
        };
        assert_eq!(
            decode_object(&envelope("v1", "Binding", b.encode_to_vec())),
            Ok(
                json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web-1"},
                "target": {"kind": "Node", "name": "n1"}})
            )
        );
        assert_eq!(
            decode_object(&envelope("policy/v1", "Eviction", e.encode_to_vec())),
            Ok(json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "web-1", "namespace": "default"},
                "deleteOptions": want_opts}))
        );
    }
}

mod storage {
    use super::networking::{envelope, meta};
    use k8s_pb::api::node::v1 as node;
    use k8s_pb::api::storage::v1 as storage;
    use prost::Message;
    use serde_json::{json, Value};

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
