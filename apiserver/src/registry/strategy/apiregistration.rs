//! `apiregistration.k8s.io/v1` APIServices, as kube-aggregator's
//! `pkg/apis/apiregistration/validation` and `pkg/registry/apiservice` define them, and the
//! `Local` APIService of every served group-version that kube-apiserver keeps (its
//! `autoregister` controller, fed by `pkg/controlplane/controller/crdregistration` for custom
//! resources): name `<version>.<group>` (`v1.` for the core group), `groupPriorityMinimum` and
//! `versionPriority` from upstream's table of built-in priorities (custom groups: 1000 and 100),
//! label `kube-aggregator.kubernetes.io/automanaged: onstart` (`true` for custom resources), and
//! status `Available: True` with reason `Local`.
//!
//! Table: NAME, SERVICE (`Local` or `<namespace>/<name>`), AVAILABLE, AGE.

use api::validation::FieldError;
use serde_json::{json, Value};

use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;

/// The APIService strategy.
pub struct ApiServiceStrategy;

/// The automanaged label.
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// (group, version) → (groupPriorityMinimum, versionPriority) of kube-apiserver's built-in
/// group-versions (`apiVersionPriorities` and `DefaultGenericAPIServicePriorities`).
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
];

/// The name of a group-version's APIService: `v1.apps`, `v1.` for the core group.
pub fn apiservice_name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// The `Local` APIService kube-apiserver keeps for `group`/`version`.
pub fn local_apiservice(group: &str, version: &str) -> Value {
    let builtin = PRIORITIES
        .iter()
        .find(|(g, v, ..)| *g == group && *v == version);
    let (group_min, version_prio, managed) = match builtin {
        Some((_, _, g, v)) => (*g, *v, "onstart"),
        None => (1000, 100, "true"),
    };
    let mut spec = serde_json::Map::new();
    if !group.is_empty() {
        spec.insert("group".into(), json!(group));
    }
    spec.insert("version".into(), json!(version));
    spec.insert("groupPriorityMinimum".into(), json!(group_min));
    spec.insert("versionPriority".into(), json!(version_prio));
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": apiservice_name(group, version),
            "labels": {AUTOMANAGED_LABEL: managed},
        },
        "spec": spec,
    })
}

/// The status of a `Local` APIService.
pub fn local_status() -> Value {
    json!({
        "conditions": [{
            "type": "Available",
            "status": "True",
            "lastTransitionTime": api::meta::now_rfc3339(),
            "reason": "Local",
            "message": "Local APIServices are always available",
        }]
    })
}

fn int(v: &Value, p: &str) -> Option<i64> {
    v.pointer(p).and_then(Value::as_i64)
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// `ValidateAPIService`.
fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = api::meta::name(obj).unwrap_or("");
    let group = s(obj, "/spec/group");
    let version = s(obj, "/spec/version");
    if name != apiservice_name(group, version) {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be `spec.version+\".\"+spec.group`",
        ));
    }
    // The core group ("") is only local.
    if !group.is_empty() {
        for m in api::validation::is_dns1123_subdomain(group) {
            errs.push(FieldError::invalid("spec.group", group, m));
        }
    }
    for m in api::validation::is_dns1035_label(version) {
        errs.push(FieldError::invalid("spec.version", version, m));
    }
    let gp = int(obj, "/spec/groupPriorityMinimum").unwrap_or(0);
    if !(1..=20000).contains(&gp) {
        errs.push(FieldError::invalid_value(
            "spec.groupPriorityMinimum",
            &json!(gp),
            "must be positive and less than 20000",
        ));
    }
    let vp = int(obj, "/spec/versionPriority").unwrap_or(0);
    if !(1..=1000).contains(&vp) {
        errs.push(FieldError::invalid_value(
            "spec.versionPriority",
            &json!(vp),
            "must be positive and less than 1000",
        ));
    }
    let service = obj.pointer("/spec/service").filter(|v| !v.is_null());
    let ca = !s(obj, "/spec/caBundle").is_empty();
    let insecure = obj
        .pointer("/spec/insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match service {
        None => {
            if ca {
                errs.push(FieldError::invalid(
                    "spec.caBundle",
                    "<bytes>",
                    "local APIServices may not have a caBundle",
                ));
            }
            if insecure {
                errs.push(FieldError::invalid_value(
                    "spec.insecureSkipTLSVerify",
                    &json!(insecure),
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
        }
        Some(svc) => {
            let ns = s(svc, "/namespace");
            let n = s(svc, "/name");
            if ns.is_empty() {
                errs.push(FieldError::required("spec.service.namespace", ""));
            }
            if n.is_empty() {
                errs.push(FieldError::required("spec.service.name", ""));
            }
            if let Some(port) = int(svc, "/port") {
                if !(1..=65535).contains(&port) {
                    errs.push(FieldError::invalid_value(
                        "spec.service.port",
                        &json!(port),
                        "must be a valid port number",
                    ));
                }
            }
            if insecure && ca {
                errs.push(FieldError::invalid_value(
                    "spec.insecureSkipTLSVerify",
                    &json!(insecure),
                    "may not be true if caBundle is present",
                ));
            }
        }
    }
    errs
}

/// `ValidateAPIServiceName`: `<version>.<group>`, the group possibly empty (the core group).
fn validate_name(name: &str, _prefix: bool) -> Vec<String> {
    let Some((version, group)) = name.split_once('.') else {
        return vec!["must be in the form: <version>.<group>".to_string()];
    };
    let mut errs = api::validation::is_dns1035_label(version);
    if !group.is_empty() {
        errs.extend(api::validation::is_dns1123_subdomain(group));
    }
    errs
}

impl Strategy for ApiServiceStrategy {
    fn name_validation(&self) -> api::validation::NameValidator {
        validate_name
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_port(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_port)
    }

    /// A Local APIService is available at once (the availability controller's verdict for a
    /// local one does not depend on anything); a service-backed one starts without conditions.
    fn initial_status(&self, obj: &Value) -> Option<Value> {
        match obj.pointer("/spec/service").filter(|v| !v.is_null()) {
            None => Some(local_status()),
            Some(_) => Some(json!({})),
        }
    }

    fn tracks_generation(&self) -> bool {
        false
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate(obj)
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_port(new);
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate(new)
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Service",
                "string",
                "",
                "The reference to the service that hosts this API endpoint.",
                0,
            ),
            column(
                "Available",
                "string",
                "",
                "Whether this service is available.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let service = match obj.pointer("/spec/service").filter(|v| !v.is_null()) {
            Some(svc) => format!("{}/{}", s(svc, "/namespace"), s(svc, "/name")),
            None => "Local".to_string(),
        };
        let available = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| s(c, "/type") == "Available"))
            .map(|c| {
                let (status, reason) = (s(c, "/status"), s(c, "/reason"));
                if status == "True" || reason.is_empty() {
                    status.to_string()
                } else {
                    format!("{status} ({reason})")
                }
            })
            .unwrap_or_else(|| "Unknown".to_string());
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            json!(service),
            json!(available),
            age_cell(obj, now),
        ]
    }
}

/// `SetDefaults_ServiceReference`: port 443.
fn default_port(obj: &mut Value) {
    if let Some(svc) = obj
        .pointer_mut("/spec/service")
        .and_then(Value::as_object_mut)
    {
        svc.entry("port").or_insert(json!(443));
    }
}
