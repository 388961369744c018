//! [`History`] against a real apiserver (in-memory store) and a real informer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::client::{Client, Config, SharedInformerFactory};
use api::labels::Selector;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::replication::claim::controller_ref;

const T: Duration = Duration::from_secs(10);

struct Env {
    server: apiserver::Server,
    client: Client,
    history: History,
    factory: SharedInformerFactory,
    shutdown: CancellationToken,
}

async fn env() -> Env {
    let config = apiserver::Config {
        address: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    let store = store::MemoryStore::new(store::StoreConfig::default()).unwrap();
    let server = apiserver::start(config, Arc::new(store)).await.unwrap();
    let client = Client::new(Config::new(server.url())).unwrap();
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.informer::<ControllerRevision>();
    let shutdown = CancellationToken::new();
    factory.start(shutdown.clone());
    assert!(factory.wait_for_cache_sync(&shutdown).await);
    let history = History::new(client.clone(), informer.lister());
    Env {
        server,
        client,
        history,
        factory,
        shutdown,
    }
}

impl Env {
    async fn stop(self) {
        self.shutdown.cancel();
        self.factory.shutdown().await;
        let _ = self.server.stop().await;
    }

    /// Wait until the cache lists exactly `n` revisions that `uid` may own.
    async fn listed(&self, uid: &str, n: usize) -> Vec<Arc<ControllerRevision>> {
        let deadline = Instant::now() + T;
        loop {
            let got = self.history.list("default", uid, &sel());
            if got.len() == n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "{n} revisions listed, saw {}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn sel() -> Selector {
    Selector::from_map(&BTreeMap::from([("app".to_string(), "web".to_string())]))
}

fn parent(uid: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some("web".into()),
        namespace: Some("default".into()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

fn rev(uid: &str, image: &str, number: i64, collisions: i32) -> ControllerRevision {
    let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    new_controller_revision(
        &parent(uid),
        controller_ref("apps/v1", "StatefulSet", "web", uid),
        Some(&labels),
        json!({"spec": {"template": {"image": image, "$patch": "replace"}}}),
        number,
        Some(collisions),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_renames_on_collision_and_returns_equal_data() {
    let env = env().await;
    let mut collisions = 0;
    let first = rev("sts-1", "nginx:1", 1, collisions);
    let created = env
        .history
        .create("web", "default", &first, &mut collisions)
        .await
        .unwrap();
    assert_eq!(created.metadata.name, first.metadata.name);
    assert_eq!(collisions, 0);

    // Equal data under the same name: the existing revision comes back, no rename.
    let again = env
        .history
        .create("web", "default", &first, &mut collisions)
        .await
        .unwrap();
    assert_eq!(again.metadata.uid, created.metadata.uid);
    assert_eq!(collisions, 0);

    // Other data squatting on the name the next revision would take: renamed, count bumped.
    let second = rev("sts-1", "nginx:2", 2, collisions);
    let mut squatter = rev("sts-1", "nginx:squat", 9, 0);
    squatter.metadata.name = second.metadata.name.clone();
    env.client
        .api::<ControllerRevision>(Some("default"))
        .create(&squatter)
        .await
        .unwrap();
    let made = env
        .history
        .create("web", "default", &second, &mut collisions)
        .await
        .unwrap();
    assert_eq!(collisions, 1);
    assert_ne!(made.metadata.name, second.metadata.name);
    assert_eq!(
        made.metadata.name.as_deref(),
        Some(&*revision_name("web", &hash_revision(&second, Some(1))))
    );
    assert_eq!(made.data, second.data);
    env.listed("sts-1", 3).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_adopt_release_update_delete() {
    let env = env().await;
    let api = env.client.api::<ControllerRevision>(Some("default"));
    let mut orphan = rev("sts-1", "nginx:1", 1, 0);
    orphan.metadata.owner_references = None;
    let orphan = api.create(&orphan).await.unwrap();
    let theirs = api
        .create(&rev("sts-other", "nginx:2", 1, 0))
        .await
        .unwrap();
    let ours = api.create(&rev("sts-1", "nginx:3", 2, 0)).await.unwrap();

    // Ours and the orphan, never another controller's.
    let listed = env.listed("sts-1", 2).await;
    assert!(listed.iter().all(|r| r.metadata.uid != theirs.metadata.uid));

    let owner = controller_ref("apps/v1", "StatefulSet", "web", "sts-1");
    let adopted = env.history.adopt(&owner, &orphan).await.unwrap();
    let refs = adopted.metadata.owner_references.clone().unwrap();
    assert_eq!(
        (refs[0].uid.as_str(), refs[0].controller),
        ("sts-1", Some(true))
    );
    let err = env.history.adopt(&owner, &theirs).await.unwrap_err();
    assert!(matches!(err, Error::OwnedElsewhere { .. }), "{err}");

    let released = env.history.release("sts-1", &ours).await.unwrap().unwrap();
    assert!(released
        .metadata
        .owner_references
        .unwrap_or_default()
        .is_empty());

    let renumbered = env.history.update(&adopted, 5).await.unwrap();
    assert_eq!(renumbered.revision, 5);

    env.history.delete(&renumbered).await.unwrap();
    env.history.delete(&renumbered).await.unwrap(); // already gone: fine
    let mut gone = ours.clone();
    gone.metadata.name = Some("web-gone".into());
    assert!(env.history.release("sts-1", &gone).await.unwrap().is_none());
    env.stop().await;
}
