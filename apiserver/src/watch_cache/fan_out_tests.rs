//! The fan-out of applied events to watchers: each event once, in order, one shared `Arc` and one
//! shared serialisation for every watcher; a watcher too far behind ended alone.

use std::sync::Arc;

use serde_json::json;
use store::{Event, EventKind, KeyValue};
use tokio::sync::mpsc::error::TryRecvError;

use super::snapshot::tests::cache;
use super::{CacheWatch, EventType, WatchCache, WatchFrom, WatchStart};

const PODS: &str = "/registry/pods/";

fn put(c: &WatchCache, name: &str, revision: u64) {
    let key = format!("{PODS}ns/{name}");
    let value = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name}});
    c.apply(Event {
        kind: EventKind::Put,
        key: key.clone(),
        revision,
        value: Some(KeyValue {
            key,
            value: bytes::Bytes::from(serde_json::to_vec(&value).unwrap()),
            create_revision: revision,
            mod_revision: revision,
        }),
        prev: None,
    });
}

fn delete(c: &WatchCache, name: &str, revision: u64) {
    c.apply(Event {
        kind: EventKind::Delete,
        key: format!("{PODS}ns/{name}"),
        revision,
        value: None,
        prev: None,
    });
}

fn watch(c: &WatchCache) -> CacheWatch {
    match c.watch(PODS, WatchFrom::Snapshot) {
        WatchStart::Watching(w) => w,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn every_watcher_gets_each_event_once_in_order_sharing_one_text() {
    let c = cache(100);
    let mut watchers: Vec<CacheWatch> = (0..3).map(|_| watch(&c)).collect();
    put(&c, "e", 14);
    put(&c, "e", 15);
    delete(&c, "e", 16);
    assert_eq!(c.dispatched(), 16);
    let mut seen = Vec::new();
    for w in &mut watchers {
        let mut events = Vec::new();
        while let Ok(ev) = w.rx.try_recv() {
            events.push(ev);
        }
        let order: Vec<(u64, EventType)> = events.iter().map(|e| (e.revision, e.kind)).collect();
        assert_eq!(
            order,
            [
                (14, EventType::Added),
                (15, EventType::Modified),
                (16, EventType::Deleted)
            ]
        );
        seen.push(events);
    }
    for events in &seen[1..] {
        for (a, b) in seen[0].iter().zip(events) {
            // One shared event, so one serialisation for every watcher.
            assert!(Arc::ptr_eq(a, b), "one event for every watcher");
        }
    }
    let deleted: serde_json::Value = serde_json::from_slice(seen[0][2].encoded_object()).unwrap();
    assert_eq!(deleted["metadata"]["resourceVersion"], "16");
}

#[tokio::test]
async fn a_watch_starts_after_what_its_snapshot_holds() {
    let c = cache(100);
    put(&c, "e", 14);
    let mut w = watch(&c);
    assert!(w.initial.iter().any(|e| e.key.ends_with("/e")));
    assert_eq!(w.rx.try_recv().err(), Some(TryRecvError::Empty));
    put(&c, "f", 15);
    assert_eq!(w.rx.try_recv().map(|e| e.revision), Ok(15));
}

#[tokio::test]
async fn a_watcher_too_far_behind_is_ended_alone() {
    // The test cache's live log holds 8 events.
    let c = cache(100);
    let mut slow = watch(&c);
    let mut fast = watch(&c);
    for rev in 14..40 {
        put(&c, "e", rev);
        assert_eq!(fast.rx.recv().await.map(|e| e.revision), Some(rev));
    }
    assert!(
        slow.rx.recv().await.is_none(),
        "ended, not resumed past a gap"
    );
    put(&c, "e", 40);
    assert_eq!(fast.rx.recv().await.map(|e| e.revision), Some(40));
    assert_eq!(c.watcher_count(PODS), 2);
    drop(slow);
    assert_eq!(c.watcher_count(PODS), 1);
}

#[tokio::test]
async fn closing_the_cache_ends_watchers_after_what_they_were_sent() {
    let c = cache(100);
    let mut w = watch(&c);
    put(&c, "e", 14);
    c.close_all();
    assert_eq!(w.rx.recv().await.map(|e| e.revision), Some(14));
    assert!(w.rx.recv().await.is_none());
}
