//! The mirroring reconciler's decisions (`endpointslicemirroring/reconciler.go`,
//! `reconciler_helpers.go`, `utils.go`): from an Endpoints object and the slices already mirrored
//! from it, which slices to create, update and delete. Pure.
//!
//! The Endpoints' subsets are first repacked into their canonical form. Each subset maps to one
//! slice per address family (its ports, its addresses of that family): ready addresses as
//! `ready: true`, not-ready ones as `ready: false`, at most `max_per_subset` (1,000) addresses per
//! subset, invalid IPs skipped — both counted for the events. Per (family, ports) the first
//! existing slice is kept and rewritten only if its endpoints, labels or annotations differ;
//! further ones are deleted, as are slices whose (family, ports) are no longer wanted. Creates are
//! turned into updates of slices to delete of the same family. A mirrored slice carries the
//! Endpoints' labels and annotations (but for the trigger time and kubectl's last-applied
//! configuration), `kubernetes.io/service-name`, the mirroring controller's `managed-by`, and an
//! owner reference to the Endpoints.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::endpoint::subsets::repack_subsets;
use crate::endpointslice::slices::{slice_prefix, IPV4, IPV6};
use crate::endpointutil::endpoint_set::{endpoints_equal_beyond_hash, EndpointSet, PortMapKey};
use crate::endpointutil::{
    ANNOTATION_LAST_APPLIED, ANNOTATION_TRIGGER_TIME, LABEL_MANAGED_BY, LABEL_SERVICE_NAME,
};

/// The writes decided on, and what was skipped (for the events).
#[derive(Debug, Default)]
pub struct Plan {
    pub create: Vec<EndpointSlice>,
    pub update: Vec<EndpointSlice>,
    pub delete: Vec<EndpointSlice>,
    /// Addresses that are not IPs (`InvalidIPAddress`).
    pub invalid: usize,
    /// Addresses skipped for any reason, invalid ones included (`TooManyAddressesToMirror` when
    /// more than the invalid ones).
    pub skipped: usize,
}

type Key = (&'static str, PortMapKey);

struct Desired {
    ports: Vec<EndpointPort>,
    endpoints: EndpointSet,
}

/// `addressToEndpoint`: `None` for an address that is not an IP.
fn address_to_endpoint(a: &EndpointAddress, ready: bool) -> Option<(Endpoint, &'static str)> {
    let ip: IpAddr = a.ip.parse().ok()?;
    let family = if ip.is_ipv6() { IPV6 } else { IPV4 };
    Some((
        Endpoint {
            addresses: vec![ip.to_string()],
            conditions: Some(EndpointConditions {
                ready: Some(ready),
                ..Default::default()
            }),
            target_ref: a.target_ref.clone(),
            node_name: a.node_name.clone(),
            hostname: a.hostname.clone().filter(|h| !h.is_empty()),
            ..Default::default()
        },
        family,
    ))
}

fn eps_ports(ports: Option<&Vec<k8s_openapi::api::core::v1::EndpointPort>>) -> Vec<EndpointPort> {
    ports
        .into_iter()
        .flatten()
        .map(|p| EndpointPort {
            name: Some(p.name.clone().unwrap_or_default()),
            port: Some(p.port),
            protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
            app_protocol: p.app_protocol.clone(),
        })
        .collect()
}

fn without(m: Option<&BTreeMap<String, String>>, keys: &[&str]) -> BTreeMap<String, String> {
    m.into_iter()
        .flatten()
        .filter(|(k, _)| !keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `newEndpointSlice` of the mirroring controller.
pub fn new_mirrored_slice(
    ep: &Endpoints,
    ports: &[EndpointPort],
    address_type: &str,
    name: Option<String>,
    managed_by: &str,
) -> EndpointSlice {
    let ep_name = ep.metadata.name.clone().unwrap_or_default();
    let mut labels = ep.metadata.labels.clone().unwrap_or_default();
    labels.insert(LABEL_SERVICE_NAME.into(), ep_name.clone());
    labels.insert(LABEL_MANAGED_BY.into(), managed_by.into());
    let annotations = without(
        ep.metadata.annotations.as_ref(),
        &[ANNOTATION_TRIGGER_TIME, ANNOTATION_LAST_APPLIED],
    );
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: name.is_none().then(|| slice_prefix(&ep_name)),
            name,
            namespace: ep.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Endpoints".into(),
                name: ep_name,
                uid: ep.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        address_type: address_type.to_string(),
        endpoints: Vec::new(),
        ports: Some(ports.to_vec()),
    }
}

/// `reconcile`: the plan for `ep` given the slices mirrored from it.
pub fn reconcile(
    ep: &Endpoints,
    existing: &[&EndpointSlice],
    max_per_subset: usize,
    managed_by: &str,
) -> Plan {
    let mut plan = Plan::default();
    let mut desired: BTreeMap<Key, Desired> = BTreeMap::new();
    for subset in repack_subsets(ep.subsets.as_deref().unwrap_or(&[])) {
        let ports = eps_ports(subset.ports.as_ref());
        let pk = PortMapKey::of(&ports);
        for t in [IPV4, IPV6] {
            desired.entry((t, pk.clone())).or_insert_with(|| Desired {
                ports: ports.clone(),
                endpoints: EndpointSet::new(),
            });
        }
        let total = subset.addresses.as_ref().map_or(0, Vec::len)
            + subset.not_ready_addresses.as_ref().map_or(0, Vec::len);
        let mut added = 0;
        let lists = [
            (&subset.addresses, true),
            (&subset.not_ready_addresses, false),
        ];
        'subset: for (list, ready) in lists {
            for a in list.iter().flatten() {
                if added >= max_per_subset {
                    break 'subset;
                }
                match address_to_endpoint(a, ready) {
                    Some((e, t)) => {
                        if let Some(d) = desired.get_mut(&(t, pk.clone())) {
                            d.endpoints.insert(e);
                        }
                        added += 1;
                    }
                    None => plan.invalid += 1,
                }
            }
        }
        plan.skipped += total - added;
    }
    let mut by_key: BTreeMap<Key, Vec<&EndpointSlice>> = BTreeMap::new();
    for s in existing {
        let t = if s.address_type == IPV6 { IPV6 } else { IPV4 };
        by_key
            .entry((t, PortMapKey::of(s.ports.as_deref().unwrap_or(&[]))))
            .or_default()
            .push(s);
    }
    for (key, d) in desired.iter_mut() {
        let slices = by_key.get(key).map(Vec::as_slice).unwrap_or(&[]);
        reconcile_port_mapping(ep, slices, d, key.0, max_per_subset, managed_by, &mut plan);
    }
    for (key, slices) in &by_key {
        if !desired.contains_key(key) {
            plan.delete.extend(slices.iter().map(|s| (*s).clone()));
        }
    }
    recycle(&mut plan);
    plan
}

/// `reconcileByPortMapping`.
fn reconcile_port_mapping(
    ep: &Endpoints,
    existing: &[&EndpointSlice],
    d: &mut Desired,
    address_type: &str,
    max: usize,
    managed_by: &str,
    plan: &mut Plan,
) {
    if d.endpoints.is_empty() {
        plan.delete.extend(existing.iter().map(|s| (*s).clone()));
        return;
    }
    let mut name = None;
    if let Some((first, rest)) = existing.split_first() {
        plan.delete.extend(rest.iter().map(|s| (*s).clone()));
        let same_endpoints = first.endpoints.len() == d.endpoints.len()
            && first.endpoints.iter().all(|e| {
                d.endpoints
                    .get(e)
                    .is_some_and(|w| endpoints_equal_beyond_hash(w, e))
            });
        let labels = without(
            first.metadata.labels.as_ref(),
            &[LABEL_MANAGED_BY, LABEL_SERVICE_NAME],
        );
        let want_annotations = without(
            ep.metadata.annotations.as_ref(),
            &[ANNOTATION_TRIGGER_TIME, ANNOTATION_LAST_APPLIED],
        );
        if same_endpoints
            && labels == ep.metadata.labels.clone().unwrap_or_default()
            && want_annotations == first.metadata.annotations.clone().unwrap_or_default()
        {
            return;
        }
        name = first.metadata.name.clone();
    }
    let mut slice = new_mirrored_slice(ep, &d.ports, address_type, name.clone(), managed_by);
    while slice.endpoints.len() < max.max(1) {
        let Some(e) = d.endpoints.pop() else { break };
        slice.endpoints.push(e);
    }
    if name.is_some() {
        plan.update.push(slice);
    } else {
        plan.create.push(slice);
    }
}

/// `recycleSlices`: per address type, creates take the names of slices to delete.
fn recycle(plan: &mut Plan) {
    let mut i = 0;
    while i < plan.create.len() {
        let t = plan.create[i].address_type.clone();
        match plan.delete.iter().position(|d| d.address_type == t) {
            Some(j) => {
                let victim = plan.delete.remove(j);
                let mut slice = plan.create.remove(i);
                slice.metadata.name = victim.metadata.name.clone();
                slice.metadata.generate_name = None;
                plan.update.push(slice);
            }
            None => i += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::EndpointSubset;

    const MB: &str = "endpointslicemirroring-controller.k8s.io";

    fn endpoints(ready: &[&str], not_ready: &[&str]) -> Endpoints {
        let addrs = |v: &[&str]| -> Option<Vec<EndpointAddress>> {
            (!v.is_empty()).then(|| {
                v.iter()
                    .map(|ip| EndpointAddress {
                        ip: ip.to_string(),
                        ..Default::default()
                    })
                    .collect()
            })
        };
        let mut e = Endpoints::default();
        e.metadata.name = Some("ext".into());
        e.metadata.namespace = Some("default".into());
        e.metadata.uid = Some("ep-uid".into());
        e.metadata.labels = Some(BTreeMap::from([("a".to_string(), "b".to_string())]));
        e.metadata.annotations = Some(BTreeMap::from([
            ("note".to_string(), "x".to_string()),
            (ANNOTATION_LAST_APPLIED.to_string(), "{}".to_string()),
        ]));
        e.subsets = Some(vec![EndpointSubset {
            addresses: addrs(ready),
            not_ready_addresses: addrs(not_ready),
            ports: Some(vec![k8s_openapi::api::core::v1::EndpointPort {
                name: Some("http".into()),
                port: 80,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
        }]);
        e
    }

    fn named(mut v: Vec<EndpointSlice>) -> Vec<EndpointSlice> {
        for (i, s) in v.iter_mut().enumerate() {
            s.metadata.name = Some(format!("ext-{i}"));
        }
        v
    }

    #[test]
    fn mirrors_addresses_with_readiness_labels_and_owner() {
        let e = endpoints(&["10.1.0.1", "10.1.0.2"], &["10.1.0.3", "fd00::1", "bogus"]);
        let plan = reconcile(&e, &[], 1000, MB);
        assert_eq!((plan.invalid, plan.skipped), (1, 1));
        assert_eq!(plan.create.len(), 2);
        let v4 = plan
            .create
            .iter()
            .find(|s| s.address_type == "IPv4")
            .unwrap();
        let ready: Vec<_> = v4
            .endpoints
            .iter()
            .map(|e| {
                (
                    e.addresses[0].as_str(),
                    e.conditions.as_ref().unwrap().ready,
                )
            })
            .collect();
        assert_eq!(
            ready,
            [
                ("10.1.0.1", Some(true)),
                ("10.1.0.2", Some(true)),
                ("10.1.0.3", Some(false))
            ]
        );
        let labels = v4.metadata.labels.clone().unwrap();
        assert_eq!(
            labels.get(LABEL_SERVICE_NAME).map(String::as_str),
            Some("ext")
        );
        assert_eq!(labels.get(LABEL_MANAGED_BY).map(String::as_str), Some(MB));
        assert_eq!(labels.get("a").map(String::as_str), Some("b"));
        let ann = v4.metadata.annotations.clone().unwrap();
        assert!(ann.contains_key("note") && !ann.contains_key(ANNOTATION_LAST_APPLIED));
        let owner = &v4.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Endpoints", "ep-uid")
        );
    }

    #[test]
    fn unchanged_is_left_alone_and_changes_rewrite_the_first_slice() {
        let e = endpoints(&["10.1.0.1"], &[]);
        let slices = named(reconcile(&e, &[], 1000, MB).create);
        let refs: Vec<&EndpointSlice> = slices.iter().collect();
        let again = reconcile(&e, &refs, 1000, MB);
        assert!(again.create.is_empty() && again.update.is_empty() && again.delete.is_empty());
        let changed = endpoints(&["10.1.0.1", "10.1.0.9"], &[]);
        let plan = reconcile(&changed, &refs, 1000, MB);
        assert_eq!((plan.create.len(), plan.update.len()), (0, 1));
        assert_eq!(plan.update[0].endpoints.len(), 2);
        let emptied = endpoints(&[], &[]);
        let plan = reconcile(&emptied, &refs, 1000, MB);
        assert_eq!(plan.delete.len(), 1);
    }

    #[test]
    fn at_most_max_per_subset() {
        let ips: Vec<String> = (0..5).map(|i| format!("10.2.0.{i}")).collect();
        let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
        let plan = reconcile(&endpoints(&refs, &[]), &[], 3, MB);
        assert_eq!((plan.skipped, plan.invalid), (2, 0));
        assert_eq!(plan.create[0].endpoints.len(), 3);
    }
}
