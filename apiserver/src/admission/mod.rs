//! Built-in admission plugins (kube-apiserver's `plugin/pkg/admission`), run by the generic store
//! as one [`Chain`] in upstream's order (`AllOrderedPlugins`):
//!
//! | upstream plugin | here | what it does |
//! |---|---|---|
//! | NamespaceLifecycle | the store's namespace check (`registry/store/create.rs`) | refuses creates in a missing or terminating namespace |
//! | LimitRanger | [`limit_ranger`] | LimitRange defaults for containers; min/max/ratio for containers, pods and claims |
//! | ServiceAccount | [`service_account`] | the pod's account (default `default`, must exist) and its API token volume |
//! | Priority, DefaultIngressClass | the kind's [`Strategy::admit`](crate::registry::Strategy::admit) | run at Priority's place |
//! | DefaultStorageClass | the claims' [`Strategy::admit`](crate::registry::Strategy::admit) | the default class for a new claim |
//! | PersistentVolumeClaimResize | [`claim_resize`] (validating) | a claim grows only when bound and its class allows expansion |
//! | DefaultTolerationSeconds | [`default_toleration_seconds`] | 300 s `not-ready`/`unreachable` NoExecute tolerations |
//! | MutatingAdmissionWebhook | [`webhook`], called by the store after the chain's mutating phase | calls mutating webhooks, applies their patches |
//! | ValidatingAdmissionPolicy | [`policy`], called by the store after the chain's validating phase, before validating webhooks | CEL validations of bound ValidatingAdmissionPolicies |
//! | ValidatingAdmissionWebhook | [`webhook`], called by the store after the chain's validating phase | calls validating webhooks concurrently |
//! | ResourceQuota | [`resourcequota`], called by the store after the chain's validating phase | refuses writes over a quota; charges quotas by compare-and-swap before the write |
//!
//! A request runs every enabled plugin's mutating [`Plugin::admit`] in order after the kind's
//! defaults and before validation, then (after the object and kind validation) every validating
//! [`Plugin::validate`] in order, as upstream's mutating and validating phases. A plugin reads other
//! objects through [`Objects`] (the watch cache: on a create it has every write acknowledged before
//! the request, on an update it may trail, as upstream's informer listers). Before a create is
//! prepared, [`Chain::awaited`] names objects a plugin expects to appear shortly (upstream's
//! repeated live lookups of the `default` ServiceAccount); the store waits for them, bounded.
//!
//! Which plugins run is [`AdmissionConfig`]: kube-apiserver's default set, less those named in
//! `--disable-admission-plugins`. Guarantees: plugins are pure functions of the request and the
//! objects they read (no I/O, no panics on any JSON); a refusal is a 403 naming the object.

mod claim_resize;
mod default_toleration_seconds;
mod limit_constraints;
mod limit_ranger;
mod pod_secrets;
pub mod policy;
pub mod resourcequota;
mod service_account;
pub mod webhook;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_limit_ranger;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::registry::{Forbidden, Objects};

pub use default_toleration_seconds::DefaultTolerationSeconds;
pub use limit_ranger::{LimitRanger, LIMIT_RANGER_ANNOTATION};
pub use service_account::{
    ServiceAccount, DEFAULT_API_TOKEN_MOUNT_PATH, DEFAULT_SERVICE_ACCOUNT_WAIT,
    SERVICE_ACCOUNT_VOLUME_NAME,
};

/// `LimitRanger`.
pub const LIMIT_RANGER: &str = "LimitRanger";
/// `ServiceAccount`.
pub const SERVICE_ACCOUNT: &str = "ServiceAccount";
/// `DefaultTolerationSeconds`.
pub const DEFAULT_TOLERATION_SECONDS: &str = "DefaultTolerationSeconds";
/// `PersistentVolumeClaimResize`.
pub const PERSISTENT_VOLUME_CLAIM_RESIZE: &str = "PersistentVolumeClaimResize";
pub use policy::VALIDATING_ADMISSION_POLICY;
pub use webhook::{MUTATING_ADMISSION_WEBHOOK, VALIDATING_ADMISSION_WEBHOOK};
/// `ResourceQuota`.
pub const RESOURCE_QUOTA: &str = "ResourceQuota";

/// The plugins of the [`Chain`], in upstream's order (`AllOrderedPlugins`); NamespaceLifecycle
/// and the kind hooks (Priority, DefaultIngressClass) always run.
pub const ORDERED_PLUGINS: &[&str] = &[
    LIMIT_RANGER,
    SERVICE_ACCOUNT,
    DEFAULT_TOLERATION_SECONDS,
    PERSISTENT_VOLUME_CLAIM_RESIZE,
    MUTATING_ADMISSION_WEBHOOK,
    VALIDATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_WEBHOOK,
    RESOURCE_QUOTA,
];

/// What a request does to the object (`admission.Operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// What a plugin knows of the request (`admission.Attributes`).
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub operation: Operation,
    /// API group of the resource (`""` for core).
    pub group: &'a str,
    /// Plural resource name (`pods`).
    pub resource: &'a str,
    /// The request's namespace (none for cluster-scoped resources).
    pub namespace: Option<&'a str>,
    /// The stored object an update replaces.
    pub old: Option<&'a Value>,
}

impl Attributes<'_> {
    /// Whether the request is for `group`/`resource`.
    pub fn is(&self, group: &str, resource: &str) -> bool {
        self.group == group && self.resource == resource
    }

    /// The namespace, `""` when none.
    pub fn namespace(&self) -> &str {
        self.namespace.unwrap_or("")
    }
}

/// An object a create expects to exist, perhaps a moment after the request (the `default`
/// ServiceAccount of a namespace created just before): the store waits for it at most `wait`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaited {
    pub group: &'static str,
    pub resource: &'static str,
    pub namespace: String,
    pub name: String,
    pub wait: Duration,
}

/// One admission plugin (`admission.MutationInterface` and `admission.ValidationInterface`).
pub trait Plugin: Send + Sync {
    /// Its name in `--enable-admission-plugins` / `--disable-admission-plugins`.
    fn name(&self) -> &'static str;

    /// The mutating phase: may change `obj` or refuse the request.
    fn admit(
        &self,
        _attrs: &Attributes<'_>,
        _obj: &mut Value,
        _objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        Ok(())
    }

    /// The validating phase, on the object as it will be stored.
    fn validate(
        &self,
        _attrs: &Attributes<'_>,
        _obj: &Value,
        _objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        Ok(())
    }

    /// An object the request's admission will look up and that may appear shortly.
    fn awaited(&self, _attrs: &Attributes<'_>, _obj: &Value) -> Option<Awaited> {
        None
    }
}

/// Which admission plugins run, and their settings (kube-apiserver's admission flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Plugins of the default set that do not run (`--disable-admission-plugins`).
    pub disabled: BTreeSet<String>,
    /// `--default-not-ready-toleration-seconds` (300).
    pub default_not_ready_toleration_seconds: i64,
    /// `--default-unreachable-toleration-seconds` (300).
    pub default_unreachable_toleration_seconds: i64,
    /// How long a pod create waits for its namespace's `default` ServiceAccount to appear
    /// ([`DEFAULT_SERVICE_ACCOUNT_WAIT`]).
    pub default_service_account_wait: Duration,
}

impl Default for AdmissionConfig {
    /// kube-apiserver's default set: every plugin here runs.
    fn default() -> Self {
        AdmissionConfig {
            disabled: BTreeSet::new(),
            default_not_ready_toleration_seconds: default_toleration_seconds::DEFAULT_SECONDS,
            default_unreachable_toleration_seconds: default_toleration_seconds::DEFAULT_SECONDS,
            default_service_account_wait: DEFAULT_SERVICE_ACCOUNT_WAIT,
        }
    }
}

impl AdmissionConfig {
    /// The configuration of an apiserver without a controller manager, as envtest runs one:
    /// `ServiceAccount` is disabled (nothing would create the `default` accounts it requires).
    pub fn without_controllers() -> Self {
        let mut config = AdmissionConfig::default();
        config.disable(SERVICE_ACCOUNT);
        config
    }

    /// Stops `plugin` from running.
    pub fn disable(&mut self, plugin: &str) {
        self.disabled.insert(plugin.to_string());
    }

    /// Whether `plugin` runs.
    pub fn enabled(&self, plugin: &str) -> bool {
        !self.disabled.contains(plugin)
    }

    /// Disables the comma-separated `plugins` (`--disable-admission-plugins`); an unknown name is
    /// an error naming it, as kube-apiserver refuses to start with one.
    pub fn disable_list(&mut self, plugins: &str) -> Result<(), String> {
        for name in plugins.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !ORDERED_PLUGINS.contains(&name) {
                return Err(format!("admission-control plugin \"{name}\" is unknown"));
            }
            self.disable(name);
        }
        Ok(())
    }
}

/// The enabled plugins in upstream's order, with the position of the kind's own admission
/// (`Priority`'s place).
pub struct Chain {
    /// Plugins before the kind's own admission.
    before_kind: Vec<Box<dyn Plugin>>,
    /// Plugins after it.
    after_kind: Vec<Box<dyn Plugin>>,
    /// Whether ResourceQuota, the last validating plugin, runs (the store calls it: it writes).
    resource_quota: bool,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.plugins().map(|p| p.name()).collect();
        f.debug_struct("Chain").field("plugins", &names).finish()
    }
}

impl Chain {
    /// The chain `config` enables.
    pub fn new(config: &AdmissionConfig) -> Self {
        let mut before_kind: Vec<Box<dyn Plugin>> = Vec::new();
        if config.enabled(LIMIT_RANGER) {
            before_kind.push(Box::new(LimitRanger));
        }
        if config.enabled(SERVICE_ACCOUNT) {
            before_kind.push(Box::new(ServiceAccount::new(
                config.default_service_account_wait,
            )));
        }
        let mut after_kind: Vec<Box<dyn Plugin>> = Vec::new();
        if config.enabled(DEFAULT_TOLERATION_SECONDS) {
            after_kind.push(Box::new(DefaultTolerationSeconds::new(
                config.default_not_ready_toleration_seconds,
                config.default_unreachable_toleration_seconds,
            )));
        }
        if config.enabled(PERSISTENT_VOLUME_CLAIM_RESIZE) {
            after_kind.push(Box::new(claim_resize::PersistentVolumeClaimResize));
        }
        Chain {
            before_kind,
            after_kind,
            resource_quota: config.enabled(RESOURCE_QUOTA),
        }
    }

    /// Whether the ResourceQuota plugin runs ([`resourcequota::validate`]).
    pub fn resource_quota(&self) -> bool {
        self.resource_quota
    }

    /// Every plugin, in order.
    pub fn plugins(&self) -> impl Iterator<Item = &dyn Plugin> {
        self.before_kind
            .iter()
            .chain(&self.after_kind)
            .map(|p| p.as_ref())
    }

    /// The mutating phase: the plugins before the kind's admission, `kind` (the resource's
    /// [`Strategy::admit`](crate::registry::Strategy::admit)), then the rest; the first refusal
    /// ends it.
    pub fn admit(
        &self,
        attrs: &Attributes<'_>,
        obj: &mut Value,
        objects: &dyn Objects,
        kind: impl FnOnce(&mut Value) -> Result<(), Forbidden>,
    ) -> Result<(), Forbidden> {
        for p in &self.before_kind {
            p.admit(attrs, obj, objects)?;
        }
        kind(obj)?;
        for p in &self.after_kind {
            p.admit(attrs, obj, objects)?;
        }
        Ok(())
    }

    /// The validating phase, in order; the first refusal ends it.
    pub fn validate(
        &self,
        attrs: &Attributes<'_>,
        obj: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        self.plugins()
            .try_for_each(|p| p.validate(attrs, obj, objects))
    }

    /// The objects a create waits for before it is prepared.
    pub fn awaited(&self, attrs: &Attributes<'_>, obj: &Value) -> Vec<Awaited> {
        self.plugins()
            .filter_map(|p| p.awaited(attrs, obj))
            .collect()
    }
}
