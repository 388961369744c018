//! kube-rs against a secure Sandbox (issue 18: users are shown working from kube-rs): the admin's
//! client (`Sandbox::kube_client()`) trusts the sandbox's CA and presents the admin certificate; a
//! user's (`Sandbox::kube_client_as`, the identity `Sandbox::add_user` gives, and a client loaded
//! from the kubeconfig `add_user` writes) is refused with upstream's 403 until RBAC allows it.
//! `kube_rs_crd.rs` runs its kube-rs `Controller` against a secure sandbox too.

use std::time::Duration;

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use minik8s::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use minik8s::k8s_openapi::api::rbac::v1::RoleBinding;
use serde_json::json;
use tokio::time::Instant;

async fn secure_sandbox() -> minik8s::Sandbox {
    minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"))
}

/// The 403 of a kube-rs call, with its message.
fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => status.message,
        other => panic!("expected 403, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_clients_authenticate_and_are_authorized_by_rbac() {
    let sandbox = secure_sandbox().await;
    assert!(sandbox.url().starts_with("https://"), "{}", sandbox.url());

    // The admin: a cluster-wide list works over TLS with the sandbox's CA.
    let admin = sandbox
        .kube_client()
        .unwrap_or_else(|e| panic!("admin client: {e}"));
    let namespaces = Api::<Namespace>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("admin list: {e}"));
    assert!(namespaces
        .items
        .iter()
        .any(|n| n.metadata.name.as_deref() == Some("default")));

    // A user: authenticated as itself, refused with upstream's message.
    let alice = sandbox
        .kube_client_as("alice", &["testers"])
        .unwrap_or_else(|e| panic!("alice client: {e}"));
    let alice_cms: Api<ConfigMap> = Api::namespaced(alice.clone(), "default");
    assert_eq!(
        forbidden(alice_cms.list(&ListParams::default()).await),
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );

    // The kubeconfig `add_user` writes loads in kube-rs and carries the same identity.
    let (_, path) = sandbox
        .add_user("bob", &[])
        .unwrap_or_else(|e| panic!("add_user: {e}"));
    let kubeconfig = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("kubeconfig {path:?}: {e}"));
    let bob = kube::Client::try_from(config).unwrap_or_else(|e| panic!("bob client: {e}"));
    let bob_cms: Api<ConfigMap> = Api::namespaced(bob, "default");
    assert_eq!(
        forbidden(bob_cms.create(&PostParams::default(), &ConfigMap::default()).await),
        "configmaps is forbidden: User \"bob\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );

    // The admin binds the group `testers` to `edit` in `default`: alice may now write there, and
    // only there.
    let binding: RoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "testers-edit", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "testers"}],
    }))
    .unwrap_or_else(|e| panic!("binding: {e}"));
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("create binding: {e}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "from-alice"},
        "data": {"who": "alice"},
    }))
    .unwrap_or_else(|e| panic!("configmap: {e}"));
    loop {
        // The authorizer reads bindings from the watch cache: allowed a moment after the write.
        match alice_cms
            .patch(
                "from-alice",
                &PatchParams::apply("alice").force(),
                &Patch::Apply(&cm),
            )
            .await
        {
            Ok(stored) => {
                assert_eq!(
                    stored.data.and_then(|d| d.get("who").cloned()).as_deref(),
                    Some("alice")
                );
                break;
            }
            Err(kube::Error::Api(s)) if s.code == 403 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("alice apply: {e}"),
        }
    }
    let other: Api<ConfigMap> = Api::namespaced(alice, "kube-system");
    assert_eq!(
        forbidden(other.list(&ListParams::default()).await),
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""
    );
    sandbox.stop().await;
}
