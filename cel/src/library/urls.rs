//! Kubernetes' URLs library (`library/urls.go`): `url`, `isURL` and the `URL` accessors, with Go's
//! `url.ParseRequestURI` rules: an absolute URI or an absolute path, no fragment.

use super::library_type;
use crate::env::{boolean, charge, owned, str_arg, typed, CelResult};
use cel::common::types::{CelList, CelMap, CelMapKey, CelString, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Url {
    scheme: String,
    host: String,
    path: String,
    query: String,
    opaque: bool,
}

library_type!(Url, URL_TYPE, "kubernetes.URL");

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let s = || STRING_TYPE.to_owned();
    let u = || URL_TYPE.to_owned();
    env.add_overload("url", "string_to_url", vec![s()], url)?;
    env.add_overload("isURL", "is_url_string", vec![s()], is_url)?;
    env.add_member_overload("getScheme", "url_get_scheme", u(), vec![], get_scheme)?;
    env.add_member_overload("getHost", "url_get_host", u(), vec![], get_host)?;
    env.add_member_overload("getHostname", "url_get_hostname", u(), vec![], get_hostname)?;
    env.add_member_overload("getPort", "url_get_port", u(), vec![], get_port)?;
    env.add_member_overload(
        "getEscapedPath",
        "url_get_escaped_path",
        u(),
        vec![],
        get_escaped_path,
    )?;
    env.add_member_overload("getQuery", "url_get_query", u(), vec![], get_query)?;
    env.add_overload("string", "url_to_string", vec![u()], to_string)?;
    Ok(())
}

fn valid_scheme(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic())
        && c.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `url.ParseRequestURI`, reduced to the parts the library exposes. The error text follows Go's.
pub fn parse(raw: &str) -> Result<Url, String> {
    let err = |why: &str| format!("parse {}: {why}", crate::errors::go_quote(raw));
    if raw.chars().any(|c| c.is_control() || c == ' ') {
        return Err(err("invalid character in URL"));
    }
    let (rest, query) = match raw.split_once('?') {
        Some((r, q)) => (r, q.to_owned()),
        None => (raw, String::new()),
    };
    let mut url = Url {
        scheme: String::new(),
        host: String::new(),
        path: String::new(),
        query,
        opaque: false,
    };
    let rest = if rest.starts_with('/') {
        rest
    } else {
        match rest.split_once(':') {
            Some((scheme, tail)) if valid_scheme(scheme) => {
                url.scheme = scheme.to_ascii_lowercase();
                if !tail.starts_with('/') {
                    url.opaque = true;
                    url.path = tail.to_owned();
                    return Ok(url);
                }
                tail
            }
            Some(("", _)) => return Err(err("missing protocol scheme")),
            _ => return Err(err("invalid URI for request")),
        }
    };
    if let Some(auth_and_path) = rest.strip_prefix("//") {
        let (authority, path) = match auth_and_path.find('/') {
            Some(i) => auth_and_path.split_at(i),
            None => (auth_and_path, ""),
        };
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        validate_host(host).map_err(|e| err(&e))?;
        url.host = host.to_owned();
        url.path = path.to_owned();
    } else {
        url.path = rest.to_owned();
    }
    Ok(url)
}

fn validate_host(host: &str) -> Result<(), String> {
    let (name, port) = split_host_port(host);
    if let Some(port) = port {
        if !port.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!(
                "invalid port {} after host",
                crate::errors::go_quote(&format!(":{port}"))
            ));
        }
    }
    if name.starts_with('[') {
        if !name.ends_with(']') {
            return Err("missing ']' in host".to_owned());
        }
        return Ok(());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=%".contains(*c)) && c.is_ascii())
    {
        return Err(format!(
            "invalid character {} in host name",
            crate::errors::go_quote(&bad.to_string())
        ));
    }
    Ok(())
}

/// The host name and the port, as Go's `URL.Hostname` / `URL.Port`.
fn split_host_port(host: &str) -> (&str, Option<&str>) {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(i) => {
                let rest = &host[i + 1..];
                (&host[..=i], rest.strip_prefix(':'))
            }
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (host, None),
    }
}

fn this<'a>(args: &'a [CowVal<'_, '_>]) -> Result<&'a Url, ExecutionError> {
    typed::<Url>(args, 0)
}

fn string<'b, 'v>(s: impl Into<String>) -> CelResult<'b, 'v> {
    owned(CelString::from(s.into()))
}

fn url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let raw = str_arg(&args, 0)?;
    charge(raw.len() as u64 / 10 + 1)?;
    match parse(raw) {
        Ok(u) => owned(u),
        Err(e) => Err(ExecutionError::function_error(
            "url",
            format!("URL parse error during conversion from string: {e}"),
        )),
    }
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let raw = str_arg(&args, 0)?;
    charge(raw.len() as u64 / 10 + 1)?;
    boolean(parse(raw).is_ok())
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    string(this(&args)?.scheme.clone())
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    string(this(&args)?.host.clone())
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (name, _) = split_host_port(&this(&args)?.host);
    string(name.trim_start_matches('[').trim_end_matches(']'))
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (_, port) = split_host_port(&this(&args)?.host);
    string(port.unwrap_or_default())
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let u = this(&args)?;
    string(if u.opaque {
        String::new()
    } else {
        u.path.clone()
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let u = this(&args)?;
    let mut values: Vec<(String, Vec<String>)> = Vec::new();
    for pair in u.query.split(['&', ';']).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (percent_decode(k), percent_decode(v));
        match values.iter_mut().find(|(key, _)| *key == k) {
            Some((_, list)) => list.push(v),
            None => values.push((k, vec![v])),
        }
    }
    let map: HashMap<CelMapKey<'static>, Box<dyn Val>> = values
        .into_iter()
        .map(|(k, vs)| {
            let list: Vec<Box<dyn Val>> = vs
                .into_iter()
                .map(|v| Box::new(CelString::from(v)) as Box<dyn Val>)
                .collect();
            (
                CelMapKey::from(k),
                Box::new(CelList::from(list)) as Box<dyn Val>,
            )
        })
        .collect();
    owned(CelMap::from(map))
}

fn to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let u = this(&args)?;
    let mut s = String::new();
    if !u.scheme.is_empty() {
        s.push_str(&u.scheme);
        s.push(':');
    }
    if !u.host.is_empty() {
        s.push_str("//");
        s.push_str(&u.host);
    }
    s.push_str(&u.path);
    if !u.query.is_empty() {
        s.push('?');
        s.push_str(&u.query);
    }
    string(s)
}

#[cfg(test)]
mod tests {
    use crate::library::testing::eval;

    #[test]
    fn urls() {
        assert_eq!(eval("isURL('https://example.com:80/path?x=1')"), "true");
        assert_eq!(eval("isURL('/absolute-path')"), "true");
        assert_eq!(eval("isURL('example.com')"), "false");
        assert_eq!(eval("isURL('https://exa mple.com')"), "false");
        assert_eq!(
            eval("url('https://example.com:80/path').getScheme()"),
            "\"https\""
        );
        assert_eq!(
            eval("url('https://example.com:80/path').getHost()"),
            "\"example.com:80\""
        );
        assert_eq!(
            eval("url('https://example.com:80/path').getHostname()"),
            "\"example.com\""
        );
        assert_eq!(
            eval("url('https://[::1]:80/path').getHostname()"),
            "\"::1\""
        );
        assert_eq!(
            eval("url('https://example.com:80/path').getPort()"),
            "\"80\""
        );
        assert_eq!(eval("url('https://example.com/path').getPort()"), "\"\"");
        assert_eq!(
            eval("url('https://example.com/a%20b').getEscapedPath()"),
            "\"/a%20b\""
        );
        assert_eq!(eval("url('https://example.com/?k=a&k=b&j=c').getQuery() == {'k': ['a', 'b'], 'j': ['c']}"), "true");
        assert!(eval("url('bad')").contains("URL parse error during conversion from string"));
    }
}
