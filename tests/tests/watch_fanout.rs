//! Watch fan-out (issue 17, item 6) against one in-process Sandbox: 200 concurrent watch streams
//! on the ConfigMaps of a namespace, plus 20 with a label selector, while 8 writers create, update
//! and delete ConfigMaps in a burst. Every unfiltered watcher must see every event exactly once,
//! in resourceVersion order, and all of them the same sequence; every selector watcher exactly the
//! events of the labelled objects. Bounded: a fixed number of writes, every read under a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use tokio::time::Instant;

const WATCHERS: usize = 200;
const SELECTED: usize = 20;
const WRITERS: usize = 8;
/// Objects each writer creates; each is then updated, and every other one deleted.
const PER_WRITER: usize = 15;
const DEADLINE: Duration = Duration::from_secs(120);

/// One event as a watcher saw it: type, name, resourceVersion.
type Seen = (String, String, u64);

/// Reads a watch stream until it has `want` events or the deadline passes.
async fn read_events(resp: reqwest::Response, want: usize, deadline: Instant) -> Vec<Seen> {
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    let mut seen = Vec::new();
    while seen.len() < want {
        let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline, stream.next()).await else {
            break;
        };
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let ev: Value = serde_json::from_slice(&line).unwrap();
            let ty = ev["type"].as_str().unwrap().to_string();
            if ty == "BOOKMARK" {
                continue;
            }
            let meta = &ev["object"]["metadata"];
            let rv = meta["resourceVersion"].as_str().unwrap().parse().unwrap();
            seen.push((ty, meta["name"].as_str().unwrap().to_string(), rv));
        }
    }
    seen
}

fn assert_in_order(events: &[Seen]) {
    for w in events.windows(2) {
        assert!(w[0].2 < w[1].2, "out of order: {w:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watcher_sees_every_event_of_a_burst_in_order() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .without_controllers()
        .start()
        .await
        .unwrap();
    let url = format!("{}/api/v1/namespaces/default/configmaps", sandbox.url());
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(WATCHERS + SELECTED + WRITERS)
        .build()
        .unwrap();
    let list: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + DEADLINE;

    // Every write makes one event: a create, an update, and for every other object a delete.
    let objects = WRITERS * PER_WRITER;
    let deletes = WRITERS * PER_WRITER.div_ceil(2);
    let total = 2 * objects + deletes;
    // Writer 0's objects carry the label.
    let labelled = 2 * PER_WRITER + PER_WRITER.div_ceil(2);

    // Opened before any write: the response head comes after the cache registered the watch.
    let mut opened = Vec::new();
    for i in 0..WATCHERS + SELECTED {
        let selector = if i < WATCHERS {
            ""
        } else {
            "&labelSelector=fanout%3Dyes"
        };
        let resp = http
            .get(format!("{url}?watch=true&resourceVersion={rv}{selector}"))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
        let want = if i < WATCHERS { total } else { labelled };
        opened.push(tokio::spawn(read_events(resp, want, deadline)));
    }

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (http, url) = (http.clone(), url.clone());
        writers.push(tokio::spawn(async move {
            let labels = if w == 0 {
                json!({"fanout": "yes"})
            } else {
                json!({})
            };
            for i in 0..PER_WRITER {
                let name = format!("w{w}-{i}");
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "labels": labels}, "data": {"n": "0"}});
                let r = http.post(&url).json(&body).send().await.unwrap();
                assert_eq!(r.status(), reqwest::StatusCode::CREATED);
                let patch = json!({"data": {"n": "1"}});
                let r = http
                    .patch(format!("{url}/{name}"))
                    .header("Content-Type", "application/merge-patch+json")
                    .body(patch.to_string())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), reqwest::StatusCode::OK);
                if i % 2 == 0 {
                    let r = http.delete(format!("{url}/{name}")).send().await.unwrap();
                    assert_eq!(r.status(), reqwest::StatusCode::OK);
                }
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }

    let mut first: Option<Vec<Seen>> = None;
    for (i, task) in opened.into_iter().enumerate() {
        let events = task.await.unwrap();
        assert_in_order(&events);
        if i < WATCHERS {
            assert_eq!(
                events.len(),
                total,
                "watcher {i} saw {} of {total}",
                events.len()
            );
            match &first {
                None => first = Some(events),
                Some(f) => assert_eq!(&events, f, "watcher {i} saw another sequence"),
            }
        } else {
            assert_eq!(events.len(), labelled, "selector watcher {i}");
            assert!(events.iter().all(|(_, name, _)| name.starts_with("w0-")));
        }
    }
    let all = first.unwrap();
    let count = |ty: &str| all.iter().filter(|(t, _, _)| t == ty).count();
    assert_eq!(
        (count("ADDED"), count("MODIFIED"), count("DELETED")),
        (objects, objects, deletes)
    );
    sandbox.stop().await;
}
