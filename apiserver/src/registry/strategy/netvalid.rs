//! Network value rules shared by the networking and storage kinds, with apimachinery's wording:
//! IP addresses and CIDRs (`IsValidIP`, `IsValidCIDR` and their legacy, sloppy forms), port
//! numbers and names (`IsValidPortNum`, `IsValidPortName`) and wildcard DNS subdomains
//! (`IsWildcardDNS1123Subdomain`).
//!
//! Parsing follows Go: the sloppy parsers (`netutils.ParseIPSloppy`, `ParseCIDRSloppy`) accept
//! IPv4 octets with leading zeros; the strict checks (`netip.ParseAddr`/`ParsePrefix`) refuse
//! them, refuse IPv4-mapped IPv6 addresses and, for CIDRs, bits beyond the prefix length.
//! Kubernetes 1.33 validates legacy fields (NetworkPolicy `ipBlock`, Ingress status IPs) sloppily
//! (`StrictIPCIDRValidation` is alpha and off) and new fields (IPAddress names, ServiceCIDR
//! `cidrs`) strictly, in canonical form.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use api::validation::FieldError;
use serde_json::Value;

/// The string at `key` of `v`, `""` when absent or not a string.
pub fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The array at `key` of `v`, empty when absent or not an array.
pub fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The value at `key` of `v` unless absent or null (a Go pointer that is set).
pub fn set<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// Go's `%#v` of a `[]string` (`[]string{"a", "b"}`), `[]string(nil)` when absent.
pub fn go_strings(v: Option<&Value>) -> String {
    go_typed_strings("string", v)
}

/// Go's `%#v` of a slice of a string type (`[]networking.PolicyType{"Ingress"}`).
pub fn go_typed_strings(ty: &str, v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        Some(a) => {
            let q: Vec<String> = a
                .iter()
                .map(|s| api::validation::go_quote(s.as_str().unwrap_or("")))
                .collect();
            format!("[]{ty}{{{}}}", q.join(", "))
        }
        None => format!("[]{ty}(nil)"),
    }
}

const INVALID_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
const INVALID_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// `netutils.ParseIPSloppy`: IPv4 (octets may have leading zeros) or IPv6.
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if s.contains(':') {
        return s.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (o, p) in octets.iter_mut().zip(&parts) {
        if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let trimmed = p.trim_start_matches('0');
        if trimmed.len() > 3 {
            return None;
        }
        *o = if trimmed.is_empty() {
            0
        } else {
            trimmed.parse().ok()?
        };
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// Whether `s` is an IPv4 address in Go's strict form (no leading zeros) or any IPv6 address:
/// what `netip.ParseAddr` accepts.
fn parses_strictly(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok()
}

fn is_4in6(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// Go's `net.IP.String()`: an IPv4-mapped IPv6 address prints as IPv4.
fn go_ip_string(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        v4 => v4.to_string(),
    }
}

/// `IsValidIPForLegacyField` without strict validation: anything `ParseIPSloppy` accepts.
pub fn validate_ip_legacy(path: &str, value: &str) -> Vec<FieldError> {
    match parse_ip_sloppy(value) {
        Some(_) => Vec::new(),
        None => vec![FieldError::invalid(path, value, INVALID_IP)],
    }
}

/// The detail messages of `IsValidIP` (current rules: strict and canonical).
pub fn ip_messages(value: &str) -> Vec<String> {
    let Some(ip) = parse_ip_sloppy(value) else {
        return vec![INVALID_IP.to_string()];
    };
    let mut msgs = Vec::new();
    if !parses_strictly(value) {
        msgs.push("must not have leading 0s".to_string());
    }
    if is_4in6(ip) {
        msgs.push("must not be an IPv4-mapped IPv6 address".to_string());
    }
    let canonical = go_ip_string(ip);
    if msgs.is_empty() && value != canonical {
        msgs.push(format!("must be in canonical form (\"{canonical}\")"));
    }
    msgs
}

/// A CIDR as `ParseCIDRSloppy` reads it: the address as written and the prefix length.
pub fn parse_cidr_sloppy(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, bits) = s.split_once('/')?;
    let ip = parse_ip_sloppy(ip)?;
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let bits: u8 = bits.parse().ok()?;
    let max = match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    };
    (bits <= max).then_some((ip, bits))
}

/// The network address of `ip/bits` (the bits beyond the prefix cleared).
pub fn masked(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

/// Go's `net.IPNet.String()` of a sloppily parsed CIDR: the network address and prefix length
/// (an IPv4-mapped network prints as IPv4 with the prefix shortened by 96).
fn go_ipnet_string(ip: IpAddr, bits: u8) -> String {
    match masked(ip, bits) {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() && bits >= 96 => {
            format!("{}/{}", go_ip_string(IpAddr::V6(v6)), bits - 96)
        }
        net => format!("{net}/{bits}"),
    }
}

/// `IsValidCIDRForLegacyField` without strict validation.
pub fn validate_cidr_legacy(path: &str, value: &str) -> Vec<FieldError> {
    match parse_cidr_sloppy(value) {
        Some(_) => Vec::new(),
        None => vec![FieldError::invalid(path, value, INVALID_CIDR)],
    }
}

/// `IsValidCIDR`: strict and canonical.
pub fn validate_cidr(path: &str, value: &str) -> Vec<FieldError> {
    let Some((ip, bits)) = parse_cidr_sloppy(value) else {
        return vec![FieldError::invalid(path, value, INVALID_CIDR)];
    };
    let strict = value
        .split_once('/')
        .is_some_and(|(a, b)| parses_strictly(a) && (b == "0" || !b.starts_with('0')));
    let msg = if !strict {
        Some("must not have leading 0s in IP or prefix length".to_string())
    } else if is_4in6(ip) {
        Some("must not have an IPv4-mapped IPv6 address".to_string())
    } else if masked(ip, bits) != ip {
        Some("must not have bits set beyond the prefix length".to_string())
    } else {
        let canonical = go_ipnet_string(ip, bits);
        (value != canonical).then(|| format!("must be in canonical form (\"{canonical}\")"))
    };
    msg.map(|m| FieldError::invalid(path, value, m))
        .into_iter()
        .collect()
}

/// `netutils.IPFamilyOfCIDRString`: 4, 6, or `None` when unparsable (an IPv4-mapped address
/// counts as IPv4, as `net.IP.To4` sees it).
pub fn cidr_family(value: &str) -> Option<u8> {
    let (ip, _) = parse_cidr_sloppy(value)?;
    Some(match ip {
        IpAddr::V4(_) => 4,
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => 4,
        IpAddr::V6(_) => 6,
    })
}

/// `IsValidPortNum`.
pub fn port_num_messages(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".to_string()]
    }
}

/// `IsValidPortName`: an IANA_SVC_NAME (at most 15 characters, a-z, 0-9 and `-`, at least one
/// letter, no `--`, no leading or trailing `-`).
pub fn port_name_messages(name: &str) -> Vec<String> {
    let mut msgs = Vec::new();
    if name.len() > 15 {
        msgs.push("must be no more than 15 characters".to_string());
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        msgs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !name.bytes().any(|c| c.is_ascii_lowercase()) {
        msgs.push("must contain at least one letter (a-z)".to_string());
    }
    if name.contains("--") {
        msgs.push("must not contain consecutive hyphens".to_string());
    }
    if name.starts_with('-') || name.ends_with('-') {
        msgs.push("must not begin or end with a hyphen".to_string());
    }
    msgs
}

const WILDCARD_DNS1123_MSG: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `IsWildcardDNS1123Subdomain`: `*.` then a DNS-1123 subdomain, at most 253 characters.
pub fn wildcard_dns1123_messages(s: &str) -> Vec<String> {
    let mut msgs = Vec::new();
    if s.len() > api::validation::DNS1123_SUBDOMAIN_MAX_LENGTH {
        msgs.push(format!(
            "must be no more than {} characters",
            api::validation::DNS1123_SUBDOMAIN_MAX_LENGTH
        ));
    }
    if !s.strip_prefix("*.").is_some_and(rest_shape_ok) {
        msgs.push(WILDCARD_DNS1123_MSG.to_string());
    }
    msgs
}

/// The regex part after `*.` (length aside: the whole value's length is checked once).
fn rest_shape_ok(rest: &str) -> bool {
    let label = |l: &str| {
        let b = l.as_bytes();
        let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && alnum(b[0])
            && alnum(b[b.len() - 1])
            && b.iter().all(|&c| alnum(c) || c == b'-')
    };
    !rest.is_empty() && rest.split('.').all(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(errs: Vec<FieldError>) -> Vec<String> {
        errs.into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn ips_parse_as_go_does() {
        assert!(parse_ip_sloppy("010.001.2.3").is_some());
        assert!(parse_ip_sloppy("1.2.3").is_none());
        assert!(parse_ip_sloppy("256.1.1.1").is_none());
        assert!(parse_ip_sloppy("::ffff:1.2.3.4").is_some());
        assert!(ip_messages("10.0.0.1").is_empty());
        assert!(ip_messages("2001:db8::1").is_empty());
        assert_eq!(ip_messages("010.0.0.1"), ["must not have leading 0s"]);
        assert_eq!(
            ip_messages("::ffff:1.2.3.4"),
            ["must not be an IPv4-mapped IPv6 address"]
        );
        assert_eq!(
            ip_messages("2001:DB8::1"),
            ["must be in canonical form (\"2001:db8::1\")"]
        );
        assert_eq!(ip_messages("x"), [INVALID_IP]);
    }

    #[test]
    fn cidrs_strict_and_legacy() {
        assert!(validate_cidr("c", "10.96.0.0/12").is_empty());
        assert!(validate_cidr("c", "fd00::/108").is_empty());
        assert_eq!(
            msgs(validate_cidr("c", "10.96.0.1/12")),
            ["c: Invalid value: \"10.96.0.1/12\": must not have bits set beyond the prefix length"]
        );
        assert_eq!(
            msgs(validate_cidr("c", "10.96.0.0/012")),
            ["c: Invalid value: \"10.96.0.0/012\": must not have leading 0s in IP or prefix length"]
        );
        assert_eq!(
            msgs(validate_cidr("c", "FD00::/108")),
            ["c: Invalid value: \"FD00::/108\": must be in canonical form (\"fd00::/108\")"]
        );
        assert!(validate_cidr_legacy("c", "10.0.0.1/8").is_empty());
        assert_eq!(validate_cidr_legacy("c", "10.0.0.0/33").len(), 1);
        assert_eq!(validate_cidr_legacy("c", "10.0.0.0").len(), 1);
        assert_eq!(cidr_family("10.0.0.0/8"), Some(4));
        assert_eq!(cidr_family("fd00::/8"), Some(6));
    }

    #[test]
    fn ports_and_wildcards() {
        assert!(port_name_messages("http").is_empty());
        assert_eq!(port_name_messages("Http").len(), 1);
        assert_eq!(
            port_name_messages("80"),
            ["must contain at least one letter (a-z)"]
        );
        assert_eq!(
            port_name_messages("a--b"),
            ["must not contain consecutive hyphens"]
        );
        assert!(port_num_messages(80).is_empty());
        assert_eq!(port_num_messages(0).len(), 1);
        assert!(wildcard_dns1123_messages("*.example.com").is_empty());
        assert_eq!(wildcard_dns1123_messages("*example.com").len(), 1);
        assert_eq!(wildcard_dns1123_messages("a.*.com").len(), 1);
    }
}
