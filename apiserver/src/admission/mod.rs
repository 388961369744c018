//! Built-in admission plugins (kube-apiserver's `plugin/pkg/admission`), run by the generic store
//! as one [`Chain`] in upstream's order (`AllOrderedPlugins`):
//!
//! | upstream plugin | here | what it does |
//! |---|---|---|
//! | NamespaceLifecycle | the store's namespace check (`registry/store/create.rs`) | refuses creates in a missing or terminating namespace |
//! | LimitRanger | [`limit_ranger`] | LimitRange defaults for containers; min/max/ratio for containers, pods and claims |
//! | ServiceAccount | [`service_account`] | the pod's account (default `default`, must exist) and its API token volume |
//! | NodeRestriction | [`node_restriction`], called by the store on a kubelet's create, update, delete, eviction and token request | a node writes only its own Node, Lease, CSINode, mirror pods and its pods' status |
//! | TaintNodesByCondition | [`node_taint`] | a new node gets the `node.kubernetes.io/not-ready:NoSchedule` taint |
//! | PodSecurity | [`pod_security`] (validating) | Pod Security Standards per namespace labels: enforce (403), audit, warn; also on `pods/ephemeralcontainers` |
//! | Priority, DefaultIngressClass | the kind's [`Strategy::admit`](crate::registry::Strategy::admit) | run at Priority's place |
//! | DefaultStorageClass | the claims' [`Strategy::admit`](crate::registry::Strategy::admit) | the default class for a new claim |
//! | StorageObjectInUseProtection | [`storage_protection`] | the `kubernetes.io/pvc-protection` / `pv-protection` finalizer on a new claim / volume |
//! | PersistentVolumeClaimResize | [`claim_resize`] (validating) | a claim grows only when bound and its class allows expansion |
//! | DefaultTolerationSeconds | [`default_toleration_seconds`] | 300 s `not-ready`/`unreachable` NoExecute tolerations |
//! | RuntimeClass | [`runtime_class`] | a new pod takes its RuntimeClass's overhead and scheduling; an unknown class is refused |
//! | CertificateApproval, CertificateSigning | [`certificate_signers`] (validating) | `approve` / `sign` on the CSR's signer (`signers` of `certificates.k8s.io`) to approve / sign it |
//! | CertificateSubjectRestriction | [`certificate_subject_restriction`] (validating) | no `system:masters` CSR for `kubernetes.io/kube-apiserver-client` |
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
//! Which plugins run is [`AdmissionConfig`]: kube-apiserver's default set, plus those named in
//! `--enable-admission-plugins`, less those named in `--disable-admission-plugins`. A write of a
//! subresource runs only the plugins that handle subresources (PodSecurity), with the request's
//! warnings and audit annotations reachable through [`Attributes`]. Guarantees: plugins are pure functions of the request and the
//! objects they read (no I/O, no panics on any JSON); a refusal is a 403 naming the object.

mod certificate_signers;
mod certificate_subject_restriction;
mod claim_resize;
mod default_toleration_seconds;
mod limit_constraints;
mod limit_ranger;
pub mod node_restriction;
mod node_taint;
mod pod_secrets;
pub mod pod_security;
pub mod policy;
pub mod resourcequota;
mod runtime_class;
mod service_account;
mod storage_protection;
pub mod webhook;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_limit_ranger;
#[cfg(test)]
mod tests_support;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use api::validation::FieldError;

use crate::authn::UserInfo;
use crate::registry::{AuditAnnotations, Forbidden, Objects, Warnings};

pub use default_toleration_seconds::DefaultTolerationSeconds;
pub use limit_ranger::{LimitRanger, LIMIT_RANGER_ANNOTATION};
pub use service_account::{
    ServiceAccount, DEFAULT_API_TOKEN_MOUNT_PATH, DEFAULT_SERVICE_ACCOUNT_WAIT,
    SERVICE_ACCOUNT_VOLUME_NAME,
};
pub use storage_protection::{PVC_PROTECTION_FINALIZER, PV_PROTECTION_FINALIZER};

/// `LimitRanger`.
pub const LIMIT_RANGER: &str = "LimitRanger";
/// `ServiceAccount`.
pub const SERVICE_ACCOUNT: &str = "ServiceAccount";
pub use node_restriction::NODE_RESTRICTION;
/// `TaintNodesByCondition`.
pub const TAINT_NODES_BY_CONDITION: &str = "TaintNodesByCondition";
/// `PodSecurity`.
pub const POD_SECURITY: &str = "PodSecurity";
/// `DefaultTolerationSeconds`.
pub const DEFAULT_TOLERATION_SECONDS: &str = "DefaultTolerationSeconds";
/// `StorageObjectInUseProtection`.
pub const STORAGE_OBJECT_IN_USE_PROTECTION: &str = "StorageObjectInUseProtection";
/// `PersistentVolumeClaimResize`.
pub const PERSISTENT_VOLUME_CLAIM_RESIZE: &str = "PersistentVolumeClaimResize";
pub use policy::VALIDATING_ADMISSION_POLICY;
/// `RuntimeClass`.
pub const RUNTIME_CLASS: &str = "RuntimeClass";
/// `CertificateApproval`.
pub const CERTIFICATE_APPROVAL: &str = "CertificateApproval";
/// `CertificateSigning`.
pub const CERTIFICATE_SIGNING: &str = "CertificateSigning";
/// `CertificateSubjectRestriction`.
pub const CERTIFICATE_SUBJECT_RESTRICTION: &str = "CertificateSubjectRestriction";
pub use webhook::{MUTATING_ADMISSION_WEBHOOK, VALIDATING_ADMISSION_WEBHOOK};
/// `ResourceQuota`.
pub const RESOURCE_QUOTA: &str = "ResourceQuota";

/// The plugins of the [`Chain`], in upstream's order (`AllOrderedPlugins`); NamespaceLifecycle
/// and the kind hooks (Priority, DefaultIngressClass) always run.
pub const ORDERED_PLUGINS: &[&str] = &[
    LIMIT_RANGER,
    SERVICE_ACCOUNT,
    NODE_RESTRICTION,
    TAINT_NODES_BY_CONDITION,
    POD_SECURITY,
    DEFAULT_TOLERATION_SECONDS,
    STORAGE_OBJECT_IN_USE_PROTECTION,
    PERSISTENT_VOLUME_CLAIM_RESIZE,
    RUNTIME_CLASS,
    CERTIFICATE_APPROVAL,
    CERTIFICATE_SIGNING,
    CERTIFICATE_SUBJECT_RESTRICTION,
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
    /// The subresource written (`""` for the object itself, `ephemeralcontainers`).
    pub subresource: &'a str,
    /// Where the request's `Warning` headers go; none where a path renders no warnings.
    pub warnings: Option<&'a Warnings>,
    /// Where the request's audit annotations go; none where a path keeps none.
    pub audit: Option<&'a AuditAnnotations>,
    /// Who asks (`GetUserInfo`); none for a server-internal write.
    pub user: Option<&'a UserInfo>,
    /// Whether the server authorizes requests (a secure server); plugins that ask the
    /// authorizer let everything through when not, as upstream's `AlwaysAllow`.
    pub authorizes: bool,
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

    /// Adds a `Warning` to the response (`admission.Attributes` warnings).
    pub fn warn(&self, text: String) {
        if let Some(w) = self.warnings {
            w.push(text);
        }
    }

    /// Adds an audit annotation (`AddAnnotation`: a key keeps its first value).
    pub fn annotate(&self, key: &str, value: String) {
        if let Some(a) = self.audit {
            a.add(key.to_string(), value);
        }
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

    /// Field errors that make the request invalid (422) before the validating phase (PodSecurity's
    /// namespace labels).
    fn invalid(&self, _attrs: &Attributes<'_>, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Whether the plugin sees writes of subresources (`pods/ephemeralcontainers`); the others
    /// see only writes of the object itself.
    fn handles_subresources(&self) -> bool {
        false
    }

    /// An object the request's admission will look up and that may appear shortly.
    fn awaited(&self, _attrs: &Attributes<'_>, _obj: &Value) -> Option<Awaited> {
        None
    }
}

/// Plugins of [`ORDERED_PLUGINS`] that run only when named in `--enable-admission-plugins`
/// (upstream's `DefaultOffAdmissionPlugins` among those implemented here).
pub const DEFAULT_OFF_PLUGINS: &[&str] = &[];

/// Which admission plugins run, and their settings (kube-apiserver's admission flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Plugins turned on beyond the default set (`--enable-admission-plugins`).
    pub enabled: BTreeSet<String>,
    /// Plugins of the default set that do not run (`--disable-admission-plugins`).
    pub disabled: BTreeSet<String>,
    /// `--default-not-ready-toleration-seconds` (300).
    pub default_not_ready_toleration_seconds: i64,
    /// `--default-unreachable-toleration-seconds` (300).
    pub default_unreachable_toleration_seconds: i64,
    /// How long a pod create waits for its namespace's `default` ServiceAccount to appear
    /// ([`DEFAULT_SERVICE_ACCOUNT_WAIT`]).
    pub default_service_account_wait: Duration,
    /// PodSecurity's defaults and exemptions (`--admission-control-config-file`).
    pub pod_security: pod_security::config::PodSecurityConfig,
}

impl Default for AdmissionConfig {
    /// kube-apiserver's default set: every plugin here runs.
    fn default() -> Self {
        AdmissionConfig {
            enabled: BTreeSet::new(),
            disabled: BTreeSet::new(),
            default_not_ready_toleration_seconds: default_toleration_seconds::DEFAULT_SECONDS,
            default_unreachable_toleration_seconds: default_toleration_seconds::DEFAULT_SECONDS,
            default_service_account_wait: DEFAULT_SERVICE_ACCOUNT_WAIT,
            pod_security: Default::default(),
        }
    }
}

/// The names of a comma-separated plugin list, trimmed, empty ones skipped.
fn plugin_names(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|n| !n.is_empty())
}

impl AdmissionConfig {
    /// The configuration of an apiserver without a controller manager, as envtest runs one:
    /// `ServiceAccount` is disabled (nothing would create the `default` accounts it requires).
    pub fn without_controllers() -> Self {
        let mut config = AdmissionConfig::default();
        config.disable(SERVICE_ACCOUNT);
        config
    }

    /// Reads the plugins' configuration from kube-apiserver's `--admission-control-config-file`
    /// (an `AdmissionConfiguration`; PodSecurity's is the one read here).
    pub fn load_config_file(&mut self, path: &std::path::Path) -> Result<(), String> {
        self.pod_security =
            pod_security::config::PodSecurityConfig::from_admission_config_file(path)?;
        Ok(())
    }

    /// Stops `plugin` from running.
    pub fn disable(&mut self, plugin: &str) {
        self.disabled.insert(plugin.to_string());
    }

    /// Runs `plugin` although it is off by default.
    pub fn enable(&mut self, plugin: &str) {
        self.enabled.insert(plugin.to_string());
    }

    /// Whether `plugin` runs: enabled explicitly or on by default, and not disabled.
    pub fn enabled(&self, plugin: &str) -> bool {
        !self.disabled.contains(plugin)
            && (self.enabled.contains(plugin) || !DEFAULT_OFF_PLUGINS.contains(&plugin))
    }

    /// Disables the comma-separated `plugins` (`--disable-admission-plugins`); an unknown name
    /// or one also enabled is an error in upstream's words (see [`check`](Self::check)), and
    /// then nothing changes.
    pub fn disable_list(&mut self, plugins: &str) -> Result<(), String> {
        self.apply_flags("", plugins)
    }

    /// Enables the comma-separated `plugins` (`--enable-admission-plugins`: added to the
    /// default-on set); errors as [`disable_list`](Self::disable_list)'s.
    pub fn enable_list(&mut self, plugins: &str) -> Result<(), String> {
        self.apply_flags(plugins, "")
    }

    /// Both flags at once (comma-separated lists), checked together so every error is reported,
    /// as kube-apiserver does at start-up; on an error nothing changes.
    pub fn apply_flags(&mut self, enable: &str, disable: &str) -> Result<(), String> {
        let mut next = self.clone();
        plugin_names(enable).for_each(|n| next.enable(n));
        plugin_names(disable).for_each(|n| next.disable(n));
        next.check()?;
        *self = next;
        Ok(())
    }

    /// kube-apiserver's checks of its admission flags (`AdmissionOptions.Validate`): every name
    /// is a known plugin, and none is both enabled and disabled; the errors in upstream's words,
    /// several as an aggregate (`[a, b]`).
    pub fn check(&self) -> Result<(), String> {
        let mut errs = Vec::new();
        for (flag, names) in [
            ("enable-admission-plugins", &self.enabled),
            ("disable-admission-plugins", &self.disabled),
        ] {
            for name in names
                .iter()
                .filter(|n| !ORDERED_PLUGINS.contains(&n.as_str()))
            {
                errs.push(format!("{flag} plugin \"{name}\" is unknown"));
            }
        }
        let both: Vec<&str> = self
            .enabled
            .intersection(&self.disabled)
            .map(String::as_str)
            .collect();
        if !both.is_empty() {
            errs.push(format!(
                "[{}] in enable-admission-plugins and disable-admission-plugins overlapped",
                both.join(" ")
            ));
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
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
    /// Whether NodeRestriction runs (the store calls it: it needs the user and sees deletes).
    node_restriction: bool,
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
        if config.enabled(TAINT_NODES_BY_CONDITION) {
            before_kind.push(Box::new(node_taint::TaintNodesByCondition));
        }
        if config.enabled(POD_SECURITY) {
            before_kind.push(Box::new(pod_security::PodSecurity::new(
                &config.pod_security,
            )));
        }
        let mut after_kind: Vec<Box<dyn Plugin>> = Vec::new();
        if config.enabled(DEFAULT_TOLERATION_SECONDS) {
            after_kind.push(Box::new(DefaultTolerationSeconds::new(
                config.default_not_ready_toleration_seconds,
                config.default_unreachable_toleration_seconds,
            )));
        }
        if config.enabled(STORAGE_OBJECT_IN_USE_PROTECTION) {
            after_kind.push(Box::new(storage_protection::StorageObjectInUseProtection));
        }
        if config.enabled(PERSISTENT_VOLUME_CLAIM_RESIZE) {
            after_kind.push(Box::new(claim_resize::PersistentVolumeClaimResize));
        }
        if config.enabled(RUNTIME_CLASS) {
            after_kind.push(Box::new(runtime_class::RuntimeClass));
        }
        if config.enabled(CERTIFICATE_APPROVAL) {
            after_kind.push(Box::new(certificate_signers::CertificateApproval));
        }
        if config.enabled(CERTIFICATE_SIGNING) {
            after_kind.push(Box::new(certificate_signers::CertificateSigning));
        }
        if config.enabled(CERTIFICATE_SUBJECT_RESTRICTION) {
            after_kind.push(Box::new(
                certificate_subject_restriction::CertificateSubjectRestriction,
            ));
        }
        Chain {
            before_kind,
            after_kind,
            resource_quota: config.enabled(RESOURCE_QUOTA),
            node_restriction: config.enabled(NODE_RESTRICTION),
        }
    }

    /// Whether the NodeRestriction plugin runs ([`node_restriction::admit`]).
    pub fn node_restriction(&self) -> bool {
        self.node_restriction
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

    /// The validating phase, in order; the first refusal ends it. A subresource's write runs
    /// only the plugins that handle subresources.
    pub fn validate(
        &self,
        attrs: &Attributes<'_>,
        obj: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        self.plugins()
            .filter(|p| attrs.subresource.is_empty() || p.handles_subresources())
            .try_for_each(|p| p.validate(attrs, obj, objects))
    }

    /// The field errors plugins find in the request (a 422 before the validating phase).
    pub fn invalid(&self, attrs: &Attributes<'_>, obj: &Value) -> Vec<FieldError> {
        self.plugins()
            .filter(|p| attrs.subresource.is_empty() || p.handles_subresources())
            .flat_map(|p| p.invalid(attrs, obj))
            .collect()
    }

    /// The objects a create waits for before it is prepared.
    pub fn awaited(&self, attrs: &Attributes<'_>, obj: &Value) -> Vec<Awaited> {
        self.plugins()
            .filter_map(|p| p.awaited(attrs, obj))
            .collect()
    }
}
