//! `networking.k8s.io/v1` NetworkPolicies, as upstream's `pkg/apis/networking/validation`,
//! `pkg/apis/networking/v1/defaults.go` and `pkg/registry/networking/networkpolicy` define them.
//!
//! - Defaults: every port's `protocol` is `TCP`; without `policyTypes` a policy is `Ingress`, and
//!   `Egress` too when it has egress rules.
//! - Validation: the pod selector, each rule's ports (protocol TCP/UDP/SCTP, a port number or
//!   name, `endPort` only after a numeric port and not below it) and peers (exactly one kind of
//!   peer when `ipBlock` is used; an `ipBlock` CIDR, its `except` entries strict subsets of it),
//!   at most two policy types. CIDRs are parsed as the legacy fields they are; on update a CIDR
//!   the old policy had stays allowed, as does an invalid selector value the old one had.
//! - No status (the NetworkPolicyStatus gate is off); generation tracks the spec.
//! - Table: NAME POD-SELECTOR AGE.

use super::common::object_at;
use super::netvalid::{
    items, masked, parse_cidr_sloppy, port_name_messages, port_num_messages, set, text,
    validate_cidr_legacy,
};
use super::table::{age_cell, age_column, column, name_column};
use super::workloads::format_label_selector;
use super::Strategy;
use api::validation::{self, FieldError, FieldErrorKind};
use serde_json::{json, Value};

const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
const POLICY_TYPES: &[&str] = &["Ingress", "Egress"];

/// `SetDefaults_NetworkPolicy` and `SetDefaults_NetworkPolicyPort`.
fn default_policy(obj: &mut Value) {
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    for (rules, _) in [("ingress", "from"), ("egress", "to")] {
        let rules = spec.get_mut(rules).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten() {
            let ports = rule.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                if port.get("protocol").is_none_or(Value::is_null) {
                    port.insert("protocol".into(), json!("TCP"));
                }
            }
        }
    }
    let has_types = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !has_types {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
}

/// What an update may keep from the stored policy.
#[derive(Default)]
struct Options {
    allow_invalid_label_values: bool,
    allowed_cidrs: Vec<String>,
}

/// `ValidateNetworkPolicyPort`.
fn validate_port(port: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(p) = set(port, "protocol") {
        if !p.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) {
            errs.push(FieldError::not_supported(
                format!("{path}.protocol"),
                p,
                PROTOCOLS,
            ));
        }
    }
    let end_port = set(port, "endPort");
    match set(port, "port") {
        Some(Value::String(name)) => {
            if let Some(e) = end_port {
                errs.push(FieldError::invalid_value(
                    format!("{path}.endPort"),
                    e,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for m in port_name_messages(name) {
                errs.push(FieldError::invalid(format!("{path}.port"), name, m));
            }
        }
        Some(number) => {
            let n = number.as_i64().unwrap_or(0);
            for m in port_num_messages(n) {
                errs.push(FieldError::invalid_value(format!("{path}.port"), number, m));
            }
            if let Some(e) = end_port {
                let end = e.as_i64().unwrap_or(0);
                if end < n {
                    errs.push(FieldError::invalid_value(
                        format!("{path}.endPort"),
                        e,
                        "must be greater than or equal to `port`",
                    ));
                }
                for m in port_num_messages(end) {
                    errs.push(FieldError::invalid_value(format!("{path}.endPort"), e, m));
                }
            }
        }
        None => {
            if let Some(e) = end_port {
                errs.push(FieldError::invalid_value(
                    format!("{path}.endPort"),
                    e,
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
    errs
}

/// `IsValidCIDRForLegacyField` with the CIDRs the old object had allowed.
fn validate_legacy_cidr(path: &str, cidr: &str, opts: &Options) -> Vec<FieldError> {
    if opts.allowed_cidrs.iter().any(|c| c == cidr) {
        return Vec::new();
    }
    validate_cidr_legacy(path, cidr)
}

/// `ValidateIPBlock`.
fn validate_ip_block(block: &Value, path: &str, opts: &Options) -> Vec<FieldError> {
    let cidr = text(block, "cidr");
    if cidr.is_empty() {
        return vec![FieldError::required(format!("{path}.cidr"), "")];
    }
    let mut errs = validate_legacy_cidr(&format!("{path}.cidr"), cidr, opts);
    let Some((net_ip, net_bits)) = parse_cidr_sloppy(cidr) else {
        return errs;
    };
    let network = masked(net_ip, net_bits);
    for (i, e) in items(block, "except").iter().enumerate() {
        let except = e.as_str().unwrap_or("");
        let except_path = format!("{path}.except[{i}]");
        errs.extend(validate_legacy_cidr(&except_path, except, opts));
        let Some((ex_ip, ex_bits)) = parse_cidr_sloppy(except) else {
            continue;
        };
        let ex_network = masked(ex_ip, ex_bits);
        let same_family = ex_network.is_ipv4() == network.is_ipv4();
        let contained = same_family && masked(ex_network, net_bits) == network;
        if !contained || net_bits >= ex_bits {
            errs.push(FieldError::invalid(
                except_path,
                except,
                "must be a strict subset of `cidr`",
            ));
        }
    }
    errs
}

/// `ValidateNetworkPolicyPeer`.
fn validate_peer(peer: &Value, path: &str, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut peers = 0;
    for key in ["podSelector", "namespaceSelector"] {
        if let Some(sel) = set(peer, key) {
            peers += 1;
            errs.extend(validation::validate_label_selector(
                sel,
                &format!("{path}.{key}"),
                opts.allow_invalid_label_values,
            ));
        }
    }
    let ip_block = set(peer, "ipBlock");
    if let Some(b) = ip_block {
        peers += 1;
        errs.extend(validate_ip_block(b, &format!("{path}.ipBlock"), opts));
    }
    if peers == 0 {
        errs.push(FieldError::required(path, "must specify a peer"));
    } else if peers > 1 && ip_block.is_some() {
        errs.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
    errs
}

/// `ValidateNetworkPolicySpec`.
fn validate_spec(obj: &Value, opts: &Options) -> Vec<FieldError> {
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let mut errs = Vec::new();
    if let Some(sel) = set(spec, "podSelector") {
        errs.extend(validation::validate_label_selector(
            sel,
            "spec.podSelector",
            opts.allow_invalid_label_values,
        ));
    }
    for (rules, peers_key) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in items(spec, rules).iter().enumerate() {
            let rule_path = format!("spec.{rules}[{i}]");
            for (j, port) in items(rule, "ports").iter().enumerate() {
                errs.extend(validate_port(port, &format!("{rule_path}.ports[{j}]")));
            }
            for (j, peer) in items(rule, peers_key).iter().enumerate() {
                errs.extend(validate_peer(
                    peer,
                    &format!("{rule_path}.{peers_key}[{j}]"),
                    opts,
                ));
            }
        }
    }
    let types = items(spec, "policyTypes");
    if types.len() > POLICY_TYPES.len() {
        errs.push(FieldError {
            field: "spec.policyTypes".into(),
            kind: FieldErrorKind::Invalid,
            message: "may not specify more than two policyTypes".into(),
            value: Some(super::netvalid::go_typed_strings(
                "networking.PolicyType",
                spec.get("policyTypes"),
            )),
        });
        return errs;
    }
    for (i, t) in types.iter().enumerate() {
        if !t.as_str().is_some_and(|s| POLICY_TYPES.contains(&s)) {
            errs.push(FieldError::not_supported(
                format!("spec.policyTypes[{i}]"),
                t,
                POLICY_TYPES,
            ));
        }
    }
    errs
}

/// Every `ipBlock` CIDR (and `except` entry) of a stored policy.
fn existing_cidrs(old: &Value) -> Vec<String> {
    let null = Value::Null;
    let spec = old.get("spec").unwrap_or(&null);
    let mut out = Vec::new();
    for (rules, peers_key) in [("ingress", "from"), ("egress", "to")] {
        for rule in items(spec, rules) {
            for peer in items(rule, peers_key) {
                if let Some(b) = set(peer, "ipBlock") {
                    out.push(text(b, "cidr").to_string());
                    out.extend(
                        items(b, "except")
                            .iter()
                            .filter_map(Value::as_str)
                            .map(String::from),
                    );
                }
            }
        }
    }
    out
}

/// networking.k8s.io/v1 NetworkPolicy.
pub struct NetworkPolicyStrategy;

impl Strategy for NetworkPolicyStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_policy(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_policy)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_policy(new);
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj, &Options::default())
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // `ValidationOptionsForNetworking`: an invalid stored pod selector keeps its values.
        let allow_invalid_label_values = old
            .pointer("/spec/podSelector")
            .filter(|s| !s.is_null())
            .is_some_and(|s| !validation::validate_label_selector(s, "", false).is_empty());
        // Upstream validates the spec twice on update (`ValidateNetworkPolicy`, then
        // `ValidateNetworkPolicyUpdate` with the old CIDRs allowed); both lists are reported.
        let first = Options {
            allow_invalid_label_values,
            allowed_cidrs: Vec::new(),
        };
        let second = Options {
            allow_invalid_label_values,
            allowed_cidrs: existing_cidrs(old),
        };
        let mut errs = validate_spec(new, &first);
        errs.extend(validate_spec(new, &second));
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Pod-Selector", "string", "", "Selects the pods to which this NetworkPolicy object applies. The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let selector = obj
            .pointer("/spec/podSelector")
            .cloned()
            .unwrap_or_else(|| json!({}));
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(format_label_selector(Some(&selector))),
            age_cell(obj, now),
        ]
    }
}
