//! The params of ValidatingAdmissionPolicies as admission reads them: from the watch cache of
//! their kind, by name or by namespace (upstream's params informer). A resource that is not
//! served has none.

use std::sync::Arc;

use serde_json::Value;

use super::object_key;
use crate::state::AppState;
use crate::watch_cache::Select;

/// The params of ValidatingAdmissionPolicies, read from the watch cache of their kind (as
/// stored: a custom resource's params are in its storage version).
pub(super) struct CachedParams<'a> {
    pub(super) state: &'a AppState,
}

impl CachedParams<'_> {
    fn info(
        &self,
        kind: &crate::admission::policy::compiled::ParamKind,
    ) -> Option<api::ResourceInfo> {
        let (group, version) = kind
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", kind.api_version.as_str()));
        let served = self.state.resources.snapshot();
        let found = served.resources.iter().find(|r| {
            r.info.group == group && r.info.version == version && r.info.kind == kind.kind
        });
        found.map(|r| r.info.clone())
    }
}

impl crate::admission::policy::ParamSource for CachedParams<'_> {
    fn namespaced(&self, kind: &crate::admission::policy::compiled::ParamKind) -> Option<bool> {
        self.info(kind).map(|i| i.namespaced)
    }

    fn get(
        &self,
        kind: &crate::admission::policy::compiled::ParamKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Value>> {
        let info = self.info(kind)?;
        self.state.cache.get(&object_key(&info, namespace, name))
    }

    fn list(
        &self,
        kind: &crate::admission::policy::compiled::ParamKind,
        namespace: Option<&str>,
    ) -> Vec<Arc<Value>> {
        let Some(info) = self.info(kind) else {
            return Vec::new();
        };
        let all = format!("/registry/{}/", info.storage);
        let prefix = match namespace {
            Some(ns) => format!("{all}{ns}/"),
            None => all.clone(),
        };
        self.state.cache.current(&all, &prefix, Select::All)
    }
}
