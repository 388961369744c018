//! The deployment controller end to end: a real apiserver on 127.0.0.1, the replica-set controller,
//! scheduler and GC from `controller::run`, fake kubelets driving pods to Ready, the
//! `DeploymentController` started alongside, and the real `/usr/bin/kubectl` as the user.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use client::record::EventBroadcaster;
use client::{Api, ListParams, SharedInformerFactory};
use controller::deployment::DeploymentController;
use controller::EnabledControllers;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kubelet_fake::config::{Action, ImagePullError, Match, Rule};
use kubelet_fake::{FakeKubelets, KubeletConfig, LifecycleConfig};

const T: Duration = Duration::from_secs(25);

struct DEnv {
    env: Env,
    _kubelets: FakeKubelets,
    dir: tempfile::TempDir,
}

async fn start_all(lifecycle: LifecycleConfig) -> DEnv {
    let mut en = EnabledControllers::none();
    en.replicaset = true;
    en.garbagecollector = true;
    en.scheduler = true;
    // New nodes are `not-ready:NoSchedule` tainted until node lifecycle sees them Ready.
    en.nodelifecycle = true;
    let env = start(en).await;
    let kcfg = KubeletConfig {
        nodes: 3,
        lifecycle,
        ..Default::default()
    };
    let kubelets = FakeKubelets::start(env.client.clone(), kcfg, env.shutdown.clone())
        .await
        .expect("fake kubelets");
    // The deployment controller, not yet wired into `controller::run`: started here on its own
    // informer factory, exactly as the manager would.
    let factory = SharedInformerFactory::new(env.client.clone(), Duration::ZERO);
    let broadcaster = EventBroadcaster::new(env.client.clone(), "controller-manager");
    let dc = DeploymentController::new(
        env.client.clone(),
        factory.informer::<Deployment>(),
        factory.informer::<ReplicaSet>(),
        controller::cached_pod::informer(&factory),
        broadcaster.recorder("deployment-controller"),
        controller::clock::system(),
    );
    tokio::spawn(dc.run(2, env.shutdown.clone()));
    tokio::spawn(broadcaster.run(env.shutdown.clone()));
    factory.start(env.shutdown.clone());

    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\n    namespace: default\nusers:\n- name: t\n  user: {{}}\ncurrent-context: t\n",
        env.server.url()
    );
    std::fs::write(dir.path().join("kubeconfig"), kubeconfig).expect("kubeconfig");
    DEnv {
        env,
        _kubelets: kubelets,
        dir,
    }
}

impl DEnv {
    /// Run kubectl on a blocking thread (the runtime keeps serving the watcher and controllers).
    async fn kubectl_output(&self, args: &[&str]) -> Output {
        let kc = self.dir.path().join("kubeconfig");
        let cache = self.dir.path().join("cache");
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new("/usr/bin/kubectl")
                .arg("--kubeconfig")
                .arg(&kc)
                .arg("--cache-dir")
                .arg(&cache)
                .args(&args)
                .env_remove("KUBECONFIG")
                .output()
                .expect("run kubectl")
        })
        .await
        .expect("kubectl thread")
    }

    /// Run kubectl and require success (no retry: a PATCH without a resourceVersion precondition
    /// must never answer 409 when it races a controller's write).
    async fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_output(args).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
            out.status
        );
        stdout
    }

    fn deployments(&self) -> Api<Deployment> {
        self.env.client.api::<Deployment>(Some("default"))
    }

    fn rss(&self) -> Api<ReplicaSet> {
        self.env.client.api::<ReplicaSet>(Some("default"))
    }

    async fn stop(self) {
        self.env.stop().await;
    }
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn image_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Deployment status is at `n` replicas, all updated and available, for the current generation.
async fn rolled_out(d: &Api<Deployment>, name: &str, n: i32) -> bool {
    d.get(name).await.ok().is_some_and(|d| {
        let gen = d.metadata.generation;
        d.status.is_some_and(|s| {
            s.observed_generation == gen
                && s.replicas == Some(n)
                && s.updated_replicas == Some(n)
                && s.available_replicas == Some(n)
        })
    })
}

/// Bounds a watcher observed while a rollout ran.
struct Observed {
    min_ready: AtomicI64,
    max_live: AtomicI64,
    both_images: AtomicBool,
    stop: AtomicBool,
}

/// Poll the pods every 10 ms until stopped (bounded: at most `T`), recording the fewest Ready live
/// pods, the most live pods, and whether pods of `old_image` and `new_image` ever coexisted.
fn watch_pods(
    pods: Api<Pod>,
    app: &'static str,
    old_image: &'static str,
    new_image: &'static str,
) -> (Arc<Observed>, tokio::task::JoinHandle<()>) {
    let obs = Arc::new(Observed {
        min_ready: AtomicI64::new(i64::MAX),
        max_live: AtomicI64::new(0),
        both_images: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    });
    let o = obs.clone();
    let handle = tokio::spawn(async move {
        let deadline = std::time::Instant::now() + T * 2;
        while !o.stop.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
            let lp = ListParams::default().labels(format!("app={app}"));
            if let Ok(list) = pods.list(&lp).await {
                let live: Vec<&Pod> = list
                    .items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                let ready = live.iter().filter(|p| is_ready(p)).count() as i64;
                o.min_ready.fetch_min(ready, Ordering::Relaxed);
                o.max_live.fetch_max(live.len() as i64, Ordering::Relaxed);
                let has = |img: &str| list.items.iter().any(|p| image_of(p) == img);
                if has(old_image) && has(new_image) {
                    o.both_images.store(true, Ordering::Relaxed);
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    (obs, handle)
}

async fn live_images(pods: &Api<Pod>, app: &str) -> Vec<String> {
    live_pods(pods, app).await.iter().map(image_of).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_scale_rolling_update_within_bounds_then_history_and_undo() {
    let e = start_all(LifecycleConfig::default()).await;
    let (d, pods) = (e.deployments(), e.env.pods("default"));
    e.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1",
        "--replicas=4",
    ])
    .await;
    assert!(
        eventually(T, || rolled_out(&d, "web", 4)).await,
        "4 available"
    );
    let rss = e
        .rss()
        .list(&ListParams::default())
        .await
        .expect("rs")
        .items;
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let hash = rs
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-template-hash"))
        .cloned();
    let hash = hash.expect("pod-template-hash label");
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    let ann = rs.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann.get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        ann.get("deployment.kubernetes.io/desired-replicas")
            .map(String::as_str),
        Some("4")
    );
    assert_eq!(
        ann.get("deployment.kubernetes.io/max-replicas")
            .map(String::as_str),
        Some("5")
    );
    let refs = rs.metadata.owner_references.clone().unwrap_or_default();
    assert!(refs
        .iter()
        .any(|r| r.kind == "Deployment" && r.controller == Some(true)));

    e.kubectl(&["scale", "deployment", "web", "--replicas=6"])
        .await;
    assert!(
        eventually(T, || rolled_out(&d, "web", 6)).await,
        "scaled to 6"
    );
    e.kubectl(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"strategy":{"rollingUpdate":{"maxSurge":1,"maxUnavailable":1}}}}"#,
    ])
    .await;
    assert!(
        eventually(T, || rolled_out(&d, "web", 6)).await,
        "strategy patched"
    );

    let (obs, watcher) = watch_pods(pods.clone(), "web", "nginx:1", "nginx:2");
    e.kubectl(&["set", "image", "deployment/web", "nginx=nginx:2"])
        .await;
    let status = e
        .kubectl(&["rollout", "status", "deployment/web", "--timeout=40s"])
        .await;
    assert!(status.contains("successfully rolled out"), "{status}");
    obs.stop.store(true, Ordering::Relaxed);
    watcher.await.expect("watcher");
    let (min_ready, max_live) = (
        obs.min_ready.load(Ordering::Relaxed),
        obs.max_live.load(Ordering::Relaxed),
    );
    assert!(
        min_ready >= 5,
        "never below replicas - maxUnavailable ready: saw {min_ready}"
    );
    assert!(
        max_live <= 7,
        "never above replicas + maxSurge pods: saw {max_live}"
    );
    assert!(
        obs.both_images.load(Ordering::Relaxed),
        "a rolling update overlaps versions"
    );
    assert!(
        eventually(T, || async {
            live_images(&pods, "web").await == vec!["nginx:2".to_string(); 6]
        })
        .await,
        "all pods on nginx:2"
    );

    let dep = d.get("web").await.expect("get");
    let conds = dep.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(conds
        .iter()
        .any(|c| c.type_ == "Available" && c.status == "True"));
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Progressing"
                && c.reason.as_deref() == Some("NewReplicaSetAvailable"))
    );
    let history = e.kubectl(&["rollout", "history", "deployment/web"]).await;
    assert!(history.contains('1') && history.contains('2'), "{history}");

    e.kubectl(&["rollout", "undo", "deployment/web"]).await;
    let status = e
        .kubectl(&["rollout", "status", "deployment/web", "--timeout=40s"])
        .await;
    assert!(status.contains("successfully rolled out"), "{status}");
    assert!(
        eventually(T, || async {
            live_images(&pods, "web").await == vec!["nginx:1".to_string(); 6]
        })
        .await,
        "undo back to nginx:1"
    );
    // The old RS became new again: revision 3, with 1 in its history; the Deployment says 3.
    let dep = d.get("web").await.expect("get");
    let rev = dep
        .metadata
        .annotations
        .unwrap_or_default()
        .get("deployment.kubernetes.io/revision")
        .cloned();
    assert_eq!(rev.as_deref(), Some("3"));
    let rs = e
        .rss()
        .get(&format!("web-{hash}"))
        .await
        .expect("original rs");
    let ann = rs.metadata.annotations.unwrap_or_default();
    assert_eq!(
        ann.get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        ann.get("deployment.kubernetes.io/revision-history")
            .map(String::as_str),
        Some("1")
    );
    e.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_restart_and_history_cleanup() {
    let e = start_all(LifecycleConfig::default()).await;
    let (d, rss) = (e.deployments(), e.rss());
    e.kubectl(&[
        "create",
        "deployment",
        "api",
        "--image=nginx:1",
        "--replicas=2",
    ])
    .await;
    e.kubectl(&[
        "patch",
        "deployment",
        "api",
        "-p",
        r#"{"spec":{"revisionHistoryLimit":1}}"#,
    ])
    .await;
    assert!(
        eventually(T, || rolled_out(&d, "api", 2)).await,
        "2 available"
    );

    e.kubectl(&["rollout", "pause", "deployment/api"]).await;
    e.kubectl(&["set", "image", "deployment/api", "nginx=nginx:2"])
        .await;
    // Paused: the generation is observed and the condition says so, but no new RS appears.
    assert!(
        eventually(T, || async {
            d.get("api").await.ok().is_some_and(|d| {
                let gen = d.metadata.generation;
                d.status.is_some_and(|s| {
                    s.observed_generation == gen
                        && s.conditions.unwrap_or_default().iter().any(|c| {
                            c.type_ == "Progressing"
                                && c.reason.as_deref() == Some("DeploymentPaused")
                        })
                })
            })
        })
        .await,
        "paused condition observed"
    );
    assert_eq!(
        rss.list(&ListParams::default())
            .await
            .expect("rs")
            .items
            .len(),
        1
    );
    // Scaling still works while paused.
    e.kubectl(&["scale", "deployment", "api", "--replicas=3"])
        .await;
    assert!(
        eventually(T, || async {
            d.get("api")
                .await
                .ok()
                .and_then(|d| d.status)
                .is_some_and(|s| s.available_replicas == Some(3))
        })
        .await,
        "scaled while paused"
    );
    assert_eq!(
        rss.list(&ListParams::default())
            .await
            .expect("rs")
            .items
            .len(),
        1
    );

    e.kubectl(&["rollout", "resume", "deployment/api"]).await;
    let status = e
        .kubectl(&["rollout", "status", "deployment/api", "--timeout=40s"])
        .await;
    assert!(status.contains("successfully rolled out"), "{status}");
    e.kubectl(&["rollout", "restart", "deployment/api"]).await;
    let status = e
        .kubectl(&["rollout", "status", "deployment/api", "--timeout=40s"])
        .await;
    assert!(status.contains("successfully rolled out"), "{status}");
    // Three revisions existed; with revisionHistoryLimit 1 only the newest old RS is kept.
    assert!(
        eventually(T, || async {
            rss.list(&ListParams::default())
                .await
                .is_ok_and(|l| l.items.len() == 2)
        })
        .await,
        "old revisions cleaned up"
    );
    let revs: Vec<String> = rss
        .list(&ListParams::default())
        .await
        .expect("rs")
        .items
        .iter()
        .filter_map(|r| {
            r.metadata
                .annotations
                .clone()?
                .get("deployment.kubernetes.io/revision")
                .cloned()
        })
        .collect();
    assert!(
        revs.contains(&"3".to_string()) && revs.contains(&"2".to_string()),
        "{revs:?}"
    );
    e.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_removes_every_old_pod_before_creating_new_ones() {
    let e = start_all(LifecycleConfig::default()).await;
    let (d, pods) = (e.deployments(), e.env.pods("default"));
    e.kubectl(&[
        "create",
        "deployment",
        "db",
        "--image=nginx:1",
        "--replicas=3",
    ])
    .await;
    e.kubectl(&[
        "patch",
        "deployment",
        "db",
        "--type=merge",
        "-p",
        r#"{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}"#,
    ])
    .await;
    assert!(
        eventually(T, || rolled_out(&d, "db", 3)).await,
        "3 available"
    );
    let (obs, watcher) = watch_pods(pods.clone(), "db", "nginx:1", "nginx:2");
    e.kubectl(&["set", "image", "deployment/db", "nginx=nginx:2"])
        .await;
    let status = e
        .kubectl(&["rollout", "status", "deployment/db", "--timeout=40s"])
        .await;
    assert!(status.contains("successfully rolled out"), "{status}");
    assert!(
        eventually(T, || async {
            live_images(&pods, "db").await == vec!["nginx:2".to_string(); 3]
        })
        .await,
        "all pods on nginx:2"
    );
    obs.stop.store(true, Ordering::Relaxed);
    watcher.await.expect("watcher");
    assert!(
        !obs.both_images.load(Ordering::Relaxed),
        "old and new pods coexisted under Recreate"
    );
    assert!(obs.max_live.load(Ordering::Relaxed) <= 3);
    e.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_rollout_reports_progress_deadline_exceeded() {
    let lifecycle = LifecycleConfig {
        rules: vec![Rule {
            name: "broken image".into(),
            selector: Match {
                image: Some("broken:*".into()),
                ..Default::default()
            },
            action: Action::ImagePullError(ImagePullError::default()),
        }],
        ..Default::default()
    };
    let e = start_all(lifecycle).await;
    let d = e.deployments();
    e.kubectl(&[
        "create",
        "deployment",
        "stuck",
        "--image=nginx:1",
        "--replicas=2",
    ])
    .await;
    e.kubectl(&[
        "patch",
        "deployment",
        "stuck",
        "-p",
        r#"{"spec":{"progressDeadlineSeconds":2}}"#,
    ])
    .await;
    assert!(
        eventually(T, || rolled_out(&d, "stuck", 2)).await,
        "2 available"
    );
    e.kubectl(&["set", "image", "deployment/stuck", "nginx=broken:1"])
        .await;
    assert!(
        eventually(T, || async {
            d.get("stuck")
                .await
                .ok()
                .and_then(|d| d.status)
                .is_some_and(|s| {
                    s.conditions.unwrap_or_default().iter().any(|c| {
                        c.type_ == "Progressing"
                            && c.status == "False"
                            && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
                    })
                })
        })
        .await,
        "ProgressDeadlineExceeded reported"
    );
    let out = e
        .kubectl_output(&["rollout", "status", "deployment/stuck", "--timeout=10s"])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "rollout status must fail");
    assert!(
        stderr.contains("exceeded its progress deadline"),
        "{stderr}"
    );
    // maxUnavailable 25% of 2 rounds down to 0: the old pods are all still there and available.
    let st = d
        .get("stuck")
        .await
        .expect("get")
        .status
        .unwrap_or_default();
    assert_eq!(st.available_replicas, Some(2));
    e.stop().await;
}
