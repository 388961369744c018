//! The contract suite ([`store::conformance`]) against [`EtcdStore`] on a real etcd member (Debian's
//! `etcd-server`, or `$ETCD_BIN`), one fresh member per check, on free loopback ports.

use parking_lot::Mutex;
use store::conformance::{self, Harness};
use store::etcd::server::EtcdCluster;
use store::{EtcdConfig, EtcdStore, StoreConfig};

/// Opens each store on a new single-member cluster; the previous check's member is stopped then.
struct Etcd {
    cluster: Mutex<Option<EtcdCluster>>,
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

impl Harness for Etcd {
    type S = EtcdStore;
    fn open(&self, cfg: StoreConfig) -> EtcdStore {
        // Stop the previous member before starting the next: one at a time on this machine.
        drop(self.cluster.lock().take());
        let cluster = match block_on(EtcdCluster::start(1)) {
            Ok(cluster) => cluster,
            Err(error) => panic!("start etcd: {error}"),
        };
        let config = EtcdConfig {
            endpoints: cluster.client_urls(),
            ..EtcdConfig::default()
        };
        let store = match block_on(EtcdStore::connect(&config, cfg)) {
            Ok(store) => store,
            Err(error) => panic!("connect to etcd: {error}"),
        };
        *self.cluster.lock() = Some(cluster);
        store
    }

    fn watch_reads_ahead(&self) -> bool {
        true
    }
}

/// A new single-member cluster (stopped when dropped) and two stores on it, as two apiservers.
async fn two_stores() -> (EtcdCluster, EtcdStore, EtcdStore) {
    let cluster = match EtcdCluster::start(1).await {
        Ok(cluster) => cluster,
        Err(error) => panic!("start etcd: {error}"),
    };
    let config = EtcdConfig {
        endpoints: cluster.client_urls(),
        ..EtcdConfig::default()
    };
    let (one, other) = match (
        EtcdStore::connect(&config, StoreConfig::default()).await,
        EtcdStore::connect(&config, StoreConfig::default()).await,
    ) {
        (Ok(one), Ok(other)) => (one, other),
        _ => panic!("connect"),
    };
    (cluster, one, other)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_store_passes_the_contract() {
    let seed = conformance::test_seed();
    println!("etcd contract: TEST_SEED={seed}");
    let harness = Etcd {
        cluster: Mutex::new(None),
    };
    conformance::run_all_with_seed(&harness, seed).await;
}

/// A consistent read on one store sees another client's write (a quorum read), and every live watch
/// then reports progress up to it, although its prefix had no change: what lets a watch cache
/// serve a consistent list when the newest write is outside its prefix or through another apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_revision_sees_other_clients_and_watches_report_progress_to_it() {
    use store::{Store, WatchItem, WatchOutcome};
    let (_cluster, one, other) = two_stores().await;
    let mut watch = match one.watch("/registry/", one.current_revision(), 16) {
        Ok(WatchOutcome::Watching(watch)) => watch,
        other => panic!("watch: {other:?}"),
    };
    // Written by the other client, outside the watched prefix.
    let written = match other
        .create("/elsewhere/k", bytes::Bytes::from_static(b"v"))
        .await
    {
        Ok(store::CreateOutcome::Created(kv)) => kv.mod_revision,
        other => panic!("create: {other:?}"),
    };
    assert!(one.current_revision() < written, "nothing told `one` yet");
    let consistent = match one.consistent_revision().await {
        Ok(revision) => revision,
        Err(error) => panic!("consistent_revision: {error}"),
    };
    assert!(consistent >= written);
    assert_eq!(one.current_revision(), consistent);
    loop {
        match conformance::next_item(&mut watch).await {
            Some(WatchItem::Progress(revision)) if revision >= consistent => break,
            Some(WatchItem::Progress(_)) => continue,
            other => panic!("expected a progress mark, got {other:?}"),
        }
    }
    // Whatever marked the progress (a progress key on etcd before 3.4.31) is no object.
    match one.list("/registry/", store::ListOptions::default()).await {
        Ok(store::ListOutcome::Listed(page)) => assert!(page.items.is_empty(), "{:?}", page.items),
        other => panic!("list: {other:?}"),
    }
}

/// Consistent reads waiting at once share their progress writes (on etcd before 3.4.31, where a
/// consistent read writes progress keys; with progress requests they write nothing): fifty at once
/// cost at most two writes, and each sees a write another client made before it began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_consistent_reads_share_their_progress_writes() {
    use store::{Store, WatchOutcome};
    let (_cluster, one, other) = two_stores().await;
    let _watch = match one.watch("/registry/", one.current_revision(), 16) {
        Ok(WatchOutcome::Watching(watch)) => watch,
        other => panic!("watch: {other:?}"),
    };
    let written = match other
        .create("/elsewhere/k", bytes::Bytes::from_static(b"v"))
        .await
    {
        Ok(store::CreateOutcome::Created(kv)) => kv.mod_revision,
        other => panic!("create: {other:?}"),
    };
    let reads = futures::future::join_all((0..50).map(|_| one.consistent_revision())).await;
    for read in &reads {
        match read {
            Ok(revision) => assert!(*revision >= written, "{revision} < {written}"),
            Err(error) => panic!("consistent_revision: {error}"),
        }
    }
    let after = match other.quorum_revision().await {
        Ok(revision) => revision,
        Err(error) => panic!("quorum read: {error}"),
    };
    assert!(
        after - written <= 2,
        "50 consistent reads wrote {} times",
        after - written
    );
}

/// A passive watch (one client's watch of a resource the apiserver does not cache) costs a
/// consistent read nothing: with only passive watches open, a consistent read is a quorum read
/// and writes no progress key, whatever the prefixes (on etcd before 3.4.31 every reported
/// prefix gets a key per consistent read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_watches_add_no_progress_writes() {
    use store::{Store, WatchOutcome};
    let (_cluster, one, other) = two_stores().await;
    let _watches: Vec<_> = (0..3)
        .map(
            |i| match one.watch_passive(&format!("/registry/events/ns{i}/"), 0, 16) {
                Ok(WatchOutcome::Watching(watch)) => watch,
                other => panic!("watch: {other:?}"),
            },
        )
        .collect();
    let before = match other.quorum_revision().await {
        Ok(revision) => revision,
        Err(error) => panic!("quorum read: {error}"),
    };
    for _ in 0..5 {
        if let Err(error) = one.consistent_revision().await {
            panic!("consistent_revision: {error}");
        }
    }
    match other.quorum_revision().await {
        Ok(after) => assert_eq!(after, before, "consistent reads wrote progress keys"),
        Err(error) => panic!("quorum read: {error}"),
    }
}
