//! `networking.k8s.io/v1` ServiceCIDRs and IPAddresses, as upstream's
//! `pkg/apis/networking/validation` and `pkg/registry/networking/{servicecidr,ipaddress}` define
//! them.
//!
//! - ServiceCIDR: one or two CIDRs in canonical form, one per IP family; the CIDRs never change,
//!   except that a single-stack range may gain its other family. Status is a subresource (the
//!   create keeps what the client sent, as upstream's strategy does); no generation.
//! - IPAddress: the name is an IP address in canonical form; `spec.parentRef` (resource and name
//!   required, path segments) is required and immutable.
//! - The `kubernetes` ServiceCIDR of the cluster's service range is created at start-up
//!   (`bootstrap/servicecidr.rs`), as upstream's default-ServiceCIDR controller does.
//! - Tables: NAME CIDRS AGE, and NAME PARENTREF.

use super::netvalid::{self, cidr_family, go_strings, text};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, go_quote, FieldError, FieldErrorKind, NameValidator};
use serde_json::Value;

const IMMUTABLE: &str = "field is immutable";

fn invalid_rendered(field: &str, rendered: String, msg: &str) -> FieldError {
    FieldError {
        field: field.to_string(),
        kind: FieldErrorKind::Invalid,
        message: msg.to_string(),
        value: Some(rendered),
    }
}

fn cidrs(obj: &Value) -> Vec<&str> {
    obj.pointer("/spec/cidrs")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|c| c.as_str().unwrap_or("")).collect())
        .unwrap_or_default()
}

/// `validateServiceCIDRSpec`.
fn validate_cidrs(obj: &Value) -> Vec<FieldError> {
    let path = "spec.cidrs";
    let list = cidrs(obj);
    let raw = obj.pointer("/spec/cidrs");
    if list.is_empty() {
        return vec![FieldError::required(path, "at least one CIDR required")];
    }
    if list.len() > 2 {
        return vec![invalid_rendered(
            path,
            format!("networking.ServiceCIDRSpec{{CIDRs:{}}}", go_strings(raw)),
            "may only hold up to 2 values",
        )];
    }
    let mut errs: Vec<FieldError> = list
        .iter()
        .enumerate()
        .flat_map(|(i, c)| netvalid::validate_cidr(&format!("{path}[{i}]"), c))
        .collect();
    if list.len() == 2 {
        let (a, b) = (cidr_family(list[0]), cidr_family(list[1]));
        if a.is_some() && a == b {
            errs.push(invalid_rendered(
                path,
                go_strings(raw),
                "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
            ));
        }
    }
    errs
}

/// `ValidateServiceCIDRUpdate`.
fn validate_cidrs_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (n, o) = (cidrs(new), cidrs(old));
    let mut errs = Vec::new();
    if n.len() == o.len() {
        for (i, (a, b)) in n.iter().zip(&o).enumerate() {
            if a != b {
                errs.push(FieldError::invalid(
                    format!("spec.cidrs[{i}]"),
                    a,
                    IMMUTABLE,
                ));
            }
        }
    } else if o.len() == 1 && n.len() == 2 {
        if n[0] != o[0] {
            errs.push(FieldError::invalid("spec.cidrs[0]", n[0], IMMUTABLE));
        }
        errs.extend(validate_cidrs(new));
    } else {
        errs.push(invalid_rendered(
            "spec.cidrs",
            go_strings(new.pointer("/spec/cidrs")),
            IMMUTABLE,
        ));
    }
    errs
}

/// networking.k8s.io/v1 ServiceCIDR.
pub struct ServiceCidrStrategy;

impl Strategy for ServiceCidrStrategy {
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_cidrs(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_cidrs_update(new, old)
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("CIDRs", "string", "", "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(cidrs(obj).join(",")),
            age_cell(obj, now),
        ]
    }
}

/// `ValidateIPAddressName`: the name is an IP address in canonical form.
fn ip_address_name(name: &str, _prefix: bool) -> Vec<String> {
    netvalid::ip_messages(name)
}

/// Go's `%#v` of a `*networking.ParentReference` as `field.Invalid` prints it (dereferenced).
fn go_parent_ref(r: Option<&Value>) -> String {
    match r {
        None => "null".to_string(),
        Some(r) => format!(
            "networking.ParentReference{{Group:{}, Resource:{}, Namespace:{}, Name:{}}}",
            go_quote(text(r, "group")),
            go_quote(text(r, "resource")),
            go_quote(text(r, "namespace")),
            go_quote(text(r, "name")),
        ),
    }
}

/// `validateIPAddressParentReference`.
fn validate_parent_ref(obj: &Value) -> Vec<FieldError> {
    let path = "spec.parentRef";
    let Some(r) = obj.pointer("/spec/parentRef").filter(|r| !r.is_null()) else {
        return vec![FieldError::required(path, "")];
    };
    let mut errs = Vec::new();
    let group = text(r, "group");
    if !group.is_empty() {
        for m in validation::is_dns1123_subdomain(group) {
            errs.push(FieldError::invalid(format!("{path}.group"), group, m));
        }
    }
    for key in ["resource", "name"] {
        let v = text(r, key);
        if v.is_empty() {
            errs.push(FieldError::required(format!("{path}.{key}"), ""));
        } else {
            for m in validation::is_valid_path_segment_name(v) {
                errs.push(FieldError::invalid(format!("{path}.{key}"), v, m));
            }
        }
    }
    let ns = text(r, "namespace");
    for m in validation::is_valid_path_segment_name(ns) {
        errs.push(FieldError::invalid(format!("{path}.namespace"), ns, m));
    }
    errs
}

/// networking.k8s.io/v1 IPAddress.
pub struct IpAddressStrategy;

impl Strategy for IpAddressStrategy {
    fn name_validation(&self) -> NameValidator {
        ip_address_name
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_parent_ref(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_parent_ref(new);
        let (a, b) = (
            new.pointer("/spec/parentRef").filter(|r| !r.is_null()),
            old.pointer("/spec/parentRef").filter(|r| !r.is_null()),
        );
        if a != b {
            errs.push(invalid_rendered(
                "spec.parentRef",
                go_parent_ref(a),
                IMMUTABLE,
            ));
        }
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("ParentRef", "string", "", "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object.", 0),
        ]
    }
    fn table_cells(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        let parent = match obj.pointer("/spec/parentRef").filter(|r| !r.is_null()) {
            None => "<none>".to_string(),
            Some(r) => {
                let (group, resource) = (text(r, "group"), text(r, "resource"));
                let mut s = if group.is_empty() {
                    resource.to_string()
                } else {
                    format!("{resource}.{group}")
                }
                .to_lowercase();
                let ns = text(r, "namespace");
                if !ns.is_empty() {
                    s = format!("{s}/{ns}");
                }
                format!("{s}/{}", text(r, "name"))
            }
        };
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(parent),
        ]
    }
}
