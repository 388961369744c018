//! The EndpointSlice reconciler's decisions (`k8s.io/endpointslice/reconciler.go`): from a
//! Service, the pods it selects and its existing slices, which slices to create, update and
//! delete. Pure: node zones come through a lookup, and the controller performs the plan.
//!
//! Per address type of the Service (slices of other types are deleted), pods are grouped by the
//! port list they resolve to; each group is reconciled against the existing slices with the same
//! ports with minimal churn:
//! 1. in every existing slice, endpoints no longer desired are dropped and changed ones updated in
//!    place; a slice left empty is deleted, a changed one updated (so is one whose Service labels
//!    changed), an untouched one kept as is;
//! 2. the remaining new endpoints fill the slices already being updated, fullest first;
//! 3. what is left goes into the unchanged slice that would end up closest to full (only when
//!    less than a slice's worth remains), else into new slices of at most `max` endpoints.
//!
//! Slices of port lists no longer desired are deleted. If nothing would be left, one empty
//! placeholder slice is kept (or created). Finally creates are turned into updates of slices
//! that would otherwise be deleted (same Service, same address type), so a change of ports
//! rewrites a slice instead of replacing it.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};

use super::slices::{
    address_types_for_service, endpoint_ports, endpoint_slice_labels, new_endpoint_slice, owned_by,
    pod_to_endpoint, slice_to_fill,
};
use crate::cached_pod::CachedPod;
use crate::endpointutil::endpoint_set::{endpoints_equal_beyond_hash, EndpointSet, PortMapKey};
use crate::endpointutil::pod::{publish_not_ready, should_pod_be_in_endpoints};

/// What a node lookup found: the node's zone label (if any), or no such node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeInfo {
    Found(Option<String>),
    Missing,
}

/// The writes a reconcile decided on, in the order they are to be made.
#[derive(Debug, Default)]
pub struct Plan {
    pub create: Vec<EndpointSlice>,
    pub update: Vec<EndpointSlice>,
    pub delete: Vec<EndpointSlice>,
    /// Pods skipped because their node is not (yet) known: the sync is retried.
    pub missing_nodes: Vec<String>,
}

/// The reconciler's fixed parameters.
#[derive(Debug, Clone)]
pub struct Reconciler {
    /// `--max-endpoints-per-slice` (100).
    pub max_endpoints_per_slice: usize,
    /// The `endpointslice.kubernetes.io/managed-by` value.
    pub managed_by: String,
}

/// Desired endpoints of one port list.
struct Group {
    ports: Vec<EndpointPort>,
    endpoints: EndpointSet,
}

impl Reconciler {
    /// `Reconcile`.
    pub fn reconcile<P: AsRef<CachedPod>>(
        &self,
        svc: &Service,
        pods: &[P],
        existing: &[&EndpointSlice],
        node: &dyn Fn(&str) -> NodeInfo,
    ) -> Plan {
        let types = address_types_for_service(svc);
        let mut plan = Plan::default();
        let mut unsupported = Vec::new();
        for t in &types {
            let of_type: Vec<&EndpointSlice> = existing
                .iter()
                .copied()
                .filter(|s| s.address_type == *t)
                .collect();
            let p = self.reconcile_address_type(svc, pods, &of_type, t, node);
            plan.create.extend(p.create);
            plan.update.extend(p.update);
            plan.delete.extend(p.delete);
            plan.missing_nodes.extend(p.missing_nodes);
        }
        for s in existing {
            if !types.contains(&s.address_type.as_str()) {
                unsupported.push((*s).clone());
            }
        }
        plan.delete.extend(unsupported);
        plan.missing_nodes.sort();
        plan.missing_nodes.dedup();
        plan
    }

    fn desired_groups<P: AsRef<CachedPod>>(
        &self,
        svc: &Service,
        pods: &[P],
        address_type: &str,
        node: &dyn Fn(&str) -> NodeInfo,
        missing: &mut Vec<String>,
    ) -> BTreeMap<PortMapKey, Group> {
        let mut groups: BTreeMap<PortMapKey, Group> = BTreeMap::new();
        for pod in pods {
            let pod = pod.as_ref();
            if !should_pod_be_in_endpoints(pod, true) {
                continue;
            }
            let ports = endpoint_ports(svc, pod);
            let key = PortMapKey::of(&ports);
            let group = groups.entry(key).or_insert_with(|| Group {
                ports,
                endpoints: EndpointSet::new(),
            });
            let node_name = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or("");
            let zone = match node(node_name) {
                NodeInfo::Found(z) => z,
                NodeInfo::Missing if publish_not_ready(svc) => None,
                NodeInfo::Missing => {
                    missing.push(format!(
                        "skipping Pod {} for Service {}/{}: Node {} Not Found",
                        pod.metadata.name.as_deref().unwrap_or_default(),
                        svc.metadata.namespace.as_deref().unwrap_or_default(),
                        svc.metadata.name.as_deref().unwrap_or_default(),
                        node_name
                    ));
                    continue;
                }
            };
            let ep = pod_to_endpoint(pod, zone.as_deref(), svc, address_type);
            if !ep.addresses.is_empty() {
                group.endpoints.insert(ep);
            }
        }
        groups
    }

    /// `reconcileByAddressType` and the recycling step of `finalize`.
    fn reconcile_address_type<P: AsRef<CachedPod>>(
        &self,
        svc: &Service,
        pods: &[P],
        existing: &[&EndpointSlice],
        address_type: &str,
        node: &dyn Fn(&str) -> NodeInfo,
    ) -> Plan {
        let mut plan = Plan::default();
        let mut by_ports: BTreeMap<PortMapKey, Vec<&EndpointSlice>> = BTreeMap::new();
        for s in existing {
            if owned_by(s, svc) {
                by_ports
                    .entry(PortMapKey::of(s.ports.as_deref().unwrap_or(&[])))
                    .or_default()
                    .push(s);
            } else {
                plan.delete.push((*s).clone());
            }
        }
        let groups = self.desired_groups(svc, pods, address_type, node, &mut plan.missing_nodes);
        for (key, group) in &groups {
            let slices = by_ports.get(key).map(Vec::as_slice).unwrap_or(&[]);
            let (c, u, d) = self.reconcile_port_mapping(svc, slices, group, address_type);
            plan.create.extend(c);
            plan.update.extend(u);
            plan.delete.extend(d);
        }
        for (key, slices) in &by_ports {
            if !groups.contains_key(key) {
                plan.delete.extend(slices.iter().map(|s| (*s).clone()));
            }
        }
        if existing.len() == plan.delete.len() && plan.create.is_empty() {
            let placeholder = new_endpoint_slice(svc, &[], address_type, &self.managed_by);
            if plan.delete.len() == 1 && is_same_placeholder(&plan.delete[0], &placeholder) {
                plan.delete.clear();
            } else {
                plan.create.push(placeholder);
            }
        }
        recycle(svc, &mut plan);
        plan
    }

    /// `reconcileByPortMapping`: (create, update, delete) for one port list.
    fn reconcile_port_mapping(
        &self,
        svc: &Service,
        existing: &[&EndpointSlice],
        group: &Group,
        address_type: &str,
    ) -> (Vec<EndpointSlice>, Vec<EndpointSlice>, Vec<EndpointSlice>) {
        let max = self.max_endpoints_per_slice.max(1);
        let mut desired = group.endpoints.clone();
        let mut by_name: BTreeMap<String, EndpointSlice> = BTreeMap::new();
        let mut unchanged: BTreeSet<String> = BTreeSet::new();
        let mut to_update: BTreeSet<String> = BTreeSet::new();
        let mut to_delete: BTreeSet<String> = BTreeSet::new();
        // 1. Drop endpoints no longer desired, update changed ones in place.
        for s in existing {
            let name = s.metadata.name.clone().unwrap_or_default();
            let mut kept = Vec::with_capacity(s.endpoints.len());
            let mut updated = false;
            for ep in &s.endpoints {
                if let Some(want) = desired.take(ep) {
                    if !endpoints_equal_beyond_hash(&want, ep) {
                        updated = true;
                    }
                    kept.push(want);
                }
            }
            let (labels, labels_changed) = endpoint_slice_labels(s, svc, &self.managed_by);
            if updated || kept.len() != s.endpoints.len() {
                if kept.is_empty() {
                    to_delete.insert(name.clone());
                    by_name.insert(name, (*s).clone());
                } else {
                    let mut copy = (*s).clone();
                    copy.endpoints = kept;
                    copy.metadata.labels = Some(labels);
                    by_name.insert(name.clone(), copy);
                    to_update.insert(name);
                }
            } else if labels_changed {
                let mut copy = (*s).clone();
                copy.metadata.labels = Some(labels);
                by_name.insert(name.clone(), copy);
                to_update.insert(name);
            } else {
                by_name.insert(name.clone(), (*s).clone());
                unchanged.insert(name);
            }
        }
        // 2. Fill the slices being updated, fullest first.
        if !desired.is_empty() && !to_update.is_empty() {
            let mut names: Vec<&String> = to_update.iter().collect();
            names.sort_by_key(|n| {
                std::cmp::Reverse(by_name.get(*n).map_or(0, |s| s.endpoints.len()))
            });
            for n in names {
                let Some(s) = by_name.get_mut(n) else {
                    continue;
                };
                while s.endpoints.len() < max {
                    let Some(ep) = desired.pop() else { break };
                    s.endpoints.push(ep);
                }
            }
        }
        // 3. The rest: into the unchanged slice closest to full, else into new slices.
        let mut create = Vec::new();
        while !desired.is_empty() {
            let fill = if desired.len() < max && !unchanged.is_empty() {
                slice_to_fill(
                    unchanged.iter().filter_map(|n| by_name.get(n)),
                    desired.len(),
                    max,
                )
                .and_then(|s| s.metadata.name.clone())
            } else {
                None
            };
            let mut slice = match &fill {
                Some(name) => by_name.get(name).cloned().unwrap_or_default(),
                None => new_endpoint_slice(svc, &group.ports, address_type, &self.managed_by),
            };
            while slice.endpoints.len() < max {
                let Some(ep) = desired.pop() else { break };
                slice.endpoints.push(ep);
            }
            match fill {
                Some(name) => {
                    unchanged.remove(&name);
                    to_update.insert(name.clone());
                    by_name.insert(name, slice);
                }
                None => create.push(slice),
            }
        }
        let pick = |names: &BTreeSet<String>| -> Vec<EndpointSlice> {
            names
                .iter()
                .filter_map(|n| by_name.get(n).cloned())
                .collect()
        };
        (create, pick(&to_update), pick(&to_delete))
    }
}

/// `placeholderSliceCompare`: same namespace, labels, owners, address type, and no endpoints or
/// ports.
fn is_same_placeholder(a: &EndpointSlice, placeholder: &EndpointSlice) -> bool {
    let ports_empty = |s: &EndpointSlice| s.ports.as_ref().is_none_or(Vec::is_empty);
    a.metadata.namespace == placeholder.metadata.namespace
        && a.metadata.labels.clone().unwrap_or_default()
            == placeholder.metadata.labels.clone().unwrap_or_default()
        && a.metadata.owner_references.clone().unwrap_or_default()
            == placeholder
                .metadata
                .owner_references
                .clone()
                .unwrap_or_default()
        && a.address_type == placeholder.address_type
        && a.endpoints.is_empty()
        && ports_empty(a)
}

/// `finalize`'s first step: a slice to create takes the name of a slice to delete (same address
/// type, owned by this Service) and becomes an update.
fn recycle(svc: &Service, plan: &mut Plan) {
    let mut i = 0;
    while i < plan.delete.len() {
        let Some(last) = plan.create.last() else {
            break;
        };
        let victim = &plan.delete[i];
        if victim.address_type == last.address_type && owned_by(victim, svc) {
            let victim = plan.delete.remove(i);
            if let Some(mut slice) = plan.create.pop() {
                slice.metadata.name = victim.metadata.name.clone();
                slice.metadata.resource_version = victim.metadata.resource_version.clone();
                slice.metadata.uid = victim.metadata.uid.clone();
                plan.update.push(slice);
            }
        } else {
            i += 1;
        }
    }
}
