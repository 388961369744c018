//! Wiring: one apiserver, one controller manager and the fake kubelets, in one process.
//!
//! Start-up order is the dependency order: open the store, bind and serve the apiserver, then start the
//! controller manager and the kubelets, which reach the apiserver over HTTP exactly as separate processes
//! would (`DESIGN.md`). Shutdown is one `CancellationToken`: cancelling it stops the kubelets and the
//! controllers first (no new writes), then the apiserver drains in-flight requests and ends watch
//! streams, then the store flushes and closes. Every component task is tracked, so `shutdown` returns
//! only when all of them have finished or the deadline has passed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use apiserver::authn::pki::Issued;

use crate::datadir::DataDir;

/// The controller manager's name, as upstream's (`kube-controller-manager/<version> …`).
pub const CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// The fake kubelets' name, as the kubelet's.
pub const KUBELET: &str = "kubelet";

/// The User-Agent of `component`: `<component>/<version> (minik8s)`; the apiserver takes the part
/// before the first `/` as the default field manager, as upstream's does.
pub fn user_agent(component: &str) -> String {
    format!("{component}/v{} (minik8s)", env!("CARGO_PKG_VERSION"))
}

/// How long shutdown may take before the remaining tasks are abandoned (issue 7: exit within 10 s).
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(8);

/// Errors starting the control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    DataDir(#[from] crate::datadir::Error),
    #[error("cannot open the store at {path}: {source}")]
    Store {
        path: PathBuf,
        #[source]
        source: store::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "refusing to listen on non-loopback address {0}: authentication and TLS are not configured \
         (bind 127.0.0.1 or ::1)"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot start the apiserver: {0}")]
    Apiserver(String),
    #[error("cannot build the API client: {0}")]
    Client(#[source] Box<client::Error>),
    /// A kube-rs client could not be built (feature `kube`).
    #[error("cannot build the kube-rs client: {0}")]
    KubeClient(String),
    #[error("cannot start the fake kubelets: {0}")]
    Kubelet(String),
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Crds(#[from] crate::crds::Error),
}

/// Refuses a listen address that is not loopback: every port minik8s serves (the apiserver, the
/// kubelet admin port, the controller manager's metrics port) serves without authentication.
pub fn require_loopback(addr: SocketAddr) -> Result<(), Error> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(Error::NotLoopback(addr))
    }
}

/// The controller manager's user (kubeadm's `controller-manager.conf`).
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";
/// The scheduler's name, as upstream's.
pub const SCHEDULER: &str = "kube-scheduler";
/// The scheduler's user (kubeadm's `scheduler.conf`).
pub const SCHEDULER_USER: &str = "system:kube-scheduler";
/// The local-path provisioner's name (kind's add-on, run in the controller manager here).
pub const LOCAL_PATH_PROVISIONER: &str = "local-path-provisioner";
/// A kubelet's user is `system:node:<node>` (`user.NodeUserNamePrefix`) ...
pub const NODE_USER_PREFIX: &str = "system:node:";
/// ... in `system:nodes` (`user.NodesGroup`).
pub const NODES_GROUP: &str = "system:nodes";

/// The fake kubelets' clients: the shared reads' and, in secure mode, each node's own
/// (`CN=system:node:<node>, O=system:nodes`, as kubelet TLS bootstrap gives a kubelet). The
/// shared reads act as the first node (any node may list and watch pods and nodes).
fn kubelet_identities(
    users: &Users,
    cfg: &kubelet_fake::KubeletConfig,
) -> Result<(client::Client, Option<kubelet_fake::NodeCredentials>), Error> {
    let client_as = |users: &Users, identity: Option<&Issued>| {
        let mut c = users.client_config(identity);
        c.user_agent = user_agent(KUBELET);
        client::Client::new(c).map_err(|e| Error::Client(Box::new(e)))
    };
    if users.credentials.is_none() {
        return Ok((client_as(users, None)?, None));
    }
    let node_identity = |users: &Users, node: &str| {
        users.issue(
            &format!("{NODE_USER_PREFIX}{node}"),
            &[NODES_GROUP.to_string()],
        )
    };
    let first = kubelet_fake::node::NodeIdentity::nth(&cfg.name_prefix, cfg.first_index, &cfg.node)
        .map(|id| id.name)
        .unwrap_or_else(|| format!("{}-{}", cfg.name_prefix, cfg.first_index));
    let reads = client_as(users, node_identity(users, &first)?.as_ref())?;
    let owned = users.clone();
    let credentials: kubelet_fake::NodeCredentials = std::sync::Arc::new(move |node: &str| {
        let id = node_identity(&owned, node).map_err(|e| e.to_string())?;
        client_as(&owned, id.as_ref()).map_err(|e| e.to_string())
    });
    Ok((reads, Some(credentials)))
}

/// The admin of a secure cluster, as kubeadm's and kind's admin kubeconfig.
pub const ADMIN_USER: &str = "kubernetes-admin";
/// The admin's group: everything is allowed (`user.SystemPrivilegedGroup`).
pub const ADMIN_GROUP: &str = "system:masters";

/// Identities of one control plane: with a CA (secure mode) client certificates it signs,
/// without one (plain HTTP) nothing to carry.
#[derive(Clone)]
pub struct Users {
    url: String,
    credentials: Option<Arc<apiserver::authn::Credentials>>,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Users")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Users {
    /// Users of the server at `url` whose CA is `credentials`' (`None`: plain HTTP).
    pub fn new(url: String, credentials: Option<Arc<apiserver::authn::Credentials>>) -> Self {
        Users { url, credentials }
    }

    /// A client certificate for `user` in `groups`; `None` on a plain server.
    pub fn issue(
        &self,
        user: &str,
        groups: &[String],
    ) -> Result<Option<apiserver::authn::pki::Issued>, Error> {
        match &self.credentials {
            Some(creds) => apiserver::authn::pki::client(creds, user, groups)
                .map(Some)
                .map_err(Error::Apiserver),
            None => Ok(None),
        }
    }

    /// A client configuration as the holder of `identity`.
    pub fn client_config(
        &self,
        identity: Option<&apiserver::authn::pki::Issued>,
    ) -> client::Config {
        let mut cfg = client::Config::new(self.url.clone());
        // The CA whenever there is one (a client without a certificate may carry a token).
        if let Some(creds) = &self.credentials {
            cfg.ca_pem = Some(creds.ca_pem().as_bytes().to_vec());
        }
        if let (Some(_), Some(id)) = (&self.credentials, identity) {
            cfg.identity_pem = Some(format!("{}\n{}", id.cert_pem, id.key_pem).into_bytes());
        }
        cfg
    }

    /// A kube-rs configuration as the holder of `identity` (feature `kube`): the CA trusted and
    /// the client certificate presented, as [`Users::client_config`] does for our client.
    #[cfg(feature = "kube")]
    pub fn kube_config(
        &self,
        identity: Option<&apiserver::authn::pki::Issued>,
    ) -> Result<kube::Config, Error> {
        use base64::Engine as _;
        use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
        let failed =
            |what: &str, e: &dyn std::fmt::Display| Error::KubeClient(format!("{what}: {e}"));
        let url = self.url.parse().map_err(|e| failed("the server URL", &e))?;
        let mut config = kube::Config::new(url);
        let Some(creds) = &self.credentials else {
            return Ok(config);
        };
        let ca = CertificateDer::from_pem_slice(creds.ca_pem().as_bytes())
            .map_err(|e| failed("the CA certificate", &e))?;
        config.root_cert = Some(vec![ca.to_vec()]);
        if let Some(id) = identity {
            // kube-rs takes the pair as a kubeconfig carries it: base64 of the PEM.
            let b64 = base64::engine::general_purpose::STANDARD;
            config.auth_info = serde_json::from_value(serde_json::json!({
                "client-certificate-data": b64.encode(&id.cert_pem),
                "client-key-data": b64.encode(&id.key_pem),
            }))
            .map_err(|e| failed("the client certificate", &e))?;
        }
        Ok(config)
    }

    /// A kubeconfig as the holder of `identity`.
    pub fn kubeconfig(&self, identity: Option<&apiserver::authn::pki::Issued>) -> String {
        let tls = match (&self.credentials, identity) {
            (Some(creds), Some(id)) => Some(crate::kubeconfig::Tls {
                ca_pem: creds.ca_pem(),
                cert_pem: &id.cert_pem,
                key_pem: &id.key_pem,
            }),
            _ => None,
        };
        crate::kubeconfig::render_with(&self.url, None, tls)
    }
}

/// Where objects live.
#[derive(Debug, Clone)]
pub enum Storage {
    /// Nothing is kept: a fresh cluster each start.
    InMemory,
    /// A data directory (locked for the life of the process).
    Dir(PathBuf),
    /// An etcd cluster, shared with other apiservers (`--etcd-servers`).
    Etcd(EtcdStorage),
}

/// The etcd flags of kube-apiserver: where etcd is, how to authenticate to it, how often to compact.
#[derive(Debug, Clone)]
pub struct EtcdStorage {
    pub etcd: store::EtcdConfig,
    /// kube-apiserver's `--etcd-compaction-interval` (default 5 minutes; zero: never compact).
    pub compaction_interval: Duration,
    /// Where this apiserver keeps its credentials (the CA and the service-account key); give every
    /// apiserver of one cluster a copy of the same files. `None`: in memory, this process only.
    pub credentials_dir: Option<PathBuf>,
}

/// kube-apiserver's default `--etcd-compaction-interval`.
pub const DEFAULT_ETCD_COMPACTION_INTERVAL: Duration = Duration::from_secs(300);

/// Everything `up` and `Sandbox` configure.
#[derive(Debug, Clone)]
pub struct ControlPlaneConfig {
    pub listen: SocketAddr,
    pub storage: Storage,
    /// Number of fake nodes (0: none).
    pub nodes: usize,
    /// Where to write the kubeconfig; `None` with a data dir means `<dir>/kubeconfig`, with in-memory
    /// storage it means "do not write one".
    pub kubeconfig: Option<PathBuf>,
    /// Run the controller manager (replication, GC, namespaces, scheduler, node lifecycle).
    pub controllers: bool,
    pub apiserver: apiserver::Config,
    pub controller_manager: controller::ControllerManagerConfig,
    pub kubelet: kubelet_fake::KubeletConfig,
    /// Directories whose CustomResourceDefinitions are installed at start-up; `start` returns
    /// once all are Established ([`crate::crds`]).
    pub crd_dirs: Vec<PathBuf>,
    /// CustomResourceDefinitions installed at start-up with those of `crd_dirs` (e.g. a kube-rs
    /// `CustomResource`'s `crd()`).
    pub crds: Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    /// How long `start` waits for those CRDs to be Established.
    pub crd_wait: Duration,
}

impl Default for ControlPlaneConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 6443)),
            storage: Storage::Dir(crate::datadir::default_dir()),
            nodes: 3,
            kubeconfig: None,
            controllers: true,
            // kube-apiserver's admission plugins, ServiceAccount included (the library's default
            // leaves it off, as envtest does): `minik8s apiserver` alone behaves as kube-apiserver.
            apiserver: apiserver::Config {
                admission: apiserver::admission::AdmissionConfig::default(),
                ..apiserver::Config::default()
            },
            controller_manager: controller::ControllerManagerConfig::default(),
            kubelet: kubelet_fake::KubeletConfig::default(),
            crd_dirs: Vec::new(),
            crds: Vec::new(),
            crd_wait: crate::crds::DEFAULT_WAIT,
        }
    }
}

/// A running control plane.
pub struct ControlPlane {
    addr: SocketAddr,
    url: String,
    /// Issues client certificates of this cluster's CA (secure mode).
    users: Users,
    kubeconfig: Option<PathBuf>,
    client: client::Client,
    store: Arc<dyn store::Store>,
    shutdown: CancellationToken,
    /// Token for kubelets and controllers, cancelled before the apiserver's.
    components: CancellationToken,
    /// The controller manager's task: waited for before the apiserver is stopped.
    component_tasks: TaskTracker,
    /// The apiserver's accept loop.
    tracker: TaskTracker,
    kubelets: Option<kubelet_fake::FakeKubelets>,
    _data_dir: Option<DataDir>,
}

impl ControlPlane {
    /// Opens the store, serves the API, starts the components, writes the kubeconfig.
    pub async fn start(mut config: ControlPlaneConfig) -> Result<Self, Error> {
        // Any address but loopback implies the secure mode (issue 18): nothing is served there
        // without TLS and authentication.
        if !config.listen.ip().is_loopback() && config.apiserver.secure.is_none() {
            config.apiserver.secure = Some(apiserver::config::SecureConfig::default());
        }
        let secure = config.apiserver.secure.is_some();
        if !secure {
            require_loopback(config.listen)?;
        }
        // Read before anything starts, so a bad file fails fast.
        let mut crds = config.crds.clone();
        for dir in &config.crd_dirs {
            crds.extend(crate::crds::read_dir(dir)?);
        }
        let (store, data_dir): (Arc<dyn store::Store>, Option<DataDir>) = match &config.storage {
            Storage::InMemory => (
                Arc::new(
                    store::MemoryStore::new(store::StoreConfig::default()).map_err(|source| {
                        Error::Store {
                            path: PathBuf::from("(memory)"),
                            source,
                        }
                    })?,
                ),
                None,
            ),
            Storage::Etcd(etcd) => {
                let cfg = store::StoreConfig {
                    compaction_interval: etcd.compaction_interval,
                    ..store::StoreConfig::default()
                };
                let store = store::EtcdStore::connect(&etcd.etcd, cfg)
                    .await
                    .map_err(|source| Error::Store {
                        path: PathBuf::from(etcd.etcd.endpoints.join(",")),
                        source,
                    })?;
                (Arc::new(store), None)
            }
            Storage::Dir(dir) => {
                let data_dir = DataDir::open(dir)?;
                let path = data_dir.store_path();
                // The resources the watch cache does not hold (Events) keep their values on
                // disk alone: nothing else in this process holds them, and they are read little.
                let cfg = store::StoreConfig {
                    cold_prefixes: apiserver::watch_cache::UNCACHED_RESOURCES
                        .iter()
                        .map(|prefix| prefix.to_string())
                        .collect(),
                    ..store::StoreConfig::default()
                };
                let store = store::SledStore::open(&path, cfg)
                    .map_err(|source| Error::Store { path, source })?;
                (Arc::new(store), Some(data_dir))
            }
        };
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
        // A server on every address is reached through loopback by its own components and
        // kubeconfig.
        let reach = if addr.ip().is_unspecified() {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
        } else {
            addr
        };
        let url = if secure {
            format!("https://{reach}")
        } else {
            format!("http://{reach}")
        };
        let shutdown = CancellationToken::new();
        let components = CancellationToken::new();
        let tracker = TaskTracker::new();
        let component_tasks = TaskTracker::new();

        // The API is ready (watch cache primed, default namespaces seeded) before anything connects.
        let mut apiserver_config = config.apiserver.clone();
        // The token key and the CA live with the data (in memory for an in-memory sandbox).
        if apiserver_config.credentials_dir.is_none() {
            apiserver_config.credentials_dir = match &config.storage {
                Storage::Etcd(etcd) => etcd.credentials_dir.clone(),
                _ => data_dir.as_ref().map(|d| d.path().join("pki")),
            };
        }
        // sled keeps every value this process' memory holds in its index (shared with the watch
        // cache) and on disk: compressed, a pod takes half the bytes in both. In memory the
        // compression would only cost time; on etcd, other tools read the values.
        if matches!(config.storage, Storage::Dir(_)) {
            apiserver_config.stored_text = apiserver::watch_cache::StoredText::Lz4;
        }
        if let Some(secure) = apiserver_config.secure.as_mut() {
            // The serving certificate names the address the server is reached at.
            if !addr.ip().is_unspecified() {
                secure.tls_hosts.push(addr.ip().to_string());
            }
            let advertised = apiserver_config.advertise_address.clone();
            if let Some((host, _)) = advertised.rsplit_once(':') {
                secure
                    .tls_hosts
                    .push(host.trim_matches(['[', ']']).to_string());
            }
        }
        // The ServiceAccount plugin requires the `default` accounts the serviceaccount controller
        // creates: a control plane whose controller manager runs without it (a test enabling
        // only the controllers it needs) disables the plugin, as envtest does.
        if config.controllers && !config.controller_manager.controllers.serviceaccount {
            apiserver_config
                .admission
                .disable(apiserver::admission::SERVICE_ACCOUNT);
        }
        // A large data directory takes a while to load: say what is happening and how long it took.
        let loading = std::time::Instant::now();
        let state = apiserver::AppState::start(apiserver_config, store.clone(), shutdown.clone())
            .await
            .map_err(|e| Error::Apiserver(e.to_string()))?;
        if let Some(dir) = &data_dir {
            // The store and the credentials are created: no file in the directory is left open to
            // other users, whatever the umask (`datadir`).
            dir.restrict_contents()?;
            tracing::info!(
                component = "minik8s",
                data_dir = %dir.path().display(),
                objects = state.cache.object_count(),
                took_ms = loading.elapsed().as_millis() as u64,
                "stored objects loaded"
            );
        }
        apiserver::bootstrap::seed(&state)
            .await
            .map_err(|e| Error::Apiserver(e.to_string()))?;
        // The cluster CA, which the root CA publisher puts into every namespace.
        let root_ca = state.credentials.ca_pem().to_string();
        let credentials = state.credentials.clone();
        tracker.spawn(apiserver::server::serve(listener, state, shutdown.clone()));

        let users = Users {
            url: url.clone(),
            credentials: secure.then_some(credentials),
        };
        let admin = users.issue(ADMIN_USER, &[ADMIN_GROUP.to_string()])?;
        let client = client::Client::new(users.client_config(admin.as_ref()))
            .map_err(|e| Error::Client(Box::new(e)))?;
        if !crds.is_empty() {
            if let Err(e) = crate::crds::install(&client, &crds, config.crd_wait).await {
                // Nothing else started yet: stop the apiserver and close the store.
                shutdown.cancel();
                tracker.close();
                let _ = tokio::time::timeout(SHUTDOWN_DEADLINE, tracker.wait()).await;
                if let Err(e) = store.flush_and_close().await {
                    tracing::error!(component = "store", error = %e, "store did not close cleanly");
                }
                return Err(e.into());
            }
        }
        // Each component its own client, named as upstream's (its field manager in managedFields),
        // and in secure mode its own identity, as kubeadm gives them: the controller manager,
        // the scheduler and each kubelet their certificates (least privileged: the bootstrap RBAC
        // policy and the Node authorizer decide); kind's add-ons are applied by the admin.
        let component_client = |component: &str, identity: Option<&Issued>| {
            let mut cfg = users.client_config(identity);
            cfg.user_agent = user_agent(component);
            client::Client::new(cfg).map_err(|e| Error::Client(Box::new(e)))
        };
        // kind's add-ons (applied with kubectl there), concurrently with the components' start;
        // only with the controller manager, whose fake provisioner serves the default class (a
        // bare apiserver stays bare).
        let addons = if config.controllers {
            let client = component_client("kubectl", admin.as_ref())?;
            Some(tokio::spawn(async move {
                crate::addons::install(&client).await
            }))
        } else {
            None
        };
        if config.controllers {
            let manager = users.issue(CONTROLLER_MANAGER_USER, &[])?;
            let client = component_client(CONTROLLER_MANAGER, manager.as_ref())?;
            let mut cfg = config.controller_manager.clone();
            cfg.root_ca.get_or_insert(root_ca);
            if secure {
                // kubeadm's `--use-service-account-credentials=true`: the manager's own role
                // only reads and hands out tokens; each controller acts as its account.
                let mut template = users.client_config(None);
                template.user_agent = user_agent(CONTROLLER_MANAGER);
                cfg.controller_clients =
                    controller::clientbuilder::ControllerClients::ServiceAccounts {
                        template: Box::new(template),
                    };
                let scheduler = users.issue(SCHEDULER_USER, &[])?;
                cfg.scheduler_client
                    .get_or_insert(component_client(SCHEDULER, scheduler.as_ref())?);
                cfg.addon_client
                    .get_or_insert(component_client(LOCAL_PATH_PROVISIONER, admin.as_ref())?);
            }
            let token = components.clone();
            // `componentstatuses` reports both as healthy while the manager (and the scheduler
            // it runs) is running.
            let live: Vec<_> = apiserver::components::CONTROL_PLANE_COMPONENTS
                .iter()
                .map(|c| config.apiserver.components.register(c))
                .collect();
            component_tasks.spawn(async move {
                if let Err(e) = controller::run(client, cfg, token).await {
                    tracing::error!(component = "controller-manager", error = %e, "controller manager stopped");
                }
                live.iter().for_each(|l| l.stopped());
            });
        }
        let kubelets = if config.nodes > 0 {
            let mut cfg = config.kubelet.clone();
            cfg.nodes = config.nodes;
            let (reads, credentials) = kubelet_identities(&users, &cfg)?;
            Some(
                kubelet_fake::FakeKubelets::start_with_credentials(
                    reads,
                    credentials,
                    cfg,
                    components.clone(),
                )
                .await
                .map_err(|e| Error::Kubelet(e.to_string()))?,
            )
        } else {
            None
        };

        let kubeconfig = match (&config.kubeconfig, &data_dir) {
            (Some(path), _) => Some(path.clone()),
            (None, Some(dir)) => Some(dir.kubeconfig_path()),
            (None, None) => None,
        };
        if let Some(path) = &kubeconfig {
            let text = users.kubeconfig(admin.as_ref());
            crate::kubeconfig::write_text(path, &text).map_err(|source| Error::Kubeconfig {
                path: path.clone(),
                source,
            })?;
        }
        // Not fatal: the cluster works without a default class (claims then name theirs).
        if let Some(addons) = addons {
            match addons.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(component = "minik8s", error = %e, "cannot install the default StorageClass")
                }
                Err(e) => tracing::error!(component = "minik8s", error = %e, "add-on task failed"),
            }
        }
        tracker.close();
        component_tasks.close();
        Ok(Self {
            addr,
            url,
            users,
            kubeconfig,
            client,
            store,
            shutdown,
            components,
            component_tasks,
            tracker,
            kubelets,
            _data_dir: data_dir,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn kubeconfig_path(&self) -> Option<&std::path::Path> {
        self.kubeconfig.as_deref()
    }

    /// A client for this control plane (shares its connection pool with the components).
    pub fn client(&self) -> client::Client {
        self.client.clone()
    }

    pub fn kubelets(&self) -> Option<&kubelet_fake::FakeKubelets> {
        self.kubelets.as_ref()
    }

    /// The users of this control plane: client certificates and kubeconfigs for any identity.
    pub fn users(&self) -> &Users {
        &self.users
    }

    /// Stops everything in order, then flushes and closes the store. Bounded by [`SHUTDOWN_DEADLINE`].
    pub async fn shutdown(self) {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_DEADLINE;
        // Components first, so nothing writes while the apiserver drains; then the apiserver.
        self.components.cancel();
        let components_done = async {
            self.component_tasks.wait().await;
            if let Some(kubelets) = &self.kubelets {
                kubelets.join().await;
            }
        };
        if tokio::time::timeout_at(deadline, components_done)
            .await
            .is_err()
        {
            tracing::warn!(
                component = "minik8s",
                "components still stopping at the deadline"
            );
        }
        self.shutdown.cancel();
        if tokio::time::timeout_at(deadline, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                component = "minik8s",
                "shutdown deadline passed with tasks still running"
            );
        }
        if let Err(e) = self.store.flush_and_close().await {
            tracing::error!(component = "store", error = %e, "store did not close cleanly");
        }
    }

    /// Cancels everything without waiting (used by `Drop` of `Sandbox`).
    pub fn cancel(&self) {
        self.components.cancel();
        self.shutdown.cancel();
    }
}
