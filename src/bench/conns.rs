//! `minik8s bench conns`: what hostile connections cost everyone else (issue 21, items 3 and 4).
//! One in-memory apiserver; a probe opens a new connection for each `GET /healthz` and
//! `GET /api/v1/namespaces/default/pods`, one after the other, in three phases of `seconds` each:
//!
//! 1. quiet: the probe alone;
//! 2. `watches` open watches plus `stallers` slowloris clients (a request head trickled one byte
//!    every 250 ms, reconnecting whenever the server closes them);
//! 3. `uploaders` slow uploads (1 MB declared, 10 B/s, reconnecting when cut) while the probe
//!    also times ConfigMap creates.
//!
//! Prints p50/p99 per phase and request, failed probes, and how often the server cut the stallers
//! and the uploads. Raises this process's fd limit first. Every loop is bounded by the phase's
//! deadline; loopback only.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::{in_memory_config, ms, percentile, Error};
use crate::control_plane::ControlPlane;

/// One request on a new connection: its status (0 when it failed) and latency.
async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Duration) {
    let t0 = Instant::now();
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).await.ok()?;
        let text = String::from_utf8_lossy(&resp).into_owned();
        text.split_whitespace().nth(1)?.parse::<u16>().ok()
    };
    let code = tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(0);
    (code, t0.elapsed())
}

/// Probes until `until`; with `writes`, a ConfigMap create joins each round.
async fn probe_phase(addr: SocketAddr, phase: &str, until: Instant, writes: bool) {
    let mut series: Vec<(&str, Vec<Duration>, usize)> =
        vec![("healthz", vec![], 0), ("pods", vec![], 0)];
    if writes {
        series.push(("create", vec![], 0));
    }
    let mut i = 0usize;
    while Instant::now() < until {
        for (name, times, failed) in series.iter_mut() {
            let (code, took) = match *name {
                "healthz" => request(addr, "GET", "/healthz", "").await,
                "pods" => request(addr, "GET", "/api/v1/namespaces/default/pods", "").await,
                _ => {
                    i += 1;
                    let body = format!(r#"{{"metadata":{{"name":"bench-conns-{i}"}}}}"#);
                    request(addr, "POST", "/api/v1/namespaces/default/configmaps", &body).await
                }
            };
            if !(200..300).contains(&code) {
                *failed += 1;
            }
            times.push(took);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (name, mut times, failed) in series {
        times.sort();
        println!(
            "conns {phase}: {name} on a new connection: p50 {} p99 {} ({} requests, {failed} failed)",
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99)),
            times.len()
        );
    }
}

/// A slowloris client until `stop`; counts the server's closes in `closes`.
async fn staller(addr: SocketAddr, stop: CancellationToken, closes: Arc<AtomicUsize>) {
    let head = b"GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    while !stop.is_cancelled() {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut buf = [0u8; 512];
        for i in 0.. {
            let byte = head.get(i).copied().unwrap_or(b'a');
            if s.write_all(&[byte]).await.is_err() {
                closes.fetch_add(1, Ordering::Relaxed);
                break;
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = s.read(&mut buf) => {
                    closes.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }
}

/// A slow upload (1 MB declared, 10 B/s) until `stop`, reconnecting when cut.
async fn uploader(addr: SocketAddr, stop: CancellationToken, cuts: Arc<AtomicUsize>) {
    let head = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n";
    while !stop.is_cancelled() {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if s.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        let mut buf = [0u8; 1024];
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                r = s.read(&mut buf) => {
                    if matches!(r, Ok(0) | Err(_)) {
                        cuts.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    if s.write_all(b"          ").await.is_err() {
                        cuts.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
        }
    }
}

/// Opens one watch and returns its stream once answered 200.
async fn open_watch(addr: SocketAddr) -> Result<TcpStream, Error> {
    let failed = |e: String| Error::Failed(format!("opening a watch: {e}"));
    let mut s = TcpStream::connect(addr)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let req = "GET /api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=3600 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| failed(e.to_string()))?;
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(30), s.read_exact(&mut head))
        .await
        .map_err(|_| failed("no answer within 30 s".into()))?
        .map_err(|e| failed(e.to_string()))?;
    if &head[..] != b"HTTP/1.1 200" {
        return Err(failed(String::from_utf8_lossy(&head).into_owned()));
    }
    Ok(s)
}

/// This process's resident set size (Linux `/proc/self/status`), if known.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The benchmark.
pub async fn conns(
    watches: usize,
    stallers: usize,
    uploaders: usize,
    seconds: Duration,
) -> Result<(), Error> {
    let fd_limit = apiserver::fdlimit::raise();
    println!("conns: fd limit {fd_limit}");
    let plane = ControlPlane::start(in_memory_config()).await?;
    let addr = plane.addr();

    probe_phase(addr, "quiet", Instant::now() + seconds, false).await;

    let rss_before = resident_bytes();
    let mut open = Vec::with_capacity(watches);
    while open.len() < watches {
        let batch = 250.min(watches - open.len());
        for w in futures::future::join_all((0..batch).map(|_| open_watch(addr))).await {
            open.push(w?);
        }
    }
    if let (Some(before), Some(after)) = (rss_before, resident_bytes()) {
        println!(
            "conns: resident memory {} MiB before and {} MiB after opening {watches} watches ({} KiB a watch, both ends in this process)",
            before >> 20,
            after >> 20,
            after.saturating_sub(before) / 1024 / watches.max(1) as u64
        );
    }
    let stop = CancellationToken::new();
    let closes = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..stallers)
        .map(|_| tokio::spawn(staller(addr, stop.clone(), closes.clone())))
        .collect();
    let phase = format!("{watches} watches + {stallers} stallers");
    probe_phase(addr, &phase, Instant::now() + seconds, false).await;
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    println!(
        "conns: the header deadline ({:?}) closed stallers {} times",
        apiserver::Config::default().header_read_timeout,
        closes.load(Ordering::Relaxed)
    );
    drop(open);

    let stop = CancellationToken::new();
    let cuts = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..uploaders)
        .map(|_| tokio::spawn(uploader(addr, stop.clone(), cuts.clone())))
        .collect();
    let phase = format!("{uploaders} slow uploads");
    probe_phase(addr, &phase, Instant::now() + seconds, true).await;
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    println!(
        "conns: slow uploads cut {} times",
        cuts.load(Ordering::Relaxed)
    );
    plane.shutdown().await;
    Ok(())
}
