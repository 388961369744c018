//! Reflector: keeps a [`ReflectorStore`] in step with a [`ListerWatcher`] by LIST then WATCH
//! (client-go `tools/cache/reflector.go`, classic path; spec informer.md §1).
//!
//! State machine (one transition per step, §1.3–§1.5):
//! * **List** at the *relist RV* — `""` after a LIST 410/too-large, `"0"` before the first sync,
//!   else the last synced RV — paginated (`limit` 500, §1.1) unless the RV is a specific version,
//!   continuation pages without RV, a continuation 410 falls back to one unpaginated list. A LIST
//!   410/too-large sets the "RV unavailable" flag and retries immediately at `""`. Success →
//!   `store.replace(items, rv)` and `last_sync_rv = rv`.
//! * **Watch** from `last_sync_rv` with `timeoutSeconds` uniform in [5 min, 10 min) and bookmarks.
//!   Every event (bookmarks included) advances `last_sync_rv`. A normal close re-watches
//!   *immediately*; a close after < 1 s with 0 events is a "very short watch" error.
//! * Watch start failing with connection-refused or 429 → backoff, re-watch (no relist). Any other
//!   start error, an `ERROR` event (410 included), a decode or transport error → `ListAndWatch`
//!   returns → backoff → relist at `last_sync_rv` (so a watch 410 never sets the unavailable flag).
//! * Between `ListAndWatch` attempts: always the backoff `0.8 s → 30 s`, factor 2, jitter ×[1,2),
//!   reset after 2 min ([`ExponentialBackoff::reflector`]); the first attempt is immediate.
//! * Resync timer (§1.7): every `resync_period` while watching, if `should_resync()` then
//!   `store.resync()`; never contacts the server; restarts with each `ListAndWatch`.
//!
//! Every await selects on the shutdown token; `run` returns promptly once it is cancelled.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::RwLock;
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::delta_fifo::ReflectorStore;
use crate::error::{Error, Result};
use crate::flowcontrol::ExponentialBackoff;
use crate::list_watch::ListerWatcher;
use crate::rest::{ListParams, WatchEvent};

/// `pager.defaultPageSize` (client-go `tools/pager/pager.go`).
pub const DEFAULT_PAGE_SIZE: u32 = 500;
/// `minWatchTimeout` (client-go reflector): watches last [min, 2·min).
pub const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// A watch closing sooner than this with no events is an error (client-go `VeryShortWatchError`).
pub const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);

/// Why one watch ended.
enum WatchEnd {
    /// Server closed the stream.
    Closed {
        events: u64,
        elapsed: Duration,
    },
    Failed(Box<Error>),
    Shutdown,
}

/// Run-local mutable state (owned by the single `run` task).
struct RunState {
    backoff: ExponentialBackoff,
    /// `isLastSyncResourceVersionUnavailable`.
    rv_unavailable: bool,
    /// Set once when the first RV="0" LIST came back paginated.
    paginated_result: bool,
}

/// A LIST+WATCH loop feeding one store.
pub struct Reflector<K> {
    name: String,
    lw: Arc<dyn ListerWatcher<K>>,
    store: Arc<dyn ReflectorStore<K>>,
    params: ListParams,
    resync_period: Duration,
    should_resync: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
    /// `WatchListPageSize`; `None` = the §1.4 rules.
    pub page_size: Option<u32>,
    /// Lower bound of watch timeouts; honoured only above [`MIN_WATCH_TIMEOUT`].
    pub min_watch_timeout: Duration,
    last_sync_rv: Arc<RwLock<String>>,
}

impl<K: crate::Object + Send + Sync + 'static> Reflector<K> {
    /// `params` carries the selectors used for both LIST and WATCH.
    pub fn new(
        name: impl Into<String>,
        lw: Arc<dyn ListerWatcher<K>>,
        store: Arc<dyn ReflectorStore<K>>,
        params: ListParams,
        resync_period: Duration,
    ) -> Self {
        Reflector {
            name: name.into(),
            lw,
            store,
            params,
            resync_period,
            should_resync: None,
            page_size: None,
            min_watch_timeout: MIN_WATCH_TIMEOUT,
            last_sync_rv: Arc::new(RwLock::new(String::new())),
        }
    }

    /// The resync gate (the shared informer passes its processor's `should_resync`).
    pub fn with_should_resync(mut self, f: Arc<dyn Fn() -> bool + Send + Sync>) -> Self {
        self.should_resync = Some(f);
        self
    }

    /// Shares the last-synced-RV cell with the owner (the informer exposes it).
    pub fn with_last_sync_rv(mut self, cell: Arc<RwLock<String>>) -> Self {
        self.last_sync_rv = cell;
        self
    }

    /// The RV of the last LIST or watch event observed.
    pub fn last_sync_resource_version(&self) -> String {
        self.last_sync_rv.read().clone()
    }

    fn set_rv(&self, rv: &str) {
        *self.last_sync_rv.write() = rv.to_string();
    }

    /// Runs until `shutdown` is cancelled.
    pub async fn run(&self, shutdown: CancellationToken) {
        let mut st = RunState {
            backoff: ExponentialBackoff::reflector(),
            rv_unavailable: false,
            paginated_result: false,
        };
        tracing::debug!(reflector = %self.name, "starting reflector");
        loop {
            if let Err(e) = self.list_and_watch(&mut st, &shutdown).await {
                tracing::warn!(reflector = %self.name, error = %e, "list and watch failed");
            }
            if shutdown.is_cancelled() {
                return;
            }
            let d = st.backoff.next_delay();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(d) => {}
            }
        }
    }

    fn relist_rv(&self, st: &RunState) -> String {
        if st.rv_unavailable {
            return String::new();
        }
        let last = self.last_sync_resource_version();
        if last.is_empty() {
            "0".to_string()
        } else {
            last
        }
    }

    /// One LIST (all pages) at `rv`. Returns items, list RV, whether the first page was paginated.
    /// Each page's objects are shared (`Arc`) as the page arrives, so only one page at a time
    /// exists unshared.
    async fn list_at(&self, rv: &str, st: &RunState) -> Result<(Vec<Arc<K>>, String, bool)> {
        let limit = match self.page_size {
            Some(n) => Some(n),
            None if st.paginated_result => Some(DEFAULT_PAGE_SIZE),
            // A specific RV is listed unpaginated so the server may answer from its watch cache.
            None if !rv.is_empty() && rv != "0" => None,
            None => Some(DEFAULT_PAGE_SIZE),
        };
        let mut p = self.params.clone();
        p.resource_version = Some(rv.to_string());
        p.limit = limit;
        p.continue_token = None;
        let first = self.lw.list(&p).await?;
        let paginated = first.continue_token.is_some();
        let mut items: Vec<Arc<K>> = first.items.into_iter().map(Arc::new).collect();
        let mut list_rv = first.resource_version;
        let mut next = first.continue_token;
        while let Some(token) = next.take() {
            let mut cp = self.params.clone();
            cp.resource_version = None;
            cp.limit = limit;
            cp.continue_token = Some(token);
            match self.lw.list(&cp).await {
                Ok(page) => {
                    items.extend(page.items.into_iter().map(Arc::new));
                    list_rv = page.resource_version;
                    next = page.continue_token;
                }
                Err(e) if e.is_gone() => {
                    // pager `FullListIfExpired`: one unpaginated list at the original RV.
                    tracing::debug!(reflector = %self.name, "continue token expired; full list");
                    let mut fp = self.params.clone();
                    fp.resource_version = Some(rv.to_string());
                    let full = self.lw.list(&fp).await?;
                    items = full.items.into_iter().map(Arc::new).collect();
                    list_rv = full.resource_version;
                }
                Err(e) => return Err(e),
            }
        }
        Ok((items, list_rv, paginated))
    }

    async fn list(&self, st: &mut RunState) -> Result<()> {
        let rv = self.relist_rv(st);
        let (items, list_rv, paginated) = match self.list_at(&rv, st).await {
            Ok(r) => r,
            Err(e) if e.is_gone_or_too_large() => {
                tracing::debug!(reflector = %self.name, rv = %rv, "relist RV unavailable; listing at most recent");
                st.rv_unavailable = true;
                let rv2 = self.relist_rv(st);
                self.list_at(&rv2, st).await?
            }
            Err(e) => return Err(e),
        };
        if rv == "0" && paginated {
            st.paginated_result = true;
        }
        st.rv_unavailable = false;
        self.store.replace(items, &list_rv);
        self.set_rv(&list_rv);
        Ok(())
    }

    fn watch_timeout(&self) -> u32 {
        let min = self
            .min_watch_timeout
            .max(MIN_WATCH_TIMEOUT)
            .as_secs()
            .max(1);
        let secs = rand::thread_rng().gen_range(min..2 * min);
        u32::try_from(secs).unwrap_or(u32::MAX)
    }

    async fn list_and_watch(&self, st: &mut RunState, shutdown: &CancellationToken) -> Result<()> {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            r = self.list(st) => r?,
        }
        let mut resync_at =
            (!self.resync_period.is_zero()).then(|| Instant::now() + self.resync_period);
        loop {
            let rv = self.last_sync_resource_version();
            let mut p = self.params.clone();
            p.resource_version = None;
            p.limit = None;
            p.continue_token = None;
            p.timeout_seconds = Some(self.watch_timeout());
            p.allow_bookmarks = true;
            let started = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                r = self.lw.watch(&p, &rv) => r,
            };
            let stream = match started {
                Ok(s) => s,
                Err(e) if e.is_connection_refused() || e.is_too_many_requests() => {
                    tracing::debug!(reflector = %self.name, error = %e, "watch start refused; backing off");
                    let d = st.backoff.next_delay();
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(d) => continue,
                    }
                }
                Err(e) => return Err(e),
            };
            match self
                .watch_handler(stream, &rv, &mut resync_at, shutdown)
                .await
            {
                WatchEnd::Shutdown => return Ok(()),
                WatchEnd::Closed { events, elapsed } => {
                    if events == 0 && elapsed < VERY_SHORT_WATCH {
                        tracing::warn!(reflector = %self.name, ?elapsed, "very short watch: closed with no events");
                        return Ok(());
                    }
                    // Normal close: re-watch immediately from the last RV.
                }
                WatchEnd::Failed(e) if e.is_gone_or_too_large() => {
                    tracing::debug!(reflector = %self.name, error = %e, "watch expired; relisting");
                    return Ok(());
                }
                WatchEnd::Failed(e) if e.is_too_many_requests() => {
                    let d = st.backoff.next_delay();
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(d) => {}
                    }
                }
                WatchEnd::Failed(e) => {
                    tracing::warn!(reflector = %self.name, error = %e, "watch ended with error");
                    return Ok(());
                }
            }
        }
    }

    async fn watch_handler(
        &self,
        mut stream: crate::rest::WatchStream<K>,
        watch_rv: &str,
        resync_at: &mut Option<Instant>,
        shutdown: &CancellationToken,
    ) -> WatchEnd {
        let start = Instant::now();
        let mut events = 0u64;
        // An RV-0 watch starts with synthetic ADDED events that are not RV-ordered (§1.4).
        let mut delay_rv = watch_rv.is_empty() || watch_rv == "0";
        loop {
            let resync_sleep = async {
                match *resync_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                _ = shutdown.cancelled() => return WatchEnd::Shutdown,
                _ = resync_sleep => {
                    if self.should_resync.as_ref().is_none_or(|f| f()) {
                        self.store.resync();
                    }
                    *resync_at = Some(Instant::now() + self.resync_period);
                    continue;
                }
                n = stream.next() => n,
            };
            let ev = match next {
                None => {
                    return WatchEnd::Closed {
                        events,
                        elapsed: start.elapsed(),
                    }
                }
                Some(Err(e)) => return WatchEnd::Failed(Box::new(e)),
                Some(Ok(ev)) => ev,
            };
            let rv = match ev {
                WatchEvent::Added(o) => {
                    let rv = o.meta().resource_version.clone();
                    self.store.add(o);
                    if delay_rv {
                        None
                    } else {
                        rv
                    }
                }
                WatchEvent::Modified(o) => {
                    delay_rv = false;
                    let rv = o.meta().resource_version.clone();
                    self.store.update(o);
                    rv
                }
                WatchEvent::Deleted(o) => {
                    delay_rv = false;
                    let rv = o.meta().resource_version.clone();
                    self.store.delete(o);
                    rv
                }
                WatchEvent::Bookmark(rv) => {
                    delay_rv = false;
                    Some(rv)
                }
                WatchEvent::Error(status) => {
                    return WatchEnd::Failed(Box::new(Error::from_watch_status(status)))
                }
            };
            if let Some(rv) = rv.filter(|r| !r.is_empty()) {
                self.set_rv(&rv);
            }
            events += 1;
        }
    }
}
