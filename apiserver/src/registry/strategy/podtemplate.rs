//! Pod templates embedded in workload controllers (Jobs, CronJobs' job templates, StatefulSets,
//! DaemonSets): the pod defaults every template gets and `ValidatePodTemplateSpec`'s rules.
//!
//! Upstream's template is a struct, not a pointer, so defaulting runs on it even when a client
//! sends none: the stored object always has `template.spec` with the pod defaults (restartPolicy
//! `Always`, dnsPolicy, …), which is what the kinds' restart-policy rules then see.
//! [`default_template`] does the same here.

use super::common::object_at;
use super::gofmt;
use super::pod::{default_pod_spec, validate_pod_spec};
use api::labels::Selector;
use api::validation::{self, FieldError, FieldErrorKind};
use serde_json::Value;
use std::collections::BTreeMap;

/// Creates `parent.template.spec` if needed and applies the pod-spec defaults to it.
pub fn default_template(parent: &mut Value) {
    if object_at(parent, "template").is_none() {
        return;
    }
    let Some(template) = parent.get_mut("template") else {
        return;
    };
    if object_at(template, "spec").is_none() {
        return;
    }
    if let Some(spec) = template.get_mut("spec") {
        default_pod_spec(spec);
    }
}

/// The template's labels.
pub fn labels(template: Option<&Value>) -> BTreeMap<String, String> {
    api::meta::as_string_map(template.and_then(|t| t.pointer("/metadata/labels")))
}

/// The template's metadata rules: labels at `<path>.labels`, annotations at `<path>.annotations`.
pub fn validate_metadata(template: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(l) = template.and_then(|t| t.pointer("/metadata/labels")) {
        errs.extend(validation::validate_labels(l, &format!("{path}.labels")));
    }
    if let Some(a) = template.and_then(|t| t.pointer("/metadata/annotations")) {
        errs.extend(validation::validate_annotations(
            a,
            &format!("{path}.annotations"),
        ));
    }
    errs
}

/// `ValidatePodTemplateSpec`: metadata, then the whole pod spec at `<path>.spec`.
pub fn validate(template: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = validate_metadata(template, path);
    errs.extend(validate_pod_spec(
        template.and_then(|t| t.get("spec")),
        &format!("{path}.spec"),
    ));
    errs
}

/// The selector check every controller makes: `<path>.metadata.labels: Invalid value:
/// map[string]string{…}: `selector` does not match template `labels``, or nothing when it matches.
pub fn check_selector_matches(
    selector: &Selector,
    template: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if selector.matches(&labels(template)) {
        return;
    }
    errs.push(FieldError {
        field: format!("{path}.metadata.labels"),
        kind: FieldErrorKind::Invalid,
        message: "`selector` does not match template `labels`".to_string(),
        value: Some(gofmt::go_map_value(
            template.and_then(|t| t.pointer("/metadata/labels")),
        )),
    });
}

/// The template's `spec.restartPolicy` (`""` when absent).
pub fn restart_policy(template: Option<&Value>) -> &str {
    template
        .and_then(|t| t.pointer("/spec/restartPolicy"))
        .and_then(Value::as_str)
        .unwrap_or("")
}
