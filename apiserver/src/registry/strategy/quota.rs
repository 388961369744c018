//! Core v1 LimitRanges and ResourceQuotas, as kube-apiserver 1.33 (`SetDefaults_LimitRangeItem`,
//! `ValidateLimitRange`, `ValidateResourceQuota{,Update,StatusUpdate}`, the registry strategies and
//! kubectl's printers). Both are stored and validated only: enforcement (the LimitRanger and
//! ResourceQuota admission plugins, the quota controller computing `status`) is not part of the
//! apiserver's registry.
//!
//! - A `Container` limit item's `default` comes from `max`, its `defaultRequest` from `default`,
//!   then from `min`.
//! - A quota's status is a subresource: reset to `{}` on create, kept on updates of the main
//!   resource, written only through `/status`. Its scopes are immutable.

use super::resource_list::{self as rl, quantity_text};
use super::table::{age_cell, age_column, created_at_cell, created_at_column, name_column};
use super::Strategy;
use api::quantity::Amount;
use api::validation::{self, FieldError};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

const LIMIT_TYPES: &[&str] = &["Pod", "Container", "PersistentVolumeClaim"];

/// `SetDefaults_LimitRangeItem` on every item.
fn default_limit_range(obj: &mut Value) {
    let Some(items) = obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let map = |item: &Map<String, Value>, k: &str| rl::entries(item.get(k));
        let (max, min) = (map(item, "max"), map(item, "min"));
        let mut default = map(item, "default");
        for (k, v) in &max {
            default.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let mut request = map(item, "defaultRequest");
        for (k, v) in default.iter().chain(min.iter()) {
            request.entry(k.clone()).or_insert_with(|| v.clone());
        }
        // Empty maps are omitted on the wire (`omitempty`).
        for (k, m) in [("default", default), ("defaultRequest", request)] {
            if !m.is_empty() {
                item.insert(k.into(), Value::Object(m));
            }
        }
    }
}

/// `validateLimitRangeTypeName`.
fn validate_limit_type(t: &str, path: &str) -> Vec<FieldError> {
    let errs: Vec<FieldError> = validation::is_qualified_name(t)
        .into_iter()
        .map(|m| FieldError::invalid(path, t, m))
        .collect();
    if !errs.is_empty() {
        return errs;
    }
    if !t.contains('/') && !LIMIT_TYPES.contains(&t) {
        return vec![FieldError::invalid(
            path,
            t,
            "must be a standard limit type or fully qualified",
        )];
    }
    Vec::new()
}

/// `validateLimitRangeResourceName`.
fn validate_limit_resource(limit_type: &str, name: &str, path: &str) -> Vec<FieldError> {
    match limit_type {
        "Pod" | "Container" => rl::validate_container_resource_name(name, path),
        _ => rl::validate_resource_name(name, path),
    }
}

/// `ValidateLimitRange`'s spec rules.
fn validate_limit_range(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let items = obj
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut seen = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let p = format!("spec.limits[{i}]");
        let t = item.get("type").and_then(Value::as_str).unwrap_or("");
        errs.extend(validate_limit_type(t, &format!("{p}.type")));
        if !seen.insert(t.to_string()) {
            errs.push(FieldError::duplicate(format!("{p}.type"), &json!(t)));
        }
        let mut keys = BTreeSet::new();
        let mut maps: BTreeMap<&str, BTreeMap<String, (Amount, String)>> = BTreeMap::new();
        let mut collect = |field: &'static str, errs: &mut Vec<FieldError>| {
            let entries = rl::entries(item.get(field));
            let mut out = BTreeMap::new();
            for (k, q) in &entries {
                let kp = format!("{p}.{field}[{k}]");
                errs.extend(validate_limit_resource(t, k, &kp));
                keys.insert(k.clone());
                match rl::parse(q, &kp) {
                    Ok(a) => {
                        out.insert(k.clone(), (a, quantity_text(q)));
                    }
                    Err(e) => errs.push(e),
                }
            }
            maps.insert(field, out);
        };
        collect("max", &mut errs);
        collect("min", &mut errs);
        if t == "Pod" {
            for field in ["default", "defaultRequest"] {
                if !rl::entries(item.get(field)).is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{p}.{field}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        } else {
            collect("default", &mut errs);
            collect("defaultRequest", &mut errs);
        }
        if t == "PersistentVolumeClaim" {
            let has = |f: &str| rl::entries(item.get(f)).contains_key("storage");
            if !has("min") && !has("max") {
                errs.push(FieldError::required(
                    format!("{p}.limits"),
                    "either minimum or maximum storage value is required, but neither was provided",
                ));
            }
        }
        collect("maxLimitRequestRatio", &mut errs);
        for k in &keys {
            let get = |f: &str| maps.get(f).and_then(|m| m.get(k)).cloned();
            let (min, max) = (get("min"), get("max"));
            let (def, req) = (get("default"), get("defaultRequest"));
            let ratio = get("maxLimitRequestRatio");
            let at = |f: &str| format!("{p}.{f}[{k}]");
            if let (Some(min), Some(max)) = (&min, &max) {
                if min.0 > max.0 {
                    errs.push(FieldError::invalid(
                        at("min"),
                        &min.1,
                        format!("min value {} is greater than max value {}", min.1, max.1),
                    ));
                }
            }
            if let (Some(req), Some(min)) = (&req, &min) {
                if min.0 > req.0 {
                    errs.push(FieldError::invalid(
                        at("defaultRequest"),
                        &req.1,
                        format!(
                            "min value {} is greater than default request value {}",
                            min.1, req.1
                        ),
                    ));
                }
            }
            if let (Some(req), Some(max)) = (&req, &max) {
                if req.0 > max.0 {
                    errs.push(FieldError::invalid(
                        at("defaultRequest"),
                        &req.1,
                        format!(
                            "default request value {} is greater than max value {}",
                            req.1, max.1
                        ),
                    ));
                }
            }
            if let (Some(req), Some(def)) = (&req, &def) {
                if req.0 > def.0 {
                    errs.push(FieldError::invalid(
                        at("defaultRequest"),
                        &req.1,
                        format!(
                            "default request value {} is greater than default limit value {}",
                            req.1, def.1
                        ),
                    ));
                }
            }
            if let (Some(def), Some(min)) = (&def, &min) {
                if min.0 > def.0 {
                    errs.push(FieldError::invalid(
                        at("default"),
                        &min.1,
                        format!(
                            "min value {} is greater than default value {}",
                            min.1, def.1
                        ),
                    ));
                }
            }
            if let (Some(def), Some(max)) = (&def, &max) {
                if def.0 > max.0 {
                    errs.push(FieldError::invalid(
                        at("default"),
                        &max.1,
                        format!(
                            "default value {} is greater than max value {}",
                            def.1, max.1
                        ),
                    ));
                }
            }
            if let Some(r) = &ratio {
                if r.0 < Amount::from_units(1) {
                    errs.push(FieldError::invalid(
                        at("maxLimitRequestRatio"),
                        &r.1,
                        format!("ratio {} is less than 1", r.1),
                    ));
                }
                if let (Some(min), Some(max)) = (&min, &max) {
                    let limit = max.0.nano_value() as f64 / min.0.nano_value() as f64;
                    let value = r.0.nano_value() as f64 / 1e9;
                    if min.0.is_positive() && value > limit {
                        errs.push(FieldError::invalid(
                            at("maxLimitRequestRatio"),
                            &r.1,
                            format!("ratio {} is greater than max/min = {limit:.6}", r.1),
                        ));
                    }
                }
            }
            if let (Some(def), Some(req)) = (&def, &req) {
                if !rl::overcommit_allowed(k) && def.0 != req.0 {
                    errs.push(FieldError::invalid(
                        at("defaultRequest"),
                        &req.1,
                        format!(
                            "default value {} must equal to defaultRequest value {} in {k}",
                            def.1, req.1
                        ),
                    ));
                }
            }
        }
    }
    errs
}

/// core v1 LimitRange.
pub struct LimitRangeStrategy;

impl Strategy for LimitRangeStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_limit_range(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_limit_range)
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_limit_range(new);
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_limit_range(obj)
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_limit_range(new)
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![name_column(), created_at_column()]
    }

    fn table_cells(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            created_at_cell(obj),
        ]
    }
}

/// Quota scopes of 1.33 (`standardResourceQuotaScopes`).
const QUOTA_SCOPES: &[&str] = &[
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

const POD_COMPUTE: &[&str] = &[
    "cpu",
    "memory",
    "limits.cpu",
    "limits.memory",
    "requests.cpu",
    "requests.memory",
];

/// `IsResourceQuotaScopeValidForResource`.
fn scope_valid_for(scope: &str, resource: &str) -> bool {
    match scope {
        "Terminating"
        | "NotTerminating"
        | "NotBestEffort"
        | "PriorityClass"
        | "CrossNamespacePodAffinity" => resource == "pods" || POD_COMPUTE.contains(&resource),
        "BestEffort" => resource == "pods",
        _ => true,
    }
}

/// Go's `%#v` of a `[]core.ResourceQuotaScope`.
fn go_scopes(scopes: &[String]) -> String {
    let items: Vec<String> = scopes.iter().map(|s| validation::go_quote(s)).collect();
    format!("[]core.ResourceQuotaScope{{{}}}", items.join(", "))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn conflicting(scopes: &BTreeSet<String>) -> bool {
    let has = |s: &str| scopes.contains(s);
    (has("BestEffort") && has("NotBestEffort")) || (has("Terminating") && has("NotTerminating"))
}

fn invalid_rendered(path: &str, rendered: String, msg: &str) -> FieldError {
    let mut e = FieldError::invalid(path, "", msg);
    e.value = Some(rendered);
    e
}

/// `hard`/`used` entries: quota resource names and quantity values at `<path>[<name>]`.
fn validate_quota_list(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    for (k, q) in rl::entries(v) {
        let p = format!("{path}[{k}]");
        errs.extend(rl::validate_quota_resource_name(&k, &p));
        errs.extend(rl::validate_quantity_value(&k, &q, &p));
    }
}

/// `ValidateResourceQuotaSpec`.
fn validate_quota_spec(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    let hard = rl::sorted_keys(spec.and_then(|s| s.get("hard")));
    validate_quota_list(spec.and_then(|s| s.get("hard")), "spec.hard", &mut errs);
    let scopes = strings(spec.and_then(|s| s.get("scopes")));
    let mut set = BTreeSet::new();
    for scope in &scopes {
        if !QUOTA_SCOPES.contains(&scope.as_str()) {
            errs.push(invalid_rendered(
                "spec.scopes",
                go_scopes(&scopes),
                "unsupported scope",
            ));
        }
        for k in &hard {
            if rl::is_standard_quota_resource(k) && !scope_valid_for(scope, k) {
                errs.push(invalid_rendered(
                    "spec.scopes",
                    go_scopes(&scopes),
                    "unsupported scope applied to resource",
                ));
            }
        }
        set.insert(scope.clone());
    }
    if conflicting(&set) {
        errs.push(invalid_rendered(
            "spec.scopes",
            go_scopes(&scopes),
            "conflicting scopes",
        ));
    }
    if let Some(sel) = spec
        .and_then(|s| s.get("scopeSelector"))
        .filter(|v| !v.is_null())
    {
        validate_scope_selector(sel, &hard, &scopes, &mut errs);
    }
    errs
}

/// `validateScopedResourceSelectorRequirement`.
fn validate_scope_selector(
    sel: &Value,
    hard: &[String],
    scopes: &[String],
    errs: &mut Vec<FieldError>,
) {
    let path = "spec.scopeSelector.matchExpressions";
    let mut set = BTreeSet::new();
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    for req in exprs.into_iter().flatten() {
        let scope = req.get("scopeName").and_then(Value::as_str).unwrap_or("");
        let op = req.get("operator").and_then(Value::as_str).unwrap_or("");
        let values = strings(req.get("values"));
        if !QUOTA_SCOPES.contains(&scope) {
            errs.push(FieldError::invalid(
                format!("{path}.scopeName"),
                scope,
                "unsupported scope",
            ));
        }
        for k in hard {
            if rl::is_standard_quota_resource(k) && !scope_valid_for(scope, k) {
                errs.push(FieldError::invalid_value(
                    path,
                    sel,
                    "unsupported scope applied to resource",
                ));
            }
        }
        if matches!(
            scope,
            "BestEffort"
                | "NotBestEffort"
                | "Terminating"
                | "NotTerminating"
                | "CrossNamespacePodAffinity"
        ) && op != "Exists"
        {
            errs.push(FieldError::invalid(format!("{path}.operator"), op, "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"));
        }
        match op {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{path}.values"),
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            )),
            "In" | "NotIn" => {}
            "Exists" | "DoesNotExist" if !values.is_empty() => errs
                .push(FieldError::invalid_value(
                format!("{path}.values"),
                req.get("values").unwrap_or(&Value::Null),
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            )),
            "Exists" | "DoesNotExist" => {}
            _ => errs.push(FieldError::invalid(
                format!("{path}.operator"),
                op,
                "not a valid selector operator",
            )),
        }
        set.insert(scope.to_string());
    }
    if conflicting(&set) {
        errs.push(invalid_rendered(
            path,
            go_scopes(scopes),
            "conflicting scopes",
        ));
    }
}

/// core v1 ResourceQuota.
pub struct ResourceQuotaStrategy;

impl Strategy for ResourceQuotaStrategy {
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({}))
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_quota_spec(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_quota_spec(new);
        let scopes = |o: &Value| -> BTreeSet<String> {
            strings(o.pointer("/spec/scopes")).into_iter().collect()
        };
        if scopes(new) != scopes(old) {
            errs.push(invalid_rendered(
                "spec.scopes",
                go_scopes(&strings(new.pointer("/spec/scopes"))),
                "field is immutable",
            ));
        }
        // Status is only written through /status (a main-resource update keeps the stored one),
        // so these rules are `ValidateResourceQuotaStatusUpdate`'s.
        validate_quota_list(new.pointer("/status/hard"), "status.hard", &mut errs);
        validate_quota_list(new.pointer("/status/used"), "status.used", &mut errs);
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            age_column(),
            super::table::column(
                "Request",
                "string",
                "",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
                0,
            ),
            super::table::column(
                "Limit",
                "string",
                "",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
                0,
            ),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let (request, limit) = quota_columns(obj);
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            age_cell(obj, now),
            json!(request),
            json!(limit),
        ]
    }
}

/// kubectl's REQUEST and LIMIT cells: `<resource>: <used>/<hard>` for every hard resource of
/// the status, `limits.*` ones in LIMIT.
fn quota_columns(obj: &Value) -> (String, String) {
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    for k in rl::sorted_keys(obj.pointer("/status/hard")) {
        let q = |list: &str| {
            obj.pointer(&format!("/status/{list}"))
                .and_then(|m| m.get(&k))
                .map(quantity_text)
        };
        let (used, hard_q) = (
            q("used").unwrap_or_else(|| "0".into()),
            q("hard").unwrap_or_default(),
        );
        let cell = format!("{k}: {used}/{hard_q}");
        let pieces: Vec<&str> = k.split('.').collect();
        if pieces.len() > 1 && pieces[0] == "limits" {
            limit.push(cell);
        } else {
            request.push(cell);
        }
    }
    (request.join(", "), limit.join(", "))
}
