//! Pods: defaulting (restartPolicy, dnsPolicy, schedulerName, grace period, container fields, QoS
//! class; the deprecated `serviceAccount` mirrors `serviceAccountName`, which the ServiceAccount
//! admission plugin defaults), priority from the pod's class at admission ([`super::scheduling`]), validation
//! (containers, names, ports, policies), the update rule that pod specs are immutable except
//! images, activeDeadlineSeconds and added tolerations, graceful deletion, field selectors; the
//! printer cells come from [`pod_printer`](super::pod_printer).

use super::common::{default_field, field_text, object_at};
use super::pod_printer::{print_pod, readiness_gates};
use super::table::{age_cell, age_column, column, name_column};
use super::{Forbidden, Objects, Strategy};
use api::validation::{self, FieldError};
use serde_json::{json, Value};
use std::collections::BTreeSet;

pub struct PodStrategy;

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];

/// Defaults of one container (`SetDefaults_Container` and friends).
pub(super) fn default_container(c: &mut Value) {
    let Some(m) = c.as_object_mut() else { return };
    let image = m
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    default_field(m, "terminationMessagePath", json!("/dev/termination-log"));
    default_field(m, "terminationMessagePolicy", json!("File"));
    let pull = if image_tag_is_latest(&image) {
        "Always"
    } else {
        "IfNotPresent"
    };
    default_field(m, "imagePullPolicy", json!(pull));
    default_field(m, "resources", json!({}));
    if let Some(ports) = m.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_field(p, "protocol", json!("TCP"));
        }
    }
}

/// `:latest` or untagged (digests are not "latest").
fn image_tag_is_latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// Pod spec defaults (also used for templates of RCs, ReplicaSets and Deployments).
pub fn default_pod_spec(spec: &mut Value) {
    let Some(m) = spec.as_object_mut() else {
        return;
    };
    default_field(m, "restartPolicy", json!("Always"));
    default_field(m, "terminationGracePeriodSeconds", json!(30));
    default_field(m, "dnsPolicy", json!("ClusterFirst"));
    default_field(m, "securityContext", json!({}));
    default_field(m, "schedulerName", json!("default-scheduler"));
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = m.get_mut(key).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(default_container);
        }
    }
    super::volume_defaults::default_pod_spec_extras(m);
}

pub(super) fn validate_container(
    c: &Value,
    path: &str,
    names: &mut BTreeSet<String>,
    errs: &mut Vec<FieldError>,
    require_image: bool,
) {
    let name = c.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for m in validation::is_dns1123_label(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, m));
        }
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(format!("{path}.name"), &json!(name)));
        }
    }
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    if require_image && image.trim().is_empty() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
    if let Some(p) = c.get("imagePullPolicy") {
        if !p.as_str().is_some_and(|s| PULL_POLICIES.contains(&s)) {
            errs.push(FieldError::not_supported(
                format!("{path}.imagePullPolicy"),
                p,
                PULL_POLICIES,
            ));
        }
    }
    if let Some(ports) = c.get("ports").and_then(Value::as_array) {
        let mut port_names = BTreeSet::new();
        for (i, p) in ports.iter().enumerate() {
            let pp = format!("{path}.ports[{i}]");
            match p.get("containerPort") {
                Some(v) if v.as_i64().is_some_and(|n| (1..=65535).contains(&n)) => {}
                Some(v) => errs.push(FieldError::invalid_value(
                    format!("{pp}.containerPort"),
                    v,
                    "must be between 1 and 65535, inclusive",
                )),
                None => errs.push(FieldError::required(format!("{pp}.containerPort"), "")),
            }
            if let Some(proto) = p.get("protocol") {
                if !proto.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) {
                    errs.push(FieldError::not_supported(
                        format!("{pp}.protocol"),
                        proto,
                        PROTOCOLS,
                    ));
                }
            }
            if let Some(n) = p.get("name").and_then(Value::as_str) {
                if !port_names.insert(n.to_string()) {
                    errs.push(FieldError::duplicate(format!("{pp}.name"), &json!(n)));
                }
            }
        }
    }
    if let Some(env) = c.get("env").and_then(Value::as_array) {
        for (i, e) in env.iter().enumerate() {
            if e.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                errs.push(FieldError::required(format!("{path}.env[{i}].name"), ""));
            }
        }
    }
}

/// Validates a pod spec at `path` (`spec` or `spec.template.spec`).
pub fn validate_pod_spec(spec: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(spec) = spec.filter(|s| s.is_object()) else {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
        return errs;
    };
    let mut names = BTreeSet::new();
    match spec.get("containers").and_then(Value::as_array) {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter().enumerate() {
                validate_container(
                    c,
                    &format!("{path}.containers[{i}]"),
                    &mut names,
                    &mut errs,
                    true,
                );
            }
        }
        _ => errs.push(FieldError::required(format!("{path}.containers"), "")),
    }
    if let Some(cs) = spec.get("initContainers").and_then(Value::as_array) {
        for (i, c) in cs.iter().enumerate() {
            validate_container(
                c,
                &format!("{path}.initContainers[{i}]"),
                &mut names,
                &mut errs,
                true,
            );
        }
    }
    for (key, allowed) in [
        ("restartPolicy", RESTART_POLICIES),
        ("dnsPolicy", DNS_POLICIES),
    ] {
        if let Some(v) = spec.get(key) {
            if !v.as_str().is_some_and(|s| allowed.contains(&s)) {
                errs.push(FieldError::not_supported(
                    format!("{path}.{key}"),
                    v,
                    allowed,
                ));
            }
        }
    }
    for key in ["terminationGracePeriodSeconds", "activeDeadlineSeconds"] {
        if let Some(v) = spec.get(key) {
            let min = if key == "activeDeadlineSeconds" { 1 } else { 0 };
            // Any integer grace period is accepted (negative ones are treated as 1 on delete).
            let ok = match v.as_i64() {
                Some(n) => key == "terminationGracePeriodSeconds" || n >= min,
                None => false,
            };
            if !ok {
                errs.push(FieldError::invalid_value(
                    format!("{path}.{key}"),
                    v,
                    format!("must be greater than or equal to {min}"),
                ));
            }
        }
    }
    if let Some(vols) = spec.get("volumes").and_then(Value::as_array) {
        let mut seen = BTreeSet::new();
        for (i, v) in vols.iter().enumerate() {
            let n = v.get("name").and_then(Value::as_str).unwrap_or("");
            if n.is_empty() {
                errs.push(FieldError::required(
                    format!("{path}.volumes[{i}].name"),
                    "",
                ));
            } else if !seen.insert(n) {
                errs.push(FieldError::duplicate(
                    format!("{path}.volumes[{i}].name"),
                    &json!(n),
                ));
            }
        }
    }
    if let Some(n) = spec.get("nodeName").and_then(Value::as_str) {
        if !n.is_empty() {
            for m in validation::is_dns1123_subdomain(n) {
                errs.push(FieldError::invalid(format!("{path}.nodeName"), n, m));
            }
        }
    }
    errs
}

/// Pod spec fields the server fills on create or binding (ServiceAccount and Priority admission,
/// `SetDefaults_PodSpec`, `pods/binding`).
const CREATE_TIME_FIELDS: &[&str] = &[
    "serviceAccountName",
    "serviceAccount",
    "enableServiceLinks",
    "priority",
    "preemptionPolicy",
    "nodeName",
];

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The spec with the mutable fields replaced by `old`'s, for the immutability comparison.
fn mask_mutable(new_spec: &Value, old_spec: &Value) -> Value {
    let mut masked = new_spec.clone();
    for key in ["containers", "initContainers"] {
        let old_list = old_spec.get(key).and_then(Value::as_array);
        if let (Some(list), Some(old_list)) =
            (masked.get_mut(key).and_then(Value::as_array_mut), old_list)
        {
            for (c, o) in list.iter_mut().zip(old_list) {
                if let (Some(m), Some(img)) = (c.as_object_mut(), o.get("image")) {
                    m.insert("image".to_string(), img.clone());
                }
            }
        }
    }
    if let Some(m) = masked.as_object_mut() {
        for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
            match old_spec.get(key) {
                Some(v) => m.insert(key.to_string(), v.clone()),
                None => m.remove(key),
            };
        }
        if old_spec
            .get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|g| g < 0)
        {
            if let Some(v) = old_spec.get("terminationGracePeriodSeconds") {
                m.insert("terminationGracePeriodSeconds".to_string(), v.clone());
            }
        }
    }
    masked
}

/// A pod naming its account only in the deprecated `serviceAccount` names it in
/// `serviceAccountName` (`Convert_v1_PodSpec_To_core_PodSpec`); the account itself is defaulted by
/// the ServiceAccount admission plugin.
fn account_from_deprecated(spec: &mut serde_json::Map<String, Value>) {
    let named = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let deprecated = spec
        .get("serviceAccount")
        .filter(|n| n.as_str().is_some_and(|n| !n.is_empty()))
        .cloned();
    if let (false, Some(name)) = (named, deprecated) {
        spec.insert("serviceAccountName".into(), name);
    }
}

impl Strategy for PodStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec") {
            default_pod_spec(spec);
        }
        if let Some(spec) = object_at(obj, "spec") {
            super::volume_defaults::default_pod_extras(spec);
            default_field(spec, "enableServiceLinks", json!(true));
            account_from_deprecated(spec);
        }
    }

    /// `SetDefaults_Pod` and `SetDefaults_PodSpec` with the defaults of volumes, containers and
    /// probes, and the v1 conversion's `serviceAccount` → `serviceAccountName` (also part of
    /// decoding); not admission's (priority, service account, tolerations).
    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, |obj| {
            if let Some(spec) = obj.get_mut("spec") {
                default_pod_spec(spec);
            }
            if let Some(spec) = object_at(obj, "spec") {
                super::volume_defaults::default_pod_extras(spec);
                default_field(spec, "enableServiceLinks", json!(true));
                account_from_deprecated(spec);
            }
        })
    }

    /// The deprecated `serviceAccount` is written as `serviceAccountName` (v1 conversion).
    fn canonicalize(&self, obj: &mut Value) {
        if let Some(spec) = object_at(obj, "spec") {
            match spec
                .get("serviceAccountName")
                .filter(|n| n.as_str() != Some(""))
            {
                Some(name) => {
                    let name = name.clone();
                    spec.insert("serviceAccount".into(), name);
                }
                None => {
                    spec.remove("serviceAccount");
                }
            }
        }
    }

    fn admit(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        // Priority admission sets priority on create; updates keep it (`prepare_for_update`).
        match old {
            None => super::scheduling::admit_pod_priority(obj, objects),
            Some(_) => Ok(()),
        }
    }

    fn initial_status(&self, obj: &Value) -> Option<Value> {
        let qos = api::qos::qos_class(obj.get("spec").unwrap_or(&Value::Null));
        Some(json!({"phase": "Pending", "qosClass": qos}))
    }

    fn delete_returns_object(&self) -> bool {
        true
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if let Some(spec) = new.get_mut("spec") {
            default_pod_spec(spec);
        }
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            super::volume_defaults::default_pod_extras(spec);
            account_from_deprecated(spec);
        }
        // Fields set at create time by admission or binding: a full PUT from a manifest that lacks
        // them keeps the stored values rather than failing the immutability check.
        if let (Some(spec), Some(old_spec)) = (
            new.get_mut("spec").and_then(Value::as_object_mut),
            old.get("spec").and_then(Value::as_object),
        ) {
            for key in CREATE_TIME_FIELDS {
                if let (None, Some(v)) = (spec.get(*key), old_spec.get(*key)) {
                    spec.insert((*key).to_string(), v.clone());
                }
            }
            // Ephemeral containers change only through `pods/ephemeralcontainers`.
            match old_spec.get("ephemeralContainers") {
                Some(v) => spec.insert("ephemeralContainers".to_string(), v.clone()),
                None => spec.remove("ephemeralContainers"),
            };
        }
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_pod_spec(obj.get("spec"), "spec")
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_pod_spec(new.get("spec"), "spec");
        let null = Value::Null;
        let new_spec = new.get("spec").unwrap_or(&null);
        let old_spec = old.get("spec").unwrap_or(&null);
        let unchanged = mask_mutable(new_spec, old_spec) == *old_spec || {
            // A stored pod may lack today's defaults (written by an older version, or straight
            // into the store), while the update was defaulted: compare against the stored spec
            // defaulted too, as Kubernetes defaults every object it reads from storage. Only on
            // a mismatch, so the common case copies nothing more.
            let mut defaulted = old_spec.clone();
            default_pod_spec(&mut defaulted);
            mask_mutable(new_spec, &defaulted) == defaulted
        };
        if !unchanged {
            errs.push(FieldError::forbidden("spec", POD_UPDATE_FORBIDDEN));
        }
        // Tolerations may only be added.
        let old_tol = old_spec
            .get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let new_tol = new_spec
            .get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if old_tol.iter().any(|t| !new_tol.contains(t)) {
            errs.push(FieldError::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0),
            column("Status", "string", "", "The aggregate status of the containers in this pod.", 0),
            column("Restarts", "string", "", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0),
            age_column(),
            column("IP", "string", "", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1),
            column("Node", "string", "", "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements.", 1),
            column("Nominated Node", "string", "", "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.", 1),
            column("Readiness Gates", "string", "", "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates", 1),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let p = print_pod(obj, now);
        let spec = obj.get("spec");
        let status = obj.get("status");
        let or_none = |s: String| {
            if s.is_empty() {
                "<none>".to_string()
            } else {
                s
            }
        };
        let ip = status
            .and_then(|s| s.get("podIPs"))
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|p| p.get("ip"))
            .and_then(Value::as_str)
            .or_else(|| status.and_then(|s| s.get("podIP")).and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        let node = spec.map(|s| field_text(s, "nodeName")).unwrap_or_default();
        let nominated = status
            .map(|s| field_text(s, "nominatedNodeName"))
            .unwrap_or_default();
        let gates = readiness_gates(obj);
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(format!("{}/{}", p.ready, p.total)),
            Value::from(p.reason),
            Value::from(p.restarts),
            age_cell(obj, now),
            Value::from(or_none(ip)),
            Value::from(or_none(node)),
            Value::from(or_none(nominated)),
            Value::from(gates),
        ]
    }

    fn field_label_alias(&self, label: &str) -> Option<&'static str> {
        // What old v1 clients send (upstream's `AddFieldLabelConversionsForPod`).
        (label == "spec.host").then_some("spec.nodeName")
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        let v = match field {
            "spec.nodeName" => field_text(obj, "spec.nodeName"),
            "spec.restartPolicy" => field_text(obj, "spec.restartPolicy"),
            "spec.schedulerName" => field_text(obj, "spec.schedulerName"),
            "spec.serviceAccountName" => field_text(obj, "spec.serviceAccountName"),
            "spec.hostNetwork" => {
                let b = obj
                    .pointer("/spec/hostNetwork")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                b.to_string()
            }
            "status.phase" => field_text(obj, "status.phase"),
            "status.nominatedNodeName" => field_text(obj, "status.nominatedNodeName"),
            "status.podIP" => obj
                .pointer("/status/podIPs/0/ip")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| field_text(obj, "status.podIP")),
            "status.podIPs" => obj
                .pointer("/status/podIPs")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|p| p.get("ip").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
            _ => return None,
        };
        Some(v)
    }

    fn field_labels(&self) -> Option<&'static [&'static str]> {
        Some(&[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.nominatedNodeName",
            "status.podIP",
            "status.podIPs",
        ])
    }

    fn graceful_deletion_seconds(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let unscheduled = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty();
        let phase = obj
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if unscheduled || phase == "Succeeded" || phase == "Failed" {
            return None;
        }
        let grace = requested
            .or_else(|| {
                obj.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30);
        // upstream: negative requests become 1 (a "force" needs an explicit 0).
        let grace = if grace < 0 { 1 } else { grace };
        (grace > 0).then_some(grace)
    }
}
