//! Durability of the whole binary: a clean restart keeps objects and resourceVersions; a SIGKILL during a
//! scale-up loses no acknowledged object and the system converges afterwards.

use std::time::Duration;

use tests::{wait_for, Minik8s};

fn pod_count(k: &tests::Kubectl, phase: Option<&str>) -> usize {
    let list = k.json(&["get", "pods", "-l", "app=web"]);
    list["items"].as_array().map_or(0, |a| {
        a.iter()
            .filter(|p| phase.is_none_or(|ph| p["status"]["phase"] == ph))
            .count()
    })
}

#[test]
fn objects_and_resource_versions_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Minik8s::up(dir.path(), &["--nodes", "0"]);
    let k = server.kubectl();
    k.ok(&["create", "configmap", "keep", "--from-literal=a=1"]);
    let before = k.json(&["get", "configmap", "keep"]);
    let status = server
        .terminate(Duration::from_secs(10))
        .expect("exits within 10 s after SIGTERM");
    assert!(
        status.success(),
        "exit status {status}; log:\n{}",
        server.log_text()
    );

    let server = Minik8s::up(dir.path(), &["--nodes", "0"]);
    let k = server.kubectl();
    let after = k.json(&["get", "configmap", "keep"]);
    assert_eq!(before["metadata"]["uid"], after["metadata"]["uid"]);
    assert_eq!(
        before["metadata"]["resourceVersion"],
        after["metadata"]["resourceVersion"]
    );
    assert_eq!(after["data"]["a"], "1");
    // The revision goes on from where it was: a new write gets a higher resourceVersion.
    k.ok(&["create", "configmap", "next"]);
    let next = k.json(&["get", "configmap", "next"]);
    let rv = |v: &serde_json::Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&next) > rv(&after));
}

#[test]
fn a_second_up_on_the_same_data_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _server = Minik8s::up(dir.path(), &["--nodes", "0"]);
    let out = std::process::Command::new(tests::binary_path())
        .args(["up", "--port", "0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in use by another minik8s process"),
        "{stderr}"
    );
}

#[test]
fn sigkill_during_scale_up_then_converges_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Minik8s::up(dir.path(), &["--nodes", "3"]);
    let k = server.kubectl();
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/rc.yaml");
    k.ok(&["apply", "-f", manifest]);
    k.ok(&["create", "configmap", "acked", "--from-literal=x=y"]);
    k.ok(&["scale", "rc", "web", "--replicas=30"]);
    // Kill while the controller is still creating pods.
    wait_for(
        "scale-up under way",
        Duration::from_secs(20),
        || match pod_count(&k, None) {
            n if n > 3 => Ok(()),
            n => Err(format!("{n} pods")),
        },
    );
    server.kill();

    let server = Minik8s::up(dir.path(), &["--nodes", "3"]);
    let k = server.kubectl();
    // Every acknowledged write is there.
    let cm = k.json(&["get", "configmap", "acked"]);
    assert_eq!(cm["data"]["x"], "y");
    let rc = k.json(&["get", "rc", "web"]);
    assert_eq!(rc["spec"]["replicas"], 30);
    // The system converges: exactly 30 Running pods.
    wait_for(
        "30 Running pods after restart",
        Duration::from_secs(60),
        || {
            let (all, running) = (pod_count(&k, None), pod_count(&k, Some("Running")));
            if all == 30 && running == 30 {
                Ok(())
            } else {
                Err(format!("{all} pods, {running} running"))
            }
        },
    );
}

#[test]
fn an_informer_resumes_across_a_server_restart() {
    use minik8s::client::{Client, Config, SharedInformerFactory};
    use minik8s::k8s_openapi::api::core::v1::ConfigMap;

    let dir = tempfile::tempdir().unwrap();
    let port = tests::free_port();
    let mut server = Minik8s::up_on(dir.path(), port, &["--nodes", "0"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = Client::new(Config::new(server.url())).unwrap();
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let informer = factory.informer::<ConfigMap>();
    let shutdown = tokio_util::sync::CancellationToken::new();
    {
        let _guard = rt.enter();
        factory.start(shutdown.clone());
    }
    let k = server.kubectl();
    k.ok(&["create", "configmap", "before"]);
    let has = |name: &str| {
        informer
            .indexer()
            .get_by_key(&format!("default/{name}"))
            .is_some()
    };
    wait_for("informer sees `before`", Duration::from_secs(10), || {
        if has("before") {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    let rv_before = informer.last_sync_resource_version();

    server
        .terminate(Duration::from_secs(10))
        .expect("clean exit");
    let server = Minik8s::up_on(dir.path(), port, &["--nodes", "0"]);
    let k = server.kubectl();
    k.ok(&["create", "configmap", "after"]);
    k.ok(&["delete", "configmap", "before"]);
    wait_for(
        "informer follows the restarted server",
        Duration::from_secs(30),
        || {
            if has("after") && !has("before") {
                Ok(())
            } else {
                Err(format!("after={} before={}", has("after"), has("before")))
            }
        },
    );
    let rv_after: u64 = informer.last_sync_resource_version().parse().unwrap_or(0);
    assert!(rv_after > rv_before.parse::<u64>().unwrap_or(0));
    shutdown.cancel();
}
