//! The configuration controller (upstream `apf_controller.go`, read for behaviour): follows
//! FlowSchemas and PriorityLevelConfigurations in the watch cache and puts every change in force
//! at once; adjusts borrowing every 10 s.
//!
//! One task per apiserver watches both prefixes from a snapshot (re-made after a pause when the
//! cache drops the watch: it fell behind or relisted), keeps the current objects by key, and
//! after each batch of events digests them all and calls [`FlowControl::apply`] — but not before
//! the store has held every bootstrap object once: while the bootstrap writes them one by one
//! (a fresh store), a partial set would send requests to `catch-all`, so the built-in bootstrap
//! configuration stays in force until then; from then on the objects are followed as they are,
//! deletions included. Requests never
//! read the store: they read the last applied [`super::Dispatch`]. Objects that do not decode
//! are skipped (the strategies validate them on write).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{config, FlowControl};
use crate::watch_cache::{CacheEvent, CacheWatch, EventType, WatchCache, WatchFrom, WatchStart};

/// The storage prefix of FlowSchemas.
pub const FLOW_SCHEMAS: &str = "/registry/flowschemas/";
/// The storage prefix of PriorityLevelConfigurations.
pub const PRIORITY_LEVELS: &str = "/registry/prioritylevelconfigurations/";

/// Pause before watching again after the cache dropped a watch.
const REWATCH_PAUSE: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Objects {
    levels: BTreeMap<String, Arc<Value>>,
    schemas: BTreeMap<String, Arc<Value>>,
}

/// Whether every bootstrap object is among `objects` (by storage key).
fn bootstrapped(objects: &Objects) -> bool {
    let has = |map: &BTreeMap<String, Arc<Value>>, prefix: &str, objs: Vec<Value>| {
        objs.iter().all(|o| {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            map.contains_key(&format!("{prefix}{name}"))
        })
    };
    has(
        &objects.levels,
        PRIORITY_LEVELS,
        crate::bootstrap::flowcontrol::priority_levels(),
    ) && has(
        &objects.schemas,
        FLOW_SCHEMAS,
        crate::bootstrap::flowcontrol::flow_schemas(),
    )
}

impl Objects {
    fn apply(&mut self, ev: &CacheEvent) {
        let map = if ev.key.starts_with(FLOW_SCHEMAS) {
            &mut self.schemas
        } else {
            &mut self.levels
        };
        if ev.kind == EventType::Deleted {
            map.remove(&ev.key);
        } else {
            map.insert(ev.key.clone(), ev.object.clone());
        }
    }

    fn put_in_force(&self, fc: &FlowControl) {
        fc.apply(
            self.levels
                .values()
                .filter_map(|v| config::level_spec(v))
                .collect(),
            self.schemas
                .values()
                .filter_map(|v| config::schema_spec(v))
                .collect(),
        );
    }
}

fn watch(cache: &WatchCache, prefix: &str) -> Option<CacheWatch> {
    match cache.watch(prefix, WatchFrom::Snapshot) {
        WatchStart::Watching(w) => Some(w),
        WatchStart::Expired { .. } => None,
    }
}

/// Follows the configuration in `cache` and adjusts borrowing until `shutdown`.
pub async fn run(fc: Arc<FlowControl>, cache: Arc<WatchCache>, shutdown: CancellationToken) {
    let mut borrowing = tokio::time::interval(super::borrowing::ADJUSTMENT_PERIOD);
    borrowing.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    borrowing.tick().await;
    let mut following = false;
    loop {
        let (Some(mut s), Some(mut l)) =
            (watch(&cache, FLOW_SCHEMAS), watch(&cache, PRIORITY_LEVELS))
        else {
            return;
        };
        let mut objects = Objects::default();
        for ev in s.initial.drain(..).chain(l.initial.drain(..)) {
            objects.apply(&ev);
        }
        following = following || bootstrapped(&objects);
        if following {
            objects.put_in_force(&fc);
        }
        loop {
            let ev = tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = borrowing.tick() => {
                    fc.adjust_borrowing(Instant::now());
                    continue;
                }
                ev = s.rx.recv() => ev,
                ev = l.rx.recv() => ev,
            };
            let Some(ev) = ev else { break };
            objects.apply(&ev);
            // The rest of a burst (bootstrap writes every object) is applied at once.
            while let Ok(ev) = s.rx.try_recv().or_else(|_| l.rx.try_recv()) {
                objects.apply(&ev);
            }
            following = following || bootstrapped(&objects);
            if following {
                objects.put_in_force(&fc);
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(REWATCH_PAUSE) => {}
        }
    }
}
