//! The library form: several sandboxes in one test binary, each on its own port, none sharing state.

use std::time::Duration;

use minik8s::client::{Api, ListParams};
use minik8s::k8s_openapi::api::core::v1::{ConfigMap, Node};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sandboxes_in_parallel_do_not_share_anything() {
    let (a, b) = tokio::join!(
        minik8s::Sandbox::builder().nodes(1).in_memory().start(),
        minik8s::Sandbox::builder().nodes(2).in_memory().start(),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_ne!(a.url(), b.url());
    assert_ne!(a.kubeconfig_path(), b.kubeconfig_path());

    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "only-in-a"}})).unwrap();
    let a_cms: Api<ConfigMap> = a.client().api(Some("default"));
    a_cms.create(&cm).await.unwrap();
    let b_cms: Api<ConfigMap> = b.client().api(Some("default"));
    assert!(b_cms.get("only-in-a").await.unwrap_err().is_not_found());

    for (sandbox, want) in [(&a, 1), (&b, 2)] {
        let nodes: Api<Node> = sandbox.client().all();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let n = nodes
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len();
            if n == want {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{n} nodes, want {want}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_kubeconfig_written_by_the_sandbox_works_with_kubectl() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    let k = tests::Kubectl::new(sandbox.kubeconfig_path());
    let path = sandbox.kubeconfig_path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let _ = path;
        k.ok(&["get", "namespaces"])
    })
    .await
    .unwrap();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(out.contains(ns), "{out}");
    }
}

#[tokio::test]
async fn kube_rs_client_from_the_sandbox_lists_and_creates() {
    use kube::api::{Api as KubeApi, ListParams as KubeListParams, PostParams};
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    let kube = sandbox.kube_client().unwrap();
    let cms: KubeApi<ConfigMap> = KubeApi::namespaced(kube, "default");
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "from-kube-rs"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let names: Vec<_> = cms
        .list(&KubeListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(names.contains(&"from-kube-rs".to_string()), "{names:?}");
}
