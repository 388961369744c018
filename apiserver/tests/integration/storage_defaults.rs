//! Objects read from storage are defaulted, as upstream's storage codec defaults what it decodes
//! from etcd: objects stored bare (before the apiserver started on the store, or by another
//! process while it runs) and custom resources stored before their schema had a `default` read
//! with the defaults from GET, LIST and WATCH, without being written back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use serde_json::{json, Value};

use common::http::{get, post, put, watch_lines};

const PODS: &str = "/api/v1/namespaces/default/pods";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn memory_store() -> Arc<dyn store::Store> {
    Arc::new(store::MemoryStore::new(store::StoreConfig::default()).expect("memory store"))
}

/// A pod as an older writer might have stored it: a volume with only its name, no
/// `restartPolicy`, `dnsPolicy` or container defaults.
fn bare_pod(name: &str) -> Bytes {
    Bytes::from(
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"volumes": [{"name": "scratch"}],
                     "containers": [{"name": "c", "image": "busybox"}]}
        })
        .to_string(),
    )
}

/// Asserts the scheme's pod defaults on a pod read back.
fn assert_pod_defaulted(pod: &Value) {
    let spec = &pod["spec"];
    assert_eq!(spec["volumes"][0]["emptyDir"], json!({}), "{pod}");
    assert_eq!(spec["restartPolicy"], "Always", "{pod}");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst", "{pod}");
    assert_eq!(spec["schedulerName"], "default-scheduler", "{pod}");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30, "{pod}");
    assert_eq!(spec["securityContext"], json!({}), "{pod}");
    assert_eq!(spec["enableServiceLinks"], true, "{pod}");
    let c = &spec["containers"][0];
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log", "{pod}");
    assert_eq!(c["terminationMessagePolicy"], "File", "{pod}");
    assert_eq!(c["imagePullPolicy"], "Always", "{pod}");
}

fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["metadata"]["name"] == name))
        .unwrap_or_else(|| panic!("{name} not in {list}"))
}

#[tokio::test]
async fn a_pod_stored_bare_before_start_reads_defaulted_and_is_not_rewritten() {
    let store = memory_store();
    let created = store
        .create("/registry/pods/default/bare", bare_pod("bare"))
        .await;
    assert!(matches!(created, Ok(store::CreateOutcome::Created(_))));
    let rev = store.current_revision();
    let (app, state) = common::router_and_state_over(store.clone()).await;

    let (code, pod) = get(&app, &format!("{PODS}/bare")).await;
    assert_eq!(code, 200, "{pod}");
    assert_pod_defaulted(&pod);
    assert_eq!(pod["metadata"]["resourceVersion"], rev.to_string());

    let (code, list) = get(&app, PODS).await;
    assert_eq!(code, 200, "{list}");
    assert_pod_defaulted(named(&list, "bare"));

    let events = watch_lines(&app, &format!("{PODS}?watch=true"), 1).await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_pod_defaulted(&events[0]["object"]);
    assert_eq!(
        events[0]["object"]["metadata"]["resourceVersion"],
        rev.to_string()
    );

    let stored = state
        .store
        .get("/registry/pods/default/bare")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.value, bare_pod("bare"), "nothing written back");
    assert_eq!(stored.mod_revision, rev);
}

#[tokio::test]
async fn a_pod_written_bare_by_another_process_reads_defaulted() {
    let store = memory_store();
    let (app, state) = common::router_and_state_over(store.clone()).await;
    let (_, list) = get(&app, PODS).await;
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // Another apiserver's write on the same store: no writer of this process handed it over.
    store
        .create("/registry/pods/default/foreign", bare_pod("foreign"))
        .await
        .unwrap();
    let rev = store.current_revision();
    assert!(state.cache.wait_for(rev, Duration::from_secs(10)).await);

    let events = watch_lines(
        &app,
        &format!("{PODS}?watch=true&resourceVersion={from}"),
        1,
    )
    .await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_pod_defaulted(&events[0]["object"]);
    let (_, pod) = get(&app, &format!("{PODS}/foreign")).await;
    assert_pod_defaulted(&pod);
    let (_, list) = get(&app, PODS).await;
    assert_pod_defaulted(named(&list, "foreign"));
}

fn widget_crd(spec_props: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": spec_props}
                }}}}]
        }
    })
}

fn bare_widget(name: &str) -> Bytes {
    Bytes::from(
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
               "spec": {"size": 1}})
        .to_string(),
    )
}

/// Waits (at most 10 s) until GET of the widget `name` has `spec.color` equal to `color`.
async fn widget_reads(app: &Router, name: &str, color: &str) -> Value {
    let uri = format!("{WIDGETS}/{name}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (code, obj) = get(app, &uri).await;
        if code == 200 && obj["spec"]["color"] == color {
            return obj;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never read with color {color}: {obj}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_custom_resource_stored_without_a_defaulted_field_reads_with_it() {
    let store = memory_store();
    let crd = widget_crd(json!({"size": {"type": "integer"},
                                "color": {"type": "string", "default": "blue"}}));
    store
        .create(
            "/registry/customresourcedefinitions/widgets.example.com",
            Bytes::from(crd.to_string()),
        )
        .await
        .unwrap();
    store
        .create(
            "/registry/widgets.example.com/default/old",
            bare_widget("old"),
        )
        .await
        .unwrap();
    let rev = store.current_revision();
    let (app, _) = common::router_and_state_over(store.clone()).await;

    let old = widget_reads(&app, "old", "blue").await;
    assert_eq!(old["spec"]["size"], 1);
    assert_eq!(old["metadata"]["resourceVersion"], rev.to_string());
    let (_, list) = get(&app, WIDGETS).await;
    assert_eq!(named(&list, "old")["spec"]["color"], "blue", "{list}");
    let events = watch_lines(&app, &format!("{WIDGETS}?watch=true"), 1).await;
    assert_eq!(events[0]["object"]["spec"]["color"], "blue", "{events:?}");
    let stored = store
        .get("/registry/widgets.example.com/default/old")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.value, bare_widget("old"), "nothing written back");
}

#[tokio::test]
async fn a_default_added_to_the_schema_reaches_objects_stored_before_it() {
    let store = memory_store();
    let (app, _) = common::router_and_state_over(store.clone()).await;
    let (code, body) = post(&app, CRDS, widget_crd(json!({"size": {"type": "integer"}}))).await;
    assert_eq!(code, 201, "{body}");
    let created = common::eventually(Duration::from_secs(10), || {
        let app = app.clone();
        async move {
            let w = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                           "metadata": {"name": "early"}, "spec": {"size": 2}});
            post(&app, WIDGETS, w).await.0 == 201
        }
    })
    .await;
    assert!(created, "the CRD is served");
    let (_, early) = get(&app, &format!("{WIDGETS}/early")).await;
    assert!(early["spec"].get("color").is_none(), "{early}");
    let rv = early["metadata"]["resourceVersion"].clone();

    // The schema gains a default.
    let (_, current) = get(&app, &format!("{CRDS}/widgets.example.com")).await;
    let mut next = widget_crd(json!({"size": {"type": "integer"},
                                     "color": {"type": "string", "default": "green"}}));
    next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let (code, body) = put(&app, &format!("{CRDS}/widgets.example.com"), next).await;
    assert_eq!(code, 200, "{body}");

    let early = widget_reads(&app, "early", "green").await;
    assert_eq!(early["metadata"]["resourceVersion"], rv, "not rewritten");
    let (_, list) = get(&app, WIDGETS).await;
    assert_eq!(named(&list, "early")["spec"]["color"], "green", "{list}");
    let events = watch_lines(&app, &format!("{WIDGETS}?watch=true"), 1).await;
    assert_eq!(events[0]["object"]["spec"]["color"], "green", "{events:?}");
    let stored = store
        .get("/registry/widgets.example.com/default/early")
        .await
        .unwrap()
        .unwrap();
    let stored: Value = serde_json::from_slice(&stored.value).unwrap();
    assert!(
        stored["spec"].get("color").is_none(),
        "nothing written back"
    );
}

#[tokio::test]
async fn a_store_read_newer_than_the_cache_is_defaulted_too() {
    let (_, state) = common::router_and_state().await;
    // A revision of the key the cache never saw (a writer's read-modify-write reads the store).
    let kv = store::KeyValue {
        key: "/registry/pods/default/ahead".into(),
        value: bare_pod("ahead"),
        create_revision: 1_000_000,
        mod_revision: 1_000_000,
    };
    let read = apiserver::registry::store::stored_object(&state, &kv).unwrap();
    assert_pod_defaulted(&read);
    assert_eq!(read["metadata"]["resourceVersion"], "1000000");
}
