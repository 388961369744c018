//! Server configuration: listen address, limits, timeouts and watch settings.
//!
//! Every bound the server enforces is a field here so tests can shrink it. Defaults follow the
//! Kubernetes apiserver (`pkg/server/config.go`) scaled for a two-core machine where noted.

use std::net::SocketAddr;
use std::time::Duration;

/// Configuration of one apiserver instance.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address `main` binds; `run` itself takes an already-bound listener.
    pub address: SocketAddr,
    /// Largest accepted request body (Kubernetes `MaxRequestBodyBytes` = 3 MiB).
    pub max_body_bytes: usize,
    /// Time limit of a non-watch request before it is answered 504 (Kubernetes `RequestTimeout` = 60 s).
    pub request_timeout: Duration,
    /// Time a client has to send the request head before the connection is closed (T8: 10 s).
    pub header_read_timeout: Duration,
    /// Upstream's `--max-requests-inflight` (400): with `max_mutating_inflight`, the seats API
    /// Priority and Fairness shares among its priority levels ([`crate::flowcontrol`]).
    pub max_read_inflight: usize,
    /// Upstream's `--max-mutating-requests-inflight` (200); see `max_read_inflight`.
    pub max_mutating_inflight: usize,
    /// Open connections; further connections wait in the kernel backlog, not in memory (T8).
    /// `None` (the default): sized from the file-descriptor limit ([`crate::fdlimit`]), so only
    /// running out of descriptors, never watches or stalled clients, can reach it.
    pub max_connections: Option<usize>,
    /// Time a request body may take before its rate is checked ([`crate::http::preread`]).
    pub body_read_grace: Duration,
    /// Least average rate (bytes per second, after the grace) a request body must arrive at;
    /// the whole body must also arrive within `request_timeout`. 0: no rate rule.
    pub body_read_min_rate: u64,
    /// Bytes of request bodies buffered before their requests take an in-flight seat, all
    /// requests together; a body waits for room under its own deadline.
    pub preread_budget: usize,
    /// Events each watcher may have queued; a watcher that falls this far behind is closed.
    pub watch_buffer: usize,
    /// Recent events kept per resource for watches resuming from an older resourceVersion
    /// (Kubernetes watch cache: between 100 and 100 * 1024 events).
    pub watch_history: usize,
    /// How object texts are written to the store (every form is read): compressed where the
    /// store keeps values in this process' memory and on its disk, JSON where values are read by
    /// other tools (etcd) or kept only in memory (see [`crate::watch_cache::StoredText`]).
    pub stored_text: crate::watch_cache::StoredText,
    /// How long an event lives after its last write (kube-apiserver's `--event-ttl`, one hour);
    /// zero: events live until deleted. See [`crate::event_ttl`].
    pub event_ttl: Duration,
    /// Interval of BOOKMARK events to watchers that asked for them (Kubernetes: 1 min).
    pub bookmark_interval: Duration,
    /// Lifetime of a watch that gave no `timeoutSeconds` (Kubernetes: random 30-60 min).
    pub default_watch_timeout: Duration,
    /// How long a read at a future resourceVersion waits for the cache (Kubernetes `blockTimeout` = 3 s).
    pub future_rv_wait: Duration,
    /// How long graceful shutdown waits for in-flight requests before it stops waiting.
    pub shutdown_deadline: Duration,
    /// Server address advertised in `/api` (`serverAddressByClientCIDRs`).
    pub advertise_address: String,
    /// Where the service-account token key and the sandbox CA are kept (`None`: generated in
    /// memory at every start, for an in-memory sandbox). See [`crate::authn::credentials`].
    pub credentials_dir: Option<std::path::PathBuf>,
    /// The in-process components `componentstatuses` reports on.
    pub components: crate::components::Components,
    /// Which built-in admission plugins run, and their settings. The default is an apiserver
    /// without a controller manager, as envtest's ([`AdmissionConfig::without_controllers`]):
    /// `ServiceAccount` off; a control plane with controllers (`minik8s up`) and `minik8s
    /// apiserver` use kube-apiserver's full default set.
    pub admission: crate::admission::AdmissionConfig,
    /// Refuse requests from foreign browser origins and for foreign `Host`s
    /// ([`crate::http::loopback`]). Required while the server serves without authentication,
    /// which it always does today (it binds loopback only); a server that authenticates every
    /// request (TLS and credentials) turns it off.
    pub loopback_guard: bool,
    /// Serve HTTPS and authenticate and authorize every request (`minik8s up --secure`);
    /// `None`: plain HTTP on loopback, every request acting as the admin.
    pub secure: Option<SecureConfig>,
    /// The audit log and its policy (`--audit-log-path`, `--audit-policy-file`); the default
    /// audits nothing.
    pub audit: crate::audit::AuditOptions,
}

/// The settings of a secure server ([`crate::authn`], [`crate::authz`], [`crate::http::tls`]).
#[derive(Debug, Clone)]
pub struct SecureConfig {
    /// Names and addresses the serving certificate is for, besides `localhost`, `127.0.0.1`,
    /// `::1` and the `kubernetes` Service's names (the advertised address, `--tls-san`s).
    pub tls_hosts: Vec<String>,
    /// `--token-auth-file`: static bearer tokens, upstream's CSV.
    pub token_auth_file: Option<std::path::PathBuf>,
    /// `--anonymous-auth` (upstream's default: on; the bootstrap policy lets anonymous requests
    /// read only `/healthz`, `/livez`, `/readyz` and `/version`).
    pub anonymous: bool,
}

impl Default for SecureConfig {
    fn default() -> Self {
        SecureConfig {
            tls_hosts: Vec::new(),
            token_auth_file: None,
            anonymous: true,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 6443)),
            max_body_bytes: 3 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            header_read_timeout: Duration::from_secs(10),
            max_read_inflight: 400,
            max_mutating_inflight: 200,
            max_connections: None,
            body_read_grace: Duration::from_secs(5),
            body_read_min_rate: 4 * 1024,
            preread_budget: 256 * 1024 * 1024,
            watch_buffer: 1024,
            watch_history: 10 * 1024,
            stored_text: Default::default(),
            event_ttl: Duration::from_secs(3600),
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            future_rv_wait: Duration::from_secs(3),
            shutdown_deadline: Duration::from_secs(10),
            advertise_address: "127.0.0.1:6443".to_string(),
            credentials_dir: None,
            components: Default::default(),
            admission: crate::admission::AdmissionConfig::without_controllers(),
            loopback_guard: true,
            secure: None,
            audit: Default::default(),
        }
    }
}
