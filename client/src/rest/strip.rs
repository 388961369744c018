//! Dropping `metadata.managedFields` from encoded objects before they are decoded.
//!
//! client-go's `TransformStripManagedFields` (used by kube-scheduler and controller-runtime caches)
//! clears the field after decoding, which saves memory but not the work of building it; an
//! object's managed-fields entries are a large part of its JSON, and every informer decodes every
//! event. Here the bytes of `"managedFields": […]` are cut out of the object's text first, so the
//! entries are never built at all.
//!
//! The scanner walks JSON structure (strings with escapes, nesting), so a `managedFields` key
//! anywhere but directly in the top-level `metadata` object (an annotation, a ConfigMap key) is
//! left alone. Text it cannot follow is returned unchanged: the decoder then reports the error
//! exactly as it would have without stripping.
//!
//! Where only the `metadata` of an object is decoded, [`meta_without_managed_fields`] skips the
//! member in the parser instead, with no scan and no copy of the text.

use std::borrow::Cow;
use std::ops::Range;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Deserializes an `ObjectMeta` without its `managedFields` (`None`): the parser skips the member,
/// so its entries are never built. For `#[serde(deserialize_with = ...)]`.
pub fn meta_without_managed_fields<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<ObjectMeta, D::Error> {
    struct Meta;
    impl<'de> Visitor<'de> for Meta {
        type Value = ObjectMeta;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("object metadata")
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectMeta, A::Error> {
            ObjectMeta::deserialize(de::value::MapAccessDeserializer::new(SkipManagedFields(
                map,
            )))
        }
    }
    d.deserialize_map(Meta)
}

/// The members of a map but `managedFields`, whose value is read past.
struct SkipManagedFields<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SkipManagedFields<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.0.next_key::<String>()? {
            if key == "managedFields" {
                self.0.next_value::<IgnoredAny>()?;
                continue;
            }
            return seed
                .deserialize(de::value::StringDeserializer::<A::Error>::new(key))
                .map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }
}

/// `obj` (one encoded object) without `metadata.managedFields`.
pub fn object_without_managed_fields(obj: &[u8]) -> Cow<'_, [u8]> {
    let mut cuts = Vec::new();
    // Only the members up to `metadata` are walked (it comes early in every encoder's output).
    match skip_ws(obj, 0).and_then(|at| object_cuts(obj, at, &mut cuts, false)) {
        Some(_) => cut(obj, &cuts),
        None => Cow::Borrowed(obj),
    }
}

/// `list` (an encoded `…List` with `items`) with `metadata.managedFields` dropped from every item.
pub fn list_without_managed_fields(list: &[u8]) -> Cow<'_, [u8]> {
    let mut cuts = Vec::new();
    match list_cuts(list, &mut cuts) {
        Some(()) => cut(list, &cuts),
        None => Cow::Borrowed(list),
    }
}

fn list_cuts(b: &[u8], cuts: &mut Vec<Range<usize>>) -> Option<()> {
    let (members, _) = members(b, skip_ws(b, 0)?)?;
    let Some(items) = members.iter().find(|m| m.key(b) == b"items") else {
        return Some(());
    };
    if b.get(items.value) != Some(&b'[') {
        return Some(());
    }
    let mut at = skip_ws(b, items.value + 1)?;
    if b.get(at) == Some(&b']') {
        return Some(());
    }
    loop {
        at = skip_ws(b, object_cuts(b, at, cuts, true)?)?;
        match b.get(at)? {
            b',' => at = skip_ws(b, at + 1)?,
            b']' => return Some(()),
            _ => return None,
        }
    }
}

/// One `"key": value` of an object, as positions in the text.
struct Member {
    /// The opening quote of the key.
    start: usize,
    /// Just after the closing quote of the key.
    key_end: usize,
    /// The first byte of the value.
    value: usize,
    /// Just after the value.
    end: usize,
}

impl Member {
    /// The key's raw text between its quotes.
    fn key<'a>(&self, b: &'a [u8]) -> &'a [u8] {
        &b[self.start + 1..self.key_end - 1]
    }
}

/// For the member starting at `at` (its key's opening quote): the end of its key and the start of
/// its value.
fn key_and_value(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let key_end = skip_string(b, at)?;
    let colon = skip_ws(b, key_end)?;
    if b.get(colon) != Some(&b':') {
        return None;
    }
    Some((key_end, skip_ws(b, colon + 1)?))
}

/// The member starting at `at` (its key's opening quote).
fn member(b: &[u8], at: usize) -> Option<Member> {
    let (key_end, value) = key_and_value(b, at)?;
    let end = skip_value(b, value)?;
    Some(Member {
        start: at,
        key_end,
        value,
        end,
    })
}

/// Records the span of `metadata.managedFields` (with one adjoining comma) of the value at `at`.
/// Returns the position after the value, or with `to_end` false, any position once `metadata`
/// was seen (the rest of the object is not walked).
fn object_cuts(b: &[u8], at: usize, cuts: &mut Vec<Range<usize>>, to_end: bool) -> Option<usize> {
    if b.get(at) != Some(&b'{') {
        return skip_value(b, at);
    }
    let mut at = skip_ws(b, at + 1)?;
    if b.get(at) == Some(&b'}') {
        return Some(at + 1);
    }
    loop {
        let (key_end, value) = key_and_value(b, at)?;
        // `metadata` is walked member by member once; every other value is skipped whole.
        let end = if &b[at + 1..key_end - 1] == b"metadata" && b.get(value) == Some(&b'{') {
            let (fields, end) = members(b, value)?;
            if let Some(i) = fields.iter().position(|f| f.key(b) == b"managedFields") {
                cuts.push(if i > 0 {
                    // `,"managedFields":[…]`
                    fields[i - 1].end..fields[i].end
                } else if let Some(next) = fields.get(1) {
                    // `"managedFields":[…],`
                    fields[0].start..next.start
                } else {
                    fields[0].start..fields[0].end
                });
            }
            if !to_end {
                return Some(end);
            }
            end
        } else {
            skip_value(b, value)?
        };
        at = skip_ws(b, end)?;
        match b.get(at)? {
            b',' => at = skip_ws(b, at + 1)?,
            b'}' => return Some(at + 1),
            _ => return None,
        }
    }
}

/// The members of the object starting at `at`, and the position after it.
fn members(b: &[u8], at: usize) -> Option<(Vec<Member>, usize)> {
    if b.get(at) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = skip_ws(b, at + 1)?;
    if b.get(at) == Some(&b'}') {
        return Some((out, at + 1));
    }
    loop {
        let m = member(b, at)?;
        at = skip_ws(b, m.end)?;
        out.push(m);
        match b.get(at)? {
            b',' => at = skip_ws(b, at + 1)?,
            b'}' => return Some((out, at + 1)),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut at: usize) -> Option<usize> {
    while b.get(at)?.is_ascii_whitespace() {
        at += 1;
    }
    Some(at)
}

/// Position after the string starting at `at`.
fn skip_string(b: &[u8], at: usize) -> Option<usize> {
    if b.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        match b[i] {
            b'"' => return Some(i + 1),
            _ => i += 2,
        }
    }
}

/// Position after the value starting at `at`.
fn skip_value(b: &[u8], at: usize) -> Option<usize> {
    let (open, close) = match b.get(at)? {
        b'"' => return skip_string(b, at),
        b'{' => (b'{', b'}'),
        b'[' => (b'[', b']'),
        _ => {
            // A number or literal: up to the next delimiter.
            let len = b[at..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace())
                .unwrap_or(b.len() - at);
            return (len > 0).then_some(at + len);
        }
    };
    // Brackets of the other kind balance among themselves, so only this kind (outside strings)
    // decides where the value ends.
    let mut depth = 0usize;
    let mut i = at;
    loop {
        i += memchr::memchr3(b'"', open, close, b.get(i..)?)?;
        match b[i] {
            b'"' => {
                i = skip_string(b, i)?;
                continue;
            }
            c if c == open => depth += 1,
            _ => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
        }
        i += 1;
    }
}

fn cut<'a>(b: &'a [u8], cuts: &[Range<usize>]) -> Cow<'a, [u8]> {
    if cuts.is_empty() {
        return Cow::Borrowed(b);
    }
    let removed: usize = cuts.iter().map(|r| r.len()).sum();
    let mut out = Vec::with_capacity(b.len() - removed);
    let mut from = 0;
    for r in cuts {
        out.extend_from_slice(&b[from..r.start]);
        from = r.end;
    }
    out.extend_from_slice(&b[from..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn stripped(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        v
    }

    fn check(text: &str) {
        let want = stripped(&serde_json::from_str(text).unwrap());
        let got: Value = serde_json::from_slice(&object_without_managed_fields(text.as_bytes()))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(got, want, "{text}");
    }

    #[test]
    fn drops_only_the_metadata_field_in_every_position() {
        let mf = r#"[{"manager":"m","fieldsV1":{"f:spec":{"f:x":{}}},"time":"t\"]}"}]"#;
        check(&format!(r#"{{"metadata":{{"managedFields":{mf}}}}}"#));
        check(&format!(
            r#"{{"metadata":{{"managedFields":{mf},"name":"a"}}}}"#
        ));
        check(&format!(
            r#"{{"metadata":{{"name":"a","managedFields":{mf}}}}}"#
        ));
        check(&format!(
            r#"{{"kind":"Pod","metadata":{{"name":"a","managedFields":{mf},"uid":"u"}},"spec":{{}}}}"#
        ));
        check(&format!(
            r#" {{ "metadata" : {{ "name" : "a" , "managedFields" : {mf} , "uid" : 1 }} }} "#
        ));
        // Elsewhere the key is data: kept.
        check(&format!(
            r#"{{"metadata":{{"annotations":{{"managedFields":"x"}}}},"data":{{"managedFields":{mf}}},"managedFields":1}}"#
        ));
        check(r#"{"metadata":{"name":"no-entries"}}"#);
        check(r#"{"metadata":{}}"#);
        check(r#"{}"#);
    }

    #[test]
    fn text_it_cannot_follow_is_returned_unchanged() {
        for bad in [
            &b"not json"[..],
            br#"{"metadata":{"managedFields":[1,2"#,
            br#"{"metadata":"#,
            b"",
            br#"[1,2]"#,
        ] {
            assert_eq!(object_without_managed_fields(bad).as_ref(), bad);
        }
    }

    #[test]
    fn drops_the_field_from_every_list_item() {
        let item = |n: &str| json!({"metadata": {"name": n, "managedFields": [{"manager": "m", "fieldsV1": {"f:a": {}}}]}, "spec": {"managedFields": 1}});
        let list = json!({"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": [item("a"), item("b"), {"metadata": {"name": "c"}}]});
        let text = serde_json::to_vec(&list).unwrap();
        let got: Value = serde_json::from_slice(&list_without_managed_fields(&text)).unwrap();
        let mut want = list.clone();
        for i in want["items"].as_array_mut().unwrap() {
            *i = stripped(i);
        }
        assert_eq!(got, want);
        let empty = br#"{"kind":"PodList","items":[],"metadata":{}}"#;
        assert_eq!(list_without_managed_fields(empty).as_ref(), empty);
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-z\"\\\\{}\\[\\],: ]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(
                    prop_oneof![Just("managedFields".to_string()), "[a-z]{1,3}"],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn equals_decoding_then_removing(meta in arb_json(), rest in arb_json(), pretty in any::<bool>()) {
            let obj = json!({"metadata": meta, "spec": rest});
            let text = if pretty {
                serde_json::to_string_pretty(&obj).unwrap()
            } else {
                serde_json::to_string(&obj).unwrap()
            };
            let got: Value = serde_json::from_slice(&object_without_managed_fields(text.as_bytes())).unwrap();
            prop_assert_eq!(got, stripped(&obj));
        }
    }
}
