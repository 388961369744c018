//! The field and label selectors a request is narrowed to, as authorizers see them
//! (`authorizer.Attributes.GetFieldSelector`/`GetLabelSelector`, Kubernetes 1.33's
//! `AuthorizeWithSelectors`, beta and on): the requirements understood and, when some or all
//! were not, why.
//!
//! Two sources, as upstream's:
//! - a selector string (a CEL check's `fieldSelector(…)`/`labelSelector(…)`, an access review's
//!   `rawSelector`): parsed whole (`fields.ParseSelector`, `labels.Parse`); one that does not
//!   parse gives no requirements and its parse error;
//! - an access review's `requirements` (`fieldSelectorAsSelector`, `labelSelectorAsSelector` of
//!   `pkg/registry/authorization/util`): each converted on its own; one that cannot be (an
//!   unknown operator, a field `In` of more than one value, a label key that is no qualified
//!   name) is left out and its error kept, the others kept — requirements are ANDed, so
//!   dropping one only broadens the check.
//!
//! RBAC and the Node authorizer here ignore both, as upstream's RBAC does; an access review
//! reports a selector that was partly or wholly ignored in `status.evaluationError`
//! ([`evaluation_error`]).

use api::fields::{FieldOp, FieldRequirement};
use api::labels::{Operator, Requirement};
use serde_json::Value;

/// A selector's requirements and, when some or all of it was not understood, why (upstream's
/// `(requirements, parsingErr)` pair). The default is no selector at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorRequirements<R> {
    pub requirements: Vec<R>,
    pub error: Option<String>,
}

impl<R> Default for SelectorRequirements<R> {
    fn default() -> Self {
        Self {
            requirements: Vec::new(),
            error: None,
        }
    }
}

/// Field-selector requirements.
pub type FieldSelector = SelectorRequirements<FieldRequirement>;
/// Label-selector requirements.
pub type LabelSelector = SelectorRequirements<Requirement>;

impl<R> SelectorRequirements<R> {
    /// Whether there is no selector (nothing asked, nothing failed).
    pub fn is_none(&self) -> bool {
        self.requirements.is_empty() && self.error.is_none()
    }

    fn from_parse<E: ToString>(parsed: Result<Vec<R>, E>) -> Self {
        match parsed {
            Ok(requirements) => Self {
                requirements,
                error: None,
            },
            Err(e) => Self {
                requirements: Vec::new(),
                error: Some(e.to_string()),
            },
        }
    }

    fn from_parts(requirements: Vec<R>, errors: Vec<String>) -> Self {
        Self {
            requirements,
            error: api::labels::aggregate(errors),
        }
    }
}

/// A field selector string (`fields.ParseSelector`); `""` is no selector.
pub fn field_selector_from_raw(raw: &str) -> FieldSelector {
    if raw.is_empty() {
        return FieldSelector::default();
    }
    FieldSelector::from_parse(api::fields::Selector::parse(raw).map(|s| s.requirements().to_vec()))
}

/// A label selector string (`labels.Parse`); `""` is no selector.
pub fn label_selector_from_raw(raw: &str) -> LabelSelector {
    if raw.is_empty() {
        return LabelSelector::default();
    }
    LabelSelector::from_parse(api::labels::Selector::parse(raw).map(|s| s.requirements().to_vec()))
}

/// A requirement's JSON fields: key, operator and values (absent, or not strings, as empty).
fn parts(requirement: &Value) -> (&str, &str, Vec<String>) {
    let s = |k: &str| requirement.get(k).and_then(Value::as_str).unwrap_or("");
    let values = requirement
        .get("values")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    (s("key"), s("operator"), values)
}

/// `fieldSelectorAsSelector`: `In` of one value is `=`, `NotIn` of one value `!=`; everything
/// else is left out with upstream's error.
pub fn field_selector_from_requirements(requirements: &[Value]) -> FieldSelector {
    let mut kept = Vec::new();
    let mut errors = Vec::new();
    for r in requirements {
        let (key, operator, mut values) = parts(r);
        if values.len() > 1 {
            errors.push("fieldSelectors do not yet support multiple values".to_string());
            continue;
        }
        let op = match operator {
            "In" => FieldOp::Eq,
            "NotIn" => FieldOp::NotEq,
            "Exists" | "DoesNotExist" => {
                errors.push(format!("fieldSelectors do not yet support {operator}"));
                continue;
            }
            other => {
                errors.push(format!(
                    "{} is not a valid field selector operator",
                    api::validation::go_quote(other)
                ));
                continue;
            }
        };
        let Some(value) = values.pop() else {
            let name = if op == FieldOp::Eq { "in" } else { "not in" };
            errors.push(format!("fieldSelectors {name} must have one value"));
            continue;
        };
        kept.push(FieldRequirement {
            field: key.to_string(),
            op,
            value,
        });
    }
    FieldSelector::from_parts(kept, errors)
}

/// `labelSelectorAsSelector`: `In`, `NotIn`, `Exists` and `DoesNotExist`, each checked as
/// `labels.NewRequirement` checks it; what fails is left out with its error.
pub fn label_selector_from_requirements(requirements: &[Value]) -> LabelSelector {
    let mut kept = Vec::new();
    let mut errors = Vec::new();
    for r in requirements {
        let (key, operator, values) = parts(r);
        let op = match operator {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                errors.push(format!(
                    "{} is not a valid label selector operator",
                    api::validation::go_quote(other)
                ));
                continue;
            }
        };
        match Requirement::new(key, op, values) {
            Ok(req) => kept.push(req),
            Err(e) => errors.push(e.to_string()),
        }
    }
    LabelSelector::from_parts(kept, errors)
}

/// A review's `fieldSelector` (`FieldSelectorAttributes`) as `ResourceAttributesFrom` reads
/// it: `rawSelector` when set, `requirements` when any (validation allows only one of them).
pub fn field_selector_from_attributes(selector: Option<&Value>) -> FieldSelector {
    match raw_and_requirements(selector) {
        ("", requirements) => field_selector_from_requirements(requirements),
        (raw, _) => field_selector_from_raw(raw),
    }
}

/// A review's `labelSelector` (`LabelSelectorAttributes`) likewise.
pub fn label_selector_from_attributes(selector: Option<&Value>) -> LabelSelector {
    match raw_and_requirements(selector) {
        ("", requirements) => label_selector_from_requirements(requirements),
        (raw, _) => label_selector_from_raw(raw),
    }
}

fn raw_and_requirements(selector: Option<&Value>) -> (&str, &[Value]) {
    let raw = selector
        .and_then(|s| s.get("rawSelector"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let requirements = selector
        .and_then(|s| s.get("requirements"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    (raw, requirements)
}

/// `BuildEvaluationError` (without an authorizer's own error: those here have none): which
/// selector was ignored, wholly or partly, for not being understood; `""` when none was.
pub fn evaluation_error(fields: &FieldSelector, labels: &LabelSelector) -> String {
    let ignored = |what: &str, partly: bool| {
        let how = if partly {
            "partially ignored"
        } else {
            "ignored"
        };
        format!("spec.resourceAttributes.{what} {how} due to parse error")
    };
    let mut errors = Vec::new();
    if fields.error.is_some() {
        errors.push(ignored("fieldSelector", !fields.requirements.is_empty()));
    }
    if labels.error.is_some() {
        errors.push(ignored("labelSelector", !labels.requirements.is_empty()));
    }
    errors.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_parse_whole_or_not_at_all() {
        assert!(field_selector_from_raw("").is_none());
        assert!(label_selector_from_raw("").is_none());
        let fields = field_selector_from_raw("spec.nodeName=n1,status.phase!=Failed");
        let pairs: Vec<(&str, FieldOp, &str)> = fields
            .requirements
            .iter()
            .map(|r| (r.field.as_str(), r.op, r.value.as_str()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("spec.nodeName", FieldOp::Eq, "n1"),
                ("status.phase", FieldOp::NotEq, "Failed")
            ]
        );
        assert_eq!(fields.error, None);
        let labels = label_selector_from_raw("tier in (a,b),app=web");
        let keys: Vec<&str> = labels.requirements.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, vec!["app", "tier"]);
        let bad = field_selector_from_raw("a b c");
        assert_eq!(
            bad.error.as_deref(),
            Some("invalid selector: 'a b c'; can't understand 'a b c'")
        );
        assert!(bad.requirements.is_empty());
        let bad = label_selector_from_raw("a in (b");
        assert!(bad.error.is_some() && bad.requirements.is_empty());
    }

    #[test]
    fn field_requirements_keep_what_converts() {
        let reqs = [
            json!({"key": "spec.nodeName", "operator": "In", "values": ["n1"]}),
            json!({"key": "status.phase", "operator": "NotIn", "values": ["Failed"]}),
            json!({"key": "a", "operator": "In", "values": ["x", "y"]}),
            json!({"key": "b", "operator": "In"}),
            json!({"key": "c", "operator": "NotIn", "values": []}),
            json!({"key": "d", "operator": "Exists"}),
            json!({"key": "e", "operator": "Gt", "values": ["1"]}),
        ];
        let got = field_selector_from_requirements(&reqs);
        let kept: Vec<(&str, FieldOp, &str)> = got
            .requirements
            .iter()
            .map(|r| (r.field.as_str(), r.op, r.value.as_str()))
            .collect();
        assert_eq!(
            kept,
            vec![
                ("spec.nodeName", FieldOp::Eq, "n1"),
                ("status.phase", FieldOp::NotEq, "Failed")
            ]
        );
        assert_eq!(
            got.error.as_deref(),
            Some(
                "[fieldSelectors do not yet support multiple values, fieldSelectors in must have \
                 one value, fieldSelectors not in must have one value, fieldSelectors do not yet \
                 support Exists, \"Gt\" is not a valid field selector operator]"
            )
        );
        let one =
            field_selector_from_requirements(&[json!({"key": "d", "operator": "DoesNotExist"})]);
        assert_eq!(
            one.error.as_deref(),
            Some("fieldSelectors do not yet support DoesNotExist")
        );
        assert!(one.requirements.is_empty());
    }

    #[test]
    fn label_requirements_keep_what_converts() {
        let reqs = [
            json!({"key": "app", "operator": "In", "values": ["web"]}),
            json!({"key": "tier", "operator": "Exists"}),
            json!({"key": "x", "operator": "Gt", "values": ["1"]}),
            json!({"key": "bad key", "operator": "Exists"}),
        ];
        let got = label_selector_from_requirements(&reqs);
        let keys: Vec<(&str, Operator)> = got
            .requirements
            .iter()
            .map(|r| (r.key.as_str(), r.operator))
            .collect();
        assert_eq!(
            keys,
            vec![("app", Operator::In), ("tier", Operator::Exists)]
        );
        let error = got.error.unwrap_or_default();
        assert!(
            error.starts_with("[\"Gt\" is not a valid label selector operator, "),
            "{error}"
        );
        assert!(error.contains("\"bad key\""), "{error}");
        let fine = label_selector_from_requirements(&reqs[..2]);
        assert_eq!(fine.error, None);
    }

    /// `rawSelector` or `requirements`, and what the review reports of them.
    #[test]
    fn attributes_and_the_evaluation_error() {
        let raw = json!({"rawSelector": "spec.nodeName=n1"});
        assert_eq!(
            field_selector_from_attributes(Some(&raw))
                .requirements
                .len(),
            1
        );
        assert!(field_selector_from_attributes(None).is_none());
        let reqs = json!({"requirements": [{"key": "app", "operator": "Exists"}]});
        assert_eq!(
            label_selector_from_attributes(Some(&reqs))
                .requirements
                .len(),
            1
        );

        let none = (FieldSelector::default(), LabelSelector::default());
        assert_eq!(evaluation_error(&none.0, &none.1), "");
        let bad_raw = label_selector_from_attributes(Some(&json!({"rawSelector": "a in (b"})));
        assert_eq!(
            evaluation_error(&none.0, &bad_raw),
            "spec.resourceAttributes.labelSelector ignored due to parse error"
        );
        let partly = field_selector_from_attributes(Some(&json!({"requirements": [
            {"key": "a", "operator": "In", "values": ["x"]},
            {"key": "b", "operator": "Exists"}]})));
        assert_eq!(
            evaluation_error(&partly, &bad_raw),
            "spec.resourceAttributes.fieldSelector partially ignored due to parse error; \
             spec.resourceAttributes.labelSelector ignored due to parse error"
        );
    }
}
