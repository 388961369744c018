//! `minik8s bench memory`: what `pods` pods cost in memory when the apiserver (its watch cache),
//! the controller manager's informers and the fake kubelets' informer all hold them (issue 17,
//! item 7: 100,000 pods in at most 1.5 GiB RSS).
//!
//! The control plane is the one `minik8s up` starts (sled on disk, controllers on, `nodes` fake
//! kubelets), all in this process. One ReplicationController of `pods` replicas makes the pods, as
//! a user's would. The run waits until the RC reports every replica ready (the controller
//! manager's pod informer has them all Running and Ready) and the kubelets' shared informer
//! counts every pod Running, then reads the process' memory: `VmRSS` and `VmHWM` from
//! `/proc/self/status`, and the allocator's own figures (bytes live in objects, bytes in pages the
//! allocator holds). It reads them again after the control plane has been idle for [`IDLE`], long
//! enough for jemalloc to return its dirty pages (its default decay is 10 s).
//!
//! `--watch-history N` sets how many events the watch cache keeps per resource (default 10,240):
//! the ring holds a superseded object per event, which at a few thousand pods outweighs the pods
//! themselves; a small ring shows what each pod costs at any scale.
//!
//! Progress is polled once a second with one GET of the RC and a read of the kubelets' counters:
//! no watch or LIST of the benchmark's own adds to what is measured. Every wait is bounded by
//! `deadline`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ReplicationController;

use super::{ms, Error};

/// How long the control plane is left idle before the second reading.
const IDLE: Duration = Duration::from_secs(12);

/// Pods a fake node takes (its `status.capacity.pods`, as a kubelet's default `maxPods`).
const PODS_PER_NODE: usize = 110;

/// The fake nodes `pods` pods need at [`PODS_PER_NODE`] each, or `nodes` if that is more.
pub(super) fn nodes_for(pods: usize, nodes: usize) -> usize {
    nodes.max(pods.div_ceil(PODS_PER_NODE))
}

/// jemalloc's own figures (`stats.*`), read when the binary is built with `--features
/// heap-stats` (jemalloc then keeps statistics).
#[derive(Debug, Clone, Copy, Default)]
struct HeapStats {
    /// Bytes in live allocations.
    allocated: u64,
    /// Bytes in pages holding live allocations (`allocated` plus their fragmentation).
    active: u64,
    /// Bytes of the allocator's pages resident in memory (data and its own metadata).
    resident: u64,
    /// Bytes mapped but returned to the system (not resident).
    retained: u64,
}

impl HeapStats {
    #[cfg(feature = "heap-stats")]
    fn read() -> Option<HeapStats> {
        use tikv_jemalloc_ctl::{epoch, stats};
        // The statistics are a snapshot taken when the epoch advances.
        epoch::advance().ok()?;
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        Some(HeapStats {
            allocated: n(stats::allocated::read().ok()?),
            active: n(stats::active::read().ok()?),
            resident: n(stats::resident::read().ok()?),
            retained: n(stats::retained::read().ok()?),
        })
    }

    #[cfg(not(feature = "heap-stats"))]
    fn read() -> Option<HeapStats> {
        None
    }
}

/// The process' memory at one instant.
#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    /// `VmRSS`: resident now.
    rss: u64,
    /// `VmHWM`: the most ever resident.
    hwm: u64,
    /// The allocator's figures, where it is jemalloc.
    heap: Option<HeapStats>,
}

impl Memory {
    fn read() -> Memory {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(0, |k| k * 1024)
        };
        Memory {
            rss: kib("VmRSS:"),
            hwm: kib("VmHWM:"),
            heap: HeapStats::read(),
        }
    }

    fn line(&self) -> String {
        let mut s = format!("RSS {} (peak {})", mib(self.rss), mib(self.hwm));
        if let Some(h) = &self.heap {
            s.push_str(&format!(
                "; heap: {} allocated, {} active, {} resident, {} retained",
                mib(h.allocated),
                mib(h.active),
                mib(h.resident),
                mib(h.retained)
            ));
        }
        s
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}

fn per_pod(a: u64, b: u64, pods: usize) -> String {
    format!(
        "{:.1} KiB",
        b.saturating_sub(a) as f64 / 1024.0 / pods.max(1) as f64
    )
}

/// The RC's `status.readyReplicas`.
fn ready_replicas(rc: &ReplicationController) -> usize {
    rc.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .map_or(0, |r| usize::try_from(r).unwrap_or(0))
}

/// Runs the benchmark: `pods` pods on `nodes` fake nodes, on disk (`minik8s up`'s store) unless
/// `in_memory`; the watch cache keeps `watch_history` events per resource if given.
pub async fn memory(
    pods: usize,
    nodes: usize,
    in_memory: bool,
    watch_history: Option<usize>,
    deadline: Duration,
) -> Result<(), Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::Failed(e.to_string()))?;
    let storage = if in_memory {
        "in memory"
    } else {
        "sled on disk"
    };
    let mut config = super::plane::config(nodes, (!in_memory).then(|| dir.path()));
    if let Some(history) = watch_history {
        config.apiserver.watch_history = history;
    }
    let history = config.apiserver.watch_history;
    let start = Memory::read();
    let (plane, took) = super::plane::start_ready(config, deadline).await?;
    let client = plane.client();
    let Some(kubelets) = plane.kubelets() else {
        return Err(Error::Failed(
            "the control plane started no kubelets".into(),
        ));
    };
    let empty = Memory::read();
    println!(
        "memory: control plane with {nodes} Ready nodes ({storage}, watch cache history {history}) in {}; before start {}; with no pods {}",
        ms(took),
        mib(start.rss),
        empty.line()
    );

    let name = "web";
    let mut body = super::scale::rc(name);
    body["spec"]["replicas"] = serde_json::json!(pods);
    let rc: ReplicationController =
        serde_json::from_value(body).map_err(|e| Error::Failed(e.to_string()))?;
    let rcs = client.api::<ReplicationController>(Some("default"));
    rcs.create(&rc)
        .await
        .map_err(|e| Error::Failed(format!("create rc: {e}")))?;

    let t0 = Instant::now();
    let until = t0 + deadline;
    let mut next_report = t0 + Duration::from_secs(10);
    let (ready, running) = loop {
        let ready = rcs
            .get(name)
            .await
            .map(|rc| ready_replicas(&rc))
            .map_err(|e| Error::Failed(format!("get rc: {e}")))?;
        let running = usize::try_from(kubelets.metrics().pods_running).unwrap_or(0);
        if (ready >= pods && running >= pods) || Instant::now() >= until {
            break (ready, running);
        }
        if Instant::now() >= next_report {
            println!(
                "memory: {:.0} s: {ready} ready (controller manager), {running} running (kubelets), {}",
                t0.elapsed().as_secs_f64(),
                mib(Memory::read().rss)
            );
            next_report += Duration::from_secs(10);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    if ready < pods || running < pods {
        plane.shutdown().await;
        return Err(Error::Failed(format!(
            "only {ready} ready (RC) and {running} running (kubelets) of {pods} after {}",
            ms(t0.elapsed())
        )));
    }
    let loaded = Memory::read();
    println!(
        "memory: {pods} pods Running and Ready in every informer after {}: {}",
        ms(t0.elapsed()),
        loaded.line()
    );
    tokio::time::sleep(IDLE).await;
    let idle = Memory::read();
    println!("memory: after {} s idle: {}", IDLE.as_secs(), idle.line());
    #[cfg(feature = "heap-prof")]
    dump_heap_profile(pods);
    // The kubelets' events are dropped when their recorders' queues are full, as upstream's are:
    // how many were stored differs from run to run, and they are held in the store.
    match stored_events(plane.url()).await {
        Ok(events) => println!("memory: {events} Events stored"),
        Err(e) => println!("memory: Events stored: unknown ({e})"),
    }
    let live = |m: &Memory| m.heap.map_or(m.rss, |h| h.allocated);
    println!(
        "memory: per pod: RSS {} (idle), heap allocated {}",
        per_pod(empty.rss, idle.rss, pods),
        per_pod(live(&empty), live(&idle), pods)
    );
    let _ = rcs.delete(name, &client::DeleteParams::default()).await;
    plane.shutdown().await;
    Ok(())
}

/// Writes jemalloc's heap profile to `minik8s-memory-<pods>.heap` in the working directory, when
/// profiling is on (`_RJEM_MALLOC_CONF=prof:true`).
#[cfg(feature = "heap-prof")]
fn dump_heap_profile(pods: usize) {
    // `prof.dump` takes the file name as a C string that outlives the call: leaked, once a run.
    let path: &'static str = Box::leak(format!("minik8s-memory-{pods}.heap\0").into_boxed_str());
    match tikv_jemalloc_ctl::raw::write_str(b"prof.dump\0", path.as_bytes()) {
        Ok(()) => println!("memory: heap profile in {}", path.trim_end_matches('\0')),
        Err(e) => println!("memory: no heap profile ({e}; is _RJEM_MALLOC_CONF=prof:true set?)"),
    }
}

/// How many Events the store holds: one of them listed, and the `remainingItemCount`.
async fn stored_events(base: &str) -> Result<u64, Error> {
    let failed = |e: reqwest::Error| Error::Failed(e.to_string());
    let list: serde_json::Value = reqwest::Client::new()
        .get(format!("{base}/api/v1/events?limit=1"))
        .send()
        .await
        .map_err(failed)?
        .json()
        .await
        .map_err(failed)?;
    let listed = list["items"].as_array().map_or(0, Vec::len) as u64;
    let remaining = list["metadata"]["remainingItemCount"].as_u64().unwrap_or(0);
    Ok(listed + remaining)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enough_nodes_for_the_pods() {
        assert_eq!(nodes_for(100_000, 100), 910);
        assert_eq!(nodes_for(2_000, 100), 100);
        assert_eq!(nodes_for(110, 1), 1);
        assert_eq!(nodes_for(111, 1), 2);
    }
}
