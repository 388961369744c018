//! Shared helpers of the apiserver integration tests: an in-process server on 127.0.0.1:0 over
//! an in-memory store, a kubeconfig for the real kubectl, and condition waits with deadlines.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::{Config, Server};

pub mod http;

/// Starts a server with `config` (address forced to 127.0.0.1:0) over a fresh memory store.
pub async fn start_with(mut config: Config) -> Server {
    config.address = "127.0.0.1:0".parse().unwrap();
    let store = store::MemoryStore::new(store::StoreConfig::default()).expect("memory store");
    apiserver::start(config, Arc::new(store))
        .await
        .expect("server starts")
}

/// Starts a server with the default configuration.
pub async fn start() -> Server {
    start_with(Config::default()).await
}

/// A started, seeded (bootstrap objects) apiserver over `store`, served without a socket: tests
/// send requests to its router with `oneshot`.
pub async fn router_and_state_over(
    store: Arc<dyn store::Store>,
) -> (axum::Router, apiserver::AppState) {
    router_and_state_with(Config::default(), store, Default::default()).await
}

/// [`router_and_state_over`] with `config`, stopped by `shutdown`.
pub async fn router_and_state_with(
    config: Config,
    store: Arc<dyn store::Store>,
    shutdown: tokio_util::sync::CancellationToken,
) -> (axum::Router, apiserver::AppState) {
    let state = apiserver::AppState::start(config, store, shutdown)
        .await
        .expect("apiserver state starts");
    apiserver::bootstrap::seed(&state)
        .await
        .expect("bootstrap objects");
    (apiserver::app(state.clone()), state)
}

/// [`router_and_state_over`] a fresh memory store.
pub async fn router_and_state() -> (axum::Router, apiserver::AppState) {
    let store = store::MemoryStore::new(store::StoreConfig::default()).expect("memory store");
    router_and_state_over(Arc::new(store)).await
}

/// The router of [`router_and_state`].
pub async fn router() -> axum::Router {
    router_and_state().await.0
}

/// The router of [`router_and_state_over`] `store`.
pub async fn router_over(store: Arc<dyn store::Store>) -> axum::Router {
    router_and_state_over(store).await.0
}

/// A temp dir with a kubeconfig pointing at `url` and a private kubectl cache dir.
pub struct Kube {
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub cache: PathBuf,
}

impl Kube {
    pub fn new(url: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: {url}\ncontexts:\n- name: m\n  context:\n    cluster: m\n    user: u\ncurrent-context: m\nusers:\n- name: u\n  user: {{}}\n"
            ),
        )
        .unwrap();
        let cache = dir.path().join("cache");
        Kube {
            dir,
            kubeconfig,
            cache,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    /// Runs `binary` with the kubeconfig and cache dir; returns (status ok, stdout, stderr).
    pub fn run_with(&self, binary: &str, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(binary)
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--cache-dir={}", self.cache.display()))
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs the dispatcher `kubectl`.
    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        self.run_with("/usr/bin/kubectl", args)
    }

    /// Runs kubectl and fails the test on a non-zero exit or any error on stderr.
    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        assert!(
            !err.to_lowercase().contains("error"),
            "kubectl {args:?} printed an error: {err}"
        );
        out
    }
}

/// Waits for `cond` to hold, polling, at most `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Runs blocking kubectl work off the async runtime.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// The store's revision: a namespace list's resourceVersion.
pub async fn revision(c: &reqwest::Client, url: &str) -> u64 {
    let list: serde_json::Value = c
        .get(format!("{url}/api/v1/namespaces"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// [`revision`] once it has stayed put for half a second (at most 20 tries): the start-up
/// reconcilers (the `kubernetes` Service's IPAddress, FlowSchema conditions) write in the
/// background, and a test that waits for the next revision must not be released by them.
pub async fn settled_revision(c: &reqwest::Client, url: &str) -> u64 {
    let mut last = revision(c, url).await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = revision(c, url).await;
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the revision kept moving: {last}");
}
