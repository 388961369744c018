//! Conversions between etcd's types and the store's: key-values, events, key ranges, and which
//! etcd errors are expected outcomes (compacted, future revision, too large, no space).
//!
//! etcd reports these only as gRPC status messages (`mvcc: required revision has been compacted`,
//! `etcdserver: request is too large`, ...); kube-apiserver matches the same rpctypes errors.

use bytes::Bytes;

use crate::{Event, EventKind, KeyValue, Revision};

/// An etcd error the store turns into an outcome, or anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    Compacted,
    FutureRevision,
    TooLarge,
    NoSpace(String),
    Other,
}

/// Classify an etcd client error by etcd's message (its rpctypes error strings).
pub(crate) fn classify(error: &etcd_client::Error) -> Failure {
    let etcd_client::Error::GRpcStatus(status) = error else {
        return Failure::Other;
    };
    classify_message(status.message())
}

fn classify_message(message: &str) -> Failure {
    if message.contains("required revision has been compacted") {
        Failure::Compacted
    } else if message.contains("required revision is a future revision") {
        Failure::FutureRevision
    } else if message.contains("request is too large") {
        Failure::TooLarge
    } else if message.contains("database space exceeded") {
        Failure::NoSpace(message.to_owned())
    } else {
        Failure::Other
    }
}

/// The store's key-value of an etcd one.
pub(crate) fn key_value(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: revision(kv.create_revision()),
        mod_revision: revision(kv.mod_revision()),
    }
}

fn revision(rev: i64) -> Revision {
    u64::try_from(rev).unwrap_or(0)
}

/// The store's event of an etcd watch event (watched with `prev_kv`). `None` for an event without
/// a key-value (etcd always sends one).
pub(crate) fn event(ev: &etcd_client::Event) -> Option<Event> {
    let kv = ev.kv()?;
    let key = String::from_utf8_lossy(kv.key()).into_owned();
    let prev = ev.prev_kv().map(key_value);
    Some(match ev.event_type() {
        etcd_client::EventType::Put => Event {
            kind: EventKind::Put,
            key,
            revision: revision(kv.mod_revision()),
            value: Some(key_value(kv)),
            // A create has no previous value; etcd sends none (version 1 = first write of a life).
            prev: if kv.version() == 1 { None } else { prev },
        },
        etcd_client::EventType::Delete => Event {
            kind: EventKind::Delete,
            key,
            // A delete's kv carries only the key and the revision of the delete.
            revision: revision(kv.mod_revision()),
            value: None,
            prev,
        },
    })
}

/// The end of the key range holding every key that starts with `prefix` (etcd's `GetPrefixRangeEnd`):
/// the prefix with its last byte below 0xff incremented and the rest dropped; `"\0"` (every key) when
/// there is none.
pub(crate) fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_covers_exactly_the_prefix() {
        assert_eq!(prefix_end("/registry/pods/"), b"/registry/pods0".to_vec());
        assert_eq!(prefix_end("a"), b"b".to_vec());
        assert_eq!(prefix_end(""), vec![0]);
    }

    #[test]
    fn etcd_messages_map_to_outcomes() {
        assert_eq!(
            classify_message("etcdserver: mvcc: required revision has been compacted"),
            Failure::Compacted
        );
        assert_eq!(
            classify_message("etcdserver: mvcc: required revision is a future revision"),
            Failure::FutureRevision
        );
        assert_eq!(
            classify_message("etcdserver: request is too large"),
            Failure::TooLarge
        );
        assert!(matches!(
            classify_message("etcdserver: mvcc: database space exceeded"),
            Failure::NoSpace(_)
        ));
        assert_eq!(
            classify_message("etcdserver: leader changed"),
            Failure::Other
        );
    }
}
