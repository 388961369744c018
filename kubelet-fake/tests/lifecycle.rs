//! End to end against a real in-process apiserver (in-memory store) on 127.0.0.1:0: nodes register
//! and heartbeat, a bound pod reaches Running/Ready with every field, configured failures happen,
//! graceful deletion completes within the grace period, a stopped node's Lease goes stale and
//! comes back. Every wait is a condition with a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Api, Client, Config, DeleteParams};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kubelet_fake::{FakeKubelets, KubeletConfig, LifecycleConfig, NodeToggle};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Env {
    server: apiserver::Server,
    client: Client,
    kubelets: FakeKubelets,
    shutdown: CancellationToken,
}

async fn start(nodes: usize, lifecycle: &str) -> Env {
    start_with(KubeletConfig {
        nodes,
        lifecycle: LifecycleConfig::from_yaml(lifecycle).expect("lifecycle"),
        ..KubeletConfig::default()
    })
    .await
}

/// Starts a server and kubelets with `cfg`, leases shortened to 500 ms renewals / 2 s duration.
async fn start_with(cfg: KubeletConfig) -> Env {
    let config = apiserver::Config {
        address: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    let store = store::MemoryStore::new(store::StoreConfig::default()).expect("memory store");
    let server = apiserver::start(config, Arc::new(store))
        .await
        .expect("server starts");
    let client = Client::new(Config::new(server.url())).expect("client");
    let cfg = KubeletConfig {
        lease_renew_interval: Duration::from_millis(500),
        lease_duration: Duration::from_secs(2),
        ..cfg
    };
    let shutdown = CancellationToken::new();
    let kubelets = FakeKubelets::start(client.clone(), cfg, shutdown.clone())
        .await
        .expect("kubelets start");
    Env {
        server,
        client,
        kubelets,
        shutdown,
    }
}

impl Env {
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.kubelets.join())
            .await
            .expect("kubelets stop within 10 s");
        let _ = self.server.stop().await;
    }
}

/// Polls `f` until it returns `Some`, or panics after `deadline`.
async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn pod(name: &str, node: &str, labels: serde_json::Value, extra_spec: serde_json::Value) -> Pod {
    let mut spec = json!({
        "nodeName": node,
        "containers": [{"name": "app", "image": "nginx:1.25"}, {"name": "sidecar", "image": "busybox"}]
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": spec
    }))
    .unwrap()
}

fn cond(p: &Pod, t: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
}

async fn ready_pod(api: &Api<Pod>, name: &str) -> Pod {
    wait_for(
        &format!("pod {name} Running and Ready"),
        Duration::from_secs(15),
        || async {
            let p = api.get(name).await.ok()?;
            let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
            (running && cond(&p, "Ready").as_deref() == Some("True")).then_some(p)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_register_ready_with_fresh_leases() {
    let env = start(3, "").await;
    assert_eq!(
        env.kubelets.node_names(),
        vec!["node-0", "node-1", "node-2"]
    );
    let nodes: Api<Node> = env.client.all();
    for name in env.kubelets.node_names() {
        let n = nodes.get(&name).await.expect("node exists");
        assert_eq!(cond_node(&n, "Ready").as_deref(), Some("True"));
        assert_eq!(cond_node(&n, "MemoryPressure").as_deref(), Some("False"));
        let spec = n.spec.clone().unwrap_or_default();
        assert!(spec.pod_cidr.is_some_and(|c| c.starts_with("10.244.")));
        let info = n.status.and_then(|s| s.node_info).unwrap_or_default();
        assert_eq!(info.kubelet_version, "v1.33.0");
    }
    let leases: Api<Lease> = env.client.api(Some("kube-node-lease"));
    let first = leases.get("node-1").await.expect("lease exists");
    let renewed_at = first
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.clone())
        .expect("renewTime")
        .0;
    assert_eq!(
        first
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .as_deref(),
        Some("node-1")
    );
    // The lease keeps being renewed (every 500 ms here).
    wait_for("lease renewal", Duration::from_secs(5), || async {
        let l = leases.get("node-1").await.ok()?;
        let t = l.spec?.renew_time?.0;
        (t > renewed_at).then_some(())
    })
    .await;
    // Several heartbeats per node (initial + 3 renewals each).
    let m = wait_for("4 heartbeats per node", Duration::from_secs(10), || async {
        let m = env.kubelets.metrics();
        (m.lease_renewals >= 12).then_some(m)
    })
    .await;
    assert_eq!(m.nodes, 3);
    assert!(m.lease_renewals >= 4, "{m:?}");
    assert!(m.node_status_writes >= 3, "{m:?}");
    // Unchanged status is not re-posted on every heartbeat (only every report interval, 1 min).
    assert!(m.node_status_writes <= 6, "{m:?}");
    env.stop().await;
}

fn cond_node(n: &Node, t: &str) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_pod_runs_ready_with_every_field_and_deletes_gracefully() {
    let env = start(2, "").await;
    let pods: Api<Pod> = env.client.api(Some("default"));
    pods.create(&pod("web", "node-1", json!({"app": "web"}), json!({})))
        .await
        .expect("create");
    let p = ready_pod(&pods, "web").await;
    let s = p.status.clone().unwrap_or_default();
    let ip: std::net::Ipv4Addr = s
        .pod_ip
        .as_deref()
        .unwrap_or_default()
        .parse()
        .expect("podIP");
    assert_eq!(
        ip.octets()[..3],
        [10, 244, 1],
        "podIP in node-1's CIDR: {ip}"
    );
    assert_eq!(s.host_ip.as_deref(), Some("172.16.0.3"));
    assert!(s.start_time.is_some());
    for t in [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(cond(&p, t).as_deref(), Some("True"), "{t}");
    }
    let cs = s.container_statuses.clone().unwrap_or_default();
    assert_eq!(cs.len(), 2);
    for c in &cs {
        assert!(c.ready && c.started == Some(true), "{c:?}");
        assert_eq!(c.restart_count, 0);
        assert!(c.image_id.contains("@sha256:"));
        assert!(c
            .container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("containerd://")));
        assert!(c
            .state
            .as_ref()
            .and_then(|st| st.running.as_ref())
            .and_then(|r| r.started_at.as_ref())
            .is_some());
    }
    // Counted from the kubelet's informer, which may lag this client.
    wait_for(
        "the kubelet counting a running pod",
        Duration::from_secs(10),
        || async { (env.kubelets.metrics().pods_running >= 1).then_some(()) },
    )
    .await;

    // A second pod on the same node gets a different address.
    pods.create(&pod("web2", "node-1", json!({}), json!({})))
        .await
        .expect("create");
    let p2 = ready_pod(&pods, "web2").await;
    assert_ne!(p2.status.and_then(|s| s.pod_ip), s.pod_ip);

    // Graceful deletion: the kubelet terminates containers and deletes with grace 0, well within
    // the 30 s grace period.
    let started = Instant::now();
    pods.delete(
        "web",
        &DeleteParams {
            grace_period_seconds: Some(30),
            ..Default::default()
        },
    )
    .await
    .expect("delete");
    wait_for("pod deleted", Duration::from_secs(15), || async {
        match pods.get("web").await {
            Err(e) if e.is_not_found() => Some(()),
            _ => None,
        }
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(30));
    // Only the kubelet finishes a graceful deletion (the apiserver never does, as upstream).
    // Which request removes the object depends on the apiserver: ours (DELETE, grace 0, UID
    // precondition) or, as this apiserver currently does, already the terminal status write of a
    // terminating pod.
    let m = env.kubelets.metrics();
    assert!(m.status_writes >= 3, "{m:?}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_failures_happen() {
    let lifecycle = r#"
podStartDelay: 0s
rules:
  - name: crashy
    match: {labels: {app: crashy}}
    crashLoop: {runFor: 200ms, exitCode: 3}
  - name: bad-image
    match: {image: "*:missing"}
    imagePullError: {}
  - name: job
    match: {labels: {app: job}}
    complete: {after: 500ms, phase: Succeeded}
"#;
    let env = start(1, lifecycle).await;
    let pods: Api<Pod> = env.client.api(Some("default"));
    pods.create(&pod(
        "crashy",
        "node-0",
        json!({"app": "crashy"}),
        json!({}),
    ))
    .await
    .expect("create");
    let mut bad = pod("bad", "node-0", json!({}), json!({}));
    if let Some(spec) = bad.spec.as_mut() {
        spec.containers[0].image = Some("nginx:missing".into());
    }
    pods.create(&bad).await.expect("create");
    pods.create(&pod(
        "job",
        "node-0",
        json!({"app": "job"}),
        json!({"restartPolicy": "Never"}),
    ))
    .await
    .expect("create");

    // Crash loop: restarted once at once, then in CrashLoopBackOff with the exit code recorded.
    wait_for("crash loop back-off", Duration::from_secs(10), || async {
        let p = pods.get("crashy").await.ok()?;
        let c = p
            .status?
            .container_statuses?
            .into_iter()
            .find(|c| c.name == "app")?;
        let waiting = c.state?.waiting?.reason?;
        let last = c.last_state?.terminated?.exit_code;
        (waiting == "CrashLoopBackOff" && c.restart_count >= 1 && last == 3).then_some(())
    })
    .await;
    wait_for("image pull failure", Duration::from_secs(10), || async {
        let p = pods.get("bad").await.ok()?;
        let s = p.status?;
        let c = s
            .container_statuses?
            .into_iter()
            .find(|c| c.name == "app")?;
        let reason = c.state?.waiting?.reason?;
        (s.phase.as_deref() == Some("Pending")
            && (reason == "ErrImagePull" || reason == "ImagePullBackOff"))
            .then_some(())
    })
    .await;
    wait_for("job Succeeded", Duration::from_secs(10), || async {
        let p = pods.get("job").await.ok()?;
        (p.status?.phase.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_node_goes_stale_and_recovers() {
    let env = start(2, "").await;
    let leases: Api<Lease> = env.client.api(Some("kube-node-lease"));
    let renew_time = |l: &Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.renew_time.clone())
            .map(|t| t.0)
    };
    assert_eq!(env.kubelets.stop_node("node-0"), NodeToggle::Changed);
    assert_eq!(env.kubelets.stop_node("node-0"), NodeToggle::Unchanged);
    assert_eq!(env.kubelets.stop_node("nope"), NodeToggle::UnknownNode);
    // Stale: not renewed for 4 renew intervals (2 s, the lease duration), while node-1's stays fresh.
    wait_for("node-0 lease stale", Duration::from_secs(10), || async {
        let l = leases.get("node-0").await.ok()?;
        let age = k8s_openapi::jiff::Timestamp::now().duration_since(renew_time(&l)?);
        (age > k8s_openapi::jiff::SignedDuration::from_secs(2)).then_some(())
    })
    .await;
    let fresh = leases.get("node-1").await.expect("lease");
    let age =
        k8s_openapi::jiff::Timestamp::now().duration_since(renew_time(&fresh).expect("renewTime"));
    assert!(
        age < k8s_openapi::jiff::SignedDuration::from_secs(2),
        "node-1 lease age {age}"
    );
    // Pods bound to a stopped node are left alone.
    let pods: Api<Pod> = env.client.api(Some("default"));
    pods.create(&pod("orphan", "node-0", json!({}), json!({})))
        .await
        .expect("create");
    assert_eq!(env.kubelets.start_node("node-0"), NodeToggle::Changed);
    wait_for(
        "node-0 lease fresh again",
        Duration::from_secs(5),
        || async {
            let l = leases.get("node-0").await.ok()?;
            let age = k8s_openapi::jiff::Timestamp::now().duration_since(renew_time(&l)?);
            (age < k8s_openapi::jiff::SignedDuration::from_secs(1)).then_some(())
        },
    )
    .await;
    ready_pod(&pods, "orphan").await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repairs_what_the_node_lifecycle_controller_marked() {
    let env = start(1, "").await;
    let pods: Api<Pod> = env.client.api(Some("default"));
    pods.create(&pod("web", "node-0", json!({}), json!({})))
        .await
        .expect("create");
    let mut p = ready_pod(&pods, "web").await;
    // As the node lifecycle controller's MarkPodsNotReady does: Ready=False on the pod.
    if let Some(cs) = p.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        for c in cs.iter_mut().filter(|c| c.type_ == "Ready") {
            c.status = "False".into();
        }
    }
    pods.replace_status("web", &p)
        .await
        .expect("mark not ready");
    ready_pod(&pods, "web").await;
    // And Ready=Unknown on the node.
    let nodes: Api<Node> = env.client.all();
    let mut n = nodes.get("node-0").await.expect("node");
    if let Some(cs) = n.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        for c in cs.iter_mut().filter(|c| c.type_ == "Ready") {
            c.status = "Unknown".into();
            c.reason = Some("NodeStatusUnknown".into());
        }
    }
    nodes
        .replace_status("node-0", &n)
        .await
        .expect("mark unknown");
    wait_for("node Ready again", Duration::from_secs(5), || async {
        let n = nodes.get("node-0").await.ok()?;
        (cond_node(&n, "Ready").as_deref() == Some("True")).then_some(())
    })
    .await;
    // The setter saw Ready go from Unknown to True again: NodeReady a second time.
    wait_for(
        "NodeReady recorded twice",
        Duration::from_secs(10),
        || async {
            let evs = events(&env.client, "default", "Node", "node-0", "NodeReady").await;
            let count: i32 = evs.iter().map(|e| e.count.unwrap_or(1)).sum();
            (count >= 2).then_some(())
        },
    )
    .await;
    env.stop().await;
}

/// A terminal phase someone else writes stays (upstream's `generateAPIPodStatus`): the node stops
/// the containers (`Killing`), keeps the phase and its reason, and never writes Running again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_set_failed_by_someone_else_is_kept_and_stops_the_containers() {
    let env = start(1, "").await;
    let pods: Api<Pod> = env.client.api(Some("default"));
    pods.create(&pod("web", "node-0", json!({}), json!({})))
        .await
        .expect("create");
    let mut p = ready_pod(&pods, "web").await;
    if let Some(s) = p.status.as_mut() {
        s.phase = Some("Failed".into());
        s.reason = Some("Evicted".into());
    }
    pods.replace_status("web", &p).await.expect("set Failed");
    let stopped = wait_for("containers stopped", Duration::from_secs(10), || async {
        let p = pods.get("web").await.ok()?;
        terminated(&p, "app").is_some().then_some(p)
    })
    .await;
    let status = stopped.status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    assert_eq!(cond(&stopped, "Ready").as_deref(), Some("False"));
    wait_for("Killing recorded", Duration::from_secs(10), || async {
        let evs = events(&env.client, "default", "Pod", "web", "Killing").await;
        (!evs.is_empty()).then_some(())
    })
    .await;
    // Nothing changes afterwards: the same stored status a while later.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = pods.get("web").await.expect("pod");
    assert_eq!(later.status, stopped.status);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_kubelet_adopts_its_pods_unchanged() {
    let env = start(1, "").await;
    let pods: Api<Pod> = env.client.api(Some("default"));
    pods.create(&pod("web", "node-0", json!({}), json!({})))
        .await
        .expect("create");
    let before = ready_pod(&pods, "web").await;
    let containers = before.spec.as_ref().map_or(0, |s| s.containers.len());
    wait_for("web's Started events", Duration::from_secs(10), || async {
        let evs = events(&env.client, "default", "Pod", "web", "Started").await;
        (evs.len() == containers).then_some(())
    })
    .await;
    env.shutdown.cancel();
    env.kubelets.join().await;
    // Same nodes, new process state.
    let shutdown = CancellationToken::new();
    let cfg = KubeletConfig {
        nodes: 1,
        ..KubeletConfig::default()
    };
    let again = FakeKubelets::start(env.client.clone(), cfg, shutdown.clone())
        .await
        .expect("restart");
    // A second pod is created and becomes ready: by then the first one has been synced too.
    pods.create(&pod("web2", "node-0", json!({}), json!({})))
        .await
        .expect("create");
    let second = ready_pod(&pods, "web2").await;
    let after = pods.get("web").await.expect("get");
    assert_eq!(after.status, before.status, "adopted pod untouched");
    // The node's events are written in order, the adopted pod's sync before the new pod's: once
    // web2's Started is there, a repeat for web would be too. There is none.
    wait_for("web2's Started event", Duration::from_secs(10), || async {
        events(&env.client, "default", "Pod", "web2", "Started")
            .await
            .pop()
    })
    .await;
    let started = events(&env.client, "default", "Pod", "web", "Started").await;
    assert_eq!(started.len(), containers, "one per container: {started:?}");
    assert!(started.iter().all(|e| e.count == Some(1)), "{started:?}");
    assert_ne!(
        second.status.and_then(|s| s.pod_ip),
        after.status.and_then(|s| s.pod_ip),
        "the adopted pod's IP stays reserved"
    );
    assert_eq!(
        again.metrics().status_writes,
        1,
        "only the new pod was written"
    );
    shutdown.cancel();
    again.join().await;
    let _ = env.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_node_rejects_pods_out_of_pods() {
    let env = start_with(KubeletConfig {
        nodes: 1,
        node: kubelet_fake::NodeTemplate {
            pods: 2,
            ..Default::default()
        },
        ..KubeletConfig::default()
    })
    .await;
    let pods: Api<Pod> = env.client.api(Some("default"));
    for name in ["a", "b"] {
        pods.create(&pod(name, "node-0", json!({}), json!({})))
            .await
            .expect("create");
        ready_pod(&pods, name).await;
    }
    pods.create(&pod("c", "node-0", json!({}), json!({})))
        .await
        .expect("create");
    let rejected = wait_for("pod c rejected", Duration::from_secs(10), || async {
        let s = pods.get("c").await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(s)
    })
    .await;
    assert_eq!(rejected.reason.as_deref(), Some("OutOfpods"));
    assert_eq!(
        rejected.message.as_deref(),
        Some("Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2")
    );
    assert_eq!(rejected.pod_ip, None);
    // The phase counts come from the kubelet's informer, which may see the
    // write a moment after this client did.
    let failed = wait_for(
        "the kubelet counting pod c",
        Duration::from_secs(10),
        || async {
            let m = env.kubelets.metrics();
            (m.pods_failed > 0).then_some(m.pods_failed)
        },
    )
    .await;
    assert_eq!(failed, 1);
    // `rejectPod` records the reason and the message without the status' prefix.
    let ev = wait_for("the OutOfpods event", Duration::from_secs(10), || async {
        events(&env.client, "default", "Pod", "c", "OutOfpods")
            .await
            .pop()
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert_eq!(
        ev.message.as_deref(),
        Some("Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2")
    );
    env.stop().await;
}

/// The events about `name` (of `kind`) in `ns` with `reason`.
async fn events(client: &Client, ns: &str, kind: &str, name: &str, reason: &str) -> Vec<Event> {
    let api: Api<Event> = client.api(Some(ns));
    let lp = client::ListParams::default().fields(format!(
        "involvedObject.kind={kind},involvedObject.name={name},reason={reason}"
    ));
    api.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

/// The terminated state of container `name`: (reason, exit code).
fn terminated(p: &Pod, name: &str) -> Option<(String, i32)> {
    let c = p
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)?;
    let t = c.state.as_ref()?.terminated.as_ref()?;
    Some((t.reason.clone().unwrap_or_default(), t.exit_code))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_to_completion_pods_finish_and_annotations_choose_how() {
    let env = start(1, "podStartDelay: 0s\ncompletionDuration: 300ms\n").await;
    let pods: Api<Pod> = env.client.api(Some("default"));
    let annotated = |name: &str, policy: &str, annotations: serde_json::Value| {
        let mut p = pod(name, "node-0", json!({}), json!({"restartPolicy": policy}));
        p.metadata.annotations = serde_json::from_value(annotations).unwrap();
        p
    };
    pods.create(&pod(
        "done",
        "node-0",
        json!({}),
        json!({"restartPolicy": "Never"}),
    ))
    .await
    .expect("create");
    pods.create(&annotated(
        "fails",
        "Never",
        json!({"kubelet-fake.minik8s.io/exit-code": "1", "kubelet-fake.minik8s.io/run-for": "200ms"}),
    ))
    .await
    .expect("create");
    pods.create(&annotated(
        "retries",
        "OnFailure",
        json!({"kubelet-fake.minik8s.io/exit-code": "2", "kubelet-fake.minik8s.io/run-for": "100ms"}),
    ))
    .await
    .expect("create");
    pods.create(&pod("serves", "node-0", json!({}), json!({})))
        .await
        .expect("create");

    let done = wait_for("Never pod Succeeded", Duration::from_secs(10), || async {
        let p = pods.get("done").await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Succeeded")).then_some(p)
    })
    .await;
    for c in ["app", "sidecar"] {
        assert_eq!(
            terminated(&done, c),
            Some(("Completed".to_string(), 0)),
            "{c}"
        );
    }
    let fails = wait_for(
        "exit code 1 pod Failed",
        Duration::from_secs(10),
        || async {
            let p = pods.get("fails").await.ok()?;
            (p.status.as_ref()?.phase.as_deref() == Some("Failed")).then_some(p)
        },
    )
    .await;
    assert_eq!(terminated(&fails, "app"), Some(("Error".to_string(), 1)));
    wait_for(
        "OnFailure pod restarted",
        Duration::from_secs(10),
        || async {
            let p = pods.get("retries").await.ok()?;
            let s = p.status?;
            let c = s
                .container_statuses?
                .into_iter()
                .find(|c| c.name == "app")?;
            let last = c.last_state?.terminated?.exit_code;
            (s.phase.as_deref() == Some("Running") && c.restart_count >= 1 && last == 2)
                .then_some(())
        },
    )
    .await;
    // `Always` pods are servers: still running.
    let serves = ready_pod(&pods, "serves").await;
    assert!(terminated(&serves, "app").is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_node_stops_its_event_broadcaster() {
    let env = start(1, "").await;
    let added = env.kubelets.add_node().await.expect("add a node");
    assert_eq!(env.kubelets.metrics().event_broadcasters, 2);
    env.kubelets.remove_node(&added).await.expect("remove it");
    wait_for(
        "the removed node's broadcaster to stop",
        Duration::from_secs(10),
        || async { (env.kubelets.metrics().event_broadcasters == 1).then_some(()) },
    )
    .await;
    assert_eq!(env.kubelets.metrics().nodes, 1);
    env.stop().await;
}
