//! The runtime registry of served resources, and the per-kind steps of the generic store.
//!
//! A [`Resource`] is a served (group, version, resource): its [`ResourceInfo`] (what discovery lists
//! and routing needs), its [`Strategy`] and, for built-in kinds, the typed schema OpenAPI publishes.
//! Its methods are the steps every write takes (object-meta rules, then the kind's hooks), so the
//! generic store and the strategy tests run exactly the same code.
//!
//! [`ResourceRegistry`] holds the served set. Readers take an `Arc` snapshot under a short read lock and
//! never see a half-applied change; each change bumps the [generation](ResourceRegistry::generation),
//! which discovery's ETag and the OpenAPI cache follow. Built-in kinds are registered at start-up
//! ([`super::builtin`]); custom resources come and go while the server runs.

use std::sync::{Arc, OnceLock};

use api::validation::FieldError;
use api::ResourceInfo;
use parking_lot::RwLock;
use serde_json::Value;

use super::conversion::CustomResourceConverter;
use super::strategy as common;
use super::Strategy;
use crate::openapi::schemas::KindSchema;

/// Adds the kind's typed schema (and everything it references) to a generator; returns its root.
pub type SchemaFn = fn(&mut schemars::generate::SchemaGenerator) -> schemars::Schema;

/// One served resource.
pub struct Resource {
    /// Names, scope, verbs, subresources, storage segment.
    pub info: ResourceInfo,
    /// The kind's hooks.
    pub strategy: Arc<dyn Strategy>,
    /// The kind's typed schema, when it has one (`kubectl explain`, `fieldValidation`).
    pub schema: Option<SchemaFn>,
    /// Decodes an object into the kind's type (built-in kinds): every write is checked with it.
    pub decode: Option<super::typed::DecodeFn>,
    /// That schema generated, on first use (the typed kinds' schemas take milliseconds).
    generated: OnceLock<Option<KindSchema>>,
    /// The OpenAPI v3 schema of a kind without a typed one (a custom resource's, from its CRD).
    pub openapi: Option<serde_json::Value>,
    /// The webhook conversion of a custom resource whose CRD converts through one: the store
    /// converts through it (an async step) what the strategy's `to_storage`/`from_storage` do
    /// for every other kind.
    pub converter: Option<Arc<CustomResourceConverter>>,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Resource {
    /// A resource with `strategy` and no typed schema.
    pub fn new(info: ResourceInfo, strategy: Arc<dyn Strategy>) -> Self {
        Resource {
            info,
            strategy,
            schema: None,
            decode: None,
            generated: OnceLock::new(),
            openapi: None,
            converter: None,
        }
    }

    /// With a typed schema.
    pub fn with_schema(mut self, schema: SchemaFn) -> Self {
        self.schema = Some(schema);
        self
    }

    /// With the typed decoding of a built-in kind.
    pub fn with_decode(mut self, decode: super::typed::DecodeFn) -> Self {
        self.decode = Some(decode);
        self
    }

    /// Checks that `obj` decodes into the kind's type (kinds without one: always); the error
    /// is worded as Go's (`json: cannot unmarshal …`, see [`super::typed`]).
    pub fn decodes(&self, obj: &Value) -> Result<(), String> {
        let Some(decode) = self.decode else {
            return Ok(());
        };
        decode(obj).map_err(|e| match self.kind_schema() {
            Some(schema) => super::typed::go_message(schema, obj, &e),
            None => e.reason,
        })
    }

    /// With a webhook converter (custom resources whose CRD converts through a webhook).
    pub fn with_converter(mut self, converter: Option<Arc<CustomResourceConverter>>) -> Self {
        self.converter = converter;
        self
    }

    /// The webhook converter of the resource, if its objects convert through one.
    pub fn converter(&self) -> Option<&Arc<CustomResourceConverter>> {
        self.converter.as_ref()
    }

    /// With an OpenAPI schema (custom resources).
    pub fn with_openapi(mut self, schema: serde_json::Value) -> Self {
        self.openapi = Some(schema);
        self
    }

    /// The kind's typed schema, generated on first use; `None` for kinds without one.
    pub fn kind_schema(&self) -> Option<&KindSchema> {
        self.generated
            .get_or_init(|| self.schema.map(crate::openapi::schemas::kind_schema))
            .as_ref()
    }

    /// What the patch code needs of the kind: its description and, for a custom resource, the
    /// schema its list and map types come from.
    pub fn patch_kind(&self) -> crate::patch::schema::PatchKind<'_> {
        crate::patch::schema::PatchKind::custom(&self.info, self.strategy.structural())
    }

    /// Whether the kind splits status into a subresource.
    pub fn has_status(&self) -> bool {
        self.info.has_status_subresource()
    }

    /// Create-time rules: kind defaults, status reset, `generation = 1` where tracked.
    pub fn prepare_for_create(&self, obj: &mut Value) {
        self.strategy.prepare_for_create(obj);
        if let Some(status) = self.strategy.initial_status(obj) {
            common::set_field(obj, "status", status);
        }
        if self.strategy.tracks_generation() {
            api::meta::set_generation(obj, 1);
        }
    }

    /// Update rules of the main resource: the kind's, then status kept from `old` (where status is
    /// a subresource) and generation bumped iff the spec changed.
    pub fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.strategy.prepare_for_update(new, old);
        let tracked = self.strategy.tracks_generation();
        common::prepare_update_common(new, old, self.has_status(), tracked);
        if tracked {
            // What the kind tracks may be other than `spec` (a PodTemplate's `template`, webhook
            // configurations' `webhooks`).
            let changed = self.strategy.generation_changed(new, old);
            let old_gen = api::meta::generation(old).unwrap_or(1);
            api::meta::set_generation(new, if changed { old_gen + 1 } else { old_gen });
        }
        self.strategy.finish_update(new, old);
    }

    /// `/status` rules: everything but status comes from `old`.
    pub fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        common::prepare_status_common(new, old);
        self.strategy.prepare_for_status_update(new, old);
    }

    /// Object meta, then the kind's validation of a new object.
    pub fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = common::validate_meta(&self.info, obj, self.strategy.name_validation());
        errs.extend(self.strategy.validate_create(obj));
        errs
    }

    /// Object meta (with its immutable fields), then the kind's validation of an update.
    pub fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs =
            common::validate_meta_update(&self.info, new, old, self.strategy.name_validation());
        errs.extend(self.strategy.validate_update(new, old));
        errs
    }

    /// Field-selector value: `metadata.name`, `metadata.namespace` (namespaced kinds), then the
    /// kind's own fields.
    pub fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        common::meta_field_value(&self.info, obj, field)
            .or_else(|| self.strategy.field_value(obj, field))
    }

    /// An object as this endpoint serves it: converted from the storage form by the strategy, with
    /// the endpoint's `kind`/`apiVersion`.
    /// Under a webhook converter the object is already in the endpoint's version (the store
    /// converted it), and its `apiVersion` is left as it is.
    pub fn present(&self, obj: Value) -> Value {
        let obj = self.strategy.from_storage(obj);
        let mut obj = if self.converter.is_some() {
            obj
        } else {
            super::with_type_meta(&self.info, obj)
        };
        self.canonicalize(&mut obj);
        obj
    }

    /// Puts an object of this resource into kube-apiserver's field order (`api::wire`): as its
    /// Kubernetes type for typed kinds, only `metadata` for kinds without one. Done once when an
    /// object is stored, so that reads are a byte copy of the stored text.
    pub fn canonicalize(&self, obj: &mut Value) {
        api::wire::canonicalize_object(obj, self.schema.is_some());
    }

    /// Whether a stored object is already in this endpoint's form (the strategies' storage
    /// conversion is the identity whenever the stored `apiVersion`/`kind` are the endpoint's).
    pub fn is_presentable(&self, obj: &Value) -> bool {
        let text = |field: &str| obj.get(field).and_then(Value::as_str);
        match (text("apiVersion"), text("kind")) {
            (Some(api_version), Some(kind)) => self.is_presentable_as(api_version, kind),
            _ => false,
        }
    }

    /// [`is_presentable`](Self::is_presentable) of an object of `api_version` and `kind`.
    pub fn is_presentable_as(&self, api_version: &str, kind: &str) -> bool {
        !self.strategy.reads_need_conversion()
            && kind == self.info.kind
            && self.info.is_api_version(api_version)
    }

    /// Whether an update of `obj` removes it (`ShouldDeleteDuringUpdate`): it is being deleted, no
    /// grace period is left, and no finalizer (of the object or of the kind) is pending.
    pub fn should_delete_during_update(&self, obj: &Value) -> bool {
        api::meta::deletion_timestamp(obj).is_some()
            && api::meta::deletion_grace_period_seconds(obj).unwrap_or(0) == 0
            && api::meta::finalizers(obj).is_empty()
            && !self.strategy.pending_finalization(obj)
    }
}

/// Why a resource could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The (group, version, plural) is already served.
    #[error("resource {0} is already served")]
    AlreadyServed(String),
    /// Another resource of the group-version already has this kind.
    #[error("kind {0} is already served by another resource of its group-version")]
    KindTaken(String),
}

/// A consistent view of the served set.
#[derive(Debug, Default)]
pub struct Served {
    /// Bumped by every change.
    pub generation: u64,
    /// In registration order (discovery order).
    pub resources: Vec<Arc<Resource>>,
    /// The aggregated discovery documents of this set, built on first request: discovery is
    /// built once per change of the served set, not per request.
    pub discovery: crate::discovery::Documents,
}

impl Served {
    /// The resource served at `/{group}/{version}/{plural}`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<Resource>> {
        self.resources
            .iter()
            .find(|r| r.info.plural == plural && r.info.version == version && r.info.group == group)
    }

    /// The resources of one group-version, in registration order.
    pub fn of<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Resource>> + 'a {
        self.resources
            .iter()
            .filter(move |r| r.info.group == group && r.info.version == version)
    }

    /// The distinct named groups in registration order, each with its versions in Kubernetes'
    /// version priority (GA, then beta, then alpha, higher first: the preferred version first, as
    /// the aggregator sorts a group's versions; versions of several CRDs of a group interleave).
    pub fn groups(&self) -> Vec<(&str, Vec<&str>)> {
        let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
        for r in self.resources.iter().filter(|r| !r.info.group.is_empty()) {
            let (g, v) = (r.info.group.as_str(), r.info.version.as_str());
            match out.iter_mut().find(|(name, _)| *name == g) {
                Some((_, vs)) if !vs.contains(&v) => vs.push(v),
                Some(_) => {}
                None => out.push((g, vec![v])),
            }
        }
        for (_, vs) in &mut out {
            vs.sort_by_key(|v| super::customresource::serving::version_priority(v));
        }
        out
    }

    /// Every served (group, version), core first.
    pub fn group_versions(&self) -> Vec<(&str, &str)> {
        let mut out = Vec::new();
        if self.resources.iter().any(|r| r.info.group.is_empty()) {
            out.push(("", "v1"));
        }
        for (g, vs) in self.groups() {
            out.extend(vs.into_iter().map(|v| (g, v)));
        }
        out
    }
}

/// The served resources; see the module docs.
#[derive(Debug)]
pub struct ResourceRegistry {
    served: RwLock<Arc<Served>>,
    /// The generation after each change, for those that follow the served set.
    changes: tokio::sync::watch::Sender<u64>,
}

impl Default for ResourceRegistry {
    fn default() -> Self {
        ResourceRegistry {
            served: RwLock::default(),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl ResourceRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Follows changes of the served set: the receiver sees each new generation.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The current served set.
    pub fn snapshot(&self) -> Arc<Served> {
        self.served.read().clone()
    }

    /// The generation of the served set.
    pub fn generation(&self) -> u64 {
        self.served.read().generation
    }

    /// The resource served at `/{group}/{version}/{plural}`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        self.served.read().find(group, version, plural).cloned()
    }

    /// Starts serving `resource`.
    pub fn register(&self, resource: Resource) -> Result<Arc<Resource>, RegisterError> {
        let mut served = self.served.write();
        let info = &resource.info;
        if served
            .find(&info.group, &info.version, &info.plural)
            .is_some()
        {
            return Err(RegisterError::AlreadyServed(format!(
                "{}/{}",
                info.api_version(),
                info.plural
            )));
        }
        if served
            .of(&info.group, &info.version)
            .any(|r| r.info.kind == info.kind)
        {
            return Err(RegisterError::KindTaken(info.kind.clone()));
        }
        let resource = Arc::new(resource);
        let mut resources = served.resources.clone();
        resources.push(resource.clone());
        *served = Arc::new(Served {
            generation: served.generation + 1,
            resources,
            ..Served::default()
        });
        self.changes.send_replace(served.generation);
        Ok(resource)
    }

    /// Replaces, in one change, the resources `gone` names as `(group, version, plural)` with
    /// `added` (a CRD's served versions as they now are): readers see the old set or the new one,
    /// never a mix. Refused as a whole, with the served set unchanged, when an added resource
    /// collides with one that stays.
    pub fn replace(
        &self,
        gone: &[(String, String, String)],
        added: Vec<Resource>,
    ) -> Result<(), RegisterError> {
        let mut served = self.served.write();
        let mut next = Served {
            generation: served.generation + 1,
            resources: served
                .resources
                .iter()
                .filter(|r| {
                    !gone.iter().any(|(g, v, p)| {
                        r.info.group == *g && r.info.version == *v && r.info.plural == *p
                    })
                })
                .cloned()
                .collect(),
            ..Served::default()
        };
        for resource in added {
            let info = &resource.info;
            if next
                .find(&info.group, &info.version, &info.plural)
                .is_some()
            {
                return Err(RegisterError::AlreadyServed(format!(
                    "{}/{}",
                    info.api_version(),
                    info.plural
                )));
            }
            if next
                .of(&info.group, &info.version)
                .any(|r| r.info.kind == info.kind)
            {
                return Err(RegisterError::KindTaken(info.kind.clone()));
            }
            next.resources.push(Arc::new(resource));
        }
        *served = Arc::new(next);
        self.changes.send_replace(served.generation);
        Ok(())
    }

    /// Stops serving `/{group}/{version}/{plural}`; its stored objects stay in storage.
    pub fn remove(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        let mut served = self.served.write();
        let gone = served.find(group, version, plural).cloned()?;
        let resources = served
            .resources
            .iter()
            .filter(|r| !Arc::ptr_eq(r, &gone))
            .cloned()
            .collect();
        *served = Arc::new(Served {
            generation: served.generation + 1,
            resources,
            ..Served::default()
        });
        self.changes.send_replace(served.generation);
        Some(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget() -> Resource {
        Resource::new(
            ResourceInfo::new("example.com", "v1", "Widget", "widgets"),
            Arc::new(common::GenericStrategy),
        )
    }

    #[test]
    fn registers_finds_and_removes_with_a_new_generation_each_time() {
        let reg = ResourceRegistry::new();
        assert_eq!(reg.generation(), 0);
        assert!(reg.register(widget()).is_ok());
        assert_eq!(reg.generation(), 1);
        assert!(reg.find("example.com", "v1", "widgets").is_some());
        assert!(reg.find("example.com", "v2", "widgets").is_none());
        assert!(matches!(
            reg.register(widget()),
            Err(RegisterError::AlreadyServed(_))
        ));
        let other_plural = Resource::new(
            ResourceInfo::new("example.com", "v1", "Widget", "gadgets"),
            Arc::new(common::GenericStrategy),
        );
        assert!(matches!(
            reg.register(other_plural),
            Err(RegisterError::KindTaken(_))
        ));
        assert_eq!(reg.generation(), 1);
        let before = reg.snapshot();
        assert!(reg.remove("example.com", "v1", "widgets").is_some());
        assert_eq!(reg.generation(), 2);
        assert!(reg.find("example.com", "v1", "widgets").is_none());
        // A snapshot taken before the change is unaffected by it.
        assert!(before.find("example.com", "v1", "widgets").is_some());
        assert!(reg.remove("example.com", "v1", "widgets").is_none());
    }

    #[test]
    fn groups_follow_registration_order_and_versions_their_priority() {
        let reg = ResourceRegistry::new();
        for (g, v, k, p) in [
            ("", "v1", "Pod", "pods"),
            ("b.io", "v1", "B", "bs"),
            ("a.io", "v1", "A", "as"),
            ("b.io", "v2", "B", "bs"),
        ] {
            let r = Resource::new(
                ResourceInfo::new(g, v, k, p),
                Arc::new(common::GenericStrategy),
            );
            assert!(reg.register(r).is_ok());
        }
        let s = reg.snapshot();
        assert_eq!(
            s.group_versions(),
            [("", "v1"), ("b.io", "v2"), ("b.io", "v1"), ("a.io", "v1")]
        );
    }
}
