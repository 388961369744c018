//! Command-line interface: `minik8s up` and the component subcommands.
//!
//! `main` only parses flags, sets up tracing and hands over to [`run`], which waits for SIGINT/SIGTERM
//! and then shuts the components down in order (STYLE.md 2, 10).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::control_plane::{ControlPlane, ControlPlaneConfig, Storage};

#[derive(Debug, Parser)]
#[command(
    name = "minik8s",
    version,
    about = "A Kubernetes-compatible control plane in one binary"
)]
pub struct Cli {
    /// Log level or filter (overridden by RUST_LOG), e.g. `info` or `apiserver=debug`.
    #[arg(long, global = true, default_value = "info")]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the apiserver, controller manager and fake kubelets in one process.
    Up(UpArgs),
    /// Run only the apiserver.
    Apiserver(ApiserverArgs),
    /// Run only the controller manager, against a server.
    ControllerManager(ControllerManagerArgs),
    /// Run only fake kubelets, against a server.
    Kubelet(KubeletArgs),
    /// Measure the performance figures; their targets and recorded results are in BENCHMARKS.md.
    Bench(crate::bench::BenchArgs),
    /// Print a kubeconfig for a user of a secure cluster, with a client certificate signed by
    /// the data directory's CA (`CN=<user>`, `O=<group>` for each group).
    Kubeconfig(KubeconfigArgs),
}

#[derive(Debug, Args)]
pub struct KubeconfigArgs {
    /// Data directory of the cluster (default: the per-user data directory).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The user name (the certificate's CN).
    #[arg(long)]
    pub user: String,
    /// A group of the user (the certificate's O); may be repeated.
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// Server URL (default: the one in the data directory's kubeconfig).
    #[arg(long)]
    pub server: Option<String>,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    #[command(flatten)]
    pub server: ApiserverArgs,
    /// Number of fake nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Where to write the kubeconfig (default: inside the data directory; with --in-memory, a
    /// temporary directory removed at exit).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Install every CustomResourceDefinition in YAML/JSON files under DIR (recursively,
    /// multi-document files included) and wait until all are Established before reporting
    /// ready, as envtest's CRDDirectoryPaths. May be repeated.
    #[arg(long = "crds", value_name = "DIR")]
    pub crds: Vec<PathBuf>,
    /// Index of this process's first fake node (`node-<first>` …), for several `up` processes on
    /// one etcd with disjoint nodes.
    #[arg(long, value_name = "N")]
    pub first_node_index: Option<usize>,
}

#[derive(Debug, Args)]
pub struct ApiserverArgs {
    /// Address to listen on; any address but loopback implies --secure.
    #[arg(long, default_value = "127.0.0.1")]
    pub address: IpAddr,
    /// Port to listen on; 0 picks a free port.
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// Data directory (default: the per-user data directory, e.g. ~/.local/share/minik8s).
    #[arg(long, conflicts_with = "in_memory")]
    pub data_dir: Option<PathBuf>,
    /// Keep nothing on disk.
    #[arg(long)]
    pub in_memory: bool,
    /// Admission plugins that should be enabled in addition to default enabled ones
    /// (comma-delimited; the order does not matter, plugins run in upstream's order).
    #[arg(long, value_name = "PLUGINS", default_value = "")]
    pub enable_admission_plugins: String,
    /// Keep objects in etcd at these client URLs (comma-separated) instead of the data directory;
    /// several apiservers on one etcd serve the same objects. With --data-dir, only the
    /// credentials (CA, service-account key) are kept there: give every apiserver a copy.
    #[arg(
        long,
        value_name = "URL",
        value_delimiter = ',',
        conflicts_with = "in_memory"
    )]
    pub etcd_servers: Vec<String>,
    /// SSL Certificate Authority file used to secure etcd communication.
    #[arg(long, value_name = "FILE")]
    pub etcd_cafile: Option<PathBuf>,
    /// SSL certification file used to secure etcd communication.
    #[arg(long, value_name = "FILE")]
    pub etcd_certfile: Option<PathBuf>,
    /// SSL key file used to secure etcd communication.
    #[arg(long, value_name = "FILE")]
    pub etcd_keyfile: Option<PathBuf>,
    /// The interval of compaction requests to etcd (e.g. 5m, 30s); 0 disables compaction.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = kubelet_fake::config::parse_duration)]
    pub etcd_compaction_interval: std::time::Duration,
    /// Amount of time to retain events (e.g. 1h, 90m); 0 keeps them until they are deleted.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = kubelet_fake::config::parse_duration)]
    pub event_ttl: std::time::Duration,
    /// Admission plugins that should be disabled although they are in the default enabled
    /// plugins list (comma-delimited: LimitRanger, ServiceAccount, TaintNodesByCondition,
    /// PodSecurity, DefaultTolerationSeconds, StorageObjectInUseProtection,
    /// PersistentVolumeClaimResize, RuntimeClass, CertificateApproval, CertificateSigning,
    /// CertificateSubjectRestriction, MutatingAdmissionWebhook, ValidatingAdmissionPolicy,
    /// ValidatingAdmissionWebhook, ResourceQuota).
    #[arg(long, value_name = "PLUGINS", default_value = "")]
    pub disable_admission_plugins: String,
    /// File with admission control configuration (an AdmissionConfiguration; the PodSecurity
    /// plugin's defaults and exemptions are read from it).
    #[arg(long, value_name = "FILE")]
    pub admission_control_config_file: Option<PathBuf>,
    /// Serve HTTPS with the data directory's CA and authenticate and authorize every request
    /// (RBAC). Implied by a non-loopback --address or a --token-auth-file.
    #[arg(long)]
    pub secure: bool,
    /// Static bearer tokens, one `token,user,uid,"group1,group2"` per line (kube-apiserver's
    /// format); implies --secure.
    #[arg(long, value_name = "FILE")]
    pub token_auth_file: Option<PathBuf>,
    /// Serve requests without credentials as system:anonymous (kube-apiserver's default).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
    /// More names or addresses for the serving certificate; may be repeated.
    #[arg(long = "tls-san", value_name = "NAME")]
    pub tls_sans: Vec<String>,
    /// If set, all requests coming to the apiserver will be logged to this file. '-' means
    /// standard out. Events are written only with --audit-policy-file.
    #[arg(long, visible_alias = "audit-log", value_name = "PATH")]
    pub audit_log_path: Option<PathBuf>,
    /// Path to the file that defines the audit policy configuration (audit.k8s.io/v1 Policy).
    #[arg(long, value_name = "FILE")]
    pub audit_policy_file: Option<PathBuf>,
    /// The maximum size in megabytes of the audit log file before it gets rotated (0: 100).
    #[arg(long, value_name = "MB", default_value_t = 0)]
    pub audit_log_maxsize: u64,
    /// The maximum number of old audit log files to retain (0: all).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub audit_log_maxbackup: usize,
}

#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// kubeconfig naming the server to use.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Server URL (instead of a kubeconfig), e.g. http://127.0.0.1:6443.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub server: Option<String>,
}

#[derive(Debug, Args)]
pub struct ControllerManagerArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Where to serve /healthz and /metrics (kube-controller-manager's port is 10257); loopback
    /// only, as the port serves without authentication.
    #[arg(long, default_value = "127.0.0.1:10257")]
    pub metrics_address: SocketAddr,
    /// Elect a leader on a Lease in kube-system, so several copies can run and only one acts.
    #[arg(long)]
    pub leader_elect: bool,
    /// How long a non-leader waits after the last renewal before taking the lease over.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = kubelet_fake::config::parse_duration)]
    pub leader_elect_lease_duration: std::time::Duration,
    /// How long the leader keeps retrying to renew before it stops leading.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = kubelet_fake::config::parse_duration)]
    pub leader_elect_renew_deadline: std::time::Duration,
    /// How long clients wait between attempts to acquire or renew the lease.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = kubelet_fake::config::parse_duration)]
    pub leader_elect_retry_period: std::time::Duration,
    /// The name of the Lease the election uses.
    #[arg(long, default_value = "kube-controller-manager")]
    pub leader_elect_resource_name: String,
    /// The namespace of the Lease the election uses.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
    /// The cluster CA bundle (PEM) to publish as `kube-root-ca.crt` in every namespace; without
    /// it the root CA publisher does not run.
    #[arg(long)]
    pub root_ca_file: Option<PathBuf>,
    /// Each controller acts as its own ServiceAccount in kube-system (its token from
    /// TokenRequest), bound to its `system:controller:<name>` role by the bootstrap policy.
    #[arg(long)]
    pub use_service_account_credentials: bool,
}

#[derive(Debug, Args)]
pub struct KubeletArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Number of fake nodes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Index of this process's first node: it runs `node-<first>` … `node-<first + nodes - 1>`,
    /// so kubelet processes with disjoint ranges share one cluster.
    #[arg(long, value_name = "N")]
    pub first_node_index: Option<usize>,
    /// Lifecycle configuration (YAML), see kubelet-fake's documentation.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Each node's event writes per second (the kubelet's `--event-qps`; default 50, 0: no limit).
    #[arg(long)]
    pub event_qps: Option<f64>,
    /// Each node's event write burst (the kubelet's `--event-burst`; default 100).
    #[arg(long)]
    pub event_burst: Option<u32>,
    /// Where to serve /healthz, /metrics and the admin endpoints
    /// `POST /nodes/{name}/stop` and `POST /nodes/{name}/start`; loopback only, as the port
    /// serves without authentication.
    #[arg(long, default_value = "127.0.0.1:10250")]
    pub admin_address: SocketAddr,
}

/// Errors of the command line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    ControlPlane(#[from] crate::control_plane::Error),
    #[error("no server given: pass --server URL or --kubeconfig PATH (or set KUBECONFIG)")]
    NoServer,
    #[error("cannot load the client configuration: {0}")]
    Client(#[source] Box<client::Error>),
    #[error("{0}")]
    Component(String),
}

impl ApiserverArgs {
    fn storage(&self) -> Storage {
        if !self.etcd_servers.is_empty() {
            return Storage::Etcd(crate::control_plane::EtcdStorage {
                etcd: store::EtcdConfig {
                    endpoints: self.etcd_servers.clone(),
                    ca_file: self.etcd_cafile.clone(),
                    cert_file: self.etcd_certfile.clone(),
                    key_file: self.etcd_keyfile.clone(),
                },
                compaction_interval: self.etcd_compaction_interval,
                credentials_dir: self.data_dir.as_ref().map(|d| d.join("pki")),
            });
        }
        match (&self.data_dir, self.in_memory) {
            (_, true) => Storage::InMemory,
            (Some(dir), false) => Storage::Dir(dir.clone()),
            (None, false) => Storage::Dir(crate::datadir::default_dir()),
        }
    }

    /// The apiserver configuration these flags select.
    fn apiserver(&self) -> Result<apiserver::Config, Error> {
        let mut config = ControlPlaneConfig::default().apiserver;
        config.event_ttl = self.event_ttl;
        config
            .admission
            .apply_flags(
                &self.enable_admission_plugins,
                &self.disable_admission_plugins,
            )
            .map_err(Error::Component)?;
        if let Some(file) = &self.admission_control_config_file {
            config
                .admission
                .load_config_file(file)
                .map_err(Error::Component)?;
        }
        if self.secure || self.token_auth_file.is_some() || !self.address.is_loopback() {
            config.secure = Some(apiserver::config::SecureConfig {
                tls_hosts: self.tls_sans.clone(),
                token_auth_file: self.token_auth_file.clone(),
                anonymous: self.anonymous_auth,
            });
        }
        config.audit = apiserver::audit::AuditOptions {
            log_path: self.audit_log_path.clone(),
            policy: match &self.audit_policy_file {
                Some(file) => Some(
                    apiserver::audit::AuditOptions::load_policy(file).map_err(Error::Component)?,
                ),
                None => None,
            },
            max_size_mb: self.audit_log_maxsize,
            max_backups: self.audit_log_maxbackup,
        };
        Ok(config)
    }
}

/// `minik8s kubeconfig`: a kubeconfig for `--user` signed by the data directory's CA.
fn user_kubeconfig(args: &KubeconfigArgs) -> Result<String, Error> {
    let dir = args
        .data_dir
        .clone()
        .unwrap_or_else(crate::datadir::default_dir);
    let pki = dir.join("pki");
    // The CA is the cluster's: never generate one here.
    if !pki.join("ca.crt").exists() || !pki.join("ca.key").exists() {
        return Err(Error::Component(format!(
            "{} has no CA: start the cluster once with `minik8s up --secure --data-dir {}`",
            dir.display(),
            dir.display()
        )));
    }
    let server = match &args.server {
        Some(url) => url.clone(),
        None => client::Config::from_kubeconfig(&dir.join("kubeconfig"))
            .map(|c| c.server)
            .unwrap_or_else(|_| "https://127.0.0.1:6443".to_string()),
    };
    let creds = apiserver::authn::Credentials::load_or_generate(
        Some(&pki),
        apiserver::authn::DEFAULT_ISSUER,
    )
    .map_err(|e| Error::Component(e.to_string()))?;
    let users = crate::control_plane::Users::new(server, Some(std::sync::Arc::new(creds)));
    let issued = users.issue(&args.user, &args.groups)?;
    Ok(users.kubeconfig(issued.as_ref()))
}

impl RemoteArgs {
    /// A client for `component` (`kube-controller-manager`, `kubelet`): its User-Agent, as
    /// upstream's components send, names it as the field manager of what it writes.
    fn client(&self, component: &str) -> Result<client::Client, Error> {
        client::Client::new(self.config(component)?).map_err(|e| Error::Client(Box::new(e)))
    }

    /// The connection and credentials of `component`'s client.
    fn config(&self, component: &str) -> Result<client::Config, Error> {
        let mut config = match (&self.server, &self.kubeconfig) {
            (Some(url), _) => client::Config::new(url.clone()),
            (None, Some(path)) => {
                client::Config::from_kubeconfig(path).map_err(|e| Error::Client(Box::new(e)))?
            }
            (None, None) => return Err(Error::NoServer),
        };
        config.user_agent = crate::control_plane::user_agent(component);
        Ok(config)
    }
}

/// Runs a parsed command until `shutdown` (the process's signal token) fires.
pub async fn run(cli: Cli, shutdown: CancellationToken) -> Result<(), Error> {
    match cli.command {
        Command::Kubeconfig(args) => {
            print!("{}", user_kubeconfig(&args)?);
            Ok(())
        }
        Command::Up(args) => {
            // Without a data directory the kubeconfig goes to a temporary one, removed at exit.
            let scratch = match (&args.kubeconfig, args.server.in_memory) {
                (None, true) => Some(
                    tempfile::Builder::new()
                        .prefix("minik8s-up-")
                        .tempdir()
                        .map_err(|e| Error::Component(format!("temporary directory: {e}")))?,
                ),
                _ => None,
            };
            let kubeconfig = args
                .kubeconfig
                .clone()
                .or_else(|| scratch.as_ref().map(|dir| dir.path().join("kubeconfig")));
            let mut config = ControlPlaneConfig {
                listen: SocketAddr::new(args.server.address, args.server.port),
                storage: args.server.storage(),
                apiserver: args.server.apiserver()?,
                nodes: args.nodes,
                kubeconfig,
                crd_dirs: args.crds.clone(),
                ..ControlPlaneConfig::default()
            };
            if let Some(first) = args.first_node_index {
                config.kubelet.first_index = first;
            }
            // On a shared etcd, several `up` processes elect one controller manager, as separate
            // kube-controller-managers do.
            if !args.server.etcd_servers.is_empty() {
                let identity = format!("{}-{}", hostname(), std::process::id());
                config.controller_manager.leader_election =
                    Some(client::LeaderElectionConfig::new(
                        "kube-system",
                        "kube-controller-manager",
                        &identity,
                    ));
            }
            serve_plane(config, shutdown).await
        }
        Command::Apiserver(args) => {
            let config = ControlPlaneConfig {
                listen: SocketAddr::new(args.address, args.port),
                storage: args.storage(),
                apiserver: args.apiserver()?,
                nodes: 0,
                controllers: false,
                ..ControlPlaneConfig::default()
            };
            serve_plane(config, shutdown).await
        }
        Command::ControllerManager(args) => {
            let client = args
                .remote
                .client(crate::control_plane::CONTROLLER_MANAGER)?;
            let mut cfg = controller::ControllerManagerConfig::default();
            if args.use_service_account_credentials {
                let template = args
                    .remote
                    .config(crate::control_plane::CONTROLLER_MANAGER)?;
                cfg.controller_clients =
                    controller::clientbuilder::ControllerClients::ServiceAccounts {
                        template: Box::new(template),
                    };
            }
            if let Some(path) = &args.root_ca_file {
                cfg.root_ca = Some(
                    std::fs::read_to_string(path)
                        .map_err(|e| Error::Component(format!("read {}: {e}", path.display())))?,
                );
            }
            if args.leader_elect {
                let identity = format!("{}-{}", hostname(), std::process::id());
                let mut le = client::LeaderElectionConfig::new(
                    &args.leader_elect_resource_namespace,
                    &args.leader_elect_resource_name,
                    &identity,
                );
                le.lease_duration = args.leader_elect_lease_duration;
                le.renew_deadline = args.leader_elect_renew_deadline;
                le.retry_period = args.leader_elect_retry_period;
                le.validate()
                    .map_err(|e| Error::Component(format!("leader election: {e}")))?;
                cfg.leader_election = Some(le);
            }
            crate::control_plane::require_loopback(args.metrics_address)?;
            let listener = tokio::net::TcpListener::bind(args.metrics_address)
                .await
                .map_err(|e| Error::Component(format!("bind {}: {e}", args.metrics_address)))?;
            let metrics = cfg.metrics.clone();
            let app = axum::Router::new()
                .route("/healthz", axum::routing::get(|| async { "ok" }))
                .route(
                    "/metrics",
                    axum::routing::get(move || {
                        let metrics = metrics.clone();
                        async move { metrics.render() }
                    }),
                )
                .layer(apiserver::http::loopback::LoopbackGuardLayer);
            let token = shutdown.clone();
            tokio::spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(token.cancelled_owned())
                    .await;
            });
            tracing::info!(component = "controller-manager", metrics = %args.metrics_address, "starting");
            controller::run(client, cfg, shutdown)
                .await
                .map_err(|e| Error::Component(e.to_string()))
        }
        Command::Bench(args) => crate::bench::run(args)
            .await
            .map_err(|e| Error::Component(e.to_string())),
        Command::Kubelet(args) => {
            // Checked before the nodes start, so a refused address registers no node.
            crate::control_plane::require_loopback(args.admin_address)?;
            let client = args.remote.client(crate::control_plane::KUBELET)?;
            let mut cfg = match &args.config {
                Some(path) => kubelet_fake::KubeletConfig::from_file(path)
                    .map_err(|e| Error::Component(e.to_string()))?,
                None => kubelet_fake::KubeletConfig::default(),
            };
            cfg.nodes = args.nodes;
            if let Some(first) = args.first_node_index {
                cfg.first_index = first;
            }
            if let Some(qps) = args.event_qps {
                cfg.event_record_qps = qps;
            }
            if let Some(burst) = args.event_burst {
                cfg.event_burst = burst;
            }
            let kubelets = kubelet_fake::FakeKubelets::start(client, cfg, shutdown.clone())
                .await
                .map_err(|e| Error::Component(e.to_string()))?;
            tracing::info!(
                component = "kubelet",
                nodes = kubelets.node_names().len(),
                "nodes started"
            );
            let listener = tokio::net::TcpListener::bind(args.admin_address)
                .await
                .map_err(|e| Error::Component(format!("bind {}: {e}", args.admin_address)))?;
            let app = kubelet_admin(std::sync::Arc::new(kubelets));
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await;
            Ok(())
        }
    }
}

async fn serve_plane(config: ControlPlaneConfig, shutdown: CancellationToken) -> Result<(), Error> {
    let started = std::time::Instant::now();
    let storage = config.storage.clone();
    let nodes = config.nodes;
    let plane = ControlPlane::start(config).await?;
    tracing::info!(
        component = "minik8s",
        url = plane.url(),
        "control plane ready"
    );
    println!(
        "{}",
        ready_summary(&plane, &storage, nodes, started.elapsed())
    );
    shutdown.cancelled().await;
    tracing::info!(component = "minik8s", "shutting down");
    plane.shutdown().await;
    Ok(())
}

/// What `up` prints once it is ready: where the API is, how to reach it, what it keeps, how to
/// stop. The first line (`minik8s is ready at URL`) and the `export KUBECONFIG=` line are stable,
/// for scripts.
fn ready_summary(
    plane: &ControlPlane,
    storage: &Storage,
    nodes: usize,
    took: std::time::Duration,
) -> String {
    let mut out = format!(
        "minik8s is ready at {} (started in {} ms)\n",
        plane.url(),
        took.as_millis()
    );
    let data = match storage {
        Storage::InMemory => "in memory: nothing is kept after it stops".to_string(),
        Storage::Dir(dir) => format!(
            "{} (every write is on disk before it is acknowledged)",
            dir.display()
        ),
        Storage::Etcd(etcd) => format!(
            "etcd at {} (shared with every apiserver on it)",
            etcd.etcd.endpoints.join(",")
        ),
    };
    out.push_str(&format!("  data:       {data}\n"));
    let node_line = match nodes {
        0 => "none (pods stay Pending)".to_string(),
        1 => "1 fake node (node-0)".to_string(),
        n => format!("{n} fake nodes (node-0 … node-{})", n - 1),
    };
    out.push_str(&format!("  nodes:      {node_line}\n"));
    out.push_str("  stop:       Ctrl-C (in-flight requests finish, then it exits)\n");
    match plane.kubeconfig_path() {
        Some(path) => {
            out.push_str(&format!("  kubeconfig: {}\n", path.display()));
            out.push_str(&format!("export KUBECONFIG={}", path.display()));
        }
        None => out.push_str(&format!(
            "  kubeconfig: none written: kubectl -s {}",
            plane.url()
        )),
    }
    out
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "minik8s".to_string())
}

/// `/healthz`, `/metrics` and node stop/start for `minik8s kubelet` (a stopped node stops
/// heartbeating, as a crashed machine would).
fn kubelet_admin(kubelets: std::sync::Arc<kubelet_fake::FakeKubelets>) -> axum::Router {
    use axum::extract::{Path, State};
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    type Shared = std::sync::Arc<kubelet_fake::FakeKubelets>;
    async fn toggle(kubelets: &Shared, name: &str, start: bool) -> (StatusCode, String) {
        let result = if start {
            kubelets.start_node(name)
        } else {
            kubelets.stop_node(name)
        };
        match result {
            kubelet_fake::NodeToggle::UnknownNode => {
                (StatusCode::NOT_FOUND, format!("no node {name}\n"))
            }
            other => (StatusCode::OK, format!("{name}: {other:?}\n")),
        }
    }
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(|State(k): State<Shared>| async move { k.metrics().render() }),
        )
        .route(
            "/nodes/{name}/stop",
            post(
                |State(k): State<Shared>, Path(name): Path<String>| async move {
                    toggle(&k, &name, false).await
                },
            ),
        )
        .route(
            "/nodes/{name}/start",
            post(
                |State(k): State<Shared>, Path(name): Path<String>| async move {
                    toggle(&k, &name, true).await
                },
            ),
        )
        .layer(apiserver::http::loopback::LoopbackGuardLayer)
        .with_state(kubelets)
}
