//! Helpers of the controller integration tests: a real apiserver on 127.0.0.1:0 over an in-memory
//! store, the controller manager running against it over HTTP, and condition waits with deadlines.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Api, Client, Config, ListParams};
use controller::{ControllerManagerConfig, EnabledControllers};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeStatus, Pod, PodSpec, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;

pub struct Env {
    pub server: apiserver::Server,
    pub client: Client,
    pub shutdown: CancellationToken,
    pub manager: tokio::task::JoinHandle<controller::Result<()>>,
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

pub async fn server() -> (apiserver::Server, Client) {
    init_tracing();
    let config = apiserver::Config {
        address: "127.0.0.1:0".parse().unwrap(),
        // DefaultTolerationSeconds gives pods a 1 s toleration of the not-ready and unreachable taints.
        admission: apiserver::admission::AdmissionConfig {
            default_not_ready_toleration_seconds: 1,
            default_unreachable_toleration_seconds: 1,
            ..apiserver::admission::AdmissionConfig::without_controllers()
        },
        ..Default::default()
    };
    let store = store::MemoryStore::new(store::StoreConfig::default()).expect("memory store");
    let server = apiserver::start(config, Arc::new(store))
        .await
        .expect("server starts");
    let client = Client::new(Config::new(server.url())).expect("client");
    (server, client)
}

/// Server + controller manager with `controllers` enabled and short node and pod-GC timings.
pub async fn start(controllers: EnabledControllers) -> Env {
    let (server, client) = server().await;
    let cfg = ControllerManagerConfig {
        controllers,
        scheduled_events: false,
        node_monitor_period: Duration::from_millis(200),
        node_monitor_grace_period: Duration::from_secs(2),
        pod_gc: controller::podgc::PodGcConfig {
            check_period: Duration::from_millis(100),
            quarantine: Duration::from_millis(300),
            ..Default::default()
        },
        ..Default::default()
    };
    let shutdown = CancellationToken::new();
    let manager = tokio::spawn(controller::run(client.clone(), cfg, shutdown.clone()));
    Env {
        server,
        client,
        shutdown,
        manager,
    }
}

impl Env {
    pub async fn stop(self) {
        self.shutdown.cancel();
        let r = tokio::time::timeout(Duration::from_secs(15), self.manager).await;
        assert!(r.is_ok(), "controller manager did not stop within 15 s");
        let _ = self.server.stop().await;
    }

    pub fn pods(&self, ns: &str) -> Api<Pod> {
        self.client.api::<Pod>(Some(ns))
    }
}

/// Waits for `cond` to hold, polling every 50 ms, at most `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn template(app: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", app)])),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("nginx".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

/// A pod `name` in `default` with one container, bound to `node` if given, held by `finalizer`.
pub fn pod_on(name: &str, node: Option<&str>, finalizer: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            finalizers: finalizer.map(|f| vec![f.to_string()]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_string),
            ..template("").spec.unwrap_or_default()
        }),
        status: None,
    }
}

/// Live pods (no deletionTimestamp) in `ns` matching `app`.
pub async fn live_pods(api: &Api<Pod>, app: &str) -> Vec<Pod> {
    match api
        .list(&ListParams::default().labels(format!("app={app}")))
        .await
    {
        Ok(l) => l
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect(),
        Err(_) => Vec::new(),
    }
}

pub fn ready_node(name: &str, cpu: &str, pods: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels(&[("kubernetes.io/hostname", name)])),
            ..Default::default()
        },
        spec: None,
        status: Some(NodeStatus {
            allocatable: Some(
                [
                    ("cpu".to_string(), Quantity(cpu.into())),
                    ("memory".to_string(), Quantity("8Gi".into())),
                    ("pods".to_string(), Quantity(pods.into())),
                ]
                .into(),
            ),
            capacity: None,
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// Create a Ready node (status written through /status, as a kubelet does).
pub async fn create_node(client: &Client, node: Node) {
    let api = client.api::<Node>(None);
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut current = api.create(&node).await.expect("create node");
    // A controller (node lifecycle's taints) may write the node meanwhile: on a conflict, read
    // it again and retry, as a kubelet's status update does.
    for _ in 0..10 {
        let mut with_status = current.clone();
        with_status.status = node.status.clone();
        match api.replace_status(&name, &with_status).await {
            Ok(_) => return,
            Err(e) if e.is_conflict() => current = api.get(&name).await.expect("read node"),
            Err(e) => panic!("node status: {e}"),
        }
    }
    panic!("node status: conflicts on every attempt");
}
