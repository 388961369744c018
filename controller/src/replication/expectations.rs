//! Expectations: the creation-storm guard of the replication controller (informer.md §6.3).
//!
//! Before issuing creates or deletes for a controller the sync records how many it expects to observe
//! through the informer; until those events arrive (or the record is older than
//! [`EXPECTATIONS_TIMEOUT`], 5 minutes as in `controller_utils.go`), the controller is not managed again,
//! so a stale cache cannot cause duplicate creations. Deletions are tracked by pod key
//! ([`UidTrackingExpectations`]) so that the "deletionTimestamp set" update and the final DELETE of the
//! same pod count once, and deletions the controller did not ask for do not count at all.
//!
//! Guarantees: the map holds one record per controller key and records are removed when the controller
//! is deleted, so memory is bounded by the number of controllers. All operations take one short lock.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;

use crate::clock::Clock;

/// `ExpectationsTimeout` (kubernetes `pkg/controller/controller_utils.go`): 5 minutes.
pub const EXPECTATIONS_TIMEOUT: SignedDuration = SignedDuration::from_secs(5 * 60);

#[derive(Debug, Clone, Copy)]
struct Record {
    add: i64,
    del: i64,
    timestamp: Timestamp,
}

/// Counts of pending creations and deletions per controller key (`ControllerExpectations`).
pub struct ControllerExpectations {
    records: Mutex<HashMap<String, Record>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ControllerExpectations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerExpectations")
            .field("records", &self.records.lock().len())
            .finish()
    }
}

impl ControllerExpectations {
    /// Empty expectations reading time from `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            records: Mutex::new(HashMap::new()),
            clock,
        }
    }

    /// Replace the record for `key` (timestamp = now).
    pub fn set_expectations(&self, key: &str, add: i64, del: i64) {
        let timestamp = self.clock.now();
        self.records.lock().insert(
            key.to_string(),
            Record {
                add,
                del,
                timestamp,
            },
        );
    }

    /// `set_expectations(key, n, 0)`.
    pub fn expect_creations(&self, key: &str, n: i64) {
        self.set_expectations(key, n, 0);
    }

    /// `set_expectations(key, 0, n)`.
    pub fn expect_deletions(&self, key: &str, n: i64) {
        self.set_expectations(key, 0, n);
    }

    /// Lower the counters if a record exists (timestamp unchanged); counters may go negative.
    pub fn lower_expectations(&self, key: &str, add: i64, del: i64) {
        if let Some(r) = self.records.lock().get_mut(key) {
            r.add -= add;
            r.del -= del;
        }
    }

    /// Raise the counters if a record exists (timestamp unchanged).
    pub fn raise_expectations(&self, key: &str, add: i64, del: i64) {
        if let Some(r) = self.records.lock().get_mut(key) {
            r.add += add;
            r.del += del;
        }
    }

    /// One expected creation was observed (or will never be: a skipped create).
    pub fn creation_observed(&self, key: &str) {
        self.lower_expectations(key, 1, 0);
    }

    /// One expected deletion was observed.
    pub fn deletion_observed(&self, key: &str) {
        self.lower_expectations(key, 0, 1);
    }

    /// True if the controller may be managed: no record, or the record is fulfilled or expired.
    pub fn satisfied_expectations(&self, key: &str) -> bool {
        let now = self.clock.now();
        match self.records.lock().get(key) {
            None => true,
            Some(r) => {
                let fulfilled = r.add <= 0 && r.del <= 0;
                let expired = now.duration_since(r.timestamp) > EXPECTATIONS_TIMEOUT;
                fulfilled || expired
            }
        }
    }

    /// Remove the record (controller deleted).
    pub fn delete_expectations(&self, key: &str) {
        self.records.lock().remove(key);
    }

    /// The current `(add, del)` counters, for tests and diagnostics.
    pub fn get(&self, key: &str) -> Option<(i64, i64)> {
        self.records.lock().get(key).map(|r| (r.add, r.del))
    }

    /// Number of controllers with a record.
    pub fn len(&self) -> usize {
        self.records.lock().len()
    }

    /// No records at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Expectations whose deletions are tracked by pod key (`UIDTrackingControllerExpectations`).
pub struct UidTrackingExpectations {
    inner: ControllerExpectations,
    // Pod keys (`ns/name`) chosen for deletion per controller key. Separate lock from `inner` because
    // the two are updated in a fixed order (set first, then counters) and never nested.
    pod_keys: Mutex<HashMap<String, HashSet<String>>>,
}

impl std::fmt::Debug for UidTrackingExpectations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UidTrackingExpectations")
            .field("inner", &self.inner)
            .finish()
    }
}

impl UidTrackingExpectations {
    /// Empty expectations reading time from `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: ControllerExpectations::new(clock),
            pod_keys: Mutex::new(HashMap::new()),
        }
    }

    /// Expect the deletion of exactly these pods (replaces the record; del = number of distinct keys).
    pub fn expect_deletions(&self, key: &str, pod_keys: Vec<String>) {
        let set: HashSet<String> = pod_keys.into_iter().collect();
        let n = set.len() as i64;
        {
            let mut map = self.pod_keys.lock();
            if let Some(old) = map.get(key) {
                if !old.is_empty() {
                    tracing::error!(
                        controller = key,
                        pending = old.len(),
                        "clobbering existing delete keys"
                    );
                }
            }
            map.insert(key.to_string(), set);
        }
        self.inner.expect_deletions(key, n);
    }

    /// A pod deletion was observed: counts only if the pod was one this controller chose, and only once.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        let removed = self
            .pod_keys
            .lock()
            .get_mut(key)
            .is_some_and(|set| set.remove(pod_key));
        if removed {
            self.inner.deletion_observed(key);
        }
    }

    /// Forget everything about the controller.
    pub fn delete_expectations(&self, key: &str) {
        self.pod_keys.lock().remove(key);
        self.inner.delete_expectations(key);
    }

    /// See [`ControllerExpectations::expect_creations`].
    pub fn expect_creations(&self, key: &str, n: i64) {
        self.inner.expect_creations(key, n);
    }

    /// See [`ControllerExpectations::creation_observed`].
    pub fn creation_observed(&self, key: &str) {
        self.inner.creation_observed(key);
    }

    /// See [`ControllerExpectations::lower_expectations`].
    pub fn lower_expectations(&self, key: &str, add: i64, del: i64) {
        self.inner.lower_expectations(key, add, del);
    }

    /// See [`ControllerExpectations::satisfied_expectations`].
    pub fn satisfied_expectations(&self, key: &str) -> bool {
        self.inner.satisfied_expectations(key)
    }

    /// See [`ControllerExpectations::get`].
    pub fn get(&self, key: &str) -> Option<(i64, i64)> {
        self.inner.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    fn setup() -> (Arc<FakeClock>, UidTrackingExpectations) {
        let clock = FakeClock::new(Timestamp::UNIX_EPOCH);
        let exp = UidTrackingExpectations::new(clock.clone());
        (clock, exp)
    }

    #[test]
    fn no_record_is_satisfied_and_creations_gate_until_observed() {
        let (_, e) = setup();
        assert!(e.satisfied_expectations("ns/rs"));
        e.expect_creations("ns/rs", 2);
        assert!(!e.satisfied_expectations("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(!e.satisfied_expectations("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(e.satisfied_expectations("ns/rs"));
        // Extra observations drive the counter negative; still satisfied.
        e.creation_observed("ns/rs");
        assert_eq!(e.get("ns/rs"), Some((-1, 0)));
        assert!(e.satisfied_expectations("ns/rs"));
    }

    #[test]
    fn expiry_after_five_minutes_exactly_not_before() {
        let (clock, e) = setup();
        e.expect_creations("k", 10);
        clock.advance(EXPECTATIONS_TIMEOUT);
        assert!(
            !e.satisfied_expectations("k"),
            "expiry is strictly after 5 min"
        );
        clock.advance(SignedDuration::from_millis(1));
        assert!(e.satisfied_expectations("k"));
    }

    #[test]
    fn lower_without_record_is_noop_and_set_replaces() {
        let (_, e) = setup();
        e.lower_expectations("k", 1, 1);
        assert_eq!(e.get("k"), None);
        e.expect_creations("k", 3);
        e.expect_creations("k", 1);
        assert_eq!(e.get("k"), Some((1, 0)));
    }

    #[test]
    fn deletions_count_once_and_only_for_chosen_pods() {
        let (_, e) = setup();
        e.expect_deletions("ns/rs", vec!["ns/a".into(), "ns/b".into()]);
        assert_eq!(e.get("ns/rs"), Some((0, 2)));
        // The deletionTimestamp update and the final DELETE of the same pod.
        e.deletion_observed("ns/rs", "ns/a");
        e.deletion_observed("ns/rs", "ns/a");
        // A pod the controller did not choose.
        e.deletion_observed("ns/rs", "ns/z");
        assert_eq!(e.get("ns/rs"), Some((0, 1)));
        assert!(!e.satisfied_expectations("ns/rs"));
        e.deletion_observed("ns/rs", "ns/b");
        assert!(e.satisfied_expectations("ns/rs"));
    }

    #[test]
    fn delete_expectations_clears_counters_and_keys() {
        let (_, e) = setup();
        e.expect_deletions("k", vec!["ns/a".into()]);
        e.delete_expectations("k");
        assert!(e.satisfied_expectations("k"));
        e.expect_creations("k", 0);
        e.deletion_observed("k", "ns/a");
        assert_eq!(e.get("k"), Some((0, 0)), "old pod keys must not survive");
    }
}
