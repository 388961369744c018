//! What label and field selectors read of a held object: upstream's cacher keeps, beside each
//! object, its labels and its fields as a `fields.Set` (field label → value, `storeElement`);
//! this is that, with the object's `apiVersion` and `kind` (a list sends a held object's text as
//! it is when they are the endpoint's).
//!
//! The cache holds one view for every object it holds, so the view is laid out small: every
//! string in one text, and spans into it (a running pod's view is about 350 bytes, two
//! allocations besides the entry it is part of; as a `serde_json` tree of maps it was about 2.5 KB
//! in some forty).
//!
//! Guarantees: a view answers what it was built from — [`SelectorView::field`] the value the
//! kind's `field_value` gave for each field label it was built with, [`SelectorView::label`] the
//! object's labels — and never changes.

use std::collections::BTreeMap;

/// A `start..end` range of [`SelectorView::text`].
#[derive(Clone, Copy)]
struct Span {
    start: u32,
    end: u32,
}

/// See the module documentation.
pub struct SelectorView {
    /// Every string of the view, one after the other.
    text: Box<str>,
    /// Into `text`: `apiVersion`, `kind`, `metadata.name`, `metadata.namespace`, then one value
    /// per label of `fields`, then each label's key and value, by key.
    spans: Box<[Span]>,
    /// The kind's own field labels (beside name and namespace), in the order of their spans.
    fields: &'static [&'static str],
}

/// Spans before the fields' values.
const HEAD: usize = 4;

impl SelectorView {
    /// The view of an object of `api_version` and `kind` named `name` in `namespace`, with
    /// `labels`, whose field label `f` of `fields` has the value `value(f)`. `None` if the
    /// strings pass 4 GiB together (no stored object comes near: bodies are bounded far below).
    pub fn new(
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        fields: &'static [&'static str],
        value: impl Fn(&str) -> String,
    ) -> Option<SelectorView> {
        let mut text = String::new();
        let mut spans = Vec::with_capacity(HEAD + fields.len() + 2 * labels.len());
        let mut push = |s: &str| -> Option<()> {
            let start = u32::try_from(text.len()).ok()?;
            text.push_str(s);
            let end = u32::try_from(text.len()).ok()?;
            spans.push(Span { start, end });
            Some(())
        };
        for s in [api_version, kind, name, namespace] {
            push(s)?;
        }
        for f in fields {
            push(&value(f))?;
        }
        for (k, v) in labels {
            push(k)?;
            push(v)?;
        }
        Some(SelectorView {
            text: text.into_boxed_str(),
            spans: spans.into_boxed_slice(),
            fields,
        })
    }

    fn at(&self, i: usize) -> &str {
        let Span { start, end } = self.spans[i];
        // Spans are made on char boundaries of this text (whole strings pushed one by one).
        &self.text[start as usize..end as usize]
    }

    pub fn api_version(&self) -> &str {
        self.at(0)
    }

    pub fn kind(&self) -> &str {
        self.at(1)
    }

    /// The value of field label `label`: `metadata.name`, `metadata.namespace` or one of the
    /// kind's own the view was built with; `None` for any other.
    pub fn field(&self, label: &str) -> Option<&str> {
        match label {
            "metadata.name" => Some(self.at(2)),
            "metadata.namespace" => Some(self.at(3)),
            _ => {
                let i = self.fields.iter().position(|f| *f == label)?;
                Some(self.at(HEAD + i))
            }
        }
    }

    /// The value of label `key`, if the object has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        let first = HEAD + self.fields.len();
        let pairs = (self.spans.len() - first) / 2;
        // Labels are in key order (from a `BTreeMap`).
        let (mut lo, mut hi) = (0, pairs);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.at(first + 2 * mid).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.at(first + 2 * mid + 1)),
            }
        }
        None
    }
}

impl std::fmt::Debug for SelectorView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectorView")
            .field("apiVersion", &self.api_version())
            .field("kind", &self.kind())
            .field("name", &self.at(2))
            .field("namespace", &self.at(3))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_answers_what_it_was_built_from() {
        let labels: BTreeMap<String, String> = [("tier", "web"), ("app", "a"), ("z", "")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        const FIELDS: &[&str] = &["spec.nodeName", "status.phase"];
        let value = |f: &str| match f {
            "spec.nodeName" => "n1".to_string(),
            _ => String::new(),
        };
        let v = SelectorView::new("v1", "Pod", "p", "ns", &labels, FIELDS, value).unwrap();
        assert_eq!((v.api_version(), v.kind()), ("v1", "Pod"));
        assert_eq!(v.field("metadata.name"), Some("p"));
        assert_eq!(v.field("metadata.namespace"), Some("ns"));
        assert_eq!(v.field("spec.nodeName"), Some("n1"));
        assert_eq!(v.field("status.phase"), Some(""));
        assert_eq!(v.field("spec.restartPolicy"), None);
        for (k, want) in [("app", "a"), ("tier", "web"), ("z", "")] {
            assert_eq!(v.label(k), Some(want), "{k}");
        }
        for k in ["", "ap", "b", "tierx", "zz"] {
            assert_eq!(v.label(k), None, "{k}");
        }
        let bare = SelectorView::new("v1", "Node", "n", "", &BTreeMap::new(), &[], |_| {
            String::new()
        })
        .unwrap();
        assert_eq!(bare.label("app"), None);
        assert_eq!(bare.field("metadata.namespace"), Some(""));
    }
}
