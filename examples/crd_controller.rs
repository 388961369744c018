//! A controller for a custom resource, written with the same client framework as the built-in
//! replication controller, and its end-to-end test against a `Sandbox` that installs the CRD
//! from `examples/crds/` (as envtest's `CRDDirectoryPaths`).
//!
//! The resource: `Greeting` (`example.minik8s.dev/v1`, `examples/crds/greeting.yaml`) names
//! someone in `spec.name`, optionally with `spec.greeting`. The controller keeps a ConfigMap
//! `greeting-<name>` owned by the Greeting with `data.message: "<greeting>, <name>!"`, and
//! reports it in `status.configMap` and `status.observedGeneration`.
//!
//! The wiring, client-go style:
//! * the `RestMapper` resolves the kind through discovery (the CRD is served once Established);
//! * a dynamic shared informer over Greetings and a typed one over ConfigMaps, from one
//!   `SharedInformerFactory`; ConfigMap events enqueue their controlling Greeting;
//! * a rate-limited work queue of `namespace/name` keys drained by the `Runner` (2 workers);
//! * reads from the listers, writes through `Api<ConfigMap>` and the Greeting's `status`;
//! * the ConfigMap carries a controller owner reference to its Greeting.
//!
//! Run it: `cargo run --example crd_controller`; `cargo test --example crd_controller` runs it
//! as a test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use minik8s::client::{
    self, meta_namespace_key, split_meta_namespace_key, Action, Api, ApiResource, DynamicObject,
    FnHandler, GroupVersionKind, Lister, Patch, RateLimitingQueue, RestMapper, Runner,
    SharedInformerFactory,
};
use minik8s::k8s_openapi::api::core::v1::ConfigMap;
use minik8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const GROUP: &str = "example.minik8s.dev";
const KIND: &str = "Greeting";

/// The Greeting controller.
struct GreetingController {
    client: client::Client,
    /// The Greeting resource, from discovery.
    greetings: ApiResource,
    queue: RateLimitingQueue<String>,
}

/// The ConfigMap a Greeting should have.
fn desired_config_map(greeting: &DynamicObject) -> ConfigMap {
    let name = greeting
        .pointer("/spec/name")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    let word = greeting
        .pointer("/spec/greeting")
        .and_then(|v| v.as_str())
        .unwrap_or("Hello");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(format!("greeting-{}", greeting.name()));
    cm.metadata.namespace = greeting.namespace().map(str::to_string);
    cm.metadata.owner_references = Some(vec![OwnerReference {
        api_version: greeting.api_version.clone(),
        kind: greeting.kind.clone(),
        name: greeting.name().to_string(),
        uid: greeting.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    cm.data = Some([("message".to_string(), format!("{word}, {name}!"))].into());
    cm
}

impl GreetingController {
    /// Registers the handlers and starts the informers; runs the workers until `shutdown`.
    async fn run(self: Arc<Self>, factory: &SharedInformerFactory, shutdown: CancellationToken) {
        let greetings = factory.dynamic_informer(&self.greetings);
        let config_maps = factory.informer::<ConfigMap>();
        let (q1, q2) = (self.queue.clone(), self.queue.clone());
        greetings.add_event_handler(
            FnHandler::new()
                .on_add(move |g: &Arc<DynamicObject>, _| q1.add(meta_namespace_key(g.as_ref())))
                .on_update(move |_, g: &Arc<DynamicObject>| q2.add(meta_namespace_key(g.as_ref()))),
        );
        // A changed or deleted ConfigMap wakes its controlling Greeting.
        let owner_key = |cm: &ConfigMap| -> Option<String> {
            let owner = cm
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|r| r.controller == Some(true) && r.kind == KIND)?;
            let (group, _) = owner.api_version.split_once('/')?;
            (group == GROUP).then(|| {
                format!(
                    "{}/{}",
                    cm.metadata.namespace.as_deref().unwrap_or_default(),
                    owner.name
                )
            })
        };
        let (q3, q4) = (self.queue.clone(), self.queue.clone());
        config_maps.add_event_handler(
            FnHandler::new()
                .on_update(move |_, cm: &Arc<ConfigMap>| {
                    if let Some(k) = owner_key(cm) {
                        q3.add(k)
                    }
                })
                .on_delete(move |d| {
                    if let Some(k) = owner_key(d.object()) {
                        q4.add(k)
                    }
                }),
        );
        factory.start(shutdown.clone());
        let (greeting_lister, cm_lister) = (greetings.lister(), config_maps.lister());
        let this = self.clone();
        Runner::new("greeting")
            .workers(2)
            .run_workers(
                self.queue.clone(),
                &[&greetings, &config_maps],
                &shutdown,
                move |key: String| {
                    let (this, greetings, cms) =
                        (this.clone(), greeting_lister.clone(), cm_lister.clone());
                    async move { this.sync(&greetings, &cms, &key).await }
                },
            )
            .await;
    }

    /// Brings one Greeting's ConfigMap and status to what its spec says.
    async fn sync(
        &self,
        greetings: &Lister<DynamicObject>,
        config_maps: &Lister<ConfigMap>,
        key: &str,
    ) -> Result<Action, client::Error> {
        let (ns, name) = split_meta_namespace_key(key)?;
        let Some(greeting) = greetings.namespace(ns).get(name) else {
            // Deleted: the garbage collector removes the ConfigMap it owned.
            return Ok(Action::AwaitChange);
        };
        if greeting.metadata.deletion_timestamp.is_some() {
            return Ok(Action::AwaitChange);
        }
        let want = desired_config_map(&greeting);
        let cm_name = want.metadata.name.clone().unwrap_or_default();
        let cms: Api<ConfigMap> = self.client.api(Some(ns));
        match config_maps.namespace(ns).get(&cm_name) {
            None => match cms.create(&want).await {
                Ok(_) => {}
                // The cache has not seen it yet; the informer's event brings us back.
                Err(e) if e.is_already_exists() => {}
                Err(e) => return Err(e),
            },
            Some(have) if have.data != want.data => {
                cms.patch(&cm_name, &Patch::Merge(json!({"data": want.data})))
                    .await?;
            }
            Some(_) => {}
        }
        let generation = greeting.metadata.generation.unwrap_or_default();
        let status_ok = greeting
            .pointer("/status/configMap")
            .and_then(|v| v.as_str())
            == Some(cm_name.as_str())
            && greeting
                .pointer("/status/observedGeneration")
                .and_then(|v| v.as_i64())
                == Some(generation);
        if !status_ok {
            let api = self.client.dynamic(&self.greetings, Some(ns));
            api.patch_status(
                name,
                &Patch::Merge(json!({"status": {
                    "configMap": cm_name, "observedGeneration": generation}})),
            )
            .await?;
        }
        Ok(Action::AwaitChange)
    }
}

/// Polls `check` until it returns `Some`, for at most `timeout`.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The scenario: the CRD installed from `examples/crds/`, the controller reconciling Greetings
/// beside the built-in controllers.
async fn scenario() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .crds_from_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/crds"))
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    let client = sandbox.client();
    let mapper = RestMapper::new(client.clone());
    let resource = mapper
        .resolve(&GroupVersionKind::new(GROUP, "v1", KIND))
        .await
        .unwrap_or_else(|e| panic!("resolve: {e}"));
    assert!(resource.namespaced && resource.has_subresource("status"));

    let shutdown = CancellationToken::new();
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let controller = Arc::new(GreetingController {
        client: client.clone(),
        greetings: resource.clone(),
        queue: RateLimitingQueue::with_default_controller_rate_limiter("greeting"),
    });
    let task = {
        let (controller, shutdown) = (controller.clone(), shutdown.clone());
        tokio::spawn(async move { controller.run(&factory, shutdown).await })
    };

    let greetings = client.dynamic(&resource, Some("default"));
    let cms: Api<ConfigMap> = client.api(Some("default"));
    let greeting: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": KIND,
        "metadata": {"name": "world"},
        "spec": {"name": "World"}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let created = greetings
        .create(&greeting)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));

    eventually("the ConfigMap", Duration::from_secs(10), || async {
        let cm = cms.get_opt("greeting-world").await.ok()??;
        let owner = cm.metadata.owner_references.as_ref()?.first()?.uid.clone();
        (cm.data?.get("message")? == "Hello, World!" && Some(owner) == created.metadata.uid)
            .then_some(())
    })
    .await;
    eventually("the status", Duration::from_secs(10), || async {
        let g = greetings.get("world").await.ok()?;
        let generation = g.metadata.generation?;
        (g.pointer("/status/configMap")? == "greeting-world"
            && g.pointer("/status/observedGeneration")?.as_i64()? == generation)
            .then_some(())
    })
    .await;

    // A spec change is reconciled; so is a ConfigMap edited behind the controller's back.
    greetings
        .patch("world", &Patch::Merge(json!({"spec": {"greeting": "Hi"}})))
        .await
        .unwrap_or_else(|e| panic!("patch: {e}"));
    eventually("the new message", Duration::from_secs(10), || async {
        let cm = cms.get("greeting-world").await.ok()?;
        (cm.data?.get("message")? == "Hi, World!").then_some(())
    })
    .await;
    cms.patch(
        "greeting-world",
        &Patch::Merge(json!({"data": {"message": "tampered"}})),
    )
    .await
    .unwrap_or_else(|e| panic!("tamper: {e}"));
    eventually("the message restored", Duration::from_secs(10), || async {
        let cm = cms.get("greeting-world").await.ok()?;
        (cm.data?.get("message")? == "Hi, World!").then_some(())
    })
    .await;

    // Deleting the Greeting: the controller stops caring (the ConfigMap's owner reference leaves
    // it to a garbage collector that follows custom-resource owners).
    greetings
        .delete("world", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("delete: {e}"));
    eventually("the Greeting gone", Duration::from_secs(10), || async {
        greetings
            .get_opt("world")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    shutdown.cancel();
    let _ = task.await;
    sandbox.stop().await;
}

#[tokio::main]
async fn main() {
    scenario().await;
    println!("crd_controller: ok");
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn greetings_get_their_config_maps_and_status() {
        super::scenario().await;
    }
}
