//! Validation of the access reviews (upstream's `pkg/apis/authorization/validation`, 1.33):
//! exactly one of `resourceAttributes` and `nonResourceAttributes`; a subject (user or group)
//! for the reviews that name one; empty `metadata` (but `namespace` of a local review, which
//! must be the resource's namespace and may not ask about a non-resource URL); and, with
//! `AuthorizeWithSelectors` (beta, on), the `fieldSelector`/`labelSelector` of
//! `resourceAttributes`: `rawSelector` or `requirements`, not both and not neither, each
//! requirement checked as `metav1validation` checks it with unknown operators allowed (a newer
//! client's operator is dropped when the attributes are built, which only broadens the check).
//!
//! Errors come in upstream's order with its field paths and messages; values are rendered as
//! Go renders them (`%#v` of an attributes struct, `v1.ObjectMeta{…}`).

use serde_json::{json, Map, Value};

use api::validation::{FieldError, FieldErrorKind, LabelSelectorValidationOptions};

/// Go's `%#v` of an attributes struct pointer (`&authorization.NonResourceAttributes{…}`): the
/// struct (fields in Go order) after the pointer is followed, as field errors render it.
fn go_struct(name: &str, obj: Option<&Value>, fields: &[(&str, &str)]) -> String {
    let Some(obj) = obj.filter(|v| !v.is_null()) else {
        return "\"null\"".to_string();
    };
    let parts: Vec<String> = fields
        .iter()
        .map(|(go, json)| {
            let v = obj.get(*json).and_then(Value::as_str).unwrap_or("");
            format!("{go}:{}", api::validation::go_quote(v))
        })
        .collect();
    format!("authorization.{name}{{{}}}", parts.join(", "))
}

const NON_RESOURCE_FIELDS: &[(&str, &str)] = &[("Path", "path"), ("Verb", "verb")];

/// `spec.<key>` when set (a JSON `null` is unset, as the Go pointer).
pub(super) fn attr_value(spec: &Value, key: &str) -> Option<Value> {
    spec.get(key).filter(|v| !v.is_null()).cloned()
}

fn invalid(field: &str, value: String, msg: &str) -> FieldError {
    FieldError {
        field: field.to_string(),
        kind: FieldErrorKind::Invalid,
        message: msg.to_string(),
        value: Some(value),
    }
}

/// The attribute checks every access review shares.
fn validate_attributes(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let res = attr_value(spec, "resourceAttributes");
    let non = attr_value(spec, "nonResourceAttributes");
    if res.is_some() && non.is_some() {
        errs.push(invalid(
            "spec.nonResourceAttributes",
            go_struct("NonResourceAttributes", non.as_ref(), NON_RESOURCE_FIELDS),
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if res.is_none() && non.is_none() {
        errs.push(invalid(
            "spec.resourceAttributes",
            "\"null\"".to_string(),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    errs
}

/// `validateResourceAttributes`: the selectors of `spec.resourceAttributes`.
fn validate_resource_attributes(spec: &Value) -> Vec<FieldError> {
    let Some(res) = attr_value(spec, "resourceAttributes") else {
        return Vec::new();
    };
    let path = "spec.resourceAttributes";
    let mut errs = validate_selector(
        res.get("fieldSelector"),
        &format!("{path}.fieldSelector"),
        validate_field_selector_requirement,
    );
    let label_options = LabelSelectorValidationOptions {
        allow_invalid_label_value: false,
        allow_unknown_operator: true,
    };
    errs.extend(validate_selector(
        res.get("labelSelector"),
        &format!("{path}.labelSelector"),
        |r, p| api::validation::validate_label_selector_requirement(r, p, label_options),
    ));
    errs
}

/// `validateFieldSelectorAttributes`/`validateLabelSelectorAttributes` of the selector at
/// `path`, each requirement checked by `requirement`.
fn validate_selector(
    selector: Option<&Value>,
    path: &str,
    requirement: impl Fn(&Value, &str) -> Vec<FieldError>,
) -> Vec<FieldError> {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let raw = selector
        .get("rawSelector")
        .and_then(Value::as_str)
        .unwrap_or("");
    let requirements = selector
        .get("requirements")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if !raw.is_empty() && !requirements.is_empty() {
        errs.push(FieldError::invalid(
            format!("{path}.rawSelector"),
            raw,
            "may not specified at the same time as requirements",
        ));
    }
    if raw.is_empty() && requirements.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.requirements"),
            format!("when {path} is specified, requirements or rawSelector is required"),
        ));
    }
    for (i, r) in requirements.iter().enumerate() {
        errs.extend(requirement(r, &format!("{path}.requirements[{i}]")));
    }
    errs
}

/// `ValidateFieldSelectorRequirement` with unknown operators allowed: a key, and values exactly
/// when the operator needs them.
fn validate_field_selector_requirement(r: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if r.get("key")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        errs.push(FieldError::required(
            format!("{path}.key"),
            "must be specified",
        ));
    }
    let has_values = r
        .get("values")
        .and_then(Value::as_array)
        .is_some_and(|v| !v.is_empty());
    match r.get("operator").and_then(Value::as_str).unwrap_or("") {
        "In" | "NotIn" if !has_values => errs.push(FieldError::required(
            format!("{path}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if has_values => errs.push(FieldError::forbidden(
            format!("{path}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        _ => {}
    }
    errs
}

/// `metadata` beyond what a review may carry (managed fields are ignored; `namespace` for the
/// local review).
fn metadata_is_empty(obj: &Value, allow_namespace: bool) -> bool {
    let Some(meta) = obj.get("metadata").and_then(Value::as_object) else {
        return true;
    };
    meta.iter().all(|(k, v)| {
        k == "managedFields"
            || (allow_namespace && k == "namespace")
            || v.is_null()
            || v.as_str() == Some("")
            || v.as_object().is_some_and(Map::is_empty)
            || v.as_array().is_some_and(Vec::is_empty)
    })
}

fn meta_value(obj: &Value) -> String {
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let s = |k: &str| {
        meta.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    format!(
        "v1.ObjectMeta{{Name:{}, GenerateName:{}, Namespace:{}, ...}}",
        api::validation::go_quote(&s("name")),
        api::validation::go_quote(&s("generateName")),
        api::validation::go_quote(&s("namespace"))
    )
}

/// `ValidateSubjectAccessReviewSpec`: the attributes, a subject, the selectors.
fn validate_subject_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = validate_attributes(spec);
    let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
    let no_groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .is_none_or(|g| g.iter().all(|g| g.as_str().is_none()));
    if user.is_empty() && no_groups {
        errs.push(FieldError::invalid(
            "spec.user",
            user,
            "at least one of user or group must be specified",
        ));
    }
    errs.extend(validate_resource_attributes(spec));
    errs
}

fn spec(obj: &Value) -> Value {
    obj.get("spec").cloned().unwrap_or(Value::Null)
}

/// `ValidateSubjectAccessReview`.
pub(super) fn subject_access_review(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_subject_spec(&spec(obj));
    if !metadata_is_empty(obj, false) {
        errs.push(invalid("metadata", meta_value(obj), "must be empty"));
    }
    errs
}

/// `ValidateSelfSubjectAccessReview`: no subject (the requester is the subject).
pub(super) fn self_subject_access_review(obj: &Value) -> Vec<FieldError> {
    let spec = spec(obj);
    let mut errs = validate_attributes(&spec);
    errs.extend(validate_resource_attributes(&spec));
    if !metadata_is_empty(obj, false) {
        errs.push(invalid("metadata", meta_value(obj), "must be empty"));
    }
    errs
}

/// `ValidateLocalSubjectAccessReview` of a review in `namespace`.
pub(super) fn local_subject_access_review(obj: &Value, namespace: &str) -> Vec<FieldError> {
    let spec = spec(obj);
    let mut errs = validate_subject_spec(&spec);
    if !metadata_is_empty(obj, true) {
        errs.push(invalid(
            "metadata",
            meta_value(obj),
            "must be empty except for namespace",
        ));
    }
    if let Some(r) = attr_value(&spec, "resourceAttributes") {
        let rns = r.get("namespace").and_then(Value::as_str).unwrap_or("");
        if rns != namespace {
            errs.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                rns,
                "must match metadata.namespace",
            ));
        }
    }
    if let Some(n) = attr_value(&spec, "nonResourceAttributes") {
        errs.push(invalid(
            "spec.nonResourceAttributes",
            go_struct("NonResourceAttributes", Some(&n), NON_RESOURCE_FIELDS),
            "disallowed on this kind of request",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sar(resource_attributes: Value) -> Value {
        json!({"spec": {"user": "alice", "resourceAttributes": resource_attributes}})
    }

    fn rendered(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn raw_selector_and_requirements_are_exclusive_and_one_is_needed() {
        let both = sar(json!({"verb": "list", "resource": "pods",
            "fieldSelector": {"rawSelector": "spec.nodeName=n1",
                "requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["n1"]}]},
            "labelSelector": {}}));
        assert_eq!(
            rendered(&subject_access_review(&both)),
            vec![
                "spec.resourceAttributes.fieldSelector.rawSelector: Invalid value: \"spec.nodeName=n1\": may not specified at the same time as requirements",
                "spec.resourceAttributes.labelSelector.requirements: Required value: when spec.resourceAttributes.labelSelector is specified, requirements or rawSelector is required",
            ]
        );
        let null = sar(json!({"verb": "list", "resource": "pods", "fieldSelector": null}));
        assert!(subject_access_review(&null).is_empty());
    }

    #[test]
    fn requirements_are_checked_with_unknown_operators_allowed() {
        let reqs = sar(json!({"verb": "list", "resource": "pods",
            "fieldSelector": {"requirements": [
                {"operator": "In", "values": ["x"]},
                {"key": "a", "operator": "NotIn"},
                {"key": "b", "operator": "Exists", "values": ["x"]},
                {"key": "c", "operator": "Unheard"}]},
            "labelSelector": {"requirements": [
                {"key": "app", "operator": "In"},
                {"key": "tier", "operator": "DoesNotExist", "values": ["x"]},
                {"key": "-bad", "operator": "Unheard"},
                {"key": "ok", "operator": "In", "values": ["-no"]}]}}));
        let errs = subject_access_review(&reqs);
        let paths: Vec<(&str, &str)> = errs
            .iter()
            .map(|e| (e.field.as_str(), e.kind.reason()))
            .collect();
        assert_eq!(
            paths,
            vec![
                (
                    "spec.resourceAttributes.fieldSelector.requirements[0].key",
                    "FieldValueRequired"
                ),
                (
                    "spec.resourceAttributes.fieldSelector.requirements[1].values",
                    "FieldValueRequired"
                ),
                (
                    "spec.resourceAttributes.fieldSelector.requirements[2].values",
                    "FieldValueForbidden"
                ),
                (
                    "spec.resourceAttributes.labelSelector.requirements[0].values",
                    "FieldValueRequired"
                ),
                (
                    "spec.resourceAttributes.labelSelector.requirements[1].values",
                    "FieldValueForbidden"
                ),
                (
                    "spec.resourceAttributes.labelSelector.requirements[2].key",
                    "FieldValueInvalid"
                ),
                (
                    "spec.resourceAttributes.labelSelector.requirements[3].values[0]",
                    "FieldValueInvalid"
                ),
            ]
        );
        assert_eq!(
            errs[0].to_string(),
            "spec.resourceAttributes.fieldSelector.requirements[0].key: Required value: must be specified"
        );
        assert_eq!(
            errs[2].to_string(),
            "spec.resourceAttributes.fieldSelector.requirements[2].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        );
    }

    /// Upstream's order: the spec's checks (selectors last), then metadata, then the local
    /// review's namespace and non-resource checks.
    #[test]
    fn selector_errors_follow_the_spec_checks_in_every_review() {
        let selector = json!({"fieldSelector": {}});
        let own = json!({"metadata": {"name": "x"}, "spec": {"resourceAttributes": selector}});
        let fields: Vec<String> = self_subject_access_review(&own)
            .iter()
            .map(|e| e.field.clone())
            .collect();
        assert_eq!(
            fields,
            vec![
                "spec.resourceAttributes.fieldSelector.requirements",
                "metadata"
            ]
        );
        let local = json!({"metadata": {"namespace": "ns"},
            "spec": {"resourceAttributes": {"namespace": "other", "fieldSelector": {}}}});
        let fields: Vec<String> = local_subject_access_review(&local, "ns")
            .iter()
            .map(|e| e.field.clone())
            .collect();
        assert_eq!(
            fields,
            vec![
                "spec.user",
                "spec.resourceAttributes.fieldSelector.requirements",
                "spec.resourceAttributes.namespace"
            ]
        );
    }
}
