//! [`EtcdStore`]: the [`Store`] contract on an etcd v3 cluster, with etcd's own semantics, as
//! kube-apiserver's etcd3 storage (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`).
//!
//! Design and guarantees:
//! - **Revisions are etcd's.** A value's `mod_revision`/`create_revision` are etcd's; the store's
//!   revision is etcd's header revision. Every write is one etcd request, so a write through any
//!   apiserver on the same cluster orders with every other. Revisions are shared with every other key
//!   of the cluster, so a prefix watch may see gaps between revisions (never a missing change).
//! - **Writes are single transactions.** Create = `txn(create_revision(key) == 0) put else get`;
//!   update/delete with a precondition = `txn(mod_revision(key) == expected) put/delete else get`;
//!   without one, `txn(create_revision(key) != 0)` so a missing key is `NotFound`, never re-created.
//!   A write is acknowledged only when etcd committed it (a quorum of members, fsynced).
//! - **Reads are linearizable** (etcd's default, a quorum read); lists are served at one revision
//!   (the first page's, carried in the continue token), paginated with etcd's `limit`/`more`/`count`.
//! - **Sizes.** A value over [`crate::MAX_VALUE_SIZE`] is refused before it is sent
//!   ([`Error::ValueTooLarge`]), and so is etcd's own `request is too large`.
//! - **History.** `compacted` errors become `Expired` (410); compaction is driven by the store itself
//!   (`compactor`), as kube-apiserver does. Watches: see `watch`.
//! - Connection failures are [`Error::Etcd`]; the client balances over every endpoint given and
//!   reconnects by itself; watches resume (see `watch`).

mod compactor;
mod convert;
mod progress;
pub mod server;
mod watch;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Identity,
    KvClient, TlsOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::continue_token::ContinueToken;
use crate::{
    CreateOutcome, DeleteOutcome, Error, KeyValue, ListOptions, ListOutcome, ListPage, Result,
    Revision, Store, StoreConfig, UpdateOutcome, WatchOutcome, MAX_VALUE_SIZE,
};

use convert::{classify, key_value, prefix_end, Failure};

/// How to reach etcd (kube-apiserver's `--etcd-servers`, `--etcd-cafile`, `--etcd-certfile`,
/// `--etcd-keyfile`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs, `http://host:port` or `https://host:port`.
    pub endpoints: Vec<String>,
    /// PEM CA bundle that signs the members' serving certificates (TLS when set).
    pub ca_file: Option<std::path::PathBuf>,
    /// PEM client certificate and key, for members that require client certificates.
    pub cert_file: Option<std::path::PathBuf>,
    pub key_file: Option<std::path::PathBuf>,
}

/// State shared by the store, its watch tasks and its compactor.
pub(crate) struct Shared {
    client: Client,
    /// `current_revision`: the highest revision of our own acknowledged writes and quorum reads.
    current: AtomicU64,
    /// Highest revision known to be compacted (ours, or learnt from etcd's answers).
    compacted: AtomicU64,
    closed: AtomicBool,
    /// Cancelled by `flush_and_close`: ends watch tasks and the compactor.
    shutdown: CancellationToken,
    /// How consistent reads reach the watches (`progress`).
    progress_mode: progress::Mode,
    /// In [`progress::Mode::Requests`]: the revision the live watches are asked to report progress
    /// up to (raised by consistent reads).
    progress_wanted: tokio::sync::watch::Sender<u64>,
    /// In [`progress::Mode::Writes`]: whose progress keys to write.
    watched: progress::WatchedPrefixes,
    /// In [`progress::Mode::Writes`]: the progress write concurrent consistent reads share.
    progress_writes: progress::SharedWrite,
    /// The last request failure, while no request has succeeded since (for `health`).
    last_failure: Mutex<Option<String>>,
    default_watch_buffer: usize,
}

impl Shared {
    fn kv(&self) -> KvClient {
        self.client.kv_client()
    }

    /// A response from etcd arrived: it is reachable again. Its header revision may be another
    /// client's write (outside the apiserver's prefix), so it does not move `current`.
    pub(crate) fn observe(&self, _revision: i64) {
        *self.last_failure.lock() = None;
    }

    /// A revision every watch of this store will reach by an event or a progress mark: one of our
    /// own writes, or a quorum read followed by a progress request or progress write.
    pub(crate) fn advance(&self, revision: i64) {
        if let Ok(revision) = u64::try_from(revision) {
            self.current.fetch_max(revision, Ordering::AcqRel);
        }
        *self.last_failure.lock() = None;
    }

    pub(crate) fn observe_compacted(&self, revision: Revision) {
        self.compacted.fetch_max(revision, Ordering::AcqRel);
    }

    fn fail(&self, operation: &'static str, error: etcd_client::Error) -> Error {
        let detail = error.to_string();
        *self.last_failure.lock() = Some(detail.clone());
        Error::Etcd { operation, detail }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }
}

/// The store on etcd. Cloning the handle is not offered: share it as `Arc<dyn Store>`.
pub struct EtcdStore {
    shared: Arc<Shared>,
}

impl EtcdStore {
    /// Connect to `etcd` and read its current revision with a quorum read. Starts the compactor
    /// (every `cfg.compaction_interval`, keeping at least `cfg.event_log_max_events` revisions) on
    /// the current tokio runtime, which must be running.
    pub async fn connect(etcd: &EtcdConfig, cfg: StoreConfig) -> Result<Self> {
        let options = connect_options(etcd)?;
        let client = Client::connect(&etcd.endpoints, Some(options.clone()))
            .await
            .map_err(|e| Error::Etcd {
                operation: "connect",
                detail: e.to_string(),
            })?;
        let progress_mode = progress::detect(&etcd.endpoints, &options).await;
        let (progress_wanted, _) = tokio::sync::watch::channel(0);
        let shared = Arc::new(Shared {
            client,
            current: AtomicU64::new(0),
            compacted: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
            progress_mode,
            progress_wanted,
            watched: progress::WatchedPrefixes::default(),
            progress_writes: progress::SharedWrite::default(),
            last_failure: Mutex::new(None),
            default_watch_buffer: cfg.default_watch_buffer,
        });
        let store = Self { shared };
        store.quorum_revision().await?;
        compactor::start(
            Arc::clone(&store.shared),
            cfg.compaction_interval,
            cfg.event_log_max_events,
        );
        tracing::info!(endpoints = ?etcd.endpoints, revision = store.current_revision(), "etcd store connected");
        Ok(store)
    }

    /// etcd's current revision, read through the cluster leader (a quorum read, as kube-apiserver's
    /// `GetCurrentResourceVersion`).
    pub async fn quorum_revision(&self) -> Result<Revision> {
        let response = self
            .shared
            .kv()
            .get("compact_rev_key", Some(GetOptions::new().with_count_only()))
            .await
            .map_err(|e| self.shared.fail("read revision", e))?;
        if let Some(header) = response.header() {
            self.shared.advance(header.revision());
        }
        Ok(self.current_revision())
    }

    async fn txn(&self, operation: &'static str, txn: Txn) -> Result<TxnResponse> {
        self.shared.check_open()?;
        match self.shared.kv().txn(txn).await {
            Ok(response) => {
                if let Some(header) = response.header() {
                    // A refused transaction wrote nothing: its header may be another client's.
                    if response.succeeded() {
                        self.shared.advance(header.revision());
                    } else {
                        self.shared.observe(header.revision());
                    }
                }
                Ok(response)
            }
            Err(error) => Err(match classify(&error) {
                Failure::TooLarge => Error::ValueTooLarge {
                    size: 0,
                    limit: MAX_VALUE_SIZE,
                },
                Failure::NoSpace(detail) => Error::NoSpace { detail },
                _ => self.shared.fail(operation, error),
            }),
        }
    }

    /// A watch of `prefix` after `after`, its progress reported or not (see
    /// [`Store::watch_passive`]).
    fn open_watch(
        &self,
        prefix: &str,
        after: Revision,
        buffer: usize,
        progress: watch::Progress,
    ) -> Result<WatchOutcome> {
        self.shared.check_open()?;
        let compacted = self.compacted_revision();
        if after < compacted {
            return Ok(WatchOutcome::Expired { compacted });
        }
        let buffer = if buffer == 0 {
            self.shared.default_watch_buffer
        } else {
            buffer
        };
        Ok(WatchOutcome::Watching(watch::start(
            Arc::clone(&self.shared),
            prefix,
            after,
            buffer,
            progress,
        )?))
    }
}

fn too_large(value: &Bytes) -> Result<()> {
    if value.len() > MAX_VALUE_SIZE {
        return Err(Error::ValueTooLarge {
            size: value.len(),
            limit: MAX_VALUE_SIZE,
        });
    }
    Ok(())
}

fn read_pem(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

pub(crate) fn connect_options(etcd: &EtcdConfig) -> Result<ConnectOptions> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
        .with_keep_alive_while_idle(true);
    let https = etcd.endpoints.iter().any(|e| e.starts_with("https://"));
    if https || etcd.ca_file.is_some() || etcd.cert_file.is_some() {
        let mut tls = TlsOptions::new();
        if let Some(ca) = &etcd.ca_file {
            tls = tls.ca_certificate(Certificate::from_pem(read_pem(ca)?));
        }
        match (&etcd.cert_file, &etcd.key_file) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(Identity::from_pem(read_pem(cert)?, read_pem(key)?));
            }
            (None, None) => {}
            _ => {
                return Err(Error::Etcd {
                    operation: "connect",
                    detail: "a client certificate needs both --etcd-certfile and --etcd-keyfile"
                        .into(),
                })
            }
        }
        options = options.with_tls(tls);
    }
    Ok(options)
}

/// The single range response of a txn's `else` branch: the key's current value, if any.
fn current_of(response: &TxnResponse) -> Option<KeyValue> {
    response.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().map(key_value),
        _ => None,
    })
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let response = self
            .shared
            .kv()
            .get(key, None)
            .await
            .map_err(|e| self.shared.fail("get", e))?;
        if let Some(header) = response.header() {
            self.shared.observe(header.revision());
        }
        Ok(response.kvs().first().map(key_value))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<CreateOutcome> {
        too_large(&value)?;
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value.to_vec(), None)])
            .or_else([TxnOp::get(key, None)]);
        let response = self.txn("create", txn).await?;
        if response.succeeded() {
            let revision = response.header().map_or(0, |h| h.revision()) as Revision;
            return Ok(CreateOutcome::Created(KeyValue {
                key: key.to_owned(),
                value,
                create_revision: revision,
                mod_revision: revision,
            }));
        }
        match current_of(&response) {
            Some(current) => Ok(CreateOutcome::AlreadyExists(current)),
            // Deleted between the compare and the read of the same transaction cannot happen.
            None => Err(Error::Etcd {
                operation: "create",
                detail: "etcd refused the create but returned no current value".into(),
            }),
        }
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<UpdateOutcome> {
        too_large(&value)?;
        let compare = match expected {
            Some(rev) => Compare::mod_revision(key, CompareOp::Equal, rev as i64),
            None => Compare::create_revision(key, CompareOp::NotEqual, 0),
        };
        let txn = Txn::new()
            .when([compare])
            .and_then([TxnOp::put(
                key,
                value.to_vec(),
                Some(etcd_client::PutOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let response = self.txn("update", txn).await?;
        if response.succeeded() {
            let revision = response.header().map_or(0, |h| h.revision()) as Revision;
            let prev = response.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Put(put) => put.prev_key().map(key_value),
                _ => None,
            });
            let Some(prev) = prev else {
                return Err(Error::Etcd {
                    operation: "update",
                    detail: "etcd applied the update but returned no previous value".into(),
                });
            };
            return Ok(UpdateOutcome::Updated {
                kv: KeyValue {
                    key: key.to_owned(),
                    value,
                    create_revision: prev.create_revision,
                    mod_revision: revision,
                },
                prev,
            });
        }
        Ok(match current_of(&response) {
            Some(current) => UpdateOutcome::Conflict(current),
            None => UpdateOutcome::NotFound,
        })
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<DeleteOutcome> {
        let compare = match expected {
            Some(rev) => Compare::mod_revision(key, CompareOp::Equal, rev as i64),
            None => Compare::create_revision(key, CompareOp::NotEqual, 0),
        };
        let txn = Txn::new()
            .when([compare])
            .and_then([TxnOp::delete(
                key,
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let response = self.txn("delete", txn).await?;
        if response.succeeded() {
            let revision = response.header().map_or(0, |h| h.revision()) as Revision;
            let prev = response.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Delete(delete) => delete.prev_kvs().first().map(key_value),
                _ => None,
            });
            return Ok(match prev {
                Some(prev) => DeleteOutcome::Deleted { prev, revision },
                None => DeleteOutcome::NotFound,
            });
        }
        Ok(match current_of(&response) {
            Some(current) => DeleteOutcome::Conflict(current),
            None => DeleteOutcome::NotFound,
        })
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListOutcome> {
        let (revision, start) = match &opts.continue_token {
            Some(token) => match ContinueToken::decode(token) {
                Some(t) if t.after_key.starts_with(prefix) => {
                    (Some(t.revision), format!("{}\0", t.after_key))
                }
                _ => return Ok(ListOutcome::InvalidContinue),
            },
            None => (opts.revision, prefix.to_owned()),
        };
        // etcd has no empty key: "" starts at the smallest key, "\0".
        let start = if start.is_empty() {
            "\0".to_owned()
        } else {
            start
        };
        let mut get = GetOptions::new().with_range(prefix_end(prefix));
        if let Some(rev) = revision.filter(|r| *r > 0) {
            get = get.with_revision(rev as i64);
        }
        if let Some(limit) = opts.limit.filter(|l| *l > 0) {
            get = get.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        let response = match self.shared.kv().get(start, Some(get)).await {
            Ok(response) => response,
            Err(error) => {
                return match classify(&error) {
                    Failure::Compacted => {
                        let requested = revision.unwrap_or(0);
                        self.shared.observe_compacted(requested + 1);
                        Ok(ListOutcome::Expired {
                            compacted: self.compacted_revision(),
                        })
                    }
                    Failure::FutureRevision => Ok(ListOutcome::FutureRevision {
                        current: self.quorum_revision().await?,
                    }),
                    _ => Err(self.shared.fail("list", error)),
                }
            }
        };
        let header_revision = response.header().map_or(0, |h| h.revision()) as Revision;
        self.shared.observe(header_revision as i64);
        let page_revision = revision.filter(|r| *r > 0).unwrap_or(header_revision);
        let kvs = response.kvs();
        // Progress keys are left out of the items, not out of the paging: the page continues
        // after the last key etcd returned (a page may then hold fewer than `limit` objects).
        let items: Vec<KeyValue> = kvs
            .iter()
            .filter(|kv| !progress::is_progress_key(kv.key()))
            .map(key_value)
            .collect();
        let remaining = (response.count() as u64).saturating_sub(kvs.len() as u64);
        let continue_token = match (response.more(), kvs.last()) {
            (true, Some(last)) => Some(
                ContinueToken {
                    revision: page_revision,
                    after_key: String::from_utf8_lossy(last.key()).into_owned(),
                }
                .encode(),
            ),
            _ => None,
        };
        Ok(ListOutcome::Listed(ListPage {
            remaining: continue_token.as_ref().map(|_| remaining),
            items,
            revision: page_revision,
            continue_token,
        }))
    }

    fn watch(&self, prefix: &str, after: Revision, buffer: usize) -> Result<WatchOutcome> {
        self.open_watch(prefix, after, buffer, watch::Progress::Reported)
    }

    fn watch_passive(&self, prefix: &str, after: Revision, buffer: usize) -> Result<WatchOutcome> {
        self.open_watch(prefix, after, buffer, watch::Progress::Unreported)
    }

    fn current_revision(&self) -> Revision {
        self.shared.current.load(Ordering::Acquire)
    }

    fn compacted_revision(&self) -> Revision {
        self.shared.compacted.load(Ordering::Acquire)
    }

    async fn consistent_revision(&self) -> Result<Revision> {
        // Live watches report progress up to (at least) this revision even when their prefix saw
        // no change since: the watch cache waits for it (see `progress`).
        match self.shared.progress_mode {
            progress::Mode::Requests => {
                let revision = self.quorum_revision().await?;
                self.shared.progress_wanted.send_if_modified(|wanted| {
                    let raise = *wanted < revision;
                    if raise {
                        *wanted = revision;
                    }
                    raise
                });
                Ok(revision)
            }
            progress::Mode::Writes => {
                if self.shared.watched.is_empty() {
                    return self.quorum_revision().await;
                }
                // Reads waiting at once share one write (see `progress`).
                self.shared
                    .progress_writes
                    .run(|| async {
                        let puts: Vec<TxnOp> = self
                            .shared
                            .watched
                            .keys()
                            .into_iter()
                            .map(|k| TxnOp::put(k, [], None))
                            .collect();
                        let response = self.txn("progress", Txn::new().and_then(puts)).await?;
                        Ok(response.header().map_or(0, |h| h.revision()) as Revision)
                    })
                    .await
            }
        }
    }

    fn health(&self) -> Result<()> {
        self.shared.check_open()?;
        match self.shared.last_failure.lock().clone() {
            Some(detail) => Err(Error::Etcd {
                operation: "health",
                detail,
            }),
            None => Ok(()),
        }
    }

    async fn flush_and_close(&self) -> Result<()> {
        // Every write was acknowledged by etcd before it returned: nothing to flush.
        self.shared.closed.store(true, Ordering::Release);
        self.shared.shutdown.cancel();
        Ok(())
    }
}
