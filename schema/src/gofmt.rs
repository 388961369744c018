//! Go's renderings that upstream messages are made of: `%v` of numbers, `%q` of strings, field
//! paths (`field.Path`), and the bad value of a `field.Error`.

use serde_json::Value;

/// A JSON number as the apiserver's JSON decoder produces it: `int64` when the literal is an
/// integer that fits, `float64` otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(crate) fn of(n: &serde_json::Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(0.0)),
        }
    }

    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    /// Go `%v`.
    pub(crate) fn go(self) -> String {
        match self {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        }
    }
}

/// Go `%v` of a `float64` (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest digits, in
/// exponent form when the exponent is below -4 or at least 6 (strconv uses precision 6 for that
/// decision when the precision is the shortest).
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Shortest round-trip digits in scientific form, e.g. "1.234567e6".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        return go_exp(mantissa, exp);
    }
    format!("{f}")
}

fn go_exp(mantissa: &str, exp: i32) -> String {
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// Go `%q`.
pub(crate) fn quote(s: &str) -> String {
    api::validation::go_quote(s)
}

/// `field.Error`'s rendering of a bad value (after its type switch): numbers and booleans bare,
/// strings quoted, `null`, anything else as JSON (upstream prints Go syntax, `%#v`).
pub(crate) fn bad_value(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Number(n) => Num::of(n).go(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

/// `field.Path` helpers over rendered paths. The empty string is the nil path.
pub(crate) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `Path.Key(k)`: `path[k]`.
pub(crate) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

/// `Path.Index(i)`: `path[i]`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A nil `*field.Path` renders as `<nil>`.
pub(crate) fn or_nil(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_string()
    } else {
        path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_render_as_go_v() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(10.0), "10");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(123456789.0), "1.23456789e+08");
    }
}
