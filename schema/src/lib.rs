//! Structural schemas of CustomResourceDefinitions (upstream's
//! `apiextensions-apiserver/pkg/apiserver/schema`): whether a CRD's OpenAPI v3 schema is
//! structural, and, for a structural schema, validating, defaulting and pruning custom objects.
//!
//! WORK IN PROGRESS (issue 15): the interface the apiserver calls; the bodies land with the
//! schema branch.

use api::validation::FieldError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::Value;

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

/// A CRD version's schema after the structural checks.
#[derive(Debug, Clone)]
pub struct Structural {
    props: JSONSchemaProps,
}

/// Errors of a CRD version's `openAPIV3Schema` at `path` (e.g.
/// `spec.versions[0].schema.openAPIV3Schema`): the structural rules and the CRD schema rules, with
/// upstream's messages.
pub fn validate_crd_schema(_props: &JSONSchemaProps, _path: &str) -> Vec<FieldError> {
    Vec::new()
}

impl Structural {
    /// The structural form of a schema that passed [`validate_crd_schema`].
    pub fn new(props: &JSONSchemaProps) -> Self {
        Structural {
            props: props.clone(),
        }
    }

    /// The schema it was built from.
    pub fn props(&self) -> &JSONSchemaProps {
        &self.props
    }

    /// Errors of a custom object against the schema (everything but `metadata`, which object-meta
    /// validation covers; embedded resources' metadata included), with kube-openapi's messages.
    pub fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Applies the schema's defaults.
    pub fn apply_defaults(&self, _obj: &mut Value) {}

    /// Removes fields the schema does not declare; returns their paths (`spec.foo`), in order.
    pub fn prune(&self, _obj: &mut Value) -> Vec<String> {
        Vec::new()
    }

    /// The list type of the list at `path` (field names from the root, list positions omitted);
    /// `None` when `path` is not a list of the schema.
    pub fn list_type(&self, _path: &[&str]) -> Option<ListType> {
        None
    }

    /// Whether the map at `path` is `x-kubernetes-map-type: atomic`.
    pub fn map_is_atomic(&self, _path: &[&str]) -> bool {
        false
    }
}
