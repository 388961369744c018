//! `minik8s bench restart`: start-up over a store that already holds `--stored-pods` pods, the
//! cost of defaulting what the watch cache loads (upstream's storage codec defaults every object
//! it decodes).
//!
//! For two stores, one with the pods as this apiserver writes them (already defaulted) and one
//! with the same pods stored bare (a volume with only its name, no `restartPolicy`,
//! `dnsPolicy` or container defaults, as an older writer might have left them), it prints the
//! median of a few rounds of: the watch cache's initial load without defaulting (the floor), the
//! same load with the registry's defaults, and the whole apiserver state's start (cache, built-in
//! resources, derived state). In memory; every loop bounded by its count and `deadline`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::registry::{ClusterIpAllocator, ResourceRegistry};
use apiserver::watch_cache::{Defaulter, StorageDefaults, StoredText, WatchCache};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{ms, percentile, Error};

/// Rounds of each measurement (the median is printed).
const ROUNDS: usize = 3;

/// A pod of `pods/` as an older writer might have stored it.
fn bare_pod(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p-{i:06}"), "namespace": "default",
                     "uid": format!("00000000-0000-0000-0000-{i:012}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"app": "restart"}},
        "spec": {"volumes": [{"name": "scratch"}],
                 "nodeName": format!("node-{}", i % 100),
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                 "ports": [{"containerPort": 8080}]}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}
    })
}

fn key(i: usize) -> String {
    format!("/registry/pods/default/p-{i:06}")
}

async fn fill(
    registry: &ResourceRegistry,
    pods: usize,
    defaulted: bool,
    deadline: Instant,
) -> Result<Arc<dyn store::Store>, Error> {
    let store: Arc<dyn store::Store> = Arc::new(
        store::MemoryStore::new(store::StoreConfig::default())
            .map_err(|e| Error::Failed(format!("memory store: {e}")))?,
    );
    for i in 0..pods {
        if Instant::now() > deadline {
            return Err(Error::Failed("filling the store took too long".into()));
        }
        let mut pod = bare_pod(i);
        if defaulted {
            registry.default_stored(&key(i), &mut pod);
        }
        let bytes = bytes::Bytes::from(pod.to_string());
        store
            .create(&key(i), bytes)
            .await
            .map_err(|e| Error::Failed(format!("store create: {e}")))?;
    }
    Ok(store)
}

/// The median time of `ROUNDS` runs of `start` (each ended before the next).
async fn median<F, Fut>(mut start: F) -> Result<Duration, Error>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>>,
{
    let mut times = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let shutdown = CancellationToken::new();
        let t = Instant::now();
        start(shutdown.clone()).await?;
        times.push(t.elapsed());
        shutdown.cancel();
    }
    times.sort();
    Ok(percentile(&times, 0.5))
}

pub async fn restart(pods: usize, deadline: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + deadline;
    let registry = Arc::new(ResourceRegistry::new());
    apiserver::registry::builtin::register(&registry, &Arc::new(ClusterIpAllocator::new()))
        .map_err(|e| Error::Failed(format!("registering the built-in resources: {e}")))?;
    for (form, defaulted) in [("as written (defaulted)", true), ("bare", false)] {
        let store = fill(&registry, pods, defaulted, deadline).await?;
        let plain = median(|shutdown| {
            let store = store.clone();
            async move {
                WatchCache::start(store, 100, 100, shutdown)
                    .await
                    .map(drop)
                    .map_err(|e| Error::Failed(format!("watch cache: {e}")))
            }
        })
        .await?;
        let defaulting = median(|shutdown| {
            let (store, registry) = (store.clone(), registry.clone());
            async move {
                let cache = WatchCache::start_defaulting(
                    store,
                    Defaulter::new(registry),
                    StoredText::Json,
                    100,
                    100,
                    shutdown,
                )
                .await
                .map_err(|e| Error::Failed(format!("watch cache: {e}")))?;
                let sample = cache.get(&key(0));
                match sample.as_ref().map(|p| &p["spec"]["restartPolicy"]) {
                    Some(Value::String(p)) if p == "Always" => Ok(()),
                    _ => Err(Error::Failed(format!("not defaulted: {sample:?}"))),
                }
            }
        })
        .await?;
        let whole = median(|shutdown| {
            let store = store.clone();
            async move {
                apiserver::AppState::start(apiserver::Config::default(), store, shutdown)
                    .await
                    .map(drop)
                    .map_err(|e| Error::Failed(format!("apiserver state: {e}")))
            }
        })
        .await?;
        println!(
            "restart: {pods} stored pods {form}: watch cache load {} without defaulting, {} with; apiserver state start {} (median of {ROUNDS})",
            ms(plain),
            ms(defaulting),
            ms(whole)
        );
    }
    Ok(())
}
