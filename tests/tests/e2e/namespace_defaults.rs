//! What every namespace gets from the controller manager, as on a real cluster: the `default`
//! ServiceAccount (serviceaccount controller) and the `kube-root-ca.crt` ConfigMap with the cluster
//! CA (root CA certificate publisher), both put back when deleted or changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use minik8s::client::{Api, DeleteParams};
use minik8s::k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};

/// Polls `f` until it yields a value, at most 10 s.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_gets_a_default_service_account_and_the_root_ca() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .start()
        .await
        .unwrap();
    let client = sandbox.client();
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "team-a"}})).unwrap();
    client.all::<Namespace>().create(&ns).await.unwrap();

    for namespace in [
        "team-a",
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
    ] {
        let sas: Api<ServiceAccount> = client.api(Some(namespace));
        eventually(&format!("{namespace}/default"), || async {
            sas.get_opt("default").await.unwrap()
        })
        .await;
        let cms: Api<ConfigMap> = client.api(Some(namespace));
        let cm = eventually(&format!("{namespace}/kube-root-ca.crt"), || async {
            cms.get_opt("kube-root-ca.crt").await.unwrap()
        })
        .await;
        let ca = cm
            .data
            .as_ref()
            .and_then(|d| d.get("ca.crt"))
            .cloned()
            .unwrap_or_default();
        assert!(
            ca.starts_with("-----BEGIN CERTIFICATE-----"),
            "{namespace}: {ca}"
        );
        let annotations = cm.metadata.annotations.unwrap_or_default();
        assert!(
            annotations["kubernetes.io/description"].starts_with("Contains a CA bundle"),
            "{annotations:?}"
        );
    }

    // Deleted: created again.
    let sas: Api<ServiceAccount> = client.api(Some("team-a"));
    let before = sas.get("default").await.unwrap().metadata.uid;
    sas.delete("default", &DeleteParams::default())
        .await
        .unwrap();
    let again = eventually("the default ServiceAccount again", || async {
        sas.get_opt("default")
            .await
            .unwrap()
            .filter(|sa| sa.metadata.uid != before)
    })
    .await;
    assert!(again.metadata.uid.is_some());

    // Changed: put back.
    let cms: Api<ConfigMap> = client.api(Some("team-a"));
    let mut cm = cms.get("kube-root-ca.crt").await.unwrap();
    let ca = cm.data.as_ref().unwrap()["ca.crt"].clone();
    cm.data = Some([("ca.crt".to_string(), "tampered".to_string())].into());
    cms.replace("kube-root-ca.crt", &cm).await.unwrap();
    eventually("the CA bundle restored", || async {
        let cm = cms.get("kube-root-ca.crt").await.unwrap();
        (cm.data.as_ref().unwrap()["ca.crt"] == ca).then_some(())
    })
    .await;
    sandbox.stop().await;
}
