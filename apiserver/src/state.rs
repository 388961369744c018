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
        Ok(AppState {
            config: Arc::new(config),
            store,
            cache,
            metrics: Arc::new(Metrics::default()),
            shutdown,
        })
    }
}
