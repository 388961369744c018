//! Label selectors: apimachinery's `labels.Parse`, `labels.Selector` and `LabelSelectorAsSelector`, the
//! one implementation every crate uses (the apiserver's `labelSelector` parameter and workload
//! validation, the client's listers, the controllers' owner selectors, the scheduler's node selectors).
//!
//! * Grammar: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>5`, `k<5`; a comma
//!   means AND. The lexer and the recursive-descent parser are ports of `selector.go` (same tokens,
//!   same contexts in which `in`/`notin` are plain identifiers, same error texts), so a selector parses
//!   here exactly when it parses upstream: `x in ()` is `x in ("")`, `in=a` has the key `in`.
//! * Keys must be qualified names and values label values (`NewRequirement`); its errors are
//!   aggregated (`[e1, e2]`) and rendered as apimachinery renders `field.Error`s.
//! * Requirements are kept sorted by key, so printing is canonical and `parse(display(s)) == s`.
//! * [`Selector::everything`] (also what an empty `LabelSelector` or map compiles to) matches every
//!   object; [`Selector::nothing`] (an absent `LabelSelector`) matches none.
//!
//! The string grammar lives in [`parse`]; this module holds the selector, its requirements, matching and
//! the `LabelSelector` conversion.
//!
//! Guarantees: nothing here panics on any input; parsing is linear in the input.

mod parse;
#[cfg(test)]
mod tests;

use crate::validation::{go_quote, is_qualified_name, is_valid_label_value};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// A label-selector parse or validation failure; its text is what a 400 response carries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A requirement of a selector string could not be parsed or failed validation (apimachinery
    /// prefixes these with `unable to parse requirement: `).
    #[error("unable to parse requirement: {0}")]
    Parse(String),
    /// The selector string as a whole is malformed (e.g. a trailing comma), or a `LabelSelector` is
    /// invalid (`LabelSelectorAsSelector`'s errors carry no prefix).
    #[error("{0}")]
    Invalid(String),
}

/// A requirement's operator (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operator {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One requirement: `key op values`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    /// As given (apimachinery's `strValues`): a parsed selector's are sorted and unique, a
    /// `LabelSelector`'s keep their order. Printing sorts them.
    pub values: Vec<String>,
}

/// `field.ErrorList.ToAggregate().Error()` (`utilerrors.NewAggregate`): duplicates dropped; one
/// message bare, several as `[a, b]`.
pub fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut unique: Vec<String> = Vec::with_capacity(errs.len());
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

/// How `field.Error` renders a `[]string` bad value: Go's `json.Marshal`, which writes a nil slice as
/// `null` and escapes `<`, `>`, `&`, U+2028 and U+2029. The only empty slice that reaches a message is
/// `LabelSelectorAsSelector`'s `append([]string(nil), values...)` copy, which is nil.
fn render_values(values: &[String]) -> String {
    if values.is_empty() {
        return "null".to_string();
    }
    serde_json::to_string(values)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// `validateLabelKey` at the given field path.
fn key_error(key: &str, path: &str) -> Option<String> {
    let errs = is_qualified_name(key);
    (!errs.is_empty()).then(|| {
        format!(
            "{path}: Invalid value: {}: {}",
            go_quote(key),
            errs.join("; ")
        )
    })
}

impl Requirement {
    /// Builds a requirement with apimachinery's `NewRequirement` checks (at the root field path); the
    /// error is its aggregate of every failed check.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, SelectorError> {
        new_requirement(key, operator, values).map_err(SelectorError::Invalid)
    }

    /// Whether the labels satisfy this requirement (`Requirement.Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// [`matches`](Self::matches) on labels given by a look-up of their values by key.
    pub fn matches_with<'v>(&self, label: impl Fn(&str) -> Option<&'v str>) -> bool {
        let got = label(&self.key);
        let listed = |v: &str| self.values.iter().any(|w| w == v);
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => got.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => got.is_none_or(|v| !listed(v)),
            Operator::Exists => got.is_some(),
            Operator::DoesNotExist => got.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let have = got.and_then(|v| v.parse::<i64>().ok());
                let want = match self.values.as_slice() {
                    [v] => v.parse::<i64>().ok(),
                    _ => None,
                };
                let (Some(have), Some(want)) = (have, want) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// `NewRequirement` with a nil path; the error is the aggregate's text.
fn new_requirement(
    key: &str,
    operator: Operator,
    values: Vec<String>,
) -> Result<Requirement, String> {
    let mut errs: Vec<String> = key_error(key, "key").into_iter().collect();
    let invalid_values = |detail: &str| {
        format!(
            "values: Invalid value: {}: {detail}",
            render_values(&values)
        )
    };
    match operator {
        Operator::In | Operator::NotIn if values.is_empty() => {
            errs.push(invalid_values(
                "for 'in', 'notin' operators, values set can't be empty",
            ));
        }
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => {
            errs.push(invalid_values(
                "exact-match compatibility requires one single value",
            ));
        }
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
            errs.push(invalid_values(
                "values set must be empty for exists and does not exist",
            ));
        }
        Operator::GreaterThan | Operator::LessThan => {
            if values.len() != 1 {
                errs.push(invalid_values(
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        go_quote(v)
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let v_errs = is_valid_label_value(v);
        if !v_errs.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(v),
                v_errs.join("; ")
            ));
        }
    }
    match aggregate(errs) {
        Some(e) => Err(e),
        None => Ok(Requirement {
            key: key.to_string(),
            operator,
            values,
        }),
    }
}

impl fmt::Display for Requirement {
    /// `Requirement.String`: values sorted, joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = || {
            let mut v: Vec<&str> = self.values.iter().map(String::as_str).collect();
            v.sort_unstable();
            v.join(",")
        };
        match self.operator {
            Operator::Equals => write!(f, "{}={}", self.key, values()),
            Operator::DoubleEquals => write!(f, "{}=={}", self.key, values()),
            Operator::NotEquals => write!(f, "{}!={}", self.key, values()),
            Operator::In => write!(f, "{} in ({})", self.key, values()),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, values()),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::GreaterThan => write!(f, "{}>{}", self.key, values()),
            Operator::LessThan => write!(f, "{}<{}", self.key, values()),
        }
    }
}

/// A conjunction of requirements. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
    /// `nothing()` selectors match no object (a nil `LabelSelector`).
    nothing: bool,
}

impl Selector {
    /// Matches every object (`labels.Everything()`).
    pub fn everything() -> Self {
        Self::default()
    }

    /// Matches no object (`labels.Nothing()`).
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// `Selector.Empty()`: true only for a selector without requirements that matches everything
    /// (false for [`Selector::nothing`]); listers skip label evaluation for it.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty() && !self.nothing
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Self {
            requirements,
            nothing: false,
        }
    }

    /// `labels.SelectorFromSet`: equality on every pair (a ReplicationController's `spec.selector`, a
    /// pod's `nodeSelector`); an empty map matches everything. Not validated, as upstream.
    pub fn from_map(map: &BTreeMap<String, String>) -> Self {
        Self::from_requirements(
            map.iter()
                .map(|(k, v)| Requirement {
                    key: k.clone(),
                    operator: Operator::Equals,
                    values: vec![v.clone()],
                })
                .collect(),
        )
    }

    /// Whether the labels satisfy every requirement; takes `&map` or `Option<&map>` (absent labels
    /// are the empty set).
    pub fn matches<'a>(&self, labels: impl Into<Option<&'a BTreeMap<String, String>>>) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        let labels = labels.into().unwrap_or(&EMPTY);
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// [`matches`](Self::matches) on labels given by a look-up of their values by key.
    pub fn matches_with<'v>(&self, label: impl Fn(&str) -> Option<&'v str> + Copy) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches_with(label))
    }

    /// `labels.Parse`: a selector string (the `labelSelector` query parameter).
    pub fn parse(s: &str) -> Result<Selector, SelectorError> {
        parse::Parser::new(s).parse().map(Self::from_requirements)
    }
}

impl fmt::Display for Selector {
    /// `Selector.String()`: requirements joined by `,`; `""` for everything and for nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// `labels.SelectorFromSet(set).Matches(labels)` without building a selector (apimachinery's
/// `SetSelector`): every pair of `set` is present in `labels`. An empty set matches everything.
pub fn matches_set(
    set: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    set.iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// `metav1.LabelSelectorAsSelector`: an absent selector matches nothing, an empty one everything;
/// otherwise `matchLabels` AND every `matchExpressions` requirement (`In`, `NotIn`, `Exists`,
/// `DoesNotExist`), each checked by `NewRequirement`. The first invalid requirement is the error.
pub fn label_selector_as_selector(s: Option<&LabelSelector>) -> Result<Selector, SelectorError> {
    let Some(s) = s else {
        return Ok(Selector::nothing());
    };
    let mut reqs = Vec::new();
    for (k, v) in s.match_labels.iter().flatten() {
        reqs.push(Requirement::new(k, Operator::Equals, vec![v.clone()])?);
    }
    for e in s.match_expressions.iter().flatten() {
        let op = match e.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                return Err(SelectorError::Invalid(format!(
                    "{} is not a valid label selector operator",
                    go_quote(other)
                )))
            }
        };
        reqs.push(Requirement::new(
            &e.key,
            op,
            e.values.clone().unwrap_or_default(),
        )?);
    }
    Ok(Selector::from_requirements(reqs))
}

/// [`label_selector_as_selector`] of a present selector: an empty one matches everything.
pub fn from_label_selector(s: &LabelSelector) -> Result<Selector, SelectorError> {
    label_selector_as_selector(Some(s))
}

/// [`from_label_selector`] over the JSON form; a non-object (absent selector) matches nothing.
pub fn from_label_selector_json(v: &serde_json::Value) -> Result<Selector, SelectorError> {
    if !v.is_object() {
        return Ok(Selector::nothing());
    }
    let ls = LabelSelector::deserialize(v)
        .map_err(|e| SelectorError::Invalid(format!("invalid label selector: {e}")))?;
    from_label_selector(&ls)
}
