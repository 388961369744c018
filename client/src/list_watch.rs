//! `ListerWatcher`: the two calls a [`Reflector`](crate::Reflector) needs from a source of objects
//! (client-go `cache.ListerWatcher`).
//!
//! [`Api<K>`](crate::Api) implements it over HTTP; [`testing::MemoryListerWatcher`](crate::testing)
//! implements it in process with controllable resourceVersions, compaction (410) and disconnects.
//! `ListerWatcher` receives the informer's selectors in `ListParams`; the reflector fills in
//! `resourceVersion`, `limit`/`continue`, `timeoutSeconds` and `allowWatchBookmarks`.

use async_trait::async_trait;

use crate::error::Result;
use crate::rest::{Api, ApiObject, ListParams, ObjectList, WatchStream};

/// A source that can LIST (optionally paginated, at a resourceVersion) and WATCH from a
/// resourceVersion.
#[async_trait]
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// One LIST request: `params.resource_version`, `limit`, `continue_token` are honoured.
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>>;
    /// Opens a WATCH delivering every change after `resource_version`.
    async fn watch(&self, params: &ListParams, resource_version: &str) -> Result<WatchStream<K>>;
}

#[async_trait]
impl<K: ApiObject> ListerWatcher<K> for Api<K> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>> {
        Api::list(self, params).await
    }
    async fn watch(&self, params: &ListParams, resource_version: &str) -> Result<WatchStream<K>> {
        Api::watch(self, params, resource_version).await
    }
}
