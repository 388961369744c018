//! Admission in the generic store: the kind's [`Strategy::admit`](crate::registry::Strategy::admit)
//! with a read-only view of other objects served from the watch cache.
//!
//! Upstream runs admission plugins between decoding and storage, reading informer listers. Here
//! a create first waits until the cache has every write acknowledged before it (see
//! [`Store::create`]), so a class created just before a pod is seen; an update reads the cache as
//! it is, which may trail writes still in flight (as a lister does).
//!
//! Validating admission ([`Store::validate_admission`], the ResourceQuota plugin of
//! [`crate::admission`]) runs later, on the validated object just before the store write; it may
//! write other objects (a quota's usage) through the generic store.

use std::sync::Arc;

use serde_json::Value;

use super::{object_key, Store};
use crate::error::Result;
use crate::registry::{Forbidden, Objects};
use crate::state::AppState;
use crate::watch_cache::{ListAt, SnapshotOutcome};

/// The watch cache's current objects, by (group, plural) of any served version.
pub struct CachedObjects<'a> {
    state: &'a AppState,
}

impl<'a> CachedObjects<'a> {
    /// The view over `state`'s cache.
    pub fn new(state: &'a AppState) -> Self {
        CachedObjects { state }
    }

    fn info(&self, group: &str, plural: &str) -> Option<api::ResourceInfo> {
        let served = self.state.resources.snapshot();
        let found = served.resources.iter().find(|r| r.info.is(group, plural));
        found.map(|r| r.info.clone())
    }
}

impl Objects for CachedObjects<'_> {
    fn list(&self, group: &str, plural: &str) -> Vec<Arc<Value>> {
        let Some(info) = self.info(group, plural) else {
            return Vec::new();
        };
        let prefix = format!("/registry/{}/", info.storage);
        let all = |_: &Value| true;
        match self
            .state
            .cache
            .list(&prefix, &prefix, ListAt::Current, None, None, &all)
        {
            SnapshotOutcome::Listed(s) => s.items,
            SnapshotOutcome::Expired { .. } | SnapshotOutcome::Future { .. } => Vec::new(),
        }
    }

    fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Value>> {
        let info = self.info(group, plural)?;
        self.state.cache.get(&object_key(&info, namespace, name))
    }
}

impl Store<'_> {
    /// Runs the kind's admission on `obj` (`old` for an update); a refusal is the kind's 403
    /// naming `name`, the name the request gave (none for a generated one, as upstream).
    pub(crate) fn admit(&self, obj: &mut Value, old: Option<&Value>, name: &str) -> Result<()> {
        let objects = CachedObjects::new(self.state);
        self.resource
            .strategy
            .admit(obj, old, &objects)
            .map_err(|Forbidden(reason)| {
                api::status::forbidden(&self.group_resource(), name, &reason).into()
            })
    }
}

impl Store<'_> {
    /// Validating admission of `obj` (`old` for an update) written as `subresource` (`""` for the
    /// main resource): ResourceQuota. A dry run is checked without recording anything. Boxed: the
    /// plugin writes through the store, whose create path comes back here.
    pub(crate) fn validate_admission<'s>(
        &'s self,
        obj: &'s Value,
        old: Option<&'s Value>,
        subresource: &'s str,
        dry_run: bool,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send + 's>> {
        let write = crate::admission::resourcequota::Write {
            info: &self.resource.info,
            subresource,
            object: obj,
            old,
            dry_run,
        };
        Box::pin(crate::admission::resourcequota::validate(self.state, write))
    }
}
