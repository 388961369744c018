//! `networking.k8s.io/v1` Ingresses, as upstream's `pkg/apis/networking/validation`,
//! `pkg/registry/networking/ingress` and `plugin/pkg/admission/network/defaultingressclass`
//! define them.
//!
//! - Ingress: `defaultBackend` or `rules`; hosts are DNS names (a leading `*.` wildcard allowed),
//!   never IPs; every HTTP path has a `pathType` (v1 does not default it) and a path that suits
//!   it; a backend is a service (DNS-1035 name, a port name or number) or a resource, not both;
//!   TLS hosts and secret names; the `kubernetes.io/ingress.class` annotation must match
//!   `ingressClassName` on create. Status (`status.loadBalancer`) is a subresource; generation
//!   tracks the spec. Invalid values an old object already had (TLS secret names, wildcard-host
//!   rules) stay allowed on update, as upstream.
//! - Admission (DefaultIngressClass): a new Ingress naming no class gets the newest IngressClass
//!   annotated `ingressclass.kubernetes.io/is-default-class: "true"`.
//! - Table as kubectl prints it: NAME CLASS HOSTS ADDRESS PORTS AGE.

use std::collections::BTreeSet;

use super::common::object_at;
use super::netvalid::{
    self, items, parse_ip_sloppy, port_name_messages, port_num_messages, set, text,
    wildcard_dns1123_messages,
};
use super::table::{age_cell, age_column, column, name_column};
use super::{Forbidden, Objects, Strategy};
use api::validation::{self, FieldError, FieldErrorKind};
use serde_json::{json, Value};

const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// `networkingv1.AnnotationIsDefaultIngressClass`.
pub const DEFAULT_INGRESS_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// `supportedPathTypes.List()`: sorted.
const PATH_TYPES: &[&str] = &["Exact", "ImplementationSpecific", "Prefix"];
const INVALID_PATH_SEQUENCES: &[&str] = &["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: &[&str] = &["/..", "/."];

/// Upstream's relaxations for values an existing object already had.
#[derive(Default, Clone, Copy)]
struct Options {
    allow_invalid_secret_name: bool,
    allow_invalid_wildcard_host_rule: bool,
}

fn invalid_rendered(field: String, rendered: String, msg: &str) -> FieldError {
    FieldError {
        field,
        kind: FieldErrorKind::Invalid,
        message: msg.to_string(),
        value: Some(rendered),
    }
}

/// `validateIngressBackend` at `path`.
fn validate_backend(b: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let resource = set(b, "resource");
    let service = set(b, "service");
    match (resource, service) {
        (Some(_), Some(_)) => {
            errs.push(FieldError::invalid(
                path,
                "",
                "cannot set both resource and service backends",
            ));
        }
        (Some(r), None) => errs.extend(validate_typed_ref(r, &format!("{path}.resource"))),
        (None, Some(s)) => {
            let name = text(s, "name");
            let name_path = format!("{path}.service.name");
            if name.is_empty() {
                errs.push(FieldError::required(name_path, ""));
            } else {
                for m in validation::is_dns1035_label(name) {
                    errs.push(FieldError::invalid(name_path.clone(), name, m));
                }
            }
            let null = Value::Null;
            let port = s.get("port").unwrap_or(&null);
            let port_name = text(port, "name");
            let number = port.get("number").and_then(Value::as_i64).unwrap_or(0);
            if !port_name.is_empty() && number != 0 {
                errs.push(FieldError::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                ));
            } else if !port_name.is_empty() {
                for m in port_name_messages(port_name) {
                    errs.push(FieldError::invalid(
                        format!("{path}.service.port.name"),
                        port_name,
                        m,
                    ));
                }
            } else if number != 0 {
                for m in port_num_messages(number) {
                    errs.push(FieldError::invalid_value(
                        format!("{path}.service.port.number"),
                        &json!(number),
                        m,
                    ));
                }
            } else {
                errs.push(FieldError::required(
                    path,
                    "port name or number is required",
                ));
            }
        }
        (None, None) => errs.push(FieldError::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
    }
    errs
}

/// `validateIngressTypedLocalObjectReference` (a backend's `resource`).
fn validate_typed_ref(r: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(g) = set(r, "apiGroup").and_then(Value::as_str) {
        for m in validation::is_dns1123_subdomain(g) {
            errs.push(FieldError::invalid(format!("{path}.apiGroup"), g, m));
        }
    }
    errs.extend(required_path_segment(r, "kind", path));
    errs.extend(required_path_segment(r, "name", path));
    errs
}

/// A required field that must be a valid path segment (`content.IsPathSegmentName`).
pub(super) fn required_path_segment(r: &Value, key: &str, path: &str) -> Vec<FieldError> {
    let v = text(r, key);
    let field = format!("{path}.{key}");
    if v.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    validation::is_valid_path_segment_name(v)
        .into_iter()
        .map(|m| FieldError::invalid(field.clone(), v, m))
        .collect()
}

/// `validateHTTPIngressPath`.
fn validate_http_path(p: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(path_type) = set(p, "pathType") else {
        return vec![FieldError::required(
            format!("{path}.pathType"),
            "pathType must be specified",
        )];
    };
    let value = text(p, "path");
    let path_field = format!("{path}.path");
    match path_type.as_str() {
        Some("Exact" | "Prefix") => {
            if !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    path_field.clone(),
                    value,
                    "must be an absolute path",
                ));
            }
            for seq in INVALID_PATH_SEQUENCES
                .iter()
                .filter(|s| value.contains(**s))
            {
                errs.push(FieldError::invalid(
                    path_field.clone(),
                    value,
                    format!("must not contain '{seq}'"),
                ));
            }
            for suffix in INVALID_PATH_SUFFIXES
                .iter()
                .filter(|s| value.ends_with(**s))
            {
                errs.push(FieldError::invalid(
                    path_field.clone(),
                    value,
                    format!("cannot end with '{suffix}'"),
                ));
            }
        }
        Some("ImplementationSpecific") => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    path_field,
                    value,
                    "must be an absolute path",
                ));
            }
        }
        _ => errs.push(FieldError::not_supported(
            format!("{path}.pathType"),
            path_type,
            PATH_TYPES,
        )),
    }
    let null = Value::Null;
    errs.extend(validate_backend(
        p.get("backend").unwrap_or(&null),
        &format!("{path}.backend"),
    ));
    errs
}

/// `validateIngressRuleValue`: the rule's `http` paths.
fn validate_rule_value(rule: &Value, path: &str) -> Vec<FieldError> {
    let Some(http) = set(rule, "http") else {
        return Vec::new();
    };
    let paths = items(http, "paths");
    let mut errs = Vec::new();
    if paths.is_empty() {
        errs.push(FieldError::required(format!("{path}.http.paths"), ""));
    }
    for (i, p) in paths.iter().enumerate() {
        errs.extend(validate_http_path(p, &format!("{path}.http.paths[{i}]")));
    }
    errs
}

fn validate_rules(rules: &[Value], opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("spec.rules[{i}]");
        let host = text(rule, "host");
        let mut wildcard = false;
        if !host.is_empty() {
            let host_path = format!("{path}.host");
            if parse_ip_sloppy(host).is_some() {
                errs.push(FieldError::invalid(
                    host_path.clone(),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            let msgs = if host.contains('*') {
                wildcard = true;
                wildcard_dns1123_messages(host)
            } else {
                validation::is_dns1123_subdomain(host)
            };
            for m in msgs {
                errs.push(FieldError::invalid(host_path.clone(), host, m));
            }
        }
        if !wildcard || !opts.allow_invalid_wildcard_host_rule {
            errs.extend(validate_rule_value(rule, &path));
        }
    }
    errs
}

fn validate_tls(tls: &[Value], opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tls.iter().enumerate() {
        for (j, h) in items(t, "hosts").iter().enumerate() {
            let host = h.as_str().unwrap_or("");
            let msgs = if host.contains('*') {
                wildcard_dns1123_messages(host)
            } else {
                validation::is_dns1123_subdomain(host)
            };
            for m in msgs {
                errs.push(FieldError::invalid(
                    format!("spec.tls[{i}].hosts[{j}]"),
                    host,
                    m,
                ));
            }
        }
        if !opts.allow_invalid_secret_name {
            let secret = text(t, "secretName");
            for m in tls_secret_name_messages(secret) {
                errs.push(FieldError::invalid(
                    format!("spec.tls[{i}].secretName"),
                    secret,
                    m,
                ));
            }
        }
    }
    errs
}

fn tls_secret_name_messages(name: &str) -> Vec<String> {
    if name.is_empty() {
        Vec::new()
    } else {
        validation::is_dns1123_subdomain(name)
    }
}

/// `ValidateIngressSpec`.
fn validate_spec(obj: &Value, opts: Options) -> Vec<FieldError> {
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let rules = items(spec, "rules");
    let default_backend = set(spec, "defaultBackend");
    let mut errs = Vec::new();
    if rules.is_empty() && default_backend.is_none() {
        let rendered = match spec.get("rules") {
            Some(Value::Array(_)) => "[]networking.IngressRule{}",
            _ => "[]networking.IngressRule(nil)",
        };
        errs.push(invalid_rendered(
            "spec".into(),
            rendered.into(),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default_backend {
        errs.extend(validate_backend(b, "spec.defaultBackend"));
    }
    errs.extend(validate_rules(rules, opts));
    errs.extend(validate_tls(items(spec, "tls"), opts));
    if let Some(class) = set(spec, "ingressClassName").and_then(Value::as_str) {
        for m in validation::is_dns1123_subdomain(class) {
            errs.push(FieldError::invalid("spec.ingressClassName", class, m));
        }
    }
    errs
}

/// `ValidateIngressLoadBalancerStatus` of `status.loadBalancer` (IPs the old status had stay
/// allowed).
fn validate_status(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let ingress_of = |o: &Value| -> Vec<Value> {
        o.pointer("/status/loadBalancer/ingress")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let existing: BTreeSet<String> = old
        .map(ingress_of)
        .unwrap_or_default()
        .iter()
        .map(|i| text(i, "ip").to_string())
        .filter(|ip| !ip.is_empty())
        .collect();
    let mut errs = Vec::new();
    for (i, ing) in ingress_of(new).iter().enumerate() {
        let path = format!("status.loadBalancer.ingress[{i}]");
        let ip = text(ing, "ip");
        if !ip.is_empty() && !existing.contains(ip) {
            errs.extend(netvalid::validate_ip_legacy(&format!("{path}.ip"), ip));
        }
        let hostname = text(ing, "hostname");
        if !hostname.is_empty() {
            for m in validation::is_dns1123_subdomain(hostname) {
                errs.push(FieldError::invalid(format!("{path}.hostname"), hostname, m));
            }
            if parse_ip_sloppy(hostname).is_some() {
                errs.push(FieldError::invalid(
                    format!("{path}.hostname"),
                    hostname,
                    "must be a DNS name, not an IP address",
                ));
            }
        }
    }
    errs
}

/// The options of an update: what the stored object already got away with.
fn update_options(old: &Value) -> Options {
    let null = Value::Null;
    let spec = old.get("spec").unwrap_or(&null);
    Options {
        allow_invalid_secret_name: items(spec, "tls")
            .iter()
            .any(|t| !tls_secret_name_messages(text(t, "secretName")).is_empty()),
        allow_invalid_wildcard_host_rule: items(spec, "rules")
            .iter()
            .any(|r| text(r, "host").contains('*') && !validate_rule_value(r, "").is_empty()),
    }
}

/// The DefaultIngressClass admission plugin's choice (`getDefaultClass`): among the classes
/// annotated as default, the newest (by creation time, then by name).
fn default_class_name(objects: &dyn Objects) -> Option<String> {
    let mut defaults: Vec<(Option<jiff::Timestamp>, String)> = objects
        .list("networking.k8s.io", "ingressclasses")
        .iter()
        .filter(|c| {
            c.pointer("/metadata/annotations")
                .and_then(|a| a.get(DEFAULT_INGRESS_CLASS_ANNOTATION))
                .and_then(Value::as_str)
                == Some("true")
        })
        .map(|c| {
            let created = api::meta::creation_timestamp(c).and_then(api::meta::parse_time);
            (created, api::meta::name(c).unwrap_or("").to_string())
        })
        .collect();
    defaults.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    defaults.into_iter().next().map(|(_, name)| name)
}

/// networking.k8s.io/v1 Ingress.
pub struct IngressStrategy;

impl Strategy for IngressStrategy {
    /// The DefaultIngressClass admission plugin: a new Ingress that names no class (neither
    /// `ingressClassName` nor the `kubernetes.io/ingress.class` annotation) gets the default one.
    fn admit(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if old.is_some()
            || obj
                .pointer("/spec/ingressClassName")
                .is_some_and(|c| !c.is_null())
        {
            return Ok(());
        }
        let annotated = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
            .is_some();
        if annotated {
            return Ok(());
        }
        if let Some(class) = default_class_name(objects) {
            if let Some(spec) = object_at(obj, "spec") {
                spec.insert("ingressClassName".into(), Value::from(class));
            }
        }
        Ok(())
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({"loadBalancer": {}}))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(obj, Options::default());
        let annotation = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
            .and_then(Value::as_str);
        let class = obj
            .pointer("/spec/ingressClassName")
            .and_then(Value::as_str);
        if let (Some(a), Some(c)) = (annotation, class) {
            if a != c {
                errs.push(FieldError::invalid(
                    format!("annotations.{INGRESS_CLASS_ANNOTATION}"),
                    a,
                    "must match `ingressClassName` when both are specified",
                ));
            }
        }
        errs
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(new, update_options(old));
        errs.extend(validate_status(new, Some(old)));
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Class", "string", "", "The name of the IngressClass resource that should be used for additional configuration", 0),
            column("Hosts", "string", "", "Hosts that incoming requests are matched against before the ingress rule", 0),
            column("Address", "string", "", "Address is a list containing ingress points for the load-balancer", 0),
            column("Ports", "string", "", "Ports of TLS configurations that open", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        let class = set(spec, "ingressClassName")
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        let ports = if items(spec, "tls").is_empty() {
            "80"
        } else {
            "80, 443"
        };
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(class),
            Value::from(format_hosts(items(spec, "rules"))),
            Value::from(load_balancer_addresses(obj)),
            Value::from(ports),
            age_cell(obj, now),
        ]
    }
}

/// `formatHosts`: the first three rule hosts, `*` when none.
fn format_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    for r in rules {
        if list.len() == MAX {
            more = true;
        }
        let host = text(r, "host");
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_string();
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", rules.len() - MAX)
    } else {
        joined
    }
}

/// `ingressLoadBalancerStatusStringer` (wide, as the server renders tables): the sorted distinct
/// IPs or hostnames.
fn load_balancer_addresses(obj: &Value) -> String {
    let ingress = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array);
    let set: BTreeSet<&str> = ingress
        .into_iter()
        .flatten()
        .filter_map(|i| match (text(i, "ip"), text(i, "hostname")) {
            ("", "") => None,
            ("", h) => Some(h),
            (ip, _) => Some(ip),
        })
        .collect();
    set.into_iter().collect::<Vec<_>>().join(",")
}
