//! `componentstatuses` in a full sandbox: the controller manager and its scheduler run in the
//! process, so they (and the store, `etcd-0`) are reported healthy, as `kubectl get cs` shows on
//! a real cluster; without the controller manager they are not.

use minik8s::client::{Api, ListParams};
use minik8s::k8s_openapi::api::core::v1::ComponentStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_components_are_reported_healthy() {
    let sandbox = minik8s::Sandbox::builder()
        .nodes(0)
        .in_memory()
        .start()
        .await
        .unwrap();
    let api: Api<ComponentStatus> = sandbox.client().all();
    let list = api.list(&ListParams::default()).await.unwrap();
    let health: Vec<(String, String, String)> = list
        .items
        .iter()
        .map(|cs| {
            let c = cs
                .conditions
                .as_ref()
                .and_then(|c| c.first())
                .cloned()
                .unwrap_or_default();
            (
                cs.metadata.name.clone().unwrap_or_default(),
                c.status,
                c.message.unwrap_or_default(),
            )
        })
        .collect();
    let want = |n: &str| (n.to_string(), "True".to_string(), "ok".to_string());
    assert_eq!(
        health,
        [
            want("controller-manager"),
            want("etcd-0"),
            want("scheduler")
        ]
    );
    sandbox.stop().await;

    // Without the controller manager, only the store is healthy.
    let bare = minik8s::Sandbox::builder()
        .nodes(0)
        .without_controllers()
        .in_memory()
        .start()
        .await
        .unwrap();
    let api: Api<ComponentStatus> = bare.client().all();
    let cm = api.get("controller-manager").await.unwrap();
    let c = cm.conditions.unwrap_or_default();
    assert_eq!(c.first().map(|c| c.status.as_str()), Some("False"));
    assert_eq!(
        c.first().and_then(|c| c.error.as_deref()),
        Some("controller-manager does not run in this process")
    );
    bare.stop().await;
}
