//! Objects read from storage are defaulted, end to end: a pod left bare in an on-disk data dir
//! (as an older minik8s, or another writer, stored it) reads with the scheme's defaults through
//! the real kubectl after a Sandbox starts on that data dir, with the resourceVersion it was
//! stored at (nothing is written back). And a data dir keeps object texts compressed, and serves
//! them again after a restart.
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

/// A data dir keeps object texts compressed (`StoredText::Lz4`): the value on disk is the
/// object's JSON behind the codec's prefix, and a sandbox started again on the data dir serves
/// the object as it was written, at the same resourceVersion. The pod above, stored as plain
/// JSON, shows the other half: values written before the codec are read as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_keeps_objects_compressed_and_serves_them_again() {
    use apiserver::watch_cache::stored;
    use k8s_openapi::api::core::v1::ConfigMap;

    let dir = tempfile::tempdir().unwrap();
    let start = || async {
        // The store's file lock goes with its last handle: start once it is free.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            match minik8s::Sandbox::builder()
                .data_dir(dir.path())
                .without_controllers()
                .start()
                .await
            {
                Ok(sandbox) => break sandbox,
                Err(e) if std::time::Instant::now() < deadline => {
                    eprintln!("not yet: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => panic!("the sandbox starts on the data dir: {e}"),
            }
        }
    };
    let data: std::collections::BTreeMap<String, String> =
        [("line".to_string(), "the same line again. ".repeat(40))].into();

    let sandbox = start().await;
    let cms = sandbox.client().api::<ConfigMap>(Some("default"));
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("kept".into());
    cm.data = Some(data.clone());
    let written = cms.create(&cm).await.unwrap();
    sandbox.stop().await;

    let key = "/registry/configmaps/default/kept";
    {
        let store = store::SledStore::open(&dir.path().join("store"), Default::default()).unwrap();
        let kv = store.get(key).await.unwrap().expect("stored");
        assert!(stored::is_compressed(&kv.value), "{:?}", &kv.value[..16]);
        let json = stored::plain(&kv.value).unwrap();
        assert!(
            kv.value.len() * 2 < json.len(),
            "{} of {}",
            kv.value.len(),
            json.len()
        );
        let on_disk: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(on_disk["data"]["line"], data["line"], "{on_disk}");
        assert_eq!(on_disk["metadata"]["uid"], json!(written.metadata.uid));
        store.flush_and_close().await.unwrap();
    }

    let sandbox = start().await;
    let cms = sandbox.client().api::<ConfigMap>(Some("default"));
    let read = cms.get("kept").await.unwrap();
    assert_eq!(read.data, Some(data));
    assert_eq!(
        read.metadata.resource_version,
        written.metadata.resource_version
    );
    let listed = cms.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata.uid, written.metadata.uid);
    sandbox.stop().await;
}
