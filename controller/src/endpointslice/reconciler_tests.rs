//! Unit tests of the EndpointSlice reconciler: conditions, zones, ports, packing, minimal churn,
//! placeholders, recycling and address types.

use crate::cached_pod::CachedPod;
use crate::cached_pod::CachedPodSpec;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PodIP, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::reconciler::{NodeInfo, Plan, Reconciler};
use super::MANAGED_BY;
use crate::endpointutil::{LABEL_HEADLESS, LABEL_MANAGED_BY, LABEL_SERVICE_NAME};
use crate::pod_util::testing::*;

fn svc() -> Service {
    let mut s = Service::default();
    s.metadata.name = Some("web".into());
    s.metadata.namespace = Some("default".into());
    s.metadata.uid = Some("svc-uid".into());
    s.metadata.labels = Some(BTreeMap::from([("tier".to_string(), "front".to_string())]));
    s.spec = Some(ServiceSpec {
        cluster_ip: Some("10.96.0.10".into()),
        ip_families: Some(vec!["IPv4".into()]),
        selector: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
        ports: Some(vec![ServicePort {
            name: Some("http".into()),
            port: 80,
            target_port: Some(IntOrString::Int(8080)),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    s
}

fn member(i: usize, ready: bool) -> Arc<CachedPod> {
    let mut p = with_phase(pod(&format!("p{i}")), "Running");
    p.spec = Some(CachedPodSpec {
        node_name: Some("node-0".into()),
        ..Default::default()
    });
    if ready {
        p = ready_at(p, Some(ts(1)));
    }
    let ip = format!("10.0.{}.{}", i / 200, i % 200 + 1);
    let st = p.status.get_or_insert_with(Default::default);
    st.pod_ip = Some(ip.clone());
    st.pod_ips = Some(vec![PodIP { ip }]);
    Arc::new(p)
}

fn rec(max: usize) -> Reconciler {
    Reconciler {
        max_endpoints_per_slice: max,
        managed_by: MANAGED_BY.into(),
    }
}

fn zone_a(_: &str) -> NodeInfo {
    NodeInfo::Found(Some("zone-a".into()))
}

/// The plan applied as the apiserver would: created slices get names.
fn apply(existing: Vec<EndpointSlice>, plan: &Plan) -> Vec<EndpointSlice> {
    let gone: Vec<_> = plan
        .delete
        .iter()
        .map(|s| s.metadata.name.clone())
        .collect();
    let updated: BTreeMap<_, _> = plan
        .update
        .iter()
        .map(|s| (s.metadata.name.clone(), s.clone()))
        .collect();
    let mut out: Vec<EndpointSlice> = existing
        .into_iter()
        .filter(|s| !gone.contains(&s.metadata.name))
        .map(|s| updated.get(&s.metadata.name).cloned().unwrap_or(s))
        .collect();
    for (i, s) in plan.create.iter().enumerate() {
        let mut s = s.clone();
        s.metadata.name = Some(format!("web-{}{i}", out.len()));
        s.metadata.uid = s.metadata.name.clone();
        out.push(s);
    }
    out
}

fn refs(v: &[EndpointSlice]) -> Vec<&EndpointSlice> {
    v.iter().collect()
}

#[test]
fn conditions_zone_ports_labels_and_owner() {
    let s = svc();
    let mut terminating = (*member(2, true)).clone();
    terminating.metadata.deletion_timestamp = Some(Time(ts(2)));
    let pods = vec![member(0, true), member(1, false), Arc::new(terminating)];
    let plan = rec(100).reconcile(&s, &pods, &[], &zone_a);
    assert_eq!(
        (plan.create.len(), plan.update.len(), plan.delete.len()),
        (1, 0, 0)
    );
    let slice = &plan.create[0];
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(slice.metadata.generate_name.as_deref(), Some("web-"));
    let labels = slice.metadata.labels.clone().unwrap();
    assert_eq!(
        labels.get(LABEL_SERVICE_NAME).map(String::as_str),
        Some("web")
    );
    assert_eq!(
        labels.get(LABEL_MANAGED_BY).map(String::as_str),
        Some(MANAGED_BY)
    );
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
    assert!(!labels.contains_key(LABEL_HEADLESS));
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Service", "svc-uid")
    );
    let port = &slice.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("http"), Some(8080))
    );
    let cond = |i: usize| {
        let ep = slice
            .endpoints
            .iter()
            .find(|e| {
                e.target_ref.as_ref().and_then(|r| r.name.as_deref()) == Some(&format!("p{i}"))
            })
            .unwrap();
        assert_eq!(ep.zone.as_deref(), Some("zone-a"));
        assert_eq!(ep.node_name.as_deref(), Some("node-0"));
        let c = ep.conditions.clone().unwrap();
        (c.ready, c.serving, c.terminating)
    };
    assert_eq!(cond(0), (Some(true), Some(true), Some(false)));
    assert_eq!(cond(1), (Some(false), Some(false), Some(false)));
    assert_eq!(cond(2), (Some(false), Some(true), Some(true)));
}

#[test]
fn packs_at_most_max_per_slice_and_then_leaves_them_alone() {
    let s = svc();
    let pods: Vec<_> = (0..250).map(|i| member(i, true)).collect();
    let plan = rec(100).reconcile(&s, &pods, &[], &zone_a);
    assert_eq!(plan.create.len(), 3);
    let sizes: Vec<usize> = plan.create.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, [100, 100, 50]);
    let slices = apply(Vec::new(), &plan);
    let again = rec(100).reconcile(&s, &pods, &refs(&slices), &zone_a);
    assert!(again.create.is_empty() && again.update.is_empty() && again.delete.is_empty());
}

#[test]
fn a_removed_pod_touches_only_its_slice_and_a_new_one_fills_it() {
    let s = svc();
    let mut pods: Vec<_> = (0..150).map(|i| member(i, true)).collect();
    let slices = apply(Vec::new(), &rec(100).reconcile(&s, &pods, &[], &zone_a));
    pods.remove(0);
    pods.push(member(500, true));
    let plan = rec(100).reconcile(&s, &pods, &refs(&slices), &zone_a);
    assert_eq!(
        (plan.create.len(), plan.update.len(), plan.delete.len()),
        (0, 1, 0)
    );
    assert_eq!(plan.update[0].endpoints.len(), 100);
}

#[test]
fn readiness_change_is_an_in_place_update() {
    let s = svc();
    let slices = apply(
        Vec::new(),
        &rec(100).reconcile(&s, &[member(0, false)], &[], &zone_a),
    );
    let plan = rec(100).reconcile(&s, &[member(0, true)], &refs(&slices), &zone_a);
    assert_eq!((plan.create.len(), plan.update.len()), (0, 1));
    assert_eq!(plan.update[0].metadata.name, slices[0].metadata.name);
    assert_eq!(
        plan.update[0].endpoints[0]
            .conditions
            .as_ref()
            .unwrap()
            .ready,
        Some(true)
    );
}

#[test]
fn no_pods_leaves_one_placeholder_and_keeps_it() {
    let s = svc();
    let plan = rec(100).reconcile(&s, &[] as &[Arc<CachedPod>], &[], &zone_a);
    assert_eq!(plan.create.len(), 1);
    assert!(plan.create[0].endpoints.is_empty());
    let slices = apply(Vec::new(), &plan);
    let again = rec(100).reconcile(&s, &[] as &[Arc<CachedPod>], &refs(&slices), &zone_a);
    assert!(again.create.is_empty() && again.update.is_empty() && again.delete.is_empty());
    // Pods arrive: the placeholder is reused rather than deleted.
    let filled = rec(100).reconcile(&s, &[member(0, true)], &refs(&slices), &zone_a);
    assert_eq!(
        (
            filled.create.len(),
            filled.update.len(),
            filled.delete.len()
        ),
        (0, 1, 0)
    );
    // And when they go, the slice is recycled into the placeholder.
    let slices = apply(slices, &filled);
    let emptied = rec(100).reconcile(&s, &[] as &[Arc<CachedPod>], &refs(&slices), &zone_a);
    assert_eq!(
        (
            emptied.create.len(),
            emptied.update.len(),
            emptied.delete.len()
        ),
        (0, 1, 0)
    );
    assert!(emptied.update[0].endpoints.is_empty());
}

#[test]
fn slices_of_another_service_or_family_are_deleted() {
    let s = svc();
    let slices = apply(
        Vec::new(),
        &rec(100).reconcile(&s, &[member(0, true)], &[], &zone_a),
    );
    let mut recreated = s.clone();
    recreated.metadata.uid = Some("other".into());
    let plan = rec(100).reconcile(&recreated, &[member(0, true)], &refs(&slices), &zone_a);
    assert_eq!((plan.create.len(), plan.delete.len()), (1, 1));
    let mut v6 = slices[0].clone();
    v6.address_type = "IPv6".into();
    let plan = rec(100).reconcile(&s, &[member(0, true)], &[&slices[0], &v6], &zone_a);
    assert_eq!(plan.delete.len(), 1);
    assert_eq!(plan.delete[0].address_type, "IPv6");
}

#[test]
fn missing_node_skips_the_pod_unless_publishing_not_ready() {
    let mut s = svc();
    let missing = |_: &str| NodeInfo::Missing;
    let plan = rec(100).reconcile(&s, &[member(0, true)], &[], &missing);
    assert_eq!(plan.missing_nodes.len(), 1);
    assert!(plan.create[0].endpoints.is_empty());
    s.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
    let plan = rec(100).reconcile(&s, &[member(0, false)], &[], &missing);
    assert!(plan.missing_nodes.is_empty());
    let c = plan.create[0].endpoints[0].conditions.clone().unwrap();
    assert_eq!((c.ready, c.serving), (Some(true), Some(false)));
}

#[test]
fn headless_label_and_label_changes() {
    let mut s = svc();
    s.spec.as_mut().unwrap().cluster_ip = Some("None".into());
    let plan = rec(100).reconcile(&s, &[member(0, true)], &[], &zone_a);
    let labels = plan.create[0].metadata.labels.clone().unwrap();
    assert_eq!(labels.get(LABEL_HEADLESS).map(String::as_str), Some(""));
    let slices = apply(Vec::new(), &plan);
    s.metadata.labels = None;
    let plan = rec(100).reconcile(&s, &[member(0, true)], &refs(&slices), &zone_a);
    assert_eq!(plan.update.len(), 1);
    assert!(!plan.update[0]
        .metadata
        .labels
        .clone()
        .unwrap()
        .contains_key("tier"));
}
