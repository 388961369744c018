//! The leaf checks of kube-openapi's validator: string (`stringValidator`), format
//! (`formatValidator`), number (`numberValidator`), `enum` (`basicCommonValidator`), and
//! `uniqueItems`' duplicate detection, with their messages.

use super::{invalid_type, is_json_integer, verr, Code, OErr, Res, IN};
use crate::formats;
use crate::gofmt::{bad_value, go_float, quote, Num};
use crate::node::Node;
use serde_json::Value;

/// `stringValidator.Validate`: the first failing check only.
pub(super) fn string_check(node: &Node, s: &str, path: &str) -> Res {
    let len = s.chars().count() as i64;
    if let Some(max) = node.max_length {
        if len > max {
            return Res::err(verr(
                Code::TooLong(max),
                path,
                quote(s),
                format!("{path} in {IN} should be at most {max} chars long"),
            ));
        }
    }
    if let Some(min) = node.min_length {
        if len < min {
            return Res::err(verr(
                Code::Other,
                path,
                quote(s),
                format!("{path} in {IN} should be at least {min} chars long"),
            ));
        }
    }
    if let Some(p) = &node.pattern {
        let shown = match &p.re {
            Ok(re) if re.is_match(s) => return Res::default(),
            Ok(_) => p.src.clone(),
            Err(e) => format!("{}, but pattern is invalid: {e}", p.src),
        };
        return Res::err(verr(
            Code::Other,
            path,
            quote(s),
            format!("{path} in {IN} should match '{shown}'"),
        ));
    }
    Res::default()
}

/// `formatValidator.Validate`.
pub(super) fn format_check(node: &Node, s: &str, path: &str) -> Res {
    if formats::validates(&node.format, s) {
        Res::default()
    } else {
        Res::err(invalid_type(path, &node.format, Some(s)))
    }
}

/// `numberValidator.Validate`: multipleOf, minimum, maximum, with native integer arithmetic for
/// integer values.
pub(super) fn number_check(node: &Node, n: Num, path: &str) -> Res {
    let mut res = Res::default();
    let value = n.go();
    if let Some(factor) = node.multiple_of {
        let e = match n {
            Num::Int(i) if (factor as i64) != 0 => {
                let f = factor as i64;
                if f < 0 {
                    Some(must_be_positive(path, &f.to_string()))
                } else if i % f != 0 {
                    Some(not_multiple(path, &f.to_string(), &value))
                } else {
                    None
                }
            }
            _ => {
                let data = n.as_f64();
                if factor < 0.0 {
                    Some(must_be_positive(path, &go_float(factor)))
                } else {
                    let mult = if factor < 1.0 {
                        1.0 / factor * data
                    } else {
                        data / factor
                    };
                    (!is_json_integer(mult)).then(|| not_multiple(path, &go_float(factor), &value))
                }
            }
        };
        res.errs.extend(e);
    }
    if let Some(min) = node.minimum {
        let excl = node.exclusive_minimum;
        let (fails, shown) = match n {
            Num::Int(i) => {
                let m = min as i64;
                ((!excl && i < m) || (excl && i <= m), m.to_string())
            }
            Num::Float(f) => ((!excl && f < min) || (excl && f <= min), go_float(min)),
        };
        if fails {
            let op = if excl {
                "greater than"
            } else {
                "greater than or equal to"
            };
            res.errs.push(verr(
                Code::Other,
                path,
                value.clone(),
                format!("{path} in {IN} should be {op} {shown}"),
            ));
        }
    }
    if let Some(max) = node.maximum {
        let excl = node.exclusive_maximum;
        let (fails, shown) = match n {
            Num::Int(i) => {
                let m = max as i64;
                ((!excl && i > m) || (excl && i >= m), m.to_string())
            }
            Num::Float(f) => ((!excl && f > max) || (excl && f >= max), go_float(max)),
        };
        if fails {
            let op = if excl {
                "less than"
            } else {
                "less than or equal to"
            };
            res.errs.push(verr(
                Code::Other,
                path,
                value.clone(),
                format!("{path} in {IN} should be {op} {shown}"),
            ));
        }
    }
    res.count += 1;
    res
}

fn must_be_positive(path: &str, factor: &str) -> OErr {
    verr(
        Code::Other,
        path,
        factor.to_string(),
        format!("factor MultipleOf declared for {path} must be positive: {factor}"),
    )
}

fn not_multiple(path: &str, factor: &str, value: &str) -> OErr {
    verr(
        Code::Other,
        path,
        value.to_string(),
        format!("{path} in {IN} should be a multiple of {factor}"),
    )
}

/// `reflect.DeepEqual` duplicates, found by hashing a canonical rendering (object keys sorted),
/// so a long list costs linear, not quadratic, time.
pub(super) fn has_duplicates(items: &[Value]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    items.iter().any(|v| !seen.insert(canonical(v)))
}

/// A rendering equal for values `reflect.DeepEqual` finds equal: object keys sorted, `1` and
/// `1.0` distinct (int64 and float64 differ in Go).
pub(crate) fn canonical(v: &Value) -> String {
    fn go(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&quote(k));
                    out.push(':');
                    if let Some(x) = m.get(k) {
                        go(x, out);
                    }
                    out.push(',');
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for x in a {
                    go(x, out);
                    out.push(',');
                }
                out.push(']');
            }
            Value::Number(n) => match Num::of(n) {
                Num::Int(i) => out.push_str(&format!("i{i}")),
                Num::Float(f) => out.push_str(&format!("f{}", f.to_bits())),
            },
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    go(v, &mut s);
    s
}

/// `basicCommonValidator.Validate`: `enum`.
pub(super) fn enum_check(node: &Node, data: &Value, path: &str) -> Res {
    let Some(values) = &node.enum_ else {
        return Res::default();
    };
    if values.is_empty() || values.iter().any(|e| enum_matches(data, e)) {
        return Res::default();
    }
    let shown: Vec<String> = values.iter().map(enum_value_text).collect();
    let listed: Vec<String> = values.iter().map(go_v).collect();
    Res::err(verr(
        Code::Enum(shown),
        path,
        bad_value(data),
        format!("{path} in {IN} should be one of [{}]", listed.join(" ")),
    ))
}

/// How `kubeOpenAPIResultToFieldErrors` lists an allowed value: strings as they are, anything
/// else as JSON.
fn enum_value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => go_json(other),
    }
}

/// Go `json.Marshal` of a value decoded into `interface{}` (numbers are float64).
fn go_json(v: &Value) -> String {
    match v {
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 1e21 {
                format!("{}", f as i128)
            } else {
                n.to_string()
            }
        }
        Value::Array(a) => format!("[{}]", a.iter().map(go_json).collect::<Vec<_>>().join(",")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        Value::String((*k).clone()),
                        m.get(*k).map(go_json).unwrap_or_default()
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

/// Go `%v` of an enum value in kube-openapi's message.
fn go_v(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => go_float(n.as_f64().unwrap_or(0.0)),
        Value::Null => "<nil>".to_string(),
        other => other.to_string(),
    }
}

/// Whether decoded `data` equals the enum value (decoded as float64 numbers): `DeepEqual`, or
/// equal after Go's conversion of `data` to the enum value's type (an integer converts to a
/// float, and to a string as the rune with that code point).
fn enum_matches(data: &Value, e: &Value) -> bool {
    match (data, e) {
        (Value::Null, _) => false,
        (Value::Number(d), Value::Number(ev)) => {
            Num::of(d).as_f64() == ev.as_f64().unwrap_or(f64::NAN)
        }
        (Value::Number(d), Value::String(s)) => match Num::of(d) {
            Num::Int(i) => {
                let c = u32::try_from(i)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or('\u{FFFD}');
                c.to_string() == *s
            }
            Num::Float(_) => false,
        },
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => {
            deep_equal_decoded(data, e)
        }
        _ => false,
    }
}

/// `reflect.DeepEqual` of request data (int64 or float64 numbers) and a decoded enum value
/// (float64 numbers): nested integers never equal.
fn deep_equal_decoded(d: &Value, e: &Value) -> bool {
    match (d, e) {
        (Value::Number(a), Value::Number(b)) => match Num::of(a) {
            Num::Int(_) => false,
            Num::Float(f) => Some(f) == b.as_f64(),
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| deep_equal_decoded(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, x)| b.get(k).is_some_and(|y| deep_equal_decoded(x, y)))
        }
        (a, b) => a == b,
    }
}
