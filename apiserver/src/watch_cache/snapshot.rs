//! Consistent list snapshots from the watch cache.
//!
//! The state at an older revision `T` is the current state with every ring event after `T`
//! undone: for each key the first event after `T` tells its state at `T` (`prev`, or absent for a
//! creation). Items are returned in key order, so pages are stable and a continue token is
//! simply (revision, last key).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use store::Revision;

use super::{ResourceCache, WatchCache};

/// At which revision a list is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListAt {
    /// The cache's current revision.
    Current,
    /// Exactly this revision.
    Exact(Revision),
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Matching items in key order.
    pub items: Vec<Arc<Value>>,
    /// Revision the page is consistent at.
    pub revision: Revision,
    /// Key of the last item when more matching items remain.
    pub more_after: Option<String>,
    /// Matching items after this page, when counted.
    pub remaining: Option<u64>,
}

/// Outcome of [`WatchCache::list`].
#[derive(Debug, Clone)]
pub enum SnapshotOutcome {
    /// The page.
    Listed(Snapshot),
    /// The revision is older than the ring covers.
    Expired {
        /// Oldest revision that can be served.
        oldest: Revision,
    },
    /// The revision is newer than the cache.
    Future {
        /// The cache's revision.
        current: Revision,
    },
}

impl WatchCache {
    /// Items of `resource_prefix` whose keys start with `key_prefix` and that pass `filter`, at
    /// `at`, after key `start_after`, at most `limit` of them.
    pub fn list(
        &self,
        resource_prefix: &str,
        key_prefix: &str,
        at: ListAt,
        start_after: Option<&str>,
        limit: Option<usize>,
        filter: &dyn Fn(&Value) -> bool,
    ) -> SnapshotOutcome {
        let inner = self.inner.read();
        let current = inner.revision;
        let revision = match at {
            ListAt::Current => current,
            ListAt::Exact(r) if r > current => return SnapshotOutcome::Future { current },
            ListAt::Exact(r) => r,
        };
        let empty = ResourceCache {
            oldest: inner.base,
            ..Default::default()
        };
        let res = inner.resources.get(resource_prefix).unwrap_or(&empty);
        if revision < current && revision < res.oldest {
            return SnapshotOutcome::Expired { oldest: res.oldest };
        }
        // Keys whose state at `revision` differs from now: the first event after it decides.
        let mut overrides: BTreeMap<&str, Option<&Arc<Value>>> = BTreeMap::new();
        if revision < current {
            let start = res.ring.partition_point(|e| e.revision <= revision);
            for e in res.ring.iter().skip(start) {
                if e.key.starts_with(key_prefix) {
                    overrides.entry(e.key.as_str()).or_insert(e.prev.as_ref());
                }
            }
        }
        let lower = match start_after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Included(key_prefix),
        };
        let mut now = res
            .objects
            .range::<str, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(key_prefix))
            .map(|(k, v)| (k.as_str(), v))
            .peekable();
        let mut old = overrides
            .iter()
            .filter(|(k, _)| match start_after {
                Some(s) => **k > s,
                None => true,
            })
            .map(|(k, v)| (*k, *v))
            .peekable();
        let mut items = Vec::new();
        let mut more_after = None;
        let mut remaining = 0u64;
        let mut last_key: Option<&str> = None;
        loop {
            // Merge the two key-ordered sequences; an override wins for its key.
            let next = match (now.peek(), old.peek()) {
                (None, None) => break,
                (Some((nk, _)), Some((ok, _))) if ok <= nk => {
                    let (k, v) = old.next().map_or(("", None), |x| x);
                    if Some(&k) == now.peek().map(|(nk, _)| nk) {
                        now.next();
                    }
                    (k, v)
                }
                (Some(_), _) => {
                    let (k, v) = now.next().map_or(("", None), |(k, v)| (k, Some(v)));
                    (k, v)
                }
                (None, Some(_)) => old.next().map_or(("", None), |x| x),
            };
            let (key, value) = next;
            let Some(value) = value else { continue };
            if !filter(value) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                if more_after.is_none() {
                    more_after = last_key.map(String::from);
                }
                remaining += 1;
                continue;
            }
            last_key = Some(key);
            items.push(value.clone());
        }
        SnapshotOutcome::Listed(Snapshot {
            items,
            revision,
            more_after,
            remaining: (remaining > 0).then_some(remaining),
        })
    }
}
