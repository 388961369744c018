//! apps/v1 StatefulSets, as kube-apiserver 1.33 serves them: `SetDefaults_StatefulSet`
//! (podManagementPolicy `OrderedReady`, updateStrategy `RollingUpdate` with partition 0, replicas
//! 1, revisionHistoryLimit 10, PVC retention `Retain`/`Retain`), the claim templates' defaults
//! (volumeMode `Filesystem`, phase `Pending`) and the template's pod defaults; `maxUnavailable`
//! dropped (the `MaxUnavailableStatefulSet` gate is alpha, off) unless already stored; validation
//! (DNS-label names, policies, selector required and matching the template labels, restartPolicy
//! `Always`; the pod spec itself is not validated in 1.33); the update rule that only replicas,
//! ordinals, template, updateStrategy, PVC retention and minReadySeconds may change; `/scale`;
//! kubectl's printer.

use super::common::{default_field, object_at, semantically_equal, validate_nonnegative};
use super::daemonset::{
    int_or_percent_value, validate_not_more_than_100_percent, validate_positive_int_or_percent,
};
use super::gofmt;
use super::podtemplate;
use super::table::{age_cell, age_column, column, containers_and_images, name_column};
use super::workloads::{apply_scale_replicas, scale_of, selector_string, validate_label_selector};
use super::{ScaleAccess, Strategy};
use api::labels;
use api::validation::{FieldError, FieldErrorKind, NameValidator};
use serde_json::{json, Map, Value};

/// apps/v1 StatefulSet.
pub struct StatefulSetStrategy;

const UPDATE_FORBIDDEN: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

/// The spec fields an update may change (`ValidateStatefulSetUpdate`).
const MUTABLE_FIELDS: &[&str] = &[
    "replicas",
    "template",
    "updateStrategy",
    "minReadySeconds",
    "ordinals",
    "persistentVolumeClaimRetentionPolicy",
];

/// Replaces an empty string at `key` by `value` (Go's `len(x) == 0` defaulting).
fn default_string(map: &mut Map<String, Value>, key: &str, value: &str) {
    if map.get(key).and_then(Value::as_str) == Some("") {
        map.remove(key);
    }
    default_field(map, key, json!(value));
}

fn default_statefulset(obj: &mut Value, old: Option<&Value>) {
    let old_max_unavailable = old
        .and_then(|o| o.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable"))
        .is_some_and(|v| !v.is_null());
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    default_string(spec, "podManagementPolicy", "OrderedReady");
    if let Some(us) = spec
        .entry("updateStrategy")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        if us
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            us.insert("type".to_string(), json!("RollingUpdate"));
            default_field(us, "rollingUpdate", json!({}));
        }
        let rolling = us.get("type").and_then(Value::as_str) == Some("RollingUpdate");
        if let Some(ru) = us.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
            if rolling {
                default_field(ru, "partition", json!(0));
            }
            if !old_max_unavailable {
                ru.remove("maxUnavailable");
            }
        }
    }
    if let Some(p) = spec
        .entry("persistentVolumeClaimRetentionPolicy")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        default_string(p, "whenDeleted", "Retain");
        default_string(p, "whenScaled", "Retain");
    }
    default_field(spec, "replicas", json!(1));
    default_field(spec, "revisionHistoryLimit", json!(10));
    if let Some(claims) = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    {
        for claim in claims.iter_mut().filter(|c| c.is_object()) {
            if let Some(s) = object_at(claim, "spec") {
                default_field(s, "volumeMode", json!("Filesystem"));
            }
            if let Some(s) = object_at(claim, "status") {
                default_string(s, "phase", "Pending");
            }
        }
    }
    if let Some(spec) = obj.get_mut("spec") {
        podtemplate::default_template(spec);
    }
}

/// `apps.RollingUpdateStatefulSetStrategy{…}` as `%#v` prints it.
fn go_rolling_update(ru: &Value) -> String {
    let max = match ru.get("maxUnavailable") {
        Some(v) if !v.is_null() => "0xc000000000",
        _ => "nil",
    };
    format!(
        "apps.RollingUpdateStatefulSetStrategy{{Partition:{}, MaxUnavailable:(*intstr.IntOrString)({max})}}",
        ru.get("partition").and_then(Value::as_i64).unwrap_or(0)
    )
}

fn validate_update_strategy(spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    let us = spec.and_then(|s| s.get("updateStrategy"));
    let ru = us
        .and_then(|u| u.get("rollingUpdate"))
        .filter(|r| !r.is_null());
    match us
        .and_then(|u| u.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "OnDelete" => {
            if let Some(ru) = ru {
                errs.push(FieldError {
                    field: "spec.updateStrategy.rollingUpdate".to_string(),
                    kind: FieldErrorKind::Invalid,
                    message: "only allowed for updateStrategy 'RollingUpdate'".to_string(),
                    value: Some(go_rolling_update(ru)),
                });
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = ru {
                let path = "spec.updateStrategy.rollingUpdate";
                validate_nonnegative(Some(ru), "partition", &format!("{path}.partition"), errs);
                if let Some(mu) = ru.get("maxUnavailable").filter(|v| !v.is_null()) {
                    let mp = format!("{path}.maxUnavailable");
                    errs.extend(validate_positive_int_or_percent(mu, &mp));
                    if int_or_percent_value(mu) == 0 {
                        errs.push(FieldError {
                            field: mp.clone(),
                            kind: FieldErrorKind::Invalid,
                            message: "cannot be 0".to_string(),
                            value: Some(gofmt::int_or_string(mu)),
                        });
                    }
                    errs.extend(validate_not_more_than_100_percent(mu, &mp));
                }
            }
        }
        _ => errs.push(FieldError {
            field: "spec.updateStrategy".to_string(),
            kind: FieldErrorKind::Invalid,
            message: "must be 'RollingUpdate' or 'OnDelete'".to_string(),
            value: Some(gofmt::update_strategy(
                "apps.StatefulSetUpdateStrategy",
                "apps.RollingUpdateStatefulSetStrategy",
                us,
            )),
        }),
    }
}

/// `ValidateStatefulSetSpec`.
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    let text = |k: &str| {
        spec.and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    match text("podManagementPolicy") {
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        p => errs.push(FieldError::invalid(
            "spec.podManagementPolicy",
            p,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    validate_update_strategy(spec, &mut errs);
    let retention = spec.and_then(|s| s.get("persistentVolumeClaimRetentionPolicy"));
    for key in ["whenDeleted", "whenScaled"] {
        if let Some(p) = retention {
            let v = p.get(key).and_then(Value::as_str).unwrap_or("");
            if v != "Retain" && v != "Delete" {
                errs.push(FieldError::not_supported(
                    format!("spec.persistentVolumeClaimRetentionPolicy.{key}"),
                    &json!(v),
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    validate_nonnegative(spec, "replicas", "spec.replicas", &mut errs);
    validate_nonnegative(spec, "minReadySeconds", "spec.minReadySeconds", &mut errs);
    validate_nonnegative(
        spec.and_then(|s| s.get("ordinals")),
        "start",
        "spec.ordinals.start",
        &mut errs,
    );
    let selector = validate_label_selector(obj, "statefulset", &mut errs);
    let parses = obj
        .pointer("/spec/selector")
        .filter(|s| !s.is_null())
        .is_none_or(|s| labels::from_label_selector_json(s).is_ok());
    let template = spec.and_then(|s| s.get("template"));
    if parses {
        // ValidatePodTemplateSpecForStatefulSet: labels and annotations, not the pod spec.
        if !selector.is_empty() {
            podtemplate::check_selector_matches(&selector, template, "spec.template", &mut errs);
        }
        errs.extend(podtemplate::validate_metadata(template, "spec.template"));
    }
    let rp = podtemplate::restart_policy(template);
    if rp != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            &json!(rp),
            &["Always"],
        ));
    }
    if template
        .and_then(|t| t.pointer("/spec/activeDeadlineSeconds"))
        .is_some_and(|v| !v.is_null())
    {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in StatefulSet is not Supported",
        ));
    }
    errs
}

impl Strategy for StatefulSetStrategy {
    fn name_validation(&self) -> NameValidator {
        // Pods are named `<statefulset>-<ordinal>` and use it as their host name.
        api::validation::name_is_dns1123_label
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_statefulset(obj, None);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, |o| default_statefulset(o, None))
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"availableReplicas": 0, "replicas": 0}))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        default_statefulset(new, Some(old));
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(new);
        let mut masked = new.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(m) = masked.as_object_mut() {
            for key in MUTABLE_FIELDS {
                match old.pointer(&format!("/spec/{key}")) {
                    Some(v) => m.insert((*key).to_string(), v.clone()),
                    None => m.remove(*key),
                };
            }
        }
        if !semantically_equal(Some(&masked), old.get("spec")) {
            errs.push(FieldError::forbidden("spec", UPDATE_FORBIDDEN));
        }
        errs
    }

    fn scale(&self) -> Option<&dyn ScaleAccess> {
        Some(self)
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Ready",
                "string",
                "",
                "Number of the pod with ready state",
                0,
            ),
            age_column(),
            column(
                "Containers",
                "string",
                "",
                "Names of each container in the template.",
                1,
            ),
            column(
                "Images",
                "string",
                "",
                "Images referenced by each container in the template.",
                1,
            ),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let (containers, images) = containers_and_images(obj.pointer("/spec/template/spec"));
        let n = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(format!(
                "{}/{}",
                n("/status/readyReplicas"),
                n("/spec/replicas")
            )),
            age_cell(obj, now),
            Value::from(containers),
            Value::from(images),
        ]
    }
}

impl ScaleAccess for StatefulSetStrategy {
    fn to_scale(&self, obj: &Value) -> Value {
        scale_of(obj, selector_string(obj))
    }
    fn apply_scale(&self, obj: &mut Value, scale: &Value) -> Result<(), Vec<FieldError>> {
        apply_scale_replicas(obj, scale)
    }
}
