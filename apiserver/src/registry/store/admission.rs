//! Admission in the generic store: the built-in plugins of [`crate::admission`] and the kind's
//! [`Strategy::admit`](crate::registry::Strategy::admit), with a read-only view of other objects
//! served from the watch cache.
//!
//! Upstream runs admission plugins between decoding and storage, reading informer listers. Here
//! a create first waits until the cache has every write acknowledged before it (see
//! [`Store::create`]), so a class created just before a pod is seen; an update reads the cache as
//! it is, which may trail writes still in flight (as a lister does).
//!
//! Validating admission ([`Store::validate_admission`], the ResourceQuota plugin of
//! [`crate::admission`]) runs later, on the validated object just before the store write; it may
//! write other objects (a quota's usage) through the generic store.
//!
//! Admission webhooks ([`crate::admission::webhook`]) run at their upstream places: mutating
//! webhooks after the built-in mutating phase (their result is validated: on a create by the
//! validation that follows, on an update again), validating webhooks after the built-in
//! validating phase and before ResourceQuota, and both on a client's delete. They see the object
//! in the endpoint's version; a mutated object drops fields its kind does not define and goes
//! back to storage form. Only clients' requests (a user in the options) are sent; nothing is
//! built for a request when no webhook is configured. Subresources whose object is of another
//! kind (a Scale, a Binding, an Eviction, connect options) go through the same call with that
//! kind ([`super::subresource_admission`]).

use std::sync::Arc;

use serde_json::Value;

use super::{object_key, Store};
use crate::admission::node_restriction::{NodeOperation, NodeRequest};
use crate::admission::webhook::{Effects, Operation as WebhookOperation, Request};
use crate::admission::{Attributes, Operation};
use crate::error::Result;
use crate::registry::{DeleteOptions, Forbidden, Objects, WriteOptions};
use crate::state::AppState;
use crate::watch_cache::{Select, SelectorView, ViewFilter};

/// The watch cache's current objects, by (group, plural) of any served version.
pub struct CachedObjects<'a> {
    cache: &'a crate::watch_cache::WatchCache,
    resources: &'a crate::registry::ResourceRegistry,
    rbac: &'a crate::authz::policy_cache::PolicyCache,
}

impl<'a> CachedObjects<'a> {
    /// The view over `state`'s cache.
    pub fn new(state: &'a AppState) -> Self {
        CachedObjects {
            cache: &state.cache,
            resources: &state.resources,
            rbac: &state.rbac,
        }
    }

    /// The served resource `group`/`plural` (shared, not copied: admission asks per request).
    fn resource(&self, group: &str, plural: &str) -> Option<Arc<crate::registry::Resource>> {
        let served = self.resources.snapshot();
        let found = served.resources.iter().find(|r| r.info.is(group, plural));
        found.cloned()
    }
}

impl CachedObjects<'_> {
    /// The objects of `group`/`plural` in `namespace` that `select` keeps: one namespace's key
    /// range of the watch cache, not the whole resource.
    fn in_namespace(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        select: Select<'_>,
    ) -> Vec<Arc<Value>> {
        let Some(resource) = self.resource(group, plural) else {
            return Vec::new();
        };
        let all = format!("/registry/{}/", resource.info.storage);
        self.cache
            .current(&all, &format!("{all}{namespace}/"), select)
    }
}

impl Objects for CachedObjects<'_> {
    fn list(&self, group: &str, plural: &str) -> Vec<Arc<Value>> {
        let Some(resource) = self.resource(group, plural) else {
            return Vec::new();
        };
        let prefix = format!("/registry/{}/", resource.info.storage);
        self.cache.current(&prefix, &prefix, Select::All)
    }

    fn list_in(&self, group: &str, plural: &str, namespace: &str) -> Vec<Arc<Value>> {
        self.in_namespace(group, plural, namespace, Select::All)
    }

    /// Told on the pods' selector views: cold pods of other nodes are not decoded.
    fn pods_on_node(&self, namespace: &str, node: &str) -> Vec<Arc<Value>> {
        self.in_namespace("", "pods", namespace, Select::OnView(&OnNode(node)))
    }

    fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Value>> {
        let resource = self.resource(group, plural)?;
        self.cache.get(&object_key(&resource.info, namespace, name))
    }

    fn rule_resolver(&self) -> Option<Arc<crate::authz::rule_resolver::RuleResolver>> {
        Some(self.rbac.current(self.cache))
    }
}

impl Store<'_> {
    /// What admission plugins know of a request on this store; `opts` (where the request's
    /// warnings and audit annotations go) is none on paths that keep neither.
    fn attributes<'v>(
        &'v self,
        old: Option<&'v Value>,
        subresource: &'v str,
        opts: Option<&'v WriteOptions>,
    ) -> Attributes<'v> {
        Attributes {
            operation: match old {
                None => Operation::Create,
                Some(_) => Operation::Update,
            },
            group: &self.resource.info.group,
            resource: &self.resource.info.plural,
            namespace: self.namespace.as_deref(),
            old,
            subresource,
            warnings: opts.map(|o| &o.warnings),
            audit: opts.map(|o| &o.audit_annotations),
            user: opts.and_then(|o| o.user.as_deref()),
            authorizes: self.state.security.is_some(),
        }
    }

    /// The mutating phase of admission on `obj` (`old` for an update): the built-in plugins
    /// ([`crate::admission`]) with the kind's own admission at Priority's place. A refusal is the
    /// kind's 403 naming `name`, the name the request gave (none for a generated one, as upstream).
    pub(crate) fn admit(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        name: &str,
        opts: Option<&WriteOptions>,
    ) -> Result<()> {
        let objects = CachedObjects::new(self.state);
        let attrs = self.attributes(old, "", opts);
        let strategy = &self.resource.strategy;
        self.state
            .admission
            .admit(&attrs, obj, &objects, |obj| {
                strategy.admit(obj, old, &objects)
            })
            .map_err(|refused| self.refused(name, refused))
    }

    /// The validating phase of admission, on the validated object written as `subresource`
    /// (`""` for the object itself): a plugin's field errors are a 422, a refusal a 403.
    pub(crate) fn validate_admission(
        &self,
        obj: &Value,
        old: Option<&Value>,
        name: &str,
        subresource: &str,
        opts: Option<&WriteOptions>,
    ) -> Result<()> {
        let objects = CachedObjects::new(self.state);
        let attrs = self.attributes(old, subresource, opts);
        let errs = self.state.admission.invalid(&attrs, obj);
        if !errs.is_empty() {
            return Err(self.invalid(name, &errs));
        }
        self.state
            .admission
            .validate(&attrs, obj, &objects)
            .map_err(|refused| self.refused(name, refused))
    }

    /// NodeRestriction ([`crate::admission::node_restriction`]) on a client's `operation` of
    /// `name` as `subresource`: a kubelet's write of another node's objects is a 403 naming
    /// `name`. Nothing is checked for other users, server-internal writes (no user) or with the
    /// plugin disabled.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn restrict_node(
        &self,
        operation: NodeOperation,
        object: Option<&Value>,
        old: Option<&Value>,
        subresource: &str,
        name: &str,
        user: Option<&crate::authn::UserInfo>,
    ) -> Result<()> {
        let Some(user) = user.filter(|u| {
            self.state.admission.node_restriction()
                && crate::admission::node_restriction::node_of(u).is_some()
        }) else {
            return Ok(());
        };
        let info = &self.resource.info;
        let request = NodeRequest {
            user,
            operation,
            group: &info.group,
            resource: &info.plural,
            subresource,
            namespace: self.namespace.as_deref().unwrap_or(""),
            name,
            object,
            old,
        };
        crate::admission::node_restriction::admit(&request, &CachedObjects::new(self.state))
            .map_err(|refusal| refusal.into_error(&self.group_resource(), name))
    }

    /// Waits, each at most its plugin's bound, for the objects admission of the create of `obj`
    /// expects to appear (a new namespace's `default` ServiceAccount); woken by every change the
    /// watch cache applies. One still missing after its wait is left to the plugin to refuse.
    pub(crate) async fn await_admission_objects(&self, obj: &Value) {
        let attrs = self.attributes(None, "", None);
        for awaited in self.state.admission.awaited(&attrs, obj) {
            let objects = CachedObjects::new(self.state);
            let present = || {
                let ns = Some(awaited.namespace.as_str()).filter(|n| !n.is_empty());
                objects
                    .get(awaited.group, awaited.resource, ns, &awaited.name)
                    .is_some()
            };
            let deadline = tokio::time::Instant::now() + awaited.wait;
            while !present() {
                let next = self.state.cache.revision() + 1;
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() || !self.state.cache.wait_for(next, left).await {
                    break;
                }
            }
        }
    }

    fn refused(&self, name: &str, Forbidden(reason): Forbidden) -> crate::error::ApiError {
        api::status::forbidden(&self.group_resource(), name, &reason).into()
    }
}

/// The group, version and kind of a subresource's object that is not the resource's own (an
/// `autoscaling/v1` `Scale`, a `v1` `Binding`, a `policy/v1` `Eviction`, `v1` `PodExecOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SubresourceKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
}

/// A write as admission webhooks see it.
pub(super) struct WebhookWrite<'w> {
    pub(super) operation: WebhookOperation,
    /// The name when neither object has one; for a subresource's own kind, the name always
    /// (the parent object's, from the URL, as upstream's attributes carry it).
    pub(super) name: &'w str,
    /// The kind of the objects when not the resource's own: they are sent as they are, and a
    /// mutated one comes back as the webhooks left it, for the caller to decode.
    pub(super) kind: Option<SubresourceKind>,
    pub(super) object: Option<&'w Value>,
    pub(super) old: Option<&'w Value>,
    pub(super) subresource: &'w str,
    pub(super) user: Option<&'w crate::authn::UserInfo>,
    pub(super) dry_run: bool,
    /// `CreateOptions`/`UpdateOptions`/`DeleteOptions` fields.
    pub(super) options: Value,
    pub(super) warnings: &'w crate::registry::Warnings,
    pub(super) audit: &'w crate::registry::AuditAnnotations,
}

/// Which admission webhooks a store step runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Mutating,
    Validating,
}

impl Store<'_> {
    /// The options of a write as admission webhooks see them (`CreateOptions`/`UpdateOptions`
    /// fields).
    pub(super) fn webhook_options(opts: &WriteOptions) -> Value {
        let mut o = serde_json::Map::new();
        if opts.dry_run {
            o.insert("dryRun".into(), serde_json::json!(["All"]));
        }
        if !opts.field_manager.is_empty() {
            o.insert(
                "fieldManager".into(),
                Value::String(opts.field_manager.clone()),
            );
        }
        Value::Object(o)
    }

    /// Runs the admission webhooks of `phase` on `write`; `Some` with the object mutating
    /// webhooks changed (in storage form). Server-internal writes (no user) are not sent.
    pub(super) async fn run_webhooks(
        &self,
        phase: Phase,
        write: WebhookWrite<'_>,
    ) -> Result<Option<Value>> {
        let info = &self.resource.info;
        let webhooks = &self.state.webhooks;
        let Some(user) = write.user.filter(|_| self.any_webhooks(phase)) else {
            return Ok(None);
        };
        // A subresource's own kind is sent as it is; the resource's objects in the endpoint's
        // version.
        let foreign = write.kind.is_some();
        let shown_old = write.old.map(|o| self.shown_unless(foreign, o));
        let shown = write.object.map(|o| self.shown_unless(foreign, o));
        let name = match write.kind {
            Some(_) => write.name,
            None => write
                .object
                .and_then(api::meta::name)
                .or_else(|| write.old.and_then(api::meta::name))
                .unwrap_or(write.name),
        }
        .to_string();
        let equivalents = self.equivalents();
        let (kind_group, kind_version, kind) = match write.kind {
            Some(k) => (k.group, k.version, k.kind),
            None => (
                info.group.as_str(),
                info.version.as_str(),
                info.kind.as_str(),
            ),
        };
        let req = Request {
            operation: write.operation,
            group: &info.group,
            version: &info.version,
            resource: &info.plural,
            kind_group,
            kind_version,
            kind,
            subresource: write.subresource,
            name: &name,
            namespace: self.namespace.as_deref(),
            object: shown.as_deref(),
            old: shown_old.as_deref(),
            user,
            dry_run: write.dry_run,
            options: &write.options,
            equivalents: &equivalents,
            requested: None,
        };
        let cache = &self.state.cache;
        let namespace_labels = |ns: &str| {
            cache
                .get(&format!("/registry/namespaces/{ns}"))
                .map(|o| api::meta::labels(&o))
        };
        // The `authorizer` variable of CEL expressions (webhook match conditions, policies):
        // made once per request, on first use, so its answers are shared by every webhook and
        // policy (upstream's per-request caching authorizer).
        let made = std::sync::OnceLock::new();
        let authorizer = || {
            made.get_or_init(|| {
                let request = k8s_cel::library::authz::RequestResource {
                    group: info.group.clone(),
                    resource: info.plural.clone(),
                    subresource: req.subresource.to_string(),
                    namespace: req.namespace.unwrap_or("").to_string(),
                    name: req.name.to_string(),
                };
                crate::admission::policy::authorizer::RequestAuthorizer::value(
                    self.state.clone(),
                    req.user,
                    self.state.security.is_some(),
                    request,
                )
            })
            .clone()
        };
        let fx = Effects {
            warnings: write.warnings,
            audit: write.audit,
            namespace_labels: &namespace_labels,
            authorizer: Some(&authorizer),
        };
        let gr = self.group_resource();
        match phase {
            // Fields the kind does not define are dropped, as decoding the patched object into
            // its type (or pruning a custom resource) does upstream.
            Phase::Mutating => match webhooks.mutate(&req, &fx, &gr).await? {
                // The caller decodes a subresource's own kind.
                Some(mutated) if write.kind.is_some() => Ok(Some(mutated)),
                Some(mut mutated) => {
                    self.validate_fields(&mut mutated, &WriteOptions::default())?;
                    // Upstream decodes the patched object into its type and answers 500 if it
                    // does not decode: an ill-typed patch must not reach storage.
                    if let Err(message) = self.resource.decodes(&mutated) {
                        return Err(api::status::internal(&message).into());
                    }
                    Ok(Some(self.resource.strategy.to_storage(mutated)))
                }
                None => Ok(None),
            },
            Phase::Validating => {
                // ValidatingAdmissionPolicy runs before the validating webhooks, as upstream.
                let namespace = |ns: &str| cache.get(&format!("/registry/namespaces/{ns}"));
                let params = super::policy_params::CachedParams { state: self.state };
                let lookups = crate::admission::policy::Lookups {
                    namespace: &namespace,
                    params: &params,
                    authorizer: &authorizer,
                };
                self.state.policies.validate(&req, &fx, &gr, &lookups)?;
                webhooks.validate(&req, &fx, &gr).await.map(|()| None)
            }
        }
    }

    /// The served resources stored with this one, itself included (upstream's
    /// `EquivalentResourcesFor`), which rules under `matchPolicy: Equivalent` may name.
    pub(super) fn equivalents(&self) -> Vec<crate::admission::webhook::request::Equivalent> {
        let storage = &self.resource.info.storage;
        let served = self.state.resources.snapshot();
        let same = served
            .resources
            .iter()
            .filter(|r| &r.info.storage == storage);
        same.map(|r| crate::admission::webhook::request::Equivalent {
            group: r.info.group.clone(),
            version: r.info.version.clone(),
            resource: r.info.plural.clone(),
        })
        .collect()
    }

    /// Whether any webhook of `phase` is configured for this resource (a lock and a length).
    pub(super) fn any_webhooks(&self, phase: Phase) -> bool {
        let (info, webhooks) = (&self.resource.info, &self.state.webhooks);
        match phase {
            Phase::Mutating => webhooks.any_mutating(&info.group, &info.plural),
            Phase::Validating => {
                webhooks.any_validating(&info.group, &info.plural)
                    || self.state.policies.any(&info.group, &info.plural)
            }
        }
    }

    /// A create or update as admission webhooks see it.
    fn webhook_write<'w>(
        obj: &'w Value,
        old: Option<&'w Value>,
        subresource: &'w str,
        opts: &'w WriteOptions,
    ) -> WebhookWrite<'w> {
        WebhookWrite {
            operation: if old.is_some() {
                WebhookOperation::Update
            } else {
                WebhookOperation::Create
            },
            name: "",
            kind: None,
            object: Some(obj),
            old,
            subresource,
            user: opts.user.as_deref(),
            dry_run: opts.dry_run,
            options: Self::webhook_options(opts),
            warnings: &opts.warnings,
            audit: &opts.audit_annotations,
        }
    }

    /// Both webhook phases on the delete of `current` (upstream's delete handler admits with no
    /// object; the store validates with the object being deleted as the old object).
    pub(crate) async fn admit_delete_by_webhooks(
        &self,
        current: &Value,
        opts: &DeleteOptions,
    ) -> Result<()> {
        let mut options = serde_json::Map::new();
        if opts.dry_run {
            options.insert("dryRun".into(), serde_json::json!(["All"]));
        }
        if let Some(g) = opts.grace_period_seconds {
            options.insert("gracePeriodSeconds".into(), serde_json::json!(g));
        }
        // Warnings of a delete are not rendered, and audit is not kept: both go nowhere here.
        let (warnings, audit) = (Default::default(), Default::default());
        let name = api::meta::name(current).unwrap_or("");
        let write = |old| WebhookWrite {
            operation: WebhookOperation::Delete,
            name,
            kind: None,
            object: None,
            old,
            subresource: "",
            user: opts.user.as_deref(),
            dry_run: opts.dry_run,
            options: Value::Object(options.clone()),
            warnings: &warnings,
            audit: &audit,
        };
        self.run_webhooks(Phase::Mutating, write(None)).await?;
        self.run_webhooks(Phase::Validating, write(Some(current)))
            .await
            .map(|_| ())
    }

    /// `obj` as it is when `as_is`, else [`shown`](Self::shown).
    fn shown_unless<'v>(&self, as_is: bool, obj: &'v Value) -> std::borrow::Cow<'v, Value> {
        if as_is {
            std::borrow::Cow::Borrowed(obj)
        } else {
            self.shown(obj)
        }
    }

    /// An object as the request's endpoint shows it.
    fn shown<'v>(&self, obj: &'v Value) -> std::borrow::Cow<'v, Value> {
        if self.resource.is_presentable(obj) {
            std::borrow::Cow::Borrowed(obj)
        } else {
            std::borrow::Cow::Owned(self.resource.present(obj.clone()))
        }
    }

    /// MutatingAdmissionWebhook on `obj`; whether it changed.
    pub(crate) async fn mutate_by_webhooks(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        subresource: &str,
        opts: &WriteOptions,
    ) -> Result<bool> {
        if opts.user.is_none() || !self.any_webhooks(Phase::Mutating) {
            return Ok(false);
        }
        let write = Self::webhook_write(obj, old, subresource, opts);
        let mutated = self.run_webhooks(Phase::Mutating, write).await?;
        let changed = mutated.is_some();
        if let Some(m) = mutated {
            *obj = m;
        }
        Ok(changed)
    }

    /// ValidatingAdmissionWebhook on `obj`.
    pub(crate) async fn validate_by_webhooks(
        &self,
        obj: &Value,
        old: Option<&Value>,
        subresource: &str,
        opts: &WriteOptions,
    ) -> Result<()> {
        if opts.user.is_none() || !self.any_webhooks(Phase::Validating) {
            return Ok(());
        }
        let write = Self::webhook_write(obj, old, subresource, opts);
        self.run_webhooks(Phase::Validating, write)
            .await
            .map(|_| ())
    }

    /// The last validating admission plugin, ResourceQuota, on `obj` (`old` for an update)
    /// written as `subresource` (`""` for the main resource), after the built-in chain's
    /// [`validate_admission`](Self::validate_admission): it charges the namespace's quotas by
    /// compare-and-swap before the write. A dry run is checked without recording anything.
    /// Boxed: the plugin writes through the store, whose create path comes back here.
    pub(crate) fn validate_quota<'s>(
        &'s self,
        obj: &'s Value,
        old: Option<&'s Value>,
        subresource: &'s str,
        dry_run: bool,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send + 's>> {
        if !self.state.admission.resource_quota() {
            return Box::pin(std::future::ready(Ok(())));
        }
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

/// Pods bound to the node.
struct OnNode<'a>(&'a str);

impl ViewFilter for OnNode<'_> {
    fn on_view(&self, view: &SelectorView) -> bool {
        view.field("spec.nodeName") == Some(self.0)
    }

    fn on_object(&self, pod: &Value) -> bool {
        pod["spec"]["nodeName"] == self.0
    }
}
