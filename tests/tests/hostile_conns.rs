//! Hostile connections (issue 21, items 3 and 4) against one in-process Sandbox with fake nodes:
//! - 2,000 open watches plus 600 slowloris clients (partial request heads, reconnecting when the
//!   server closes them) do not lock anyone out: every `/healthz` and `GET pods` probe on a new
//!   connection succeeds (their p99 is printed, not asserted), the server registers all 2,000
//!   watchers, and it closes every staller on the header deadline (and an idle keep-alive
//!   connection on the same deadline);
//! - 48 uploads that declare a 1 MB body and send 10 B/s (more than the 32 mutating seats) are
//!   answered 408 with a `Timeout` Status and the connection closed, long before the request
//!   timeout, while ordinary writers all succeed and every node's lease keeps being renewed
//!   (no node leaves Ready).
//!
//! The test raises its own file-descriptor limit (client and server sockets share this process).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const NODES: usize = 2;
const WATCHES: usize = 2_000;
const STALLERS: usize = 600;
const UPLOADERS: usize = 48;
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);

async fn sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .nodes(NODES)
        .configure(|c| {
            c.apiserver.header_read_timeout = HEADER_TIMEOUT;
            c.kubelet.lease_renew_interval = Duration::from_secs(1);
            c.kubelet.lease_duration = Duration::from_secs(4);
            c.controller_manager.node_monitor_grace_period = Duration::from_secs(5);
        })
        .start()
        .await
        .unwrap()
}

/// Reads a response head (up to the blank line) within `within`; `None` if the server closed the
/// connection first or the deadline passed.
async fn read_head(s: &mut TcpStream, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout_at(deadline, s.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return Some(String::from_utf8_lossy(&buf).into_owned());
        }
    }
}

/// One GET on a new connection: `(status, elapsed)`; the status is 0 if it failed.
async fn probe(addr: SocketAddr, path: &str) -> (u16, Duration) {
    let t0 = Instant::now();
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
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

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get((v.len() * 99 / 100).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// Opens a watch on raw TCP and returns the stream once the 200 head arrived.
async fn open_watch(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = "GET /api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=600 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    s.write_all(req.as_bytes()).await.unwrap();
    let head = read_head(&mut s, Duration::from_secs(30))
        .await
        .expect("a watch was not answered");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s
}

/// A slowloris client until `until`: sends a request head one byte every 250 ms and never ends
/// it; when the server closes the connection it reconnects. Returns how many times the server
/// closed it.
async fn staller(addr: SocketAddr, until: Instant) -> usize {
    let head = b"GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    let mut closed_by_server = 0;
    while Instant::now() < until {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut buf = [0u8; 512];
        let mut i = 0usize;
        loop {
            let byte = head.get(i).copied().unwrap_or(b'a');
            i += 1;
            if s.write_all(&[byte]).await.is_err() {
                closed_by_server += 1;
                break;
            }
            tokio::select! {
                r = s.read(&mut buf) => {
                    // EOF, a reset or a response (408): the server ended this staller.
                    let _ = r;
                    closed_by_server += 1;
                    break;
                }
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            if Instant::now() >= until {
                return closed_by_server;
            }
        }
    }
    closed_by_server
}

async fn registered_watchers(addr: SocketAddr) -> i64 {
    let url = format!("http://{addr}/metrics");
    let text = reqwest::get(url).await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("apiserver_registered_watchers "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

/// Opens `n` watches, `batch` at a time (the listen backlog is finite).
async fn open_watches(addr: SocketAddr, n: usize, batch: usize) -> Vec<TcpStream> {
    let mut all = Vec::with_capacity(n);
    while all.len() < n {
        let k = batch.min(n - all.len());
        let opened = futures::future::join_all((0..k).map(|_| open_watch(addr))).await;
        all.extend(opened);
    }
    all
}

async fn connections_attack(addr: SocketAddr) {
    let watches = open_watches(addr, WATCHES, 250).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while registered_watchers(addr).await < WATCHES as i64 {
        assert!(
            Instant::now() < deadline,
            "the server did not register every watch"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Stallers for four header deadlines: each is closed and comes back several times.
    let until = Instant::now() + HEADER_TIMEOUT * 4;
    let stallers: Vec<_> = (0..STALLERS)
        .map(|_| tokio::spawn(staller(addr, until)))
        .collect();
    let mut latencies = BTreeMap::<&str, Vec<Duration>>::new();
    let mut failures = Vec::new();
    while Instant::now() < until {
        for path in ["/healthz", "/api/v1/namespaces/default/pods"] {
            let (code, took) = probe(addr, path).await;
            if code != 200 {
                failures.push((path, code, took));
            }
            latencies.entry(path).or_default().push(took);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut closed = Vec::new();
    for s in stallers {
        closed.push(s.await.unwrap());
    }
    for (path, v) in &latencies {
        println!(
            "under {STALLERS} stallers and {WATCHES} watches: {path} on a new connection: {} probes, p99 {:?}",
            v.len(),
            p99(v.clone())
        );
    }
    assert!(failures.is_empty(), "probes failed: {failures:?}");
    assert!(latencies.values().all(|v| v.len() >= 10));
    let never_closed = closed.iter().filter(|n| **n == 0).count();
    assert_eq!(never_closed, 0, "stallers the server never closed");
    println!(
        "stallers closed by the header deadline: {} closes in {STALLERS} stallers",
        closed.iter().sum::<usize>()
    );

    // The watches are all still open.
    assert!(registered_watchers(addr).await >= WATCHES as i64);
    drop(watches);

    // An idle keep-alive connection is closed on the same deadline once its response is sent.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut s, Duration::from_secs(10)).await.unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(HEADER_TIMEOUT * 5, s.read_to_end(&mut rest)).await;
    assert!(
        closed.is_ok(),
        "an idle keep-alive connection was not closed"
    );
}

/// One slow upload: declares 1 MB, sends 10 bytes a second. Returns the response head and
/// whether the server closed the connection after it.
async fn slow_upload(addr: SocketAddr) -> (String, bool, Duration) {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"metadata\":";
    s.write_all(head.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    let mut buf = [0u8; 4096];
    let limit = t0 + Duration::from_secs(70);
    loop {
        tokio::select! {
            r = s.read(&mut buf) => match r {
                Ok(0) | Err(_) => return (String::from_utf8_lossy(&resp).into_owned(), true, t0.elapsed()),
                Ok(n) => resp.extend_from_slice(&buf[..n]),
            },
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                if s.write_all(b"          ").await.is_err() {
                    // The server may close while the response is still unread.
                    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut resp)).await;
                    return (String::from_utf8_lossy(&resp).into_owned(), true, t0.elapsed());
                }
            }
        }
        if Instant::now() > limit {
            return (
                String::from_utf8_lossy(&resp).into_owned(),
                false,
                t0.elapsed(),
            );
        }
    }
}

/// `node name -> (lease renewTime, Ready status)`.
async fn node_health(c: &reqwest::Client, url: &str) -> BTreeMap<String, (String, String)> {
    let leases: Value = c
        .get(format!(
            "{url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let nodes: Value = c
        .get(format!("{url}/api/v1/nodes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for n in nodes["items"].as_array().unwrap() {
        let name = n["metadata"]["name"].as_str().unwrap().to_string();
        let ready = n["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["status"].as_str())
            .unwrap_or("")
            .to_string();
        let renew = leases["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["metadata"]["name"] == name.as_str())
            .and_then(|l| l["spec"]["renewTime"].as_str())
            .unwrap_or("")
            .to_string();
        out.insert(name, (renew, ready));
    }
    out
}

async fn slow_uploads_attack(sandbox: &minik8s::Sandbox) {
    let addr = sandbox.addr();
    let url = sandbox.url().to_string();
    let c = reqwest::Client::new();
    // Every node is Ready with a lease before the attack.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let h = node_health(&c, &url).await;
        if h.len() == NODES
            && h.values()
                .all(|(renew, ready)| !renew.is_empty() && ready == "True")
        {
            break;
        }
        assert!(Instant::now() < deadline, "nodes not Ready: {h:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let started = Instant::now();
    let uploads: Vec<_> = (0..UPLOADERS)
        .map(|_| tokio::spawn(slow_upload(addr)))
        .collect();
    // Writers and the node watch run while the uploads trickle.
    let written = Arc::new(AtomicUsize::new(0));
    let mut renewals: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut writer_failures = Vec::new();
    let mut i = 0;
    let until = started + Duration::from_secs(8);
    while Instant::now() < until {
        let body = serde_json::json!({"metadata": {"name": format!("w-{i}")}, "data": {"k": "v"}});
        i += 1;
        let r = c
            .post(format!("{url}/api/v1/namespaces/default/configmaps"))
            .json(&body)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match r {
            Ok(r) if r.status() == 201 => {
                written.fetch_add(1, Ordering::Relaxed);
            }
            Ok(r) => writer_failures.push(r.status().to_string()),
            Err(e) => writer_failures.push(e.to_string()),
        }
        for (node, (renew, ready)) in node_health(&c, &url).await {
            assert_eq!(ready, "True", "{node} left Ready during slow uploads");
            renewals.entry(node).or_default().insert(renew);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        writer_failures.is_empty(),
        "writers failed: {writer_failures:?}"
    );
    assert!(written.load(Ordering::Relaxed) >= 10);
    for (node, seen) in &renewals {
        // Renewed every second: several distinct renewTimes during eight seconds of attack.
        assert!(
            seen.len() >= 3,
            "{node}'s lease was renewed {} times",
            seen.len()
        );
    }
    for u in uploads {
        let (head, closed, took) = u.await.unwrap();
        assert!(
            head.starts_with("HTTP/1.1 408"),
            "slow upload answered {head:?}"
        );
        assert!(head.contains("\"reason\":\"Timeout\""), "{head}");
        assert!(head.contains("not received in time"), "{head}");
        assert!(closed, "the connection of a cut upload stayed open");
        // Cut by the rate rule, well before the 60 s request timeout.
        assert!(
            took < Duration::from_secs(30),
            "a slow upload lasted {took:?}"
        );
    }
    println!(
        "{UPLOADERS} slow uploads cut; {} writes succeeded meanwhile; lease renewals seen: {:?}",
        written.load(Ordering::Relaxed),
        renewals.values().map(BTreeSet::len).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stallers_watches_and_slow_uploads_lock_nobody_out() {
    let limit = apiserver::fdlimit::raise();
    assert!(
        limit as usize > 2 * (WATCHES + STALLERS) + 512,
        "this test needs about {} file descriptors; the hard limit allows {limit}",
        2 * (WATCHES + STALLERS) + 512
    );
    let sandbox = sandbox().await;
    connections_attack(sandbox.addr()).await;
    slow_uploads_attack(&sandbox).await;
    sandbox.stop().await;
}
