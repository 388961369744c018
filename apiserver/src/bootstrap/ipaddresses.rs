//! One `networking.k8s.io/v1` IPAddress per Service cluster IP, as Kubernetes 1.33's cluster-IP
//! allocator keeps them (`pkg/registry/core/service/ipallocator`, the `MultiCIDRServiceAllocator`
//! design): the object is named after the address, labelled
//! `ipaddress.kubernetes.io/ip-family` and `ipaddress.kubernetes.io/managed-by:
//! ipallocator.k8s.io`, and its `spec.parentRef` names the Service. `kubectl get ipaddresses`
//! shows what a real cluster shows.
//!
//! Here the allocator's authority stays the in-memory bitmap of [`ClusterIpAllocator`]
//! (`registry/strategy/ipalloc.rs`), which refuses a taken address before anything is stored; the
//! objects are its published record. One task per apiserver follows Services and IPAddresses in
//! the watch cache and, after each batch of events, brings the addresses those events touched in
//! step: a missing object is created, an object this allocator manages whose Service no longer
//! holds the address is deleted (upstream's release on Service delete, and its repair loop's
//! orphan sweep). IPAddresses created by others (no managed-by label) are never touched.
//! Deviation: upstream writes the IPAddress before the Service; here it appears right after.
//!
//! [`ClusterIpAllocator`]: crate::registry::strategy::ClusterIpAllocator

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use crate::registry::{DeleteOptions, Store, WriteOptions};
use crate::state::AppState;
use crate::watch_cache::{CacheEvent, EventType, WatchFrom, WatchStart};

const SERVICES: &str = "/registry/services/";
const IP_ADDRESSES: &str = "/registry/ipaddresses/";
/// `ipaddress.kubernetes.io/managed-by`.
pub const MANAGED_BY_LABEL: &str = "ipaddress.kubernetes.io/managed-by";
/// `ipaddress.kubernetes.io/ip-family`.
pub const IP_FAMILY_LABEL: &str = "ipaddress.kubernetes.io/ip-family";
/// The allocator's controller name (`ipallocator.ControllerName`).
pub const ALLOCATOR: &str = "ipallocator.k8s.io";

/// The Service (namespace, name) holding each address.
type Holders = BTreeMap<String, (String, String)>;

/// Follows Services and IPAddresses until shutdown, keeping one IPAddress per cluster IP.
pub fn keep_in_step(state: &AppState) {
    let state = state.clone();
    tokio::spawn(async move {
        loop {
            let (Some(mut svcs), Some(mut ips)) =
                (watch(&state, SERVICES), watch(&state, IP_ADDRESSES))
            else {
                return;
            };
            let mut wanted = Holders::new();
            let mut recorded = Holders::new();
            let mut touched = BTreeSet::new();
            for ev in svcs.initial.drain(..) {
                service_event(&mut wanted, &mut touched, &ev);
            }
            for ev in ips.initial.drain(..) {
                address_event(&mut recorded, &mut touched, &ev);
            }
            loop {
                reconcile(&state, &wanted, &recorded, std::mem::take(&mut touched)).await;
                tokio::select! {
                    _ = state.shutdown.cancelled() => return,
                    ev = svcs.rx.recv() => match ev {
                        Some(ev) => service_event(&mut wanted, &mut touched, &ev),
                        None => break,
                    },
                    ev = ips.rx.recv() => match ev {
                        Some(ev) => address_event(&mut recorded, &mut touched, &ev),
                        None => break,
                    },
                }
                // Take what else is queued, so a burst is reconciled once.
                while let Ok(ev) = svcs.rx.try_recv() {
                    service_event(&mut wanted, &mut touched, &ev);
                }
                while let Ok(ev) = ips.rx.try_recv() {
                    address_event(&mut recorded, &mut touched, &ev);
                }
            }
            // Dropped by the cache (behind, or relisted): start again from a snapshot.
            tokio::select! {
                _ = state.shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    });
}

fn watch(state: &AppState, prefix: &str) -> Option<crate::watch_cache::CacheWatch> {
    match state.cache.watch(prefix, WatchFrom::Snapshot) {
        WatchStart::Watching(w) => Some(w),
        WatchStart::Expired { .. } => None,
    }
}

/// A Service's cluster IPs (`None` and empty are not addresses).
fn cluster_ips(svc: &Value) -> Vec<String> {
    let spec = svc.get("spec");
    let ips: Vec<&str> = match spec
        .and_then(|s| s.get("clusterIPs"))
        .and_then(Value::as_array)
    {
        Some(list) => list.iter().filter_map(Value::as_str).collect(),
        None => spec
            .and_then(|s| s.get("clusterIP"))
            .and_then(Value::as_str)
            .into_iter()
            .collect(),
    };
    ips.into_iter()
        .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok())
        .map(String::from)
        .collect()
}

fn service_event(wanted: &mut Holders, touched: &mut BTreeSet<String>, ev: &CacheEvent) {
    let ns = api::meta::namespace(&ev.object).unwrap_or("").to_string();
    let name = api::meta::name(&ev.object).unwrap_or("").to_string();
    for old in ev.prev().iter().flat_map(|p| cluster_ips(p)) {
        if wanted.get(&old) == Some(&(ns.clone(), name.clone())) {
            wanted.remove(&old);
        }
        touched.insert(old);
    }
    for ip in cluster_ips(&ev.object) {
        if ev.kind == EventType::Deleted {
            if wanted.get(&ip) == Some(&(ns.clone(), name.clone())) {
                wanted.remove(&ip);
            }
        } else {
            wanted.insert(ip.clone(), (ns.clone(), name.clone()));
        }
        touched.insert(ip);
    }
}

fn address_event(recorded: &mut Holders, touched: &mut BTreeSet<String>, ev: &CacheEvent) {
    let ip = api::meta::name(&ev.object).unwrap_or("").to_string();
    let managed = ev
        .object
        .pointer(&format!(
            "/metadata/labels/{}",
            MANAGED_BY_LABEL.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        == Some(ALLOCATOR);
    let parent = ev.object.pointer("/spec/parentRef");
    let field = |k: &str| {
        parent
            .and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if ev.kind == EventType::Deleted {
        recorded.remove(&ip);
    } else if managed && field("resource") == "services" && field("group").is_empty() {
        recorded.insert(ip.clone(), (field("namespace"), field("name")));
    } else {
        // Someone else's address: never ours to delete, and it holds the name.
        recorded.insert(ip.clone(), (String::new(), String::new()));
    }
    touched.insert(ip);
}

/// The IPAddress of `ip` held by Service `ns/name`.
pub fn ip_address(ip: &str, ns: &str, name: &str) -> Value {
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    json!({
        "metadata": {
            "name": ip,
            "labels": { IP_FAMILY_LABEL: family, MANAGED_BY_LABEL: ALLOCATOR },
        },
        "spec": {
            "parentRef": { "group": "", "resource": "services", "namespace": ns, "name": name },
        },
    })
}

async fn reconcile(
    state: &AppState,
    wanted: &Holders,
    recorded: &Holders,
    touched: BTreeSet<String>,
) {
    if touched.is_empty() {
        return;
    }
    let Some(resource) = state
        .resources
        .find("networking.k8s.io", "v1", "ipaddresses")
    else {
        return;
    };
    let store = Store::new(state, resource, None);
    let opts = WriteOptions {
        field_manager: "kube-apiserver".to_string(),
        ..WriteOptions::default()
    };
    for ip in touched {
        let want = wanted.get(&ip);
        let have = recorded.get(&ip);
        // A record with a Service is ours (managed by this allocator); an empty one is foreign.
        let ours = have.is_some_and(|(_, name)| !name.is_empty());
        let result = match (want, have) {
            (Some(w), Some(h)) if w == h => Ok(()),
            (Some((ns, name)), None) => store
                .create(ip_address(&ip, ns, name), &opts)
                .await
                .map(|_| ()),
            // Released, or held for another Service: deleted; the delete's event touches the
            // address again and the holder's object is created then.
            (_, Some(_)) if ours => store
                .delete(&ip, &DeleteOptions::default())
                .await
                .map(|_| ()),
            // Nothing wanted and nothing recorded, or someone else's object.
            _ => Ok(()),
        };
        match result {
            Ok(()) => {}
            // A concurrent writer (another apiserver, or our own delete still in flight).
            Err(e) if matches!(e.code(), 404 | 409) => {}
            Err(e) => tracing::warn!(%ip, error = %e, "keeping the IPAddress in step failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ips_skip_headless_and_read_both_fields() {
        let svc =
            json!({"spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00::a"]}});
        assert_eq!(cluster_ips(&svc), ["10.96.0.10", "fd00::a"]);
        assert!(
            cluster_ips(&json!({"spec": {"clusterIP": "None", "clusterIPs": ["None"]}})).is_empty()
        );
        assert_eq!(
            cluster_ips(&json!({"spec": {"clusterIP": "10.96.0.2"}})),
            ["10.96.0.2"]
        );
        assert!(cluster_ips(&json!({"spec": {"type": "ExternalName"}})).is_empty());
    }

    #[test]
    fn the_object_names_its_service() {
        let ip = ip_address("10.96.0.10", "default", "web");
        assert_eq!(ip["metadata"]["labels"][IP_FAMILY_LABEL], "IPv4");
        assert_eq!(ip["metadata"]["labels"][MANAGED_BY_LABEL], ALLOCATOR);
        assert_eq!(
            ip["spec"]["parentRef"],
            json!({"group": "", "resource": "services", "namespace": "default", "name": "web"})
        );
        assert_eq!(
            ip_address("fd00::a", "d", "w")["metadata"]["labels"][IP_FAMILY_LABEL],
            "IPv6"
        );
    }
}
