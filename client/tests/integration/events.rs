//! Event broadcaster writing through the REST client to a real HTTP server: first occurrence is
//! a POST, repeats are strategic-merge PATCHes of the count.

use std::time::Duration;

use crate::common::TestServer;
use axum::http::Method;
use client::{Client, Config, EventBroadcaster, EventType};
use k8s_openapi::api::core::v1::ObjectReference;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const EVENTS: &str = "/api/v1/namespaces/default/events";

#[tokio::test]
async fn repeats_are_patched_with_increasing_count() {
    let s = TestServer::start().await;
    let client = match Client::new(Config::new(s.url())) {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    };
    let b = EventBroadcaster::new(client, "replicaset-controller").with_host("node-0");
    let rec = b.recorder("");
    let token = CancellationToken::new();
    let t = token.clone();
    let task = tokio::spawn(async move { b.run(t).await });
    let pod = ObjectReference {
        kind: Some("ReplicaSet".into()),
        namespace: Some("default".into()),
        name: Some("web".into()),
        uid: Some("u1".into()),
        api_version: Some("apps/v1".into()),
        ..Default::default()
    };
    for _ in 0..3 {
        rec.event(
            &pod,
            EventType::Normal,
            "SuccessfulCreate",
            "Created pod: web-1",
        );
    }
    rec.event(&pod, EventType::Warning, "FailedCreate", "quota exceeded");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reqs = s.requests();
        let posts = reqs.iter().filter(|r| r.method == Method::POST).count();
        let patches = reqs.iter().filter(|r| r.method == Method::PATCH).count();
        if posts == 2 && patches == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "posts {posts} patches {patches}: {reqs:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reqs = s.requests();
    let first = reqs.iter().find(|r| r.method == Method::POST).cloned();
    let Some(first) = first else {
        panic!("no POST")
    };
    assert_eq!(first.path, EVENTS);
    assert_eq!(first.body["involvedObject"]["name"], "web");
    assert_eq!(first.body["source"]["component"], "replicaset-controller");
    assert_eq!(first.body["source"]["host"], "node-0");
    assert_eq!(first.body["type"], "Normal");
    let name = first.body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(name.starts_with("web."), "{name}");
    let patches: Vec<_> = reqs.iter().filter(|r| r.method == Method::PATCH).collect();
    assert_eq!(patches[0].path, format!("{EVENTS}/{name}"));
    assert_eq!(
        patches[0].content_type.as_deref(),
        Some("application/strategic-merge-patch+json")
    );
    assert_eq!(patches[0].body["count"], 2);
    assert_eq!(patches[1].body["count"], 3);
    let stored = s.object(EVENTS, &name).unwrap_or_default();
    assert_eq!(stored["count"], 3);
    assert_eq!(stored["reason"], "SuccessfulCreate");
    let warning = reqs
        .iter()
        .filter(|r| r.method == Method::POST)
        .nth(1)
        .map(|r| r.body.clone())
        .unwrap_or_default();
    assert_eq!(warning["type"], "Warning");
    token.cancel();
    assert!(tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .is_ok());
}

#[tokio::test]
async fn a_deleted_event_is_recreated_instead_of_patched() {
    let s = TestServer::start().await;
    let client = match Client::new(Config::new(s.url())) {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    };
    let b = EventBroadcaster::new(client, "c");
    let rec = b.recorder("c");
    let token = CancellationToken::new();
    let t = token.clone();
    let task = tokio::spawn(async move { b.run(t).await });
    let obj = ObjectReference {
        kind: Some("Node".into()),
        name: Some("n1".into()),
        ..Default::default()
    };
    rec.event(&obj, EventType::Normal, "Ready", "node ready");
    let wait_posts = |n: usize| {
        let s = &s;
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while s
                .requests()
                .iter()
                .filter(|r| r.method == Method::POST)
                .count()
                < n
            {
                assert!(Instant::now() < deadline, "waiting for {n} POSTs");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_posts(1).await;
    // Cluster-scoped objects' events go to "default".
    assert_eq!(s.requests()[0].path, EVENTS);
    // Someone deletes the event: the repeat's PATCH gets 404 and falls back to a create.
    s.inject(404, None);
    rec.event(&obj, EventType::Normal, "Ready", "node ready");
    wait_posts(2).await;
    let reqs = s.requests();
    assert_eq!(reqs.iter().filter(|r| r.method == Method::PATCH).count(), 1);
    let second = reqs
        .iter()
        .filter(|r| r.method == Method::POST)
        .nth(1)
        .map(|r| r.body.clone())
        .unwrap_or_default();
    assert_eq!(second["count"], 2);
    token.cancel();
    let _ = task.await;
}

/// Broadcasters sharing write permits wait for one, write, and give it back (the fake kubelets'
/// per-node recorders share a process-wide budget).
#[tokio::test]
async fn shared_write_permits_gate_and_are_returned() {
    let s = TestServer::start().await;
    let client = match Client::new(Config::new(s.url())) {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    };
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
    let held = match permits.clone().acquire_owned().await {
        Ok(p) => p,
        Err(e) => panic!("semaphore: {e}"),
    };
    let token = CancellationToken::new();
    let mut tasks = Vec::new();
    for node in ["node-0", "node-1"] {
        let b = EventBroadcaster::new(client.clone(), "kubelet")
            .with_host(node)
            .with_rate_limit(50.0, 100)
            .with_write_permits(permits.clone());
        let rec = b.recorder("");
        let t = token.clone();
        tasks.push(tokio::spawn(async move { b.run(t).await }));
        let obj = ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.into()),
            uid: Some(node.into()),
            ..Default::default()
        };
        rec.event(&obj, EventType::Normal, "Starting", "Starting kubelet.");
    }
    // The writers wait for the only permit, which the test holds: nothing is written meanwhile.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        s.requests()
            .iter()
            .filter(|r| r.method == Method::POST)
            .count(),
        0,
        "written without a permit"
    );
    // Once it lets go, both write one after the other and the permit comes back.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let posts = s
            .requests()
            .iter()
            .filter(|r| r.method == Method::POST)
            .count();
        if posts == 2 && permits.available_permits() == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "posts {posts}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hosts: Vec<String> = s
        .requests()
        .iter()
        .map(|r| {
            r.body["source"]["host"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(hosts.contains(&"node-0".to_string()) && hosts.contains(&"node-1".to_string()));
    token.cancel();
    for t in tasks {
        assert!(tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .is_ok());
    }
}

/// A broadcaster with concurrent writes has several events in flight at once (kube-scheduler's
/// events.k8s.io broadcaster writes each on its own goroutine), and no more than it was given: a
/// server that answers only once four POSTs are waiting at the same time gets all of them.
#[tokio::test]
async fn concurrent_writes_have_several_events_in_flight() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[derive(Default)]
    struct Gate {
        in_flight: AtomicUsize,
        most: AtomicUsize,
        written: AtomicUsize,
    }
    async fn post(
        axum::extract::State(gate): axum::extract::State<Arc<Gate>>,
        axum::Json(mut ev): axum::Json<serde_json::Value>,
    ) -> (axum::http::StatusCode, axum::Json<serde_json::Value>) {
        let now = gate.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        gate.most.fetch_max(now, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(5);
        while gate.most.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        gate.in_flight.fetch_sub(1, Ordering::SeqCst);
        gate.written.fetch_add(1, Ordering::SeqCst);
        ev["metadata"]["resourceVersion"] = "1".into();
        (axum::http::StatusCode::CREATED, axum::Json(ev))
    }
    let gate = Arc::new(Gate::default());
    let app = axum::Router::new()
        .route(EVENTS, axum::routing::post(post))
        .with_state(gate.clone());
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("bind: {e}"),
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => panic!("addr: {e}"),
    };
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = match Client::new(Config::new(format!("http://{addr}"))) {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    };
    let b = EventBroadcaster::new(client, "default-scheduler").with_concurrent_writes(4);
    let rec = b.recorder("");
    let token = CancellationToken::new();
    let task = tokio::spawn(b.run(token.clone()));
    // One event per pod: nothing to aggregate, each is its own POST.
    for i in 0..8 {
        let obj = ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(format!("p{i}")),
            uid: Some(format!("uid-{i}")),
            ..Default::default()
        };
        rec.event(
            &obj,
            EventType::Normal,
            "Scheduled",
            "Successfully assigned",
        );
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while gate.written.load(Ordering::SeqCst) < 8 {
        assert!(Instant::now() < deadline, "written {:?}", gate.written);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        gate.most.load(Ordering::SeqCst),
        4,
        "at most 4, and 4, in flight"
    );
    token.cancel();
    let _ = task.await;
    server.abort();
}

/// Under concurrent writes a repeat is not sent before the create it patches: one POST, then
/// PATCHes with counts in order, none refused.
#[tokio::test]
async fn concurrent_writes_keep_repeats_after_their_create() {
    let s = TestServer::start().await;
    let client = match Client::new(Config::new(s.url())) {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    };
    let b = EventBroadcaster::new(client, "default-scheduler").with_concurrent_writes(4);
    let rec = b.recorder("");
    let token = CancellationToken::new();
    let task = tokio::spawn(b.run(token.clone()));
    let pod = ObjectReference {
        kind: Some("Pod".into()),
        namespace: Some("default".into()),
        name: Some("p".into()),
        uid: Some("u".into()),
        ..Default::default()
    };
    for _ in 0..5 {
        rec.event(
            &pod,
            EventType::Warning,
            "FailedScheduling",
            "0/3 nodes are available",
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reqs = s.requests();
        let patches: Vec<_> = reqs.iter().filter(|r| r.method == Method::PATCH).collect();
        if patches.len() == 4 {
            let counts: Vec<_> = patches.iter().map(|p| p.body["count"].clone()).collect();
            assert_eq!(counts, [2, 3, 4, 5]);
            assert_eq!(reqs.iter().filter(|r| r.method == Method::POST).count(), 1);
            break;
        }
        assert!(Instant::now() < deadline, "{reqs:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    token.cancel();
    assert!(tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .is_ok());
}
