//! T6 (body and object size limits), T8 (slowloris and timeouts) and T9 (overload: priority
//! and fairness queues, then sheds) of spec/reliability.md, sized for CI. All traffic is to
//! 127.0.0.1 and every loop is bounded in count and time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LIMIT: usize = 3 * 1024 * 1024;

async fn healthy(url: &str) -> bool {
    match reqwest::Client::new()
        .get(format!("{url}/healthz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
    {
        Ok(r) => r.status() == 200,
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_body_and_object_limits() {
    let server = common::start().await;
    let url = server.url();
    let c = reqwest::Client::new();
    let cms = format!("{url}/api/v1/namespaces/default/configmaps");
    let r = c
        .post(&cms)
        .json(&json!({"metadata":{"name":"c"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);

    // Over the limit: 413 for every verb with a body.
    let big = vec![b' '; LIMIT + 1];
    for (method, uri, ct) in [
        ("POST", cms.clone(), "application/json"),
        ("PUT", format!("{cms}/c"), "application/json"),
        ("PATCH", format!("{cms}/c"), "application/merge-patch+json"),
        ("DELETE", format!("{cms}/c"), "application/json"),
    ] {
        let r = c
            .request(method.parse().unwrap(), &uri)
            .header("content-type", ct)
            .body(big.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 413, "{method} {uri}");
        let s: Value = r.json().await.unwrap();
        assert_eq!(s["kind"], "Status");
    }
    // Just under the limit and valid: accepted.
    let mut under = serde_json::to_vec(&json!({"metadata":{"name":"under"}})).unwrap();
    under.extend(std::iter::repeat_n(b' ', LIMIT - under.len() - 1));
    let r = c
        .post(&cms)
        .header("content-type", "application/json")
        .body(under)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // Deep nesting just under the limit: 400, never a crash.
    let deep = "[".repeat(1_500_000);
    let r = c
        .post(&cms)
        .header("content-type", "application/json")
        .body(deep.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    for ct in [
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ] {
        let r = c
            .patch(format!("{cms}/c?fieldManager=t"))
            .header("content-type", ct)
            .body(deep.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{ct}");
    }
    // A YAML alias bomb just under the limit: 400; over: 413.
    let mut bomb = String::from("metadata: {name: bomb}\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let mut prev = "a".to_string();
    for i in 0..9 {
        let name = format!("b{i}");
        bomb.push_str(&format!("{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
        prev = name;
    }
    let r = c
        .post(&cms)
        .header("content-type", "application/yaml")
        .body(bomb.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "{}", r.text().await.unwrap());
    let mut over = bomb.into_bytes();
    over.extend(std::iter::repeat_n(b'#', LIMIT));
    let r = c
        .post(&cms)
        .header("content-type", "application/yaml")
        .body(over)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    // Metadata limits: 422 Invalid.
    let r = c
        .post(&cms)
        .json(&json!({"metadata":{"name":"ann","annotations":{"a":"x".repeat(256 * 1024 + 1)}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    for name in ["x".repeat(254), "Not_A_Name".to_string()] {
        let r = c
            .post(&cms)
            .json(&json!({"metadata":{"name":name}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{name}");
    }
    // An object the store cannot hold (over 1.5 MiB encoded): refused, never a 5xx.
    let r = c
        .post(&cms)
        .json(&json!({"metadata":{"name":"huge"},"data":{"a":"x".repeat(2 * 1024 * 1024)}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error(), "{}", r.status());
    assert!(healthy(&url).await);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t8_slowloris_slow_bodies_and_timeouts() {
    let header_timeout = Duration::from_secs(1);
    let request_timeout = Duration::from_secs(2);
    let server = common::start_with(apiserver::Config {
        header_read_timeout: header_timeout,
        request_timeout,
        // 656 seats: global-default (20 of 245 shares) has 54, room for the 50 slow bodies.
        max_mutating_inflight: 256,
        future_rv_wait: Duration::from_secs(30),
        ..Default::default()
    })
    .await;
    let url = server.url();
    let addr = server.addr;

    // 200 connections trickling request headers at one byte per second.
    let started = Instant::now();
    let mut stallers = Vec::new();
    for _ in 0..200 {
        stallers.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n";
            let mut buf = [0u8; 256];
            for b in head.iter() {
                if s.write_all(&[*b]).await.is_err() {
                    return Instant::now();
                }
                tokio::select! {
                    r = s.read(&mut buf) => {
                        if matches!(r, Ok(0) | Err(_)) { return Instant::now(); }
                        // A response (408) also ends the staller: read to the close.
                        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut Vec::new())).await;
                        return Instant::now();
                    }
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
            Instant::now() + Duration::from_secs(3600)
        }));
    }
    // Normal requests keep working during the attack.
    let c = reqwest::Client::new();
    for _ in 0..20 {
        let r = c
            .get(format!("{url}/api/v1/namespaces"))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    for h in stallers {
        let closed = h.await.unwrap();
        assert!(
            closed.duration_since(started) < header_timeout + Duration::from_secs(3),
            "a header staller survived {:?}",
            closed.duration_since(started)
        );
    }

    // 50 connections declaring a 1 MB body and sending 10 bytes per second: 408 or 504 within
    // the request timeout plus a second.
    let mut slow = Vec::new();
    for _ in 0..50 {
        slow.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let head = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n";
            s.write_all(head.as_bytes()).await.unwrap();
            let t0 = Instant::now();
            let mut resp = Vec::new();
            let mut buf = [0u8; 1024];
            loop {
                tokio::select! {
                    r = s.read(&mut buf) => match r {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            resp.extend_from_slice(&buf[..n]);
                            if resp.windows(4).any(|w| w == b"\r\n\r\n") { break; }
                        }
                    },
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {
                        if s.write_all(b"          ").await.is_err() { break; }
                    }
                }
                if t0.elapsed() > Duration::from_secs(15) {
                    break;
                }
            }
            (t0.elapsed(), String::from_utf8_lossy(&resp).into_owned())
        }));
    }
    for h in slow {
        let (took, resp) = h.await.unwrap();
        assert!(
            resp.starts_with("HTTP/1.1 504") || resp.starts_with("HTTP/1.1 408"),
            "slow body answered {resp:?}"
        );
        assert!(
            took < request_timeout + Duration::from_secs(2),
            "slow body took {took:?}"
        );
    }

    // A handler exceeding the request timeout: 504 with a Status.
    let t0 = Instant::now();
    let r = c
        .get(format!(
            "{url}/api/v1/namespaces/default/pods?resourceVersion=999999999"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let s: Value = r.json().await.unwrap();
    assert_eq!(
        (s["kind"].as_str(), s["reason"].as_str()),
        (Some("Status"), Some("Timeout"))
    );
    assert!(t0.elapsed() < request_timeout + Duration::from_secs(2));

    // A watch is exempt from the request timeout and ends cleanly at its timeoutSeconds.
    let t0 = Instant::now();
    let r = c
        .get(format!(
            "{url}/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=3"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.bytes().await.expect("the watch body ends cleanly");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(6),
        "{took:?}"
    );
    let lines: Vec<&[u8]> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert!(lines
        .iter()
        .all(|l| serde_json::from_slice::<Value>(l).is_ok()));
    assert!(healthy(&url).await);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t9_overload_queues_then_sheds_with_429() {
    // 6 seats: global-default has 1 (ceil(6 × 20 / 245)); a request waits at most a quarter of
    // the 8 s request timeout for it.
    let server = common::start_with(apiserver::Config {
        max_read_inflight: 4,
        max_mutating_inflight: 2,
        request_timeout: Duration::from_secs(8),
        future_rv_wait: Duration::from_secs(20),
        ..Default::default()
    })
    .await;
    let url = server.url();
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let rv = common::settled_revision(&c, &url).await;
    // 16 concurrent reads that wait for the next revision: one executes, 15 queue.
    let mut reads = Vec::new();
    for _ in 0..16 {
        let c = c.clone();
        let uri = format!(
            "{url}/api/v1/namespaces/default/configmaps?resourceVersion={}",
            rv + 1
        );
        reads.push(tokio::spawn(async move {
            let r = c.get(uri).send().await.unwrap();
            let retry = r
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            (r.status().as_u16(), retry)
        }));
    }
    // The queued ones are shed when their wait limit passes.
    let deadline = Instant::now() + Duration::from_secs(15);
    while reads.iter().filter(|h| h.is_finished()).count() < 15 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Probes are exempt while the level is saturated.
    assert!(healthy(&url).await);
    // The controller manager's level (workload-high) is unaffected; its write releases the read.
    let r = c
        .post(format!("{url}/api/v1/namespaces/default/configmaps"))
        .header("User-Agent", "kube-controller-manager/v0.1.0 (minik8s)")
        .json(&json!({"metadata":{"name":"go"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let mut ok = 0;
    let mut shed = 0;
    for h in reads {
        let (code, retry) = h.await.unwrap();
        match code {
            200 => ok += 1,
            429 => {
                shed += 1;
                let retry: u64 = retry.expect("Retry-After").parse().unwrap();
                assert!(retry >= 1);
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((ok, shed), (1, 15));
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t8_connection_cap_leaves_excess_in_the_backlog() {
    let server = common::start_with(apiserver::Config {
        max_connections: Some(4),
        ..Default::default()
    })
    .await;
    let url = server.url();
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(server.addr).await.unwrap());
    }
    // The fifth connection is not served while four are open...
    let c = reqwest::Client::new();
    let r = c
        .get(format!("{url}/healthz"))
        .timeout(Duration::from_millis(800))
        .send()
        .await;
    assert!(r.is_err(), "a fifth connection was served: {r:?}");
    // ...and is served as soon as one closes.
    drop(held.pop());
    let r = c
        .get(format!("{url}/healthz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(held);
    server.stop().await.unwrap();
}
