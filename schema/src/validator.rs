//! kube-openapi's schema validator (`pkg/validation/validate`) as a CR create gets it, and the
//! conversion of its errors into field errors (`kubeOpenAPIResultToFieldErrors`).
//!
//! The validator is emulated, not approximated: the same sub-validators run in the same order
//! (type, allOf/anyOf/oneOf/not, string, format, number, slice, enum, object), the same early
//! returns, and the same `MatchCount` bookkeeping, because `anyOf`/`oneOf` report the errors of
//! the branch with the most successful checks. Messages are kube-openapi's (`spec.x in body must
//! be of type string: "integer"`), paths are its dotted names.
//!
//! Bounded: recursion stops at [`crate::MAX_DEPTH`]; every sub-validator call spends one unit of
//! a per-object work budget ([`MAX_STEPS`]), so nested `anyOf`s cannot make the work exponential
//! without limit; an exhausted budget is reported as an internal error, never a hang.

use crate::formats;
use crate::gofmt::{bad_value, child, go_float, or_nil, quote, Num};
use crate::node::{Additional, Node};
use api::validation::{FieldError, FieldErrorKind};
use serde_json::{Map, Value};

/// Sub-validator calls allowed for one object: far above what a real schema needs for a
/// 3 MiB object, far below what takes noticeable time.
pub(crate) const MAX_STEPS: u64 = 20_000_000;

/// What a kube-openapi error turns into (its error code).
#[derive(Debug, Clone)]
enum Code {
    Required,
    Enum(Vec<String>),
    TooLong(i64),
    MaxItems(i64, i64),
    TooManyProperties(i64, i64),
    InvalidType,
    Other,
    /// The plain `errors.New` of the anyOf/oneOf/allOf/not messages, reported at the caller's
    /// path with an empty value.
    Composite,
}

#[derive(Debug, Clone)]
struct OErr {
    code: Code,
    /// kube-openapi's `Name`: the dotted path (may start with `.`).
    name: String,
    /// The bad value as rendered.
    value: String,
    message: String,
}

#[derive(Default)]
struct Res {
    errs: Vec<OErr>,
    count: u64,
}

impl Res {
    fn merge(&mut self, other: Res) {
        self.errs.extend(other.errs);
        self.count += other.count;
    }
    fn err(e: OErr) -> Res {
        Res {
            errs: vec![e],
            count: 0,
        }
    }
    fn is_valid(&self) -> bool {
        self.errs.is_empty()
    }
}

struct Ctx {
    steps: u64,
    exhausted: bool,
    too_deep: Option<String>,
}

/// Validates `data` against `node` and returns upstream's field errors, their paths under
/// `prefix` ("" for the object root).
pub(crate) fn validate(node: &Node, data: &Value, prefix: &str) -> Vec<FieldError> {
    let mut ctx = Ctx {
        steps: 0,
        exhausted: false,
        too_deep: None,
    };
    let res = schema(node, data, "", 0, &mut ctx);
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for e in res.errs {
        // Result.AddErrors keeps each message once.
        if seen.insert(e.message.clone()) {
            out.push(to_field_error(e, prefix));
        }
    }
    if let Some(path) = ctx.too_deep {
        out.push(FieldError::forbidden(
            or_nil(&path_under(prefix, &path)),
            format!(
                "must not be nested more than {} levels deep",
                crate::MAX_DEPTH
            ),
        ));
    }
    if ctx.exhausted {
        out.push(FieldError::internal(
            or_nil(prefix),
            "validation exceeded its work budget",
        ));
    }
    out
}

fn path_under(prefix: &str, name: &str) -> String {
    if name.is_empty() || name == "." {
        prefix.to_string()
    } else {
        child(prefix, name.trim_start_matches('.'))
    }
}

fn to_field_error(e: OErr, prefix: &str) -> FieldError {
    let field = or_nil(&path_under(prefix, &e.name));
    let mk = |kind, value: Option<String>, message: String| FieldError {
        field: field.clone(),
        kind,
        message,
        value,
    };
    match e.code {
        Code::Required => FieldError::required(field.clone(), ""),
        Code::Enum(values) => {
            let list: Vec<String> = values.iter().map(|v| quote(v)).collect();
            mk(
                FieldErrorKind::NotSupported,
                Some(e.value),
                if list.is_empty() {
                    String::new()
                } else {
                    format!("supported values: {}", list.join(", "))
                },
            )
        }
        Code::TooLong(max) => FieldError::too_long(field.clone(), too_long_msg(max)),
        Code::MaxItems(actual, max) | Code::TooManyProperties(actual, max) => mk(
            FieldErrorKind::TooMany,
            Some(actual.to_string()),
            format!("must have at most {max} items"),
        ),
        // `field.TypeInvalid` renders as `Invalid value` (its reason is FieldValueTypeInvalid,
        // which `FieldErrorKind` does not have).
        Code::InvalidType | Code::Other => mk(FieldErrorKind::Invalid, Some(e.value), e.message),
        Code::Composite => FieldError {
            field: or_nil(prefix),
            kind: FieldErrorKind::Invalid,
            message: e.message,
            value: Some("\"\"".to_string()),
        },
    }
}

/// `field.TooLong`'s detail.
pub(crate) fn too_long_msg(max: i64) -> String {
    if max >= 0 {
        format!("may not be more than {max} bytes")
    } else {
        "value is too long".to_string()
    }
}

const IN: &str = "body";

fn verr(code: Code, name: &str, value: String, message: String) -> OErr {
    OErr {
        code,
        name: name.to_string(),
        value,
        message,
    }
}

/// `errors.InvalidType(name, "body", type, value)`; `value` is a Go string (quoted in the
/// message) or, when `None`, something else (no data in the message).
fn invalid_type(path: &str, type_name: &str, value: Option<&str>) -> OErr {
    match value {
        Some(v) => verr(
            Code::InvalidType,
            path,
            quote(v),
            format!("{path} in {IN} must be of type {type_name}: {}", quote(v)),
        ),
        None => verr(
            Code::InvalidType,
            path,
            "\"\"".to_string(),
            format!("{path} in {IN} must be of type {type_name}"),
        ),
    }
}

/// `SchemaValidator.Validate`.
fn schema(node: &Node, data: &Value, path: &str, depth: usize, ctx: &mut Ctx) -> Res {
    ctx.steps += 1;
    if ctx.steps > MAX_STEPS {
        ctx.exhausted = true;
        return Res::default();
    }
    if ctx.exhausted {
        return Res::default();
    }
    if depth > crate::MAX_DEPTH {
        if ctx.too_deep.is_none() {
            ctx.too_deep = Some(path.to_string());
        }
        return Res::default();
    }
    let type_applies = !node.types.is_empty() || !node.format.is_empty();
    let mut result = Res::default();
    if data.is_null() {
        if type_applies {
            result.merge(type_check(node, data, path));
        }
        result.merge(enum_check(node, data, path));
        return result;
    }
    let run = |result: &mut Res, r: Res| {
        result.merge(r);
        result.count += 1;
    };
    if type_applies {
        run(&mut result, type_check(node, data, path));
    }
    let props = schema_props(node, data, path, depth, ctx);
    run(&mut result, props);
    if let Value::String(s) = data {
        run(&mut result, string_check(node, s, path));
        if !node.format.is_empty() {
            run(&mut result, format_check(node, s, path));
        }
    }
    if let Value::Number(n) = data {
        run(&mut result, number_check(node, Num::of(n), path));
    }
    if let Value::Array(items) = data {
        let r = slice_check(node, items, path, depth, ctx);
        run(&mut result, r);
    }
    run(&mut result, enum_check(node, data, path));
    if let Value::Object(map) = data {
        let r = object_check(node, map, path, depth, ctx);
        run(&mut result, r);
    }
    result.count += 1;
    result
}

/// The JSON type kube-openapi infers from a decoded value, and its format.
fn schema_info(data: &Value) -> (&'static str, &'static str) {
    match data {
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match Num::of(n) {
            Num::Int(_) => ("integer", "int64"),
            Num::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
        Value::Null => ("", ""),
    }
}

/// swag.IsFloat64AJSONInteger.
fn is_json_integer(f: f64) -> bool {
    f.is_finite() && f.abs() <= (1u64 << 53) as f64 && f.fract() == 0.0
}

/// `typeValidator.Validate`.
fn type_check(node: &Node, data: &Value, path: &str) -> Res {
    let contains = |t: &str| node.types.contains(&t);
    if data.is_null() {
        if !node.types.is_empty() && !contains("null") && !node.nullable {
            return Res::err(invalid_type(path, &node.types.join(","), Some("null")));
        }
        return Res {
            errs: vec![],
            count: 1,
        };
    }
    let (sch_type, format) = schema_info(data);
    let is_string = matches!(data, Value::String(_));
    let is_slice = matches!(data, Value::Array(_));
    let is_float_int =
        sch_type == "number" && data.as_f64().is_some_and(is_json_integer) && contains("integer");
    let is_int_float = sch_type == "integer" && contains("number");
    let is_lower_int = node.format == "int64" && format == "int32";
    let is_lower_float = node.format == "float64" && format == "float32";
    if !is_string
        && !is_slice
        && !node.format.is_empty()
        && !(contains(sch_type)
            || format == node.format
            || is_float_int
            || is_int_float
            || is_lower_int
            || is_lower_float)
    {
        return Res::err(invalid_type(path, &node.format, Some(format)));
    }
    if !(contains("number") || contains("integer") || node.format.is_empty())
        && (is_string || is_slice)
    {
        return Res {
            errs: vec![],
            count: 1,
        };
    }
    if !(contains(sch_type) || is_float_int || is_int_float) {
        return Res::err(invalid_type(path, &node.types.join(","), Some(sch_type)));
    }
    Res {
        errs: vec![],
        count: 1,
    }
}

/// `schemaPropsValidator.Validate`: allOf, anyOf, oneOf, not.
fn schema_props(node: &Node, data: &Value, path: &str, depth: usize, ctx: &mut Ctx) -> Res {
    let mut main = Res::default();
    if !node.any_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        for s in &node.any_of {
            let r = schema(s, data, path, depth, ctx);
            if r.is_valid() {
                best = None;
                first_success = Some(r);
                break;
            }
            if best.as_ref().is_none_or(|b| r.count > b.count) {
                best = Some(r);
            }
        }
        if first_success.is_none() {
            main.errs.push(composite(format!(
                "{} must validate at least one schema (anyOf)",
                quote(path)
            )));
        }
        if let Some(b) = best {
            main.merge(b);
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }
    if !node.one_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        let mut validated = 0;
        for s in &node.one_of {
            let r = schema(s, data, path, depth, ctx);
            if r.is_valid() {
                validated += 1;
                best = None;
                if first_success.is_none() {
                    first_success = Some(r);
                }
                continue;
            }
            if validated == 0 && best.as_ref().is_none_or(|b| r.count > b.count) {
                best = Some(r);
            }
        }
        if validated != 1 {
            let additional = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            main.errs.push(composite(format!(
                "{} must validate one and only one schema (oneOf). {additional}",
                quote(path)
            )));
            if let Some(b) = best {
                main.merge(b);
            }
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }
    if !node.all_of.is_empty() {
        let mut validated = 0;
        for s in &node.all_of {
            let r = schema(s, data, path, depth, ctx);
            if r.is_valid() {
                validated += 1;
            }
            main.merge(r);
        }
        if validated != node.all_of.len() {
            let additional = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            main.errs.push(composite(format!(
                "{} must validate all the schemas (allOf){additional}",
                quote(path)
            )));
        }
    }
    if let Some(not) = &node.not {
        let r = schema(not, data, path, depth, ctx);
        if r.is_valid() {
            main.errs.push(composite(format!(
                "{} must not validate the schema (not)",
                quote(path)
            )));
        }
    }
    main.count += 1;
    main
}

fn composite(message: String) -> OErr {
    verr(Code::Composite, "", String::new(), message)
}

/// `stringValidator.Validate`: the first failing check only.
fn string_check(node: &Node, s: &str, path: &str) -> Res {
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
fn format_check(node: &Node, s: &str, path: &str) -> Res {
    if formats::validates(&node.format, s) {
        Res::default()
    } else {
        Res::err(invalid_type(path, &node.format, Some(s)))
    }
}

/// `numberValidator.Validate`: multipleOf, minimum, maximum, with native integer arithmetic for
/// integer values.
fn number_check(node: &Node, n: Num, path: &str) -> Res {
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

/// `schemaSliceValidator.Validate`.
fn slice_check(node: &Node, items: &[Value], path: &str, depth: usize, ctx: &mut Ctx) -> Res {
    let mut result = Res::default();
    if let Some(item) = &node.items {
        for (i, v) in items.iter().enumerate() {
            let r = schema(item, v, &format!("{path}[{i}]"), depth + 1, ctx);
            result.merge(r);
        }
    }
    let size = items.len() as i64;
    if let Some(min) = node.min_items {
        if size < min {
            result.errs.push(verr(
                Code::Other,
                path,
                size.to_string(),
                format!("{path} in {IN} should have at least {min} items"),
            ));
        }
    }
    if let Some(max) = node.max_items {
        if size > max {
            result.errs.push(verr(
                Code::MaxItems(size, max),
                path,
                size.to_string(),
                format!("{path} in {IN} should have at most {max} items"),
            ));
        }
    }
    if node.unique_items && has_duplicates(items) {
        result.errs.push(verr(
            Code::Other,
            path,
            "\"\"".to_string(),
            format!("{path} in {IN} shouldn't contain duplicates"),
        ));
    }
    result.count += 1;
    result
}

/// `reflect.DeepEqual` duplicates, found by hashing a canonical rendering (object keys sorted),
/// so a long list costs linear, not quadratic, time.
fn has_duplicates(items: &[Value]) -> bool {
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
fn enum_check(node: &Node, data: &Value, path: &str) -> Res {
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

/// `objectValidator.Validate`.
fn object_check(
    node: &Node,
    map: &Map<String, Value>,
    path: &str,
    depth: usize,
    ctx: &mut Ctx,
) -> Res {
    let num_keys = map.len() as i64;
    if let Some(min) = node.min_properties {
        if num_keys < min {
            return Res::err(verr(
                Code::Other,
                path,
                num_keys.to_string(),
                format!("{path} in {IN} should have at least {min} properties"),
            ));
        }
    }
    if let Some(max) = node.max_properties {
        if num_keys > max {
            return Res::err(verr(
                Code::TooManyProperties(num_keys, max),
                path,
                num_keys.to_string(),
                format!("{path} in {IN} should have at most {max} properties"),
            ));
        }
    }
    let mut res = Res::default();
    match &node.additional {
        Some(Additional::Bool(false)) => {
            for k in map.keys() {
                if !node.properties.contains_key(k) {
                    res.errs.push(verr(
                        Code::Other,
                        path,
                        quote(k),
                        format!("{path}.{k} in {IN} is a forbidden property"),
                    ));
                }
            }
        }
        Some(Additional::Schema(s)) => {
            for (k, v) in map {
                if !node.properties.contains_key(k) {
                    let r = schema(s, v, &format!("{path}.{k}"), depth + 1, ctx);
                    res.merge(r);
                }
            }
        }
        _ => {}
    }
    for (name, prop) in &node.properties {
        if let Some(v) = map.get(name) {
            let r_name = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let r = schema(prop, v, &r_name, depth + 1, ctx);
            res.merge(r);
        }
    }
    for k in &node.required {
        if !map.contains_key(k) {
            let name = format!("{path}.{k}");
            res.errs.push(verr(
                Code::Required,
                &name,
                String::new(),
                format!("{name} in {IN} is required"),
            ));
        }
    }
    res
}
