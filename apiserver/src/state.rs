//! Shared state of all handlers.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::{ApiError, Result};
use crate::metrics::Metrics;
use crate::watch_cache::WatchCache;

/// Everything a handler needs. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
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
    /// Service cluster IPs in use; rebuilt from the stored services at start.
    pub ips: Arc<crate::registry::ClusterIpAllocator>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl AppState {
    /// Starts the watch cache over `store` and assembles the state.
    pub async fn start(
        config: Config,
        store: Arc<dyn store::Store>,
        shutdown: CancellationToken,
    ) -> Result<Self> {
        let cache = WatchCache::start(
            store.clone(),
            config.watch_history,
            config.watch_buffer,
            shutdown.clone(),
        )
        .await
        .map_err(|e| ApiError::internal("starting the watch cache", e))?;
        let ips = crate::registry::ClusterIpAllocator::new();
        let services = cache.list(
            "/registry/services/",
            "/registry/services/",
            crate::watch_cache::ListAt::Current,
            None,
            None,
            &|_| true,
        );
        if let crate::watch_cache::SnapshotOutcome::Listed(s) = services {
            ips.rebuild(s.items.iter().map(|v| v.as_ref()));
        }
        Ok(AppState {
            ips: Arc::new(ips),
            config: Arc::new(config),
            store,
            cache,
            metrics: Arc::new(Metrics::default()),
            shutdown,
        })
    }
}
