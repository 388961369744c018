//! How a consistent read learns that every watch of this store has caught up with a revision, as
//! kube-apiserver's `RequestWatchProgress` and its etcd feature-support check
//! (`staging/src/k8s.io/apiserver/pkg/storage/feature/feature_support_checker.go`).
//!
//! Two ways, chosen once at connect by the members' versions:
//! - **Progress requests** ([`Mode::Requests`], etcd ≥ 3.4.31 or ≥ 3.5.13): a quorum read gives the
//!   revision; every live watch asks etcd for a progress notification and re-asks every
//!   [`REASK`] until one reaches that revision (etcd answers nothing for a watcher that is not
//!   synced, and a request sent on a stream that then breaks is lost).
//! - **Progress writes** ([`Mode::Writes`], older members): their progress answer can overtake
//!   events still queued for the watch (etcd issues 15220 and 17507), so a progress mark there
//!   could make a watch skip writes. Upstream reads from etcd instead of its watch cache; here one
//!   transaction puts a *progress key* inside every live watch's prefix. Its revision is the
//!   consistent revision (a write is linearizable), and each watch sees the key's event in revision
//!   order, after every earlier event: the watch turns it into a progress mark, never an event.
//!   Lists never return progress keys.
//!
//! A progress key is the watched prefix followed by [`PROGRESS_KEY_SUFFIX`], which starts with a
//! NUL byte: no Kubernetes object name can contain one, so it never names an object.
//!
//! **Shared progress writes.** Consistent reads that wait at once share writes, as upstream's
//! progress requester shares one request among its waiters ([`SharedWrite`]): at most one progress
//! write is in flight; a read that arrives while one is in flight is served by the next, which
//! starts after it arrived (a write sent before a read arrived may order before writes the read
//! must see), so a burst of N reads costs at most two writes, and every read still gets a revision
//! at least as new as every write acknowledged before it began.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use parking_lot::Mutex;

/// Ends every progress key.
pub(crate) const PROGRESS_KEY_SUFFIX: &str = "\0minik8s-watch-progress";

/// How often a watch re-asks for progress while a consistent read waits for it (upstream's
/// progress requester ticks at 100 ms).
pub(crate) const REASK: Duration = Duration::from_millis(100);

/// How long the version check waits for one member.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// How consistent reads reach the watches (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Requests,
    Writes,
}

/// Whether `key` is a progress key (of any prefix).
pub(crate) fn is_progress_key(key: &[u8]) -> bool {
    key.ends_with(PROGRESS_KEY_SUFFIX.as_bytes())
}

/// The progress key of the watches of `prefix`.
pub(crate) fn progress_key(prefix: &str) -> String {
    format!("{prefix}{PROGRESS_KEY_SUFFIX}")
}

/// Whether etcd `version` answers progress requests in order with the watch's events: not before
/// 3.4.31, nor in 3.5.0–3.5.12 (as upstream's check). An unparsable version does not.
pub(crate) fn supports_progress_requests(version: &str) -> bool {
    let mut parts = version
        .split(['-', '+'])
        .next()
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse::<u64>().ok());
    let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m > 5,
        (m, _) => m > 3,
    }
}

/// Asks every endpoint for its version, all at once: progress requests only when all of them
/// support them (upstream's rule); an endpoint that does not answer in time counts as not
/// supporting them. Decided once at connect, unlike upstream's checker, which re-asks a silent
/// member in the background and may turn the feature on later: a member down at start-up leaves
/// this process on progress writes (correct, one small write per consistent read) until restart.
pub(crate) async fn detect(endpoints: &[String], options: &ConnectOptions) -> Mode {
    let versions = futures::future::join_all(endpoints.iter().map(|endpoint| async move {
        let version = tokio::time::timeout(STATUS_TIMEOUT, async {
            let mut client = Client::connect([endpoint.as_str()], Some(options.clone()))
                .await
                .ok()?;
            let status = client.status().await.ok()?;
            Some(status.version().to_owned())
        })
        .await
        .ok()
        .flatten();
        (endpoint, version)
    }))
    .await;
    for (endpoint, version) in versions {
        if !version.as_deref().is_some_and(supports_progress_requests) {
            tracing::info!(%endpoint, ?version, "etcd member does not order progress answers with watch events: consistent reads write a progress key");
            return Mode::Writes;
        }
    }
    Mode::Requests
}

/// Every prefix a watch of this store was opened on: the progress keys to write. A prefix stays
/// once watched, so a watch being reopened (after a relist) never misses its key; the prefixes come
/// from the code (the watch cache watches one), never from requests.
#[derive(Default)]
pub(crate) struct WatchedPrefixes {
    prefixes: Mutex<HashSet<String>>,
}

impl WatchedPrefixes {
    pub(crate) fn add(&self, prefix: &str) {
        let mut prefixes = self.prefixes.lock();
        if !prefixes.contains(prefix) {
            prefixes.insert(prefix.to_owned());
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.prefixes.lock().is_empty()
    }

    /// The progress keys to write now, one per watched prefix.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.prefixes
            .lock()
            .iter()
            .map(|p| progress_key(p))
            .collect()
    }
}

/// One progress write shared by every consistent read waiting for it (see the module docs).
#[derive(Default)]
pub(crate) struct SharedWrite {
    /// Reads that asked so far; each read's number is its place in this count.
    arrivals: AtomicU64,
    /// Held by the read whose write is in flight, so at most one is. Inside: how many arrivals the
    /// last successful write covers (every read numbered up to it arrived before it was sent) and
    /// the revision it got. A tokio mutex: waiters queue in order and are woken one at a time.
    last: tokio::sync::Mutex<Option<(u64, crate::Revision)>>,
}

impl SharedWrite {
    /// A revision at least as new as every write acknowledged before this call: the revision of
    /// a `write` sent after this call began, this caller's own or one shared with other callers.
    /// A failed write fails only its own caller; the callers it would have served write again.
    pub(crate) async fn run<F, Fut>(&self, write: F) -> crate::Result<crate::Revision>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = crate::Result<crate::Revision>>,
    {
        let arrival = self.arrivals.fetch_add(1, Ordering::SeqCst) + 1;
        let mut last = self.last.lock().await;
        if let Some((covers, revision)) = *last {
            if covers >= arrival {
                return Ok(revision);
            }
        }
        // Every read counted by now arrived before the write below is sent.
        let covers = self.arrivals.load(Ordering::SeqCst);
        let revision = write().await?;
        *last = Some((covers, revision));
        Ok(revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn versions_as_upstreams_check() {
        for v in ["3.4.23", "3.4.30", "3.5.0", "3.5.12", "garbage", "3.4", ""] {
            assert!(!supports_progress_requests(v), "{v}");
        }
        for v in [
            "3.4.31",
            "3.4.35",
            "3.5.13",
            "3.5.21",
            "3.6.0",
            "3.6.0-rc.1",
            "4.0.0",
        ] {
            assert!(supports_progress_requests(v), "{v}");
        }
    }

    #[test]
    fn progress_keys_are_recognised_and_one_per_prefix() {
        let p = WatchedPrefixes::default();
        p.add("/registry/");
        p.add("/registry/");
        p.add("");
        let mut keys = p.keys();
        keys.sort();
        assert_eq!(keys, vec![progress_key(""), progress_key("/registry/")]);
        assert!(keys.iter().all(|k| is_progress_key(k.as_bytes())));
        assert!(!is_progress_key(b"/registry/pods/default/web"));
    }

    /// Many consistent reads waiting at once share writes: a burst of 50 while one write is in
    /// flight costs that write and one more, and each gets the revision of a write that started
    /// after it asked.
    #[tokio::test]
    async fn reads_waiting_at_once_share_one_write() {
        let shared = Arc::new(SharedWrite::default());
        let writes = Arc::new(AtomicU64::new(0));
        let (release, gate) = tokio::sync::watch::channel(0u64);
        let write = |writes: Arc<AtomicU64>, mut gate: tokio::sync::watch::Receiver<u64>| {
            move || async move {
                let n = writes.fetch_add(1, Ordering::SeqCst) + 1;
                // Each write finishes only when the test lets it.
                let _ = gate.wait_for(|g| *g >= n).await;
                Ok(n * 10)
            }
        };
        let first = tokio::spawn({
            let (shared, writes, gate) = (shared.clone(), writes.clone(), gate.clone());
            async move { shared.run(write(writes, gate)).await }
        });
        for _ in 0..1000 {
            if writes.load(Ordering::SeqCst) == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(writes.load(Ordering::SeqCst), 1, "the first write started");
        // Fifty reads arrive while the first write is in flight.
        let burst: Vec<_> = (0..50)
            .map(|_| {
                let (shared, writes, gate) = (shared.clone(), writes.clone(), gate.clone());
                tokio::spawn(async move { shared.run(write(writes, gate)).await })
            })
            .collect();
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            writes.load(Ordering::SeqCst),
            1,
            "one write in flight at a time"
        );
        let _ = release.send(2);
        assert_eq!(first.await.ok().and_then(Result::ok), Some(10));
        for read in burst {
            // Not the first write's revision: it was sent before these reads asked.
            assert_eq!(read.await.ok().and_then(Result::ok), Some(20));
        }
        assert_eq!(writes.load(Ordering::SeqCst), 2);
        // A read after the burst writes again.
        let _ = release.send(3);
        assert_eq!(
            shared.run(write(writes.clone(), gate.clone())).await.ok(),
            Some(30)
        );
    }

    /// A failed write fails its own caller only: the next caller writes again.
    #[tokio::test]
    async fn a_failed_write_is_not_shared() {
        let shared = SharedWrite::default();
        let failed = shared
            .run(|| async {
                Err(crate::Error::Etcd {
                    operation: "progress",
                    detail: "down".into(),
                })
            })
            .await;
        assert!(failed.is_err());
        assert_eq!(shared.run(|| async { Ok(7) }).await.ok(), Some(7));
        assert_eq!(shared.run(|| async { Ok(8) }).await.ok(), Some(8));
    }
}
