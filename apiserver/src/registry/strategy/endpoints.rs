//! Core v1 Endpoints and discovery.k8s.io/v1 EndpointSlices, as kube-apiserver 1.33
//! (`SetDefaults_Endpoints`, discovery/v1 `SetDefaults_EndpointPort`, `ValidateEndpoints`,
//! `ValidateEndpointSlice{Create,Update}`, kubectl's printers).
//!
//! - Endpoint ports default to protocol `TCP`; an EndpointSlice port also to `name: ""`.
//! - Addresses are valid IPs that are not unspecified, loopback or link-local
//!   (`ValidateNonSpecialIP`); a slice's `addressType` decides how its addresses are checked and
//!   is immutable; a slice holds at most 1000 endpoints of at most 100 addresses and 20000 ports.
//! - An EndpointSlice's `metadata.generation` is 1 at create and bumped by any change outside
//!   its metadata.

use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, FieldError, FieldErrorKind};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::net::IpAddr;

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20000;
const MAX_TOPOLOGY_LABELS: usize = 16;
const MAX_ZONE_HINTS: usize = 8;

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn array(v: Option<&Value>) -> Vec<Value> {
    v.and_then(Value::as_array).cloned().unwrap_or_default()
}

/// `field.TooMany(path, actual, max)`.
fn too_many(path: &str, actual: usize, max: usize) -> FieldError {
    FieldError {
        field: path.to_string(),
        kind: FieldErrorKind::TooMany,
        message: format!("must have at most {max} items"),
        value: Some(actual.to_string()),
    }
}

/// `ValidateNonSpecialIP`.
pub fn validate_non_special_ip(ip: &str, path: &str) -> Vec<FieldError> {
    let Ok(addr) = ip.parse::<IpAddr>() else {
        return vec![FieldError::invalid(path, ip, "must be a valid IP address")];
    };
    let mut errs = Vec::new();
    if addr.is_unspecified() {
        errs.push(FieldError::invalid(
            path,
            ip,
            format!("may not be unspecified ({ip})"),
        ));
    }
    if addr.is_loopback() {
        errs.push(FieldError::invalid(
            path,
            ip,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    let (link_local, link_local_multicast) = match addr {
        IpAddr::V4(a) => {
            let o = a.octets();
            (a.is_link_local(), o[0] == 224 && o[1] == 0 && o[2] == 0)
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            (s[0] & 0xffc0 == 0xfe80, s[0] & 0xff0f == 0xff02)
        }
    };
    if link_local {
        errs.push(FieldError::invalid(
            path,
            ip,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if link_local_multicast {
        errs.push(FieldError::invalid(
            path,
            ip,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
    errs
}

fn dns1123_label(v: &str, path: &str, errs: &mut Vec<FieldError>) {
    for m in validation::is_dns1123_label(v) {
        errs.push(FieldError::invalid(path, v, m));
    }
}

fn qualified_name(v: &str, path: &str, errs: &mut Vec<FieldError>) {
    for m in validation::is_qualified_name(v) {
        errs.push(FieldError::invalid(path, v, m));
    }
}

fn node_name(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = v.get("nodeName").and_then(Value::as_str) {
        for m in validation::is_dns1123_subdomain(n) {
            errs.push(FieldError::invalid(path, n, m));
        }
    }
}

fn port_number(port: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let n = port.get("port").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=65535).contains(&n) {
        errs.push(FieldError::invalid_value(
            path,
            &json!(n),
            "must be between 1 and 65535, inclusive",
        ));
    }
}

fn protocol(port: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match port.get("protocol").filter(|p| !p.is_null()) {
        None => errs.push(FieldError::required(path, "")),
        Some(p) if p.as_str() == Some("") => errs.push(FieldError::required(path, "")),
        Some(p) if !p.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) => {
            errs.push(FieldError::not_supported(path, p, PROTOCOLS))
        }
        Some(_) => {}
    }
}

/// `SetDefaults_Endpoints`: ports default to TCP.
fn default_endpoints(obj: &mut Value) {
    let subsets = obj.get_mut("subsets").and_then(Value::as_array_mut);
    for ss in subsets.into_iter().flatten() {
        let ports = ss.get_mut("ports").and_then(Value::as_array_mut);
        for p in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
            super::common::default_field(p, "protocol", json!("TCP"));
        }
    }
}

fn validate_endpoint_address(addr: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let ip = text(addr, "ip");
    if ip.parse::<IpAddr>().is_err() {
        errs.push(FieldError::invalid(
            format!("{path}.ip"),
            ip,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
    let host = text(addr, "hostname");
    if !host.is_empty() {
        dns1123_label(host, &format!("{path}.hostname"), errs);
    }
    node_name(addr, &format!("{path}.nodeName"), errs);
    errs.extend(validate_non_special_ip(ip, &format!("{path}.ip")));
}

/// `ValidateEndpoints`' subset rules.
fn validate_endpoints(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ss) in array(obj.get("subsets")).iter().enumerate() {
        let p = format!("subsets[{i}]");
        let addrs = array(ss.get("addresses"));
        let not_ready = array(ss.get("notReadyAddresses"));
        if addrs.is_empty() && not_ready.is_empty() {
            errs.push(FieldError::required(
                &p,
                "must specify `addresses` or `notReadyAddresses`",
            ));
        }
        for (j, a) in addrs.iter().enumerate() {
            validate_endpoint_address(a, &format!("{p}.addresses[{j}]"), &mut errs);
        }
        for (j, a) in not_ready.iter().enumerate() {
            validate_endpoint_address(a, &format!("{p}.notReadyAddresses[{j}]"), &mut errs);
        }
        let ports = array(ss.get("ports"));
        for (j, port) in ports.iter().enumerate() {
            let pp = format!("{p}.ports[{j}]");
            let name = text(port, "name");
            if ports.len() > 1 && name.is_empty() {
                errs.push(FieldError::required(format!("{pp}.name"), ""));
            } else if !name.is_empty() {
                dns1123_label(name, &format!("{pp}.name"), &mut errs);
            }
            port_number(port, &format!("{pp}.port"), &mut errs);
            protocol(port, &format!("{pp}.protocol"), &mut errs);
            if let Some(ap) = port.get("appProtocol").and_then(Value::as_str) {
                qualified_name(ap, &format!("{pp}.appProtocol"), &mut errs);
            }
        }
    }
    errs
}

/// kubectl's `formatEndpoints`: up to three `ip:port` (or bare IPs for port-less subsets),
/// then ` + N more...`; `<none>` without subsets.
fn endpoints_cell(obj: &Value) -> String {
    let subsets = array(obj.get("subsets"));
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let (mut list, mut more, mut count) = (Vec::new(), false, 0);
    for ss in &subsets {
        let addrs = array(ss.get("addresses"));
        let ports = array(ss.get("ports"));
        if ports.is_empty() {
            count += addrs.len();
            for a in &addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(text(a, "ip").to_string());
            }
            continue;
        }
        for port in &ports {
            count += addrs.len();
            let n = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            for a in &addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = text(a, "ip");
                list.push(if ip.contains(':') {
                    format!("[{ip}]:{n}")
                } else {
                    format!("{ip}:{n}")
                });
            }
        }
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", count - MAX)
    } else {
        ret
    }
}

/// core v1 Endpoints.
pub struct EndpointsStrategy;

impl Strategy for EndpointsStrategy {
    fn deprecation_warning(&self) -> Option<&'static str> {
        Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_endpoints(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_endpoints)
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_endpoints(new);
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_endpoints(obj)
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_endpoints(new)
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Endpoints",
                "string",
                "",
                "Endpoints is the list of all the endpoints of the service.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            json!(endpoints_cell(obj)),
            age_cell(obj, now),
        ]
    }
}

/// discovery/v1 `SetDefaults_EndpointPort`.
fn default_slice(obj: &mut Value) {
    let ports = obj.get_mut("ports").and_then(Value::as_array_mut);
    for p in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
        super::common::default_field(p, "name", json!(""));
        super::common::default_field(p, "protocol", json!("TCP"));
    }
}

/// `IsFullyQualifiedDomainName`.
fn fqdn(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let msgs = validation::is_dns1123_subdomain(trimmed);
    if !msgs.is_empty() {
        for m in msgs {
            errs.push(FieldError::invalid(path, name, m));
        }
        return;
    }
    if trimmed.split('.').count() < 2 {
        errs.push(FieldError::invalid(
            path,
            name,
            "should be a domain with at least two segments separated by dots",
        ));
    }
}

fn validate_slice_address(addr_type: &str, address: &Value, path: &str) -> Vec<FieldError> {
    let a = address.as_str().unwrap_or("");
    let mut errs = Vec::new();
    match addr_type {
        "IPv4" => match a.parse::<std::net::Ipv4Addr>() {
            Ok(_) => errs.extend(validate_non_special_ip(a, path)),
            Err(_) => errs.push(FieldError::invalid(path, a, "must be a valid IPv4 address")),
        },
        "IPv6" => match a.parse::<std::net::Ipv6Addr>() {
            Ok(_) => errs.extend(validate_non_special_ip(a, path)),
            Err(_) => errs.push(FieldError::invalid(path, a, "must be a valid IPv6 address")),
        },
        "FQDN" => fqdn(a, path, &mut errs),
        _ => {}
    }
    errs
}

fn validate_slice_endpoint(ep: &Value, addr_type: &str, path: &str, errs: &mut Vec<FieldError>) {
    let ap = format!("{path}.addresses");
    let addrs = array(ep.get("addresses"));
    if addrs.is_empty() {
        errs.push(FieldError::required(&ap, "must contain at least 1 address"));
    } else if addrs.len() > MAX_ADDRESSES {
        errs.push(too_many(&ap, addrs.len(), MAX_ADDRESSES));
    }
    for (j, a) in addrs.iter().take(MAX_ADDRESSES).enumerate() {
        errs.extend(validate_slice_address(addr_type, a, &format!("{ap}[{j}]")));
    }
    node_name(ep, &format!("{path}.nodeName"), errs);
    let tp = format!("{path}.deprecatedTopology");
    if let Some(topo) = ep.get("deprecatedTopology").filter(|v| !v.is_null()) {
        let n = topo.as_object().map_or(0, |m| m.len());
        if n > MAX_TOPOLOGY_LABELS {
            errs.push(too_many(&tp, n, MAX_TOPOLOGY_LABELS));
        }
        errs.extend(validation::validate_labels(topo, &tp));
    }
    if let Some(h) = ep.get("hostname").and_then(Value::as_str) {
        dns1123_label(h, &format!("{path}.hostname"), errs);
    }
    if let Some(zones) = ep.pointer("/hints/forZones").and_then(Value::as_array) {
        let zp = format!("{path}.hints.forZones");
        if zones.len() > MAX_ZONE_HINTS {
            errs.push(too_many(&zp, zones.len(), MAX_ZONE_HINTS));
            return;
        }
        let mut seen = BTreeSet::new();
        for (k, z) in zones.iter().enumerate() {
            let np = format!("{zp}[{k}].name");
            let name = text(z, "name");
            if !seen.insert(name.to_string()) {
                errs.push(FieldError::duplicate(&np, &json!(name)));
            }
            for m in validation::is_valid_label_value(name) {
                errs.push(FieldError::invalid(&np, name, m));
            }
        }
    }
}

/// `ValidateEndpointSlice` (object meta is validated generically).
fn validate_slice(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let addr_type = match obj.get("addressType").filter(|v| !v.is_null()) {
        None => {
            errs.push(FieldError::required("addressType", ""));
            ""
        }
        Some(t) if t.as_str() == Some("") => {
            errs.push(FieldError::required("addressType", ""));
            ""
        }
        Some(t) => {
            let s = t.as_str().unwrap_or("");
            if !ADDRESS_TYPES.contains(&s) {
                errs.push(FieldError::not_supported("addressType", t, ADDRESS_TYPES));
            }
            s
        }
    };
    let endpoints = array(obj.get("endpoints"));
    if endpoints.len() > MAX_ENDPOINTS {
        errs.push(too_many("endpoints", endpoints.len(), MAX_ENDPOINTS));
    } else {
        for (i, ep) in endpoints.iter().enumerate() {
            validate_slice_endpoint(ep, addr_type, &format!("endpoints[{i}]"), &mut errs);
        }
    }
    let ports = array(obj.get("ports"));
    if ports.len() > MAX_PORTS {
        errs.push(too_many("ports", ports.len(), MAX_PORTS));
        return errs;
    }
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = format!("ports[{i}]");
        let name = text(port, "name");
        if !name.is_empty() {
            dns1123_label(name, &format!("{p}.name"), &mut errs);
        }
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(format!("{p}.name"), &json!(name)));
        }
        match port.get("protocol").filter(|v| !v.is_null()) {
            None => errs.push(FieldError::required(format!("{p}.protocol"), "")),
            Some(pr) if !pr.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) => errs.push(
                FieldError::not_supported(format!("{p}.protocol"), pr, PROTOCOLS),
            ),
            Some(_) => {}
        }
        if let Some(ap) = port.get("appProtocol").and_then(Value::as_str) {
            qualified_name(ap, &format!("{p}.appProtocol"), &mut errs);
        }
    }
    errs
}

/// kubectl's `listWithMoreString`: up to three items, ` + N more...`, `<unset>` when empty.
fn list_with_more(items: Vec<String>) -> String {
    const MAX: usize = 3;
    let count = items.len();
    let ret = items.into_iter().take(MAX).collect::<Vec<_>>().join(",");
    if count > MAX {
        format!("{ret} + {} more...", count - MAX)
    } else if ret.is_empty() {
        "<unset>".to_string()
    } else {
        ret
    }
}

/// discovery.k8s.io/v1 EndpointSlice.
pub struct EndpointSliceStrategy;

impl Strategy for EndpointSliceStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        let body = |o: &Value| {
            let mut m = o.as_object().cloned().unwrap_or_default();
            m.remove("metadata");
            Value::Object(m)
        };
        !super::common::semantically_equal(Some(&body(new)), Some(&body(old)))
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_slice(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_slice)
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_slice(new);
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_slice(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_slice(new);
        if new.get("addressType") != old.get("addressType") {
            errs.push(FieldError::invalid_value(
                "addressType",
                new.get("addressType").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("AddressType", "string", "", "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type.", 0),
            column("Ports", "string", "", "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list.", 0),
            column("Endpoints", "string", "", "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.", 0),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let ports = array(obj.get("ports"))
            .iter()
            .map(|p| match p.get("port").and_then(Value::as_i64) {
                Some(n) => n.to_string(),
                None => match p.get("name").and_then(Value::as_str) {
                    Some(n) => n.to_string(),
                    None => "*".to_string(),
                },
            })
            .collect();
        let addrs = array(obj.get("endpoints"))
            .iter()
            .flat_map(|e| array(e.get("addresses")))
            .map(|a| a.as_str().unwrap_or("").to_string())
            .collect();
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            json!(text(obj, "addressType")),
            json!(list_with_more(ports)),
            json!(list_with_more(addrs)),
            age_cell(obj, now),
        ]
    }
}
