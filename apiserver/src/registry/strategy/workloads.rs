//! ReplicationControllers, ReplicaSets and Deployments: replica defaulting, selector defaulting (RC:
//! from the template labels) and immutability (apps/v1), template validation, generation tracking,
//! `/scale`, and kubectl's printers.

use super::common::{default_field, object_at};
use super::gofmt::{self, go_map};
use super::pod::{default_pod_spec, validate_pod_spec};
use super::table::{age_cell, age_column, column, containers_and_images, int_cell, name_column};
use super::{Propagation, ScaleAccess, Strategy};
use api::labels::{self, Selector};
use api::validation::{self, FieldError};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `labels.FormatLabels`: `a=b,c=d`, `<none>` when empty.
pub fn format_labels(m: &BTreeMap<String, String>) -> String {
    if m.is_empty() {
        return "<none>".to_string();
    }
    Selector::from_map(m).to_string()
}

/// `metav1.FormatLabelSelector` of a JSON LabelSelector: `<none>` when absent or empty, `<error>` when invalid.
pub fn format_label_selector(sel: Option<&Value>) -> String {
    match sel.map(labels::from_label_selector_json) {
        None => "<none>".to_string(),
        Some(Ok(s)) => {
            let t = s.to_string();
            if t.is_empty() {
                "<none>".to_string()
            } else {
                t
            }
        }
        Some(Err(_)) => "<error>".to_string(),
    }
}

fn template_labels(obj: &Value) -> BTreeMap<String, String> {
    api::meta::as_string_map(obj.pointer("/spec/template/metadata/labels"))
}

fn default_template(obj: &mut Value) {
    if let Some(spec) = obj.pointer_mut("/spec/template/spec") {
        default_pod_spec(spec);
    }
}

fn validate_replicas(obj: &Value, errs: &mut Vec<FieldError>) {
    if let Some(r) = obj.pointer("/spec/replicas") {
        if r.as_i64().is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid_value(
                "spec.replicas",
                r,
                "must be greater than or equal to 0",
            ));
        }
    }
    if let Some(r) = obj.pointer("/spec/minReadySeconds") {
        if r.as_i64().is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid_value(
                "spec.minReadySeconds",
                r,
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// Template checks shared by the three kinds: present, labels valid and matching the selector, pod
/// spec valid, restartPolicy Always.
fn validate_template(obj: &Value, selector: &Selector, errs: &mut Vec<FieldError>) {
    let Some(t) = obj.pointer("/spec/template").filter(|t| t.is_object()) else {
        errs.push(FieldError::required("spec.template", ""));
        return;
    };
    let labels = template_labels(obj);
    if let Some(l) = t.pointer("/metadata/labels") {
        errs.extend(validation::validate_labels(
            l,
            "spec.template.metadata.labels",
        ));
    }
    if !selector.is_empty() && !selector.matches(&labels) {
        errs.push(FieldError {
            field: "spec.template.metadata.labels".to_string(),
            kind: validation::FieldErrorKind::Invalid,
            message: "`selector` does not match template `labels`".to_string(),
            value: Some(go_map(&labels)),
        });
    }
    errs.extend(validate_pod_spec(t.get("spec"), "spec.template.spec"));
    if let Some(rp) = t.pointer("/spec/restartPolicy") {
        if rp.as_str() != Some("Always") {
            errs.push(FieldError::not_supported(
                "spec.template.spec.restartPolicy",
                rp,
                &["Always"],
            ));
        }
    }
}

/// Validates an apps/v1 `spec.selector` (required, non-empty, well-formed) and returns it.
pub(super) fn validate_label_selector(
    obj: &Value,
    kind_word: &str,
    errs: &mut Vec<FieldError>,
) -> Selector {
    match obj.pointer("/spec/selector") {
        None | Some(Value::Null) => {
            errs.push(FieldError::required("spec.selector", ""));
            Selector::nothing()
        }
        Some(v) => match labels::from_label_selector_json(v) {
            Ok(s) if s.is_empty() => {
                errs.push(FieldError {
                    field: "spec.selector".to_string(),
                    kind: validation::FieldErrorKind::Invalid,
                    message: format!("empty selector is invalid for {kind_word}"),
                    value: Some(gofmt::label_selector(v)),
                });
                s
            }
            Ok(s) => s,
            Err(e) => {
                errs.push(FieldError::invalid_value("spec.selector", v, e.to_string()));
                Selector::nothing()
            }
        },
    }
}

fn replicas_status_field(obj: &Value, field: &str) -> Option<String> {
    match field {
        "status.replicas" => Some(
            obj.pointer("/status/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .to_string(),
        ),
        _ => None,
    }
}

fn scale_meta(obj: &Value) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(meta) = obj.get("metadata").and_then(Value::as_object) {
        for k in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            if let Some(v) = meta.get(k) {
                m.insert(k.to_string(), v.clone());
            }
        }
    }
    Value::Object(m)
}

pub(super) fn scale_of(obj: &Value, selector: String) -> Value {
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta(obj),
        "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0)},
        "status": {
            "replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    })
}

pub(super) fn apply_scale_replicas(obj: &mut Value, scale: &Value) -> Result<(), Vec<FieldError>> {
    let r = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    match r.as_i64() {
        Some(n) if n >= 0 && n <= i64::from(i32::MAX) => {
            if let Some(spec) = object_at(obj, "spec") {
                spec.insert("replicas".to_string(), json!(n));
            }
            Ok(())
        }
        _ => Err(vec![FieldError::invalid_value(
            "spec.replicas",
            &r,
            "must be greater than or equal to 0",
        )]),
    }
}

fn replica_columns() -> Vec<Value> {
    vec![
        name_column(),
        column("Desired", "integer", "", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller", 0),
        column("Current", "integer", "", "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller", 0),
        column("Ready", "integer", "", "The number of ready replicas for this replication controller.", 0),
        age_column(),
        column("Containers", "string", "", "Names of each container in the template.", 1),
        column("Images", "string", "", "Images referenced by each container in the template.", 1),
        column("Selector", "string", "", "Label selector for pods. Existing ReplicationControllers whose pods are selected by this will be the ones affected by this deployment.", 1),
    ]
}

fn replica_cells(obj: &Value, now: jiff::Timestamp, selector: String) -> Vec<Value> {
    let (containers, images) = containers_and_images(obj.pointer("/spec/template/spec"));
    vec![
        Value::from(api::meta::name(obj).unwrap_or("")),
        int_cell(obj.pointer("/spec/replicas")),
        int_cell(obj.pointer("/status/replicas")),
        int_cell(obj.pointer("/status/readyReplicas")),
        age_cell(obj, now),
        Value::from(containers),
        Value::from(images),
        Value::from(selector),
    ]
}

/// Core v1 ReplicationController.
pub struct ReplicationControllerStrategy;

fn rc_selector(obj: &Value) -> BTreeMap<String, String> {
    api::meta::as_string_map(obj.pointer("/spec/selector"))
}

/// RC defaults (`SetDefaults_ReplicationController`): selector and labels from the template labels,
/// replicas 1.
fn default_rc(obj: &mut Value) {
    let tl = template_labels(obj);
    if !tl.is_empty() {
        let tl_json = Value::Object(
            tl.iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect(),
        );
        if rc_selector(obj).is_empty() {
            if let Some(spec) = object_at(obj, "spec") {
                spec.insert("selector".to_string(), tl_json.clone());
            }
        }
        if api::meta::labels(obj).is_empty() {
            if let Some(m) = api::meta::metadata_mut(obj) {
                m.insert("labels".to_string(), tl_json);
            }
        }
    }
    if let Some(spec) = object_at(obj, "spec") {
        default_field(spec, "replicas", json!(1));
    }
    default_template(obj);
}

impl ReplicationControllerStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_replicas(obj, &mut errs);
        let sel = rc_selector(obj);
        if sel.is_empty() {
            errs.push(FieldError::required("spec.selector", ""));
        } else {
            errs.extend(validation::validate_label_map(&sel, "spec.selector"));
        }
        validate_template(obj, &Selector::from_map(&sel), &mut errs);
        errs
    }
}

impl Strategy for ReplicationControllerStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_rc(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_rc)
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"replicas": 0}))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_rc(new);
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj)
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }
    fn scale(&self) -> Option<&dyn ScaleAccess> {
        Some(self)
    }
    fn table_columns(&self) -> Vec<Value> {
        replica_columns()
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        replica_cells(obj, now, format_labels(&rc_selector(obj)))
    }
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        replicas_status_field(obj, field)
    }
    fn default_propagation_policy(&self) -> Propagation {
        // rcStrategy.DefaultGarbageCollectionPolicy: core v1 orphans "for back compatibility".
        Propagation::Orphan
    }
}

impl ScaleAccess for ReplicationControllerStrategy {
    fn to_scale(&self, obj: &Value) -> Value {
        let sel = rc_selector(obj);
        scale_of(obj, Selector::from_map(&sel).to_string())
    }
    fn apply_scale(&self, obj: &mut Value, scale: &Value) -> Result<(), Vec<FieldError>> {
        apply_scale_replicas(obj, scale)
    }
}

/// apps/v1 ReplicaSet.
pub struct ReplicaSetStrategy;

/// Selector immutability of apps/v1 kinds.
pub(super) fn validate_selector_unchanged(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let (a, b) = (new.pointer("/spec/selector"), old.pointer("/spec/selector"));
    if a != b {
        let value = match a {
            Some(sel) if sel.is_object() => gofmt::label_selector(sel),
            _ => "null".to_string(),
        };
        errs.push(FieldError {
            field: "spec.selector".to_string(),
            kind: validation::FieldErrorKind::Invalid,
            message: "field is immutable".to_string(),
            value: Some(value),
        });
    }
}

impl ReplicaSetStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_replicas(obj, &mut errs);
        let sel = validate_label_selector(obj, "deployment", &mut errs);
        validate_template(obj, &sel, &mut errs);
        errs
    }
}

fn default_replicas_and_template(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        default_field(spec, "replicas", json!(1));
    }
    default_template(obj);
}

impl Strategy for ReplicaSetStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_replicas_and_template(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_replicas_and_template)
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"replicas": 0}))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_replicas_and_template(new);
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        validate_selector_unchanged(new, old, &mut errs);
        errs
    }
    fn scale(&self) -> Option<&dyn ScaleAccess> {
        Some(self)
    }
    fn table_columns(&self) -> Vec<Value> {
        replica_columns()
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        replica_cells(
            obj,
            now,
            format_label_selector(obj.pointer("/spec/selector")),
        )
    }
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        replicas_status_field(obj, field)
    }
}

impl ScaleAccess for ReplicaSetStrategy {
    fn to_scale(&self, obj: &Value) -> Value {
        scale_of(obj, selector_string(obj))
    }
    fn apply_scale(&self, obj: &mut Value, scale: &Value) -> Result<(), Vec<FieldError>> {
        apply_scale_replicas(obj, scale)
    }
}

/// The selector string of an apps/v1 object's `spec.selector` (`""` when absent or invalid).
pub(super) fn selector_string(obj: &Value) -> String {
    obj.pointer("/spec/selector")
        .map(labels::from_label_selector_json)
        .and_then(Result::ok)
        .map(|s| s.to_string())
        .unwrap_or_default()
}

/// apps/v1 Deployment.
pub struct DeploymentStrategy;

fn default_deployment(obj: &mut Value) {
    default_replicas_and_template(obj);
    if let Some(spec) = object_at(obj, "spec") {
        default_field(spec, "revisionHistoryLimit", json!(10));
        default_field(spec, "progressDeadlineSeconds", json!(600));
        default_field(spec, "strategy", json!({"type": "RollingUpdate"}));
        if let Some(st) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
            default_field(st, "type", json!("RollingUpdate"));
            if st.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                default_field(st, "rollingUpdate", json!({}));
                if let Some(ru) = st.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                    default_field(ru, "maxUnavailable", json!("25%"));
                    default_field(ru, "maxSurge", json!("25%"));
                }
            }
        }
    }
}

impl DeploymentStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_replicas(obj, &mut errs);
        let sel = validate_label_selector(obj, "deployment", &mut errs);
        validate_template(obj, &sel, &mut errs);
        if let Some(t) = obj.pointer("/spec/strategy/type") {
            let ok = ["Recreate", "RollingUpdate"];
            if !t.as_str().is_some_and(|s| ok.contains(&s)) {
                errs.push(FieldError::not_supported("spec.strategy.type", t, &ok));
            }
        }
        errs
    }
}

impl Strategy for DeploymentStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_deployment(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_deployment)
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({}))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_deployment(new);
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        validate_selector_unchanged(new, old, &mut errs);
        errs
    }
    fn scale(&self) -> Option<&dyn ScaleAccess> {
        Some(self)
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Ready", "string", "", "Number of the pod with ready state", 0),
            column("Up-to-date", "integer", "", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", 0),
            column("Available", "integer", "", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", 0),
            age_column(),
            column("Containers", "string", "", "Names of each container in the template.", 1),
            column("Images", "string", "", "Images referenced by each container in the template.", 1),
            column("Selector", "string", "", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.", 1),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let (containers, images) = containers_and_images(obj.pointer("/spec/template/spec"));
        let desired = obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let ready = obj
            .pointer("/status/readyReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(format!("{ready}/{desired}")),
            int_cell(obj.pointer("/status/updatedReplicas")),
            int_cell(obj.pointer("/status/availableReplicas")),
            age_cell(obj, now),
            Value::from(containers),
            Value::from(images),
            Value::from(format_label_selector(obj.pointer("/spec/selector"))),
        ]
    }
}

impl ScaleAccess for DeploymentStrategy {
    fn to_scale(&self, obj: &Value) -> Value {
        scale_of(obj, selector_string(obj))
    }
    fn apply_scale(&self, obj: &mut Value, scale: &Value) -> Result<(), Vec<FieldError>> {
        apply_scale_replicas(obj, scale)
    }
}
