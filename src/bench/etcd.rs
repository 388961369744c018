//! `minik8s bench creates --etcd-servers URL[,URL…]`: durable creates/s over HTTP through an
//! apiserver on etcd, at 16 and 64 writers, beside etcd's own put rate (1 KiB values, same writer
//! counts, same run) through its client, so the apiserver's overhead over raw etcd puts is read off
//! one run. Each load is bounded by `--seconds` and by count; everything is on loopback.
//! `minik8s bench scale --etcd-servers …` runs `bench scale` on etcd ([`plane_config`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Error;
use crate::control_plane::{ControlPlane, ControlPlaneConfig, EtcdStorage, Storage};

/// Writer counts measured.
const WRITERS: [usize; 2] = [16, 64];

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

pub(crate) async fn creates(endpoints: &[String], load: Duration) -> Result<(), Error> {
    let config = ControlPlaneConfig {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        storage: storage(endpoints),
        nodes: 0,
        controllers: false,
        kubeconfig: None,
        ..ControlPlaneConfig::default()
    };
    let plane = ControlPlane::start(config).await?;
    let run = format!("{}", std::process::id());
    let url = format!("{}/api/v1/namespaces/default/configmaps", plane.url());
    let payload = "x".repeat(1024);
    for writers in WRITERS {
        let (n, took) = store::etcd::server::put_rate(
            endpoints,
            &format!("/bench/{run}/{writers}/"),
            writers,
            load,
            1024,
        )
        .await
        .map_err(|e| Error::Failed(e.to_string()))?;
        let raw = n as f64 / took.as_secs_f64();
        println!("etcd put baseline: {writers:>2} writers, 1 KiB values: {raw:.0} puts/s ({n} in {:.1} s)", took.as_secs_f64());
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(writers)
            .build()?;
        let done = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let shed = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let deadline = start + load;
        let mut tasks = Vec::new();
        for w in 0..writers {
            let (http, url, payload, done, errors, shed, run) = (
                http.clone(),
                url.clone(),
                payload.clone(),
                done.clone(),
                errors.clone(),
                shed.clone(),
                run.clone(),
            );
            tasks.push(tokio::spawn(async move {
                for i in 0..1_000_000u64 {
                    if Instant::now() > deadline {
                        break;
                    }
                    let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("e{run}-{writers}-{w}-{i}")},
                        "data": {"payload": payload}});
                    // A 429 (the in-flight cap shedding load) is retried after a short pause, as
                    // `bench creates` on sled does; anything else but 201 is an error.
                    for _attempt in 0..100 {
                        match http.post(&url).json(&body).send().await {
                            Ok(r) if r.status().as_u16() == 201 => {
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(r) if r.status().as_u16() == 429 => {
                                shed.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(Duration::from_millis(10)).await;
                                continue;
                            }
                            _ => {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        break;
                    }
                }
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
        let secs = start.elapsed().as_secs_f64();
        let n = done.load(Ordering::Relaxed);
        let rate = n as f64 / secs;
        println!(
            "creates on etcd: {writers:>2} writers, 1 KiB ConfigMaps over HTTP: {rate:.0} creates/s ({n} in {secs:.1} s, {} errors, {} retried 429s); overhead over raw puts {:.0} %",
            errors.load(Ordering::Relaxed),
            shed.load(Ordering::Relaxed),
            if rate > 0.0 { (raw / rate - 1.0) * 100.0 } else { f64::INFINITY }
        );
    }
    plane.shutdown().await;
    Ok(())
}
