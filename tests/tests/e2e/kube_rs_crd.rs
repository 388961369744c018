//! kube-rs controller authors' path: a `#[derive(CustomResource)]` type whose CRD is installed
//! by the Sandbox (`.crd(Counter::crd())`) or applied through the API with kube-rs itself, and a
//! `kube::runtime::Controller` reconciling it against the Sandbox (`Sandbox::kube_client()`),
//! plain and secure.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use minik8s::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::time::Instant;

/// A counter that should reach `target`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.minik8s.dev",
    version = "v1",
    kind = "Counter",
    namespaced,
    status = "CounterStatus",
    shortname = "ctr"
)]
pub struct CounterSpec {
    pub target: i64,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
pub struct CounterStatus {
    pub observed: i64,
    pub ready: bool,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

/// Sets `status` from `spec`.
async fn reconcile(
    counter: Arc<Counter>,
    client: Arc<kube::Client>,
) -> Result<Action, ReconcileError> {
    let ns = counter.namespace().unwrap_or_default();
    let api: Api<Counter> = Api::namespaced((*client).clone(), &ns);
    let want = CounterStatus {
        observed: counter.spec.target,
        ready: true,
    };
    if counter.status.as_ref().map(|s| (s.observed, s.ready)) != Some((want.observed, want.ready)) {
        api.patch_status(
            &counter.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": want})),
        )
        .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Counter>, _: &ReconcileError, _: Arc<kube::Client>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

/// Runs the controller until the test ends; waits until `check` holds for counter `name`.
async fn reconciled(client: kube::Client, name: &str, target: i64) {
    let api: Api<Counter> = Api::namespaced(client.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let c = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("get {name}: {e}"));
        if c.status
            .as_ref()
            .is_some_and(|s| s.ready && s.observed == target)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} not reconciled: {:?}",
            c.status
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn run_scenario(sandbox: &minik8s::Sandbox) {
    let client = sandbox
        .kube_client()
        .unwrap_or_else(|e| panic!("kube client: {e}"));
    let counters: Api<Counter> = Api::namespaced(client.clone(), "default");
    let controller = tokio::spawn(
        Controller::new(Api::<Counter>::all(client.clone()), Default::default())
            .run(reconcile, error_policy, Arc::new(client.clone()))
            .for_each(|_| async {}),
    );
    let counter = Counter::new("one", CounterSpec { target: 3 });
    counters
        .create(&PostParams::default(), &counter)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
    reconciled(client.clone(), "one", 3).await;
    counters
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"target": 5}})),
        )
        .await
        .unwrap_or_else(|e| panic!("patch: {e}"));
    reconciled(client.clone(), "one", 5).await;
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_runtime_controller_reconciles_a_derived_crd_installed_by_the_sandbox() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .without_controllers()
        .crd(Counter::crd())
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    run_scenario(&sandbox).await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_works_against_a_secure_sandbox() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .crd(Counter::crd())
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    assert!(sandbox.url().starts_with("https://"), "{}", sandbox.url());
    run_scenario(&sandbox).await;
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derived_crd_applied_with_kube_rs_is_established_and_served() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .without_controllers()
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    let client = sandbox
        .kube_client()
        .unwrap_or_else(|e| panic!("kube client: {e}"));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = Counter::crd_name();
    crds.patch(
        name,
        &PatchParams::apply("kube-rs-test").force(),
        &Patch::Apply(Counter::crd()),
    )
    .await
    .unwrap_or_else(|e| panic!("apply crd: {e}"));
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(crds, name, conditions::is_crd_established()),
    )
    .await
    .unwrap_or_else(|_| panic!("{name} not established"))
    .unwrap_or_else(|e| panic!("wait: {e}"));
    run_scenario(&sandbox).await;
    sandbox.stop().await;
}
