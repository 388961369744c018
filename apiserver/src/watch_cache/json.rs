//! An object's JSON text without `metadata.resourceVersion`, with the field's place kept.
//!
//! A stored value carries no resourceVersion (the store's revision is the resourceVersion), while
//! every watch event and every response carries it. Keeping the place where the field goes makes
//! the text at any revision one splice of the stored text, byte for byte what serialising the
//! stamped object gives: the field goes where `api::wire::set_resource_version` puts it (its place
//! in ObjectMeta's Go order, before the first field that comes after it), and `serde_json` writes
//! keys in their order.
//!
//! The text is kept as the store keeps it ([`StoredText`]): as JSON, or compressed, in which case
//! each splice decompresses it first. The slot is a place in the JSON.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};

use super::stored::{self, StoredText};

const RESOURCE_VERSION: &str = "resourceVersion";

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct ObjectJson {
    /// The text as stored: JSON, or compressed JSON.
    text: Bytes,
    /// Where `metadata.resourceVersion` goes; `None` without a `metadata` object (stamping then
    /// sets nothing either).
    slot: Option<Slot>,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// Byte offset in `text`.
    at: usize,
    /// The field goes before every other metadata field (no comma before it).
    first: bool,
    /// ...and metadata has no other field (no comma after it either).
    alone: bool,
}

impl ObjectJson {
    /// `obj` serialised as `serde_json::to_vec` would serialise it without
    /// `metadata.resourceVersion`, kept as JSON.
    pub fn encode(obj: &Value) -> serde_json::Result<ObjectJson> {
        Self::encode_as(obj, StoredText::Json)
    }

    /// [`encode`](Self::encode), the text kept as `codec` stores it.
    pub fn encode_as(obj: &Value, codec: StoredText) -> serde_json::Result<ObjectJson> {
        let Value::Object(top) = obj else {
            return Ok(ObjectJson {
                text: exact(codec.store(api::wire::to_vec(obj)?)),
                slot: None,
            });
        };
        let mut out = Vec::with_capacity(2048);
        let mut slot = None;
        out.push(b'{');
        for (i, (k, v)) in top.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            api::wire::to_writer(&mut out, k)?;
            out.push(b':');
            match v {
                Value::Object(meta) if k == "metadata" => {
                    slot = Some(write_metadata(&mut out, meta)?)
                }
                _ => api::wire::to_writer(&mut out, v)?,
            }
        }
        out.push(b'}');
        Ok(ObjectJson {
            text: exact(codec.store(out)),
            slot,
        })
    }

    /// This text as `codec` stores it: a JSON text compressed for [`StoredText::Lz4`], else
    /// this one (shared).
    pub fn stored_as(&self, codec: StoredText) -> ObjectJson {
        let compressed = match codec {
            StoredText::Lz4 if !stored::is_compressed(&self.text) => stored::compress(&self.text),
            _ => None,
        };
        match compressed {
            Some(text) => ObjectJson {
                text: exact(text),
                slot: self.slot,
            },
            None => self.clone(),
        }
    }

    /// This text in `stored`'s buffer if `stored` holds the same bytes, so that the store's copy
    /// and this one are one.
    pub(super) fn sharing(mut self, stored: &Bytes) -> ObjectJson {
        if self.text == *stored {
            self.text = stored.clone();
        }
        self
    }

    /// The text without resourceVersion as the store keeps it (JSON, or compressed JSON).
    pub fn stored(&self) -> &Bytes {
        &self.text
    }

    /// The JSON text without resourceVersion.
    pub fn plain(&self) -> Cow<'_, [u8]> {
        // Only `encode_as` makes a text, and what it compressed decompresses.
        stored::plain(&self.text).unwrap_or_else(|e| {
            tracing::error!(error = %e, "a held text does not decompress");
            Cow::Borrowed(b"null")
        })
    }

    /// The text with `metadata.resourceVersion` set to `rv`.
    pub fn with_resource_version(&self, rv: &str) -> Bytes {
        if self.slot.is_none() && !stored::is_compressed(&self.text) {
            return self.text.clone();
        }
        let text = self.plain();
        let mut out = BytesMut::with_capacity(text.len() + rv.len() + 24);
        self.splice(&text, rv, &mut out);
        out.freeze()
    }

    /// Writes the text with `metadata.resourceVersion` set to `rv` to `out`.
    pub fn write_with_resource_version(&self, rv: &str, out: &mut impl BufMut) {
        self.splice(&self.plain(), rv, out);
    }

    /// Writes `text` (this text as JSON) with `rv` spliced in at the slot.
    fn splice(&self, text: &[u8], rv: &str, out: &mut impl BufMut) {
        let Some(slot) = self.slot else {
            out.put_slice(text);
            return;
        };
        out.put_slice(&text[..slot.at]);
        if !slot.first {
            out.put_u8(b',');
        }
        out.put_slice(b"\"resourceVersion\":");
        // A JSON string (escaped if it ever needs to be): writing into memory cannot fail.
        let _ = api::wire::to_writer((&mut *out).writer(), rv);
        if slot.first && !slot.alone {
            out.put_u8(b',');
        }
        out.put_slice(&text[slot.at..]);
    }
}

/// `text` in an allocation of its exact length. `Bytes::from(Vec)` keeps the vector's whole
/// capacity, and a text grown by doubling has up to half of it spare: the store's index and the
/// watch cache hold this text for as long as the object exists (a 4.2 KB pod sat in 8 KB).
pub(super) fn exact(mut text: Vec<u8>) -> Bytes {
    text.shrink_to_fit();
    Bytes::from(text)
}

/// Writes `meta` without its resourceVersion; returns where it goes.
fn write_metadata(out: &mut Vec<u8>, meta: &Map<String, Value>) -> serde_json::Result<Slot> {
    out.push(b'{');
    let mut slot = None;
    let mut written = 0;
    let at = api::wire::resource_version_slot(meta);
    for (i, (k, v)) in meta.iter().enumerate() {
        if k == RESOURCE_VERSION {
            continue;
        }
        if slot.is_none() && i >= at {
            slot = Some(Slot {
                at: out.len(),
                first: written == 0,
                alone: false,
            });
        }
        if written > 0 {
            out.push(b',');
        }
        api::wire::to_writer(&mut *out, k)?;
        out.push(b':');
        api::wire::to_writer(&mut *out, v)?;
        written += 1;
    }
    let slot = slot.unwrap_or(Slot {
        at: out.len(),
        first: written == 0,
        alone: written == 0,
    });
    out.push(b'}');
    Ok(slot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn stamped(obj: &Value, rv: &str) -> Vec<u8> {
        let mut obj = obj.clone();
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.shift_remove(RESOURCE_VERSION);
        }
        api::wire::set_resource_version(&mut obj, rv.to_string());
        api::wire::to_vec(&obj).unwrap_or_default()
    }

    fn without_rv(obj: &Value) -> Vec<u8> {
        let mut obj = obj.clone();
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.shift_remove(RESOURCE_VERSION);
        }
        api::wire::to_vec(&obj).unwrap_or_default()
    }

    fn check(obj: &Value) {
        for codec in [StoredText::Json, StoredText::Lz4] {
            let json = ObjectJson::encode_as(obj, codec).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(json.plain().as_ref(), without_rv(obj).as_slice(), "{obj}");
            let converted = ObjectJson::encode(obj).unwrap().stored_as(codec);
            assert_eq!(converted.stored(), json.stored(), "{obj} ({codec:?})");
            assert_eq!(
                stored::is_compressed(json.stored()),
                codec == StoredText::Lz4,
                "{obj}"
            );
            for rv in ["1", "18446744073709551615", "q\"\\"] {
                assert_eq!(
                    json.with_resource_version(rv).as_ref(),
                    stamped(obj, rv).as_slice(),
                    "{obj} at {rv} ({codec:?})"
                );
                let mut written = b"[".to_vec();
                json.write_with_resource_version(rv, &mut written);
                assert_eq!(&written[1..], stamped(obj, rv).as_slice(), "{obj} at {rv}");
            }
        }
    }

    #[test]
    fn every_place_of_the_field() {
        for obj in [
            json!({"metadata": {}}),
            json!({"metadata": {"resourceVersion": "3"}}),
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"uid": "u"}}),
            json!({"metadata": {"name": "a", "uid": "u"}, "spec": {"x": [1, "é\n"]}}),
            json!({"metadata": {"name": "a", "resourceVersion": "7", "uid": "u"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"a": 1, "resourceVersion": "9"}}),
            json!({"metadata": "not an object", "z": null}),
            json!({"spec": {"metadata": {"name": "nested, left alone"}}}),
            json!([1, 2]),
            json!("text"),
        ] {
            check(&obj);
        }
    }

    /// The allocation behind a text nobody else holds.
    fn allocated(text: Bytes) -> usize {
        text.try_into_mut()
            .map(|t| t.capacity())
            .unwrap_or_else(|_| panic!("the text is shared"))
    }

    #[test]
    fn a_text_holds_no_spare_capacity() {
        // Longer than the encoder's first allocation, so the vector grew (by doubling).
        let long = "x".repeat(3000);
        for obj in [
            json!({"metadata": {"name": "a", "annotations": {"a": long}}, "spec": {}}),
            json!([long]),
        ] {
            for codec in [StoredText::Json, StoredText::Lz4] {
                let json = ObjectJson::encode_as(&obj, codec).unwrap_or_else(|e| panic!("{e}"));
                let text = json.stored().clone();
                drop(json);
                let len = text.len();
                assert_eq!(allocated(text), len, "{codec:?}");
            }
        }
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z\"\\\\ é]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(key(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Keys on both sides of `resourceVersion`, and the key itself.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(RESOURCE_VERSION.to_string()),
            Just("resourceVersiom".to_string()),
            Just("resourceVersionz".to_string()),
            Just("metadata".to_string()),
            "[a-z]{1,3}",
        ]
    }

    proptest! {
        #[test]
        fn splicing_is_serialising_the_stamped_object(
            meta in prop::collection::btree_map(key(), value(), 0..6),
            rest in prop::collection::btree_map(key(), value(), 0..4),
        ) {
            let mut top: Map<String, Value> = rest.into_iter().collect();
            top.insert("metadata".to_string(), Value::Object(meta.into_iter().collect()));
            check(&Value::Object(top));
        }
    }
}
