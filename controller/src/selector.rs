//! Label selectors as the controllers evaluate them.
//!
//! Semantics follow apimachinery's `LabelSelectorAsSelector`: a present but empty `LabelSelector`
//! selects everything, an absent one selects nothing; `matchLabels` and every `matchExpressions`
//! requirement must all hold. ReplicationController selectors are equality-only maps, and an empty map
//! selects nothing (`GetPodControllers`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::{Error, Result};

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key == value` (matchLabels, or `In` with one value).
    Equals(String, String),
    /// `key in (values)`.
    In(String, Vec<String>),
    /// `key notin (values)`; also true when the key is absent.
    NotIn(String, Vec<String>),
    /// The key is present.
    Exists(String),
    /// The key is absent.
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Equals(k, v) => labels.get(k) == Some(v),
            Self::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Self::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Self::Exists(k) => labels.contains_key(k),
            Self::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A compiled label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Matches no object (absent selector, empty RC selector).
    Nothing,
    /// Matches objects satisfying every requirement (none → everything).
    Requirements(Vec<Requirement>),
}

impl Selector {
    /// Compile a `metav1.LabelSelector`; unknown operators or malformed expressions are an error.
    pub fn from_label_selector(sel: &LabelSelector) -> Result<Self> {
        let mut reqs = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            reqs.push(Requirement::Equals(k.clone(), v.clone()));
        }
        for expr in sel.match_expressions.iter().flatten() {
            let values = expr.values.clone().unwrap_or_default();
            let key = expr.key.clone();
            let req = match expr.operator.as_str() {
                "In" if !values.is_empty() => Requirement::In(key, values),
                "NotIn" if !values.is_empty() => Requirement::NotIn(key, values),
                "Exists" if values.is_empty() => Requirement::Exists(key),
                "DoesNotExist" if values.is_empty() => Requirement::DoesNotExist(key),
                op => {
                    return Err(Error::InvalidSelector(format!(
                        "operator {op:?} with {} values for key {:?}",
                        values.len(),
                        expr.key
                    )))
                }
            };
            reqs.push(req);
        }
        Ok(Self::Requirements(reqs))
    }

    /// An optional `LabelSelector`: absent selects nothing.
    pub fn from_optional(sel: Option<&LabelSelector>) -> Result<Self> {
        match sel {
            None => Ok(Self::Nothing),
            Some(s) => Self::from_label_selector(s),
        }
    }

    /// An equality map (ReplicationController `spec.selector`, pod `nodeSelector`). `empty_matches_all`
    /// picks the convention: node selectors match every node when empty, RC selectors match nothing.
    pub fn from_map(map: Option<&BTreeMap<String, String>>, empty_matches_all: bool) -> Self {
        match map {
            Some(m) if !m.is_empty() => Self::Requirements(
                m.iter()
                    .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
                    .collect(),
            ),
            _ if empty_matches_all => Self::Requirements(Vec::new()),
            _ => Self::Nothing,
        }
    }

    /// Whether the labels satisfy the selector (absent labels = empty map).
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        let labels = labels.unwrap_or(&EMPTY);
        match self {
            Self::Nothing => false,
            Self::Requirements(reqs) => reqs.iter().all(|r| r.matches(labels)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn match_labels_and_expressions_all_must_hold() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["fe".into(), "be".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        let s = Selector::from_label_selector(&sel).unwrap_or(Selector::Nothing);
        assert!(s.matches(Some(&labels(&[("app", "web"), ("tier", "fe")]))));
        assert!(!s.matches(Some(&labels(&[("app", "web"), ("tier", "db")]))));
        assert!(!s.matches(Some(&labels(&[
            ("app", "web"),
            ("tier", "fe"),
            ("canary", "1")
        ]))));
        assert!(!s.matches(None));
    }

    #[test]
    fn not_in_holds_for_absent_key_and_bad_operator_is_rejected() {
        let sel = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "env".into(),
                operator: "NotIn".into(),
                values: Some(vec!["prod".into()]),
            }]),
        };
        let s = Selector::from_label_selector(&sel).unwrap_or(Selector::Nothing);
        assert!(s.matches(None));
        assert!(!s.matches(Some(&labels(&[("env", "prod")]))));
        let bad = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "env".into(),
                operator: "Near".into(),
                values: None,
            }]),
        };
        assert!(Selector::from_label_selector(&bad).is_err());
    }

    #[test]
    fn empty_selector_conventions() {
        let everything = Selector::from_label_selector(&LabelSelector::default());
        assert!(everything.is_ok_and(|s| s.matches(None)));
        assert!(!Selector::from_optional(None).is_ok_and(|s| s.matches(None)));
        assert!(!Selector::from_map(Some(&BTreeMap::new()), false).matches(None));
        assert!(Selector::from_map(None, true).matches(None));
    }
}
