//! Graceful shutdown (T11 at API level): after cancellation the server stops accepting, an
//! in-flight request still gets its response, open watches end with a clean end of stream, and
//! `stop()` returns within the shutdown deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_finish_and_watches_end_cleanly() {
    let server = common::start_with(apiserver::Config {
        future_rv_wait: Duration::from_secs(1),
        shutdown_deadline: Duration::from_secs(5),
        ..Default::default()
    })
    .await;
    let url = server.url();
    let c = reqwest::Client::new();
    let watch = c
        .get(format!(
            "{url}/api/v1/namespaces/default/configmaps?watch=true"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), 200);
    let watch_body = tokio::spawn(async move { watch.bytes().await.map(|b| b.len()) });
    // An in-flight request that is still waiting when shutdown begins.
    let uri = format!("{url}/api/v1/namespaces/default/configmaps?resourceVersion=999999");
    let c2 = c.clone();
    let in_flight =
        tokio::spawn(async move { c2.get(uri).send().await.map(|r| r.status().as_u16()) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    let addr = server.addr;
    server.stop().await.unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(6),
        "shutdown took {:?}",
        t0.elapsed()
    );
    let status = in_flight
        .await
        .unwrap()
        .expect("the in-flight request got a response");
    assert_eq!(
        status, 504,
        "the waiting list answers its own timeout, not a reset"
    );
    watch_body
        .await
        .unwrap()
        .expect("the watch stream ends cleanly");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
}
