//! Faults of the etcd back end on a real three-member loopback cluster: a member SIGKILLed under a
//! write load loses no acknowledged write and writes continue; a restarted member rejoins; a watch
//! open across the fault sees every acknowledged write of its prefix, in order, once.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use store::etcd::server::EtcdCluster;
use store::{
    CreateOutcome, EtcdConfig, EtcdStore, ListOptions, ListOutcome, Store, StoreConfig, WatchItem,
    WatchOutcome,
};

const WRITES: usize = 300;
/// A write that takes longer than this (a member election) counts as not acknowledged.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_one_of_three_members_under_writes_loses_no_acknowledged_write() {
    let mut cluster = match EtcdCluster::start(3).await {
        Ok(cluster) => cluster,
        Err(error) => panic!("start etcd: {error}"),
    };
    let config = EtcdConfig {
        endpoints: cluster.client_urls(),
        ..EtcdConfig::default()
    };
    let store = match EtcdStore::connect(&config, StoreConfig::default()).await {
        Ok(store) => store,
        Err(error) => panic!("connect: {error}"),
    };
    let start = store.current_revision();
    let mut watch = match store.watch("/load/", start, WRITES * 2) {
        Ok(WatchOutcome::Watching(watch)) => watch,
        other => panic!("watch: {other:?}"),
    };
    let mut acked = Vec::new();
    let mut failed = 0usize;
    for i in 0..WRITES {
        if i == WRITES / 3 {
            cluster.kill(0);
        }
        if i == 2 * WRITES / 3 {
            if let Err(error) = cluster.restart(0) {
                panic!("restart member 0: {error}");
            }
        }
        let key = format!("/load/{i:05}");
        match tokio::time::timeout(WRITE_TIMEOUT, store.create(&key, Bytes::from_static(b"v")))
            .await
        {
            Ok(Ok(CreateOutcome::Created(kv))) => acked.push((key, kv.mod_revision)),
            Ok(Ok(other)) => panic!("create {key}: {other:?}"),
            Ok(Err(_)) | Err(_) => failed += 1,
        }
    }
    println!(
        "acknowledged {} writes, {failed} failed during the fault",
        acked.len()
    );
    assert!(
        acked.len() >= WRITES * 2 / 3,
        "writes did not continue after the kill: {} of {WRITES} acknowledged",
        acked.len()
    );
    // Every acknowledged write is there, read through the whole cluster.
    let page = match store.list("/load/", ListOptions::default()).await {
        Ok(ListOutcome::Listed(page)) => page,
        other => panic!("list: {other:?}"),
    };
    let stored: BTreeSet<String> = page.items.into_iter().map(|kv| kv.key).collect();
    for (key, _) in &acked {
        assert!(stored.contains(key), "acknowledged write {key} was lost");
    }
    // The watch saw every stored key, in revision order, once.
    let mut seen = Vec::new();
    while seen.len() < stored.len() {
        match tokio::time::timeout(Duration::from_secs(20), watch.next()).await {
            Ok(Some(WatchItem::Event(event))) => seen.push((event.key, event.revision)),
            Ok(Some(WatchItem::Progress(_))) => {}
            other => panic!("watch ended early after {} events: {other:?}", seen.len()),
        }
    }
    assert!(
        seen.windows(2).all(|w| w[0].1 < w[1].1),
        "events out of order"
    );
    let seen_keys: BTreeSet<String> = seen.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(seen_keys, stored, "the watch missed or repeated a write");
    for (key, revision) in &acked {
        assert!(seen.contains(&(key.clone(), *revision)));
    }
}
