//! The event correlator (client-go `tools/record/events_cache.go`): aggregation of similar events,
//! count increments for repeats, and a per-source/object spam filter.
//!
//! Pipeline for each event, in client-go's order:
//! 1. **Aggregate**: events equal in everything but the message (source, involved object, type,
//!    reason) are tracked per aggregate key; once [`AGGREGATE_MAX_EVENTS`] distinct messages were
//!    seen within [`AGGREGATE_INTERVAL`], further ones are replaced by a single event with message
//!    `"(combined from similar events): <msg>"`, correlated by the aggregate key.
//! 2. **Observe**: an event whose key was seen before becomes a repeat: same name and first
//!    timestamp, `count + 1`, and a strategic-merge patch of `count`, `lastTimestamp`, `message`.
//! 3. **Spam filter**: a token bucket per (source, involved object, type, reason), burst
//!    [`SPAM_BURST`], refilled at [`SPAM_QPS`]; events without a token are skipped.
//!
//! Bounds: each cache is an LRU of [`MAX_LRU_ENTRIES`]. The caches are keyed by a 64-bit hash of
//! client-go's key strings, not the strings (source, object, reason and message joined: a few
//! hundred bytes each, three of them per event, held for every recent event of every fake node;
//! issue 17 item 7). Two keys would have to collide within one cache of 4,096 for two events to be
//! taken for one (about 1 in 2^40).

use std::hash::{DefaultHasher, Hasher};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use lru::LruCache;
use parking_lot::Mutex;

use crate::flowcontrol::TokenBucket;

/// `maxLruCacheEntries`.
pub const MAX_LRU_ENTRIES: usize = 4096;
/// `defaultAggregateMaxEvents`: distinct messages before aggregation kicks in.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// `defaultAggregateIntervalInSeconds`.
pub const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// `defaultSpamBurst`.
pub const SPAM_BURST: u32 = 25;
/// `defaultSpamQPS` = 1/300: one event per 5 minutes after the burst.
pub const SPAM_QPS: f64 = 1.0 / 300.0;

/// The source and involved object's fields every key starts with, in client-go's order.
fn source_and_object(e: &Event) -> [&str; 7] {
    let src = e.source.as_ref();
    let o = &e.involved_object;
    [
        src.map_or("", |s| or_empty(&s.component)),
        src.map_or("", |s| or_empty(&s.host)),
        or_empty(&o.kind),
        or_empty(&o.namespace),
        or_empty(&o.name),
        or_empty(&o.uid),
        or_empty(&o.api_version),
    ]
}

/// The hash of client-go's key string, the concatenation of `parts` (see the module docs): fed
/// part by part, the same as hashing the joined string, without building it.
fn hashed<'a>(parts: impl IntoIterator<Item = &'a str>) -> u64 {
    let mut h = DefaultHasher::new();
    for part in parts {
        h.write(part.as_bytes());
    }
    // `str`'s own terminator, as `Hash for str` writes it.
    h.write_u8(0xff);
    h.finish()
}

/// An optional field as it goes into a key.
fn or_empty(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or_default()
}

/// `getSpamKey`: source + involved object (not type or reason: one source's events about one
/// object share a bucket, whatever their reasons).
fn spam_key(e: &Event) -> u64 {
    hashed(source_and_object(e))
}

/// `EventAggregatorByReasonFunc`: (aggregate key, local key = message).
fn aggregate_keys(e: &Event) -> (u64, u64) {
    let key = source_and_object(e)
        .into_iter()
        .chain([or_empty(&e.type_), or_empty(&e.reason)]);
    (hashed(key), hashed([or_empty(&e.message)]))
}

/// `getEventKey`: everything including the message and the object's `fieldPath` (two
/// containers of one pod with the same message are two events).
fn event_key(e: &Event) -> u64 {
    let key = source_and_object(e).into_iter().chain([
        or_empty(&e.involved_object.field_path),
        or_empty(&e.type_),
        or_empty(&e.reason),
        or_empty(&e.message),
    ]);
    hashed(key)
}

struct AggregateRecord {
    /// The distinct messages seen (their hashes), at most [`AGGREGATE_MAX_EVENTS`].
    local_keys: Vec<u64>,
    last: Timestamp,
}

#[derive(Clone)]
struct Observed {
    count: i32,
    first: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

/// What to do with an event.
#[derive(Clone, Debug)]
pub struct CorrelationResult {
    /// The event to write (possibly the aggregated replacement, with updated count).
    pub event: Event,
    /// For repeats: the strategic-merge patch to send instead of a create.
    pub patch: Option<serde_json::Value>,
    /// Dropped by the spam filter.
    pub skip: bool,
    /// Key under which to record the server's answer ([`EventCorrelator::update_state`]).
    pub key: u64,
}

/// An LRU of at most [`MAX_LRU_ENTRIES`] that grows as it fills: `LruCache::new` would allocate
/// its whole table at once (~100 KiB each), and every fake node has a correlator of three while
/// few of them ever see more than its own pods' events.
struct Lru<V>(LruCache<u64, V>);

impl<V> Lru<V> {
    fn new() -> Self {
        Lru(LruCache::unbounded())
    }

    /// Inserts or replaces `key`, the most recently used; the least recently used goes once
    /// full.
    fn put(&mut self, key: u64, value: V) {
        self.0.put(key, value);
        if self.0.len() > MAX_LRU_ENTRIES {
            self.0.pop_lru();
        }
    }

    fn get_mut(&mut self, key: &u64) -> Option<&mut V> {
        self.0.get_mut(key)
    }

    fn pop(&mut self, key: &u64) -> Option<V> {
        self.0.pop(key)
    }

    #[cfg(test)]
    fn contains(&self, key: &u64) -> bool {
        self.0.contains(key)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Aggregation, repeat counting and spam filtering for one broadcaster.
pub struct EventCorrelator {
    aggregate: Mutex<Lru<AggregateRecord>>,
    observed: Mutex<Lru<Observed>>,
    spam: Mutex<Lru<TokenBucket>>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        Self::new()
    }
}

impl EventCorrelator {
    pub fn new() -> Self {
        EventCorrelator {
            aggregate: Mutex::new(Lru::new()),
            observed: Mutex::new(Lru::new()),
            spam: Mutex::new(Lru::new()),
        }
    }

    fn aggregate(&self, e: Event, now: Timestamp) -> (Event, u64) {
        let (agg_key, local_key) = aggregate_keys(&e);
        let mut cache = self.aggregate.lock();
        let fresh = AggregateRecord {
            local_keys: Vec::new(),
            last: now,
        };
        let mut rec = match cache.pop(&agg_key) {
            Some(r)
                if r.last
                    .saturating_add(AGGREGATE_INTERVAL)
                    .map_or(true, |t| t >= now) =>
            {
                r
            }
            _ => fresh,
        };
        if let Err(at) = rec.local_keys.binary_search(&local_key) {
            rec.local_keys.insert(at, local_key);
        }
        rec.last = now;
        if rec.local_keys.len() < AGGREGATE_MAX_EVENTS {
            cache.put(agg_key, rec);
            let k = event_key(&e);
            return (e, k);
        }
        // Do not grow the set further (client-go drops any one of them).
        rec.local_keys.remove(0);
        cache.put(agg_key, rec);
        let t = Time(now);
        let name = e.involved_object.name.clone().unwrap_or_default();
        let agg = Event {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: e.metadata.namespace.clone(),
                ..Default::default()
            },
            count: Some(1),
            first_timestamp: Some(t.clone()),
            last_timestamp: Some(t),
            involved_object: e.involved_object.clone(),
            message: Some(format!(
                "(combined from similar events): {}",
                e.message.clone().unwrap_or_default()
            )),
            type_: e.type_.clone(),
            reason: e.reason.clone(),
            source: e.source.clone(),
            reporting_component: e.reporting_component.clone(),
            reporting_instance: e.reporting_instance.clone(),
            ..Default::default()
        };
        (agg, agg_key)
    }

    fn observe(&self, mut e: Event, key: u64) -> (Event, Option<serde_json::Value>) {
        let mut cache = self.observed.lock();
        let mut patch = None;
        if let Some(last) = cache.get_mut(&key).cloned() {
            e.count = Some(last.count.saturating_add(1));
            e.first_timestamp = last.first;
            e.metadata.name = last.name;
            e.metadata.resource_version = last.resource_version;
            patch = Some(serde_json::json!({
                "count": e.count,
                "lastTimestamp": e.last_timestamp,
                "message": e.message,
            }));
        }
        cache.put(
            key,
            Observed {
                count: e.count.unwrap_or(1),
                first: e.first_timestamp.clone(),
                name: e.metadata.name.clone(),
                resource_version: e.metadata.resource_version.clone(),
            },
        );
        (e, patch)
    }

    fn spam_filtered(&self, e: &Event) -> bool {
        let key = spam_key(e);
        let mut cache = self.spam.lock();
        if cache.get_mut(&key).is_none() {
            cache.put(key, TokenBucket::new(SPAM_QPS, SPAM_BURST));
        }
        match cache.get_mut(&key) {
            Some(b) => !b.try_acquire(),
            None => false,
        }
    }

    /// Runs the pipeline on a new event recorded at `now`.
    pub fn correlate(&self, e: Event, now: Timestamp) -> CorrelationResult {
        let (agg, key) = self.aggregate(e, now);
        let (observed, patch) = self.observe(agg, key);
        let skip = self.spam_filtered(&observed);
        CorrelationResult {
            event: observed,
            patch,
            skip,
            key,
        }
    }

    /// Records the server's copy after a successful write (name, RV, count).
    pub fn update_state(&self, key: u64, written: &Event) {
        self.observed.lock().put(
            key,
            Observed {
                count: written.count.unwrap_or(1),
                first: written.first_timestamp.clone(),
                name: written.metadata.name.clone(),
                resource_version: written.metadata.resource_version.clone(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::hash::Hash;

    use super::*;

    /// The bound holds however many keys come, and what goes is the least recently used.
    #[test]
    fn an_lru_keeps_at_most_its_bound() {
        let mut lru = Lru::new();
        for k in 0..MAX_LRU_ENTRIES as u64 {
            lru.put(k, ());
        }
        assert!(lru.get_mut(&0).is_some());
        for k in MAX_LRU_ENTRIES as u64..MAX_LRU_ENTRIES as u64 + 10 {
            lru.put(k, ());
        }
        assert_eq!(lru.len(), MAX_LRU_ENTRIES);
        assert!(lru.contains(&0), "used again, so kept");
        assert!(!lru.contains(&1) && !lru.contains(&10), "the oldest go");
        assert!(lru.contains(&11) && lru.contains(&(MAX_LRU_ENTRIES as u64 + 9)));
    }

    /// The hash of client-go's key string: the same, whether its parts are fed one by one or
    /// joined first (what client-go compares).
    #[test]
    fn a_key_hashes_as_its_joined_string() {
        let joined = |parts: &[&str]| {
            let mut h = DefaultHasher::new();
            parts.concat().hash(&mut h);
            h.finish()
        };
        for parts in [
            &["kubelet", "node-1", "Pod", "default", "web-1", "uid", "v1"][..],
            &["a", "", "bc"][..],
            &[""][..],
            &["ab", "c"][..],
        ] {
            assert_eq!(hashed(parts.iter().copied()), joined(parts), "{parts:?}");
        }
        // As client-go's strings: only the concatenation counts.
        assert_eq!(hashed(["ab", "c"]), hashed(["a", "bc"]));
        assert_ne!(hashed(["ab", "c"]), hashed(["ab", "d"]));
    }
}
