//! `minik8s bench creates --etcd-servers URL[,URL…]` (or `--etcd-members N`: N members started on
//! loopback for the run): durable creates/s over HTTP through an apiserver on etcd, at 16 and 64
//! writers, beside etcd's own rates in the same run (`etcd_baseline`: plain puts, and the store's
//! create transaction with a watch open) and beside the same creates on sled, so the apiserver's
//! overhead is read off one run. With members it started, it also prints the CPU time per write of
//! this process (apiserver and HTTP clients) and of the etcd members: on a small machine the two
//! share the cores, which is most of the gap to raw etcd. Each load is bounded by `--seconds` and
//! by count; everything is on loopback.
//! `minik8s bench scale --etcd-servers …` / `--etcd-members N` runs `bench scale` on etcd
//! ([`plane_config`]).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::etcd_baseline::{self, Shape};
use super::Error;
use crate::control_plane::{ControlPlane, ControlPlaneConfig, EtcdStorage, Storage};

/// Writer counts measured.
const WRITERS: [usize; 2] = [16, 64];

/// The etcd a benchmark runs on: given URLs, or members started for the run (stopped on drop).
pub(crate) struct Target {
    pub endpoints: Vec<String>,
    /// Processes of the members started here (for their CPU time).
    pids: Vec<u32>,
    _cluster: Option<store::etcd::server::EtcdCluster>,
}

impl Target {
    /// `servers` if any, else `members` members started on loopback.
    pub(crate) async fn new(servers: &[String], members: usize) -> Result<Self, Error> {
        if !servers.is_empty() {
            return Ok(Self {
                endpoints: servers.to_vec(),
                pids: Vec::new(),
                _cluster: None,
            });
        }
        let cluster = store::etcd::server::EtcdCluster::start(members)
            .await
            .map_err(|e| Error::Failed(e.to_string()))?;
        println!(
            "etcd: {members} member(s) started on loopback ({}), data in {}",
            cluster.client_urls().join(","),
            cluster.root().display()
        );
        Ok(Self {
            endpoints: cluster.client_urls(),
            pids: cluster.members().iter().filter_map(|m| m.pid()).collect(),
            _cluster: Some(cluster),
        })
    }

    fn describe(&self) -> String {
        match self.pids.len() {
            0 => format!("etcd at {}", self.endpoints.join(",")),
            n => format!("etcd, {n} member(s)"),
        }
    }
}

fn storage(endpoints: &[String]) -> Storage {
    Storage::Etcd(EtcdStorage {
        etcd: store::EtcdConfig {
            endpoints: endpoints.to_vec(),
            ..store::EtcdConfig::default()
        },
        compaction_interval: crate::control_plane::DEFAULT_ETCD_COMPACTION_INTERVAL,
        credentials_dir: None,
    })
}

/// `bench scale`'s control plane with its objects in etcd.
pub(crate) fn plane_config(endpoints: &[String], nodes: usize) -> ControlPlaneConfig {
    ControlPlaneConfig {
        storage: storage(endpoints),
        ..super::plane::config(nodes, None)
    }
}

/// CPU time used during one phase, by this process and by the members started here.
struct Cpu {
    own: Option<Duration>,
    etcd: Option<Duration>,
}

impl Cpu {
    fn start(target: &Target) -> Self {
        let (own, etcd) = etcd_baseline::cpu_times(&target.pids);
        Cpu { own, etcd }
    }

    /// CPU µs per write since `start`, of this process and of etcd.
    fn per_write(&self, target: &Target, writes: u64) -> String {
        let (own, etcd) = etcd_baseline::cpu_times(&target.pids);
        let per = |now: Option<Duration>, then: Option<Duration>| match (now, then) {
            (Some(now), Some(then)) if writes > 0 => {
                format!(
                    "{:.0} µs",
                    now.saturating_sub(then).as_secs_f64() * 1e6 / writes as f64
                )
            }
            _ => "?".to_owned(),
        };
        format!(
            "CPU per write: this process {}, etcd {}",
            per(own, self.own),
            per(etcd, self.etcd)
        )
    }
}

pub(crate) async fn creates(target: &Target, load: Duration) -> Result<(), Error> {
    let config = ControlPlaneConfig {
        storage: storage(&target.endpoints),
        ..super::in_memory_config()
    };
    let plane = ControlPlane::start(config).await?;
    let run = format!("{}", std::process::id());
    let url = format!("{}/api/v1/namespaces/default/configmaps", plane.url());
    println!("{}:", target.describe());
    for writers in WRITERS {
        let mut rates = Vec::new();
        for (shape, what) in [
            (Shape::Put, "etcd puts"),
            (Shape::PutWatched, "etcd puts, watched"),
            (Shape::CreateTxn, "etcd create transactions, watched"),
        ] {
            let cpu = Cpu::start(target);
            let prefix = format!("/bench/{run}/{shape:?}/{writers}/");
            let (n, took) =
                etcd_baseline::rate(&target.endpoints, shape, &prefix, writers, load, 1024).await?;
            let rate = n as f64 / took.as_secs_f64();
            println!(
                "  {writers:>2} writers, {what}: {rate:.0}/s ({n} in {:.1} s; {})",
                took.as_secs_f64(),
                cpu.per_write(target, n)
            );
            rates.push(rate);
        }
        let cpu = Cpu::start(target);
        let (n, secs, failed) = http_creates(&url, &run, writers, load).await?;
        let rate = n as f64 / secs;
        let overhead = |raw: f64| {
            if rate > 0.0 {
                format!("{:.0} %", (raw / rate - 1.0) * 100.0)
            } else {
                "∞".to_owned()
            }
        };
        println!(
            "  {writers:>2} writers, minik8s creates over HTTP: {rate:.0}/s ({n} in {secs:.1} s, {failed}; {}); overhead over puts {}, over watched puts {}, over create transactions {}",
            cpu.per_write(target, n),
            overhead(rates[0]),
            overhead(rates[1]),
            overhead(rates[2]),
        );
    }
    plane.shutdown().await;
    println!("the same creates on sled (on disk, group commit):");
    super::creates::creates(&WRITERS, load, false, None, None).await
}

/// `writers` closed-loop writers creating 1 KiB ConfigMaps at `url` for `load`: creates, seconds
/// and what failed.
async fn http_creates(
    url: &str,
    run: &str,
    writers: usize,
    load: Duration,
) -> Result<(u64, f64, String), Error> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(writers)
        .build()?;
    let run = run.to_owned();
    let (counts, secs) = super::creates::closed_loop(&http, url, writers, load, move |w, i| {
        format!("e{run}-{writers}-{w}-{i}")
    })
    .await;
    Ok((
        counts.created.load(Ordering::Relaxed),
        secs,
        counts.failures(),
    ))
}
