//! Events are not held by the watch cache (upstream's `DefaultWatchCacheSizes`: events#0): their
//! lists and watches, in both API groups, are served from the store with the same semantics as any
//! cached resource's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use serde_json::{json, Value};

use common::http::{call, delete, get, post, watch_lines};

fn core_event(name: &str, reason: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": reason, "message": "m", "type": "Normal",
        "source": {"component": "test"}
    })
}

const CORE: &str = "/api/v1/namespaces/default/events";
const NEW: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn events_are_listed_from_the_store_with_pages_and_selectors() {
    let (app, state) = common::router_and_state().await;
    for (i, reason) in ["Pulled", "Started", "Pulled", "Killing", "Pulled"]
        .iter()
        .enumerate()
    {
        let (code, body) = post(&app, CORE, core_event(&format!("e{i}"), reason)).await;
        assert_eq!(code, 201, "{body}");
    }
    assert!(
        !state.cache.caches("/registry/events/"),
        "events are not cached"
    );

    let (code, all) = get(&app, CORE).await;
    assert_eq!(code, 200, "{all}");
    assert_eq!(names(&all), ["e0", "e1", "e2", "e3", "e4"]);
    let rv = all["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(rv, state.store.current_revision().to_string());

    // Pages: a limit, then the continue token, at the first page's revision.
    let (_, page) = get(&app, &format!("{CORE}?limit=2")).await;
    assert_eq!(names(&page), ["e0", "e1"]);
    assert_eq!(page["metadata"]["remainingItemCount"], 3);
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    delete(&app, &format!("{CORE}/e2")).await;
    let (code, rest) = get(&app, &format!("{CORE}?limit=10&continue={token}")).await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(
        names(&rest),
        ["e2", "e3", "e4"],
        "served at the first page's revision"
    );
    assert!(rest["metadata"]["continue"].is_null());

    // A field selector, through the events.k8s.io group (the same storage).
    let (code, pulled) = get(&app, &format!("{NEW}?fieldSelector=reason%3DPulled")).await;
    assert_eq!(code, 200, "{pulled}");
    assert_eq!(names(&pulled), ["e0", "e4"]);
    assert_eq!(pulled["items"][0]["apiVersion"], "events.k8s.io/v1");

    // deletecollection reads the store too.
    let (code, body) = call(
        &app,
        "DELETE",
        &format!("{CORE}?fieldSelector=reason%3DPulled"),
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (_, left) = get(&app, CORE).await;
    assert_eq!(names(&left), ["e1", "e3"]);
}

#[tokio::test]
async fn events_are_watched_from_the_store() {
    let (app, state) = common::router_and_state().await;
    let (_, created) = post(&app, CORE, core_event("a", "Pulled")).await;
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // From a resourceVersion: every later change, in order, in both groups.
    let watcher = {
        let app = app.clone();
        let uri = format!("{NEW}?watch=true&resourceVersion={rv}");
        tokio::spawn(async move { watch_lines(&app, &uri, 3).await })
    };
    let initial = {
        let app = app.clone();
        let uri = format!("{CORE}?watch=true");
        tokio::spawn(async move { watch_lines(&app, &uri, 2).await })
    };
    // Both watches are registered before the writes below (a watch counts once it is).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while state.metrics.watchers() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watches registered in time"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (_, b) = post(&app, CORE, core_event("b", "Started")).await;
    let mut changed = b.clone();
    changed["message"] = json!("changed");
    let (code, _) = call(
        &app,
        "PUT",
        &format!("{CORE}/b"),
        "application/json",
        changed,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = delete(&app, &format!("{CORE}/b")).await;
    assert_eq!(code, 200);

    let events = watcher.await.unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    assert_eq!(events[0]["object"]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(events[1]["object"]["note"], "changed");
    let added_rv: u64 = events[0]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        events[2]["object"]["metadata"]["resourceVersion"],
        (added_rv + 2).to_string(),
        "DELETED carries the delete's resourceVersion"
    );

    // Without a resourceVersion: the current events first, then changes.
    let events = initial.await.unwrap();
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], "a");
    assert_eq!(events[1]["type"], "ADDED");
    assert_eq!(events[1]["object"]["metadata"]["name"], "b");
}

/// A server over `store` whose events live `ttl` after their last write.
async fn with_event_ttl(
    ttl: std::time::Duration,
    store: std::sync::Arc<dyn store::Store>,
    shutdown: tokio_util::sync::CancellationToken,
) -> axum::Router {
    let config = apiserver::Config {
        event_ttl: ttl,
        ..Default::default()
    };
    common::router_and_state_with(config, store, shutdown)
        .await
        .0
}

fn memory_store() -> std::sync::Arc<dyn store::Store> {
    std::sync::Arc::new(store::MemoryStore::new(store::StoreConfig::default()).unwrap())
}

#[tokio::test]
async fn events_expire_one_ttl_after_their_last_write() {
    use std::time::Duration;
    use tokio::time::Instant;
    // Long beside the 300 ms between writes: a loaded machine does not let `b` lapse.
    let ttl = Duration::from_secs(5);
    let app = with_event_ttl(ttl, memory_store(), Default::default()).await;
    let (code, a) = post(&app, CORE, core_event("a", "Pulled")).await;
    assert_eq!(code, 201, "{a}");
    let rv = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let new_api = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "b", "namespace": "default"},
        "eventTime": "2026-12-07T09:00:00.000000Z",
        "reportingController": "test", "reportingInstance": "test-1",
        "action": "Pulling", "reason": "Pulling", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}
    });
    let (code, b) = post(&app, NEW, new_api).await;
    assert_eq!(code, 201, "{b}");
    let (code, cm) = post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-an-event"}}),
    )
    .await;
    assert_eq!(code, 201, "{cm}");
    // `b` is written again and again, every 300 ms: it outlives `a`, written once.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut note = 0;
    loop {
        note += 1;
        let (code, body) = common::http::patch(
            &app,
            &format!("{NEW}/b"),
            "application/merge-patch+json",
            json!({"note": format!("seen {note} times")}),
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let (code, _) = get(&app, &format!("{CORE}/a")).await;
        if code == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "a expired in time");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (code, body) = get(&app, &format!("{NEW}/b")).await;
    assert_eq!(code, 200, "an event written within its TTL lives: {body}");

    // Left alone, `b` expires too; nothing but events does.
    let gone = common::eventually(Duration::from_secs(30), || {
        let app = app.clone();
        async move { get(&app, &format!("{NEW}/b")).await.0 == 404 }
    })
    .await;
    assert!(gone, "b expired one TTL after its last write");
    let (code, _) = get(&app, "/api/v1/namespaces/default/configmaps/not-an-event").await;
    assert_eq!(code, 200);

    // Watchers see each expiry as a DELETED of the last state: after `a`'s creation, `b`'s
    // ADDED, one MODIFIED per patch, then the two expiries.
    let uri = format!("{CORE}?watch=true&resourceVersion={rv}");
    let events = watch_lines(&app, &uri, note + 3).await;
    let deleted: Vec<&Value> = events.iter().filter(|e| e["type"] == "DELETED").collect();
    let names: Vec<&str> = deleted
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(
        deleted[1]["object"]["message"],
        format!("seen {note} times")
    );
}

#[tokio::test]
async fn stored_events_expire_one_ttl_after_their_newest_timestamp() {
    use std::time::Duration;
    // Events an earlier apiserver left in the store: one created and last seen years ago, one
    // created years ago and seen again a moment ago.
    let store = memory_store();
    let stored = |name: &str, last: &str| {
        let mut e = core_event(name, "Pulled");
        e["metadata"]["creationTimestamp"] = json!("2020-01-01T00:00:00Z");
        e["firstTimestamp"] = json!("2020-01-01T00:00:00Z");
        e["lastTimestamp"] = json!(last);
        bytes::Bytes::from(e.to_string())
    };
    let now = jiff::Timestamp::now().to_string();
    for (name, last) in [("old", "2020-01-01T00:00:00Z"), ("recent", now.as_str())] {
        let key = format!("/registry/events/default/{name}");
        store.create(&key, stored(name, last)).await.unwrap();
    }

    // An apiserver with an hour's TTL starts on the store: the event last seen years ago is past
    // its TTL, the one seen now has most of an hour left.
    let app = with_event_ttl(Duration::from_secs(3600), store, Default::default()).await;
    let expired = common::eventually(Duration::from_secs(30), || {
        let app = app.clone();
        async move { get(&app, &format!("{CORE}/old")).await.0 == 404 }
    })
    .await;
    assert!(expired, "an event stored past its TTL is deleted at start");
    let (code, body) = get(&app, &format!("{CORE}/recent")).await;
    assert_eq!(code, 200, "{body}");
}
