//! Pods as endpoints (`endpointslice/util.ShouldPodBeInEndpoints`, `ShouldSetHostname`,
//! `podEndpointsChanged`, `GetPodServiceMemberships`, `GetServicesToUpdateOnPodChange`,
//! `pkg/api/v1/pod.FindPort`).
//!
//! A pod is an endpoint while it is not terminal (`Succeeded`/`Failed`) and has an IP; a
//! terminating pod only where the caller includes terminating pods (EndpointSlices always,
//! Endpoints only with `publishNotReadyAddresses`). A Service's selector is a set of equalities;
//! an absent or empty selector selects nothing (Go's `omitempty` makes the two the same on the
//! wire), so selector-less Services are left to whoever writes their endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use client::{key_of_meta, Lister};
use k8s_openapi::api::core::v1::{ObjectReference, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::cached_pod::CachedPod;
use crate::pod_util::{is_pod_ready, phase};

/// The Service's selector, `None` when it selects nothing by design (absent or empty).
pub fn service_selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .filter(|s| !s.is_empty())
}

/// `spec.type == ExternalName`: such Services get no endpoints.
pub fn is_external_name(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName")
}

/// `spec.clusterIP`, empty if unset.
pub fn cluster_ip(svc: &Service) -> &str {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or("")
}

/// A cluster IP is set and is not `None` (`helper.IsServiceIPSet`); otherwise the Service is
/// headless.
pub fn is_service_ip_set(svc: &Service) -> bool {
    let ip = cluster_ip(svc);
    !ip.is_empty() && ip != "None"
}

/// `spec.publishNotReadyAddresses`.
pub fn publish_not_ready(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

/// `spec.ports`, empty if unset.
pub fn service_ports(svc: &Service) -> &[ServicePort] {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or(&[])
}

/// `spec.ipFamilies`, empty if unset.
pub fn ip_families(svc: &Service) -> &[String] {
    svc.spec
        .as_ref()
        .and_then(|s| s.ip_families.as_deref())
        .unwrap_or(&[])
}

/// The pod's IPs (`status.podIPs`, else `status.podIP`).
pub fn pod_ips(pod: &CachedPod) -> Vec<&str> {
    let Some(st) = pod.status.as_ref() else {
        return Vec::new();
    };
    match st.pod_ips.as_deref() {
        Some(ips) if !ips.is_empty() => ips.iter().map(|p| p.ip.as_str()).collect(),
        _ => st.pod_ip.as_deref().into_iter().collect(),
    }
}

/// Whether `ip` parses as an IPv6 address (`utilnet.IsIPv6String`).
pub fn is_ipv6(ip: &str) -> bool {
    matches!(ip.parse::<IpAddr>(), Ok(IpAddr::V6(_)))
}

/// `ShouldPodBeInEndpoints`: not terminal, has an IP, and not terminating unless
/// `include_terminating`.
pub fn should_pod_be_in_endpoints(pod: &CachedPod, include_terminating: bool) -> bool {
    let p = phase(pod);
    if p == "Succeeded" || p == "Failed" {
        return false;
    }
    if pod_ips(pod).is_empty() {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

fn hostname_and_subdomain(pod: &CachedPod) -> (&str, &str) {
    let spec = pod.spec.as_ref();
    (
        spec.and_then(|s| s.hostname.as_deref()).unwrap_or(""),
        spec.and_then(|s| s.subdomain.as_deref()).unwrap_or(""),
    )
}

/// The pod's hostname when it is to be published for `svc` (`ShouldSetHostname`: a hostname is
/// set, the pod's subdomain is the Service's name, and both are in one namespace).
pub fn endpoint_hostname<'a>(pod: &'a CachedPod, svc: &Service) -> Option<&'a str> {
    let (hostname, subdomain) = hostname_and_subdomain(pod);
    let same_ns = svc.metadata.namespace == pod.metadata.namespace;
    (!hostname.is_empty() && Some(subdomain) == svc.metadata.name.as_deref() && same_ns)
        .then_some(hostname)
}

/// `FindPort`: a numeric target port as is; a named one looked up in the pod's containers (then in
/// its restartable init containers, the sidecars) with the Service port's protocol. `None` if
/// the pod has no such port.
pub fn find_port(pod: &CachedPod, svc_port: &ServicePort) -> Option<i32> {
    let protocol = svc_port.protocol.as_deref().unwrap_or("TCP");
    match svc_port.target_port.as_ref() {
        Some(IntOrString::Int(n)) => Some(*n),
        // A Service's targetPort defaults to its port.
        None => Some(svc_port.port),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)
        }
    }
}

/// The pod as an endpoint's `targetRef`.
pub fn pod_target_ref(pod: &CachedPod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// `podEndpointsChanged`: (the pod's endpoint may have changed, the Services it matches may have
/// changed). The first covers deletion, readiness and IPs (name, namespace, UID and node never
/// change once a pod has an IP); the second its labels, hostname and subdomain.
pub fn pod_endpoints_changed(old: &CachedPod, new: &CachedPod) -> (bool, bool) {
    let labels_changed = old.metadata.labels != new.metadata.labels
        || hostname_and_subdomain(old) != hostname_and_subdomain(new);
    let pod_changed = old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || is_pod_ready(old) != is_pod_ready(new)
        || pod_ips(old) != pod_ips(new);
    (pod_changed, labels_changed)
}

/// Keys of the Services in `namespace` whose selector matches `labels` (`getServicesForPod`).
pub fn services_for_labels(
    services: &Lister<Service>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> BTreeSet<String> {
    services
        .namespace(namespace)
        .list(&api::labels::Selector::everything())
        .iter()
        .filter(|s| service_selector(s).is_some_and(|sel| api::labels::matches_set(sel, labels)))
        .map(|s| key_of_meta(&s.metadata))
        .collect()
}

/// `GetPodServiceMemberships`: the Services selecting `pod`.
pub fn pod_service_memberships(services: &Lister<Service>, pod: &CachedPod) -> BTreeSet<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    services_for_labels(services, ns, pod.metadata.labels.as_ref())
}

/// `GetServicesToUpdateOnPodChange`: nothing for a resync or an irrelevant change; the Services
/// selecting the new pod when only its endpoint changed; when its labels changed, those that
/// gained or lost it, and (if its endpoint changed too) every Service of either set.
pub fn services_to_update_on_pod_change(
    services: &Lister<Service>,
    old: &CachedPod,
    new: &CachedPod,
) -> BTreeSet<String> {
    if old.metadata.resource_version == new.metadata.resource_version {
        return BTreeSet::new();
    }
    let (pod_changed, labels_changed) = pod_endpoints_changed(old, new);
    if !pod_changed && !labels_changed {
        return BTreeSet::new();
    }
    let current = pod_service_memberships(services, new);
    if !labels_changed {
        return current;
    }
    let before = pod_service_memberships(services, old);
    if pod_changed {
        current.union(&before).cloned().collect()
    } else {
        current.symmetric_difference(&before).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cached_pod::CachedPod;
    use crate::pod_util::testing::*;
    use k8s_openapi::api::core::v1::{ContainerPort, PodIP, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn with_ip(mut p: CachedPod, ip: &str) -> CachedPod {
        let st = p.status.get_or_insert_with(Default::default);
        st.pod_ip = Some(ip.into());
        st.pod_ips = Some(vec![PodIP { ip: ip.into() }]);
        p
    }

    fn svc(name: &str) -> Service {
        let mut s = Service::default();
        s.metadata.name = Some(name.into());
        s.metadata.namespace = Some("default".into());
        s.spec = Some(ServiceSpec::default());
        s
    }

    #[test]
    fn terminal_ipless_and_terminating_pods_are_left_out() {
        let p = with_ip(pod("a"), "10.0.0.1");
        assert!(should_pod_be_in_endpoints(&p, false));
        assert!(!should_pod_be_in_endpoints(&pod("a"), true));
        assert!(!should_pod_be_in_endpoints(
            &with_phase(p.clone(), "Succeeded"),
            true
        ));
        let mut d = p.clone();
        d.metadata.deletion_timestamp = Some(Time(ts(5)));
        assert!(!should_pod_be_in_endpoints(&d, false));
        assert!(should_pod_be_in_endpoints(&d, true));
    }

    #[test]
    fn named_ports_resolve_per_pod_and_protocol() {
        let mut p = pod("a");
        p.spec = Some(crate::cached_pod::CachedPodSpec {
            containers: vec![crate::cached_pod::CachedContainer {
                name: "c".into(),
                ports: Some(vec![
                    ContainerPort {
                        name: Some("http".into()),
                        container_port: 8080,
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    },
                    ContainerPort {
                        name: Some("dns".into()),
                        container_port: 53,
                        protocol: Some("UDP".into()),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }],
            ..Default::default()
        });
        let port = |target: IntOrString, proto: &str| ServicePort {
            port: 80,
            target_port: Some(target),
            protocol: Some(proto.into()),
            ..Default::default()
        };
        assert_eq!(
            find_port(&p, &port(IntOrString::String("http".into()), "TCP")),
            Some(8080)
        );
        assert_eq!(
            find_port(&p, &port(IntOrString::String("dns".into()), "TCP")),
            None
        );
        assert_eq!(
            find_port(&p, &port(IntOrString::String("dns".into()), "UDP")),
            Some(53)
        );
        assert_eq!(find_port(&p, &port(IntOrString::Int(9), "TCP")), Some(9));
    }

    #[test]
    fn hostname_needs_the_services_name_as_subdomain() {
        let mut p = pod("a");
        let spec = p.spec.get_or_insert_with(Default::default);
        spec.hostname = Some("h".into());
        spec.subdomain = Some("web".into());
        assert_eq!(endpoint_hostname(&p, &svc("web")), Some("h"));
        assert_eq!(endpoint_hostname(&p, &svc("other")), None);
    }

    #[test]
    fn pod_changes_that_matter() {
        let a = with_ip(with_labels(pod("a"), &[("app", "x")]), "10.0.0.1");
        let mut b = a.clone();
        b.metadata.resource_version = Some("2".into());
        assert_eq!(pod_endpoints_changed(&a, &b), (false, false));
        let ready = ready_at(b.clone(), Some(ts(1)));
        assert_eq!(pod_endpoints_changed(&a, &ready), (true, false));
        let relabelled = with_labels(b, &[("app", "y")]);
        assert_eq!(pod_endpoints_changed(&a, &relabelled), (false, true));
    }

    #[test]
    fn empty_selector_selects_nothing() {
        let mut s = svc("web");
        assert!(service_selector(&s).is_none());
        s.spec.get_or_insert_with(Default::default).selector = Some(BTreeMap::new());
        assert!(service_selector(&s).is_none());
    }
}
