//! The audit log writer: upstream's log backend (`plugin/pkg/audit/log`) behind its buffered
//! backend (`plugin/pkg/audit/buffered`), with lumberjack's size-based rotation.
//!
//! Requests never wait for the disk: [`Sink::process`] hands a [`Record`] to a bounded queue
//! ([`BUFFER_SIZE`] events, upstream's batch buffer size, and [`MAX_QUEUED_BODY_BYTES`] of
//! bodies) without blocking; when either is full the event is dropped and counted in
//! `apiserver_audit_error_total{plugin="buffered"}`, as upstream's buffered backend does. One
//! writer thread takes events in batches of at most [`MAX_BATCH`], encodes them as JSON lines,
//! writes each batch with one call, and flushes whenever the queue is empty, so an idle server's
//! log is always complete on disk. [`Sink::close`] (at shutdown) lets the thread write what is
//! queued, flush and exit, under a deadline. A failed write is logged and counted in
//! `apiserver_audit_error_total{plugin="log"}`; the thread carries on.
//!
//! Rotation (`--audit-log-maxsize`, `--audit-log-maxbackup`): a file that would grow past the
//! size (lumberjack's 100 MB when 0) is renamed `<name>-<UTC time>.<ext>`
//! (`audit-2026-12-06T10-00-00.000.log`) and a new one opened; past `maxbackup` backups (0: keep
//! all) the oldest are removed. Files are created 0600 in a directory created 0700.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use super::event::Record;
use super::policy::Level;

/// Events queued for the writer (upstream's `defaultBatchBufferSize`).
pub const BUFFER_SIZE: usize = 10_000;
/// Events per write (upstream's `defaultBatchMaxSize`).
pub const MAX_BATCH: usize = 400;
/// Bytes of request and response bodies queued events may hold, all together.
pub const MAX_QUEUED_BODY_BYTES: usize = 64 * 1024 * 1024;
/// lumberjack's file size when none is given.
const DEFAULT_MAX_SIZE_MB: u64 = 100;

/// Where the log goes (`--audit-log-path`; `-` is standard output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    Stdout,
    File(PathBuf),
}

impl LogTarget {
    /// The flag's value.
    pub fn from_flag(path: &Path) -> Self {
        if path == Path::new("-") {
            LogTarget::Stdout
        } else {
            LogTarget::File(path.to_path_buf())
        }
    }
}

/// The counters of the audit metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    events: AtomicU64,
    dropped: AtomicU64,
    write_errors: AtomicU64,
    levels: [AtomicU64; 4],
}

impl Metrics {
    /// Counts a request's policy level (`apiserver_audit_level_total`).
    pub fn observe_level(&self, level: Level) {
        self.levels[level as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Events dropped at the full queue.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Appends the Prometheus text of the audit metrics (upstream's names and help).
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(out, "# HELP apiserver_audit_event_total [ALPHA] Counter of audit events generated and sent to the audit backend.");
        let _ = writeln!(out, "# TYPE apiserver_audit_event_total counter");
        let _ = writeln!(
            out,
            "apiserver_audit_event_total {}",
            self.events.load(Ordering::Relaxed)
        );
        let _ = writeln!(out, "# HELP apiserver_audit_error_total [ALPHA] Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.");
        let _ = writeln!(out, "# TYPE apiserver_audit_error_total counter");
        let _ = writeln!(
            out,
            "apiserver_audit_error_total{{plugin=\"buffered\"}} {}",
            self.dropped()
        );
        let _ = writeln!(
            out,
            "apiserver_audit_error_total{{plugin=\"log\"}} {}",
            self.write_errors.load(Ordering::Relaxed)
        );
        let _ = writeln!(out, "# HELP apiserver_audit_level_total [ALPHA] Counter of policy levels for audit events (1 per request).");
        let _ = writeln!(out, "# TYPE apiserver_audit_level_total counter");
        for level in [
            Level::None,
            Level::Metadata,
            Level::Request,
            Level::RequestResponse,
        ] {
            let _ = writeln!(
                out,
                "apiserver_audit_level_total{{level=\"{}\"}} {}",
                level.as_str(),
                self.levels[level as usize].load(Ordering::Relaxed)
            );
        }
    }
}

enum Msg {
    /// Boxed: the queue's slots stay small (it is allocated whole).
    Event(Box<Record>),
    Stop,
}

/// The queue to the writer thread.
#[derive(Debug)]
pub struct Sink {
    tx: SyncSender<Msg>,
    queued_bytes: Arc<AtomicUsize>,
    pub metrics: Arc<Metrics>,
    /// Resolved when the writer thread has flushed and ended.
    done: parking_lot::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

impl Sink {
    /// Opens the log (creating its directory and file) and starts the writer thread.
    pub fn open(target: &LogTarget, max_size_mb: u64, max_backups: usize) -> std::io::Result<Self> {
        let out = match target {
            LogTarget::Stdout => Output::Stdout(std::io::stdout()),
            LogTarget::File(path) => Output::File(Rotating::open(
                path.clone(),
                if max_size_mb == 0 {
                    DEFAULT_MAX_SIZE_MB
                } else {
                    max_size_mb
                } * 1024
                    * 1024,
                max_backups,
            )?),
        };
        let (tx, rx) = sync_channel(BUFFER_SIZE);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let metrics = Arc::new(Metrics::default());
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let writer = Writer {
            rx,
            out,
            queued_bytes: queued_bytes.clone(),
            metrics: metrics.clone(),
        };
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || {
                writer.run();
                let _ = done_tx.send(());
            })?;
        Ok(Sink {
            tx,
            queued_bytes,
            metrics,
            done: parking_lot::Mutex::new(Some(done_rx)),
        })
    }

    /// Queues `record` for the writer, or drops and counts it when the queue is full. Never
    /// blocks.
    pub fn process(&self, record: Record) {
        self.metrics.events.fetch_add(1, Ordering::Relaxed);
        let bytes = record.body_bytes();
        if bytes > 0 {
            let before = self.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
            if before + bytes > MAX_QUEUED_BODY_BYTES {
                self.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
                self.drop_event("the audit buffer's body bytes are exhausted");
                return;
            }
        }
        match self.tx.try_send(Msg::Event(Box::new(record))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
                self.drop_event("audit buffer queue blocked");
            }
            Err(TrySendError::Disconnected(_)) => {
                self.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
                self.drop_event("audit backend shut down");
            }
        }
    }

    fn drop_event(&self, why: &str) {
        let n = self.metrics.dropped.fetch_add(1, Ordering::Relaxed);
        // One line per thousand drops: a full queue must not flood the log too.
        if n.is_multiple_of(1000) {
            tracing::error!(
                plugin = "buffered",
                dropped = n + 1,
                "{why}; audit event dropped"
            );
        }
    }

    /// Lets the writer write what is queued, flush and end, waiting at most `deadline`.
    pub async fn close(&self, deadline: Duration) {
        let done = self.done.lock().take();
        let Some(done) = done else { return };
        let stop = async {
            // The queue may be full: retry until there is room for the stop.
            while let Err(TrySendError::Full(_)) = self.tx.try_send(Msg::Stop) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = done.await;
        };
        if tokio::time::timeout(deadline, stop).await.is_err() {
            tracing::warn!("the audit log was not flushed before the shutdown deadline");
        }
    }
}

struct Writer {
    rx: Receiver<Msg>,
    out: Output,
    queued_bytes: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
}

impl Writer {
    fn run(mut self) {
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut stop = false;
        while !stop {
            let Ok(first) = self.rx.recv() else { break };
            let mut batch = 0;
            let mut next = Some(first);
            let mut idle = false;
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Stop => stop = true,
                    Msg::Event(record) => {
                        self.encode(&record, &mut buf);
                        batch += 1;
                    }
                }
                if stop || batch >= MAX_BATCH {
                    break;
                }
                match self.rx.try_recv() {
                    Ok(m) => next = Some(m),
                    Err(TryRecvError::Empty) => idle = true,
                    Err(TryRecvError::Disconnected) => stop = true,
                }
            }
            self.write(&buf, batch);
            buf.clear();
            if idle || stop {
                if let Err(e) = self.out.flush() {
                    tracing::error!(plugin = "log", error = %e, "flushing the audit log");
                }
            }
        }
        if let Err(e) = self.out.flush() {
            tracing::error!(plugin = "log", error = %e, "flushing the audit log");
        }
    }

    fn encode(&self, record: &Record, buf: &mut Vec<u8>) {
        self.queued_bytes
            .fetch_sub(record.body_bytes(), Ordering::Relaxed);
        let start = buf.len();
        match serde_json::to_writer(&mut *buf, &record.to_json()) {
            Ok(()) => buf.push(b'\n'),
            Err(e) => {
                buf.truncate(start);
                self.metrics.write_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(plugin = "log", error = %e, "encoding an audit event");
            }
        }
    }

    fn write(&mut self, buf: &[u8], events: usize) {
        if buf.is_empty() {
            return;
        }
        if let Err(e) = self.out.write_all(buf) {
            self.metrics
                .write_errors
                .fetch_add(events as u64, Ordering::Relaxed);
            tracing::error!(plugin = "log", error = %e, events, "writing the audit log");
        }
    }
}

enum Output {
    Stdout(std::io::Stdout),
    File(Rotating),
}

impl Output {
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Stdout(s) => s.lock().write_all(buf),
            Output::File(f) => f.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Stdout(s) => s.lock().flush(),
            Output::File(f) => f.file.flush(),
        }
    }
}

/// A log file rotated by size, as lumberjack rotates it.
struct Rotating {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    size: u64,
    max_size: u64,
    max_backups: usize,
}

impl Rotating {
    fn open(path: PathBuf, max_size: u64, max_backups: usize) -> std::io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let file = open_append(&path)?;
        let size = file.metadata()?.len();
        Ok(Rotating {
            path,
            file: std::io::BufWriter::with_capacity(256 * 1024, file),
            size,
            max_size,
            max_backups,
        })
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if self.size > 0 && self.size + buf.len() as u64 > self.max_size {
            self.rotate()?;
        }
        self.file.write_all(buf)?;
        self.size += buf.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        let backup = backup_name(&self.path, jiff::Timestamp::now());
        std::fs::rename(&self.path, &backup)?;
        self.file = std::io::BufWriter::with_capacity(256 * 1024, open_append(&self.path)?);
        self.size = 0;
        // The new file is open: a backup that cannot be pruned must not cost the batch.
        if self.max_backups > 0 {
            if let Err(error) = prune_backups(&self.path, self.max_backups) {
                tracing::warn!(%error, "audit log: old backups not pruned");
            }
        }
        Ok(())
    }
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// `<stem>-<2006-01-02T15-04-05.000>.<ext>` beside `path`, in UTC (lumberjack's backup name).
fn backup_name(path: &Path, at: jiff::Timestamp) -> PathBuf {
    let (stem, ext) = split_name(path);
    let stamp = at.strftime("%Y-%m-%dT%H-%M-%S%.3f");
    path.with_file_name(format!("{stem}-{stamp}{ext}"))
}

/// The file name's stem and extension (with its dot, or empty).
fn split_name(path: &Path) -> (String, String) {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (stem, ext)
}

/// Removes the oldest backups of `path` past `keep`.
fn prune_backups(path: &Path, keep: usize) -> std::io::Result<()> {
    let (stem, ext) = split_name(path);
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let prefix = format!("{stem}-");
    let mut backups: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(&ext) && p != path)
        })
        .collect();
    // The time stamp in the name sorts as the time does.
    backups.sort();
    let excess = backups.len().saturating_sub(keep);
    for old in &backups[..excess] {
        std::fs::remove_file(old)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::event::{Captured, Core, Record};
    use crate::audit::Stage;

    fn record(body: usize) -> Record {
        Record {
            core: Arc::new(Core {
                level: Level::Metadata,
                audit_id: "a".into(),
                request_uri: "/api".into(),
                verb: "get".into(),
                user: None,
                source_ips: vec![],
                user_agent: String::new(),
                object_ref: None,
                received: jiff::Timestamp::now(),
                omit_managed_fields: false,
            }),
            stage: Stage::RequestReceived,
            stage_timestamp: jiff::Timestamp::now(),
            impersonated: None,
            response: None,
            request_body: (body > 0).then(|| Captured {
                bytes: bytes::Bytes::from(vec![b'x'; body]),
                content_type: "application/json".into(),
            }),
            annotations: Default::default(),
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        // A queue of two that nobody drains.
        let (tx, rx) = sync_channel(2);
        let sink = Sink {
            tx,
            queued_bytes: Default::default(),
            metrics: Default::default(),
            done: parking_lot::Mutex::new(None),
        };
        for _ in 0..5 {
            sink.process(record(10));
        }
        assert_eq!(sink.metrics.dropped(), 3);
        assert_eq!(sink.metrics.events.load(Ordering::Relaxed), 5);
        // Only the queued events' bodies are counted against the byte bound.
        assert_eq!(sink.queued_bytes.load(Ordering::Relaxed), 20);
        // Bodies past the byte bound are dropped even with room in the queue.
        let _ = rx.recv().unwrap();
        sink.process(record(MAX_QUEUED_BODY_BYTES));
        assert_eq!(sink.metrics.dropped(), 4);
        drop(rx);
        sink.process(record(0));
        assert_eq!(sink.metrics.dropped(), 5);
        let mut text = String::new();
        sink.metrics.render(&mut text);
        assert!(text.contains("apiserver_audit_error_total{plugin=\"buffered\"} 5\n"));
        assert!(text.contains("apiserver_audit_event_total 7\n"));
    }

    #[tokio::test]
    async fn close_writes_what_is_queued_and_ends_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let sink = Sink::open(&LogTarget::File(path.clone()), 0, 0).unwrap();
        for _ in 0..1000 {
            sink.process(record(0));
        }
        sink.close(Duration::from_secs(10)).await;
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1000);
        assert!(text.lines().all(|l| l.starts_with("{\"kind\":\"Event\"")));
        // After the close nothing is written, and nothing waits.
        sink.process(record(0));
        assert_eq!(sink.metrics.dropped(), 1);
    }

    #[test]
    fn a_full_file_is_rotated_and_old_backups_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.log");
        let mut f = Rotating::open(path.clone(), 10, 2).unwrap();
        for i in 0..5 {
            f.write_all(format!("line-{i}-xx\n").as_bytes()).unwrap();
            // Backup names carry milliseconds: keep them distinct.
            std::thread::sleep(Duration::from_millis(2));
        }
        f.file.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "line-4-xx\n");
        let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names[0].starts_with("audit-") && names[0].ends_with(".log"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn backup_names_are_lumberjacks() {
        let t: jiff::Timestamp = "2026-12-06T10:00:01.5Z".parse().unwrap();
        assert_eq!(
            backup_name(Path::new("/var/log/audit.log"), t),
            PathBuf::from("/var/log/audit-2026-12-06T10-00-01.500.log")
        );
    }
}
