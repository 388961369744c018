//! Client-side label selectors (apimachinery `labels.Selector`), used by listers to filter the cache.
//!
//! Parses the string form (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, comma =
//! AND) and converts `metav1.LabelSelector` (`matchLabels` + `matchExpressions`). Semantics follow
//! apimachinery: `!=` and `notin` match objects *without* the key; [`LabelMatcher::everything`]
//! matches all; [`LabelMatcher::nothing`] matches none (what an empty controller selector means,
//! spec informer.md §3.4).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Eq(k, v) => labels.get(k) == Some(v),
            Requirement::NotEq(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelMatcher {
    /// `None` = matches nothing.
    reqs: Option<Vec<Requirement>>,
}

impl Default for LabelMatcher {
    fn default() -> Self {
        Self::everything()
    }
}

impl LabelMatcher {
    /// Matches every object (`labels.Everything()`).
    pub fn everything() -> Self {
        LabelMatcher {
            reqs: Some(Vec::new()),
        }
    }
    /// Matches no object (`labels.Nothing()`).
    pub fn nothing() -> Self {
        LabelMatcher { reqs: None }
    }
    /// True for `everything()` (listers then skip label evaluation).
    pub fn is_everything(&self) -> bool {
        self.reqs.as_ref().is_some_and(Vec::is_empty)
    }

    /// Equality selector from a map (`labels.SelectorFromSet`); an empty map matches everything.
    pub fn from_map(m: &BTreeMap<String, String>) -> Self {
        LabelMatcher {
            reqs: Some(
                m.iter()
                    .map(|(k, v)| Requirement::Eq(k.clone(), v.clone()))
                    .collect(),
            ),
        }
    }

    /// `metav1.LabelSelectorAsSelector`: `None` → nothing; empty → everything.
    pub fn from_label_selector(sel: Option<&LabelSelector>) -> Result<Self> {
        let Some(sel) = sel else {
            return Ok(Self::nothing());
        };
        let mut reqs = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            reqs.push(Requirement::Eq(k.clone(), v.clone()));
        }
        for e in sel.match_expressions.iter().flatten() {
            let vals = e.values.clone().unwrap_or_default();
            let r = match e.operator.as_str() {
                "In" if !vals.is_empty() => Requirement::In(e.key.clone(), vals),
                "NotIn" if !vals.is_empty() => Requirement::NotIn(e.key.clone(), vals),
                "Exists" if vals.is_empty() => Requirement::Exists(e.key.clone()),
                "DoesNotExist" if vals.is_empty() => Requirement::DoesNotExist(e.key.clone()),
                op => {
                    return Err(Error::Config(format!(
                        "invalid label selector operator {op:?} for key {:?}",
                        e.key
                    )))
                }
            };
            reqs.push(r);
        }
        Ok(LabelMatcher { reqs: Some(reqs) })
    }

    /// Parses the string form; `""` matches everything.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |m: &str| Error::Config(format!("invalid label selector {s:?}: {m}"));
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let r = if let Some(k) = part.strip_prefix('!') {
                Requirement::DoesNotExist(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = split_set_op(part, " notin ") {
                Requirement::NotIn(k, parse_set(rest).ok_or_else(|| bad("bad set"))?)
            } else if let Some((k, rest)) = split_set_op(part, " in ") {
                Requirement::In(k, parse_set(rest).ok_or_else(|| bad("bad set"))?)
            } else {
                if part.contains(char::is_whitespace) || part.contains('(') {
                    return Err(bad("unexpected token"));
                }
                Requirement::Exists(part.to_string())
            };
            reqs.push(r);
        }
        Ok(LabelMatcher { reqs: Some(reqs) })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.reqs {
            None => false,
            Some(reqs) => reqs.iter().all(|r| r.matches(labels)),
        }
    }

    /// Matches an optional label map (absent = empty).
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.matches(labels.unwrap_or(&EMPTY))
    }
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn split_set_op<'a>(part: &'a str, op: &str) -> Option<(String, &'a str)> {
    let i = part.find(op)?;
    Some((part[..i].trim().to_string(), &part[i + op.len()..]))
}

fn parse_set(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parse_and_match() -> Result<()> {
        let m = LabelMatcher::parse("app=web, tier in (fe, be), !legacy, env!=prod")?;
        assert!(m.matches(&l(&[("app", "web"), ("tier", "fe")])));
        assert!(!m.matches(&l(&[("app", "web"), ("tier", "db")])));
        assert!(!m.matches(&l(&[("app", "web"), ("tier", "fe"), ("legacy", "")])));
        assert!(!m.matches(&l(&[("app", "web"), ("tier", "fe"), ("env", "prod")])));
        assert!(LabelMatcher::parse("")?.matches(&l(&[])));
        assert!(LabelMatcher::parse("x notin (a)")?.matches(&l(&[])));
        assert!(LabelMatcher::parse("x")?.matches(&l(&[("x", "1")])));
        assert!(LabelMatcher::parse("a b").is_err());
        assert!(!LabelMatcher::nothing().matches(&l(&[])));
        assert!(LabelMatcher::from_label_selector(None)?.reqs.is_none());
        let empty = LabelSelector::default();
        assert!(LabelMatcher::from_label_selector(Some(&empty))?.is_everything());
        Ok(())
    }
}
