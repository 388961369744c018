//! The string formats the apiserver validates in CRD schemas (`apiextensions-apiserver`
//! `validation/formats.go` at 1.33, checked by kube-openapi's `strfmt.Default` registry).
//! Names are normalized as go-openapi does (`date-time` is `datetime`).
//!
//! Each check follows the Go function upstream registers: `net.ParseIP` for ipv4/ipv6,
//! `net.ParseCIDR`, `net.ParseMAC`, `url.ParseRequestURI` for uri, `net/mail.ParseAddress` for
//! email (the common address forms), strfmt's regular expressions for hostname and uuids,
//! govalidator's for the rest, `time.ParseDuration` and strfmt's duration grammar,
//! `resource.ParseQuantity`.

use regex::Regex;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "quantity",
];

fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// Whether the apiserver validates `format` on strings (the others are ignored).
pub(crate) fn is_supported(format: &str) -> bool {
    SUPPORTED.contains(&normalize(format).as_str())
}

fn re(cell: &'static OnceLock<Option<Regex>>, src: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(src).ok()).as_ref()
}

macro_rules! matches_re {
    ($src:expr, $s:expr) => {{
        static CELL: OnceLock<Option<Regex>> = OnceLock::new();
        re(&CELL, $src).is_some_and(|r| r.is_match($s))
    }};
}

/// Whether `s` is valid for the supported `format`.
pub(crate) fn validates(format: &str, s: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => is_hostname(s),
        "ipv4" => is_ipv4(s),
        "ipv6" => is_ipv6(s),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => matches_re!(
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
            s
        ),
        "uuid3" => matches_re!(
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
            s
        ),
        "uuid4" => matches_re!(
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
            s
        ),
        "uuid5" => matches_re!(
            r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
            s
        ),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "ssn" => s.len() == 11 && matches_re!(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$", s),
        "hexcolor" => matches_re!(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", s),
        "rgbcolor" => matches_re!(
            r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
            s
        ),
        "byte" => matches_re!(
            r"^(?:[A-Za-z0-9+\\/]{4})*(?:[A-Za-z0-9+\\/]{2}==|[A-Za-z0-9+\\/]{3}=|[A-Za-z0-9+\\/]{4})$",
            s
        ),
        "password" => true,
        "date" => is_date(s),
        "datetime" => is_date_time(s),
        "duration" => is_duration(s),
        "quantity" => is_quantity(s),
        _ => true,
    }
}

/// strfmt `IsHostname`.
fn is_hostname(s: &str) -> bool {
    matches_re!(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z0-9\p{S}\p{L}])(-?[a-zA-Z0-9\p{S}\p{L}]){1,62})$",
        s
    ) && s.len() <= 255
        && s.split('.').all(|p| p.len() <= 63)
}

/// `net.ParseIP` (leading zeros refused, as Go since 1.17).
fn parse_ip(s: &str) -> bool {
    s.parse::<Ipv4Addr>().is_ok() || s.parse::<Ipv6Addr>().is_ok()
}

/// govalidator `IsIPv4`: parses as an IP and contains a dot.
fn is_ipv4(s: &str) -> bool {
    parse_ip(s) && s.contains('.')
}

/// govalidator `IsIPv6`: parses as an IP and contains a colon.
fn is_ipv6(s: &str) -> bool {
    parse_ip(s) && s.contains(':')
}

/// `net.ParseCIDR`.
fn is_cidr(s: &str) -> bool {
    let Some((ip, mask)) = s.split_once('/') else {
        return false;
    };
    let bits = if ip.parse::<Ipv4Addr>().is_ok() {
        32
    } else if ip.parse::<Ipv6Addr>().is_ok() {
        128
    } else {
        return false;
    };
    !mask.is_empty()
        && mask.len() <= 10
        && mask.bytes().all(|b| b.is_ascii_digit())
        && mask.parse::<u32>().is_ok_and(|n| n <= bits)
}

/// `net.ParseMAC`: EUI-48, EUI-64 or 20-octet addresses with `:`/`-` per octet or `.` per
/// four hex digits.
fn is_mac(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    let octets_ok = |n: usize| n == 6 || n == 8 || n == 20;
    if s.len() < 14 {
        return false;
    }
    let b = s.as_bytes();
    if b[2] == b':' || b[2] == b'-' {
        let sep = b[2] as char;
        let parts: Vec<&str> = s.split(sep).collect();
        octets_ok(parts.len()) && parts.iter().all(|p| hex(p, 2))
    } else if b[4] == b'.' {
        let parts: Vec<&str> = s.split('.').collect();
        octets_ok(parts.len() * 2) && parts.iter().all(|p| hex(p, 4))
    } else {
        false
    }
}

/// `url.ParseRequestURI` succeeds: an absolute path, or a scheme followed by an authority and
/// path or by opaque text; no control characters.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    let scheme_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return false;
    }
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    if let Some(after) = rest.strip_prefix("//") {
        let authority = after.split('/').next().unwrap_or("");
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        return !host.contains(' ') && !host.contains('%') || host.starts_with('[');
    }
    true
}

/// `net/mail.ParseAddress` of the usual forms: `local@domain` or `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let addr = match (s.find('<'), s.ends_with('>')) {
        (Some(i), true) => &s[i + 1..s.len() - 1],
        _ => s.trim(),
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    let atext = |c: char| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c);
    let dot_atom =
        |p: &str| !p.is_empty() && p.split('.').all(|a| !a.is_empty() && a.chars().all(atext));
    let local_ok =
        dot_atom(local) || (local.len() >= 2 && local.starts_with('"') && local.ends_with('"'));
    let domain_ok = dot_atom(domain) || (domain.starts_with('[') && domain.ends_with(']'));
    local_ok && domain_ok
}

fn isbn_digits(s: &str) -> String {
    s.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

/// govalidator `IsISBN10`.
fn is_isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 10 || !b[..9].iter().all(u8::is_ascii_digit) {
        return false;
    }
    let last = match b[9] {
        b'X' => 10,
        c if c.is_ascii_digit() => u32::from(c - b'0'),
        _ => return false,
    };
    let sum: u32 = b[..9]
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u32 + 1) * u32::from(c - b'0'))
        .sum::<u32>()
        + 10 * last;
    sum.is_multiple_of(11)
}

/// govalidator `IsISBN13`.
fn is_isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = b[..12]
        .iter()
        .enumerate()
        .map(|(i, c)| u32::from(c - b'0') * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    (10 - sum % 10) % 10 == u32::from(b[12] - b'0')
}

/// govalidator `IsCreditCard`: non-digits removed, a known issuer's pattern, then Luhn.
fn is_credit_card(s: &str) -> bool {
    let d: String = s.chars().filter(char::is_ascii_digit).collect();
    if !matches_re!(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$",
        &d
    ) {
        return false;
    }
    let mut sum = 0;
    for (i, c) in d.bytes().rev().enumerate() {
        let mut n = u32::from(c - b'0');
        if i % 2 == 1 {
            n *= 2;
            if n > 9 {
                n -= 9;
            }
        }
        sum += n;
    }
    sum.is_multiple_of(10)
}

/// `time.Parse("2006-01-02", s)`.
pub(crate) fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if !s.is_ascii() || b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let p = &s[r];
        p.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| p.parse().ok())
            .flatten()
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// strfmt `IsDateTime`: an RFC 3339 full date, `T`, then `hh:mm:ss[.frac]` and a zone.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(rx) = re(
        &CELL,
        r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$",
    ) else {
        return false;
    };
    let Some(c) = rx.captures(parts[1]) else {
        return false;
    };
    let g = |i| c.get(i).map_or("", |m| m.as_str());
    g(1) <= "23" && g(2) <= "59" && g(3) <= "59"
}

/// strfmt `ParseDuration`: Go's `time.ParseDuration`, else any `<n> <unit>` with a known unit.
fn is_duration(s: &str) -> bool {
    if go_parse_duration(s) {
        return true;
    }
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(rx) = re(&CELL, r"((\d+)\s*([A-Za-zµ]+))") else {
        return false;
    };
    const UNITS: &[&str] = &[
        "ns",
        "nanosecond",
        "nanoseconds",
        "us",
        "µs",
        "microsecond",
        "microseconds",
        "ms",
        "millisecond",
        "milliseconds",
        "s",
        "sec",
        "secs",
        "second",
        "seconds",
        "m",
        "min",
        "mins",
        "minute",
        "minutes",
        "h",
        "hr",
        "hour",
        "hours",
        "d",
        "day",
        "days",
        "w",
        "wk",
        "week",
        "weeks",
    ];
    for c in rx.captures_iter(s) {
        // strconv.Atoi of the factor failing makes the whole parse fail.
        if c.get(2).is_some_and(|m| m.as_str().parse::<i64>().is_err()) {
            return false;
        }
        let unit = c
            .get(3)
            .map_or(String::new(), |m| m.as_str().trim().to_lowercase());
        if UNITS.contains(&unit.as_str()) {
            return true;
        }
    }
    false
}

/// `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
fn go_parse_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let int_digits = i - start;
        let mut frac_digits = 0;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let f = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            frac_digits = i - f;
        }
        if int_digits == 0 && frac_digits == 0 {
            return false;
        }
        let u = i;
        while i < b.len() && b[i] != b'.' && !b[i].is_ascii_digit() {
            i += 1;
        }
        match &s[u..i] {
            "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h" => {}
            _ => return false,
        }
    }
    true
}

/// `resource.ParseQuantity`.
pub(crate) fn is_quantity(s: &str) -> bool {
    matches_re!(
        r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$",
        s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_follow_go() {
        assert!(validates("date-time", "2024-01-02T03:04:05Z"));
        assert!(validates("date-time", "2024-01-02T03:04:05.123+01:00"));
        assert!(!validates("date-time", "2024-01-02 03:04:05"));
        assert!(!validates("date", "2024-02-30"));
        assert!(validates("date", "2024-02-29"));
        assert!(validates("duration", "1h30m"));
        assert!(validates("duration", "3 days"));
        assert!(!validates("duration", "soon"));
        assert!(validates("ipv4", "10.0.0.1"));
        assert!(!validates("ipv4", "010.0.0.1"));
        assert!(!validates("ipv4", "::1"));
        assert!(validates("ipv6", "::1"));
        assert!(validates("cidr", "10.0.0.0/8"));
        assert!(!validates("cidr", "10.0.0.0/33"));
        assert!(validates("mac", "00:00:5e:00:53:01"));
        assert!(validates("mac", "0000.5e00.5301"));
        assert!(!validates("mac", "00:00:5e:00:53"));
        assert!(validates("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(!validates("uuid", "123e4567"));
        assert!(validates("hostname", "example.com"));
        assert!(!validates("hostname", "-bad.com"));
        assert!(validates("uri", "https://example.com/x"));
        assert!(!validates("uri", "example.com"));
        assert!(validates("email", "a@example.com"));
        assert!(!validates("email", "not-an-email"));
        assert!(validates("byte", "aGVsbG8="));
        assert!(!validates("byte", "hello"));
        assert!(validates("quantity", "10Gi"));
        assert!(!validates("quantity", "10GB"));
        assert!(is_supported("date-time") && !is_supported("int-or-string"));
    }
}
