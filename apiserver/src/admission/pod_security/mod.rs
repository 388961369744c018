//! The `PodSecurity` admission plugin (`plugin/pkg/admission/security/podsecurity` over
//! `k8s.io/pod-security-admission`): the Pod Security Standards, chosen per namespace by its
//! `pod-security.kubernetes.io/{enforce,audit,warn}[-version]` labels ([`policy`]), checked by
//! the registry of [`checks`] ([`baseline`], [`restricted`]).
//!
//! A validating plugin, at upstream's place in the chain. What it does, as upstream:
//! - **pods** (create; an update only when it changes an image, a seccomp annotation or the
//!   containers; `pods/ephemeralcontainers`): `enforce` refuses with 403 `violates PodSecurity
//!   "restricted:latest": <reason> (<detail>), ...`; `audit` leaves the audit annotation
//!   `pod-security.kubernetes.io/audit-violations`; `warn` adds a `Warning` (only when the request
//!   is let in). Each evaluation records `pod-security.kubernetes.io/enforce-policy`.
//! - **pod templates** of the workload kinds (Deployment, ReplicaSet, StatefulSet, DaemonSet,
//!   Job, CronJob, ReplicationController, PodTemplate): audit and warn only, never enforce.
//! - **namespaces**: invalid labels are refused with 422 on create, and on update when their
//!   errors changed; an update that tightens `enforce` warns about the existing pods that would
//!   violate it (at most [`NAMESPACE_MAX_PODS_TO_CHECK`] pods within
//!   [`NAMESPACE_POD_CHECK_TIMEOUT`], pods with the same reasons folded into one warning).
//!
//! Configuration ([`config`], `--admission-control-config-file`): the defaults of a namespace
//! without labels, and exemptions, as upstream: a request in an exempt namespace or by an exempt
//! user is not evaluated (pods and templates; nor are a namespace's pods when an exempt
//! namespace's enforce level is tightened); a pod or template of an exempt RuntimeClass is not
//! evaluated, nor counted in a namespace's warnings.
//!
//! Cost on a namespace without labels (privileged, the default): one watch-cache lookup of the
//! namespace and a scan of its labels per pod or workload write.

pub mod baseline;
pub mod checks;
pub mod config;
pub mod policy;
pub mod restricted;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_exemptions;

use std::time::{Duration, Instant};

use api::validation::FieldError;
use serde_json::Value;

use self::policy::{Level, LevelVersion, Policy};
use super::{Attributes, Operation, Plugin, POD_SECURITY};
use crate::registry::{Forbidden, Objects};

/// `defaultNamespaceMaxPodsToCheck`: most existing pods a namespace update checks.
pub const NAMESPACE_MAX_PODS_TO_CHECK: usize = 3000;
/// `defaultNamespacePodCheckTimeout`: how long a namespace update checks existing pods.
pub const NAMESPACE_POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The audit annotation of an audit-mode violation.
pub const AUDIT_VIOLATIONS_ANNOTATION: &str = "pod-security.kubernetes.io/audit-violations";
/// The audit annotation naming the enforced policy of an evaluated pod.
pub const ENFORCE_POLICY_ANNOTATION: &str = "pod-security.kubernetes.io/enforce-policy";
/// The audit annotation of a namespace whose labels do not parse.
pub const ERROR_ANNOTATION: &str = "pod-security.kubernetes.io/error";

/// Pod subresources upstream does not evaluate (`ignoredPodSubresources`).
const IGNORED_POD_SUBRESOURCES: &[&str] = &[
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// The plugin, with the policy of a namespace without labels and the exemptions.
pub struct PodSecurity {
    defaults: Policy,
    exemptions: config::Exemptions,
}

impl Default for PodSecurity {
    /// `privileged:latest` for every mode and no exemptions, upstream's default configuration.
    fn default() -> Self {
        PodSecurity::new(&config::PodSecurityConfig::default())
    }
}

impl PodSecurity {
    /// The plugin as `config` configures it.
    pub fn new(config: &config::PodSecurityConfig) -> Self {
        PodSecurity {
            defaults: config.defaults,
            exemptions: config.exemptions.clone(),
        }
    }

    /// `exemptNamespace || exemptUser` of the request.
    fn exempt_request(&self, attrs: &Attributes<'_>) -> bool {
        self.exemptions.namespace(attrs.namespace())
            || attrs
                .user
                .is_some_and(|u| self.exemptions.user(&u.username))
    }
}

/// Where a workload kind keeps its pod template (`DefaultPodSpecExtractor`).
fn template<'v>(attrs: &Attributes<'_>, obj: &'v Value) -> Option<Option<&'v Value>> {
    let pointer = match (attrs.group, attrs.resource) {
        ("", "podtemplates") => "/template",
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "daemonsets" | "statefulsets")
        | ("batch", "jobs") => "/spec/template",
        ("batch", "cronjobs") => "/spec/jobTemplate/spec/template",
        _ => return None,
    };
    Some(obj.pointer(pointer).filter(|t| !t.is_null()))
}

const NULL: Value = Value::Null;

fn metadata_and_spec(pod: &Value) -> (&Value, &Value) {
    (
        pod.get("metadata").unwrap_or(&NULL),
        pod.get("spec").unwrap_or(&NULL),
    )
}

impl PodSecurity {
    /// The policy of `namespace` and its label errors rendered (`None`: no errors). A namespace
    /// without any `pod-security.kubernetes.io/` label costs one lookup and a scan of its label
    /// keys.
    fn namespace_policy(&self, namespace: &str, objects: &dyn Objects) -> (Policy, Option<String>) {
        let Some(ns) = objects.get("", "namespaces", None, namespace) else {
            return (self.defaults, None);
        };
        let has_policy_labels = ns
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .is_some_and(|l| l.keys().any(|k| k.starts_with(policy::LABEL_PREFIX)));
        if !has_policy_labels {
            return (self.defaults, None);
        }
        let (policy, errs) = Policy::from_labels(&api::meta::labels(&ns), self.defaults);
        let rendered: Vec<String> = errs.iter().map(ToString::to_string).collect();
        (policy, (!errs.is_empty()).then(|| rendered.join(", ")))
    }

    /// `EvaluatePod`: enforce (when `enforce`), audit, then warn on one pod(-like) object.
    fn evaluate(
        &self,
        attrs: &Attributes<'_>,
        (policy, policy_errors): (Policy, Option<String>),
        pod: &Value,
        enforce: bool,
    ) -> Result<(), Forbidden> {
        let (metadata, spec) = metadata_and_spec(pod);
        if self.exemptions.runtime_class(spec) {
            return Ok(());
        }
        let mut cache: Vec<(LevelVersion, Vec<checks::Violation>)> = Vec::with_capacity(3);
        let mut results = |lv: LevelVersion| -> Vec<checks::Violation> {
            if let Some((_, r)) = cache.iter().find(|(k, _)| *k == lv) {
                return r.clone();
            }
            let r = checks::evaluate(lv, metadata, spec);
            cache.push((lv, r.clone()));
            r
        };
        if let Some(errors) = policy_errors {
            attrs.annotate(
                ERROR_ANNOTATION,
                format!("Failed to parse policy: {errors}"),
            );
        }
        let mut refused = None;
        if enforce {
            attrs.annotate(ENFORCE_POLICY_ANNOTATION, policy.enforce.to_string());
            let violations = results(policy.enforce);
            if !violations.is_empty() {
                refused = Some(Forbidden(format!(
                    "violates PodSecurity \"{}\": {}",
                    policy.enforce,
                    checks::forbidden_detail(&violations)
                )));
            }
        }
        let audit = results(policy.audit);
        if !audit.is_empty() {
            attrs.annotate(
                AUDIT_VIOLATIONS_ANNOTATION,
                format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.audit,
                    checks::forbidden_detail(&audit)
                ),
            );
        }
        if let Some(refused) = refused {
            return Err(refused);
        }
        let warn = results(policy.warn);
        if !warn.is_empty() {
            attrs.warn(format!(
                "would violate PodSecurity \"{}\": {}",
                policy.warn,
                checks::forbidden_detail(&warn)
            ));
        }
        Ok(())
    }

    fn validate_pod(
        &self,
        attrs: &Attributes<'_>,
        pod: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if IGNORED_POD_SUBRESOURCES.contains(&attrs.subresource) || self.exempt_request(attrs) {
            return Ok(());
        }
        let (policy, errors) = self.namespace_policy(attrs.namespace(), objects);
        if errors.is_none() && policy.fully_privileged() {
            return Ok(());
        }
        if let Some(old) = attrs.old {
            if !significant_pod_update(pod, old) {
                return Ok(());
            }
        }
        self.evaluate(attrs, (policy, errors), pod, true)
    }

    fn validate_template(
        &self,
        attrs: &Attributes<'_>,
        template: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if self.exempt_request(attrs) {
            return Ok(());
        }
        let (policy, errors) = self.namespace_policy(attrs.namespace(), objects);
        if errors.is_none()
            && policy.warn.level == Level::Privileged
            && policy.audit.level == Level::Privileged
        {
            return Ok(());
        }
        self.evaluate(attrs, (policy, errors), template, false)
    }

    /// `ValidateNamespace` on an update: warnings for the existing pods a tightened enforce
    /// level would refuse.
    fn validate_namespace_update(
        &self,
        attrs: &Attributes<'_>,
        ns: &Value,
        old: &Value,
        objects: &dyn Objects,
    ) {
        let (new_policy, _) = Policy::from_labels(&api::meta::labels(ns), self.defaults);
        let (old_policy, _) = Policy::from_labels(&api::meta::labels(old), self.defaults);
        let (new, old) = (new_policy.enforce, old_policy.enforce);
        if new == old
            || new.level == Level::Privileged
            || (new.version == old.version && new.level <= old.level)
        {
            return;
        }
        let name = api::meta::name(ns).unwrap_or("");
        if self.exemptions.namespace(attrs.namespace()) || self.exemptions.namespace(name) {
            return;
        }
        let pods = objects.list_in("", "pods", name);
        let in_namespace = pods
            .iter()
            .filter(|p| !self.exemptions.runtime_class(metadata_and_spec(p).1))
            .collect::<Vec<_>>();
        for warning in pods_warnings(name, new, &in_namespace) {
            attrs.warn(warning);
        }
    }
}

/// `EvaluatePodsInNamespace`: the warnings for `pods` under `enforce`, bounded in count and time.
fn pods_warnings(
    namespace: &str,
    enforce: LevelVersion,
    pods: &[&std::sync::Arc<Value>],
) -> Vec<String> {
    let deadline = Instant::now() + NAMESPACE_POD_CHECK_TIMEOUT;
    let total = pods.len();
    let mut checked = total.min(NAMESPACE_MAX_PODS_TO_CHECK);
    // (reasons, lexically first pod name, count), in the order first seen.
    let mut by_reason: Vec<(String, String, usize)> = Vec::new();
    for (i, pod) in pods.iter().take(checked).enumerate() {
        let (metadata, spec) = metadata_and_spec(pod);
        let violations = checks::evaluate(enforce, metadata, spec);
        if !violations.is_empty() {
            let reason = checks::forbidden_reason(&violations);
            let pod_name = api::meta::name(pod).unwrap_or("").to_string();
            match by_reason.iter_mut().find(|(r, ..)| *r == reason) {
                Some((_, first, count)) => {
                    if pod_name < *first {
                        *first = pod_name;
                    }
                    *count += 1;
                }
                None => by_reason.push((reason, pod_name, 1)),
            }
        }
        if Instant::now() >= deadline {
            checked = i + 1;
            break;
        }
    }
    let mut warnings = Vec::new();
    if checked < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
        ));
    }
    if !by_reason.is_empty() {
        warnings.push(format!(
            "existing pods in namespace \"{namespace}\" violate the new PodSecurity enforce level \"{enforce}\""
        ));
    }
    let mut pod_warnings: Vec<String> = by_reason
        .into_iter()
        .map(|(reason, first, count)| match count {
            1 => format!("{first}: {reason}"),
            2 => format!("{first} (and 1 other pod): {reason}"),
            n => format!("{first} (and {} other pods): {reason}", n - 1),
        })
        .collect();
    pod_warnings.sort();
    warnings.extend(pod_warnings);
    warnings
}

/// `isSignificantPodUpdate`: whether an update changes what the checks could see (an image, a
/// seccomp annotation, the number of containers, an added ephemeral container).
fn significant_pod_update(pod: &Value, old: &Value) -> bool {
    const POD_SECCOMP: &str = "seccomp.security.alpha.kubernetes.io/pod";
    const CONTAINER_SECCOMP: &str = "container.seccomp.security.alpha.kubernetes.io/";
    let annotation = |p: &Value, k: &str| -> Option<String> {
        p.pointer("/metadata/annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
            .map(String::from)
    };
    if annotation(pod, POD_SECCOMP) != annotation(old, POD_SECCOMP) {
        return true;
    }
    let list = |p: &'_ Value, k: &str| -> Vec<Value> {
        p.pointer(&format!("/spec/{k}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let container_changed = |c: &Value, o: &Value| {
        let key = format!("{CONTAINER_SECCOMP}{}", checks::name(c));
        c.get("image") != o.get("image") || annotation(pod, &key) != annotation(old, &key)
    };
    for k in ["containers", "initContainers"] {
        let (new, before) = (list(pod, k), list(old, k));
        if new.len() != before.len()
            || new
                .iter()
                .zip(&before)
                .any(|(c, o)| container_changed(c, o))
        {
            return true;
        }
    }
    let before = list(old, "ephemeralContainers");
    list(pod, "ephemeralContainers").iter().any(|c| {
        match before.iter().find(|o| checks::name(o) == checks::name(c)) {
            None => true,
            Some(o) => container_changed(c, o),
        }
    })
}

impl Plugin for PodSecurity {
    fn name(&self) -> &'static str {
        POD_SECURITY
    }

    fn handles_subresources(&self) -> bool {
        true
    }

    fn invalid(&self, attrs: &Attributes<'_>, obj: &Value) -> Vec<FieldError> {
        if !attrs.is("", "namespaces") || !attrs.subresource.is_empty() {
            return Vec::new();
        }
        let (_, errs) = Policy::from_labels(&api::meta::labels(obj), self.defaults);
        match (attrs.operation, attrs.old) {
            (Operation::Update, Some(old)) if !errs.is_empty() => {
                let (_, old_errs) = Policy::from_labels(&api::meta::labels(old), self.defaults);
                if errs == old_errs {
                    Vec::new()
                } else {
                    errs
                }
            }
            _ => errs,
        }
    }

    fn validate(
        &self,
        attrs: &Attributes<'_>,
        obj: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if attrs.is("", "pods") {
            return self.validate_pod(attrs, obj, objects);
        }
        if !attrs.subresource.is_empty() {
            return Ok(());
        }
        if attrs.is("", "namespaces") {
            if let (Operation::Update, Some(old)) = (attrs.operation, attrs.old) {
                self.validate_namespace_update(attrs, obj, old, objects);
            }
            return Ok(());
        }
        match template(attrs, obj) {
            Some(Some(t)) => self.validate_template(attrs, t, objects),
            // Not a workload kind, or one without a template.
            _ => Ok(()),
        }
    }
}
