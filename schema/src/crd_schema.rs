//! The checks kube-apiserver makes of a CRD version's `openAPIV3Schema`
//! (`apis/apiextensions/validation/validation.go`: `validateCustomResourceDefinitionValidation`
//! and `ValidateCustomResourceDefinitionOpenAPISchema`, with v1's options: defaults allowed and
//! required to be pruned, valid property types, atomic set items, map-list keys required or
//! defaulted).
//!
//! Order as upstream: `nullable` at the root, the structural errors (sorted), then — only for a
//! structural schema — the defaults' errors, then the OpenAPI schema rules, depth first in
//! property order. Not here: the CEL compilation and cost of `x-kubernetes-validations` (the
//! `k8s-cel` crate) and the status-subresource restriction of root fields (it needs the CRD's
//! subresources; [`crate::validate_status_root`]).

use crate::gofmt::{bad_value, child, index, key};
use crate::listtype::go_sharp_v;
use crate::node::Node;
use crate::{objectmeta, prune, structural, validator};
use api::validation::FieldError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

/// `specStandardValidatorV3`'s context.
#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    disallow_defaults_reason: String,
    inside_resource_meta: bool,
}

impl Ssv {
    fn forbidden_defaults(&self, reason: String) -> Ssv {
        Ssv {
            allow_defaults: false,
            disallow_defaults_reason: reason,
            ..self.clone()
        }
    }
}

const META_FIELDS: [&str; 3] = ["metadata", "kind", "apiVersion"];

fn t(s: &JSONSchemaProps) -> &str {
    s.type_.as_deref().unwrap_or("")
}

fn depth_of(s: &JSONSchemaProps, depth: usize) -> usize {
    if depth > crate::MAX_DEPTH {
        return depth;
    }
    let mut children: Vec<&JSONSchemaProps> = Vec::new();
    children.extend(s.properties.iter().flatten().map(|(_, v)| v));
    children.extend(s.definitions.iter().flatten().map(|(_, v)| v));
    children.extend(s.all_of.iter().flatten());
    children.extend(s.any_of.iter().flatten());
    children.extend(s.one_of.iter().flatten());
    children.extend(s.not.as_deref());
    children.extend(s.pattern_properties.iter().flatten().map(|(_, v)| v));
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(b)) => children.push(b),
        Some(JSONSchemaPropsOrArray::Schemas(v)) => children.extend(v),
        None => {}
    }
    for a in [&s.additional_properties, &s.additional_items] {
        if let Some(JSONSchemaPropsOrBool::Schema(b)) = a {
            children.push(b);
        }
    }
    children
        .into_iter()
        .map(|c| depth_of(c, depth + 1))
        .max()
        .unwrap_or(depth)
}

/// See [`crate::validate_crd_schema`].
pub(crate) fn validate(s: &JSONSchemaProps, path: &str) -> Vec<FieldError> {
    if depth_of(s, 0) > crate::MAX_DEPTH {
        return vec![FieldError::forbidden(
            path,
            format!(
                "must not be nested more than {} levels deep",
                crate::MAX_DEPTH
            ),
        )];
    }
    let mut errs = Vec::new();
    if s.nullable == Some(true) {
        errs.push(FieldError::forbidden(
            child(path, "nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let structural_errs = structural::validate(s, path);
    if structural_errs.is_empty() {
        let node = Node::build(s);
        let mut root = node.clone();
        root.embedded = true;
        validate_defaults(&root, path, false, &mut errs);
    } else {
        errs.extend(structural_errs);
    }
    let ssv = Ssv {
        allow_defaults: true,
        disallow_defaults_reason: String::new(),
        inside_resource_meta: false,
    };
    openapi_schema(s, path, &ssv, true, &mut errs);
    errs
}

/// `ValidateDefaults`: every default validates against its schema, is pruned, and keeps
/// embedded metadata valid. Not followed: `additionalProperties` (upstream does not).
fn validate_defaults(s: &Node, path: &str, inside_meta: bool, errs: &mut Vec<FieldError>) {
    let inside_meta = inside_meta && !s.embedded;
    if let Some(d) = &s.default {
        let dpath = child(path, "default");
        if inside_meta {
            errs.extend(validator::validate(s, d, &dpath));
        } else {
            let mut pruned = d.clone();
            prune::prune(&mut pruned, s, s.embedded);
            if pruned != *d {
                errs.push(FieldError {
                    value: Some(shown(d)),
                    ..FieldError::invalid_value(dpath.clone(), d, "must not have unknown fields")
                });
            }
            let mut coerced = d.clone();
            if let Err(e) = objectmeta::coerce(&mut coerced, s, s.embedded, false) {
                errs.push(under(e, &dpath));
            } else {
                let meta_errs = objectmeta::validate(d, s, s.embedded);
                if !meta_errs.is_empty() {
                    errs.extend(meta_errs.into_iter().map(|e| under(e, &dpath)));
                } else {
                    errs.extend(validator::validate(s, d, &dpath));
                }
            }
        }
    }
    if let Some(items) = &s.items {
        validate_defaults(items, &child(path, "items"), inside_meta, errs);
    }
    for (k, p) in &s.properties {
        let sub = inside_meta || (s.embedded && META_FIELDS.contains(&k.as_str()));
        validate_defaults(p, &key(&child(path, "properties"), k), sub, errs);
    }
}

/// A value as `field.Invalid` shows a default (`%#v` for compound values).
fn shown(v: &Value) -> String {
    match v {
        Value::Object(_) | Value::Array(_) => go_sharp_v(v),
        other => bad_value(other),
    }
}

/// Re-roots an error found at a relative path (`<nil>` is the value itself) under `prefix`.
fn under(mut e: FieldError, prefix: &str) -> FieldError {
    e.field = if e.field == "<nil>" || e.field.is_empty() {
        prefix.to_string()
    } else if e.field.starts_with('[') {
        format!("{prefix}{}", e.field)
    } else {
        format!("{prefix}.{}", e.field)
    };
    e
}

const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// `specStandardValidatorV3.validate`.
fn standard(s: &JSONSchemaProps, path: &str, ssv: &Ssv, errs: &mut Vec<FieldError>) {
    let ty = t(s);
    if !ty.is_empty() && !OPENAPI_V3_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            child(path, "type"),
            &Value::String(ty.into()),
            &OPENAPI_V3_TYPES,
        ));
    }
    if s.default.is_some() && !ssv.allow_defaults {
        let mut detail = "must not be set".to_string();
        if !ssv.disallow_defaults_reason.is_empty() {
            detail.push(' ');
            detail.push_str(&ssv.disallow_defaults_reason);
        }
        errs.push(FieldError::forbidden(child(path, "default"), detail));
    }
    let forbid = |errs: &mut Vec<FieldError>, f: &str, msg: &str| {
        errs.push(FieldError::forbidden(child(path, f), msg))
    };
    if s.id.as_deref().is_some_and(|x| !x.is_empty()) {
        forbid(errs, "id", "id is not supported");
    }
    if s.additional_items.is_some() {
        forbid(errs, "additionalItems", "additionalItems is not supported");
    }
    if s.pattern_properties.as_ref().is_some_and(|p| !p.is_empty()) {
        forbid(
            errs,
            "patternProperties",
            "patternProperties is not supported",
        );
    }
    if s.definitions.as_ref().is_some_and(|p| !p.is_empty()) {
        forbid(errs, "definitions", "definitions is not supported");
    }
    if s.dependencies.is_some() {
        forbid(errs, "dependencies", "dependencies is not supported");
    }
    if s.ref_path.is_some() {
        forbid(errs, "$ref", "$ref is not supported");
    }
    if ty == "null" {
        forbid(
            errs,
            "type",
            "type cannot be set to null, use nullable as an alternative",
        );
    }
    if matches!(&s.items, Some(JSONSchemaPropsOrArray::Schemas(v)) if !v.is_empty()) {
        forbid(
            errs,
            "items",
            "items must be a schema object and not an array",
        );
    }
    if ssv.inside_resource_meta && s.x_kubernetes_embedded_resource == Some(true) {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must not be used inside of resource meta",
        );
    }
}

/// `ValidateCustomResourceDefinitionOpenAPISchema` without the CEL compilation.
fn openapi_schema(
    s: &JSONSchemaProps,
    path: &str,
    ssv: &Ssv,
    is_root: bool,
    errs: &mut Vec<FieldError>,
) {
    standard(s, path, ssv, errs);
    if s.unique_items == Some(true) {
        errs.push(FieldError::forbidden(
            child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let has_props = s.properties.as_ref().is_some_and(|p| !p.is_empty());
    if let Some(a) = &s.additional_properties {
        let (allows, schema) = match a {
            JSONSchemaPropsOrBool::Bool(b) => (*b, None),
            JSONSchemaPropsOrBool::Schema(x) => (true, Some(&**x)),
        };
        if has_props && (!allows || schema.is_some()) {
            errs.push(FieldError::forbidden(
                child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ssv.inside_resource_meta {
            ssv.forbidden_defaults("inside additionalProperties applying to object metadata".into())
        } else {
            ssv.clone()
        };
        if let Some(x) = schema {
            openapi_schema(x, &child(path, "additionalProperties"), &sub, false, errs);
        }
    }
    for (k, p) in s.properties.iter().flatten() {
        let mut sub = ssv.clone();
        if (is_root || s.x_kubernetes_embedded_resource == Some(true))
            && META_FIELDS.contains(&k.as_str())
        {
            sub.inside_resource_meta = true;
            if is_root {
                sub = sub.forbidden_defaults(format!("in top-level {k}"));
            }
        }
        openapi_schema(p, &key(&child(path, "properties"), k), &sub, false, errs);
    }
    if let Some(not) = &s.not {
        openapi_schema(not, &child(path, "not"), ssv, false, errs);
    }
    for (name, list) in [
        ("allOf", &s.all_of),
        ("oneOf", &s.one_of),
        ("anyOf", &s.any_of),
    ] {
        for (i, x) in list.iter().flatten().enumerate() {
            openapi_schema(x, &index(&child(path, name), i), ssv, false, errs);
        }
    }
    for (k, x) in s.definitions.iter().flatten() {
        openapi_schema(x, &key(&child(path, "definitions"), k), ssv, false, errs);
    }
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(x)) => {
            openapi_schema(x, &child(path, "items"), ssv, false, errs)
        }
        Some(JSONSchemaPropsOrArray::Schemas(v)) => {
            for (i, x) in v.iter().enumerate() {
                openapi_schema(x, &index(&child(path, "items"), i), ssv, false, errs);
            }
        }
        None => {}
    }
    for (k, d) in s.dependencies.iter().flatten() {
        if let k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrStringArray::Schema(x) = d {
            openapi_schema(x, &key(&child(path, "dependencies"), k), ssv, false, errs);
        }
    }
    extensions(s, path, errs);
}

/// The `x-kubernetes-*` rules of `ValidateCustomResourceDefinitionOpenAPISchema`.
fn extensions(s: &JSONSchemaProps, path: &str, errs: &mut Vec<FieldError>) {
    let ty = t(s);
    if s.x_kubernetes_preserve_unknown_fields == Some(false) {
        errs.push(FieldError::invalid_value(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    let type_must_be = |errs: &mut Vec<FieldError>, want: &str, msg: &str| {
        if ty.is_empty() {
            errs.push(FieldError::required(child(path, "type"), msg));
        } else if ty != want {
            errs.push(FieldError::invalid(child(path, "type"), ty, msg));
        }
    };
    if let Some(mt) = &s.x_kubernetes_map_type {
        type_must_be(
            errs,
            "object",
            "must be object if x-kubernetes-map-type is specified",
        );
        if mt != "atomic" && mt != "granular" {
            errs.push(FieldError::not_supported(
                child(path, "x-kubernetes-map-type"),
                &Value::String(mt.clone()),
                &["atomic", "granular"],
            ));
        }
    }
    let items = match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(x)) => Some(&**x),
        _ => None,
    };
    let list_type = s.x_kubernetes_list_type.as_deref();
    if list_type.is_some() && ty != "array" {
        type_must_be(
            errs,
            "array",
            "must be array if x-kubernetes-list-type is specified",
        );
    } else if let (Some("set"), Some(is)) = (list_type, items) {
        let msg = "must be atomic as item of a list with x-kubernetes-list-type=set";
        let shown_list_type = is
            .x_kubernetes_list_type
            .as_ref()
            .map_or(Value::Null, |x| Value::String(x.clone()));
        match t(is) {
            "array"
                if is
                    .x_kubernetes_list_type
                    .as_deref()
                    .is_some_and(|x| x != "atomic") =>
            {
                errs.push(FieldError::invalid_value(
                    child(&child(path, "items"), "x-kubernetes-list-type"),
                    &shown_list_type,
                    msg,
                ));
            }
            "object" if is.x_kubernetes_map_type.as_deref() != Some("atomic") => {
                errs.push(FieldError::invalid_value(
                    child(&child(path, "items"), "x-kubernetes-map-type"),
                    &shown_list_type,
                    msg,
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = list_type {
        if lt != "atomic" && lt != "set" && lt != "map" {
            errs.push(FieldError::not_supported(
                child(path, "x-kubernetes-list-type"),
                &Value::String(lt.into()),
                &["atomic", "set", "map"],
            ));
        }
    }
    let keys = s.x_kubernetes_list_map_keys.clone().unwrap_or_default();
    let keys_shown = format!(
        "[]string{{{}}}",
        keys.iter()
            .map(|k| crate::gofmt::quote(k))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !keys.is_empty() {
        let msg = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(FieldError::required(
                child(path, "x-kubernetes-list-type"),
                msg,
            )),
            Some(lt) if lt != "map" => errs.push(FieldError::invalid(
                child(path, "x-kubernetes-list-type"),
                lt,
                msg,
            )),
            _ => {}
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(FieldError::required(
                child(path, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match &s.items {
            None => errs.push(FieldError::required(
                child(path, "items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(JSONSchemaPropsOrArray::Schemas(v)) => errs.push(FieldError::invalid_value(
                child(path, "items"),
                &serde_json::to_value(v).unwrap_or(Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(JSONSchemaPropsOrArray::Schema(is)) => {
                if t(is) != "object" {
                    errs.push(FieldError::invalid(
                        child(&child(path, "items"), "type"),
                        t(is),
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let mut seen = std::collections::HashSet::new();
                    for k in &keys {
                        match is.properties.as_ref().and_then(|p| p.get(k)) {
                            Some(p) => {
                                if t(p) == "array" || t(p) == "object" {
                                    errs.push(FieldError::invalid(
                                        child(&key(&child(&child(path, "items"), "properties"), k), "type"),
                                        t(is),
                                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                    ));
                                }
                            }
                            None => errs.push(FieldError {
                                value: Some(keys_shown.clone()),
                                ..FieldError::invalid(
                                    child(path, "x-kubernetes-list-map-keys"),
                                    "",
                                    "entries must all be names of item properties",
                                )
                            }),
                        }
                        if !seen.insert(k) {
                            errs.push(FieldError {
                                value: Some(keys_shown.clone()),
                                ..FieldError::invalid(
                                    child(path, "x-kubernetes-list-map-keys"),
                                    "",
                                    "must not contain duplicate entries",
                                )
                            });
                        }
                    }
                }
            }
        }
    }
    map_list_keys_map_set(s, items, path, errs);
    validation_rules(s, path, errs);
}

/// `validateMapListKeysMapSet`.
fn map_list_keys_map_set(
    s: &JSONSchemaProps,
    items: Option<&JSONSchemaProps>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let (Some(is), Some(lt)) = (items, s.x_kubernetes_list_type.as_deref()) else {
        return;
    };
    if lt != "set" && lt != "map" {
        return;
    }
    let ipath = child(path, "items");
    if is.nullable == Some(true) {
        errs.push(FieldError::forbidden(
            child(&ipath, "nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
        ));
    }
    if lt == "map" {
        let required = is.required.clone().unwrap_or_default();
        for k in s.x_kubernetes_list_map_keys.iter().flatten() {
            let Some(p) = is.properties.as_ref().and_then(|m| m.get(k)) else {
                continue;
            };
            let ppath = key(&child(&ipath, "properties"), k);
            if !required.contains(k) && p.default.is_none() {
                errs.push(FieldError::required(
                    child(&ppath, "default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if p.nullable == Some(true) {
                errs.push(FieldError::forbidden(
                    child(&ppath, "nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
}

/// The static checks of `x-kubernetes-validations` entries (compilation is the CEL crate's).
fn validation_rules(s: &JSONSchemaProps, path: &str, errs: &mut Vec<FieldError>) {
    let has_newlines = |x: &str| x.contains('\n') || x.contains('\r');
    for (i, rule) in s.x_kubernetes_validations.iter().flatten().enumerate() {
        let rpath = index(&child(path, "x-kubernetes-validations"), i);
        let trimmed_rule = rule.rule.trim();
        let message = rule.message.as_deref().unwrap_or("");
        let trimmed_msg = message.trim();
        if trimmed_rule.is_empty() {
            errs.push(FieldError::required(
                child(&rpath, "rule"),
                "rule is not specified",
            ));
        } else if !message.is_empty() && trimmed_msg.is_empty() {
            errs.push(FieldError::invalid(
                child(&rpath, "message"),
                message,
                "message must be non-empty if specified",
            ));
        } else if has_newlines(trimmed_msg) {
            errs.push(FieldError::invalid(
                child(&rpath, "message"),
                message,
                "message must not contain line breaks",
            ));
        } else if has_newlines(trimmed_rule) && trimmed_msg.is_empty() {
            errs.push(FieldError::required(
                child(&rpath, "message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        let msg_expr = rule.message_expression.as_deref().unwrap_or("");
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            errs.push(FieldError::required(
                child(&rpath, "messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.reason.as_deref() {
            const REASONS: [&str; 4] = [
                "FieldValueDuplicate",
                "FieldValueForbidden",
                "FieldValueInvalid",
                "FieldValueRequired",
            ];
            if !REASONS.contains(&reason) {
                errs.push(FieldError::not_supported(
                    child(&rpath, "reason"),
                    &Value::String(reason.into()),
                    &REASONS,
                ));
            }
        }
        let fp = rule.field_path.as_deref().unwrap_or("");
        if !fp.is_empty() && fp.trim().is_empty() {
            errs.push(FieldError::invalid(
                child(&rpath, "fieldPath"),
                fp,
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newlines(fp) {
            errs.push(FieldError::invalid(
                child(&rpath, "fieldPath"),
                fp,
                "fieldPath must not contain line breaks",
            ));
        }
        // `pathValid`, resolved from the schema the rule sits on.
        if !fp.is_empty() && crate::fieldpath::valid_field_path(fp, s).is_err() {
            errs.push(FieldError::invalid(
                child(&rpath, "fieldPath"),
                fp,
                "fieldPath must be a valid path",
            ));
        }
    }
}
