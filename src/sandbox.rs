//! `Sandbox`: a whole control plane for a Rust test, on an ephemeral port.
//!
//! ```no_run
//! # async fn demo() -> Result<(), minik8s::control_plane::Error> {
//! let sandbox = minik8s::Sandbox::builder().nodes(2).in_memory().start().await?;
//! let pods: minik8s::client::Api<minik8s::k8s_openapi::api::core::v1::Pod> = sandbox.client().api(Some("default"));
//! # let _ = pods; Ok(()) }
//! ```
//!
//! Each sandbox binds `127.0.0.1:0` and (in memory) touches no files except its kubeconfig, which lives
//! in its own temporary directory, so any number can run in parallel in one test binary. Dropping a
//! sandbox cancels it; `stop().await` also waits for the clean shutdown.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::control_plane::{ControlPlane, ControlPlaneConfig, Error, Storage};

/// Builder for [`Sandbox`]; defaults: in memory, no nodes, controllers on.
#[derive(Debug, Clone)]
pub struct SandboxBuilder {
    config: ControlPlaneConfig,
    /// `--enable-admission-plugins` and `--disable-admission-plugins` (comma-separated), checked
    /// by `start`.
    admission_plugins: (String, String),
    /// The audit policy's text, loaded by `start`.
    audit_policy: Option<String>,
}

impl SandboxBuilder {
    /// Number of fake nodes.
    pub fn nodes(mut self, n: usize) -> Self {
        self.config.nodes = n;
        self
    }

    /// Keep nothing on disk (the default).
    pub fn in_memory(mut self) -> Self {
        self.config.storage = Storage::InMemory;
        self
    }

    /// Persist to `dir` (locked while the sandbox runs).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.storage = Storage::Dir(dir.into());
        self
    }

    /// Run without the controller manager (an apiserver and kubelets only, like envtest). As
    /// envtest, this also disables the `ServiceAccount` admission plugin: nothing would create
    /// the `default` accounts it requires, so pods keep an empty `serviceAccountName` and get no
    /// token volume.
    pub fn without_controllers(mut self) -> Self {
        self.config.controllers = false;
        self.config
            .apiserver
            .admission
            .disable(apiserver::admission::SERVICE_ACCOUNT);
        self
    }

    /// Install every CustomResourceDefinition in YAML/JSON files under `dir` (recursively,
    /// multi-document files included, other documents skipped); `start` returns once all are
    /// Established, as envtest's `CRDDirectoryPaths`. May be called for several directories.
    pub fn crds_from_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.crd_dirs.push(dir.into());
        self
    }

    /// Install `crd` (e.g. a kube-rs `#[derive(CustomResource)]` type's `crd()`) at start, with
    /// those of [`crds_from_dir`](Self::crds_from_dir).
    pub fn crd(
        mut self,
        crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ) -> Self {
        self.config.crds.push(crd);
        self
    }

    /// How long `start` waits for the CRDs to be Established (default 10 s, envtest's).
    pub fn crd_wait(mut self, timeout: std::time::Duration) -> Self {
        self.config.crd_wait = timeout;
        self
    }

    /// Enables the comma-separated admission plugins, as kube-apiserver's
    /// `--enable-admission-plugins`; `start` fails with upstream's message on an unknown name.
    pub fn enable_admission_plugins(mut self, plugins: &str) -> Self {
        self.admission_plugins.0.push_str(&format!(",{plugins}"));
        self
    }

    /// Disables the comma-separated admission plugins, as kube-apiserver's
    /// `--disable-admission-plugins`; `start` fails with upstream's message on an unknown name.
    pub fn disable_admission_plugins(mut self, plugins: &str) -> Self {
        self.admission_plugins.1.push_str(&format!(",{plugins}"));
        self
    }

    /// Serve HTTPS and authenticate and authorize every request (RBAC with the bootstrap
    /// policy), as a kube-apiserver does. The sandbox's own client and kubeconfig act as the
    /// admin (`kubernetes-admin` in `system:masters`); [`Sandbox::add_user`] makes others.
    pub fn secure(mut self) -> Self {
        self.config
            .apiserver
            .secure
            .get_or_insert_with(apiserver::config::SecureConfig::default);
        self
    }

    /// Write the audit log to `path` (`-`: standard output), as kube-apiserver's
    /// `--audit-log-path`; events are written only under an [`audit_policy`](Self::audit_policy).
    pub fn audit_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.apiserver.audit.log_path = Some(path.into());
        self
    }

    /// How long an event lives after its last write (kube-apiserver's `--event-ttl`, one hour by
    /// default; zero: until deleted). A test of what reads events can shorten it.
    pub fn event_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.config.apiserver.event_ttl = ttl;
        self
    }

    /// The audit policy, an `audit.k8s.io/v1` `Policy` in YAML or JSON (what
    /// `--audit-policy-file` holds); `start` fails with upstream's message on an invalid one.
    pub fn audit_policy(mut self, policy: &str) -> Self {
        self.audit_policy = Some(policy.to_string());
        self
    }

    /// Full access to the configuration of every component.
    pub fn configure(mut self, f: impl FnOnce(&mut ControlPlaneConfig)) -> Self {
        f(&mut self.config);
        self
    }

    pub async fn start(self) -> Result<Sandbox, Error> {
        let mut config = self.config;
        let (enable, disable) = &self.admission_plugins;
        config
            .apiserver
            .admission
            .apply_flags(enable, disable)
            .map_err(Error::Apiserver)?;
        if let Some(text) = &self.audit_policy {
            let policy = apiserver::audit::Policy::from_bytes(text.as_bytes())
                .map_err(|e| Error::Apiserver(format!("loading audit policy file: {e}")))?;
            config.apiserver.audit.policy = Some(policy);
        }
        // Once per process: the directories of exited processes do not come back.
        static ORPHANS_REMOVED: std::sync::Once = std::sync::Once::new();
        ORPHANS_REMOVED.call_once(|| remove_orphans(&std::env::temp_dir(), ORPHAN_AGE));
        let dir = tempfile::Builder::new()
            .prefix(&format!("{SANDBOX_DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|source| Error::Kubeconfig {
                path: std::env::temp_dir(),
                source,
            })?;
        if config.kubeconfig.is_none() {
            config.kubeconfig = Some(dir.path().join("kubeconfig"));
        }
        let plane = ControlPlane::start(config).await?;
        Ok(Sandbox {
            plane: Some(plane),
            _dir: dir,
        })
    }
}

/// The start of a sandbox directory's name; the owning process's id follows, then `-`.
const SANDBOX_DIR_PREFIX: &str = "minik8s-sandbox-";

/// How old a sandbox directory of an absent process must be before it is removed: a process in
/// another PID namespace sharing this temporary directory is absent from our `/proc`.
const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Removes the directories of sandboxes whose process has exited without dropping them (a
/// sandbox kept in a `static` by a test binary is never dropped), once unchanged for `min_age`.
/// Only where the process table can be read (`/proc`); a directory whose process id is in use
/// again is left for later. Best effort: what cannot be read or removed stays.
fn remove_orphans(tmp: &Path, min_age: std::time::Duration) {
    let proc = Path::new("/proc");
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    if !proc.join("self").exists() {
        return;
    }
    for entry in entries.flatten().take(100_000) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SANDBOX_DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let old_enough = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= min_age);
        if old_enough && !proc.join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A running control plane owned by a test.
pub struct Sandbox {
    plane: Option<ControlPlane>,
    _dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn builder() -> SandboxBuilder {
        let config = ControlPlaneConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            storage: Storage::InMemory,
            nodes: 0,
            ..ControlPlaneConfig::default()
        };
        SandboxBuilder {
            config,
            admission_plugins: Default::default(),
            audit_policy: None,
        }
    }

    fn plane(&self) -> &ControlPlane {
        // Invariant: `plane` is Some until `stop` consumes the sandbox.
        match &self.plane {
            Some(plane) => plane,
            None => unreachable!("sandbox used after stop"),
        }
    }

    pub fn url(&self) -> &str {
        self.plane().url()
    }

    pub fn addr(&self) -> SocketAddr {
        self.plane().addr()
    }

    pub fn kubeconfig_path(&self) -> &Path {
        match self.plane().kubeconfig_path() {
            Some(path) => path,
            None => unreachable!("a sandbox always writes a kubeconfig"),
        }
    }

    /// A ready client for this control plane.
    pub fn client(&self) -> client::Client {
        self.plane().client()
    }

    pub fn kubelets(&self) -> Option<&kubelet_fake::FakeKubelets> {
        self.plane().kubelets()
    }

    /// A user of a secure sandbox, like envtest's `AddUser`: a client acting as `name` in
    /// `groups` (a client certificate of the sandbox's CA) and the path of a kubeconfig for
    /// it (for kubectl, client-go, kube-rs with TLS). On a plain sandbox the client and
    /// kubeconfig act as the admin, as every request there does.
    pub fn add_user(
        &self,
        name: &str,
        groups: &[&str],
    ) -> Result<(client::Client, PathBuf), Error> {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        let users = self.plane().users();
        let issued = users.issue(name, &groups)?;
        let client = client::Client::new(users.client_config(issued.as_ref()))
            .map_err(|e| Error::Client(Box::new(e)))?;
        // One file per user name, beside the sandbox's own kubeconfig: other bytes escaped as
        // `_xx`, so two names never share a file (`a.b` and `a_b` differ).
        let safe: String = name
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b == b'-' {
                    char::from(b).to_string()
                } else {
                    format!("_{b:02x}")
                }
            })
            .collect();
        let path = self._dir.path().join(format!("kubeconfig-{safe}"));
        crate::kubeconfig::write_text(&path, &users.kubeconfig(issued.as_ref())).map_err(
            |source| Error::Kubeconfig {
                path: path.clone(),
                source,
            },
        )?;
        Ok((client, path))
    }

    /// A kube-rs client for this control plane, acting as the admin (feature `kube`).
    #[cfg(feature = "kube")]
    pub fn kube_client(&self) -> Result<kube::Client, Error> {
        self.kube_client_as(
            crate::control_plane::ADMIN_USER,
            &[crate::control_plane::ADMIN_GROUP],
        )
    }

    /// A kube-rs client acting as `name` in `groups`, the identity [`Sandbox::add_user`] gives
    /// (feature `kube`): on a secure sandbox it trusts the sandbox's CA and presents a client
    /// certificate for that identity; on a plain sandbox every request acts as the admin.
    #[cfg(feature = "kube")]
    pub fn kube_client_as(&self, name: &str, groups: &[&str]) -> Result<kube::Client, Error> {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        let users = self.plane().users();
        let issued = users.issue(name, &groups)?;
        let config = users.kube_config(issued.as_ref())?;
        kube::Client::try_from(config).map_err(|e| Error::KubeClient(e.to_string()))
    }

    /// Shuts down cleanly and waits for it.
    pub async fn stop(mut self) {
        if let Some(plane) = self.plane.take() {
            plane.shutdown().await;
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(plane) = &self.plane {
            plane.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orphaned_sandbox_directories_are_removed_and_live_ones_kept() {
        if !Path::new("/proc/self").exists() {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        // No process can have this id (pid_max is at most 2^22).
        let orphan = root
            .path()
            .join(format!("{SANDBOX_DIR_PREFIX}4294967294-abc"));
        let live = root
            .path()
            .join(format!("{SANDBOX_DIR_PREFIX}{}-abc", std::process::id()));
        let unnamed = root.path().join(format!("{SANDBOX_DIR_PREFIX}abcdef"));
        let other = root.path().join("something-else-4294967294-abc");
        for dir in [&orphan, &live, &unnamed, &other] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("kubeconfig"), "x").unwrap();
        }
        // A fresh directory of an absent process may belong to another PID namespace: kept.
        remove_orphans(root.path(), ORPHAN_AGE);
        assert!(orphan.exists());
        remove_orphans(root.path(), std::time::Duration::ZERO);
        assert!(!orphan.exists());
        assert!(live.exists() && unnamed.exists() && other.exists());
    }
}
