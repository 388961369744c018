//! Shared state of all handlers.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::{ApiError, Result};
use crate::metrics::Metrics;
use crate::registry::{ClusterIpAllocator, ResourceRegistry};
use crate::watch_cache::{ListAt, Listed, Select, SnapshotOutcome, WatchCache};

/// Everything a handler needs, behind one reference count: axum clones a handler's and each
/// middleware's state for every request, so a clone is one atomic increment (the parts are
/// read through `Deref`), not one per part plus the cancellation token's lock.
#[derive(Clone)]
pub struct AppState(Arc<AppStateInner>);

impl std::ops::Deref for AppState {
    type Target = AppStateInner;

    fn deref(&self) -> &AppStateInner {
        &self.0
    }
}

/// The parts of an [`AppState`].
pub struct AppStateInner {
    /// The configuration.
    pub config: Arc<Config>,
    /// The store: the source of truth for reads-before-writes and all writes.
    pub store: Arc<dyn store::Store>,
    /// Lists and watches are served from here.
    pub cache: Arc<WatchCache>,
    /// Request metrics.
    pub metrics: Arc<Metrics>,
    /// Process shutdown: watches end on it.
    pub shutdown: CancellationToken,
    /// The served resources: built-in kinds at start, custom resources as they come and go.
    pub resources: Arc<ResourceRegistry>,
    /// OpenAPI documents of the served set, rebuilt when it changes.
    pub openapi: Arc<crate::openapi::OpenApiCache>,
    /// The service-account token key and the sandbox CA.
    pub credentials: Arc<crate::authn::Credentials>,
    /// The rate-limited log of failed requests.
    pub httplog: Arc<crate::http::httplog::FailureLog>,
    /// The built-in admission plugins `config.admission` enables, in order.
    pub admission: Arc<crate::admission::Chain>,
    /// The admission webhooks, their configurations followed in the watch cache.
    pub webhooks: Arc<crate::admission::webhook::Webhooks>,
    /// ValidatingAdmissionPolicy, its policies and bindings followed in the watch cache.
    pub policies: Arc<crate::admission::policy::Policies>,
    /// TLS and authentication of a secure server (`config.secure`); `None` serves plain HTTP.
    pub security: Option<Arc<crate::authn::Security>>,
    /// API Priority and Fairness, its configuration followed in the watch cache.
    pub flowcontrol: Arc<crate::flowcontrol::FlowControl>,
    /// The audit policy and log writer; `None` audits nothing.
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// The RBAC objects compiled for authorization, in step with the watch cache.
    pub rbac: Arc<crate::authz::policy_cache::PolicyCache>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl AppState {
    /// Starts the watch cache over `store`, registers the built-in resources and assembles the
    /// state.
    pub async fn start(
        config: Config,
        store: Arc<dyn store::Store>,
        shutdown: CancellationToken,
    ) -> Result<Self> {
        // The served set first: the cache defaults what it loads by its kinds' defaults.
        let resources = Arc::new(ResourceRegistry::new());
        let ips = Arc::new(ClusterIpAllocator::new());
        crate::registry::builtin::register(&resources, &ips)
            .map_err(|e| ApiError::internal("registering the built-in resources", e))?;
        let cache = WatchCache::start_defaulting(
            store.clone(),
            crate::watch_cache::Defaulter::new(resources.clone()),
            config.stored_text,
            config.watch_history,
            config.watch_buffer,
            shutdown.clone(),
        )
        .await
        .map_err(|e| ApiError::internal("starting the watch cache", e))?;
        let credentials = crate::authn::Credentials::load_or_generate(
            config.credentials_dir.as_deref(),
            crate::authn::DEFAULT_ISSUER,
        )
        .map_err(|e| ApiError::internal("loading the service-account key and the CA", e))?;
        let security = match &config.secure {
            Some(secure) => Some(Arc::new(
                crate::authn::Security::new(&credentials, secure)
                    .map_err(|e| ApiError::internal("setting up TLS and authentication", e))?,
            )),
            None => None,
        };
        let audit = crate::audit::Auditor::start(&config.audit, security.is_some())
            .map_err(|e| ApiError::internal("opening the audit log", e))?;
        // State derived from storage (the cluster-IP bitmap) is rebuilt from the cached objects.
        for r in &resources.snapshot().resources {
            let prefix = format!("/registry/{}/", r.info.storage);
            // Held objects are decoded only if the strategy reads them.
            let listed = cache.list(&prefix, &prefix, ListAt::Current, None, None, Select::All);
            if let SnapshotOutcome::Listed(s) = listed {
                r.strategy
                    .restore(&mut s.items.iter().filter_map(Listed::object));
            }
        }
        let admission = Arc::new(crate::admission::Chain::new(&config.admission));
        let webhooks = Arc::new(crate::admission::webhook::Webhooks::new(
            config
                .admission
                .enabled(crate::admission::MUTATING_ADMISSION_WEBHOOK),
            config
                .admission
                .enabled(crate::admission::VALIDATING_ADMISSION_WEBHOOK),
        ));
        tokio::spawn(
            webhooks
                .source
                .clone()
                .follow(cache.clone(), shutdown.clone()),
        );
        let policies = Arc::new(crate::admission::policy::Policies::new(
            config
                .admission
                .enabled(crate::admission::VALIDATING_ADMISSION_POLICY),
        ));
        tokio::spawn(
            policies
                .source
                .clone()
                .follow(cache.clone(), shutdown.clone()),
        );
        if !config.event_ttl.is_zero() {
            tokio::spawn(crate::event_ttl::run(
                store.clone(),
                config.event_ttl,
                shutdown.clone(),
            ));
        }
        let server_limit = config.max_read_inflight + config.max_mutating_inflight;
        let flowcontrol =
            crate::flowcontrol::FlowControl::new(u32::try_from(server_limit).unwrap_or(u32::MAX));
        tokio::spawn(crate::flowcontrol::controller::run(
            flowcontrol.clone(),
            cache.clone(),
            shutdown.clone(),
        ));
        Ok(AppState(Arc::new(AppStateInner {
            flowcontrol,
            admission,
            webhooks,
            policies,
            resources,
            openapi: Default::default(),
            config: Arc::new(config),
            store,
            cache,
            metrics: Arc::new(Metrics::default()),
            shutdown,
            credentials: Arc::new(credentials),
            httplog: Default::default(),
            security,
            audit,
            rbac: Default::default(),
        })))
    }
}
