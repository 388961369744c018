//! The schema model rules are compiled and evaluated against: upstream's `DeclType` of a structural
//! schema node (`apiserver/pkg/cel/common/schemas.go`, `apiextensions-apiserver/.../cel/model`),
//! reduced to what conversion, the field-reference check and cost estimation need.
//!
//! Property names are CEL-escaped here once (`cel.Escape`); names that cannot be escaped are left
//! out of the object type, as upstream leaves them out of the `DeclType`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The largest request the apiserver accepts (`apiserver/pkg/apis/cel/config.go`,
/// `MaxRequestSizeBytes`): the bound on sizes a schema leaves open.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// The CEL type of one schema node.
#[derive(Debug, Clone)]
pub enum Kind {
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    /// `x-kubernetes-int-or-string`, or anything else typed `dyn`.
    Dyn,
    List(Arc<Node>),
    /// A map with string keys (`additionalProperties`).
    Map(Arc<Node>),
    /// An object: declared properties by escaped name. `open` for
    /// `x-kubernetes-preserve-unknown-fields` objects, whose undeclared fields are `dyn`.
    Object {
        fields: BTreeMap<String, Field>,
        open: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Field {
    /// The JSON property name.
    pub json: String,
    pub node: Arc<Node>,
}

/// A schema node's type and the bounds cost estimation uses.
#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    /// The upstream type name used as the value of `field.Invalid` (`object`, `string`, ...).
    pub type_name: String,
    /// `maxItems` / `maxProperties` / `maxLength`, or the bound the request size implies.
    pub max_elements: u64,
    /// `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`.
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub map_type: Option<String>,
}

const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// `cel.Escape`: the CEL field name of a property, or `None` if it cannot be expressed.
pub fn escape(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok_first = first.is_ascii_alphabetic() || matches!(first, '_' | '.' | '-' | '/');
    let ok_rest = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    if !ok_first || !ok_rest {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '_' => out.push_str("__underscores__"),
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
    }
    Some(out)
}

/// The estimated minimum serialized size of a value of this schema, as upstream's
/// `estimateMinSizeJSON` (used to bound unbounded lists and maps by the request size).
fn min_serialized_size(p: &JSONSchemaProps) -> u64 {
    if p.x_kubernetes_int_or_string == Some(true) {
        return 1;
    }
    match p.type_.as_deref() {
        Some("boolean") => 4,
        Some("number") | Some("integer") => 1,
        Some("string") => match p.format.as_deref() {
            Some("duration") => 4,
            Some("date") => 12,
            Some("date-time") => 24,
            _ => 2,
        },
        Some("array") => 2,
        Some("object") => 2,
        _ => 1,
    }
}

fn bound(declared: Option<i64>, per_element: u64) -> u64 {
    match declared {
        Some(n) if n >= 0 => n as u64,
        _ => (MAX_REQUEST_SIZE_BYTES - 2) / per_element.max(1),
    }
}

fn items_of(p: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &p.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s),
        Some(JSONSchemaPropsOrArray::Schemas(v)) => v.first(),
        None => None,
    }
}

fn additional_of(p: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &p.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s),
        _ => None,
    }
}

/// Builds the node for `p`; `resource_root` adds `apiVersion`, `kind` and `metadata` (name and
/// generateName) as upstream's `WithTypeAndObjectMeta` does for the resource root and embedded
/// resources.
pub fn node(p: &JSONSchemaProps, resource_root: bool) -> Arc<Node> {
    Arc::new(build(
        p,
        resource_root || p.x_kubernetes_embedded_resource == Some(true),
    ))
}

fn build(p: &JSONSchemaProps, with_meta: bool) -> Node {
    let ty = p.type_.as_deref().unwrap_or("");
    let leaf = |kind, max| Node {
        kind,
        type_name: ty.to_owned(),
        max_elements: max,
        list_type: None,
        list_map_keys: Vec::new(),
        map_type: None,
    };
    if p.x_kubernetes_int_or_string == Some(true) {
        return Node {
            type_name: ty.to_owned(),
            ..leaf(Kind::Dyn, bound(p.max_length, 1))
        };
    }
    match ty {
        "boolean" => leaf(Kind::Bool, 0),
        "integer" => leaf(Kind::Int, 0),
        "number" => leaf(Kind::Double, 0),
        "string" => {
            let max = match p.max_length {
                Some(n) if n >= 0 => n as u64,
                _ => MAX_REQUEST_SIZE_BYTES.saturating_sub(2),
            };
            match p.format.as_deref() {
                Some("byte") => leaf(Kind::Bytes, max),
                Some("date-time") | Some("date") => leaf(Kind::Timestamp, 0),
                Some("duration") => leaf(Kind::Duration, 0),
                _ => leaf(Kind::String, max),
            }
        }
        "array" => {
            let item = items_of(p)
                .map(|i| node(i, false))
                .unwrap_or_else(|| Arc::new(leaf(Kind::Dyn, 0)));
            let per = items_of(p).map(min_serialized_size).unwrap_or(1) + 1;
            Node {
                kind: Kind::List(item),
                type_name: ty.to_owned(),
                max_elements: bound(p.max_items, per),
                list_type: p.x_kubernetes_list_type.clone(),
                list_map_keys: p.x_kubernetes_list_map_keys.clone().unwrap_or_default(),
                map_type: None,
            }
        }
        _ => {
            // "object", or no type (preserve-unknown-fields / embedded resources).
            let open =
                p.x_kubernetes_preserve_unknown_fields == Some(true) && p.properties.is_none();
            let max_props = |per: u64| bound(p.max_properties, per + 4);
            if let Some(value) = additional_of(p) {
                return Node {
                    kind: Kind::Map(node(value, false)),
                    type_name: ty.to_owned(),
                    max_elements: max_props(min_serialized_size(value)),
                    list_type: None,
                    list_map_keys: Vec::new(),
                    map_type: p.x_kubernetes_map_type.clone(),
                };
            }
            let mut fields = BTreeMap::new();
            if let Some(props) = &p.properties {
                for (name, sub) in props {
                    if let Some(escaped) = escape(name) {
                        fields.insert(
                            escaped,
                            Field {
                                json: name.clone(),
                                node: node(sub, false),
                            },
                        );
                    }
                }
            }
            if with_meta {
                add_type_and_object_meta(&mut fields);
            }
            if p.properties.is_none() && !with_meta && (open || ty.is_empty()) {
                return Node {
                    type_name: ty.to_owned(),
                    ..leaf(Kind::Dyn, max_props(1))
                };
            }
            Node {
                kind: Kind::Object { fields, open },
                type_name: ty.to_owned(),
                max_elements: max_props(1),
                list_type: None,
                list_map_keys: Vec::new(),
                map_type: p.x_kubernetes_map_type.clone(),
            }
        }
    }
}

fn string_node() -> Arc<Node> {
    Arc::new(Node {
        kind: Kind::String,
        type_name: "string".to_owned(),
        max_elements: MAX_REQUEST_SIZE_BYTES.saturating_sub(2),
        list_type: None,
        list_map_keys: Vec::new(),
        map_type: None,
    })
}

fn add_type_and_object_meta(fields: &mut BTreeMap<String, Field>) {
    for name in ["apiVersion", "kind"] {
        fields.entry(name.to_owned()).or_insert_with(|| Field {
            json: name.to_owned(),
            node: string_node(),
        });
    }
    let mut meta = BTreeMap::new();
    for name in ["name", "generateName"] {
        meta.insert(
            name.to_owned(),
            Field {
                json: name.to_owned(),
                node: string_node(),
            },
        );
    }
    fields.insert(
        "metadata".to_owned(),
        Field {
            json: "metadata".to_owned(),
            node: Arc::new(Node {
                kind: Kind::Object {
                    fields: meta,
                    open: false,
                },
                type_name: "object".to_owned(),
                max_elements: 2,
                list_type: None,
                list_map_keys: Vec::new(),
                map_type: None,
            }),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_cel_escape() {
        assert_eq!(escape("foo").as_deref(), Some("foo"));
        assert_eq!(
            escape("a-b.c/d_e").as_deref(),
            Some("a__dash__b__dot__c__slash__d__underscores__e")
        );
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
    }
}
