//! The `Local` APIService of every served group-version, as kube-apiserver's `autoregister`
//! controller keeps them (see `registry::strategy::apiregistration`): created at start-up for
//! the built-in groups, and [`sync`] brings the set in step with the served resources whenever
//! it changes (a custom resource's group-version registered or removed): missing ones are
//! created, automanaged ones (`kube-aggregator.kubernetes.io/automanaged`) of group-versions no
//! longer served are deleted. APIServices created by users are never touched.

use serde_json::Value;

use crate::error::Result;
use crate::registry::strategy::{apiservice_name, local_apiservice, AUTOMANAGED_LABEL};
use crate::registry::{DeleteOptions, Store, WriteOptions};
use crate::state::AppState;

const GROUP: &str = "apiregistration.k8s.io";

/// Keeps the Local APIServices in step with the served set until shutdown: every change of the
/// registry (a custom resource's version registered or removed) is followed by a [`sync`].
pub fn keep_in_step(state: &AppState) {
    let state = state.clone();
    let mut changes = state.resources.subscribe();
    changes.mark_unchanged();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = state.shutdown.cancelled() => break,
                changed = changes.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
            }
            if let Err(e) = sync(&state).await {
                tracing::warn!(error = %e, "keeping the APIServices in step failed");
            }
        }
    });
}

/// How long a sync waits for the watch cache to hold every write so far.
const CACHE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Creates the missing Local APIServices and removes the automanaged ones nobody serves.
pub async fn sync(state: &AppState) -> Result<()> {
    let served = state.resources.snapshot();
    let wanted: Vec<(String, String)> = served
        .group_versions()
        .into_iter()
        .map(|(g, v)| (g.to_string(), v.to_string()))
        .collect();
    let Some(resource) = served.find(GROUP, "v1", "apiservices").cloned() else {
        return Ok(());
    };
    let store = Store::new(state, resource, None);
    // A start-up step, not a request: it waits for the watch cache as long as start-up may take,
    // not the request's `future_rv_wait`.
    if !state
        .cache
        .wait_for(state.store.current_revision(), CACHE_WAIT)
        .await
    {
        return Err(api::status::timeout("the watch cache is not caught up with the store").into());
    }
    let objects = crate::registry::store::CachedObjects::new(state);
    let existing = crate::registry::Objects::list(&objects, GROUP, "apiservices");
    let opts = WriteOptions {
        field_manager: "kube-apiserver".to_string(),
        ..WriteOptions::default()
    };
    let missing = wanted.iter().filter(|(g, v)| {
        let name = apiservice_name(g, v);
        !existing
            .iter()
            .any(|o| api::meta::name(o) == Some(name.as_str()))
    });
    let creates = missing.map(|(g, v)| store.create(local_apiservice(g, v), &opts));
    for created in futures::future::join_all(creates).await {
        match created {
            Ok(_) => {}
            Err(e) if e.code() == 409 => {}
            Err(e) => return Err(e),
        }
    }
    for obj in &existing {
        let managed = obj
            .pointer(&format!(
                "/metadata/labels/{}",
                AUTOMANAGED_LABEL.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .is_some();
        let name = api::meta::name(obj).unwrap_or("");
        let still = wanted.iter().any(|(g, v)| apiservice_name(g, v) == name);
        if managed && !still {
            match store.delete(name, &DeleteOptions::default()).await {
                Ok(_) => {}
                Err(e) if e.code() == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}
