//! Regression: every long-running future of the crate must be `Send` so callers can
//! `tokio::spawn` it (an early `LeaderElector::run` held a non-`Sync` closure across awaits and
//! forced the controller manager onto a blocking thread).

use std::time::Duration;

use client::testing::MemoryListerWatcher;
use client::{
    Client, Config, EventBroadcaster, LeaderCallbacks, LeaderElectionConfig, LeaderElector,
    ListParams, RateLimitingQueue, SharedIndexInformer, SharedInformerFactory,
};
use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use tokio_util::sync::CancellationToken;

fn assert_send<T: Send>(_: &T) {}

#[tokio::test]
async fn regression_long_running_futures_are_send() -> Result<(), String> {
    let client = Client::new(Config::new("http://127.0.0.1:9")).map_err(|e| e.to_string())?;
    let token = CancellationToken::new();
    token.cancel();

    let mut cfg = LeaderElectionConfig::new("kube-system", "l", "me");
    cfg.release_on_cancel = false;
    let elector = LeaderElector::new(client.clone(), cfg).map_err(|e| e.to_string())?;
    let callbacks = LeaderCallbacks {
        on_started_leading: Box::new(|_t| async {}.boxed()),
        on_stopped_leading: Box::new(|| {}),
        on_new_leader: Some(Box::new(|_l: &str| {})),
    };
    let fut = async move { elector.run(token.clone(), callbacks).await };
    assert_send(&fut);
    tokio::spawn(fut).await.map_err(|e| e.to_string())?;

    let inf = SharedIndexInformer::new(
        MemoryListerWatcher::<ConfigMap>::new(),
        ListParams::default(),
        Duration::ZERO,
    );
    let t = CancellationToken::new();
    t.cancel();
    let f = async move { inf.run(t).await };
    assert_send(&f);
    tokio::spawn(f).await.map_err(|e| e.to_string())?;

    let q: RateLimitingQueue<String> = RateLimitingQueue::with_default_controller_rate_limiter("q");
    q.shut_down();
    let f = async move { q.get().await };
    assert_send(&f);
    assert_eq!(tokio::spawn(f).await.map_err(|e| e.to_string())?, None);

    let b = EventBroadcaster::new(client.clone(), "c");
    let t = CancellationToken::new();
    t.cancel();
    let f = b.run(t);
    assert_send(&f);
    tokio::spawn(f).await.map_err(|e| e.to_string())?;

    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let f = async move { factory.shutdown().await };
    assert_send(&f);
    tokio::spawn(f).await.map_err(|e| e.to_string())?;
    Ok(())
}
