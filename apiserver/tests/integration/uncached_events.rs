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
