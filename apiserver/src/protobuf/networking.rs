//! Protobuf bodies of `networking.k8s.io/v1` objects (`kubectl create ingress` sends an Ingress
//! this way): every spec field of Ingress, IngressClass, NetworkPolicy, IPAddress and ServiceCIDR;
//! ServiceCIDR status conditions too (its create keeps status). Ingress status is not decoded
//! (the strategy resets it).

use k8s_pb::api::networking::v1 as net;
use serde_json::{json, Value};

use super::{int_or_string, label_selector, object_meta, time, Obj};

fn backend(b: net::IngressBackend) -> Value {
    let service = b.service.map(|s| {
        let port = s.port.map(|p| {
            Obj::default()
                .s("name", p.name)
                .i_nz("number", p.number.map(i64::from))
                .done()
        });
        Obj::default().s("name", s.name).v("port", port).done()
    });
    let resource = b.resource.map(|r| {
        Obj::default()
            .s("apiGroup", r.api_group)
            .s("kind", r.kind)
            .s("name", r.name)
            .done()
    });
    Obj::default()
        .v("service", service)
        .v("resource", resource)
        .done()
}

fn rule(r: net::IngressRule) -> Value {
    let http = r.ingress_rule_value.and_then(|v| v.http).map(|h| {
        let paths = h
            .paths
            .into_iter()
            .map(|p| {
                Obj::default()
                    .s("path", p.path)
                    .s("pathType", p.path_type)
                    .v("backend", Some(backend(p.backend.unwrap_or_default())))
                    .done()
            })
            .collect();
        Obj::default().list("paths", paths).done()
    });
    Obj::default().s("host", r.host).v("http", http).done()
}

pub(super) fn ingress(i: net::Ingress) -> Value {
    let spec = i.spec.map(|s| {
        let tls = s
            .tls
            .into_iter()
            .map(|t| {
                Obj::default()
                    .strs("hosts", t.hosts)
                    .s("secretName", t.secret_name)
                    .done()
            })
            .collect();
        Obj::default()
            .s("ingressClassName", s.ingress_class_name)
            .v("defaultBackend", s.default_backend.map(backend))
            .list("tls", tls)
            .list("rules", s.rules.into_iter().map(rule).collect())
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(i.metadata)))
        .v("spec", spec)
        .done()
}

pub(super) fn ingress_class(c: net::IngressClass) -> Value {
    let spec = c.spec.map(|s| {
        let parameters = s.parameters.map(|p| {
            Obj::default()
                .s("apiGroup", p.a_pi_group)
                .s("kind", p.kind)
                .s("name", p.name)
                .s("scope", p.scope)
                .s("namespace", p.namespace)
                .done()
        });
        Obj::default()
            .s("controller", s.controller)
            .v("parameters", parameters)
            .done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(c.metadata)))
        .v("spec", spec)
        .done()
}

fn ports(ports: Vec<net::NetworkPolicyPort>) -> Vec<Value> {
    ports
        .into_iter()
        .map(|p| {
            Obj::default()
                .s("protocol", p.protocol)
                .v("port", int_or_string(p.port))
                .i("endPort", p.end_port.map(i64::from))
                .done()
        })
        .collect()
}

fn peers(peers: Vec<net::NetworkPolicyPeer>) -> Vec<Value> {
    peers
        .into_iter()
        .map(|p| {
            let ip_block = p.ip_block.map(|b| {
                Obj::default()
                    .s("cidr", b.cidr)
                    .strs("except", b.except)
                    .done()
            });
            Obj::default()
                .v("podSelector", label_selector(p.pod_selector))
                .v("namespaceSelector", label_selector(p.namespace_selector))
                .v("ipBlock", ip_block)
                .done()
        })
        .collect()
}

pub(super) fn network_policy(p: net::NetworkPolicy) -> Value {
    let spec = p.spec.unwrap_or_default();
    let ingress = spec
        .ingress
        .into_iter()
        .map(|r| {
            Obj::default()
                .list("ports", ports(r.ports))
                .list("from", peers(r.from))
                .done()
        })
        .collect();
    let egress = spec
        .egress
        .into_iter()
        .map(|r| {
            Obj::default()
                .list("ports", ports(r.ports))
                .list("to", peers(r.to))
                .done()
        })
        .collect();
    let selector = label_selector(spec.pod_selector).unwrap_or_else(|| json!({}));
    let spec = Obj::default()
        .v("podSelector", Some(selector))
        .list("ingress", ingress)
        .list("egress", egress)
        .strs("policyTypes", spec.policy_types)
        .done();
    Obj::default()
        .v("metadata", Some(object_meta(p.metadata)))
        .v("spec", Some(spec))
        .done()
}

pub(super) fn ip_address(a: net::IPAddress) -> Value {
    let spec = a.spec.map(|s| {
        let parent = s.parent_ref.map(|r| {
            Obj::default()
                .s("group", r.group)
                .s("resource", r.resource)
                .s("namespace", r.namespace)
                .s("name", r.name)
                .done()
        });
        Obj::default().v("parentRef", parent).done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(a.metadata)))
        .v("spec", spec)
        .done()
}

pub(super) fn service_cidr(c: net::ServiceCIDR) -> Value {
    let spec = c.spec.map(|s| Obj::default().strs("cidrs", s.cidrs).done());
    let status = c.status.map(|st| {
        let conditions = st
            .conditions
            .into_iter()
            .map(|c| {
                Obj::default()
                    .s("type", c.r#type)
                    .s("status", c.status)
                    .i("observedGeneration", c.observed_generation)
                    .v("lastTransitionTime", time(c.last_transition_time))
                    .s("reason", c.reason)
                    .s("message", c.message)
                    .done()
            })
            .collect();
        Obj::default().list("conditions", conditions).done()
    });
    Obj::default()
        .v("metadata", Some(object_meta(c.metadata)))
        .v("spec", spec)
        .v("status", status)
        .done()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message;

    /// A protobuf request body: the magic, then a `runtime.Unknown` around `raw`.
    pub(in crate::protobuf) fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
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

    pub(in crate::protobuf) fn meta(name: &str, namespace: &str) -> Option<meta::ObjectMeta> {
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
