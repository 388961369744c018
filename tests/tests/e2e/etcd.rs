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

/// The tests run one at a time: each starts etcd and two or three minik8s processes, and three such
/// clusters at once starve a 2-core machine (a CI run's) until their timeouts mean nothing.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
            // The controller manager publishes the root CA into every namespace, whenever it gets
            // to this one: not the test's write.
            Ok(Some((_, name, _))) if name == "kube-root-ca.crt" => continue,
            Ok(Some((kind, name, rv))) if kind == "ADDED" => return (name, rv),
            Ok(Some(_)) => continue,
            other => panic!("expected an ADDED event, got {other:?}"),
        }
    }
}

/// Two apiservers on one etcd: a consistent LIST through one shows what the other wrote (etcd 3.4's
/// progress answers can overtake queued events, so consistent reads there write a progress key),
/// and either one's death leaves the other serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apiservers_share_objects_and_survive_each_others_death() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
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
    // The newest revision is another client's key outside /registry/: a consistent list still
    // answers at once (the watch cache advances on etcd's progress notification).
    let outsider = match store::EtcdStore::connect(
        &store::EtcdConfig {
            endpoints: etcd.client_urls(),
            ..store::EtcdConfig::default()
        },
        store::StoreConfig::default(),
    )
    .await
    {
        Ok(outsider) => outsider,
        Err(error) => panic!("connect: {error}"),
    };
    if let Err(error) = store::Store::create(&outsider, "/elsewhere/k", "v".into()).await {
        panic!("outside write: {error}");
    }
    let listed = tokio::time::timeout(Duration::from_secs(10), list_names(&http, &b.url())).await;
    assert!(matches!(listed, Ok(names) if names.contains(&"a-0".to_owned())));

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
    // Ours only: the controller manager publishes kube-root-ca.crt here too.
    let ours = list_names(&http, &b.url())
        .await
        .into_iter()
        .filter(|n| n.starts_with("a-") || n.starts_with("b-"))
        .count();
    assert_eq!(ours, 21);
}

/// etcd stops and starts again: the apiserver's watch resumes (or relists) and a consistent LIST
/// shows a write made after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_survives_an_etcd_restart() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
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
    // A consistent list right after the restart may still wait for the watch cache to catch up
    // through its reconnected etcd watch (and time out, as upstream's would): a client retries.
    tests::eventually("both writes listed after the etcd restart", || {
        let http = http.clone();
        let base = server.url();
        async move {
            let names = list_names(&http, &base).await;
            (names.contains(&"before".to_owned()) && names.contains(&"after".to_owned()))
                .then_some(())
        }
    })
    .await;
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

/// A child process killed when dropped.
struct Process(std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str], log: &std::path::Path) -> Process {
    let log = match std::fs::File::create(log) {
        Ok(log) => log,
        Err(error) => panic!("log file: {error}"),
    };
    match std::process::Command::new(tests::binary_path())
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
    {
        Ok(child) => Process(child),
        Err(error) => panic!("spawn {args:?}: {error}"),
    }
}

async fn get_json(http: &reqwest::Client, url: &str) -> Option<Value> {
    let response = http.get(url).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json().await.ok()
}

/// Pods in `default` (only the test's RC makes any), counted from a one-item page and its
/// `remainingItemCount`, so polling does not list every pod.
async fn pod_count(http: &reqwest::Client, base: &str) -> usize {
    let Some(page) = get_json(
        http,
        &format!("{base}/api/v1/namespaces/default/pods?limit=1"),
    )
    .await
    else {
        return 0;
    };
    let items = page["items"].as_array().map_or(0, Vec::len);
    let remaining = page["metadata"]["remainingItemCount"].as_u64().unwrap_or(0);
    items + remaining as usize
}

async fn lease_holder(http: &reqwest::Client, base: &str, lease: &str) -> Option<String> {
    let lease = get_json(
        http,
        &format!("{base}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease}"),
    )
    .await?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leading_controller_manager_is_replaced_and_the_rc_converges_exactly() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    // Issue 20's fault test: SIGKILL the leader during a scale to 1,000 pods.
    const REPLICAS: usize = 1000;
    let etcd = match EtcdCluster::start(1).await {
        Ok(etcd) => etcd,
        Err(error) => panic!("start etcd: {error}"),
    };
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(error) => panic!("tempdir: {error}"),
    };
    let port = tests::free_port().to_string();
    let base = format!("http://127.0.0.1:{port}");
    let etcd_url = etcd.client_urls().join(",");
    let _apiserver = spawn(
        &["apiserver", "--port", &port, "--etcd-servers", &etcd_url],
        &dir.path().join("apiserver.log"),
    );
    let http = reqwest::Client::new();
    tests::eventually("the apiserver is ready", || {
        let (http, url) = (http.clone(), format!("{base}/readyz"));
        async move {
            let response = http.get(url).send().await.ok()?;
            response.status().is_success().then_some(())
        }
    })
    .await;
    let mut managers = Vec::new();
    for i in 0..2 {
        let metrics = format!("127.0.0.1:{}", tests::free_port());
        let process = spawn(
            &[
                "controller-manager",
                "--server",
                &base,
                "--leader-elect",
                "--metrics-address",
                &metrics,
            ],
            &dir.path().join(format!("cm-{i}.log")),
        );
        managers.push(process);
    }
    let pids: Vec<u32> = managers.iter().map(|p| p.0.id()).collect();
    let first = tests::eventually("a controller manager leads", || {
        let (http, base) = (http.clone(), base.clone());
        async move { lease_holder(&http, &base, "kube-controller-manager").await }
    })
    .await;
    // The scheduler elects its own leader on its own Lease, as kube-scheduler does.
    let scheduler_leader = tests::eventually("a scheduler leads", || {
        let (http, base) = (http.clone(), base.clone());
        async move { lease_holder(&http, &base, "kube-scheduler").await }
    })
    .await;
    assert!(
        pids.iter()
            .any(|pid| scheduler_leader.ends_with(&format!("-{pid}"))),
        "kube-scheduler lease held by {scheduler_leader}, not by {pids:?}"
    );
    let leader = match pids
        .iter()
        .position(|pid| first.ends_with(&format!("-{pid}")))
    {
        Some(leader) => leader,
        None => panic!("lease held by {first}, not by {pids:?}"),
    };

    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "failover"},
        "spec": {"replicas": REPLICAS, "selector": {"app": "failover"},
            "template": {"metadata": {"labels": {"app": "failover"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let response = match http
        .post(format!(
            "{base}/api/v1/namespaces/default/replicationcontrollers"
        ))
        .json(&rc)
        .send()
        .await
    {
        Ok(response) => response,
        Err(error) => panic!("create rc: {error}"),
    };
    assert_eq!(response.status(), 201);
    // Kill the leader in the middle of the scale-up.
    tests::eventually("the scale-up is under way", || {
        let (http, base) = (http.clone(), base.clone());
        async move { (pod_count(&http, &base).await >= 100).then_some(()) }
    })
    .await;
    drop(managers.remove(leader));
    let killed_at = pod_count(&http, &base).await;
    println!("leader killed at {killed_at} pods");
    let second = tests::eventually("the other controller manager takes the lease", || {
        let (http, base, first) = (http.clone(), base.clone(), first.clone());
        async move {
            lease_holder(&http, &base, "kube-controller-manager")
                .await
                .filter(|h| *h != first)
        }
    })
    .await;
    let survivor = pids[1 - leader];
    assert!(
        second.ends_with(&format!("-{survivor}")),
        "lease went to {second}"
    );
    let survivor_id = format!("-{survivor}");
    tests::eventually("the survivor holds the kube-scheduler lease", || {
        let (http, base, survivor_id) = (http.clone(), base.clone(), survivor_id.clone());
        async move {
            lease_holder(&http, &base, "kube-scheduler")
                .await
                .filter(|h| h.ends_with(&survivor_id))
        }
    })
    .await;
    tests::eventually("the RC converges", || {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let rc = get_json(
                &http,
                &format!("{base}/api/v1/namespaces/default/replicationcontrollers/failover"),
            )
            .await?;
            let ready = rc["status"]["replicas"].as_u64() == Some(REPLICAS as u64)
                && pod_count(&http, &base).await == REPLICAS;
            ready.then_some(())
        }
    })
    .await;
    // Exactly: no double creation by the new leader (its expectations come from its caches).
    assert_eq!(pod_count(&http, &base).await, REPLICAS);
}
