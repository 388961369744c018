//! Pods as EndpointSlice endpoints and the slices' own shape (`k8s.io/endpointslice/utils.go`).
//!
//! An endpoint is `serving` when its pod is Ready, `terminating` when the pod is being deleted,
//! and `ready` when serving and not terminating — or always, for a Service that publishes
//! not-ready addresses. It carries the pod's addresses of the slice's family, its node, the node's
//! `topology.kubernetes.io/zone`, the pod as `targetRef`, and the pod's hostname when its
//! subdomain is the Service. Slices are named `<service>-<random>`, owned by (and labelled with)
//! their Service, and carry the Service's labels except the reserved ones, which they set:
//! `kubernetes.io/service-name`, `endpointslice.kubernetes.io/managed-by` and, for a Service
//! without a cluster IP, `service.kubernetes.io/headless`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::cached_pod::CachedPod;
use crate::endpointutil::pod::{
    cluster_ip, endpoint_hostname, find_port, ip_families, is_ipv6, is_service_ip_set, pod_ips,
    pod_target_ref, publish_not_ready, service_ports,
};
use crate::endpointutil::{LABEL_HEADLESS, LABEL_MANAGED_BY, LABEL_SERVICE_NAME};
use crate::pod_util::is_pod_ready;

/// `v1.LabelTopologyZone`.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// `discovery.AddressTypeIPv4`.
pub const IPV4: &str = "IPv4";
/// `discovery.AddressTypeIPv6`.
pub const IPV6: &str = "IPv6";

/// `podToEndpoint`: the pod as an endpoint of `address_type`, its node's zone given.
pub fn pod_to_endpoint(
    pod: &CachedPod,
    zone: Option<&str>,
    svc: &Service,
    address_type: &str,
) -> Endpoint {
    let serving = is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let ready = publish_not_ready(svc) || (serving && !terminating);
    let want_v6 = address_type == IPV6;
    let addresses = pod_ips(pod)
        .into_iter()
        .filter_map(|ip| ip.parse::<IpAddr>().ok())
        .filter(|ip| ip.is_ipv6() == want_v6)
        .map(|ip| ip.to_string())
        .collect();
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty());
    Endpoint {
        addresses,
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname: endpoint_hostname(pod, svc).map(str::to_string),
        node_name: node,
        target_ref: Some(pod_target_ref(pod)),
        zone: zone.filter(|z| !z.is_empty()).map(str::to_string),
        ..Default::default()
    }
}

/// `getEndpointPorts`: the Service's ports as resolved for this pod (ports it cannot resolve
/// left out); none for a headless Service without ports.
pub fn endpoint_ports(svc: &Service, pod: &CachedPod) -> Vec<EndpointPort> {
    let ports = service_ports(svc);
    if ports.is_empty() && cluster_ip(svc) == "None" {
        return Vec::new();
    }
    ports
        .iter()
        .filter_map(|sp| {
            let n = find_port(pod, sp)?;
            Some(EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                port: Some(n),
                protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// `getAddressTypesForService`: the address types of the Service's IP families; without
/// families, its cluster IP's, or both for a headless Service.
pub fn address_types_for_service(svc: &Service) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for f in ip_families(svc) {
        let t = match f.as_str() {
            "IPv4" => IPV4,
            "IPv6" => IPV6,
            _ => continue,
        };
        if !out.contains(&t) {
            out.push(t);
        }
    }
    if !out.is_empty() {
        out.sort_unstable();
        return out;
    }
    if is_service_ip_set(svc) {
        return vec![if is_ipv6(cluster_ip(svc)) { IPV6 } else { IPV4 }];
    }
    vec![IPV4, IPV6]
}

/// The Service as its slices' controller (`metav1.NewControllerRef(service, v1 Service)`).
pub fn service_owner_ref(svc: &Service) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// `ownedBy`: the slice has an owner reference to this very Service (same UID).
pub fn owned_by(slice: &EndpointSlice, svc: &Service) -> bool {
    let uid = svc.metadata.uid.as_deref().unwrap_or_default();
    slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.kind == "Service" && o.api_version == "v1")
}

fn is_reserved_label(k: &str) -> bool {
    k == LABEL_SERVICE_NAME || k == LABEL_MANAGED_BY || k == LABEL_HEADLESS
}

/// `setEndpointSliceLabels`: the slice's labels as they should be, and whether the Service's own
/// (non-reserved) labels differ from the slice's.
pub fn endpoint_slice_labels(
    slice: &EndpointSlice,
    svc: &Service,
    managed_by: &str,
) -> (BTreeMap<String, String>, bool) {
    let own = |m: Option<&BTreeMap<String, String>>| -> BTreeMap<String, String> {
        m.into_iter()
            .flatten()
            .filter(|(k, _)| !is_reserved_label(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let current = own(slice.metadata.labels.as_ref());
    let mut labels = own(svc.metadata.labels.as_ref());
    let changed = current != labels;
    if !is_service_ip_set(svc) {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    labels.insert(
        LABEL_SERVICE_NAME.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(LABEL_MANAGED_BY.into(), managed_by.into());
    (labels, changed)
}

/// `getEndpointSlicePrefix`: `<service>-`, or the bare name if that would be too long for a name.
pub fn slice_prefix(name: &str) -> String {
    if name.len() < 253 {
        format!("{name}-")
    } else {
        name.to_string()
    }
}

/// `newEndpointSlice`: an empty slice for `svc` with these ports and address type.
pub fn new_endpoint_slice(
    svc: &Service,
    ports: &[EndpointPort],
    address_type: &str,
    managed_by: &str,
) -> EndpointSlice {
    let mut slice = EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(slice_prefix(
                svc.metadata.name.as_deref().unwrap_or_default(),
            )),
            namespace: svc.metadata.namespace.clone(),
            owner_references: Some(vec![service_owner_ref(svc)]),
            ..Default::default()
        },
        address_type: address_type.to_string(),
        endpoints: Vec::new(),
        ports: Some(ports.to_vec()),
    };
    slice.metadata.labels = Some(endpoint_slice_labels(&slice, svc, managed_by).0);
    slice
}

/// `getSliceToFill`: among `slices`, the one closest to full once `n` more endpoints are added,
/// if any has room for them.
pub fn slice_to_fill<'a>(
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    n: usize,
    max: usize,
) -> Option<&'a EndpointSlice> {
    let mut best: Option<(usize, &EndpointSlice)> = None;
    for s in slices {
        let used = n + s.endpoints.len();
        if used > max {
            continue;
        }
        let room = max - used;
        if best.is_none_or(|(b, _)| room < b) {
            best = Some((room, s));
            if room == 0 {
                break;
            }
        }
    }
    best.map(|(_, s)| s)
}
