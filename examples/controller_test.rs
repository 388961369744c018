//! A controller test written against `minik8s::Sandbox`: the shape of an end-to-end test a controller
//! author writes, with a real apiserver, the real replication controller and fake kubelets, in memory.
//!
//! The controller under test, `ConfigMapStamper`, is the smallest useful controller built the client-go
//! way: a shared informer over ConfigMaps, a rate-limited work queue of `namespace/name` keys, and a
//! worker that stamps each ConfigMap with an annotation naming the number of keys in its data.
//!
//! Run it: `cargo run --example controller_test`; `cargo test --example controller_test` runs it as a test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use minik8s::client::{
    split_meta_namespace_key, Api, FnHandler, ListParams, Patch, RateLimitingQueue,
    SharedInformerFactory,
};
use minik8s::k8s_openapi::api::apps::v1::ReplicaSet;
use minik8s::k8s_openapi::api::core::v1::{ConfigMap, Pod};
use tokio_util::sync::CancellationToken;

const ANNOTATION: &str = "example.minik8s.dev/keys";

/// Stamps every ConfigMap with the number of its data keys.
struct ConfigMapStamper {
    client: minik8s::client::Client,
    queue: RateLimitingQueue<String>,
}

impl ConfigMapStamper {
    async fn run(self: Arc<Self>, factory: &SharedInformerFactory, shutdown: CancellationToken) {
        let informer = factory.informer::<ConfigMap>();
        let q = self.queue.clone();
        let q2 = self.queue.clone();
        informer.add_event_handler(
            FnHandler::new()
                .on_add(move |cm: &Arc<ConfigMap>, _| {
                    q.add(minik8s::client::meta_namespace_key(cm.as_ref()))
                })
                .on_update(move |_, cm: &Arc<ConfigMap>| {
                    q2.add(minik8s::client::meta_namespace_key(cm.as_ref()))
                }),
        );
        factory.start(shutdown.clone());
        if !factory.wait_for_cache_sync(&shutdown).await {
            return;
        }
        let lister = informer.lister();
        while let Some(key) = self.queue.get().await {
            let result = self.sync(&lister, &key).await;
            match result {
                Ok(()) => self.queue.forget(&key),
                Err(e) => {
                    eprintln!("sync {key}: {e}; retrying");
                    self.queue.add_rate_limited(key.clone());
                }
            }
            self.queue.done(&key);
        }
    }

    async fn sync(
        &self,
        lister: &minik8s::client::Lister<ConfigMap>,
        key: &str,
    ) -> Result<(), minik8s::client::Error> {
        let (ns, name) = split_meta_namespace_key(key)?;
        let Some(cm) = lister.namespace(ns).get(name) else {
            return Ok(()); // deleted meanwhile
        };
        let want = cm.data.as_ref().map_or(0, |d| d.len()).to_string();
        let have = cm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION));
        if have == Some(&want) {
            return Ok(());
        }
        let api: Api<ConfigMap> = self.client.api(Some(ns));
        let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION: want}}});
        api.patch(name, &Patch::Merge(patch)).await?;
        Ok(())
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

/// The scenario: the stamper stamps ConfigMaps, and the built-in controllers run pods beside it.
async fn scenario() {
    let sandbox = minik8s::Sandbox::builder()
        .nodes(2)
        .in_memory()
        .start()
        .await
        .unwrap_or_else(|e| panic!("sandbox: {e}"));
    let client = sandbox.client();
    let shutdown = CancellationToken::new();
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let stamper = Arc::new(ConfigMapStamper {
        client: client.clone(),
        queue: RateLimitingQueue::with_default_controller_rate_limiter("stamper"),
    });
    let task = {
        let (stamper, shutdown) = (stamper.clone(), shutdown.clone());
        tokio::spawn(async move { stamper.run(&factory, shutdown).await })
    };

    let cms: Api<ConfigMap> = client.api(Some("default"));
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "settings"}, "data": {"a": "1", "b": "2"}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    cms.create(&cm)
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));
    eventually("the stamp", Duration::from_secs(10), || async {
        let cm = cms.get("settings").await.ok()?;
        (cm.metadata.annotations?.get(ANNOTATION)? == "2").then_some(())
    })
    .await;

    // The rest of the control plane is real too: a ReplicaSet gets Running pods from the fake kubelets.
    let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let rss: Api<ReplicaSet> = client.api(Some("default"));
    rss.create(&rs)
        .await
        .unwrap_or_else(|e| panic!("create rs: {e}"));
    let pods: Api<Pod> = client.api(Some("default"));
    eventually("3 running pods", Duration::from_secs(20), || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?;
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 3).then_some(())
    })
    .await;

    shutdown.cancel();
    stamper.queue.shut_down();
    let _ = task.await;
    sandbox.stop().await;
}

#[tokio::main]
async fn main() {
    scenario().await;
    println!("controller_test: ok");
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stamper_stamps_configmaps_beside_the_builtin_controllers() {
        super::scenario().await;
    }
}
