//! The `ServiceAccount` admission plugin (`plugin/pkg/admission/serviceaccount`), on pod creates.
//!
//! Mutating: a pod that names no account gets `default`; the account must exist (else 403 `error
//! looking up service account <ns>/<name>: serviceaccount "<name>" not found`); unless the pod
//! or, failing that, its account says `automountServiceAccountToken: false`, every init container
//! and container without a mount at [`DEFAULT_API_TOKEN_MOUNT_PATH`] mounts, read-only, a projected
//! `kube-api-access-<5 random>` volume (a bound token valid 3607 s, `kube-root-ca.crt`'s `ca.crt`,
//! the namespace from the downward API), added once; a pod without image pull secrets gets its
//! account's. Mirror pods (`kubernetes.io/config.mirror`) are not changed.
//!
//! Validating: a mirror pod may not reference an account, a secret or a token projection; any
//! other pod must name an existing account, and when that account has the annotation
//! `kubernetes.io/enforce-mountable-secrets: "true"` it may only use the secrets the account lists.
//!
//! The account is read from the watch cache, which on a create has every write acknowledged
//! before the request. Upstream then asks the apiserver again, ten times 100–200 ms apart for
//! `default` (the serviceaccount controller creates it just after its namespace); here the store
//! waits for the `default` account to appear ([`Plugin::awaited`]), woken by every cache change,
//! at most [`DEFAULT_SERVICE_ACCOUNT_WAIT`].

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{Attributes, Awaited, Operation, Plugin, SERVICE_ACCOUNT};
use crate::registry::{Forbidden, Objects};

/// `DefaultServiceAccountName`.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// `DefaultAPITokenMountPath`.
pub const DEFAULT_API_TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// `ServiceAccountVolumeName`: the token volume is this, `-`, and 5 random characters.
pub const SERVICE_ACCOUNT_VOLUME_NAME: &str = "kube-api-access";
/// `EnforceMountableSecretsAnnotation`.
pub const ENFORCE_MOUNTABLE_SECRETS: &str = "kubernetes.io/enforce-mountable-secrets";
/// `MirrorPodAnnotationKey`.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// `WarnOnlyBoundTokenExpirationSeconds` (`pkg/serviceaccount`): one hour and 7 seconds.
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// `ProjectedVolumeSourceDefaultMode` (0644), set explicitly as upstream does.
const PROJECTED_DEFAULT_MODE: i64 = 0o644;
/// The ConfigMap the root CA publisher keeps in every namespace.
const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// How long a pod create waits for its namespace's `default` account. Upstream retries its live
/// lookup ten times 100–200 ms apart (about 1–2 s); a sandbox's controller manager starts at the
/// same moment as a test's first pods on a loaded machine, so the wait here is longer. A present
/// account ends it at once.
pub const DEFAULT_SERVICE_ACCOUNT_WAIT: Duration = Duration::from_secs(10);

/// The plugin; `generate_name` makes the token volume's name (the store's `generateName`).
pub struct ServiceAccount {
    wait: Duration,
    generate_name: fn(&str) -> String,
}

impl ServiceAccount {
    /// The plugin, waiting at most `wait` for a `default` account.
    pub fn new(wait: Duration) -> Self {
        ServiceAccount {
            wait,
            generate_name: crate::registry::store::generate_name,
        }
    }

    #[cfg(test)]
    pub(super) fn with_names(generate_name: fn(&str) -> String) -> Self {
        ServiceAccount {
            wait: DEFAULT_SERVICE_ACCOUNT_WAIT,
            generate_name,
        }
    }
}

/// Whether the request is a pod create this plugin handles.
fn handles(attrs: &Attributes<'_>) -> bool {
    attrs.is("", "pods") && attrs.operation == Operation::Create
}

fn is_mirror_pod(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_POD_ANNOTATION))
        .is_some()
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The account a pod names: `serviceAccountName`, else the deprecated `serviceAccount`.
fn named_account(pod: &Value) -> &str {
    match text(pod, "/spec/serviceAccountName") {
        "" => text(pod, "/spec/serviceAccount"),
        name => name,
    }
}

/// The account, or the refusal upstream gives when it cannot be found.
fn lookup(objects: &dyn Objects, ns: &str, name: &str) -> Result<Value, Forbidden> {
    match objects.get("", "serviceaccounts", Some(ns), name) {
        Some(sa) => Ok(sa.as_ref().clone()),
        None => Err(Forbidden(format!(
            "error looking up service account {ns}/{name}: serviceaccount \"{name}\" not found"
        ))),
    }
}

/// `shouldAutomount`: the pod's preference, then the account's, then true.
fn should_automount(sa: &Value, pod: &Value) -> bool {
    let flag = |v: &Value| {
        v.get("automountServiceAccountToken")
            .and_then(Value::as_bool)
    };
    pod.get("spec")
        .and_then(flag)
        .or_else(|| flag(sa))
        .unwrap_or(true)
}

/// `TokenVolumeSource`: the projected sources of the token volume.
pub fn token_volume_source() -> Value {
    json!({
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
            {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
        "defaultMode": PROJECTED_DEFAULT_MODE,
    })
}

impl ServiceAccount {
    /// `mountServiceAccountToken`.
    fn mount_token(&self, spec: &mut Map<String, Value>) {
        let prefix = format!("{SERVICE_ACCOUNT_VOLUME_NAME}-");
        let existing = spec
            .get("volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.get("name").and_then(Value::as_str))
            .find(|n| n.starts_with(&prefix))
            .map(String::from);
        let has_volume = existing.is_some();
        let volume_name = existing.unwrap_or_else(|| (self.generate_name)(&prefix));
        let mount = json!({"name": volume_name, "readOnly": true, "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH});
        let mut needs_volume = false;
        for key in ["initContainers", "containers"] {
            let containers = spec.get_mut(key).and_then(Value::as_array_mut);
            for c in containers
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
                let Some(mounts) = mounts.as_array_mut() else {
                    continue;
                };
                let mounted = mounts
                    .iter()
                    .any(|m| text(m, "/mountPath") == DEFAULT_API_TOKEN_MOUNT_PATH);
                if !mounted {
                    mounts.push(mount.clone());
                    needs_volume = true;
                }
            }
        }
        if !has_volume && needs_volume {
            let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
            if let Some(volumes) = volumes.as_array_mut() {
                volumes.push(json!({"name": volume_name, "projected": token_volume_source()}));
            }
        }
    }
}

impl Plugin for ServiceAccount {
    fn name(&self) -> &'static str {
        SERVICE_ACCOUNT
    }

    fn awaited(&self, attrs: &Attributes<'_>, obj: &Value) -> Option<Awaited> {
        let name = named_account(obj);
        let default = name.is_empty() || name == DEFAULT_SERVICE_ACCOUNT;
        (handles(attrs) && !is_mirror_pod(obj) && default).then(|| Awaited {
            group: "",
            resource: "serviceaccounts",
            namespace: attrs.namespace().to_string(),
            name: DEFAULT_SERVICE_ACCOUNT.to_string(),
            wait: self.wait,
        })
    }

    fn admit(
        &self,
        attrs: &Attributes<'_>,
        pod: &mut Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if !handles(attrs) || is_mirror_pod(pod) {
            return Ok(());
        }
        let name = match named_account(pod) {
            "" => DEFAULT_SERVICE_ACCOUNT.to_string(),
            n => n.to_string(),
        };
        let sa = lookup(objects, attrs.namespace(), &name)?;
        let automount = should_automount(&sa, pod);
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        spec.insert("serviceAccountName".into(), Value::from(name.as_str()));
        spec.insert("serviceAccount".into(), Value::from(name));
        if automount {
            self.mount_token(spec);
        }
        let no_pull_secrets = spec
            .get("imagePullSecrets")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        let account_secrets = sa.get("imagePullSecrets").and_then(Value::as_array);
        if let (true, Some(secrets)) = (no_pull_secrets, account_secrets) {
            let names: Vec<Value> = secrets
                .iter()
                .map(|s| json!({"name": text(s, "/name")}))
                .collect();
            if !names.is_empty() {
                spec.insert("imagePullSecrets".into(), Value::Array(names));
            }
        }
        Ok(())
    }

    fn validate(
        &self,
        attrs: &Attributes<'_>,
        pod: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if !handles(attrs) {
            return Ok(());
        }
        if is_mirror_pod(pod) {
            return validate_mirror_pod(pod);
        }
        let name = text(pod, "/spec/serviceAccountName");
        if name.is_empty() {
            return Err(Forbidden(format!(
                "no service account specified for pod {}/{}",
                attrs.namespace(),
                text(pod, "/metadata/name")
            )));
        }
        let sa = lookup(objects, attrs.namespace(), name)?;
        if enforces_mountable_secrets(&sa) {
            super::pod_secrets::limit_secret_references(&sa, pod)?;
        }
        Ok(())
    }
}

/// Mirror pods may reference no account, secret or token projection.
fn validate_mirror_pod(pod: &Value) -> Result<(), Forbidden> {
    if !text(pod, "/spec/serviceAccountName").is_empty() {
        return Err(Forbidden(
            "a mirror pod may not reference service accounts".into(),
        ));
    }
    if !super::pod_secrets::pod_secret_names(pod).is_empty() {
        return Err(Forbidden("a mirror pod may not reference secrets".into()));
    }
    let projects_token = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/projected/sources").and_then(Value::as_array))
        .flatten()
        .any(|s| s.get("serviceAccountToken").is_some());
    if projects_token {
        return Err(Forbidden(
            "a mirror pod may not use ServiceAccountToken volume projections".into(),
        ));
    }
    Ok(())
}

/// `enforceMountableSecrets`: the account's annotation parsed as Go's `ParseBool`.
fn enforces_mountable_secrets(sa: &Value) -> bool {
    let value = sa
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ENFORCE_MOUNTABLE_SECRETS))
        .and_then(Value::as_str);
    matches!(value, Some("1" | "t" | "T" | "true" | "TRUE" | "True"))
}
