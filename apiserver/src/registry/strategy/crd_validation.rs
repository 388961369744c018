//! Validation of CustomResourceDefinitions themselves (upstream's
//! `apiextensions-apiserver/pkg/apis/apiextensions/validation`): names, group, scope, versions,
//! schemas (through the `schema` and `k8s_cel` crates), subresources, printer columns, selectable
//! fields, conversion, and the update and status rules.
//!
//! WORK IN PROGRESS (issue 15): placeholders for the interface; the rules land next.

use api::validation::FieldError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Errors of a new CRD.
pub fn validate_crd(_crd: &CustomResourceDefinition) -> Vec<FieldError> {
    Vec::new()
}

/// Errors of an update of a CRD (`old` is the stored object).
pub fn validate_crd_update(
    _crd: &CustomResourceDefinition,
    _old: &CustomResourceDefinition,
) -> Vec<FieldError> {
    Vec::new()
}

/// Errors of an update of a CRD's status.
pub fn validate_crd_status_update(
    _crd: &CustomResourceDefinition,
    _old: &CustomResourceDefinition,
) -> Vec<FieldError> {
    Vec::new()
}
