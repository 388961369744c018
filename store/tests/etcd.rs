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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_store_passes_the_contract() {
    let seed = conformance::test_seed();
    println!("etcd contract: TEST_SEED={seed}");
    let harness = Etcd {
        cluster: Mutex::new(None),
    };
    conformance::run_all_with_seed(&harness, seed).await;
}
