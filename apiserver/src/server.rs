//! Serving: the accept loop, connection deadlines, graceful shutdown.
//!
//! Connections are served by hyper's HTTP/1 connection builder with a real header-read timeout
//! (axum's `serve` does not turn it on, T8), which is also the idle keep-alive timeout
//! ([`serve_connection`]); request bodies have their own deadline and minimum rate
//! ([`crate::http::preread`]). There is no fixed connection cap (a kube-apiserver has none): the
//! soft file-descriptor limit is raised to the hard limit at start-up and the only bound left is
//! sized from it ([`crate::fdlimit`]), so it is reached only when descriptors would run out; then
//! the loop stops accepting and excess connections wait in the kernel backlog. Accept errors
//! (EMFILE) pause the loop with a doubling back-off (5 ms to 1 s) and never end it. The steps are
//! accept → (a stream-wrapping step such as a TLS handshake, under the header deadline) →
//! [`serve_connection`], generic over the stream. Shutdown is one protocol: the token is cancelled, the
//! loop stops accepting, every connection is told to finish its in-flight request and close,
//! watch streams end themselves on the same token, and `run` waits for all connection tasks up to
//! `Config::shutdown_deadline`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::state::AppState;

/// Failure of the server as a whole (not of one request).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding the listen address failed.
    #[error("binding {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Reading the listener's local address failed.
    #[error("reading the listener address")]
    LocalAddr(#[source] std::io::Error),
    /// Seeding the built-in namespaces and services failed.
    #[error("seeding built-in objects")]
    Bootstrap(#[source] crate::error::ApiError),
    /// Starting the watch cache failed.
    #[error("starting the watch cache")]
    WatchCache(#[source] crate::error::ApiError),
}

/// Result of server operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Serves `store` on `listener` until `shutdown` is cancelled, then shuts down gracefully.
pub async fn run(
    listener: TcpListener,
    config: Config,
    store: Arc<dyn store::Store>,
    shutdown: CancellationToken,
) -> Result<()> {
    let state = AppState::start(config, store, shutdown.clone())
        .await
        .map_err(Error::WatchCache)?;
    crate::bootstrap::seed(&state)
        .await
        .map_err(Error::Bootstrap)?;
    serve(listener, state, shutdown).await;
    Ok(())
}

/// First pause after a failed accept; doubled on each further failure up to [`ACCEPT_BACKOFF_MAX`]
/// (Go's `http.Server` backs off the same way on EMFILE).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// Longest pause after failed accepts.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The accept loop over an already started [`AppState`].
pub async fn serve(listener: TcpListener, state: AppState, shutdown: CancellationToken) {
    let config = state.config.clone();
    let fd_limit = crate::fdlimit::raise();
    let max_connections = config
        .max_connections
        .unwrap_or_else(|| crate::fdlimit::connection_bound(fd_limit));
    tracing::info!(
        fd_limit,
        max_connections,
        "serving; connections past the bound wait in the kernel backlog"
    );
    let router = crate::app(state.clone());
    let conns = Arc::new(Semaphore::new(max_connections));
    let tracker = TaskTracker::new();
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = conns.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors (EMFILE, ENFILE) or a connection aborted before it was
                    // accepted: never fatal, never a busy loop.
                    tracing::warn!(error = %e, pause = ?backoff, "accept failed");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            },
        };
        backoff = ACCEPT_BACKOFF_MIN;
        let _ = stream.set_nodelay(true);
        let token = shutdown.clone();
        let header_timeout = config.header_read_timeout;
        if let Some(security) = &state.security {
            let (router, security) = (router.clone(), security.clone());
            tracker.spawn(async move {
                let _permit = permit;
                crate::http::tls::serve_connection(
                    stream,
                    peer,
                    router,
                    &security,
                    header_timeout,
                    token,
                )
                .await;
            });
            continue;
        }
        // The client's address travels with every request (the audit event's `sourceIPs`).
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            router.clone(),
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                req
            },
        ));
        tracker.spawn(async move {
            let _permit = permit;
            serve_connection(TokioIo::new(stream), peer, service, header_timeout, token).await;
        });
    }
    drop(listener);
    tracker.close();
    if tokio::time::timeout(config.shutdown_deadline, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("shutdown deadline passed with connections still open");
    }
    if let Some(audit) = &state.audit {
        audit.close(config.shutdown_deadline).await;
    }
}

/// Serves HTTP/1.1 on one established connection until the client closes it, a deadline closes
/// it, or `shutdown` asks it to finish its in-flight request and close.
///
/// Deadlines: hyper arms the header-read timer whenever the connection waits for a request head,
/// on a new connection and again after every response, so `header_timeout` is both the
/// slowloris deadline and the idle keep-alive timeout. Request bodies are bounded by
/// [`crate::http::preread`]; watches stream for as long as their own timeout.
pub async fn serve_connection<I, S>(
    io: I,
    peer: SocketAddr,
    service: S,
    header_timeout: Duration,
    shutdown: CancellationToken,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming> + Send + 'static,
    S::Future: Send + 'static,
    S::ResBody: Send + 'static,
    <S::ResBody as hyper::body::Body>::Data: Send + 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended with error");
            }
        }
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended with error during shutdown");
            }
        }
    }
}

/// A server started for tests or embedding: its address and its shutdown handle.
#[derive(Debug)]
pub struct Server {
    /// The bound address.
    pub addr: SocketAddr,
    /// Cancel to shut the server down.
    pub shutdown: CancellationToken,
    /// The serving task; resolves when shutdown completed.
    pub handle: tokio::task::JoinHandle<Result<()>>,
    /// Whether it serves HTTPS (`Config::secure`).
    pub tls: bool,
}

impl Server {
    /// `http://<addr>`, or `https://<addr>` for a secure server.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Cancels and waits for the shutdown to complete.
    pub async fn stop(self) -> Result<()> {
        self.shutdown.cancel();
        match self.handle.await {
            Ok(r) => r,
            Err(_) => Ok(()),
        }
    }
}

/// Binds `config.address` (use port 0 for an ephemeral port), seeds and starts serving.
/// Returns once the server accepts requests.
pub async fn start(config: Config, store: Arc<dyn store::Store>) -> Result<Server> {
    let listener = TcpListener::bind(config.address)
        .await
        .map_err(|source| Error::Bind {
            addr: config.address,
            source,
        })?;
    let addr = listener.local_addr().map_err(Error::LocalAddr)?;
    let shutdown = CancellationToken::new();
    let state = AppState::start(config, store, shutdown.clone())
        .await
        .map_err(Error::WatchCache)?;
    crate::bootstrap::seed(&state)
        .await
        .map_err(Error::Bootstrap)?;
    let token = shutdown.clone();
    let tls = state.security.is_some();
    let handle = tokio::spawn(async move {
        serve(listener, state, token).await;
        Ok(())
    });
    Ok(Server {
        addr,
        shutdown,
        handle,
        tls,
    })
}
