//! Whether a CRD schema is structural (upstream `apiserver/schema/validation.go`
//! `validateStructuralInvariants` and `complete.go` `validateStructuralCompleteness`), over the
//! `JSONSchemaProps` as written.
//!
//! Upstream splits a schema into its structural part (types, properties, items,
//! additionalProperties, defaults, descriptions and the `x-kubernetes-*` extensions) and its
//! value validations (formats, bounds, enums, `allOf`/`anyOf`/`oneOf`/`not`). Inside the
//! logical junctors only value validations may appear, and every field they mention must also be
//! specified structurally. Errors are sorted by their text, as upstream sorts them.

use crate::gofmt::{child, index, key};
use crate::node::compile_pattern;
use api::validation::FieldError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn items_schema(s: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(b)) => Some(b),
        _ => None,
    }
}

fn additional_schema(s: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &s.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(b)) => Some(b),
        _ => None,
    }
}

fn props(s: &JSONSchemaProps) -> impl Iterator<Item = (&String, &JSONSchemaProps)> {
    s.properties.iter().flatten()
}

fn has_props(s: &JSONSchemaProps) -> bool {
    s.properties.as_ref().is_some_and(|p| !p.is_empty())
}

fn t(s: &JSONSchemaProps) -> &str {
    s.type_.as_deref().unwrap_or("")
}

fn yes(b: Option<bool>) -> bool {
    b == Some(true)
}

fn has_default(s: &JSONSchemaProps) -> bool {
    s.default.as_ref().is_some_and(|d| !d.0.is_null())
}

/// `ValidateStructural(path, NewStructural(s))`.
pub(crate) fn validate(s: &JSONSchemaProps, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    invariants(s, Level::Root, path, &mut errs, 0);
    value_completeness(s, Some(s), path, path, &mut errs, 0);
    errs.sort_by_key(|e| e.to_string());
    errs
}

fn invariants(
    s: &JSONSchemaProps,
    lvl: Level,
    path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    if t(s) == "array" && s.items.is_none() {
        errs.push(FieldError::required(
            child(path, "items"),
            "must be specified",
        ));
    }
    if let Some(items) = items_schema(s) {
        invariants(items, Level::Item, &child(path, "items"), errs, depth + 1);
    }
    for (k, v) in props(s) {
        invariants(
            v,
            Level::Field,
            &key(&child(path, "properties"), k),
            errs,
            depth + 1,
        );
    }
    if s.additional_properties.is_some() {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(a) = additional_schema(s) {
            invariants(
                a,
                Level::Field,
                &child(path, "additionalProperties"),
                errs,
                depth + 1,
            );
        }
    }
    let int_or_string = yes(s.x_kubernetes_int_or_string);
    let preserve = yes(s.x_kubernetes_preserve_unknown_fields);
    let embedded = yes(s.x_kubernetes_embedded_resource);
    if int_or_string && preserve {
        errs.push(FieldError::invalid_value(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid_value(
            child(path, "x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(s.any_of.as_deref());
    let skip_first_all_of_any_of = s
        .all_of
        .as_ref()
        .and_then(|a| a.first())
        .is_some_and(|f| is_int_or_string_any_of(f.any_of.as_deref()));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, path, errs, depth);

    let check_metadata = lvl == Level::Root || embedded;
    let ty = t(s);
    if embedded && ty != "object" {
        let msg = "must be object if x-kubernetes-embedded-resource is true";
        if ty.is_empty() {
            errs.push(FieldError::required(child(path, "type"), msg));
        } else {
            errs.push(FieldError::invalid(child(path, "type"), ty, msg));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let msg = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(child(path, "type"), msg));
    }
    if embedded && s.additional_properties.is_some() {
        errs.push(FieldError::forbidden(
            child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            child(path, "type"),
            ty,
            "must be object at the root",
        ));
    }
    let properties = s.properties.as_ref();
    if check_metadata {
        for name in ["kind", "apiVersion"] {
            if let Some(p) = properties.and_then(|m| m.get(name)) {
                if t(p) != "string" {
                    errs.push(FieldError::invalid(
                        child(&key(&child(path, "properties"), name), "type"),
                        t(p),
                        "must be string",
                    ));
                }
            }
        }
    }
    if let Some(meta) = properties.and_then(|m| m.get("metadata")) {
        metadata_invariants(
            meta,
            check_metadata,
            lvl,
            &key(&child(path, "properties"), "metadata"),
            errs,
        );
    }
    if embedded && !preserve && !has_props(s) {
        errs.push(FieldError::required(
            child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn metadata_invariants(
    s: &JSONSchemaProps,
    check: bool,
    lvl: Level,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if check && t(s) != "object" {
        errs.push(FieldError::invalid(
            child(path, "type"),
            t(s),
            "must be object",
        ));
    }
    if lvl != Level::Root {
        return;
    }
    // Only `type`, a default (checked elsewhere) and schemas for name and generateName may be
    // given; anything else would restrict metadata beyond what the apiserver guarantees.
    let names_only = match &s.properties {
        None => true,
        Some(p) => p.is_empty() || p.keys().all(|k| k == "name" || k == "generateName"),
    };
    let rest = JSONSchemaProps {
        type_: None,
        default: None,
        properties: None,
        // Not part of upstream's Structural.
        example: None,
        id: None,
        schema: None,
        external_docs: None,
        ref_path: None,
        definitions: None,
        dependencies: None,
        pattern_properties: None,
        additional_items: None,
        x_kubernetes_preserve_unknown_fields: s.x_kubernetes_preserve_unknown_fields.filter(|b| *b),
        x_kubernetes_embedded_resource: s.x_kubernetes_embedded_resource.filter(|b| *b),
        x_kubernetes_int_or_string: s.x_kubernetes_int_or_string.filter(|b| *b),
        nullable: s.nullable.filter(|b| *b),
        unique_items: s.unique_items.filter(|b| *b),
        exclusive_maximum: s.exclusive_maximum.filter(|b| *b),
        exclusive_minimum: s.exclusive_minimum.filter(|b| *b),
        x_kubernetes_list_map_keys: s
            .x_kubernetes_list_map_keys
            .clone()
            .filter(|k| !k.is_empty()),
        x_kubernetes_validations: s.x_kubernetes_validations.clone().filter(|k| !k.is_empty()),
        required: s.required.clone().filter(|k| !k.is_empty()),
        ..s.clone()
    };
    if !names_only || rest != JSONSchemaProps::default() {
        errs.push(FieldError::forbidden(
            path,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// `anyOf: [{type: integer}, {type: string}]` exactly.
fn is_int_or_string_any_of(any_of: Option<&[JSONSchemaProps]>) -> bool {
    let only = |s: &JSONSchemaProps, ty: &str| {
        *s == JSONSchemaProps {
            type_: Some(ty.to_string()),
            ..JSONSchemaProps::default()
        }
    };
    matches!(any_of, Some([a, b]) if only(a, "integer") && only(b, "string"))
}

/// `validateValueValidation`: the junctors of `s` and its pattern.
fn value_validation(
    s: &JSONSchemaProps,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    if !skip_any_of {
        for (i, v) in s.any_of.iter().flatten().enumerate() {
            nested(v, false, &index(&child(path, "anyOf"), i), errs, depth + 1);
        }
    }
    for (i, v) in s.all_of.iter().flatten().enumerate() {
        nested(
            v,
            skip_first_all_of_any_of && i == 0,
            &index(&child(path, "allOf"), i),
            errs,
            depth + 1,
        );
    }
    for (i, v) in s.one_of.iter().flatten().enumerate() {
        nested(v, false, &index(&child(path, "oneOf"), i), errs, depth + 1);
    }
    if let Some(not) = &s.not {
        nested(not, false, &child(path, "not"), errs, depth + 1);
    }
    if let Some(p) = s.pattern.as_deref().filter(|p| !p.is_empty()) {
        if let Err(e) = compile_pattern(p) {
            errs.push(FieldError::invalid(
                child(path, "pattern"),
                p,
                format!(
                    "must be a valid regular expression, but isn't: {}",
                    go_regexp_error(&e, p)
                ),
            ));
        }
    }
}

/// `validateNestedValueValidation`: a schema under a junctor.
fn nested(
    v: &JSONSchemaProps,
    skip_any_of: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    value_validation(v, skip_any_of, false, path, errs, depth);
    if let Some(items) = items_schema(v) {
        nested(items, false, &child(path, "items"), errs, depth + 1);
    }
    for (k, f) in props(v) {
        nested(
            f,
            false,
            &key(&child(path, "properties"), k),
            errs,
            depth + 1,
        );
    }
    let forbid = |errs: &mut Vec<FieldError>, f: &str, msg: &str| {
        errs.push(FieldError::forbidden(child(path, f), msg))
    };
    if !t(v).is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    if v.additional_properties.is_some() {
        forbid(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if has_default(v) {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if v.title.as_deref().is_some_and(|x| !x.is_empty()) {
        forbid(errs, "title", "must be empty to be structural");
    }
    if v.description.as_deref().is_some_and(|x| !x.is_empty()) {
        forbid(errs, "description", "must be empty to be structural");
    }
    if yes(v.nullable) {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if yes(v.x_kubernetes_preserve_unknown_fields) {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if yes(v.x_kubernetes_embedded_resource) {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if yes(v.x_kubernetes_int_or_string) {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if v.x_kubernetes_list_map_keys
        .as_ref()
        .is_some_and(|k| !k.is_empty())
    {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.x_kubernetes_list_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if v.x_kubernetes_map_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if v.x_kubernetes_validations
        .as_ref()
        .is_some_and(|k| !k.is_empty())
    {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if v.properties
        .as_ref()
        .is_some_and(|p| p.contains_key("metadata"))
    {
        errs.push(FieldError::forbidden(
            key(&child(path, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateValueValidationCompleteness`.
fn value_completeness(
    v: &JSONSchemaProps,
    s: Option<&JSONSchemaProps>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > crate::MAX_DEPTH {
        return;
    }
    if let Some(not) = &v.not {
        nested_completeness(not, s, s_path, &child(v_path, "not"), errs, depth + 1);
    }
    for (name, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, x) in list.iter().flatten().enumerate() {
            nested_completeness(
                x,
                s,
                s_path,
                &index(&child(v_path, name), i),
                errs,
                depth + 1,
            );
        }
    }
}

fn nested_completeness(
    v: &JSONSchemaProps,
    s: Option<&JSONSchemaProps>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    if depth > crate::MAX_DEPTH {
        return;
    }
    value_completeness(v, Some(s), s_path, v_path, errs, depth);
    if let Some(vi) = items_schema(v) {
        nested_completeness(
            vi,
            items_schema(s),
            &child(s_path, "items"),
            &child(v_path, "items"),
            errs,
            depth + 1,
        );
    }
    for (k, vf) in props(v) {
        let sp = key(&child(s_path, "properties"), k);
        let vp = key(&child(v_path, "properties"), k);
        match s.properties.as_ref().and_then(|m| m.get(k)) {
            Some(sf) => nested_completeness(vf, Some(sf), &sp, &vp, errs, depth + 1),
            None => errs.push(FieldError::required(
                sp,
                format!("because it is defined in {vp}"),
            )),
        }
    }
}

/// Go's `regexp.Compile` error text for the common mistakes (`error parsing regexp: <code>:
/// `<expr>``); other errors carry the regex crate's description.
fn go_regexp_error(rust_err: &str, pattern: &str) -> String {
    let detail = rust_err.lines().last().unwrap_or(rust_err).trim();
    let detail = detail.strip_prefix("error: ").unwrap_or(detail);
    let code = match detail {
        "unclosed group" => format!("missing closing ): `{pattern}`"),
        "unopened group" => format!("unexpected ): `{pattern}`"),
        "unclosed character class" => format!(
            "missing closing ]: `{}`",
            pattern
                .rsplit_once('[')
                .map_or(pattern.to_string(), |(_, r)| format!("[{r}"))
        ),
        "repetition operator missing expression" => {
            "missing argument to repetition operator".to_string()
        }
        "look-around, including look-ahead and look-behind, is not supported" => {
            format!(
                "invalid or unsupported Perl syntax: `{}`",
                pattern
                    .find("(?")
                    .map_or("(?", |i| &pattern[i..(i + 3).min(pattern.len())])
            )
        }
        other => other.to_string(),
    };
    format!("error parsing regexp: {code}")
}
