use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;
use crate::indexer::{namespace_indexers, Indexer};

fn cm(name: &str, rv: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.namespace = Some("ns".into());
    c.metadata.name = Some(name.into());
    c.metadata.resource_version = Some(rv.into());
    c
}

fn rv(d: &Delta<ConfigMap>) -> String {
    d.object
        .object()
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default()
}

fn fifo_with_known() -> (DeltaFifo<ConfigMap>, Indexer<ConfigMap>) {
    let idx = Indexer::new(namespace_indexers::<ConfigMap>());
    let known: Arc<dyn KnownObjects<ConfigMap>> = Arc::new(idx.clone());
    (DeltaFifo::new(Some(known)), idx)
}

async fn pop_all(f: &DeltaFifo<ConfigMap>) -> Vec<(String, Vec<(DeltaType, String, bool)>, bool)> {
    let mut out = Vec::new();
    while !f.is_empty() {
        let r = f
            .pop(|ds, initial| {
                let key = ds[0].object.key();
                let v = ds
                    .iter()
                    .map(|d| (d.type_, rv(d), d.object.is_tombstone()))
                    .collect();
                (key, v, initial)
            })
            .await;
        if let Some(r) = r {
            out.push(r);
        }
    }
    out
}

#[tokio::test]
async fn deltas_group_per_key_at_first_position() {
    let (f, _) = fifo_with_known();
    f.add(cm("a", "1"));
    f.add(cm("b", "2"));
    f.update(cm("a", "3"));
    assert_eq!(f.queued_keys(), vec!["ns/a", "ns/b"]);
    let got = pop_all(&f).await;
    assert_eq!(got[0].0, "ns/a");
    assert_eq!(
        got[0].1,
        vec![
            (DeltaType::Added, "1".into(), false),
            (DeltaType::Updated, "3".into(), false)
        ],
        "nothing but double deletes is compacted"
    );
    assert_eq!(got[1].0, "ns/b");
}

#[tokio::test]
async fn consecutive_deletes_collapse_and_real_state_wins() {
    let (f, idx) = fifo_with_known();
    idx.add("ns/a", Arc::new(cm("a", "1")));
    f.delete(cm("a", "5"));
    f.delete(cm("a", "6"));
    let d = f.deltas_of("ns/a");
    assert_eq!(d.len(), 1);
    assert_eq!(rv(&d[0]), "5", "older real delete kept");

    // A tombstone followed by a real delete: the real one survives.
    let (f, idx) = fifo_with_known();
    idx.add("ns/b", Arc::new(cm("b", "1")));
    f.replace(vec![], "10");
    assert!(f.deltas_of("ns/b")[0].object.is_tombstone());
    f.delete(cm("b", "9"));
    let d = f.deltas_of("ns/b");
    assert_eq!(d.len(), 1);
    assert!(!d[0].object.is_tombstone());
    assert_eq!(rv(&d[0]), "9");

    // A real delete followed by an inferred one: the real one stays.
    let (f, idx) = fifo_with_known();
    idx.add("ns/c", Arc::new(cm("c", "1")));
    f.delete(cm("c", "4"));
    f.replace(vec![], "10");
    let d = f.deltas_of("ns/c");
    assert_eq!(d.len(), 1);
    assert!(!d[0].object.is_tombstone());
}

#[tokio::test]
async fn delete_of_unknown_key_is_ignored() {
    let (f, _) = fifo_with_known();
    f.delete(cm("ghost", "3"));
    assert!(f.is_empty());
    // Without known objects: only if deltas are queued.
    let f: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    f.delete(cm("ghost", "3"));
    assert!(f.is_empty());
    f.add(cm("x", "1"));
    f.delete(cm("x", "2"));
    assert_eq!(f.deltas_of("ns/x").len(), 2);
}

#[tokio::test]
async fn replace_emits_replaced_and_tombstones() {
    let (f, idx) = fifo_with_known();
    // Known downstream: k1 (stays), k2 (vanishes). Queued only: q (vanishes).
    idx.add("ns/k1", Arc::new(cm("k1", "1")));
    idx.add("ns/k2", Arc::new(cm("k2", "2")));
    f.add(cm("q", "3"));
    f.replace(vec![Arc::new(cm("k1", "4")), Arc::new(cm("n", "5"))], "5");
    let got = pop_all(&f).await;
    let find = |k: &str| {
        got.iter()
            .find(|g| g.0 == k)
            .map(|g| g.1.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        find("ns/k1"),
        vec![(DeltaType::Replaced, "4".into(), false)]
    );
    assert_eq!(find("ns/n"), vec![(DeltaType::Replaced, "5".into(), false)]);
    assert_eq!(
        find("ns/k2"),
        vec![(DeltaType::Deleted, "2".into(), true)],
        "tombstone carries last known state"
    );
    assert_eq!(
        find("ns/q"),
        vec![
            (DeltaType::Added, "3".into(), false),
            (DeltaType::Deleted, "3".into(), true)
        ],
        "queued key absent from the list gets a tombstone of its newest object"
    );
    // Legacy mode emits Sync.
    let f: DeltaFifo<ConfigMap> = DeltaFifo::with_options(None, false);
    f.replace(vec![Arc::new(cm("a", "1"))], "1");
    assert_eq!(f.deltas_of("ns/a")[0].type_, DeltaType::Sync);
}

#[tokio::test]
async fn has_synced_after_first_replace_is_popped() {
    let (f, _) = fifo_with_known();
    assert!(!f.has_synced());
    f.replace(vec![Arc::new(cm("a", "1")), Arc::new(cm("b", "2"))], "2");
    assert!(!f.has_synced());
    let first = f.pop(|_, initial| initial).await;
    assert_eq!(first, Some(true));
    assert!(!f.has_synced());
    f.add(cm("c", "3"));
    let second = f.pop(|_, initial| initial).await;
    assert_eq!(second, Some(true));
    assert!(f.has_synced(), "synced once both initial items were popped");
    let third = f.pop(|_, initial| initial).await;
    assert_eq!(
        third,
        Some(false),
        "later items are not in the initial list"
    );
    f.replace(vec![Arc::new(cm("z", "9"))], "9");
    assert!(f.has_synced(), "later replaces never un-sync");

    let (empty, _) = fifo_with_known();
    empty.replace(vec![], "1");
    assert!(empty.has_synced(), "an empty initial list syncs at once");

    let (early, _) = fifo_with_known();
    early.add(cm("a", "1"));
    assert!(
        early.has_synced(),
        "an add before any replace marks populated"
    );
}

#[tokio::test]
async fn resync_skips_keys_with_pending_deltas() {
    let (f, idx) = fifo_with_known();
    idx.add("ns/a", Arc::new(cm("a", "1")));
    idx.add("ns/b", Arc::new(cm("b", "2")));
    f.update(cm("b", "3"));
    f.resync();
    assert_eq!(
        f.deltas_of("ns/a")
            .iter()
            .map(|d| d.type_)
            .collect::<Vec<_>>(),
        vec![DeltaType::Sync]
    );
    assert_eq!(
        f.deltas_of("ns/b")
            .iter()
            .map(|d| d.type_)
            .collect::<Vec<_>>(),
        vec![DeltaType::Updated],
        "no resync of a stale value"
    );
    let none: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    none.resync();
    assert!(none.is_empty());
}

#[tokio::test]
async fn pop_waits_and_close_ends() {
    let (f, _) = fifo_with_known();
    let f = Arc::new(f);
    let f2 = f.clone();
    let waiter = tokio::spawn(async move { f2.pop(|ds, _| ds.len()).await });
    tokio::task::yield_now().await;
    f.add(cm("a", "1"));
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await;
    assert!(matches!(got, Ok(Ok(Some(1)))));
    f.close();
    assert_eq!(f.pop(|_, _| ()).await, None);
}
