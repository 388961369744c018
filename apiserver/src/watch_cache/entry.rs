//! An object as the cache holds it between its events: its JSON text, what selectors read of it,
//! and its decoded tree only while something uses the tree.
//!
//! A decoded object is a tree of maps (a running pod: ~26 KB with every map at its exact length,
//! about a third more as parsed; six to eight times its 4 KB of text), and the cache holds every
//! object for as long as it exists, while most of them are read again only by a LIST or a write.
//! So an entry keeps the text (the bytes the writer stored, or the defaulted object serialised
//! once) and a weak reference to the tree: the tree lives while its event is in the live log or a
//! watcher or request holds it, and is decoded again from the text when asked for after that (the
//! ring keeps entries too, [`super::ring`]). Upstream's cacher keeps, per object, the object and
//! its labels and fields (`storeElement`); the labels and fields here are the
//! [`view`](Entry::view), which list filters read without decoding the object.
//!
//! Guarantees: [`Entry::object`] is equal to the object the entry was made from (decoding the
//! text and setting `metadata.resourceVersion` gives the same tree, keys in the same order);
//! an entry never changes once made (a new state is a new entry).

use std::sync::{Arc, Weak};

use serde_json::Value;

use store::Revision;

use super::{ObjectJson, SelectorView};

/// See the module documentation.
pub(super) struct Entry {
    /// The object's resourceVersion.
    pub(super) revision: Revision,
    /// The object's text without its resourceVersion, and where that goes.
    pub(super) json: ObjectJson,
    /// What label and field selectors read of the object (see [`super::StorageDefaults`]);
    /// `None` when the kind cannot say, and a filter decodes the object.
    pub(super) view: Option<SelectorView>,
    /// The decoded object, while something else holds it.
    tree: parking_lot::Mutex<Weak<Value>>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("revision", &self.revision)
            .field("len", &self.json.stored().len())
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The entry of `object` (with `revision` as its resourceVersion) whose text is `json`, or
    /// `object` serialised when no writer handed a text over; `None` if it cannot be serialised.
    pub(super) fn new(
        revision: Revision,
        object: &Arc<Value>,
        json: Option<ObjectJson>,
        view: Option<SelectorView>,
    ) -> Option<Arc<Entry>> {
        let json = match json {
            Some(json) => json,
            None => ObjectJson::encode(object).ok()?,
        };
        Some(Arc::new(Entry {
            revision,
            json,
            view,
            tree: parking_lot::Mutex::new(Arc::downgrade(object)),
        }))
    }

    /// The object: the tree in use if there is one, else decoded from the text (and shared from
    /// then on while the caller holds it). `None` only if the text does not parse, which a text
    /// this process serialised or stored always does.
    pub(super) fn object(&self) -> Option<Arc<Value>> {
        self.object_told().map(|(object, _)| object)
    }

    /// [`object`](Self::object), and whether it was decoded for this call.
    pub(super) fn object_told(&self) -> Option<(Arc<Value>, bool)> {
        let mut tree = self.tree.lock();
        if let Some(object) = tree.upgrade() {
            return Some((object, false));
        }
        // Decoded under the entry's own lock: two readers of one cold entry decode it once.
        let object = Arc::new(self.decode()?);
        *tree = Arc::downgrade(&object);
        Some((object, true))
    }

    /// Whether the decoded tree is alive (held by an event or a request).
    #[cfg(test)]
    pub(super) fn is_decoded(&self) -> bool {
        self.tree.lock().strong_count() > 0
    }

    fn decode(&self) -> Option<Value> {
        let object = super::decode(self.json.stored(), self.revision);
        if object.is_none() {
            tracing::error!(
                revision = self.revision,
                "a cached object's text does not parse"
            );
        }
        object
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch_cache::stamp;
    use serde_json::json;

    #[test]
    fn a_cold_entry_decodes_to_the_object_it_was_made_from() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}],
                     "priority": 0, "weight": 1.5},
            "status": {"phase": "Running"}
        });
        stamp(&mut pod, 42);
        let pod = Arc::new(pod);
        let entry = Entry::new(42, &pod, None, None).unwrap();
        assert!(entry.is_decoded());
        assert!(
            Arc::ptr_eq(&entry.object().unwrap(), &pod),
            "shared while held"
        );
        let text = api::wire::to_vec(pod.as_ref()).unwrap();
        drop(pod);
        assert!(
            !entry.is_decoded(),
            "the entry alone does not keep the tree"
        );
        let decoded = entry.object().unwrap();
        assert_eq!(
            api::wire::to_vec(decoded.as_ref()).unwrap(),
            text,
            "same keys, same order"
        );
        assert!(
            Arc::ptr_eq(&decoded, &entry.object().unwrap()),
            "decoded once while held"
        );
    }
}
