//! A parent's ControllerRevisions through the API (upstream `realHistory`): list from the
//! informer's cache, create with collision handling, renumber, delete, adopt and release.
//!
//! Guarantees:
//! - `create` never overwrites: a name taken by a revision with other data bumps the parent's
//!   `collisionCount` (the caller persists it in the parent's status) and tries the next name; a
//!   name taken by equal data returns that revision. It gives up after [`MAX_CREATE_ATTEMPTS`]
//!   names (upstream's interface allows this; upstream's loop itself is unbounded).
//! - `update` retries conflicts with client-go's `retry.DefaultBackoff` (4 tries, 10 ms × 5,
//!   10 % jitter), re-reading the cache in between.
//! - adoption and release are strategic-merge patches carrying the revision's UID as a
//!   precondition, so a revision re-created under the same name is never touched.

use std::sync::Arc;
use std::time::Duration;

use client::{Api, Client, DeleteParams, Lister, Patch};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rand::Rng;

use super::revision::{hash_revision, revision_name};
use super::Error;
use crate::pod_util::controller_of;
use crate::replication::claim::{adopt_patch, release_patch};
use api::labels::Selector;

/// Names tried by one `create` before it gives up.
pub const MAX_CREATE_ATTEMPTS: usize = 16;

// client-go `retry.DefaultBackoff`: Steps 4, Duration 10 ms, Factor 5.0, Jitter 0.1.
const RETRY_STEPS: u32 = 4;
const RETRY_FIRST: Duration = Duration::from_millis(10);
const RETRY_FACTOR: u32 = 5;
const RETRY_JITTER: f64 = 0.1;

/// A controller's view of its revisions (`history.Interface`).
#[derive(Clone)]
pub struct History {
    client: Client,
    lister: Lister<ControllerRevision>,
}

impl History {
    /// Over `client` for writes and the shared informer's `lister` for reads.
    pub fn new(client: Client, lister: Lister<ControllerRevision>) -> Self {
        Self { client, lister }
    }

    fn api(&self, namespace: &str) -> Api<ControllerRevision> {
        self.client.api(Some(namespace))
    }

    /// `ListControllerRevisions`: the revisions in `namespace` matching `selector` that
    /// `parent_uid` controls or that no controller owns (candidates for adoption).
    pub fn list(
        &self,
        namespace: &str,
        parent_uid: &str,
        selector: &Selector,
    ) -> Vec<Arc<ControllerRevision>> {
        self.lister
            .namespace(namespace)
            .list(selector)
            .into_iter()
            .filter(|r| controller_of(&r.metadata).is_none_or(|c| c.uid == parent_uid))
            .collect()
    }

    /// `CreateControllerRevision`: create `revision` under `<parent_name>-<hash>`, the hash taking
    /// `collision_count` in; on a name clash with different data, bump `collision_count` and retry.
    pub async fn create(
        &self,
        parent_name: &str,
        namespace: &str,
        revision: &ControllerRevision,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision, Error> {
        let api = self.api(namespace);
        let mut clone = revision.clone();
        clone.metadata.namespace = Some(namespace.to_string());
        for _ in 0..MAX_CREATE_ATTEMPTS {
            let name = revision_name(
                parent_name,
                &hash_revision(revision, Some(*collision_count)),
            );
            clone.metadata.name = Some(name.clone());
            match api.create(&clone).await {
                Ok(created) => return Ok(created),
                Err(e) if e.is_already_exists() => {
                    let exists = api
                        .get(&name)
                        .await
                        .map_err(|e| Error::api("get controller revision", e))?;
                    if exists.data == clone.data {
                        return Ok(exists);
                    }
                    *collision_count = collision_count.saturating_add(1);
                }
                Err(e) => return Err(Error::api("create controller revision", e)),
            }
        }
        Err(Error::Collisions {
            parent: parent_name.to_string(),
            attempts: MAX_CREATE_ATTEMPTS,
        })
    }

    /// `UpdateControllerRevision`: give `revision` the number `new_revision`.
    pub async fn update(
        &self,
        revision: &ControllerRevision,
        new_revision: i64,
    ) -> Result<ControllerRevision, Error> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        let api = self.api(namespace);
        let mut clone = revision.clone();
        let mut delay = RETRY_FIRST;
        let mut step = 1;
        loop {
            if clone.revision == new_revision {
                return Ok(clone);
            }
            clone.revision = new_revision;
            match api.replace(name, &clone).await {
                Ok(updated) => return Ok(updated),
                Err(e) if e.is_conflict() && step < RETRY_STEPS => {
                    if let Some(cached) = self.lister.namespace(namespace).get(name) {
                        clone = (*cached).clone();
                    }
                    let jitter = rand::thread_rng().gen_range(0.0..RETRY_JITTER);
                    tokio::time::sleep(delay.mul_f64(1.0 + jitter)).await;
                    delay *= RETRY_FACTOR;
                    step += 1;
                }
                Err(e) => return Err(Error::api("update controller revision", e)),
            }
        }
    }

    /// `DeleteControllerRevision`. A revision already gone is not an error.
    pub async fn delete(&self, revision: &ControllerRevision) -> Result<(), Error> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        match self
            .api(namespace)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(Error::api("delete controller revision", e)),
        }
    }

    /// `AdoptControllerRevision`: make `owner` the controller of an orphan revision.
    pub async fn adopt(
        &self,
        owner: &OwnerReference,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision, Error> {
        if let Some(current) = controller_of(&revision.metadata) {
            return Err(Error::OwnedElsewhere {
                name: revision.metadata.name.clone().unwrap_or_default(),
                owner: format!("{}/{} {}", current.kind, current.name, current.uid),
            });
        }
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let uid = revision.metadata.uid.as_deref().unwrap_or_default();
        self.api(namespace)
            .patch(
                revision.metadata.name.as_deref().unwrap_or_default(),
                &Patch::Strategic(adopt_patch(owner, uid)),
            )
            .await
            .map_err(|e| Error::api("adopt controller revision", e))
    }

    /// `ReleaseControllerRevision`: drop `owner_uid`'s reference. `None` when the revision is gone
    /// or the patch is refused as invalid (no longer ours, or no owner at all), as upstream.
    pub async fn release(
        &self,
        owner_uid: &str,
        revision: &ControllerRevision,
    ) -> Result<Option<ControllerRevision>, Error> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let uid = revision.metadata.uid.as_deref().unwrap_or_default();
        let patch = Patch::Strategic(release_patch(owner_uid, uid));
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        match self.api(namespace).patch(name, &patch).await {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.is_not_found() || e.is_invalid() => Ok(None),
            Err(e) => Err(Error::api("release controller revision", e)),
        }
    }
}
