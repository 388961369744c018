//! EndpointSlice endpoints as a set (`endpointslice/util.EndpointSet`, `NewPortMapKey`,
//! `EndpointsEqualBeyondHash`).
//!
//! An endpoint's identity is what upstream hashes: its sorted addresses, its hostname and its
//! target's namespace and name. Two endpoints with one identity are "the same endpoint", and a
//! difference in anything else (node, zone, conditions, target UID) is an in-place update. A
//! group of slices shares one port list; [`PortMapKey`] is that list sorted, so the order a
//! Service lists its ports in never splits a group. The set is ordered by identity, so the
//! reconcilers fill slices in a deterministic order (upstream pops in Go's random map order).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort};

/// An endpoint's identity (`hashEndpoint`'s input).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointKey {
    addresses: Vec<String>,
    hostname: String,
    namespace: String,
    name: String,
}

impl EndpointKey {
    pub fn of(ep: &Endpoint) -> Self {
        let mut addresses = ep.addresses.clone();
        addresses.sort();
        let (namespace, name) = ep
            .target_ref
            .as_ref()
            .map(|r| {
                (
                    r.namespace.clone().unwrap_or_default(),
                    r.name.clone().unwrap_or_default(),
                )
            })
            .unwrap_or_default();
        EndpointKey {
            addresses,
            hostname: ep.hostname.clone().unwrap_or_default(),
            namespace,
            name,
        }
    }
}

/// Desired endpoints by identity (`EndpointSet`).
#[derive(Debug, Default, Clone)]
pub struct EndpointSet {
    items: BTreeMap<EndpointKey, Endpoint>,
}

impl EndpointSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, ep: Endpoint) {
        self.items.insert(EndpointKey::of(&ep), ep);
    }

    /// The desired endpoint with `ep`'s identity.
    pub fn get(&self, ep: &Endpoint) -> Option<&Endpoint> {
        self.items.get(&EndpointKey::of(ep))
    }

    /// Remove and return the desired endpoint with `ep`'s identity.
    pub fn take(&mut self, ep: &Endpoint) -> Option<Endpoint> {
        self.items.remove(&EndpointKey::of(ep))
    }

    /// Remove and return the first endpoint (`PopAny`).
    pub fn pop(&mut self) -> Option<Endpoint> {
        self.items.pop_first().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// A port list's identity regardless of order (`PortMapKey`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortMapKey(Vec<(String, i32, String, String)>);

impl PortMapKey {
    pub fn of(ports: &[EndpointPort]) -> Self {
        let mut v: Vec<_> = ports
            .iter()
            .map(|p| {
                (
                    p.name.clone().unwrap_or_default(),
                    p.port.unwrap_or(0),
                    p.protocol.clone().unwrap_or_default(),
                    p.app_protocol.clone().unwrap_or_default(),
                )
            })
            .collect();
        v.sort();
        PortMapKey(v)
    }
}

fn without_resource_version(r: Option<&ObjectReference>) -> Option<ObjectReference> {
    r.map(|r| ObjectReference {
        resource_version: None,
        ..r.clone()
    })
}

/// `EndpointsEqualBeyondHash`: node, zone, the three conditions and the target (but for its
/// resourceVersion) are equal.
pub fn endpoints_equal_beyond_hash(a: &Endpoint, b: &Endpoint) -> bool {
    let cond = |e: &Endpoint| {
        let c = e.conditions.clone().unwrap_or_default();
        (c.ready, c.serving, c.terminating)
    };
    a.node_name == b.node_name
        && a.zone == b.zone
        && cond(a) == cond(b)
        && without_resource_version(a.target_ref.as_ref())
            == without_resource_version(b.target_ref.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::EndpointConditions;

    fn ep(addrs: &[&str], pod: &str, ready: bool) -> Endpoint {
        Endpoint {
            addresses: addrs.iter().map(|s| s.to_string()).collect(),
            conditions: Some(EndpointConditions {
                ready: Some(ready),
                ..Default::default()
            }),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some("default".into()),
                name: Some(pod.into()),
                resource_version: Some("1".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn identity_ignores_conditions_and_address_order() {
        let mut set = EndpointSet::new();
        set.insert(ep(&["10.0.0.2", "10.0.0.1"], "a", true));
        let other = ep(&["10.0.0.1", "10.0.0.2"], "a", false);
        let got = set.get(&other).cloned();
        assert!(got.is_some());
        assert!(!endpoints_equal_beyond_hash(
            got.as_ref().unwrap_or(&other),
            &other
        ));
        let mut newer = ep(&["10.0.0.1", "10.0.0.2"], "a", true);
        if let Some(r) = newer.target_ref.as_mut() {
            r.resource_version = Some("9".into());
        }
        assert!(endpoints_equal_beyond_hash(
            got.as_ref().unwrap_or(&other),
            &newer
        ));
        assert!(set.get(&ep(&["10.0.0.1"], "a", true)).is_none());
        assert_eq!(set.take(&other).map(|e| e.addresses.len()), Some(2));
        assert!(set.is_empty());
    }

    #[test]
    fn port_order_does_not_matter() {
        let p = |n: &str, port| EndpointPort {
            name: Some(n.into()),
            port: Some(port),
            protocol: Some("TCP".into()),
            ..Default::default()
        };
        assert_eq!(
            PortMapKey::of(&[p("a", 1), p("b", 2)]),
            PortMapKey::of(&[p("b", 2), p("a", 1)])
        );
        assert_ne!(PortMapKey::of(&[p("a", 1)]), PortMapKey::of(&[p("a", 2)]));
    }
}
