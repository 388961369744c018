//! etcd's own rates beside `minik8s bench creates --etcd-servers`: what the apiserver's etcd path is
//! measured against, in the same run and with the same writer counts and 1 KiB values.
//!
//! Three baselines, each through etcd's gRPC client in this process, one connection shared by
//! every writer (as the store shares one):
//! - **puts**: plain `put`s of fresh keys, etcd's cheapest write;
//! - **watched puts**: the same puts with a `prev_kv` watch of the prefix open and read, as the
//!   apiserver's watch cache keeps one: the least any apiserver on etcd pays per write (every
//!   write is also read back for the watch, with its previous value);
//! - **create transactions**: exactly the store's create (`txn(create_revision(key) == 0) put else
//!   get`, as kube-apiserver's etcd3 store) with a `prev_kv` watch of the prefix open and read, as
//!   the apiserver's watch cache keeps one; etcd before 3.5 applies a transaction with a compare at
//!   a much higher cost than a put, and every write is also sent to the watch.
//!
//! Every loop is bounded by a count and by the deadline; each writer writes its own keys.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, WatchOptions};

use super::Error;

/// Which write a baseline measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Put,
    PutWatched,
    CreateTxn,
}

impl Shape {
    /// Whether the run keeps the apiserver's watch of the prefix open.
    fn watched(self) -> bool {
        matches!(self, Shape::PutWatched | Shape::CreateTxn)
    }
}

fn etcd_error(e: etcd_client::Error) -> Error {
    Error::Failed(format!("etcd: {e}"))
}

/// `writers` concurrent writers writing `value_len`-byte values to fresh keys under `prefix` as
/// `shape` says, for `load`. Returns the writes acknowledged and the time taken.
pub(crate) async fn rate(
    endpoints: &[String],
    shape: Shape,
    prefix: &str,
    writers: usize,
    load: Duration,
    value_len: usize,
) -> Result<(u64, Duration), Error> {
    let client = Client::connect(endpoints, None).await.map_err(etcd_error)?;
    // The watch the apiserver's cache would have open on these keys, read until the run ends.
    let watch = if shape.watched() {
        let options = WatchOptions::new().with_prefix().with_prev_key();
        let mut stream = client
            .watch_client()
            .watch(prefix, Some(options))
            .await
            .map_err(etcd_error)?;
        Some(tokio::spawn(async move {
            let mut events = 0u64;
            while let Ok(Some(response)) = stream.message().await {
                events += response.events().len() as u64;
            }
            events
        }))
    } else {
        None
    };
    let value: Arc<[u8]> = vec![b'x'; value_len].into();
    let (kv, prefix) = (client.kv_client(), prefix.to_owned());
    let op = move |w: usize, i: u64| {
        let (mut kv, value) = (kv.clone(), value.clone());
        let key = format!("{prefix}{w}-{i}");
        async move {
            match shape {
                Shape::Put | Shape::PutWatched => kv.put(key, value.to_vec(), None).await.is_ok(),
                Shape::CreateTxn => {
                    let txn = Txn::new()
                        .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                        .and_then([TxnOp::put(key.as_str(), value.to_vec(), None)])
                        .or_else([TxnOp::get(key.as_str(), None)]);
                    kv.txn(txn).await.is_ok_and(|r| r.succeeded())
                }
            }
        }
    };
    let (total, _, took) = super::closed_loop(writers, load, op).await;

    // Dropping the client ends the watch stream, and with it the reading task.
    drop(client);
    if let Some(watch) = watch {
        watch.abort();
    }
    Ok((total, took))
}

/// CPU time (user + system) a process has used so far, from `/proc/<pid>/stat`; `None` where
/// there is no such file (not Linux, or the process is gone).
pub(crate) fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (in parentheses, which may hold spaces): utime is the 12th
    // and stime the 13th, in clock ticks of USER_HZ, 100 on every Linux architecture we run on.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// The CPU time of this process and of `pids` (etcd members) together, if known for all.
pub(crate) fn cpu_times(pids: &[u32]) -> (Option<Duration>, Option<Duration>) {
    let own = cpu_time(None);
    let etcd = pids
        .iter()
        .map(|pid| cpu_time(Some(*pid)))
        .sum::<Option<Duration>>()
        .filter(|_| !pids.is_empty());
    (own, etcd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_for_live_processes_only() {
        assert!(cpu_time(None).is_some());
        assert!(cpu_time(Some(std::process::id())).is_some());
        assert_eq!(cpu_time(Some(u32::MAX)), None);
        assert_eq!(cpu_times(&[]).1, None);
    }
}
