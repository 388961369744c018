//! The secrets a pod references (`podutil.VisitPodSecretNames`) and the ServiceAccount plugin's
//! `limitSecretReferences`: with `kubernetes.io/enforce-mountable-secrets: "true"` on its account,
//! a pod may mount, read into its environment or pull images with only the secrets the account
//! lists, refused with upstream's messages.

use serde_json::Value;

use crate::registry::Forbidden;

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn items<'a>(v: &'a Value, pointer: &str) -> impl Iterator<Item = &'a Value> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Where volume sources name a secret (`VisitPodSecretNames`' volume cases).
const VOLUME_SECRET_POINTERS: &[&str] = &[
    "/secret/secretName",
    "/azureFile/secretName",
    "/cephfs/secretRef/name",
    "/cinder/secretRef/name",
    "/flexVolume/secretRef/name",
    "/rbd/secretRef/name",
    "/scaleIO/secretRef/name",
    "/iscsi/secretRef/name",
    "/storageos/secretRef/name",
    "/csi/nodePublishSecretRef/name",
];

/// Every secret name the pod references: image pull secrets, containers' (all kinds) `env` and
/// `envFrom`, and volumes (projected ones included).
pub fn pod_secret_names(pod: &Value) -> Vec<String> {
    let mut names = Vec::new();
    let mut push = |n: &str| {
        if !n.is_empty() {
            names.push(n.to_string());
        }
    };
    for s in items(pod, "/spec/imagePullSecrets") {
        push(text(s, "/name"));
    }
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        for c in items(pod, &format!("/spec/{key}")) {
            for e in items(c, "/env") {
                push(text(e, "/valueFrom/secretKeyRef/name"));
            }
            for e in items(c, "/envFrom") {
                push(text(e, "/secretRef/name"));
            }
        }
    }
    for v in items(pod, "/spec/volumes") {
        for p in VOLUME_SECRET_POINTERS {
            push(text(v, p));
        }
        for s in items(v, "/projected/sources") {
            push(text(s, "/secret/name"));
        }
    }
    names
}

/// `limitSecretReferences`: the first reference the account `sa` does not list, refused.
pub fn limit_secret_references(sa: &Value, pod: &Value) -> Result<(), Forbidden> {
    let account = text(sa, "/metadata/name");
    let mountable: Vec<&str> = items(sa, "/secrets").map(|s| text(s, "/name")).collect();
    let refuse = |what: String| {
        Err(Forbidden(format!(
            "{what} is not allowed because service account {account} does not reference that secret"
        )))
    };
    for v in items(pod, "/spec/volumes") {
        let secret = text(v, "/secret/secretName");
        if v.get("secret").is_some() && !mountable.contains(&secret) {
            return refuse(format!("volume with secret.secretName=\"{secret}\""));
        }
    }
    for (key, kind) in [
        ("initContainers", "init container"),
        ("containers", "container"),
    ] {
        for c in items(pod, &format!("/spec/{key}")) {
            let container = text(c, "/name");
            for e in items(c, "/env") {
                if e.pointer("/valueFrom/secretKeyRef").is_none() {
                    continue;
                }
                let secret = text(e, "/valueFrom/secretKeyRef/name");
                if !mountable.contains(&secret) {
                    let env = text(e, "/name");
                    return refuse(format!(
                        "{kind} {container} with envVar {env} referencing secret.secretName=\"{secret}\""
                    ));
                }
            }
            for e in items(c, "/envFrom") {
                if e.get("secretRef").is_none() {
                    continue;
                }
                let secret = text(e, "/secretRef/name");
                if !mountable.contains(&secret) {
                    return refuse(format!(
                        "{kind} {container} with envFrom referencing secret.secretName=\"{secret}\""
                    ));
                }
            }
        }
    }
    let pull: Vec<&str> = items(sa, "/imagePullSecrets")
        .map(|s| text(s, "/name"))
        .collect();
    for (i, s) in items(pod, "/spec/imagePullSecrets").enumerate() {
        let secret = text(s, "/name");
        if !pull.contains(&secret) {
            return Err(Forbidden(format!(
                "imagePullSecrets[{i}].name=\"{secret}\" is not allowed because service account {account} does not reference that imagePullSecret"
            )));
        }
    }
    Ok(())
}
