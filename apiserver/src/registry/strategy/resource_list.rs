//! `ResourceList` rules shared by the storage and policy kinds of the core group (PVs, PVCs,
//! LimitRanges, ResourceQuotas): resource names (`pkg/apis/core/helper`'s standard sets and
//! `validateResourceName`), quantity values (`ValidateResourceQuantityValue`,
//! `ValidatePositiveQuantityValue`) and the Go rendering of quantities in messages.
//!
//! Quantities stay the strings the client sent (upstream re-serialises them canonically, `1000m`
//! as `1`); they are compared by value through [`api::quantity::Amount`]. A quantity that does not
//! parse is a 422 at its field path with apimachinery's parse error (upstream fails the decode
//! with a 400 instead).

use api::quantity::Amount;
use api::validation::{self, FieldError};
use serde_json::{Map, Value};

/// `isNotIntegerErrorMsg`.
pub const NOT_INTEGER: &str = "must be an integer";
/// `isNegativeErrorMsg`.
pub const NEGATIVE: &str = "must be greater than or equal to 0";
/// `isNotPositiveErrorMsg`.
pub const NOT_POSITIVE: &str = "must be greater than zero";
/// `isInvalidQuotaResource`.
pub const INVALID_QUOTA_RESOURCE: &str = "must be a standard resource for quota";

/// `standardResources`.
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// `standardQuotaResources`.
const STANDARD_QUOTA_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// `integerResources`.
const INTEGER_RESOURCES: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// `standardContainerResources`.
const CONTAINER_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage"];

fn is_huge_page(name: &str) -> bool {
    name.starts_with("hugepages-")
}

fn is_quota_huge_page(name: &str) -> bool {
    name.starts_with("hugepages-") || name.starts_with("requests.hugepages-")
}

/// `IsNativeResource`: unprefixed or in the `kubernetes.io/` domain.
pub fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`.
pub fn is_extended(name: &str) -> bool {
    if is_native(name) || name.starts_with("requests.") {
        return false;
    }
    validation::is_qualified_name(&format!("requests.{name}")).is_empty()
}

/// `IsOvercommitAllowed`: native and not huge pages.
pub fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_huge_page(name)
}

/// `IsIntegerResourceName`.
pub fn is_integer_resource(name: &str) -> bool {
    INTEGER_RESOURCES.contains(&name) || is_extended(name)
}

/// `IsStandardQuotaResourceName`.
pub fn is_standard_quota_resource(name: &str) -> bool {
    STANDARD_QUOTA_RESOURCES.contains(&name) || is_quota_huge_page(name)
}

/// `validateResourceName`: a qualified name; an unprefixed one must be standard.
pub fn validate_resource_name(name: &str, path: &str) -> Vec<FieldError> {
    let errs: Vec<FieldError> = validation::is_qualified_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(path, name, m))
        .collect();
    if !errs.is_empty() {
        return errs;
    }
    let standard = STANDARD_RESOURCES.contains(&name) || is_quota_huge_page(name);
    if !name.contains('/') && !standard {
        return vec![FieldError::invalid(
            path,
            name,
            "must be a standard resource type or fully qualified",
        )];
    }
    Vec::new()
}

/// `validateContainerResourceName`.
pub fn validate_container_resource_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs = validate_resource_name(name, path);
    if !name.contains('/') {
        if !(CONTAINER_RESOURCES.contains(&name) || is_huge_page(name)) {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native(name) && !is_extended(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
    errs
}

/// `ValidateResourceQuotaResourceName`.
pub fn validate_quota_resource_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs = validate_resource_name(name, path);
    if errs.is_empty() && !name.contains('/') && !is_standard_quota_resource(name) {
        errs.push(FieldError::invalid(path, name, INVALID_QUOTA_RESOURCE));
    }
    errs
}

/// The text of a quantity value (a JSON string, or a number as clients sometimes send).
pub fn quantity_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Parses a quantity value; a parse failure is an Invalid error at `path`.
pub fn parse(v: &Value, path: &str) -> Result<Amount, FieldError> {
    let text = quantity_text(v);
    if !(v.is_string() || v.is_number()) {
        return Err(FieldError::invalid_value(
            path,
            v,
            "must be a quantity string",
        ));
    }
    Amount::parse(&text).map_err(|e| FieldError::invalid(path, &text, e.to_string()))
}

/// `ValidateResourceQuantityValue`: non-negative, and whole for integer resources.
pub fn validate_quantity_value(resource: &str, v: &Value, path: &str) -> Vec<FieldError> {
    let amount = match parse(v, path) {
        Ok(a) => a,
        Err(e) => return vec![e],
    };
    let text = quantity_text(v);
    let mut errs = Vec::new();
    if amount < Amount::ZERO {
        errs.push(FieldError::invalid(path, &text, NEGATIVE));
    }
    if is_integer_resource(resource) && amount.milli_value() % 1000 != 0 {
        errs.push(FieldError::invalid(path, &text, NOT_INTEGER));
    }
    errs
}

/// `ValidatePositiveQuantityValue`.
pub fn validate_positive(v: &Value, path: &str) -> Vec<FieldError> {
    match parse(v, path) {
        Ok(a) if a.is_positive() => Vec::new(),
        Ok(_) => vec![FieldError::invalid(path, &quantity_text(v), NOT_POSITIVE)],
        Err(e) => vec![e],
    }
}

/// The map at `v` (a `ResourceList`) in key order, empty when absent or mistyped (objects keep
/// their wire order; sorted, errors come in a stable order).
pub fn entries(v: Option<&Value>) -> Map<String, Value> {
    let mut m = v.and_then(Value::as_object).cloned().unwrap_or_default();
    m.sort_keys();
    m
}

/// `ResourceList` keys sorted as kubectl's `SortableResourceNames` (plain string order).
pub fn sorted_keys(v: Option<&Value>) -> Vec<String> {
    let mut keys: Vec<String> = entries(v).keys().cloned().collect();
    keys.sort();
    keys
}

/// The access-mode abbreviations of kubectl's `GetAccessModesAsString`, in its fixed order.
pub fn access_modes_text(modes: Option<&Value>) -> String {
    let modes: Vec<&str> = modes
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| modes.contains(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}
