//! `networking.k8s.io/v1` IngressClasses, as upstream's `pkg/apis/networking/validation`,
//! `pkg/apis/networking/v1/defaults.go` and `pkg/registry/networking/ingressclass` define them:
//! `spec.controller` is a required, immutable domain-prefixed path of at most 250 bytes;
//! `spec.parameters` references a kind and name, with `scope` defaulted to `Cluster` (a namespace
//! exactly when the scope is `Namespace`); generation tracks the spec. Table: NAME CONTROLLER
//! PARAMETERS AGE.

use super::common::{object_at, semantically_equal};
use super::ingress::required_path_segment;
use super::job_spec::domain_prefixed_path;
use super::netvalid::{set, text};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, FieldError};
use serde_json::{json, Value};

const MAX_CONTROLLER_LENGTH: usize = 250;
/// `supportedIngressClassParametersReferenceScopes.List()`: sorted.
const PARAMETER_SCOPES: &[&str] = &["Cluster", "Namespace"];

/// `SetDefaults_IngressClass`: a parameters reference without a scope is cluster-scoped.
fn default_ingress_class(obj: &mut Value) {
    let has_params = obj
        .pointer("/spec/parameters")
        .is_some_and(Value::is_object);
    if has_params {
        if let Some(spec) = object_at(obj, "spec") {
            if let Some(p) = spec.get_mut("parameters").and_then(Value::as_object_mut) {
                if p.get("scope").is_none_or(Value::is_null) {
                    p.insert("scope".into(), json!("Cluster"));
                }
            }
        }
    }
}

/// `validateIngressClassParametersReference`.
fn validate_parameters(p: &Value) -> Vec<FieldError> {
    let path = "spec.parameters";
    let mut errs = Vec::new();
    if let Some(g) = set(p, "apiGroup").and_then(Value::as_str) {
        for m in validation::is_dns1123_subdomain(g) {
            errs.push(FieldError::invalid(format!("{path}.apiGroup"), g, m));
        }
    }
    errs.extend(required_path_segment(p, "kind", path));
    errs.extend(required_path_segment(p, "name", path));
    let Some(scope) = set(p, "scope") else {
        errs.push(FieldError::required(format!("{path}.scope"), ""));
        return errs;
    };
    let namespace = set(p, "namespace");
    match scope.as_str() {
        Some("Namespace") => match namespace {
            None => errs.push(FieldError::required(
                format!("{path}.namespace"),
                "`parameters.scope` is set to 'Namespace'",
            )),
            Some(ns) => {
                let ns = ns.as_str().unwrap_or("");
                for m in validation::is_dns1123_label(ns) {
                    errs.push(FieldError::invalid(format!("{path}.namespace"), ns, m));
                }
            }
        },
        Some("Cluster") => {
            if namespace.is_some() {
                errs.push(FieldError::forbidden(
                    format!("{path}.namespace"),
                    "`parameters.scope` is set to 'Cluster'",
                ));
            }
        }
        _ => errs.push(FieldError::not_supported(
            format!("{path}.scope"),
            scope,
            PARAMETER_SCOPES,
        )),
    }
    errs
}

/// `ValidateIngressClass` (its spec).
fn validate_ingress_class(obj: &Value) -> Vec<FieldError> {
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let controller = text(spec, "controller");
    let mut errs = Vec::new();
    if controller.is_empty() {
        errs.push(FieldError::required("spec.controller", ""));
    } else {
        if controller.len() > MAX_CONTROLLER_LENGTH {
            errs.push(FieldError::too_long(
                "spec.controller",
                format!("may not be more than {MAX_CONTROLLER_LENGTH} bytes"),
            ));
        }
        errs.extend(domain_prefixed_path("spec.controller", controller));
    }
    if let Some(p) = set(spec, "parameters") {
        errs.extend(validate_parameters(p));
    }
    errs
}

/// networking.k8s.io/v1 IngressClass.
pub struct IngressClassStrategy;

impl Strategy for IngressClassStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_ingress_class(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_ingress_class)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_ingress_class(new);
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate_ingress_class(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let (a, b) = (
            new.pointer("/spec/controller"),
            old.pointer("/spec/controller"),
        );
        if !semantically_equal(a, b) {
            let shown = a.and_then(Value::as_str).unwrap_or("");
            errs.push(FieldError::invalid(
                "spec.controller",
                shown,
                "field is immutable",
            ));
        }
        errs.extend(validate_ingress_class(new));
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Controller",
                "string",
                "",
                "Controller that is responsible for handling this class",
                0,
            ),
            column(
                "Parameters",
                "string",
                "",
                "A reference to a resource with additional parameters",
                0,
            ),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        let parameters = match set(spec, "parameters") {
            None => "<none>".to_string(),
            Some(p) => {
                let mut s = text(p, "kind").to_string();
                if let Some(g) = set(p, "apiGroup").and_then(Value::as_str) {
                    s = format!("{s}.{g}");
                }
                format!("{s}/{}", text(p, "name"))
            }
        };
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(text(spec, "controller")),
            Value::from(parameters),
            age_cell(obj, now),
        ]
    }
}
