//! The endpoints, EndpointSlice and EndpointSlice-mirroring controllers against a Sandbox: a
//! Service's Endpoints and EndpointSlices list exactly its ready pods' IPs (named target port
//! resolved, node and zone, owner and labels) and follow an RC scaled up and down; a pod held
//! not ready by a readiness gate is a not-ready address and `ready: false`, and turns ready when
//! the gate is set; a terminating pod leaves the Endpoints and shows `terminating` in its slice;
//! a headless Service publishes hostnames and the headless label; a selector-less Service's
//! manual Endpoints are mirrored into slices (and the mirror goes with them); deleting a Service
//! deletes its Endpoints; and the real kubectl shows them in `get endpoints`, `get
//! endpointslices` and `describe svc`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;
use tests::eventually;

use minik8s::client::{Api, DeleteParams, ListParams, Patch};
use minik8s::k8s_openapi::api::core::v1::{Endpoints, Pod, ReplicationController, Service};
use minik8s::k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

const ZONE: &str = "zone-a";

/// One fake node labelled with a zone; terminating pods stay terminating for a minute.
async fn sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .nodes(1)
        .configure(|c| {
            c.kubelet
                .node
                .labels
                .insert("topology.kubernetes.io/zone".into(), ZONE.into());
            c.kubelet.lifecycle.termination_delay =
                kubelet_fake::config::Delay::fixed(Duration::from_secs(60));
        })
        .start()
        .await
        .unwrap()
}

fn rc(name: &str, replicas: i32) -> ReplicationController {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"app": name}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "ports": [{"name": "http", "containerPort": 8080}]}]}
        }}
    }))
    .unwrap()
}

fn service(name: &str, spec: serde_json::Value) -> Service {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"tier": "front"}}, "spec": spec}),
    )
    .unwrap()
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn ready_ips(pods: &Api<Pod>, app: &str) -> BTreeSet<String> {
    let lp = ListParams {
        label_selector: Some(format!("app={app}")),
        ..Default::default()
    };
    pods.list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect()
}

/// (ready, not ready) addresses of an Endpoints.
fn endpoints_ips(ep: &Endpoints) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut ready = BTreeSet::new();
    let mut not_ready = BTreeSet::new();
    for s in ep.subsets.iter().flatten() {
        ready.extend(s.addresses.iter().flatten().map(|a| a.ip.clone()));
        not_ready.extend(s.not_ready_addresses.iter().flatten().map(|a| a.ip.clone()));
    }
    (ready, not_ready)
}

async fn slices_of(client: &minik8s::client::Client, svc: &str) -> Vec<EndpointSlice> {
    let api: Api<EndpointSlice> = client.api(Some("default"));
    let lp = ListParams {
        label_selector: Some(format!("kubernetes.io/service-name={svc}")),
        ..Default::default()
    };
    api.list(&lp).await.unwrap().items
}

/// Addresses of the slices' endpoints with `ready: true`.
fn slice_ready_ips(slices: &[EndpointSlice]) -> BTreeSet<String> {
    slices
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .flat_map(|e| e.addresses.iter().cloned())
        .collect()
}

/// Wait until the Service's Endpoints and slices list exactly `n` ready pods, those of `app`.
async fn converged(client: &minik8s::client::Client, svc: &str, app: &str, n: usize) {
    let pods: Api<Pod> = client.api(Some("default"));
    let eps: Api<Endpoints> = client.api(Some("default"));
    eventually(&format!("{svc} to list {n} ready pods"), || async {
        let want = ready_ips(&pods, app).await;
        if want.len() != n {
            return None;
        }
        let ep = eps.get_opt(svc).await.ok()??;
        let (ready, not_ready) = endpoints_ips(&ep);
        let slices = slices_of(client, svc).await;
        (ready == want && not_ready.is_empty() && slice_ready_ips(&slices) == want).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_and_slices_follow_an_rc_scaled_up_and_down() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let rcs: Api<ReplicationController> = client.api(Some("default"));
    let svcs: Api<Service> = client.api(Some("default"));
    rcs.create(&rc("web", 3)).await.unwrap();
    let svc = svcs
        .create(&service(
            "web",
            json!({"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}),
        ))
        .await
        .unwrap();
    converged(&client, "web", "web", 3).await;

    // The Endpoints: the named port resolved, pods as targets on their node.
    let eps: Api<Endpoints> = client.api(Some("default"));
    let ep = eps.get("web").await.unwrap();
    let subset = &ep.subsets.as_ref().unwrap()[0];
    let port = &subset.ports.as_ref().unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("http"), 8080));
    let addr = &subset.addresses.as_ref().unwrap()[0];
    assert_eq!(addr.node_name.as_deref(), Some("node-0"));
    assert_eq!(
        addr.target_ref.as_ref().unwrap().kind.as_deref(),
        Some("Pod")
    );
    assert_eq!(
        ep.metadata
            .labels
            .as_ref()
            .unwrap()
            .get("tier")
            .map(String::as_str),
        Some("front")
    );
    assert!(ep
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("endpoints.kubernetes.io/last-change-trigger-time")));

    // The slice: owned by the Service, labelled, named after it, zone from the node.
    let slices = slices_of(&client, "web").await;
    assert_eq!(slices.len(), 1);
    let s = &slices[0];
    assert_eq!(s.address_type, "IPv4");
    assert!(s.metadata.name.as_deref().unwrap().starts_with("web-"));
    let labels = s.metadata.labels.as_ref().unwrap();
    assert_eq!(
        labels
            .get("endpointslice.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("endpointslice-controller.k8s.io")
    );
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
    let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(owner.uid.as_str())),
        ("Service", svc.metadata.uid.as_deref())
    );
    let p = &s.ports.as_ref().unwrap()[0];
    assert_eq!((p.name.as_deref(), p.port), (Some("http"), Some(8080)));
    for e in &s.endpoints {
        assert_eq!(e.zone.as_deref(), Some(ZONE));
        assert_eq!(e.node_name.as_deref(), Some("node-0"));
        let c = e.conditions.as_ref().unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(true), Some(true), Some(false))
        );
    }

    let scale = |n: i32| Patch::Merge(json!({"spec": {"replicas": n}}));
    rcs.patch("web", &scale(5)).await.unwrap();
    converged(&client, "web", "web", 5).await;
    rcs.patch("web", &scale(1)).await.unwrap();
    converged(&client, "web", "web", 1).await;

    // Deleting the Service deletes its Endpoints (and the GC its slices).
    svcs.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("the Endpoints and slices to go", || async {
        let ep = eps.get_opt("web").await.unwrap();
        (ep.is_none() && slices_of(&client, "web").await.is_empty()).then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_and_terminating_pods() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let pods: Api<Pod> = client.api(Some("default"));
    let svcs: Api<Service> = client.api(Some("default"));
    let eps: Api<Endpoints> = client.api(Some("default"));
    svcs.create(&service(
        "app",
        json!({"selector": {"app": "app"}, "ports": [{"port": 80}]}),
    ))
    .await
    .unwrap();
    let gate = "example.com/ready";
    let pod = |name: &str, gated: bool| -> Pod {
        let mut spec = json!({"terminationGracePeriodSeconds": 600,
            "containers": [{"name": "c", "image": "nginx"}]});
        if gated {
            spec["readinessGates"] = json!([{"conditionType": gate}]);
        }
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"app": "app"}}, "spec": spec}),
        )
        .unwrap()
    };
    pods.create(&pod("ready", false)).await.unwrap();
    pods.create(&pod("gated", true)).await.unwrap();
    let ip_of = |p: Pod| p.status.and_then(|s| s.pod_ip);
    let (ready_ip, gated_ip) = eventually("both pods running with IPs", || async {
        let r = pods
            .get("ready")
            .await
            .ok()
            .filter(is_ready)
            .and_then(ip_of)?;
        let g = ip_of(pods.get("gated").await.ok()?)?;
        Some((r, g))
    })
    .await;

    // The gated pod: a not-ready address, and neither ready nor serving in its slice.
    eventually("the gated pod as not ready", || async {
        let ep = eps.get_opt("app").await.ok()??;
        let (ready, not_ready) = endpoints_ips(&ep);
        let slices = slices_of(&client, "app").await;
        let gated = slices
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .find(|e| e.addresses.contains(&gated_ip))?;
        let c = gated.conditions.clone()?;
        (ready == BTreeSet::from([ready_ip.clone()])
            && not_ready == BTreeSet::from([gated_ip.clone()])
            && (c.ready, c.serving, c.terminating) == (Some(false), Some(false), Some(false)))
            .then_some(())
    })
    .await;

    // Its gate set: it becomes ready.
    pods.patch_status(
        "gated",
        &Patch::Strategic(json!({"status": {"conditions": [
            {"type": gate, "status": "True"}
        ]}})),
    )
    .await
    .unwrap();
    eventually("the gated pod as ready", || async {
        let ep = eps.get_opt("app").await.ok()??;
        let (ready, not_ready) = endpoints_ips(&ep);
        (ready.contains(&gated_ip) && not_ready.is_empty()).then_some(())
    })
    .await;

    // A terminating pod: gone from the Endpoints, `terminating` (still serving) in its slice.
    pods.delete("ready", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the terminating pod's slice conditions", || async {
        let ep = eps.get_opt("app").await.ok()??;
        let (ready, not_ready) = endpoints_ips(&ep);
        let slices = slices_of(&client, "app").await;
        let e = slices
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .find(|e| e.addresses.contains(&ready_ip))?;
        let c = e.conditions.clone()?;
        (!ready.contains(&ready_ip)
            && !not_ready.contains(&ready_ip)
            && (c.ready, c.serving, c.terminating) == (Some(false), Some(true), Some(true)))
            .then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_service_publishes_hostnames() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let pods: Api<Pod> = client.api(Some("default"));
    let svcs: Api<Service> = client.api(Some("default"));
    let eps: Api<Endpoints> = client.api(Some("default"));
    svcs.create(&service(
        "db",
        json!({"clusterIP": "None", "selector": {"app": "db"}}),
    ))
    .await
    .unwrap();
    pods.create(
        &serde_json::from_value(
            json!({"metadata": {"name": "db-0", "labels": {"app": "db"}},
            "spec": {"hostname": "db-0", "subdomain": "db",
                "containers": [{"name": "c", "image": "postgres"}]}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let ep = eventually("the headless Endpoints", || async {
        let ep = eps.get_opt("db").await.ok()??;
        let (ready, _) = endpoints_ips(&ep);
        (ready.len() == 1).then_some(ep)
    })
    .await;
    let subset = &ep.subsets.as_ref().unwrap()[0];
    assert!(subset.ports.is_none());
    assert_eq!(
        subset.addresses.as_ref().unwrap()[0].hostname.as_deref(),
        Some("db-0")
    );
    let headless = "service.kubernetes.io/headless";
    assert!(ep.metadata.labels.as_ref().unwrap().contains_key(headless));
    let slice = eventually("the headless slice", || async {
        let slices = slices_of(&client, "db").await;
        slices.into_iter().find(|s| !s.endpoints.is_empty())
    })
    .await;
    assert!(slice
        .metadata
        .labels
        .as_ref()
        .unwrap()
        .contains_key(headless));
    assert_eq!(slice.endpoints[0].hostname.as_deref(), Some("db-0"));
    assert!(slice.ports.as_ref().is_none_or(Vec::is_empty));
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_endpoints_of_a_selectorless_service_are_mirrored() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let svcs: Api<Service> = client.api(Some("default"));
    let eps: Api<Endpoints> = client.api(Some("default"));
    svcs.create(&service(
        "ext",
        json!({"ports": [{"name": "db", "port": 5432}]}),
    ))
    .await
    .unwrap();
    eps.create(
        &serde_json::from_value(json!({"metadata": {"name": "ext", "labels": {"team": "x"}},
            "subsets": [{"addresses": [{"ip": "192.0.2.10"}],
                         "notReadyAddresses": [{"ip": "192.0.2.11"}],
                         "ports": [{"name": "db", "port": 5432}]}]}))
        .unwrap(),
    )
    .await
    .unwrap();
    let slice = eventually("the mirrored slice", || async {
        let slices = slices_of(&client, "ext").await;
        (slices.len() == 1 && slices[0].endpoints.len() == 2).then(|| slices[0].clone())
    })
    .await;
    let labels = slice.metadata.labels.as_ref().unwrap();
    assert_eq!(
        labels
            .get("endpointslice.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("endpointslicemirroring-controller.k8s.io")
    );
    assert_eq!(labels.get("team").map(String::as_str), Some("x"));
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "Endpoints");
    let ready: Vec<(String, Option<bool>)> = slice
        .endpoints
        .iter()
        .map(|e| {
            (
                e.addresses[0].clone(),
                e.conditions.as_ref().and_then(|c| c.ready),
            )
        })
        .collect();
    assert_eq!(
        ready,
        [
            ("192.0.2.10".to_string(), Some(true)),
            ("192.0.2.11".to_string(), Some(false))
        ]
    );
    // The endpoints controller left the manual Endpoints alone.
    let ep = eps.get("ext").await.unwrap();
    assert_eq!(
        endpoints_ips(&ep).0,
        BTreeSet::from(["192.0.2.10".to_string()])
    );
    // Changing it changes the mirror; deleting it deletes the mirror.
    eps.patch(
        "ext",
        &Patch::Merge(json!({"subsets": [{"addresses": [{"ip": "192.0.2.12"}],
            "ports": [{"name": "db", "port": 5432}]}]})),
    )
    .await
    .unwrap();
    eventually("the mirror to follow", || async {
        let slices = slices_of(&client, "ext").await;
        (slices.len() == 1
            && slice_ready_ips(&slices) == BTreeSet::from(["192.0.2.12".to_string()]))
        .then_some(())
    })
    .await;
    eps.delete("ext", &DeleteParams::default()).await.unwrap();
    eventually("the mirror to go", || async {
        slices_of(&client, "ext").await.is_empty().then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_endpoints_slices_and_describes_the_service() {
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let rcs: Api<ReplicationController> = client.api(Some("default"));
    let svcs: Api<Service> = client.api(Some("default"));
    rcs.create(&rc("shop", 2)).await.unwrap();
    svcs.create(&service(
        "shop",
        json!({"selector": {"app": "shop"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}),
    ))
    .await
    .unwrap();
    converged(&client, "shop", "shop", 2).await;
    let pods: Api<Pod> = client.api(Some("default"));
    let ips = ready_ips(&pods, "shop").await;
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let (eps, slices, describe) = tokio::task::spawn_blocking(move || {
        (
            k.ok(&["get", "endpoints", "shop"]),
            k.ok(&[
                "get",
                "endpointslices",
                "-l",
                "kubernetes.io/service-name=shop",
            ]),
            k.ok(&["describe", "svc", "shop"]),
        )
    })
    .await
    .unwrap();
    for ip in &ips {
        assert!(eps.contains(&format!("{ip}:8080")), "{eps}");
        assert!(slices.contains(ip.as_str()), "{slices}");
        assert!(describe.contains(&format!("{ip}:8080")), "{describe}");
    }
    assert!(
        slices.contains("IPv4") && slices.contains("8080"),
        "{slices}"
    );
    assert!(describe.contains("Endpoints:"), "{describe}");
    sandbox.stop().await;
}

/// The ServiceCIDR controller with the apiserver's IPAddresses: every ServiceCIDR gets the
/// protection finalizer and a Ready condition; deleting the default one is blocked while the
/// `kubernetes` Service's address lies in it alone; a ServiceCIDR holding no address goes, after
/// the deletion grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_cidrs_are_protected_while_they_hold_addresses() {
    use minik8s::k8s_openapi::api::networking::v1::{IPAddress, ServiceCIDR};
    const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
    let sandbox = sandbox().await;
    let client = sandbox.client();
    let cidrs: Api<ServiceCIDR> = client.api(None);
    let ips: Api<IPAddress> = client.api(None);
    let svcs: Api<Service> = client.api(Some("default"));
    let has_finalizer = |c: &ServiceCIDR| {
        c.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
    };
    let ready = |c: &ServiceCIDR| {
        c.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready")
    };
    eventually("the default ServiceCIDR's finalizer", || async {
        cidrs.get("kubernetes").await.ok().filter(has_finalizer)
    })
    .await;
    let extra: ServiceCIDR = serde_json::from_value(
        json!({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.100.0.0/24"]}}),
    )
    .unwrap();
    cidrs.create(&extra).await.unwrap();
    let got = eventually("extra's finalizer and Ready condition", || async {
        cidrs
            .get("extra")
            .await
            .ok()
            .filter(|c| has_finalizer(c) && ready(c).is_some())
    })
    .await;
    let cond = ready(&got).unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.message.as_str()),
        ("True", "Kubernetes Service CIDR is ready")
    );
    // A Service's cluster IP has its IPAddress.
    let svc = svcs
        .create(&service(
            "web",
            json!({"ports": [{"port": 80}], "selector": {"app": "web"}}),
        ))
        .await
        .unwrap();
    let ip = svc.spec.unwrap().cluster_ip.unwrap();
    let addr = eventually("the Service's IPAddress", || async {
        ips.get(&ip).await.ok()
    })
    .await;
    assert_eq!(addr.spec.unwrap().parent_ref.name, "web");
    // The default range holds the Services' addresses and nothing contains it: blocked.
    cidrs
        .delete("kubernetes", &DeleteParams::default())
        .await
        .unwrap();
    let blocked = eventually("the default ServiceCIDR blocked", || async {
        cidrs
            .get("kubernetes")
            .await
            .ok()
            .and_then(|c| ready(&c))
            .filter(|c| c.status == "False")
    })
    .await;
    assert_eq!(blocked.reason, "Terminating");
    assert_eq!(
        blocked.message,
        "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"
    );
    // An empty range goes once the grace period has passed.
    cidrs
        .delete("extra", &DeleteParams::default())
        .await
        .unwrap();
    eventually("extra gone", || async {
        cidrs.get("extra").await.err().map(|_| ())
    })
    .await;
    assert!(cidrs.get("kubernetes").await.is_ok());
}
