//! Structural schemas of CustomResourceDefinitions (upstream's
//! `apiextensions-apiserver/pkg/apiserver/schema` and the CRD schema rules of
//! `pkg/apis/apiextensions/validation`), Kubernetes 1.33.
//!
//! - [`validate_crd_schema`]: what kube-apiserver refuses in a CRD version's `openAPIV3Schema`;
//!   [`validate_status_root`] for versions with the status subresource.
//! - [`valid_field_path`]: an `x-kubernetes-validations` `fieldPath` resolved against a schema
//!   (the error path of a failing rule).
//! - [`Structural`]: a schema that passed it, compiled once, for the CR serving path:
//!   [`Structural::validate`] (kube-openapi's validator, embedded-resource metadata, list-type
//!   uniqueness), [`Structural::validate_update`] (the same, ratcheted),
//!   [`Structural::prune`], [`Structural::coerce_metadata`],
//!   [`Structural::apply_defaults`], and the lookups server-side apply, printer columns and the
//!   scale subresource need ([`Structural::list_type`], [`Structural::map_is_atomic`],
//!   [`Structural::schema_at`]).
//!
//! # Order on the request path (upstream's codec, then strategy)
//! Decoding a create/update body, kube-apiserver does, in this order:
//! 1. [`Structural::coerce_root_metadata`] with `drop_invalid = false` (request bodies; `true`
//!    when reading stored objects): the root `metadata` re-encoded as `ObjectMeta`; its
//!    unknown-field paths come first in the unknown-field list.
//! 2. [`Structural::prune`]: unknown fields removed (their paths, sorted, follow), then
//!    non-nullable `null`s without a default dropped.
//! 3. [`Structural::coerce_embedded_metadata`]: embedded resources' metadata (its unknown-field
//!    paths come last). With `fieldValidation=Strict` each unknown path becomes
//!    `unknown field "spec.foo"`; with `Warn` a warning.
//! 4. [`Structural::apply_defaults`] (also when reading stored objects).
//! 5. [`Structural::validate`] on create, [`Structural::validate_update`] on update (with the
//!    apiserver's object-meta validation of the root `metadata`, and CEL rules, beside it).
//!
//! [`Structural::coerce_metadata`] is steps 1 and 3 in one call (reading stored objects, where
//! the unknown paths are not reported).
//!
//! # Bounds
//! Every walk stops at [`MAX_DEPTH`] levels of nesting (`serde_json` refuses deeper JSON
//! anyway); every walk is linear in the value, except validation, which is at most schema size
//! times value size (each `anyOf` branch sees the value again) and has a work budget on top;
//! `uniqueItems` and list-type uniqueness are hash-based. Nothing here panics on any schema or
//! value.

mod crd_schema;
mod defaulting;
mod fieldpath;
mod formats;
mod gofmt;
mod listtype;
mod node;
mod objectmeta;
mod prune;
mod structural;
mod validator;

use api::validation::FieldError;
pub use fieldpath::valid_field_path;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use node::Node;
use serde_json::Value;

/// Nesting levels every walk goes down at most (schemas and values).
pub const MAX_DEPTH: usize = 128;

/// How a list merges in server-side apply (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// `atomic` (the default): replaced as a whole.
    Atomic,
    /// `set`: scalars, merged by value.
    Set,
    /// `map`: objects, merged by `x-kubernetes-list-map-keys`.
    Map(Vec<String>),
}

/// A CRD version's schema after the structural checks, compiled for validation, pruning and
/// defaulting.
#[derive(Debug, Clone)]
pub struct Structural {
    props: JSONSchemaProps,
    root: Node,
}

/// Errors of a CRD version's `openAPIV3Schema` at `path` (e.g.
/// `spec.versions[0].schema.openAPIV3Schema`): the structural rules and the CRD schema rules, with
/// upstream's messages and order. CEL compilation and cost of `x-kubernetes-validations` are the
/// `k8s-cel` crate's; the status-subresource rule is [`validate_status_root`].
pub fn validate_crd_schema(props: &JSONSchemaProps, path: &str) -> Vec<FieldError> {
    crd_schema::validate(props, path)
}

/// Fields allowed at the root of a schema when the status subresource is enabled (upstream
/// `allowedFieldsAtRootSchema`, by their JSON names).
const ALLOWED_AT_ROOT_WITH_STATUS: [&str; 22] = [
    "description",
    "type",
    "format",
    "title",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "required",
    "items",
    "properties",
    "externalDocs",
    "example",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
];

/// Upstream's restriction of the root of `openAPIV3Schema` (at `path`) when the version has the
/// status subresource: type `object`, and only fields whose meaning survives splitting off
/// `properties[status]`. `path` is the `openAPIV3Schema` path, as for [`validate_crd_schema`];
/// upstream reports these errors before that function's. (Upstream shows the whole schema as
/// the bad value of the second error; here it is `""`.)
pub fn validate_status_root(props: &JSONSchemaProps, path: &str) -> Vec<FieldError> {
    let Ok(Value::Object(fields)) = serde_json::to_value(props) else {
        return Vec::new();
    };
    let is_zero = |v: &Value| match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    };
    let mut errs = Vec::new();
    for (k, v) in &fields {
        if is_zero(v) {
            continue;
        }
        if k == "type" {
            if v.as_str() != Some("object") {
                errs.push(FieldError::invalid_value(
                    format!("{path}.type"),
                    v,
                    "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                ));
                break;
            }
            continue;
        }
        if !ALLOWED_AT_ROOT_WITH_STATUS.contains(&k.as_str()) {
            errs.push(FieldError::invalid(
                path,
                "",
                "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled",
            ));
            break;
        }
    }
    errs
}

impl Structural {
    /// The structural form of a schema that passed [`validate_crd_schema`].
    pub fn new(props: &JSONSchemaProps) -> Self {
        Structural {
            props: props.clone(),
            root: Node::build(props),
        }
    }

    /// The schema it was built from.
    pub fn props(&self) -> &JSONSchemaProps {
        &self.props
    }

    /// Errors of a custom object against the schema, all of them, as a CR create gets them:
    /// kube-openapi's validation of the whole object (root `metadata` only against what the
    /// schema says of it, i.e. name and generateName restrictions), embedded resources'
    /// `apiVersion`/`kind`/`metadata`, and `x-kubernetes-list-type` set/map uniqueness. The
    /// object-meta validation of the root `metadata` is the caller's.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validator::validate(&self.root, obj, "");
        errs.extend(objectmeta::validate(obj, &self.root, false));
        errs.extend(listtype::validate(obj, &self.root));
        errs
    }

    /// [`Structural::validate`] of an update, with upstream's ratcheting of the schema
    /// validation (`CRDValidationRatcheting`, on by default in 1.33): a value that fails but is
    /// unchanged from the old object (object fields correlated by name, `map` list items by
    /// their keys) is not an error. Embedded metadata and list uniqueness are not ratcheted.
    pub fn validate_update(&self, obj: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validator::validate_update(&self.root, obj, old);
        errs.extend(objectmeta::validate(obj, &self.root, false));
        errs.extend(listtype::validate(obj, &self.root));
        errs
    }

    /// Applies the schema's defaults (deep copies), where fields are missing or non-nullable
    /// `null`. Call after [`Structural::prune`].
    pub fn apply_defaults(&self, obj: &mut Value) {
        defaulting::apply(obj, &self.root, 0);
    }

    /// Removes fields the schema does not declare and returns their paths (`spec.foo`,
    /// `spec.list[0].bar`), sorted; the root's (and embedded resources') `apiVersion`, `kind`
    /// and `metadata` stay. Then drops non-nullable `null`s that have no default (they are not
    /// reported), as upstream's decoder does next.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let pruned = prune::prune(obj, &self.root, true);
        prune::prune_nulls(obj, Some(&self.root), 0);
        pruned
    }

    /// Upstream's ObjectMeta coercion of the root `metadata` and of every embedded resource's
    /// `apiVersion`, `kind` and `metadata` ([`Structural::coerce_root_metadata`] then
    /// [`Structural::coerce_embedded_metadata`]); returns the dropped unknown fields' paths.
    pub fn coerce_metadata(
        &self,
        obj: &mut Value,
        drop_invalid: bool,
    ) -> Result<Vec<String>, FieldError> {
        let mut unknown = self.coerce_root_metadata(obj, drop_invalid)?;
        unknown.extend(self.coerce_embedded_metadata(obj, drop_invalid)?);
        Ok(unknown)
    }

    /// `GetObjectMeta` + `SetObjectMeta` of the root: `metadata` re-encoded as `ObjectMeta`
    /// (unknown fields dropped, empty fields omitted, timestamps normalized to UTC seconds).
    /// Returns the unknown fields' paths (`metadata.foo`), which upstream lists before the pruned
    /// ones. An ill-typed field is an error (`metadata: Invalid value: …`; upstream's decoder
    /// fails the request), or, with `drop_invalid` (reading stored objects), dropped.
    pub fn coerce_root_metadata(
        &self,
        obj: &mut Value,
        drop_invalid: bool,
    ) -> Result<Vec<String>, FieldError> {
        let mut unknown = Vec::new();
        let Some(map) = obj.as_object_mut() else {
            return Ok(unknown);
        };
        if let Some(meta) = map.get("metadata") {
            match objectmeta::coerce_meta(meta, "metadata", drop_invalid, &mut unknown) {
                Ok(m) => {
                    map.insert("metadata".to_string(), m);
                }
                Err(e) => return Err(FieldError::invalid_value("metadata", meta, e)),
            }
        }
        Ok(unknown)
    }

    /// `objectmeta.Coerce` of the embedded resources (after pruning, upstream): their
    /// `apiVersion`/`kind` must be strings and their `metadata` is coerced as the root's.
    /// Returns the unknown metadata fields' paths (`spec.template.metadata.foo`), which upstream
    /// lists after the pruned ones.
    pub fn coerce_embedded_metadata(
        &self,
        obj: &mut Value,
        drop_invalid: bool,
    ) -> Result<Vec<String>, FieldError> {
        objectmeta::coerce(obj, &self.root, false, drop_invalid)
    }

    /// The schema of the field at `path` (field names from the root; list positions omitted:
    /// a list's items are entered implicitly), through `properties` and `additionalProperties`.
    /// For printer columns, the scale subresource's paths, SSA.
    pub fn schema_at(&self, path: &[&str]) -> Option<&JSONSchemaProps> {
        let mut cur = &self.props;
        for seg in path {
            cur = items_of(cur).unwrap_or(cur);
            cur = match cur.properties.as_ref().and_then(|p| p.get(*seg)) {
                Some(p) => p,
                None => match &cur.additional_properties {
                    Some(JSONSchemaPropsOrBool::Schema(s)) => s,
                    _ => return None,
                },
            };
        }
        Some(cur)
    }

    /// The schema at a simple JSON path such as `.spec.replicas` or `.status.conditions[0].type`
    /// (printer columns, scale paths); indices are skipped.
    pub fn schema_at_json_path(&self, json_path: &str) -> Option<&JSONSchemaProps> {
        let segs: Vec<&str> = json_path
            .trim_start_matches('.')
            .split('.')
            .filter(|s| !s.is_empty())
            .map(|s| s.split('[').next().unwrap_or(s))
            .collect();
        self.schema_at(&segs)
    }

    /// The list type of the list at `path` (field names from the root, list positions omitted);
    /// `None` when `path` is not a list of the schema.
    pub fn list_type(&self, path: &[&str]) -> Option<ListType> {
        let s = self.schema_at(path)?;
        if s.type_.as_deref() != Some("array") {
            return None;
        }
        Some(match s.x_kubernetes_list_type.as_deref() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(s.x_kubernetes_list_map_keys.clone().unwrap_or_default()),
            _ => ListType::Atomic,
        })
    }

    /// Whether the map at `path` is `x-kubernetes-map-type: atomic`.
    pub fn map_is_atomic(&self, path: &[&str]) -> bool {
        self.schema_at(path)
            .is_some_and(|s| s.x_kubernetes_map_type.as_deref() == Some("atomic"))
    }
}

fn items_of(s: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(i)) if s.type_.as_deref() == Some("array") => Some(i),
        _ => None,
    }
}
