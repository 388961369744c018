#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_discovery_and_seeded_namespaces() {
    let server = common::start().await;
    let url = server.url();
    let c = reqwest::Client::new();
    let v: serde_json::Value = c
        .get(format!("{url}/version"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["minor"], "33");
    let r = c
        .get(format!("{url}/api/v1/namespaces"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let l: serde_json::Value = r.json().await.unwrap();
    let names: Vec<&str> = l["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    let k = common::Kube::new(&url);
    let out = common::blocking(move || k.ok(&["get", "ns"])).await;
    assert!(out.contains("kube-system"), "{out}");
    server.stop().await.unwrap();
}
