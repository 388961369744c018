//! kube-openapi's schema validator (`pkg/validation/validate`) as a CR create gets it, and the
//! conversion of its errors into field errors (`kubeOpenAPIResultToFieldErrors`).
//!
//! The validator is emulated, not approximated: the same sub-validators run in the same order
//! (type, allOf/anyOf/oneOf/not, string, format, number, slice, enum, object), the same early
//! returns, and the same `MatchCount` bookkeeping, because `anyOf`/`oneOf` report the errors of
//! the branch with the most successful checks. Messages are kube-openapi's (`spec.x in body must
//! be of type string: "integer"`), paths are its dotted names.
//!
//! Bounded: recursion stops at [`crate::MAX_DEPTH`]. Schemas are trees (no `$ref`), so the work
//! is at most the schema's size times the value's; every sub-validator call spends one unit of a
//! per-object budget ([`MAX_STEPS`]) that bounds that product (a schema with hundreds of failing
//! `anyOf` branches over a 3 MiB list); an exhausted budget is reported as an internal error,
//! never a hang.
//!
//! Updates are ratcheted as upstream's `CRDValidationRatcheting` (on by default in 1.33): the
//! errors of a value equal to its correlated old value are dropped.

mod checks;

use crate::gofmt::{child, or_nil, quote, Num};
use crate::node::{Additional, Node};
use api::validation::{FieldError, FieldErrorKind};
pub(crate) use checks::canonical;
use checks::{enum_check, format_check, has_duplicates, number_check, string_check};
use serde_json::{Map, Value};

/// Sub-validator calls allowed for one object: far above what a real schema needs for a
/// 3 MiB object, far below what takes noticeable time.
pub(crate) const MAX_STEPS: u64 = 20_000_000;

/// What a kube-openapi error turns into (its error code).
#[derive(Debug, Clone)]
pub(super) enum Code {
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
pub(super) struct OErr {
    code: Code,
    /// kube-openapi's `Name`: the dotted path (may start with `.`).
    name: String,
    /// The bad value as rendered.
    value: String,
    message: String,
}

#[derive(Default)]
pub(super) struct Res {
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
    budget: u64,
    exhausted: bool,
    too_deep: Option<String>,
}

/// Validates `data` against `node` and returns upstream's field errors, their paths under
/// `prefix` ("" for the object root).
pub(crate) fn validate(node: &Node, data: &Value, prefix: &str) -> Vec<FieldError> {
    validate_with(node, data, None, prefix, MAX_STEPS)
}

/// [`validate`] of an update: errors of values equal to their correlated old values are
/// ratcheted away (upstream's `NewRatchetingSchemaValidator`; object fields correlate by name,
/// items of `x-kubernetes-list-type: map` lists by their keys, other list items not at all).
pub(crate) fn validate_update(node: &Node, data: &Value, old: &Value) -> Vec<FieldError> {
    validate_with(node, data, Some(old), "", MAX_STEPS)
}

pub(crate) fn validate_with(
    node: &Node,
    data: &Value,
    old: Option<&Value>,
    prefix: &str,
    budget: u64,
) -> Vec<FieldError> {
    let mut ctx = Ctx {
        steps: 0,
        budget,
        exhausted: false,
        too_deep: None,
    };
    let res = schema(node, data, old, "", 0, &mut ctx);
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

pub(super) const IN: &str = "body";

pub(super) fn verr(code: Code, name: &str, value: String, message: String) -> OErr {
    OErr {
        code,
        name: name.to_string(),
        value,
        message,
    }
}

/// `errors.InvalidType(name, "body", type, value)`; `value` is a Go string (quoted in the
/// message) or, when `None`, something else (no data in the message).
pub(super) fn invalid_type(path: &str, type_name: &str, value: Option<&str>) -> OErr {
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
fn schema(
    node: &Node,
    data: &Value,
    old: Option<&Value>,
    path: &str,
    depth: usize,
    ctx: &mut Ctx,
) -> Res {
    let mut result = schema_unratcheted(node, data, old, path, depth, ctx);
    // Ratcheting (CRDValidationRatcheting, on by default): errors of a value unchanged from the
    // correlated old value become warnings, i.e. are dropped here.
    if !result.is_valid() && old == Some(data) {
        result.errs.clear();
    }
    result
}

fn schema_unratcheted(
    node: &Node,
    data: &Value,
    old: Option<&Value>,
    path: &str,
    depth: usize,
    ctx: &mut Ctx,
) -> Res {
    ctx.steps += 1;
    if ctx.steps > ctx.budget {
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
    let props = schema_props(node, data, old, path, depth, ctx);
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
        let r = slice_check(node, items, old, path, depth, ctx);
        run(&mut result, r);
    }
    run(&mut result, enum_check(node, data, path));
    if let Value::Object(map) = data {
        let r = object_check(node, map, old, path, depth, ctx);
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
pub(super) fn is_json_integer(f: f64) -> bool {
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
fn schema_props(
    node: &Node,
    data: &Value,
    old: Option<&Value>,
    path: &str,
    depth: usize,
    ctx: &mut Ctx,
) -> Res {
    let mut main = Res::default();
    if !node.any_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        for s in &node.any_of {
            let r = schema(s, data, old, path, depth, ctx);
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
            let r = schema(s, data, old, path, depth, ctx);
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
            let r = schema(s, data, old, path, depth, ctx);
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
        let r = schema(not, data, old, path, depth, ctx);
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

/// `schemaSliceValidator.Validate`.
fn slice_check(
    node: &Node,
    items: &[Value],
    old: Option<&Value>,
    path: &str,
    depth: usize,
    ctx: &mut Ctx,
) -> Res {
    let mut result = Res::default();
    if let Some(item) = &node.items {
        let old_items = correlate_items(node, old);
        for (i, v) in items.iter().enumerate() {
            let old_item = old_items
                .as_ref()
                .and_then(|m| m.get(&map_key(node, v)).copied());
            let r = schema(item, v, old_item, &format!("{path}[{i}]"), depth + 1, ctx);
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

/// The old items of a map list by their key values (`None`: items do not correlate).
fn correlate_items<'a>(
    node: &Node,
    old: Option<&'a Value>,
) -> Option<std::collections::HashMap<String, &'a Value>> {
    if node.list_type.as_deref() != Some("map") {
        return None;
    }
    let old = old?.as_array()?;
    Some(old.iter().map(|o| (map_key(node, o), o)).collect())
}

/// The key values of a map-list item, canonically rendered.
fn map_key(node: &Node, item: &Value) -> String {
    let keys: Vec<Value> = node
        .list_map_keys
        .iter()
        .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
        .collect();
    canonical(&Value::Array(keys))
}

/// `objectValidator.Validate`.
fn object_check(
    node: &Node,
    map: &Map<String, Value>,
    old: Option<&Value>,
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
                    let o = old.and_then(|o| o.get(k));
                    let r = schema(s, v, o, &format!("{path}.{k}"), depth + 1, ctx);
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
            let o = old.and_then(|o| o.get(name));
            let r = schema(prop, v, o, &r_name, depth + 1, ctx);
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

    fn never() -> JSONSchemaProps {
        JSONSchemaProps {
            pattern: Some("^never$".into()),
            ..Default::default()
        }
    }

    /// `anyOf` nested `d` deep (two branches, one of them the next level): linear in size.
    fn nested_any_of(d: usize) -> JSONSchemaProps {
        let mut s = never();
        for _ in 0..d {
            s = JSONSchemaProps {
                any_of: Some(vec![never(), s]),
                ..Default::default()
            };
        }
        s
    }

    #[test]
    fn work_is_bounded_by_the_budget() {
        // Schemas are trees, so work is at most schema size times value size; the budget bounds
        // that product: 200 failing branches over a list of 1000 items.
        let wide = JSONSchemaProps {
            any_of: Some(
                (0..200)
                    .map(|_| JSONSchemaProps {
                        items: Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(Box::new(never()))),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        };
        let node = Node::build(&wide);
        let data = Value::Array(vec![Value::String("x".into()); 1000]);
        let errs = validate_with(&node, &data, None, "spec.x", 10_000);
        let last = errs.last().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            last,
            "spec.x: Internal error: validation exceeded its work budget"
        );
    }

    #[test]
    fn small_junctor_trees_report_the_best_branch() {
        let node = Node::build(&nested_any_of(3));
        let errs: Vec<String> = validate(&node, &Value::String("x".into()), "")
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert!(errs.contains(
            &"<nil>: Invalid value: \"\": \"\" must validate at least one schema (anyOf)"
                .to_string()
        ));
        assert!(
            errs.contains(
                &"<nil>: Invalid value: \"x\":  in body should match '^never$'".to_string()
            ),
            "{errs:?}"
        );
    }
}
