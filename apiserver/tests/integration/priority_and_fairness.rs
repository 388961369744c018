//! API Priority and Fairness over HTTP: 429s with `Retry-After`, fair shares between flows,
//! exempt requests through a saturated server, our components' levels (by the response
//! headers), and configuration changes taking effect (by the metrics). Requests that hold a seat
//! are reads at a future resourceVersion (they wait in the handler until a write or the
//! configured wait); every loop is bounded in count and time, and nothing is timed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::flowcontrol::shuffle::{flow_hash, Dealer};
use serde_json::{json, Value};

const FS_UID: &str = "x-kubernetes-pf-flowschema-uid";
const PL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";
const APF: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap()
}

/// Name → uid of every object of `plural`.
async fn uids(c: &reqwest::Client, url: &str, plural: &str) -> BTreeMap<String, String> {
    let list: Value = c
        .get(format!("{url}{APF}/{plural}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["metadata"]["uid"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn create(c: &reqwest::Client, url: &str, plural: &str, body: Value) -> String {
    let r = c
        .post(format!("{url}{APF}/{plural}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{:?}", r.text().await);
    let v: Value = r.json().await.unwrap();
    v["metadata"]["uid"].as_str().unwrap().to_string()
}

/// A Limited level of `shares` that may not borrow.
fn level(name: &str, shares: u32, limit_response: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": shares, "lendablePercent": 0, "borrowingLimitPercent": 0,
        "limitResponse": limit_response}}})
}

/// A FlowSchema sending every request in `namespaces` to `level`, a flow per namespace.
fn schema(name: &str, level: &str, namespaces: &[&str]) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 100,
        "distinguisherMethod": {"type": "ByNamespace"},
        "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                   "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                      "namespaces": namespaces}]}]}})
}

/// Waits until a request in `ns` is classified by the FlowSchema `uid`.
async fn wait_classified(c: &reqwest::Client, url: &str, ns: &str, uid: &str) {
    let ok = common::eventually(Duration::from_secs(10), || async {
        let r = c
            .get(format!("{url}/api/v1/namespaces/{ns}/configmaps"))
            .send()
            .await
            .unwrap();
        r.headers().get(FS_UID).and_then(|v| v.to_str().ok()) == Some(uid)
    })
    .await;
    assert!(ok, "the FlowSchema {uid} never took effect");
}

/// A read that holds its seat until the revision passes `rv` or the server's future-RV wait ends.
fn held_read(c: &reqwest::Client, url: &str, ns: &str, rv: u64) -> tokio::task::JoinHandle<u16> {
    let (c, uri) = (
        c.clone(),
        format!("{url}/api/v1/namespaces/{ns}/configmaps?resourceVersion={rv}"),
    );
    tokio::spawn(async move { c.get(uri).send().await.map_or(0, |r| r.status().as_u16()) })
}

/// `/metrics`, read as an admin (the exempt level) so a saturated level does not delay it.
async fn metrics(c: &reqwest::Client, url: &str) -> String {
    c.get(format!("{url}/metrics"))
        .header("Impersonate-User", "monitor")
        .header("Impersonate-Group", "system:masters")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reject_level_answers_429_with_retry_after_when_its_seats_are_taken() {
    let server = common::start_with(apiserver::Config {
        future_rv_wait: Duration::from_secs(30),
        shutdown_deadline: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let (url, c) = (server.url(), client());
    // 1 share of 246 of 600 seats: 3 seats, no queue.
    create(
        &c,
        &url,
        "prioritylevelconfigurations",
        level("reject", 1, json!({"type": "Reject"})),
    )
    .await;
    let fs = create(
        &c,
        &url,
        "flowschemas",
        schema("reject", "reject", &["apf-reject"]),
    )
    .await;
    wait_classified(&c, &url, "apf-reject", &fs).await;
    let rv = common::settled_revision(&c, &url).await;
    let held: Vec<_> = (0..3)
        .map(|_| held_read(&c, &url, "apf-reject", rv + 1))
        .collect();
    let line = "apiserver_flowcontrol_current_executing_requests{flow_schema=\"reject\",priority_level=\"reject\"} 3";
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            metrics(&c, &url).await.contains(line)
        })
        .await
    );

    let r = c
        .get(format!("{url}/api/v1/namespaces/apf-reject/configmaps"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    assert_eq!(r.headers()[FS_UID].to_str().unwrap(), fs);
    assert!(r.headers().contains_key(PL_UID));
    assert_eq!(
        r.text().await.unwrap(),
        "Too many requests, please try again later.\n"
    );
    let rejected = "apiserver_flowcontrol_rejected_requests_total{flow_schema=\"reject\",priority_level=\"reject\",reason=\"concurrency-limit\"} 1";
    assert!(metrics(&c, &url).await.contains(rejected));

    // Other levels are untouched; a write releases the held reads.
    let r = c
        .post(format!("{url}/api/v1/namespaces/default/configmaps"))
        .json(&json!({"metadata": {"name": "go"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    for h in held {
        assert_eq!(h.await.unwrap(), 200);
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_flows_against_a_saturated_level_are_served_in_equal_shares() {
    let server = common::start_with(apiserver::Config {
        // 200 seats: 1 share of 246 is one seat. Each held read keeps it 100 ms.
        max_read_inflight: 100,
        max_mutating_inflight: 100,
        future_rv_wait: Duration::from_millis(100),
        ..Default::default()
    })
    .await;
    let (url, c) = (server.url(), client());
    let queuing =
        json!({"type": "Queue", "queuing": {"queues": 64, "handSize": 1, "queueLengthLimit": 50}});
    create(
        &c,
        &url,
        "prioritylevelconfigurations",
        level("fair", 1, queuing),
    )
    .await;
    // Two namespaces whose flows have different queues.
    let dealer = Dealer::new(64, 1);
    let queue = |ns: &str| dealer.deal(flow_hash("fair", ns)).next();
    let heavy = "apf-heavy";
    let light = (0..100)
        .map(|i| format!("apf-light-{i}"))
        .find(|ns| queue(ns) != queue(heavy))
        .unwrap();
    let fs = create(
        &c,
        &url,
        "flowschemas",
        schema("fair", "fair", &[heavy, &light]),
    )
    .await;
    wait_classified(&c, &url, heavy, &fs).await;
    let rv = common::revision(&c, &url).await + 1000;

    // The heavy flow has 8 clients, the light one 2; each client sends held reads in a loop
    // until 40 have completed in all.
    let done = Arc::new(AtomicU64::new(0));
    let counts: Vec<Arc<AtomicU64>> =
        vec![Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tasks = Vec::new();
    for (flow, ns, clients) in [(0usize, heavy.to_string(), 8), (1, light.clone(), 2)] {
        for _ in 0..clients {
            let (c, done, count) = (c.clone(), done.clone(), counts[flow].clone());
            let uri = format!("{url}/api/v1/namespaces/{ns}/configmaps?resourceVersion={rv}");
            tasks.push(tokio::spawn(async move {
                for _ in 0..1000 {
                    if done.load(Ordering::SeqCst) >= 40 || Instant::now() > deadline {
                        break;
                    }
                    let r = c.get(&uri).send().await.unwrap();
                    assert_ne!(r.status(), 429);
                    if done.fetch_add(1, Ordering::SeqCst) < 40 {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (h, l) = (
        counts[0].load(Ordering::SeqCst),
        counts[1].load(Ordering::SeqCst),
    );
    assert_eq!(h + l, 40);
    // First come, first served would give the light flow 2 in 10 (8 of 40); fair queuing
    // alternates the two queues.
    assert!(l >= 14, "heavy {h}, light {l}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exempt_requests_pass_a_saturated_server() {
    let server = common::start_with(apiserver::Config {
        // 2 seats: global-default has one.
        max_read_inflight: 1,
        max_mutating_inflight: 1,
        future_rv_wait: Duration::from_secs(30),
        ..Default::default()
    })
    .await;
    let (url, c) = (server.url(), client());
    let levels = uids(&c, &url, "prioritylevelconfigurations").await;
    let rv = common::settled_revision(&c, &url).await;
    let held: Vec<_> = (0..4)
        .map(|_| held_read(&c, &url, "default", rv + 1))
        .collect();
    let waiting = "apiserver_flowcontrol_current_inqueue_requests{flow_schema=\"global-default\",priority_level=\"global-default\"} 3";
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            metrics(&c, &url).await.contains(waiting)
        })
        .await
    );

    // An admin (system:masters) and a probe go through.
    let r = c
        .get(format!("{url}/api/v1/namespaces/default/configmaps"))
        .header("Impersonate-User", "root")
        .header("Impersonate-Group", "system:masters")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[PL_UID].to_str().unwrap(), levels["exempt"]);
    let r = c.get(format!("{url}/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[PL_UID].to_str().unwrap(), levels["exempt"]);
    assert!(held.iter().all(|h| !h.is_finished()));

    // The controller manager's level is free too; its write releases the held reads.
    let r = c
        .post(format!("{url}/api/v1/namespaces/default/configmaps"))
        .header("User-Agent", "kube-controller-manager/v0.1.0 (minik8s)")
        .json(&json!({"metadata": {"name": "go"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(
        r.headers()[PL_UID].to_str().unwrap(),
        levels["workload-high"]
    );
    for h in held {
        assert_eq!(h.await.unwrap(), 200);
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_components_land_in_their_upstream_levels() {
    let server = common::start().await;
    let (url, c) = (server.url(), client());
    let schemas = uids(&c, &url, "flowschemas").await;
    let levels = uids(&c, &url, "prioritylevelconfigurations").await;
    let cases = [
        (
            "kube-controller-manager/v0.1.0 (minik8s)",
            "/api/v1/namespaces/default/pods",
            "kube-controller-manager",
            "workload-high",
        ),
        (
            "kube-controller-manager/v0.1.0 (minik8s)",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager",
            "system-leader-election",
            "leader-election",
        ),
        (
            "kube-scheduler/v0.1.0 (minik8s)",
            "/api/v1/namespaces/default/pods",
            "kube-scheduler",
            "workload-high",
        ),
        (
            "kubelet/v0.1.0 (minik8s)",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1",
            "system-node-high",
            "node-high",
        ),
        (
            "kubelet/v0.1.0 (minik8s)",
            "/api/v1/nodes/node-1",
            "system-node-high",
            "node-high",
        ),
        (
            "kubelet/v0.1.0 (minik8s)",
            "/api/v1/namespaces/default/pods",
            "system-nodes",
            "system",
        ),
        (
            "kubectl/v1.33.0 (linux/amd64)",
            "/api/v1/namespaces/default/pods",
            "global-default",
            "global-default",
        ),
        ("kube-probe/1.33", "/livez", "probes", "exempt"),
    ];
    for (agent, path, fs, pl) in cases {
        let r = c
            .get(format!("{url}{path}"))
            .header("User-Agent", agent)
            .send()
            .await
            .unwrap();
        assert_ne!(r.status(), 429);
        assert_eq!(
            r.headers()[FS_UID].to_str().unwrap(),
            schemas[fs],
            "{agent} {path}"
        );
        assert_eq!(
            r.headers()[PL_UID].to_str().unwrap(),
            levels[pl],
            "{agent} {path}"
        );
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_nominal_concurrency_shares_changes_the_seat_limits() {
    let server = common::start().await;
    let (url, c) = (server.url(), client());
    let text = metrics(&c, &url).await;
    // Σ shares 245 of 600 seats: workload-low 100 → 245, global-default 20 → 49.
    assert!(
        text.contains(
            "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"workload-low\"} 245"
        ),
        "{text}"
    );
    assert!(text.contains(
        "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"global-default\"} 49"
    ));
    let r = c
        .patch(format!(
            "{url}{APF}/prioritylevelconfigurations/workload-low"
        ))
        .header("Content-Type", "application/merge-patch+json")
        .body(json!({"spec": {"limited": {"nominalConcurrencyShares": 200}}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Σ 345: workload-low ceil(600 × 200 / 345) = 348, global-default ceil(600 × 20 / 345) = 35.
    let changed = common::eventually(Duration::from_secs(10), || async {
        let t = metrics(&c, &url).await;
        t.contains("apiserver_flowcontrol_nominal_limit_seats{priority_level=\"workload-low\"} 348")
            && t.contains(
                "apiserver_flowcontrol_current_limit_seats{priority_level=\"workload-low\"} 348",
            )
            && t.contains(
                "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"global-default\"} 35",
            )
    })
    .await;
    assert!(changed, "{}", metrics(&c, &url).await);
    server.stop().await.unwrap();
}

/// The `Dangling` condition of the FlowSchema `name`: (status, reason).
async fn dangling(c: &reqwest::Client, url: &str, name: &str) -> (String, String) {
    let fs: Value = c
        .get(format!("{url}{APF}/flowschemas/{name}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let conds = fs["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let d = conds
        .iter()
        .find(|c| c["type"] == "Dangling")
        .cloned()
        .unwrap_or_default();
    (
        d["status"].as_str().unwrap_or_default().to_string(),
        d["reason"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_schema_stops_dangling_when_its_level_is_created_and_dangles_when_it_goes() {
    let server = common::start().await;
    let (url, c) = (server.url(), client());
    create(
        &c,
        &url,
        "flowschemas",
        schema("late", "late", &["apf-late"]),
    )
    .await;
    assert_eq!(
        dangling(&c, &url, "late").await,
        ("True".into(), "NotFound".into())
    );
    let queuing =
        json!({"type": "Queue", "queuing": {"queues": 4, "handSize": 2, "queueLengthLimit": 10}});
    create(
        &c,
        &url,
        "prioritylevelconfigurations",
        level("late", 1, queuing),
    )
    .await;
    let found = common::eventually(Duration::from_secs(10), || async {
        dangling(&c, &url, "late").await == ("False".into(), "Found".into())
    })
    .await;
    assert!(found, "{:?}", dangling(&c, &url, "late").await);
    let r = c
        .delete(format!("{url}{APF}/prioritylevelconfigurations/late"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let gone = common::eventually(Duration::from_secs(10), || async {
        dangling(&c, &url, "late").await == ("True".into(), "NotFound".into())
    })
    .await;
    assert!(gone, "{:?}", dangling(&c, &url, "late").await);
    server.stop().await.unwrap();
}
