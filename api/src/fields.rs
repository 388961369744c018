//! Field selectors with apimachinery's grammar (`fields.ParseSelector`).
//!
//! `f=v`, `f==v`, `f!=v`, comma means AND; `\` escapes `\`, `,`, `=` and `!` inside values. Values are
//! compared as strings; a field the object lacks compares as `""`. Which fields a kind supports is the
//! registry's business (the `Strategy::field_value` hook). Parsing never panics.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    Invalid { selector: String, term: String },
    #[error("invalid field selector: {0}")]
    BadEscape(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    Eq,
    NotEq,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub op: FieldOp,
    pub value: String,
}

impl FieldRequirement {
    /// Whether an object whose field has the value `have` satisfies this requirement.
    fn holds(&self, have: &str) -> bool {
        match self.op {
            FieldOp::Eq => have == self.value,
            FieldOp::NotEq => have != self.value,
        }
    }
}

/// A conjunction of field requirements; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<FieldRequirement>,
}

impl Selector {
    pub fn everything() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Builds a selector from requirements (kept in order).
    pub fn from_requirements(requirements: Vec<FieldRequirement>) -> Self {
        Self { requirements }
    }

    /// Whether every requirement holds; `get(field)` returns the object's value (None = `""`).
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| {
            let have = get(&r.field).unwrap_or_default();
            r.holds(&have)
        })
    }

    /// [`matches`](Self::matches) on values borrowed from what holds them.
    pub fn matches_with<'v>(&self, get: impl Fn(&str) -> Option<&'v str>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.holds(get(&r.field).unwrap_or_default()))
    }

    /// The value required by an `=` term on `field`, if any (lets callers narrow a list by key).
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.op == FieldOp::Eq)
            .map(|r| r.value.as_str())
    }

    pub fn parse(s: &str) -> Result<Selector, FieldSelectorError> {
        let mut requirements = Vec::new();
        for term in split_unescaped(s, ',') {
            if term.is_empty() {
                continue;
            }
            let Some((field, op, value)) = split_operator(&term) else {
                return Err(FieldSelectorError::Invalid {
                    selector: s.to_string(),
                    term,
                });
            };
            requirements.push(FieldRequirement {
                field: field.trim().to_string(),
                op,
                value: unescape(&value)?,
            });
        }
        Ok(Self { requirements })
    }
}

/// Splits on `sep` not preceded by an escaping backslash; escapes are kept.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            cur.push(c);
            escaped = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// Finds the first unescaped operator (`!=`, `==`, `=`).
fn split_operator(term: &str) -> Option<(String, FieldOp, String)> {
    let chars: Vec<char> = term.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '!' if chars.get(i + 1) == Some(&'=') => {
                return Some((
                    chars[..i].iter().collect(),
                    FieldOp::NotEq,
                    chars[i + 2..].iter().collect(),
                ))
            }
            '=' => {
                let skip = if chars.get(i + 1) == Some(&'=') { 2 } else { 1 };
                return Some((
                    chars[..i].iter().collect(),
                    FieldOp::Eq,
                    chars[i + skip..].iter().collect(),
                ));
            }
            _ => i += 1,
        }
    }
    None
}

fn unescape(s: &str) -> Result<String, FieldSelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=' | '!')) => out.push(e),
                Some(e) => {
                    return Err(FieldSelectorError::BadEscape(format!(
                        "invalid escape sequence '\\{e}'"
                    )))
                }
                None => {
                    return Err(FieldSelectorError::BadEscape(
                        "unterminated escape sequence".into(),
                    ))
                }
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Escapes a value for printing (`fields.EscapeValue`).
pub fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| {
                let op = if r.op == FieldOp::Eq { "=" } else { "!=" };
                format!("{}{}{}", r.field, op, escape_value(&r.value))
            })
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_and_match() {
        let s = Selector::parse("status.phase=Running,spec.nodeName!=n1");
        assert!(s.is_ok());
        let s = s.unwrap_or_default();
        assert_eq!(s.requirements().len(), 2);
        let get = |f: &str| match f {
            "status.phase" => Some("Running".to_string()),
            _ => None,
        };
        assert!(s.matches(get));
        assert!(Selector::parse("spec.nodeName=").is_ok_and(|s| s.matches(|_| None)));
        assert!(Selector::parse("a==b").is_ok_and(|s| s.required_value("a") == Some("b")));
        assert!(Selector::parse("").is_ok_and(|s| s.is_empty()));
        assert!(Selector::parse("metadata.name=a\\,b")
            .is_ok_and(|s| s.requirements()[0].value == "a,b"));
    }

    #[test]
    fn errors() {
        assert_eq!(
            Selector::parse("foo").map_err(|e| e.to_string()),
            Err("invalid selector: 'foo'; can't understand 'foo'".to_string())
        );
        assert!(Selector::parse("a=b\\x").is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,80}") {
            let _ = Selector::parse(&s);
        }

        #[test]
        fn roundtrip(reqs in proptest::collection::vec(("[a-z][a-z.]{0,10}", any::<bool>(), "\\PC{0,10}"), 0..4)) {
            let sel = Selector::from_requirements(reqs.into_iter().map(|(f, eq, v)| FieldRequirement {
                field: f, op: if eq { FieldOp::Eq } else { FieldOp::NotEq }, value: v,
            }).collect());
            let printed = sel.to_string();
            prop_assert_eq!(Selector::parse(&printed), Ok(sel), "printed {}", printed);
        }
    }
}
