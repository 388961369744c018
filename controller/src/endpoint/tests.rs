//! Unit tests of the Endpoints computation: readiness, publishNotReadyAddresses, terminating and
//! terminal pods, named ports, headless Services, repacking, truncation and the no-op check.

use crate::cached_pod::CachedPod;
use crate::cached_pod::{CachedContainer, CachedPodSpec};
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerPort, PodIP, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::object::{desired_endpoints, ANNOTATION_OVER_CAPACITY};
use super::subsets::{desired_subsets, truncate, MAX_CAPACITY};
use crate::endpointutil::{ANNOTATION_TRIGGER_TIME, LABEL_HEADLESS};
use crate::pod_util::testing::*;

fn svc(ports: Vec<ServicePort>) -> Service {
    let mut s = Service::default();
    s.metadata.name = Some("web".into());
    s.metadata.namespace = Some("default".into());
    s.metadata.labels = Some(BTreeMap::from([("tier".to_string(), "front".to_string())]));
    s.spec = Some(ServiceSpec {
        cluster_ip: Some("10.96.0.10".into()),
        ip_families: Some(vec!["IPv4".into()]),
        selector: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
        ports: Some(ports),
        ..Default::default()
    });
    s
}

fn port(name: &str, port: i32, target: IntOrString) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        target_port: Some(target),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// A running pod with `ip`, ready or not, serving `http` on `http_port`.
fn member(name: &str, ip: &str, ready: bool, http_port: i32) -> Arc<CachedPod> {
    let mut p = with_phase(pod(name), "Running");
    p.spec = Some(CachedPodSpec {
        node_name: Some("node-0".into()),
        containers: vec![CachedContainer {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: http_port,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }],
        ..Default::default()
    });
    if ready {
        p = ready_at(p, Some(ts(100)));
    }
    let st = p.status.get_or_insert_with(Default::default);
    st.pod_ip = Some(ip.into());
    st.pod_ips = Some(vec![PodIP { ip: ip.into() }]);
    Arc::new(p)
}

fn ips(v: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>) -> Vec<&str> {
    v.iter().flatten().map(|a| a.ip.as_str()).collect()
}

#[test]
fn ready_and_not_ready_pods_split_and_terminal_ones_drop() {
    let s = svc(vec![port("http", 80, IntOrString::Int(8080))]);
    let mut gone = (*member("d", "10.0.0.4", true, 8080)).clone();
    gone.metadata.deletion_timestamp = Some(Time(ts(1)));
    let pods = vec![
        member("b", "10.0.0.2", true, 8080),
        member("a", "10.0.0.1", true, 8080),
        member("c", "10.0.0.3", false, 8080),
        Arc::new(gone),
        Arc::new(with_phase(
            (*member("e", "10.0.0.5", true, 8080)).clone(),
            "Failed",
        )),
    ];
    let subsets = desired_subsets(&s, &pods);
    assert_eq!(subsets.len(), 1);
    assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1", "10.0.0.2"]);
    assert_eq!(ips(&subsets[0].not_ready_addresses), ["10.0.0.3"]);
    let p = &subsets[0].ports.as_ref().unwrap()[0];
    assert_eq!((p.name.as_deref(), p.port), (Some("http"), 8080));
    let a = &subsets[0].addresses.as_ref().unwrap()[0];
    assert_eq!(a.node_name.as_deref(), Some("node-0"));
    let r = a.target_ref.as_ref().unwrap();
    assert_eq!(
        (r.kind.as_deref(), r.name.as_deref()),
        (Some("Pod"), Some("a"))
    );
}

#[test]
fn publish_not_ready_addresses_makes_every_pod_ready_even_terminating() {
    let mut s = svc(vec![port("http", 80, IntOrString::Int(8080))]);
    s.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
    let mut gone = (*member("d", "10.0.0.4", true, 8080)).clone();
    gone.metadata.deletion_timestamp = Some(Time(ts(1)));
    let pods = vec![member("c", "10.0.0.3", false, 8080), Arc::new(gone)];
    let subsets = desired_subsets(&s, &pods);
    assert_eq!(ips(&subsets[0].addresses), ["10.0.0.3", "10.0.0.4"]);
    assert!(subsets[0].not_ready_addresses.is_none());
}

#[test]
fn named_target_ports_resolve_per_pod_into_separate_subsets() {
    let s = svc(vec![port("http", 80, IntOrString::String("http".into()))]);
    let pods = vec![
        member("a", "10.0.0.1", true, 8080),
        member("b", "10.0.0.2", true, 9090),
    ];
    let subsets = desired_subsets(&s, &pods);
    let got: Vec<(i32, Vec<&str>)> = subsets
        .iter()
        .map(|s| (s.ports.as_ref().unwrap()[0].port, ips(&s.addresses)))
        .collect();
    assert_eq!(got, [(8080, vec!["10.0.0.1"]), (9090, vec!["10.0.0.2"])]);
}

#[test]
fn ports_served_by_the_same_addresses_share_a_subset() {
    let s = svc(vec![
        port("http", 80, IntOrString::Int(8080)),
        port("metrics", 9100, IntOrString::Int(9100)),
    ]);
    let pods = vec![member("a", "10.0.0.1", true, 8080)];
    let subsets = desired_subsets(&s, &pods);
    assert_eq!(subsets.len(), 1);
    assert_eq!(subsets[0].ports.as_ref().map(Vec::len), Some(2));
}

#[test]
fn headless_service_without_ports_lists_addresses_without_ports() {
    let mut s = svc(vec![]);
    s.spec.as_mut().unwrap().cluster_ip = Some("None".into());
    let subsets = desired_subsets(&s, &[member("a", "10.0.0.1", true, 80)]);
    assert_eq!(subsets.len(), 1);
    assert!(subsets[0].ports.is_none());
    let ep = desired_endpoints(None, &s, subsets, None).unwrap();
    assert_eq!(
        ep.metadata
            .labels
            .unwrap()
            .get(LABEL_HEADLESS)
            .map(String::as_str),
        Some("")
    );
    // With a cluster IP and no ports there is nothing to publish.
    let plain = svc(vec![]);
    assert!(desired_subsets(&plain, &[member("a", "10.0.0.1", true, 80)]).is_empty());
}

#[test]
fn hostname_is_published_when_subdomain_is_the_service() {
    let s = svc(vec![port("http", 80, IntOrString::Int(80))]);
    let mut p = (*member("a", "10.0.0.1", true, 80)).clone();
    let spec = p.spec.as_mut().unwrap();
    spec.hostname = Some("a".into());
    spec.subdomain = Some("web".into());
    let subsets = desired_subsets(&s, &[Arc::new(p)]);
    assert_eq!(
        subsets[0].addresses.as_ref().unwrap()[0]
            .hostname
            .as_deref(),
        Some("a")
    );
}

#[test]
fn over_capacity_keeps_ready_addresses_first_and_annotates() {
    let s = svc(vec![port("http", 80, IntOrString::Int(80))]);
    let pods: Vec<Arc<CachedPod>> = (0..1100)
        .map(|i| {
            member(
                &format!("p{i}"),
                &format!("10.1.{}.{}", i / 250, i % 250),
                i < 900,
                80,
            )
        })
        .collect();
    let mut subsets = desired_subsets(&s, &pods);
    let mut copy = subsets.clone();
    assert!(truncate(&mut copy));
    assert_eq!(copy[0].addresses.as_ref().map(Vec::len), Some(900));
    assert_eq!(
        copy[0].not_ready_addresses.as_ref().map(Vec::len),
        Some(100)
    );
    let ep = desired_endpoints(None, &s, subsets.clone(), None).unwrap();
    assert_eq!(
        ep.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_OVER_CAPACITY))
            .map(String::as_str),
        Some("truncated")
    );
    let stored: usize = ep
        .subsets
        .iter()
        .flatten()
        .map(|s| {
            s.addresses.as_ref().map_or(0, Vec::len)
                + s.not_ready_addresses.as_ref().map_or(0, Vec::len)
        })
        .sum();
    assert_eq!(stored, MAX_CAPACITY);
    // Written once, it is up to date.
    assert!(desired_endpoints(Some(&ep), &s, subsets.clone(), None).is_none());
    // Back under capacity: the annotation goes.
    subsets[0].not_ready_addresses = None;
    let under = desired_endpoints(Some(&ep), &s, subsets, None).unwrap();
    assert!(under
        .metadata
        .annotations
        .as_ref()
        .is_none_or(|a| !a.contains_key(ANNOTATION_OVER_CAPACITY)));
}

#[test]
fn unchanged_endpoints_are_not_rewritten_but_label_changes_are() {
    let s = svc(vec![port("http", 80, IntOrString::Int(80))]);
    let pods = vec![member("a", "10.0.0.1", true, 80)];
    let ep = desired_endpoints(None, &s, desired_subsets(&s, &pods), Some(ts(5))).unwrap();
    assert!(ep
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_TRIGGER_TIME)));
    assert_eq!(ep.metadata.labels, s.metadata.labels);
    let mut stored = ep.clone();
    stored.subsets.as_mut().unwrap()[0]
        .addresses
        .as_mut()
        .unwrap()[0]
        .target_ref
        .as_mut()
        .unwrap()
        .resource_version = Some("7".into());
    assert!(desired_endpoints(Some(&stored), &s, desired_subsets(&s, &pods), None).is_none());
    let mut relabelled = s.clone();
    relabelled.metadata.labels = None;
    let updated =
        desired_endpoints(Some(&stored), &relabelled, desired_subsets(&s, &pods), None).unwrap();
    assert!(updated.metadata.labels.is_none());
    assert!(updated
        .metadata
        .annotations
        .as_ref()
        .is_none_or(|a| !a.contains_key(ANNOTATION_TRIGGER_TIME)));
}
