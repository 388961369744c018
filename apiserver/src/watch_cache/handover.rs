//! The hand-over between a writer and the watch cache: a write's object and JSON text reach its
//! watch event without being decoded or serialised again.
//!
//! Contract:
//! - A writer offers its object *before* the store write ([`WatchCache::offer_pending`]): the bytes
//!   it writes and exactly the object they decode to. At most one offer per key is outstanding;
//!   a second writer of the key keeps its object and offers it after its write instead
//!   ([`WatchCache::offer`]).
//! - The write's event takes the offer when its stored value is exactly the offered bytes (the same
//!   buffer, or equal), whichever of the writer and the feeder comes first: the feeder
//!   ([`take_offer`](WatchCache::take_offer)) or the writer, which [`settle`](WatchCache::settle)s
//!   it with the revision it was stored at. Both then share one `Arc`.
//! - A write that did not happen, or a writer dropped mid-write (its client went away),
//!   [`withdraw`](WatchCache::withdraw)s its offer: an offer never outlives its writer
//!   ([`WatchCache::write_through`] guarantees it with a drop guard).
//! - An offer whose event already went by (a relist) is dropped by the key's next event, or by the
//!   relist itself; `offers.applied` (the revision of the last event the feeder took an offer for,
//!   or decoded) is moved under the same lock, so no offer can arrive after its event and stay.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::{same_bytes, stamp, ObjectJson, WatchCache};
use crate::error::{ApiError, Result};
use store::Revision;

/// An object a writer handed over for the event its write produces.
pub(super) enum Offer {
    /// Before its store write ([`WatchCache::offer_pending`]): the object as stored and its JSON
    /// (the bytes written). The event whose value is exactly these bytes takes it.
    Pending { json: ObjectJson, object: Value },
    /// After its store write: the object with its resourceVersion and, if known, its JSON, for
    /// the event at `revision`.
    Stored {
        revision: Revision,
        object: Arc<Value>,
        json: Option<ObjectJson>,
    },
}

/// Objects writers handed over, by key (see [`WatchCache::offer_pending`]).
#[derive(Default)]
pub(super) struct Offers {
    pub(super) by_key: HashMap<String, Offer>,
    /// Revision of the last store event the feeder took an offer for (or decoded).
    pub(super) applied: Revision,
}

impl WatchCache {
    /// Hands over, before its store write, the object a writer is about to store at `key`:
    /// `bytes` are exactly what it writes and `object` exactly what they decode to (no
    /// resourceVersion). The write's event then takes the object instead of decoding the bytes,
    /// and its JSON text instead of serialising the object, whichever of the writer and the feeder
    /// comes first. The writer afterwards calls
    /// [`settle`](Self::settle) (written) or [`withdraw`](Self::withdraw) (not written).
    /// Refused (the object comes back) while another offer for `key` is outstanding.
    pub fn offer_pending(&self, key: &str, json: ObjectJson, object: Value) -> Result<(), Value> {
        let mut offers = self.offers.lock();
        match offers.by_key.entry(key.to_string()) {
            std::collections::hash_map::Entry::Occupied(_) => Err(object),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Offer::Pending { json, object });
                Ok(())
            }
        }
    }

    /// After the write of a pending offer stored `bytes` at `revision`: the object with its
    /// resourceVersion, shared with the event still to be applied. `None` when the feeder already
    /// took it (the cache then holds it) or a relist dropped it.
    pub fn settle(
        &self,
        key: &str,
        bytes: &bytes::Bytes,
        revision: Revision,
    ) -> Option<Arc<Value>> {
        let mut offers = self.offers.lock();
        let ours = matches!(offers.by_key.get(key), Some(Offer::Pending { json, .. }) if same_bytes(json.stored(), bytes));
        if !ours {
            return None;
        }
        let Some(Offer::Pending { mut object, json }) = offers.by_key.remove(key) else {
            return None;
        };
        stamp(&mut object, revision);
        let object = Arc::new(object);
        if offers.applied < revision {
            offers.by_key.insert(
                key.to_string(),
                Offer::Stored {
                    revision,
                    object: object.clone(),
                    json: Some(json),
                },
            );
        }
        Some(object)
    }

    /// Takes back a pending offer whose write did not happen; `None` if a relist dropped it.
    pub fn withdraw(&self, key: &str, bytes: &bytes::Bytes) -> Option<Value> {
        let mut offers = self.offers.lock();
        let ours = matches!(offers.by_key.get(key), Some(Offer::Pending { json, .. }) if same_bytes(json.stored(), bytes));
        match ours.then(|| offers.by_key.remove(key)).flatten() {
            Some(Offer::Pending { object, .. }) => Some(object),
            _ => None,
        }
    }

    /// Hands over the object a write just stored at `revision` (exactly what the stored bytes
    /// decode to, resourceVersion included) and, if known, its JSON text. Dropped if the event was
    /// already applied or another offer for `key` is outstanding.
    pub fn offer(
        &self,
        key: &str,
        revision: Revision,
        object: Arc<Value>,
        json: Option<ObjectJson>,
    ) {
        let mut offers = self.offers.lock();
        if offers.applied < revision && !offers.by_key.contains_key(key) {
            offers.by_key.insert(
                key.to_string(),
                Offer::Stored {
                    revision,
                    object,
                    json,
                },
            );
        }
    }

    /// The offered object for the event of `key` at `revision` (whose stored value is `value`),
    /// with its JSON text if known, if any; marks `revision` as applied for offers (under the same lock as `settle` and
    /// `offer`, so no offer can arrive after its event and stay).
    pub(super) fn take_offer(
        &self,
        key: &str,
        revision: Revision,
        value: Option<&bytes::Bytes>,
    ) -> Option<(Arc<Value>, Option<ObjectJson>)> {
        let mut offers = self.offers.lock();
        offers.applied = offers.applied.max(revision);
        let take = match offers.by_key.get(key)? {
            Offer::Pending { json, .. } => value.is_some_and(|v| same_bytes(json.stored(), v)),
            Offer::Stored { revision: r, .. } if *r == revision => true,
            Offer::Stored { revision: r, .. } => {
                // Older than this event: its own event went by without it (a relist). Stale.
                if *r < revision {
                    offers.by_key.remove(key);
                }
                return None;
            }
        };
        if !take {
            // Another writer's pending offer: its write comes (or fails) later.
            return None;
        }
        match offers.by_key.remove(key)? {
            Offer::Pending { mut object, json } => {
                stamp(&mut object, revision);
                Some((Arc::new(object), Some(json)))
            }
            Offer::Stored { object, json, .. } => Some((object, json)),
        }
    }
}

/// What a store write did: stored at a revision, or not (a lost compare-and-swap, a taken name).
pub enum StoreWrite {
    /// Stored at this revision.
    Stored(Revision),
    /// Not stored.
    NotStored,
}

/// An object as it now is, shared with the watch cache, and its JSON text when a write already
/// made it (exactly `serde_json::to_vec` of `object`).
#[derive(Debug, Clone)]
pub struct Written {
    /// The object (with its resourceVersion).
    pub object: Arc<Value>,
    /// Its JSON text, if a write made it.
    pub json: Option<Bytes>,
}

impl Written {
    /// An object not (yet) serialised.
    pub fn object(object: Value) -> Self {
        Self::shared(Arc::new(object))
    }

    /// A shared object not (yet) serialised.
    pub fn shared(object: Arc<Value>) -> Self {
        Written { object, json: None }
    }
}

impl WatchCache {
    /// Stores `obj` at `key` through `write` (given the encoded bytes), sharing the object and its
    /// JSON text with the watch cache as the module docs describe. Returns the stored object with
    /// its resourceVersion, or the object back (without a resourceVersion) when it was not stored.
    pub async fn write_through<F, Fut>(
        &self,
        key: &str,
        mut obj: Value,
        write: F,
    ) -> Result<std::result::Result<Written, Value>>
    where
        F: FnOnce(Bytes) -> Fut,
        Fut: Future<Output = Result<StoreWrite>>,
    {
        api::meta::remove(&mut obj, "resourceVersion");
        if !super::resource_prefix(key).is_some_and(|p| self.caches(p)) {
            // A resource the cache does not hold: nothing to hand over. The answer is spliced
            // from the JSON, not from the stored text (which may be compressed).
            let plain = ObjectJson::encode(&obj)
                .map_err(|e| ApiError::internal("encoding an object", e))?;
            let stored = plain.stored_as(self.stored_text);
            return Ok(match write(stored.stored().clone()).await? {
                StoreWrite::Stored(rev) => {
                    stamp(&mut obj, rev);
                    Ok(Written {
                        object: Arc::new(obj),
                        json: Some(plain.with_resource_version(&rev.to_string())),
                    })
                }
                StoreWrite::NotStored => Err(obj),
            });
        }
        // The answer is spliced from the JSON; the cache and the store hold the stored text.
        let plain =
            ObjectJson::encode(&obj).map_err(|e| ApiError::internal("encoding an object", e))?;
        let json = plain.stored_as(self.stored_text);
        let bytes = json.stored().clone();
        // Refused while another write of the key is in flight: then this one keeps its object.
        let kept = self.offer_pending(key, json.clone(), obj).err();
        // Until the outcome is known, a failed write, or the request being dropped mid-write,
        // withdraws the offer.
        let mut pending = PendingOffer {
            cache: self,
            key,
            bytes: bytes.clone(),
            armed: kept.is_none(),
        };
        let outcome = write(bytes.clone()).await?;
        pending.armed = false;
        match (outcome, kept) {
            (StoreWrite::Stored(rev), kept) => {
                let rv = rev.to_string();
                let text = plain.with_resource_version(&rv);
                let object = match kept {
                    Some(mut obj) => {
                        stamp(&mut obj, rev);
                        let obj = Arc::new(obj);
                        self.offer(key, rev, obj.clone(), Some(json.clone()));
                        obj
                    }
                    None => match self.settle(key, &bytes, rev) {
                        Some(obj) => obj,
                        // The feeder took it first: the cache holds it (unless the key moved on).
                        None => match self
                            .get(key)
                            .filter(|o| api::meta::resource_version(o) == Some(rv.as_str()))
                        {
                            Some(obj) => obj,
                            None => Arc::new(super::decode(&bytes, rev).ok_or_else(|| {
                                ApiError::internal("decoding an object", "undecodable write")
                            })?),
                        },
                    },
                };
                Ok(Ok(Written {
                    object,
                    json: Some(text),
                }))
            }
            (StoreWrite::NotStored, Some(obj)) => Ok(Err(obj)),
            (StoreWrite::NotStored, None) => match self.withdraw(key, &bytes) {
                Some(obj) => Ok(Err(obj)),
                // A relist dropped the offer: the bytes are the object.
                None => super::stored::parse(&bytes)
                    .map(Err)
                    .ok_or_else(|| ApiError::internal("decoding an object", "undecodable write")),
            },
        }
    }
}

/// A pending offer of [`WatchCache::write_through`], withdrawn when dropped armed.
struct PendingOffer<'a> {
    cache: &'a WatchCache,
    key: &'a str,
    bytes: Bytes,
    armed: bool,
}

impl Drop for PendingOffer<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.cache.withdraw(self.key, &self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::StoreWrite;
    use crate::watch_cache::snapshot::tests::cache;

    #[test]
    fn an_offer_serves_only_its_own_event_and_never_outlives_it() {
        let c = cache(4);
        let obj =
            |n: u64| Arc::new(json!({"metadata": {"name": "p", "resourceVersion": n.to_string()}}));
        let a = obj(20);
        let json = crate::watch_cache::ObjectJson::encode(&json!({})).unwrap();
        c.offer("/registry/pods/ns/p", 20, a.clone(), Some(json.clone()));
        // An earlier event of the key leaves the offer for its own.
        assert!(c.take_offer("/registry/pods/ns/p", 19, None).is_none());
        let got = c.take_offer("/registry/pods/ns/p", 20, None);
        assert!(got.is_some_and(
            |(g, j)| Arc::ptr_eq(&g, &a) && j.is_some_and(|j| j.stored() == json.stored())
        ));
        assert!(
            c.take_offer("/registry/pods/ns/p", 20, None).is_none(),
            "used once"
        );
        // An offer arriving after its event was applied is dropped, not kept.
        c.offer("/registry/pods/ns/q", 18, obj(18), None);
        assert!(c.offers.lock().by_key.is_empty());
        // An offer whose event went by without it (a relist) is dropped by the key's next event.
        c.offer("/registry/pods/ns/r", 21, obj(21), None);
        assert!(c.take_offer("/registry/pods/ns/r", 22, None).is_none());
        assert!(c.offers.lock().by_key.is_empty());
    }

    #[test]
    fn a_pending_offer_goes_to_whichever_comes_first_writer_or_event() {
        let c = cache(4);
        let key = "/registry/pods/ns/p";
        let stored = json!({"metadata": {"name": "p"}, "spec": {"x": 1}});
        let json = crate::watch_cache::ObjectJson::encode(&stored).unwrap();
        let bytes = json.stored().clone();
        assert_eq!(bytes, serde_json::to_vec(&stored).unwrap());
        let text_at = |rev: u64| {
            let mut o = stored.clone();
            o["metadata"]["resourceVersion"] = json!(rev.to_string());
            bytes::Bytes::from(serde_json::to_vec(&o).unwrap())
        };
        // The event first: it takes the object (by its bytes), stamped, and its text at the
        // event's revision; the writer finds none.
        c.offer_pending(key, json.clone(), stored.clone()).unwrap();
        let other = bytes::Bytes::from_static(br#"{"metadata":{"name":"p"}}"#);
        assert!(
            c.take_offer(key, 30, Some(&other)).is_none(),
            "another write's event"
        );
        let (got, json_31) = c.take_offer(key, 31, Some(&bytes)).unwrap();
        assert_eq!(got["metadata"]["resourceVersion"], "31");
        assert_eq!(
            json_31.map(|j| j.with_resource_version("31")),
            Some(text_at(31))
        );
        assert!(c.settle(key, &bytes, 31).is_none());
        assert!(c.offers.lock().by_key.is_empty());
        // The writer first: it settles the object and its text, the event then takes both.
        c.offer_pending(key, json.clone(), stored.clone()).unwrap();
        assert!(
            c.offer_pending(key, json.clone(), stored.clone()).is_err(),
            "one at a time"
        );
        let mine = c.settle(key, &bytes, 40).unwrap();
        assert_eq!(mine["metadata"]["resourceVersion"], "40");
        let (got, json_40) = c.take_offer(key, 40, Some(&bytes)).unwrap();
        assert!(Arc::ptr_eq(&got, &mine));
        assert_eq!(
            json_40.map(|j| j.with_resource_version("40")),
            Some(text_at(40))
        );
        // A write that did not happen takes its object back.
        c.offer_pending(key, json.clone(), stored.clone()).unwrap();
        assert_eq!(c.withdraw(key, &bytes), Some(stored));
        assert!(c.offers.lock().by_key.is_empty());
    }

    #[test]
    fn a_handed_over_text_serves_the_event_the_delete_response_and_the_deleted_event() {
        use crate::watch_cache::ObjectJson;
        use store::{Event, EventKind, KeyValue};
        let c = cache(4);
        let key = "/registry/pods/ns/t";
        let stored = json!({"metadata": {"name": "t", "uid": "u"}, "spec": {"x": 1}});
        let at = |rv: &str| {
            let mut o = stored.clone();
            o["metadata"]["resourceVersion"] = json!(rv);
            bytes::Bytes::from(serde_json::to_vec(&o).unwrap())
        };
        use crate::watch_cache::{WatchFrom, WatchStart};
        let p = "/registry/pods/";
        let WatchStart::Watching(mut w) = c.watch(p, WatchFrom::After(c.revision())) else {
            panic!("not watching")
        };
        // The text of the event the watcher gets, as made when it was applied.
        let mut last_text = || {
            let ev = w.rx.try_recv().unwrap();
            (ev.encoded.get().cloned(), ev.encoded_object().clone())
        };
        let json = ObjectJson::encode(&stored).unwrap();
        c.offer_pending(key, json.clone(), stored.clone()).unwrap();
        let kv = KeyValue {
            key: key.into(),
            value: json.stored().clone(),
            create_revision: 50,
            mod_revision: 50,
        };
        c.apply(Event {
            kind: EventKind::Put,
            key: key.into(),
            revision: 50,
            value: Some(kv.clone()),
            prev: None,
        });
        // Made when the event was applied, not serialised on first use.
        assert_eq!(last_text(), (Some(at("50")), at("50")));
        let text = |j: Option<ObjectJson>| j.map(|j| j.with_resource_version("51"));
        assert_eq!(text(c.json_at(key, 50)), Some(at("51")));
        assert!(
            c.json_at(key, 49).is_none(),
            "only at the object's revision"
        );
        c.apply(Event {
            kind: EventKind::Delete,
            key: key.into(),
            revision: 51,
            value: None,
            prev: Some(kv.clone()),
        });
        assert_eq!(last_text(), (Some(at("51")), at("51")));
        assert!(c.json_at(key, 50).is_none());
        // An object that came from the store's bytes: its entry holds its text (serialised once
        // when it entered), and its event copies it.
        c.apply(Event {
            kind: EventKind::Put,
            key: key.into(),
            revision: 52,
            value: Some(KeyValue {
                mod_revision: 52,
                ..kv
            }),
            prev: None,
        });
        assert_eq!(last_text(), (Some(at("52")), at("52")));
        let text_52 = c.json_at(key, 52).map(|j| j.with_resource_version("52"));
        assert_eq!(text_52, Some(at("52")));
        // A replay from the ring sends the same texts.
        let WatchStart::Watching(replay) = c.watch(p, WatchFrom::After(49)) else {
            panic!("not watching")
        };
        let texts: Vec<_> = replay
            .initial
            .iter()
            .map(|ev| (ev.kind, ev.encoded.get().cloned()))
            .collect();
        use crate::watch_cache::EventType::{Added, Deleted};
        assert_eq!(
            texts,
            [
                (Added, Some(at("50"))),
                (Deleted, Some(at("51"))),
                (Added, Some(at("52")))
            ]
        );
    }

    #[tokio::test]
    async fn a_writer_dropped_mid_write_withdraws_its_hand_over() {
        let c = cache(4);
        let key = "/registry/configmaps/default/c";
        // The request goes away while its store write is still pending.
        let write = c.write_through(key, json!({"metadata": {"name": "c"}}), |_| {
            std::future::pending::<crate::error::Result<StoreWrite>>()
        });
        assert!(tokio::time::timeout(Duration::from_millis(20), write)
            .await
            .is_err());
        // Nothing of it is left: the next write of the key can hand its object over.
        let json = crate::watch_cache::ObjectJson::encode(&json!({})).unwrap();
        assert!(c.offer_pending(key, json.clone(), json!({})).is_ok());
        assert!(c.withdraw(key, json.stored()).is_some());
    }
}
