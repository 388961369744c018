//! A Service's Endpoints computed from its pods (`endpoints_controller.go`'s `syncService` body,
//! `pkg/api/v1/endpoints.RepackSubsets`, `truncateEndpoints`). Pure functions.
//!
//! Each selected pod that should be an endpoint (not terminal, has an IP of the Service's first
//! family, not terminating unless `publishNotReadyAddresses`) gives one address per Service port
//! its target port resolves to — ready if the pod is Ready or the Service publishes not-ready
//! addresses, else not ready. A headless Service without ports gets the addresses without ports.
//! The result is repacked into the canonical form: one subset per distinct set of addresses,
//! holding every port those addresses serve, an address listed once per subset (not-ready wins),
//! addresses sorted by IP and pod UID. Over 1,000 addresses are truncated, ready ones kept first,
//! each subset keeping its share.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, ObjectReference, Service, ServicePort,
};

use crate::cached_pod::CachedPod;
use crate::endpointutil::pod::{
    cluster_ip, endpoint_hostname, find_port, ip_families, is_ipv6, pod_ips, pod_target_ref,
    publish_not_ready, service_ports, should_pod_be_in_endpoints,
};
use crate::pod_util::is_pod_ready;

/// `maxCapacity`: addresses an Endpoints object holds at most.
pub const MAX_CAPACITY: usize = 1000;

/// The pod's address for the Service's (first) IP family (`podToEndpointAddressForService`);
/// `None` if the pod has no IP of that family.
pub fn pod_to_endpoint_address(svc: &Service, pod: &CachedPod) -> Option<EndpointAddress> {
    let ips = pod_ips(pod);
    let want_v6 = match ip_families(svc).first() {
        Some(f) => f == "IPv6",
        None => {
            let cip = cluster_ip(svc);
            if !cip.is_empty() && cip != "None" {
                is_ipv6(cip)
            } else {
                ips.first().is_some_and(|ip| is_ipv6(ip))
            }
        }
    };
    let ip = ips.into_iter().find(|ip| is_ipv6(ip) == want_v6)?;
    Some(EndpointAddress {
        ip: ip.to_string(),
        node_name: Some(
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
        ),
        target_ref: Some(pod_target_ref(pod)),
        hostname: endpoint_hostname(pod, svc).map(str::to_string),
    })
}

fn endpoint_port(sp: &ServicePort, port: i32) -> EndpointPort {
    EndpointPort {
        name: sp.name.clone().filter(|n| !n.is_empty()),
        port,
        protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
        app_protocol: sp.app_protocol.clone(),
    }
}

/// One address with its ports and readiness, before repacking.
type Entry = (EndpointAddress, Option<EndpointPort>, bool);

/// The Service's subsets over `pods` (already selected by its selector), repacked; and the
/// numbers of ready and not-ready addresses added.
pub fn desired_subsets<P: AsRef<CachedPod>>(svc: &Service, pods: &[P]) -> Vec<EndpointSubset> {
    let tolerate_unready = publish_not_ready(svc);
    let ports = service_ports(svc);
    let mut entries: Vec<Entry> = Vec::new();
    for pod in pods {
        let pod = pod.as_ref();
        if !should_pod_be_in_endpoints(pod, tolerate_unready) {
            continue;
        }
        let Some(addr) = pod_to_endpoint_address(svc, pod) else {
            tracing::debug!(pod = ?pod.metadata.name, "no address of the service's IP family");
            continue;
        };
        let ready = tolerate_unready || is_pod_ready(pod);
        if ports.is_empty() {
            // A headless Service may have no ports.
            if cluster_ip(svc) == "None" {
                entries.push((addr, None, ready));
            }
            continue;
        }
        for sp in ports {
            let Some(n) = find_port(pod, sp) else {
                tracing::debug!(pod = ?pod.metadata.name, port = ?sp.name, "failed to find port");
                continue;
            };
            entries.push((addr.clone(), Some(endpoint_port(sp, n)), ready));
        }
    }
    repack(entries)
}

/// `RepackSubsets`: any subsets in the canonical layout (the mirroring controller reads user-written
/// Endpoints through it).
pub fn repack_subsets(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    let mut entries: Vec<Entry> = Vec::new();
    for s in subsets {
        let ports: Vec<Option<EndpointPort>> = match s.ports.as_deref() {
            Some(p) if !p.is_empty() => p.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for port in &ports {
            for (list, ready) in [(&s.addresses, true), (&s.not_ready_addresses, false)] {
                for a in list.iter().flatten() {
                    entries.push((a.clone(), port.clone(), ready));
                }
            }
        }
    }
    repack(entries)
}

/// An address's identity in a repack (`addressKey`: IP and target UID).
type AddressKey = (String, String);
/// A port's identity (and order): name, port, protocol, appProtocol.
type PortKey = (String, i32, String, String);

fn address_key(a: &EndpointAddress) -> AddressKey {
    let uid = a
        .target_ref
        .as_ref()
        .and_then(|r| r.uid.clone())
        .unwrap_or_default();
    (a.ip.clone(), uid)
}

fn port_key(p: &EndpointPort) -> PortKey {
    (
        p.name.clone().unwrap_or_default(),
        p.port,
        p.protocol.clone().unwrap_or_default(),
        p.app_protocol.clone().unwrap_or_default(),
    )
}

/// `RepackSubsets` over flat entries (`None` port: the "no ports" sentinel).
fn repack(entries: Vec<Entry>) -> Vec<EndpointSubset> {
    let mut addresses: BTreeMap<AddressKey, EndpointAddress> = BTreeMap::new();
    let mut ports: BTreeMap<Option<PortKey>, Option<EndpointPort>> = BTreeMap::new();
    // Per port, its addresses and whether each is ready; not-ready trumps ready.
    let mut by_port: BTreeMap<Option<PortKey>, BTreeMap<AddressKey, bool>> = BTreeMap::new();
    for (addr, port, ready) in entries {
        let ak = address_key(&addr);
        addresses.entry(ak.clone()).or_insert(addr);
        let pk = port.as_ref().map(port_key);
        ports.entry(pk.clone()).or_insert(port);
        let set = by_port.entry(pk).or_default();
        let slot = set.entry(ak).or_insert(ready);
        *slot = *slot && ready;
    }
    // Ports served by exactly the same addresses (with the same readiness) share a subset.
    let mut groups: BTreeMap<Vec<(AddressKey, bool)>, Vec<Option<PortKey>>> = BTreeMap::new();
    for (pk, set) in by_port {
        groups
            .entry(set.into_iter().collect())
            .or_default()
            .push(pk);
    }
    let mut subsets: Vec<EndpointSubset> = groups
        .into_iter()
        .map(|(addrs, pks)| {
            let (mut ready, mut not_ready) = (Vec::new(), Vec::new());
            for (ak, is_ready) in addrs {
                if let Some(a) = addresses.get(&ak) {
                    if is_ready {
                        ready.push(a.clone());
                    } else {
                        not_ready.push(a.clone());
                    }
                }
            }
            let subset_ports: Vec<EndpointPort> = pks
                .iter()
                .filter_map(|pk| ports.get(pk).cloned().flatten())
                .collect();
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!subset_ports.is_empty()).then_some(subset_ports),
            }
        })
        .collect();
    // Deterministic subset order: by ports, then by first address.
    subsets.sort_by_key(|s| {
        let ports: Vec<PortKey> = s.ports.iter().flatten().map(port_key).collect();
        let first = s
            .addresses
            .iter()
            .chain(s.not_ready_addresses.iter())
            .flatten()
            .next()
            .map(address_key);
        (ports, first)
    });
    subsets
}

fn count(subsets: &[EndpointSubset]) -> (usize, usize) {
    subsets.iter().fold((0, 0), |(r, n), s| {
        (
            r + s.addresses.as_ref().map_or(0, Vec::len),
            n + s.not_ready_addresses.as_ref().map_or(0, Vec::len),
        )
    })
}

/// Total addresses, ready and not.
pub fn total_addresses(subsets: &[EndpointSubset]) -> usize {
    let (r, n) = count(subsets);
    r + n
}

/// `truncateEndpoints`: keep at most [`MAX_CAPACITY`] addresses, ready ones first, each subset
/// its proportional share (rounded up, the last ones getting what is left). `true` if truncated.
pub fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    let (ready, not_ready) = count(subsets);
    if ready + not_ready <= MAX_CAPACITY {
        return false;
    }
    let truncate_ready = ready > MAX_CAPACITY;
    let (max, total) = if truncate_ready {
        (MAX_CAPACITY, ready)
    } else {
        (MAX_CAPACITY - ready, not_ready)
    };
    let mut can_add = max;
    for s in subsets.iter_mut() {
        let list = if truncate_ready {
            &mut s.addresses
        } else {
            &mut s.not_ready_addresses
        };
        let n = list.as_ref().map_or(0, Vec::len);
        // ceil(n / total * max) in integers.
        let share = (n * max).div_ceil(total.max(1)).min(can_add);
        if let Some(v) = list.as_mut() {
            v.truncate(share);
        }
        can_add -= list.as_ref().map_or(0, Vec::len);
        if truncate_ready {
            s.not_ready_addresses = None;
        }
    }
    true
}

fn normalized(subsets: Option<&Vec<EndpointSubset>>) -> Vec<EndpointSubset> {
    let strip = |v: &Option<Vec<EndpointAddress>>| -> Option<Vec<EndpointAddress>> {
        let v: Vec<EndpointAddress> = v
            .iter()
            .flatten()
            .map(|a| EndpointAddress {
                target_ref: a.target_ref.as_ref().map(|r| ObjectReference {
                    resource_version: None,
                    ..r.clone()
                }),
                ..a.clone()
            })
            .collect();
        (!v.is_empty()).then_some(v)
    };
    subsets
        .into_iter()
        .flatten()
        .map(|s| EndpointSubset {
            addresses: strip(&s.addresses),
            not_ready_addresses: strip(&s.not_ready_addresses),
            ports: s.ports.clone().filter(|p| !p.is_empty()),
        })
        .collect()
}

/// `endpointSubsetsEqualIgnoreResourceVersion` (empty and absent lists are equal).
pub fn subsets_equal(a: Option<&Vec<EndpointSubset>>, b: &[EndpointSubset]) -> bool {
    normalized(a) == normalized(Some(&b.to_vec()))
}
