//! Several apiservers on one etcd (issue 20), end to end with the real binary: objects written
//! through one are listed consistently and watched in order through the other; a watch on one
//! resumes from a resourceVersion written through the other; SIGKILLing one apiserver leaves the
//! other's clients and watches working, gap-free; an etcd restart is survived.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use store::etcd::server::EtcdCluster;
use tests::Minik8s;
use tokio::sync::mpsc;

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn up_on_etcd(dir: &std::path::Path, etcd: &str) -> Minik8s {
    Minik8s::up(dir, &["--nodes", "0", "--etcd-servers", etcd])
}

async fn create(http: &reqwest::Client, base: &str, name: &str) -> Result<u64, String> {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let response = http
        .post(format!("{base}{CONFIGMAPS}"))
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if response.status() != 201 {
        return Err(format!("create {name}: {}", response.status()));
    }
    let object: Value = response.json().await.map_err(|e| e.to_string())?;
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .ok_or_else(|| format!("no resourceVersion in {object}"))
}

async fn list_names(http: &reqwest::Client, base: &str) -> Vec<String> {
    let list: Value = match http.get(format!("{base}{CONFIGMAPS}")).send().await {
        Ok(response) => match response.json().await {
            Ok(list) => list,
            Err(error) => panic!("list body: {error}"),
        },
        Err(error) => panic!("list: {error}"),
    };
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A watch of ConfigMaps from `rv`: (type, name, resourceVersion) per event, on a channel.
async fn watch(base: &str, rv: u64) -> mpsc::Receiver<(String, String, u64)> {
    let url = format!("{base}{CONFIGMAPS}?watch=1&resourceVersion={rv}");
    let response = match reqwest::get(&url).await {
        Ok(response) => response,
        Err(error) => panic!("watch: {error}"),
    };
    assert_eq!(response.status(), 200, "watch from {rv}");
    let (tx, rx) = mpsc::channel(1024);
    tokio::spawn(async move {
        let mut body = response.bytes_stream();
        let mut buffer = Vec::new();
        while let Some(Ok(chunk)) = body.next().await {
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                let object = &event["object"]["metadata"];
                let item = (
                    event["type"].as_str().unwrap_or_default().to_owned(),
                    object["name"].as_str().unwrap_or_default().to_owned(),
                    object["resourceVersion"]
                        .as_str()
                        .and_then(|rv| rv.parse().ok())
                        .unwrap_or(0),
                );
                if tx.send(item).await.is_err() {
                    return;
                }
            }
        }
    });
    rx
}

async fn next_added(rx: &mut mpsc::Receiver<(String, String, u64)>) -> (String, u64) {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
            Ok(Some((kind, name, rv))) if kind == "ADDED" => return (name, rv),
            Ok(Some(_)) => continue,
            other => panic!("expected an ADDED event, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apiservers_share_objects_and_survive_each_others_death() {
    let etcd = match EtcdCluster::start(1).await {
        Ok(etcd) => etcd,
        Err(error) => panic!("start etcd: {error}"),
    };
    let url = etcd.client_urls().join(",");
    let dirs = match (tempfile::tempdir(), tempfile::tempdir()) {
        (Ok(a), Ok(b)) => (a, b),
        _ => panic!("tempdir"),
    };
    let mut a = up_on_etcd(dirs.0.path(), &url);
    let b = up_on_etcd(dirs.1.path(), &url);
    let http = reqwest::Client::new();

    // Written through A, listed through B at once (a consistent read).
    let first = match create(&http, &a.url(), "a-0").await {
        Ok(rv) => rv,
        Err(error) => panic!("{error}"),
    };
    assert!(list_names(&http, &b.url())
        .await
        .contains(&"a-0".to_owned()));

    // A watch on B from a resourceVersion written through A: every later write through A, in order.
    let mut on_b = watch(&b.url(), first).await;
    let mut expected = Vec::new();
    for i in 1..=10 {
        let name = format!("a-{i}");
        let rv = match create(&http, &a.url(), &name).await {
            Ok(rv) => rv,
            Err(error) => panic!("{error}"),
        };
        expected.push((name, rv));
    }
    for want in &expected {
        assert_eq!(&next_added(&mut on_b).await, want);
    }

    // A dies; B's clients and its open watch keep working, with no gap.
    a.kill();
    for i in 0..10 {
        let name = format!("b-{i}");
        let rv = match create(&http, &b.url(), &name).await {
            Ok(rv) => rv,
            Err(error) => panic!("{error}"),
        };
        assert_eq!(next_added(&mut on_b).await, (name, rv));
    }
    assert_eq!(list_names(&http, &b.url()).await.len(), 21);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_survives_an_etcd_restart() {
    let mut etcd = match EtcdCluster::start(1).await {
        Ok(etcd) => etcd,
        Err(error) => panic!("start etcd: {error}"),
    };
    let url = etcd.client_urls().join(",");
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(error) => panic!("tempdir: {error}"),
    };
    let server = up_on_etcd(dir.path(), &url);
    let http = reqwest::Client::new();
    if let Err(error) = create(&http, &server.url(), "before").await {
        panic!("{error}");
    }
    etcd.kill(0);
    if let Err(error) = etcd.restart(0) {
        panic!("restart etcd: {error}");
    }
    if let Err(error) = etcd.wait_ready().await {
        panic!("etcd not ready: {error}");
    }
    // Writes succeed again once the client has reconnected; nothing acknowledged was lost.
    let after = tests::eventually("a write after the etcd restart", || {
        let http = http.clone();
        let base = server.url();
        async move { create(&http, &base, "after").await.ok() }
    })
    .await;
    let names = list_names(&http, &server.url()).await;
    assert!(names.contains(&"before".to_owned()) && names.contains(&"after".to_owned()));
    // The watch cache caught up through its resumed (or relisted) etcd watch: a watch from the
    // new write's resourceVersion opens and sees the next write.
    let mut watch_from_after = watch(&server.url(), after).await;
    let rv = match create(&http, &server.url(), "next").await {
        Ok(rv) => rv,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(
        next_added(&mut watch_from_after).await,
        ("next".to_owned(), rv)
    );
}
