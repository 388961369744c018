//! The `Dangling` condition of FlowSchemas kept current as priority levels come and go (upstream
//! `apf_controller.go` writes it for every FlowSchema after each configuration change).
//!
//! The condition is computed when a FlowSchema is written (its strategy's admission hook); this
//! task recomputes it for every FlowSchema whenever a PriorityLevelConfiguration is created or
//! deleted — and once at start — and writes the FlowSchemas whose condition changed through the
//! generic store (a server-internal write, field manager upstream's
//! `api-priority-and-fairness-config-consumer-v1`). Levels are followed in the watch cache (a
//! watch from a snapshot, re-made after a pause when the cache drops it).

use std::time::Duration;

use serde_json::Value;

use super::controller::PRIORITY_LEVELS;
use crate::error::ApiError;
use crate::registry::store::{Attempt, CachedObjects, WriteScope};
use crate::registry::strategy::set_dangling;
use crate::registry::{Objects, Preconditions, Store, WriteOptions};
use crate::state::AppState;
use crate::watch_cache::{EventType, WatchFrom, WatchStart};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

/// Upstream's field manager of the condition.
const FIELD_MANAGER: &str = "api-priority-and-fairness-config-consumer-v1";

/// Pause before watching again after the cache dropped a watch.
const REWATCH_PAUSE: Duration = Duration::from_millis(100);

/// Starts the task; it runs until shutdown.
pub fn keep_in_step(state: &AppState) {
    let state = state.clone();
    tokio::spawn(async move {
        loop {
            let WatchStart::Watching(mut w) =
                state.cache.watch(PRIORITY_LEVELS, WatchFrom::Snapshot)
            else {
                return;
            };
            refresh(&state).await;
            loop {
                tokio::select! {
                    _ = state.shutdown.cancelled() => return,
                    ev = w.rx.recv() => match ev {
                        Some(ev) => {
                            let mut changed = ev.kind != EventType::Modified;
                            while let Ok(ev) = w.rx.try_recv() {
                                changed |= ev.kind != EventType::Modified;
                            }
                            if changed {
                                refresh(&state).await;
                            }
                        }
                        None => break,
                    },
                }
            }
            tokio::select! {
                _ = state.shutdown.cancelled() => return,
                _ = tokio::time::sleep(REWATCH_PAUSE) => {}
            }
        }
    });
}

/// Writes every FlowSchema whose `Dangling` condition no longer says whether its level exists.
async fn refresh(state: &AppState) {
    let Some(resource) = state.resources.find(GROUP, "v1", "flowschemas") else {
        return;
    };
    let store = Store::new(state, resource, None);
    let objects = CachedObjects::new(state);
    let opts = WriteOptions {
        field_manager: FIELD_MANAGER.to_string(),
        ..WriteOptions::default()
    };
    for fs in objects.list(GROUP, "flowschemas") {
        let mut updated = Value::clone(&fs);
        set_dangling(&mut updated, &objects);
        if updated == *fs {
            continue;
        }
        let name = api::meta::name(&fs).unwrap_or_default().to_string();
        let written = store
            .guaranteed_update(&name, "PUT", &Preconditions::default(), &opts, |current| {
                let Some(current) = current else {
                    return Err(ApiError::not_found(
                        "flowschemas.flowcontrol.apiserver.k8s.io",
                        &name,
                    ));
                };
                let mut new = Value::clone(&current.object);
                set_dangling(&mut new, &objects);
                if new == *current.object {
                    return Ok(Attempt::Keep);
                }
                store.prepare_update(
                    &mut new,
                    &current.object,
                    WriteScope::Internal,
                    FIELD_MANAGER,
                )?;
                Ok(Attempt::Write(new))
            })
            .await;
        if let Err(e) = written {
            if e.code() != 404 {
                tracing::warn!(flowschema = %name, error = %e, "writing the Dangling condition failed");
            }
        }
    }
}
