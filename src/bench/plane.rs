//! The control plane each whole-system benchmark runs on: everything in this process (apiserver,
//! controller manager, `nodes` fake kubelets), served on `127.0.0.1:0`, and started only once every
//! fake node is Ready, so what a benchmark times is its own work, not the nodes' registration.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;

use controller::scheduler::filter::node_ready;

use super::Error;
use crate::control_plane::{ControlPlane, ControlPlaneConfig, Storage};

/// The configuration: controllers on, `nodes` fake nodes, in memory or on disk under `dir`.
pub(super) fn config(nodes: usize, on_disk: Option<&std::path::Path>) -> ControlPlaneConfig {
    ControlPlaneConfig {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        storage: on_disk.map_or(Storage::InMemory, |d| Storage::Dir(d.to_path_buf())),
        kubeconfig: on_disk.map(|d| d.join("kubeconfig")),
        nodes,
        controllers: true,
        ..ControlPlaneConfig::default()
    }
}

/// Starts `config` and waits (at most `deadline`) until its `config.nodes` nodes are Ready;
/// returns the plane and how long that took.
pub(super) async fn start_ready(
    config: ControlPlaneConfig,
    deadline: Duration,
) -> Result<(ControlPlane, Duration), Error> {
    let nodes = config.nodes;
    let started = Instant::now();
    let plane = ControlPlane::start(config).await?;
    let node_api = plane.client().api::<Node>(None);
    loop {
        let ready = node_api
            .list(&client::ListParams::default())
            .await
            .map(|l| l.items.iter().filter(|n| node_ready(n)).count())
            .unwrap_or(0);
        if ready >= nodes {
            return Ok((plane, started.elapsed()));
        }
        if started.elapsed() > deadline {
            return Err(Error::Failed(format!("{nodes} nodes not Ready in time")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A watch of `api`'s objects matching `lp` from now: a LIST for the current resourceVersion, then
/// the watch from it.
pub(super) async fn watch_from_now<K: client::rest::api::ApiObject>(
    api: &client::Api<K>,
    lp: &client::ListParams,
) -> Result<client::WatchStream<K>, Error> {
    let rv = api
        .list(lp)
        .await
        .map_err(|e| Error::Failed(format!("list: {e}")))?
        .resource_version;
    api.watch(lp, &rv)
        .await
        .map_err(|e| Error::Failed(format!("watch: {e}")))
}

/// The next event of `stream` before `until`: `Ok(None)` once `until` passes. A watch that fails,
/// ends, or is ended by the server (an ERROR event, e.g. 410) makes the figures wrong: an error.
pub(super) async fn next_event<K>(
    stream: &mut client::WatchStream<K>,
    until: Instant,
) -> Result<Option<client::WatchEvent<K>>, Error> {
    match tokio::time::timeout_at(until.into(), futures::StreamExt::next(stream)).await {
        Ok(Some(Ok(client::WatchEvent::Error(st)))) => Err(Error::Failed(format!(
            "watch ended by the server: {}",
            st.message.unwrap_or_default()
        ))),
        Ok(Some(Ok(ev))) => Ok(Some(ev)),
        Ok(Some(Err(e))) => Err(Error::Failed(format!("watch: {e}"))),
        Ok(None) => Err(Error::Failed("watch ended".into())),
        Err(_) => Ok(None),
    }
}
