//! The compiled form of a CRD schema that validation, pruning and defaulting walk: upstream's
//! `Structural` and kube-openapi's `spec.Schema` in one tree, built once per CRD version.
//!
//! Built the way the apiserver converts a `JSONSchemaProps` for its validator
//! (`ConvertJSONSchemaPropsWithPostProcess` with `StripUnsupportedFormatsPostProcessor`):
//! `x-kubernetes-int-or-string` becomes the type list `integer,string`, formats the apiserver does
//! not support are dropped, patterns are compiled once. A JSON `null` default is no default, as
//! upstream's `JSON.Object == nil`.
//!
//! Bounded: nodes deeper than [`crate::MAX_DEPTH`] are not built (the subtree is treated as
//! `x-kubernetes-preserve-unknown-fields` without constraints); `validate_crd_schema` refuses such
//! schemas, so a served CRD never has one.

use crate::formats;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;

/// A `pattern`, compiled.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    pub src: String,
    pub re: Result<Regex, String>,
}

/// `additionalProperties`: `Bool(false)` forbids unknown keys; a schema applies to every key
/// (upstream's `SchemaOrBool{Allows: true, Schema: s}`).
#[derive(Debug, Clone)]
pub(crate) enum Additional {
    Bool(bool),
    Schema(Box<Node>),
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    /// kube-openapi's type list: empty, one type, or `integer,string` for int-or-string.
    pub types: Vec<&'static str>,
    pub nullable: bool,
    /// The format after stripping unsupported ones ("" when none applies).
    pub format: String,
    pub default: Option<Value>,
    pub enum_: Option<Vec<Value>>,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: Option<Pattern>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub multiple_of: Option<f64>,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    pub properties: BTreeMap<String, Node>,
    pub additional: Option<Additional>,
    pub items: Option<Box<Node>>,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub preserve_unknown: bool,
    pub embedded: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
}

fn type_name(t: &str) -> Option<&'static str> {
    Some(match t {
        "object" => "object",
        "array" => "array",
        "string" => "string",
        "integer" => "integer",
        "number" => "number",
        "boolean" => "boolean",
        "null" => "null",
        _ => return None,
    })
}

/// Compiles `pattern` as Go's `regexp.Compile` would accept it; the error text is the regex
/// crate's.
pub(crate) fn compile_pattern(src: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(src)
        // A pattern is a few hundred bytes in practice; the bound keeps a hostile one from
        // compiling into a huge automaton.
        .size_limit(4 << 20)
        .build()
        .map_err(|e| e.to_string())
}

impl Node {
    pub(crate) fn build(p: &JSONSchemaProps) -> Node {
        Self::build_at(p, 0)
    }

    /// A node that accepts and keeps anything (the subtree below the depth bound).
    fn unbounded() -> Node {
        Node {
            preserve_unknown: true,
            ..Node::default()
        }
    }

    fn build_at(p: &JSONSchemaProps, depth: usize) -> Node {
        if depth > crate::MAX_DEPTH {
            return Node::unbounded();
        }
        let d = depth + 1;
        let type_ = p.type_.clone().unwrap_or_default();
        let int_or_string = p.x_kubernetes_int_or_string == Some(true);
        let types: Vec<&'static str> = if int_or_string {
            vec!["integer", "string"]
        } else {
            match type_name(&type_) {
                Some(t) => vec![t],
                // An unknown type name: the CRD schema checks refuse it; kube-openapi would
                // fail every value against it, which `Unknown` reproduces.
                None if !type_.is_empty() => vec!["<unknown>"],
                None => vec![],
            }
        };
        let format = strip_format(p.format.as_deref().unwrap_or(""), &types);
        let nodes = |v: &Option<Vec<JSONSchemaProps>>| -> Vec<Node> {
            v.iter().flatten().map(|s| Node::build_at(s, d)).collect()
        };
        Node {
            types,
            nullable: p.nullable == Some(true),
            format,
            default: p
                .default
                .as_ref()
                .map(|j| j.0.clone())
                .filter(|v| !v.is_null()),
            enum_: p
                .enum_
                .as_ref()
                .map(|e| e.iter().map(|j| j.0.clone()).collect()),
            maximum: p.maximum,
            exclusive_maximum: p.exclusive_maximum == Some(true),
            minimum: p.minimum,
            exclusive_minimum: p.exclusive_minimum == Some(true),
            max_length: p.max_length,
            min_length: p.min_length,
            pattern: p
                .pattern
                .as_ref()
                .filter(|s| !s.is_empty())
                .map(|s| Pattern {
                    src: s.clone(),
                    re: compile_pattern(s),
                }),
            max_items: p.max_items,
            min_items: p.min_items,
            unique_items: p.unique_items == Some(true),
            multiple_of: p.multiple_of,
            max_properties: p.max_properties,
            min_properties: p.min_properties,
            required: p.required.clone().unwrap_or_default(),
            properties: p
                .properties
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), Node::build_at(v, d)))
                .collect(),
            additional: p.additional_properties.as_ref().map(|a| match a {
                JSONSchemaPropsOrBool::Bool(b) => Additional::Bool(*b),
                JSONSchemaPropsOrBool::Schema(s) => {
                    Additional::Schema(Box::new(Node::build_at(s, d)))
                }
            }),
            items: match &p.items {
                Some(JSONSchemaPropsOrArray::Schema(s)) => Some(Box::new(Node::build_at(s, d))),
                // Tuple items are refused by the CRD schema checks.
                _ => None,
            },
            all_of: nodes(&p.all_of),
            any_of: nodes(&p.any_of),
            one_of: nodes(&p.one_of),
            not: p.not.as_ref().map(|n| Box::new(Node::build_at(n, d))),
            preserve_unknown: p.x_kubernetes_preserve_unknown_fields == Some(true),
            embedded: p.x_kubernetes_embedded_resource == Some(true),
            list_type: p.x_kubernetes_list_type.clone(),
            list_map_keys: p.x_kubernetes_list_map_keys.clone().unwrap_or_default(),
        }
    }

    /// The structural schema of the value under key `k` of an object: `properties[k]`, else
    /// `additionalProperties` (its schema; `None` when it is a bool).
    pub(crate) fn field(&self, k: &str) -> Option<&Node> {
        match self.properties.get(k) {
            Some(n) => Some(n),
            None => match &self.additional {
                Some(Additional::Schema(s)) => Some(s),
                _ => None,
            },
        }
    }

    /// Whether `additionalProperties` is set at all (upstream `s.AdditionalProperties != nil`).
    pub(crate) fn has_additional(&self) -> bool {
        self.additional.is_some()
    }

    /// The schema of `additionalProperties` when it is one.
    pub(crate) fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }
}

/// `StripUnsupportedFormatsPostProcessorForVersion(1.33)`: keeps a format only where the
/// apiserver validates it.
fn strip_format(format: &str, types: &[&'static str]) -> String {
    if format.is_empty() {
        return String::new();
    }
    let single = if types.len() == 1 { types[0] } else { "" };
    let keep = match single {
        "" | "string" => formats::is_supported(format),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    if keep {
        format.to_string()
    } else {
        String::new()
    }
}
