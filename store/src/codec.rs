//! On-disk encodings: revision keys of the event log, stored key-values and logged events.
//!
//! - Log keys are revisions as 8-byte big-endian integers, so sled's byte order is revision order.
//! - Object keys are the key's UTF-8 bytes, so sled's byte order is Rust `str` order (the order lists
//!   return).
//! - Values start with a format byte; every decoder checks lengths and returns `None` on anything it
//!   does not understand (the caller reports `Corrupt` naming the data directory). Nothing panics on
//!   bad input.

use bytes::Bytes;

use crate::{Event, EventKind, KeyValue, Revision};

const KV_FORMAT: u8 = 1;
const EVENT_FORMAT: u8 = 1;

/// Log key of a revision: big-endian, so byte order is numeric order.
pub(crate) fn revision_key(revision: Revision) -> [u8; 8] {
    revision.to_be_bytes()
}

/// Inverse of [`revision_key`]; `None` unless exactly 8 bytes.
pub(crate) fn decode_revision_key(bytes: &[u8]) -> Option<Revision> {
    let array: [u8; 8] = bytes.try_into().ok()?;
    Some(Revision::from_be_bytes(array))
}

/// Stored form of a key-value (the key itself is the sled key).
pub(crate) fn encode_kv(kv: &KeyValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(17 + kv.value.len());
    out.push(KV_FORMAT);
    out.extend_from_slice(&kv.create_revision.to_be_bytes());
    out.extend_from_slice(&kv.mod_revision.to_be_bytes());
    out.extend_from_slice(&kv.value);
    out
}

/// The key-value `bytes` encode, its value left empty unless `with_value`.
pub(crate) fn decode_kv(key: &[u8], bytes: &[u8], with_value: bool) -> Option<KeyValue> {
    let key = std::str::from_utf8(key).ok()?.to_owned();
    let mut reader = Reader(bytes);
    if reader.u8()? != KV_FORMAT {
        return None;
    }
    let create_revision = reader.u64()?;
    let mod_revision = reader.u64()?;
    Some(KeyValue {
        key,
        value: if with_value {
            Bytes::copy_from_slice(reader.0)
        } else {
            Bytes::new()
        },
        create_revision,
        mod_revision,
    })
}

/// Stored form of a logged event (the revision is the sled key). `at_ms` is the commit time in Unix
/// milliseconds, placed right after the format byte so age-based compaction reads it cheaply.
pub(crate) fn encode_event(event: &Event, at_ms: u64) -> Vec<u8> {
    let value_len = |kv: &Option<KeyValue>| kv.as_ref().map_or(0, |kv| 20 + kv.value.len());
    let mut out =
        Vec::with_capacity(18 + event.key.len() + value_len(&event.value) + value_len(&event.prev));
    out.push(EVENT_FORMAT);
    out.extend_from_slice(&at_ms.to_be_bytes());
    out.push(match event.kind {
        EventKind::Put => 0,
        EventKind::Delete => 1,
    });
    put_bytes(&mut out, event.key.as_bytes());
    for kv in [&event.value, &event.prev] {
        match kv {
            None => out.push(0),
            Some(kv) => {
                out.push(1);
                out.extend_from_slice(&kv.create_revision.to_be_bytes());
                out.extend_from_slice(&kv.mod_revision.to_be_bytes());
                put_bytes(&mut out, &kv.value);
            }
        }
    }
    out
}

/// Commit time of an encoded event, without decoding the rest.
pub(crate) fn event_time(bytes: &[u8]) -> Option<u64> {
    let mut reader = Reader(bytes);
    if reader.u8()? != EVENT_FORMAT {
        return None;
    }
    reader.u64()
}

pub(crate) fn decode_event(revision: Revision, bytes: &[u8]) -> Option<Event> {
    let mut reader = Reader(bytes);
    if reader.u8()? != EVENT_FORMAT {
        return None;
    }
    let _at_ms = reader.u64()?;
    let kind = match reader.u8()? {
        0 => EventKind::Put,
        1 => EventKind::Delete,
        _ => return None,
    };
    let key = std::str::from_utf8(reader.bytes()?).ok()?.to_owned();
    let read_kv = |reader: &mut Reader<'_>| -> Option<Option<KeyValue>> {
        match reader.u8()? {
            0 => Some(None),
            1 => {
                let create_revision = reader.u64()?;
                let mod_revision = reader.u64()?;
                let value = Bytes::copy_from_slice(reader.bytes()?);
                Some(Some(KeyValue {
                    key: key.clone(),
                    value,
                    create_revision,
                    mod_revision,
                }))
            }
            _ => None,
        }
    };
    let value = read_kv(&mut reader)?;
    let prev = read_kv(&mut reader)?;
    if !reader.0.is_empty() {
        return None;
    }
    // Shape checks: a put has a new value at this revision, a delete has none.
    match (kind, &value) {
        (EventKind::Put, Some(kv)) if kv.mod_revision == revision => {}
        (EventKind::Delete, None) => {}
        _ => return None,
    }
    Some(Event {
        kind,
        key,
        revision,
        value,
        prev,
    })
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // Values are at most MAX_VALUE_SIZE and keys far smaller, so u32 always fits.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = u32::from_be_bytes(self.take(4)?.try_into().ok()?);
        self.take(usize::try_from(len).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_kv(key: String) -> impl Strategy<Value = KeyValue> {
        (
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(move |(c, m, v)| KeyValue {
                key: key.clone(),
                value: Bytes::from(v),
                create_revision: c,
                mod_revision: m,
            })
    }

    proptest! {
        #[test]
        fn revision_key_round_trips_and_preserves_order(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(decode_revision_key(&revision_key(a)), Some(a));
            prop_assert_eq!(a.cmp(&b), revision_key(a).cmp(&revision_key(b)));
        }

        #[test]
        fn object_key_bytes_preserve_str_order(a in ".*", b in ".*") {
            prop_assert_eq!(a.cmp(&b), a.as_bytes().cmp(b.as_bytes()));
        }

        #[test]
        fn kv_round_trips(kv in ".{0,40}".prop_flat_map(arb_kv)) {
            let decoded = decode_kv(kv.key.as_bytes(), &encode_kv(&kv), true);
            prop_assert_eq!(decoded, Some(kv));
        }

        #[test]
        fn event_round_trips(
            key in ".{0,40}",
            rev in 1u64..u64::MAX,
            at in any::<u64>(),
            delete in any::<bool>(),
            has_prev in any::<bool>(),
            seed in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let kv = |m: u64| KeyValue { key: key.clone(), value: Bytes::from(seed.clone()), create_revision: 1, mod_revision: m };
            let event = Event {
                kind: if delete { EventKind::Delete } else { EventKind::Put },
                key: key.clone(),
                revision: rev,
                value: if delete { None } else { Some(kv(rev)) },
                prev: if has_prev || delete { Some(kv(rev - 1)) } else { None },
            };
            let bytes = encode_event(&event, at);
            prop_assert_eq!(event_time(&bytes), Some(at));
            prop_assert_eq!(decode_event(rev, &bytes), Some(event));
        }

        #[test]
        fn decoders_never_panic_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..200), rev in any::<u64>()) {
            let _ = decode_event(rev, &bytes);
            let _ = decode_kv(&bytes, &bytes, true);
            let _ = event_time(&bytes);
            let _ = decode_revision_key(&bytes);
        }

        #[test]
        fn truncated_events_are_rejected(key in ".{0,10}", cut in 0usize..30) {
            let event = Event { kind: EventKind::Put, key: key.clone(), revision: 5,
                value: Some(KeyValue { key, value: Bytes::from_static(b"abc"), create_revision: 5, mod_revision: 5 }), prev: None };
            let bytes = encode_event(&event, 7);
            let cut = cut.min(bytes.len() - 1);
            prop_assert_eq!(decode_event(5, &bytes[..cut]), None);
        }
    }
}
