//! Objects read from storage are defaulted, end to end: a pod left bare in an on-disk data dir
//! (as an older minik8s, or another writer, stored it) reads with the scheme's defaults through
//! the real kubectl after a Sandbox starts on that data dir, with the resourceVersion it was
//! stored at (nothing is written back).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use store::Store;

const KEY: &str = "/registry/pods/default/bare";

fn bare_pod() -> Vec<u8> {
    serde_json::to_vec(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "bare", "namespace": "default", "uid": "0b0e8f3a-1d7c-4f7e-9d51-3c1b2a4d5e6f",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"volumes": [{"name": "scratch"}],
                     "containers": [{"name": "c", "image": "busybox"}]}
        }),
    )
    .unwrap()
}

fn assert_defaulted(pod: &Value) {
    let spec = &pod["spec"];
    assert_eq!(spec["volumes"][0]["emptyDir"], json!({}), "{pod}");
    assert_eq!(spec["restartPolicy"], "Always", "{pod}");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst", "{pod}");
    assert_eq!(spec["schedulerName"], "default-scheduler", "{pod}");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30, "{pod}");
    assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always", "{pod}");
    assert_eq!(
        spec["containers"][0]["terminationMessagePath"], "/dev/termination-log",
        "{pod}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_left_bare_in_the_data_dir_reads_defaulted_through_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let stored_rev = {
        let store = store::SledStore::open(&store_dir, store::StoreConfig::default()).unwrap();
        let created = store.create(KEY, bare_pod().into()).await.unwrap();
        assert!(matches!(created, store::CreateOutcome::Created(_)));
        let rev = store.current_revision();
        store.flush_and_close().await.unwrap();
        rev
    };

    let sandbox = minik8s::Sandbox::builder()
        .data_dir(dir.path())
        .without_controllers()
        .start()
        .await
        .unwrap();
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let (pod, list, watched) = tokio::task::spawn_blocking(move || {
        let pod = k.json(&["get", "pod", "bare"]);
        let list = k.json(&["get", "pods"]);
        // A watch's first event (the current state), as JSON.
        let out = k.output(&[
            "get",
            "pods",
            "--watch-only=false",
            "-w",
            "--request-timeout=2s",
            "-o",
            "json",
        ]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (pod, list, text)
    })
    .await
    .unwrap();
    assert_defaulted(&pod);
    // Not written back: a write would have given it a new resourceVersion.
    assert_eq!(pod["metadata"]["resourceVersion"], stored_rev.to_string());
    assert_defaulted(&list["items"][0]);
    let first: Value = serde_json::Deserializer::from_str(&watched)
        .into_iter::<Value>()
        .next()
        .expect("a watch event")
        .unwrap();
    assert_defaulted(&first);
    sandbox.stop().await;
}
