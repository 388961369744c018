//! Quota scopes: a quota's `spec.scopes` and `spec.scopeSelector` as one list of
//! `ScopedResourceSelectorRequirement`s (`getScopeSelectorsFromQuota`), and the selector a
//! requirement compiles to (`ScopedResourceSelectorRequirementsAsSelector`).
//!
//! A plain scope is the requirement `<scope> Exists`. Pods evaluate every scope
//! ([`pods::matches_scope`](super::pods::matches_scope)); the other evaluators match no scope, so
//! a scoped quota never counts them (`MatchesNoScopeFunc`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::labels::{Operator, Requirement};

/// `Terminating`: pods with `activeDeadlineSeconds >= 0`.
pub const TERMINATING: &str = "Terminating";
/// `NotTerminating`.
pub const NOT_TERMINATING: &str = "NotTerminating";
/// `BestEffort`: pods of the BestEffort QoS class.
pub const BEST_EFFORT: &str = "BestEffort";
/// `NotBestEffort`.
pub const NOT_BEST_EFFORT: &str = "NotBestEffort";
/// `PriorityClass`: pods by `priorityClassName`.
pub const PRIORITY_CLASS: &str = "PriorityClass";
/// `CrossNamespacePodAffinity`: pods whose (anti-)affinity terms name namespaces or a namespace
/// selector.
pub const CROSS_NAMESPACE_POD_AFFINITY: &str = "CrossNamespacePodAffinity";

/// One `ScopedResourceSelectorRequirement`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRequirement {
    /// `scopeName`.
    pub scope: String,
    /// `operator`: `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// `values`.
    pub values: Vec<String>,
}

impl ScopeRequirement {
    /// `<scope> Exists`, what a plain `spec.scopes` entry means.
    pub fn exists(scope: &str) -> Self {
        ScopeRequirement {
            scope: scope.to_string(),
            operator: "Exists".to_string(),
            values: Vec::new(),
        }
    }

    /// Whether the requirement's selector matches `labels`; an invalid requirement is an error,
    /// `failed to parse and convert selector: …`.
    pub fn selector_matches(&self, labels: &BTreeMap<String, String>) -> Result<bool, String> {
        let op = match self.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                return Err(format!(
                    "failed to parse and convert selector: \"{other}\" is not a valid scope selector operator"
                ))
            }
        };
        let req = Requirement::new(&self.scope, op, self.values.clone())
            .map_err(|e| format!("failed to parse and convert selector: {e}"))?;
        Ok(req.matches(labels))
    }
}

/// `getScopeSelectorsFromQuota`: `spec.scopes` as `Exists` requirements, then the
/// `spec.scopeSelector.matchExpressions`.
pub fn quota_scopes(quota: &Value) -> Vec<ScopeRequirement> {
    let spec = quota.get("spec");
    let plain = spec
        .and_then(|s| s.get("scopes"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(ScopeRequirement::exists);
    let selected = spec
        .and_then(|s| s.pointer("/scopeSelector/matchExpressions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| ScopeRequirement {
            scope: str_at(e, "scopeName"),
            operator: str_at(e, "operator"),
            values: e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
        });
    plain.chain(selected).collect()
}

fn str_at(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_and_selector_expressions_are_one_list() {
        let q = json!({"spec": {"scopes": ["BestEffort"], "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        let scopes = quota_scopes(&q);
        assert_eq!(scopes.len(), 2);
        assert_eq!(scopes[0], ScopeRequirement::exists("BestEffort"));
        assert_eq!(scopes[1].values, ["high"]);
        let high = BTreeMap::from([("PriorityClass".to_string(), "high".to_string())]);
        assert_eq!(scopes[1].selector_matches(&high), Ok(true));
        assert_eq!(scopes[1].selector_matches(&BTreeMap::new()), Ok(false));
        let bad = ScopeRequirement {
            operator: "Gt".into(),
            ..ScopeRequirement::exists("PriorityClass")
        };
        assert!(bad.selector_matches(&high).is_err());
    }
}
