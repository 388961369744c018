//! Defaulting of what enters the cache from storage ([`super::defaults`]): loads and foreign
//! events defaulted, this process's handed-over writes not decoded again, a change of the
//! defaults applied to the held objects with the resource's watchers ended.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use store::Store;
use tokio_util::sync::CancellationToken;

use super::defaults::tests::Colors;
use super::{
    Defaulter, ListAt, Select, SnapshotOutcome, StoreWrite, WatchCache, WatchFrom, WatchStart,
};

const WIDGETS: &str = "/registry/widgets/";

fn key(name: &str) -> String {
    format!("{WIDGETS}ns/{name}")
}

fn widget(name: &str) -> Bytes {
    Bytes::from(json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {}}).to_string())
}

async fn setup(
    color: &str,
) -> (
    Arc<dyn Store>,
    Arc<Colors>,
    Arc<WatchCache>,
    CancellationToken,
) {
    let store: Arc<dyn Store> = Arc::new(
        store::MemoryStore::new(store::StoreConfig::default())
            .unwrap_or_else(|e| panic!("memory store: {e}")),
    );
    store.create(&key("old"), widget("old")).await.unwrap();
    let colors = Arc::new(Colors::default());
    *colors.color.lock() = color.to_string();
    let shutdown = CancellationToken::new();
    let cache = WatchCache::start_defaulting(
        store.clone(),
        Defaulter::new(colors.clone()),
        crate::watch_cache::StoredText::Lz4,
        100,
        100,
        shutdown.clone(),
    )
    .await
    .unwrap();
    (store, colors, cache, shutdown)
}

fn color(obj: &Value) -> &Value {
    &obj["spec"]["color"]
}

#[tokio::test]
async fn loaded_and_foreign_objects_are_defaulted_without_a_write_back() {
    let (store, _, cache, _shutdown) = setup("blue").await;
    let old = cache.get(&key("old")).unwrap();
    assert_eq!(color(&old), "blue", "the initial list is defaulted");
    assert_eq!(old["metadata"]["resourceVersion"], "1", "its revision kept");
    let stored = store.get(&key("old")).await.unwrap().unwrap();
    assert_eq!(stored.value, widget("old"), "nothing written back");
    assert_eq!(store.current_revision(), 1);

    // Another process's write: its event is decoded and defaulted.
    store
        .create(&key("foreign"), widget("foreign"))
        .await
        .unwrap();
    assert!(cache.wait_for(2, Duration::from_secs(5)).await);
    assert_eq!(color(&cache.get(&key("foreign")).unwrap()), "blue");
}

#[tokio::test]
async fn handed_over_writes_are_not_defaulted_again() {
    let (store, colors, cache, _shutdown) = setup("blue").await;
    let before = colors.calls.load(Ordering::Relaxed);
    let obj = json!({"metadata": {"name": "mine", "namespace": "ns"}, "spec": {"color": "red"}});
    let k = key("mine");
    let written = cache
        .write_through(&k, obj, |bytes| {
            let store = store.clone();
            let k = k.clone();
            async move {
                Ok(match store.create(&k, bytes).await? {
                    store::CreateOutcome::Created(kv) => StoreWrite::Stored(kv.mod_revision),
                    _ => StoreWrite::NotStored,
                })
            }
        })
        .await
        .unwrap()
        .unwrap();
    let rev: u64 = written.object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(cache.wait_for(rev, Duration::from_secs(5)).await);
    assert_eq!(color(&cache.get(&k).unwrap()), "red");
    assert_eq!(
        colors.calls.load(Ordering::Relaxed),
        before,
        "the writer's own event is neither decoded nor defaulted"
    );
}

#[tokio::test]
async fn a_change_of_the_defaults_reaches_held_objects_and_ends_their_watchers() {
    let (store, colors, cache, _shutdown) = setup("").await;
    assert!(color(&cache.get(&key("old")).unwrap()).is_null());
    store
        .create(&key("second"), widget("second"))
        .await
        .unwrap();
    assert!(cache.wait_for(2, Duration::from_secs(5)).await);
    let mut watch = match cache.watch(WIDGETS, WatchFrom::Snapshot) {
        WatchStart::Watching(w) => w,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        cache.redefault(WIDGETS),
        0,
        "unchanged defaults change nothing"
    );

    *colors.color.lock() = "green".into();
    assert_eq!(cache.redefault(WIDGETS), 2);
    for name in ["old", "second"] {
        let obj = cache.get(&key(name)).unwrap();
        assert_eq!(color(&obj), "green", "{obj}");
    }
    assert_eq!(
        cache.get(&key("second")).unwrap()["metadata"]["resourceVersion"],
        "2"
    );
    assert!(watch.rx.recv().await.is_none(), "the watcher was ended");
    assert!(
        matches!(
            cache.watch(WIDGETS, WatchFrom::After(1)),
            WatchStart::Expired { oldest: 2 }
        ),
        "no history of the old defaults is replayed"
    );
    assert_eq!(store.current_revision(), 2, "nothing written");
    assert_eq!(cache.redefault("/registry/gadgets/"), 0);
}

#[tokio::test]
async fn lists_and_watches_of_an_uncached_resource_are_defaulted() {
    const EVENTS: &str = "/registry/events/";
    let (store, _, cache, _shutdown) = setup("blue").await;
    assert!(!cache.caches(EVENTS));
    let event = |name: &str| {
        Bytes::from(json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {}}).to_string())
    };
    store
        .create("/registry/events/ns/a", event("a"))
        .await
        .unwrap();
    let listed = cache
        .list_resource(EVENTS, EVENTS, ListAt::Current, None, None, Select::All)
        .await
        .unwrap();
    let SnapshotOutcome::Listed(listed) = listed else {
        panic!("{listed:?}")
    };
    assert_eq!(color(&listed.items[0].object().unwrap()), "blue");

    let mut watch = match cache
        .watch_resource(EVENTS, EVENTS, WatchFrom::Snapshot)
        .await
        .unwrap()
    {
        WatchStart::Watching(w) => w,
        other => panic!("{other:?}"),
    };
    assert_eq!(color(&watch.initial[0].object), "blue", "initial events");
    store
        .create("/registry/events/ns/b", event("b"))
        .await
        .unwrap();
    let live = tokio::time::timeout(Duration::from_secs(5), watch.rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(color(&live.object), "blue", "live events");
}

/// The entry of `key` the cache holds.
fn held(cache: &WatchCache, key: &str) -> Arc<super::entry::Entry> {
    let prefix = super::resource_prefix(key).unwrap();
    cache.inner.read().resources[prefix].objects[key].clone()
}

/// A loaded object whose text the cache would write as the store holds it (this apiserver
/// stored it, the defaults add nothing) is held in the store's own buffer: a start or a relist
/// keeps one copy of each text, not two. Either codec; a text the defaults change is the
/// cache's own.
#[tokio::test]
async fn a_loaded_text_as_stored_is_the_stores_own_buffer() {
    use super::{ObjectJson, StoredText};
    for codec in [StoredText::Json, StoredText::Lz4] {
        let store: Arc<dyn Store> = Arc::new(
            store::MemoryStore::new(store::StoreConfig::default())
                .unwrap_or_else(|e| panic!("memory store: {e}")),
        );
        let colored = json!({"metadata": {"name": "colored", "namespace": "ns"},
                             "spec": {"color": "blue"}});
        let text = ObjectJson::encode_as(&colored, codec).unwrap();
        store
            .create(&key("colored"), text.stored().clone())
            .await
            .unwrap();
        store.create(&key("bare"), widget("bare")).await.unwrap();
        let colors = Arc::new(Colors::default());
        *colors.color.lock() = "blue".to_string();
        let shutdown = CancellationToken::new();
        let cache = WatchCache::start_defaulting(
            store.clone(),
            Defaulter::new(colors),
            codec,
            100,
            100,
            shutdown.clone(),
        )
        .await
        .unwrap();
        let stored = store.get(&key("colored")).await.unwrap().unwrap().value;
        let entry = held(&cache, &key("colored"));
        assert_eq!(entry.json.stored().as_ptr(), stored.as_ptr(), "{codec:?}");
        assert_eq!(color(&cache.get(&key("colored")).unwrap()), "blue");

        let stored = store.get(&key("bare")).await.unwrap().unwrap().value;
        let entry = held(&cache, &key("bare"));
        assert_ne!(entry.json.stored().as_ptr(), stored.as_ptr(), "{codec:?}");
        assert_eq!(color(&cache.get(&key("bare")).unwrap()), "blue");
        shutdown.cancel();
    }
}
