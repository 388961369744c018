//! Real etcd members on loopback, for tests, fault tests and benchmarks: [`EtcdCluster`] starts one
//! or more `etcd` processes (Debian's `etcd-server`, or `$ETCD_BIN`) on free loopback ports, each in
//! its own directory of one temporary directory, and kills them when dropped.
//!
//! Guarantees: every wait has a deadline ([`READY_DEADLINE`]); a member's output goes to
//! `<dir>/<name>.log`, not to the test's output; members accept values up to
//! [`crate::MAX_VALUE_SIZE`] plus room for the request around them (`--max-request-bytes`), so the
//! store's own limit is the one a client meets.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{Error, Result, MAX_VALUE_SIZE};

/// How long a member (or a cluster's quorum) may take to serve.
pub const READY_DEADLINE: Duration = Duration::from_secs(30);

/// `--max-request-bytes` of test members: a value at the store's limit plus its key and framing.
pub const MAX_REQUEST_BYTES: usize = MAX_VALUE_SIZE + 64 * 1024;

/// One member: its name, URLs and (while running) its process.
pub struct EtcdMember {
    pub name: String,
    pub client_url: String,
    pub peer_url: String,
    child: Option<Child>,
}

impl EtcdMember {
    /// The member's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

/// A cluster of etcd members on loopback, killed (SIGKILL) on drop.
pub struct EtcdCluster {
    members: Vec<EtcdMember>,
    initial_cluster: String,
    root: tempfile::TempDir,
    tls: Option<MemberTls>,
}

/// TLS of test members' client port: PEM files of the serving certificate and key, and the CA
/// that client certificates must be signed by (`--client-cert-auth`).
#[derive(Debug, Clone)]
pub struct MemberTls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_ca_file: PathBuf,
    /// How this harness itself connects to check readiness (CA and client certificate).
    pub client: crate::EtcdConfig,
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_owned(),
        source,
    }
}

fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| io_error(Path::new("127.0.0.1:0"), e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| io_error(Path::new("127.0.0.1:0"), e))
}

/// The etcd binary: `$ETCD_BIN`, else `etcd` on the `PATH`.
pub fn etcd_binary() -> PathBuf {
    std::env::var_os("ETCD_BIN").map_or_else(|| PathBuf::from("etcd"), PathBuf::from)
}

impl EtcdCluster {
    /// Start `size` members forming one new cluster and wait until it serves a quorum read.
    pub async fn start(size: usize) -> Result<Self> {
        Self::start_with(size, None).await
    }

    /// As [`EtcdCluster::start`], serving clients over TLS and requiring client certificates
    /// when `tls` is given.
    pub async fn start_with(size: usize, tls: Option<MemberTls>) -> Result<Self> {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let root = tempfile::tempdir().map_err(|e| io_error(Path::new("tempdir"), e))?;
        let mut members = Vec::with_capacity(size);
        for i in 0..size.max(1) {
            members.push(EtcdMember {
                name: format!("m{i}"),
                client_url: format!("{scheme}://127.0.0.1:{}", free_port()?),
                peer_url: format!("http://127.0.0.1:{}", free_port()?),
                child: None,
            });
        }
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Self {
            members,
            initial_cluster,
            root,
            tls,
        };
        for i in 0..cluster.members.len() {
            cluster.spawn(i)?;
        }
        cluster.wait_ready().await?;
        Ok(cluster)
    }

    /// Client URLs of every member, for `--etcd-servers`.
    pub fn client_urls(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    pub fn members(&self) -> &[EtcdMember] {
        &self.members
    }

    /// The directory holding every member's data and log.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let dir = self.root.path().to_owned();
        let member = &mut self.members[i];
        let log_path = dir.join(format!("{}.log", member.name));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| io_error(&log_path, e))?;
        let log_err = log.try_clone().map_err(|e| io_error(&log_path, e))?;
        let data_dir = dir.join(&member.name);
        let state = if data_dir.exists() { "existing" } else { "new" };
        let binary = etcd_binary();
        let mut command = Command::new(&binary);
        if let Some(tls) = &self.tls {
            command
                .arg("--cert-file")
                .arg(&tls.cert_file)
                .arg("--key-file")
                .arg(&tls.key_file)
                .arg("--trusted-ca-file")
                .arg(&tls.client_ca_file)
                .arg("--client-cert-auth");
        }
        let child = command
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--listen-client-urls", &member.client_url])
            .args(["--advertise-client-urls", &member.client_url])
            .args(["--listen-peer-urls", &member.peer_url])
            .args(["--initial-advertise-peer-urls", &member.peer_url])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "minik8s-test"])
            .args(["--max-request-bytes", &MAX_REQUEST_BYTES.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .spawn()
            .map_err(|e| io_error(&binary, e))?;
        member.child = Some(child);
        Ok(())
    }

    /// SIGKILL member `i` (no clean shutdown); its data stays for [`EtcdCluster::restart`].
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members.get_mut(i).and_then(|m| m.child.take()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start member `i` again on its data directory (after [`EtcdCluster::kill`]).
    pub fn restart(&mut self, i: usize) -> Result<()> {
        self.kill(i);
        self.spawn(i)
    }

    /// Wait until the cluster serves a linearizable read through any member.
    pub async fn wait_ready(&self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + READY_DEADLINE;
        let mut last = String::from("no attempt");
        while tokio::time::Instant::now() < deadline {
            let config = crate::EtcdConfig {
                endpoints: self.client_urls(),
                ..self
                    .tls
                    .as_ref()
                    .map(|t| t.client.clone())
                    .unwrap_or_default()
            };
            let options = super::connect_options(&config)?;
            let attempt = async {
                let mut client =
                    etcd_client::Client::connect(self.client_urls(), Some(options)).await?;
                client.get("health", None).await
            };
            match tokio::time::timeout(Duration::from_secs(2), attempt).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(error)) => last = error.to_string(),
                Err(_) => last = "timed out".into(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::Etcd {
            operation: "start",
            detail: format!(
                "etcd did not serve within {READY_DEADLINE:?} (logs in {}): {last}",
                self.root.path().display()
            ),
        })
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
