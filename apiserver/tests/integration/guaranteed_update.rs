//! The read-modify-write loop's reads: an update starts from the watch cache's copy (no store
//! read, on etcd a quorum round trip, when that copy is current), and a copy the store has moved
//! past is caught by the compare-and-swap and decided again on the store's state, as upstream's
//! `GuaranteedUpdate` does with the cacher's object.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{json, Value};
use store::{
    CreateOutcome, DeleteOutcome, KeyValue, ListOptions, ListOutcome, Result, Revision, Store,
    UpdateOutcome, WatchOutcome,
};

use common::http::{get, put};

/// A store that counts its reads and can let another writer in just before the next update of a
/// key (as if a second apiserver wrote between this one's read and its compare-and-swap).
struct Racing {
    inner: Arc<dyn Store>,
    gets: AtomicUsize,
    /// The next update of this key first stores this value unconditionally.
    racer: Mutex<Option<(String, Bytes)>>,
}

#[async_trait::async_trait]
impl Store for Racing {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key).await
    }
    async fn create(&self, key: &str, value: Bytes) -> Result<CreateOutcome> {
        self.inner.create(key, value).await
    }
    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<UpdateOutcome> {
        let racer = {
            let mut racer = self.racer.lock();
            match racer.as_ref() {
                Some((k, _)) if k == key => racer.take(),
                _ => None,
            }
        };
        if let Some((key, value)) = racer {
            self.inner.update(&key, value, None).await?;
        }
        self.inner.update(key, value, expected).await
    }
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<DeleteOutcome> {
        self.inner.delete(key, expected).await
    }
    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListOutcome> {
        self.inner.list(prefix, opts).await
    }
    fn watch(&self, prefix: &str, after: Revision, buffer: usize) -> Result<WatchOutcome> {
        self.inner.watch(prefix, after, buffer)
    }
    fn current_revision(&self) -> Revision {
        self.inner.current_revision()
    }
    fn compacted_revision(&self) -> Revision {
        self.inner.compacted_revision()
    }
    async fn flush_and_close(&self) -> Result<()> {
        self.inner.flush_and_close().await
    }
}

fn config_map(data: Value, rv: Option<&str>) -> Value {
    let mut cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default"},
        "data": data,
    });
    if let Some(rv) = rv {
        cm["metadata"]["resourceVersion"] = json!(rv);
    }
    cm
}

const URI: &str = "/api/v1/namespaces/default/configmaps/cm";

async fn setup() -> (axum::Router, Arc<Racing>) {
    let inner = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
    let racing = Arc::new(Racing {
        inner: Arc::new(inner),
        gets: AtomicUsize::new(0),
        racer: Mutex::new(None),
    });
    let app = common::router_over(racing.clone()).await;
    let (code, created) = common::http::post(
        &app,
        "/api/v1/namespaces/default/configmaps",
        config_map(json!({"a": "1"}), None),
    )
    .await;
    assert_eq!(code, 201);
    cached(&app, &created["metadata"]["resourceVersion"]).await;
    (app, racing)
}

/// Waits until the watch cache (which a LIST at resourceVersion 0 reads) holds the config map at
/// `rv`: the feeder applies writes after they are acknowledged.
async fn cached(app: &axum::Router, rv: &Value) {
    let uri = "/api/v1/namespaces/default/configmaps?resourceVersion=0";
    let held = common::eventually(std::time::Duration::from_secs(10), || async {
        let (_, list) = get(app, uri).await;
        list["items"][0]["metadata"]["resourceVersion"] == *rv
    })
    .await;
    assert!(held, "the watch cache holds the config map at {rv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_from_a_current_cache_reads_nothing_from_the_store() {
    let (app, racing) = setup().await;
    racing.gets.store(0, Ordering::SeqCst);
    let (code, body) = put(&app, URI, config_map(json!({"a": "2"}), None)).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["data"]["a"], "2");
    // A no-op update is confirmed on the store's current state before it is skipped.
    let (code, same) = put(&app, URI, config_map(json!({"a": "2"}), None)).await;
    assert_eq!(code, 200, "{same}");
    assert_eq!(
        same["metadata"]["resourceVersion"],
        body["metadata"]["resourceVersion"]
    );
    assert_eq!(
        racing.gets.load(Ordering::SeqCst),
        1,
        "only the no-op read the store"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_between_the_cached_read_and_the_swap_is_not_lost() {
    let (app, racing) = setup().await;
    let key = "/registry/configmaps/default/cm".to_owned();
    let (_, before) = get(&app, URI).await;
    let mut raced = config_map(json!({"a": "1"}), None);
    raced["metadata"] = before["metadata"].clone();
    raced["metadata"]["labels"] = json!({"raced": "yes"});
    raced["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let raced = Bytes::from(serde_json::to_vec(&raced).unwrap());

    // An update naming the revision it read loses to the racing write: 409, as on the store.
    let rv = before["metadata"]["resourceVersion"].as_str().unwrap();
    *racing.racer.lock() = Some((key.clone(), raced.clone()));
    let (code, body) = put(&app, URI, config_map(json!({"a": "2"}), Some(rv))).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["reason"], "Conflict");
    let (_, now) = get(&app, URI).await;
    cached(&app, &now["metadata"]["resourceVersion"]).await;

    // An unconditional merge patch is applied again on the state the racing write left.
    *racing.racer.lock() = Some((key, raced));
    racing.gets.store(0, Ordering::SeqCst);
    let (code, body) = common::http::patch(
        &app,
        URI,
        "application/merge-patch+json",
        json!({"data": {"b": "2"}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["labels"]["raced"], "yes", "{body}");
    assert_eq!(body["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        racing.gets.load(Ordering::SeqCst),
        1,
        "one read after the lost swap"
    );
}
