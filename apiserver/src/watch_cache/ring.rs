//! The changes a resource's ring keeps: what a watch from a past resourceVersion replays and a
//! list at a past revision undoes ([`super`]).
//!
//! A change keeps its states as the cache's [`Entry`]s (texts and selector views), not as
//! decoded trees: a ring holds 10,240 changes of each resource by default and a decoded pod is
//! six times its text, so trees kept with the ring held a copy of the last ten thousand states of
//! every busy resource (~0.5 GB at 100,000 pods). A replay decodes its changes a page at a time
//! as the watcher sends them ([`super::InitialPages`]); a list at a past revision reads a past
//! state's entry as it reads a current one (on its view, its text written as it is).

use std::sync::Arc;

use store::Revision;

use super::entry::Entry;
use super::{Before, CacheEvent, EventType};

/// One change of one object, as the ring keeps it.
#[derive(Debug, Clone)]
pub(super) struct Change {
    /// Kind of change.
    pub(super) kind: EventType,
    /// Storage key.
    pub(super) key: String,
    /// Revision of the change (for a delete: of the delete).
    pub(super) revision: Revision,
    /// The new state (for a delete: the last one, at its own revision).
    pub(super) object: Arc<Entry>,
    /// The state before, if the object existed.
    pub(super) prev: Option<Arc<Entry>>,
}

impl Change {
    /// An object that is there at `revision`, as the ADDED event of a watch's snapshot.
    pub(super) fn snapshot(key: String, revision: Revision, object: Arc<Entry>) -> Self {
        Change {
            kind: EventType::Added,
            key,
            revision,
            object,
            prev: None,
        }
    }

    /// The change as its watchers get it: the new state decoded (shared with whoever holds it
    /// decoded), its text copied from the entry's; `None` for a text that does not parse, which
    /// a text the cache made never is.
    pub(super) fn event(&self) -> Option<CacheEvent> {
        let object = self.object.object()?;
        let deleted = self.kind == EventType::Deleted;
        // A delete's last state goes out at the delete's revision.
        let rv = if deleted {
            self.revision
        } else {
            self.object.revision
        };
        Some(CacheEvent {
            encoded: self
                .object
                .json
                .with_resource_version(&rv.to_string())
                .into(),
            stamp_revision: deleted,
            ..CacheEvent::with_before(
                self.kind,
                self.key.clone(),
                self.revision,
                object,
                self.prev.clone().map(Before::Held),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};
    use store::{Event, EventKind, KeyValue};

    use crate::watch_cache::snapshot::tests::cache;
    use crate::watch_cache::{EventType, WatchFrom, WatchStart};

    #[test]
    fn the_ring_keeps_texts_and_a_replay_decodes_them() {
        let c = cache(100);
        let p = "/registry/pods/";
        let key = "/registry/pods/ns/a";
        let a = json!({"metadata": {"name": "a", "labels": {"v": "2"}}});
        c.apply(Event {
            kind: EventKind::Put,
            key: key.into(),
            revision: 14,
            value: Some(KeyValue {
                key: key.into(),
                value: serde_json::to_vec(&a).unwrap().into(),
                create_revision: 5,
                mod_revision: 14,
            }),
            prev: None,
        });
        let change = c.inner.read().resources[p].ring.back().cloned().unwrap();
        assert_eq!((change.kind, change.revision), (EventType::Modified, 14));
        let prev = change.prev.clone().unwrap();
        assert!(
            !change.object.is_decoded() && !prev.is_decoded(),
            "no tree outlives the event when nobody watches"
        );
        let WatchStart::Watching(w) = c.watch(p, WatchFrom::After(13)) else {
            panic!("not watching")
        };
        let [ev] = &w.initial[..] else {
            panic!("{:?}", w.initial)
        };
        assert_eq!((ev.kind, ev.revision), (EventType::Modified, 14));
        assert_eq!(ev.object["metadata"]["labels"]["v"], "2");
        assert_eq!(ev.object["metadata"]["resourceVersion"], "14");
        let before = ev.prev().unwrap();
        assert_eq!(before["metadata"]["resourceVersion"], "5");
        let sent: Value = serde_json::from_slice(ev.encoded.get().unwrap()).unwrap();
        assert_eq!(&sent, ev.object.as_ref(), "its text is its object's");
        drop(before);
        assert!(change.object.is_decoded(), "held by the replayed event");
        assert!(!prev.is_decoded(), "the state before: only when read");
    }
}
