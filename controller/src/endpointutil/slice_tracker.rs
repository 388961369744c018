//! The generations of the EndpointSlices a controller wrote, per Service (`EndpointSliceTracker`).
//!
//! After a create or update the controller records the slice's new `metadata.generation`; after a
//! delete it records "deletion expected". Then:
//! - a slice event at or below the recorded generation is the controller's own write coming back
//!   and needs no sync ([`should_sync`](EndpointSliceTracker::should_sync));
//! - a sync whose cached slices are older than recorded, include one expected to be gone, or lack
//!   one recorded is working from a stale cache and is retried instead
//!   ([`stale_slices`](EndpointSliceTracker::stale_slices)) — so a sync never undoes or
//!   duplicates its own last write;
//! - a deletion the controller did not expect triggers a sync to put the slice back.
//!
//! Slices are found by their `kubernetes.io/service-name` label. When a Service is recreated (a new
//! UID under the same name) the old records are dropped. Memory is bounded by the slices that
//! exist plus the deletions not yet observed; a deleted Service's records are removed.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use parking_lot::Mutex;

use super::LABEL_SERVICE_NAME;

/// A recorded generation, or a deletion still to be observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    Generation(i64),
    Deletion,
}

type ServiceKey = (String, String);

#[derive(Default)]
struct State {
    by_service: HashMap<ServiceKey, HashMap<String, Expected>>,
    service_uids: HashMap<ServiceKey, String>,
}

/// See the module docs.
#[derive(Default)]
pub struct EndpointSliceTracker {
    state: Mutex<State>,
}

fn service_key(slice: &EndpointSlice) -> ServiceKey {
    let name = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_SERVICE_NAME))
        .cloned()
        .unwrap_or_default();
    (slice.metadata.namespace.clone().unwrap_or_default(), name)
}

fn uid(slice: &EndpointSlice) -> String {
    slice.metadata.uid.clone().unwrap_or_default()
}

fn generation(slice: &EndpointSlice) -> i64 {
    slice.metadata.generation.unwrap_or(0)
}

impl EndpointSliceTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a generation or expected deletion is recorded for the slice (`Has`).
    pub fn has(&self, slice: &EndpointSlice) -> bool {
        let s = self.state.lock();
        s.by_service
            .get(&service_key(slice))
            .is_some_and(|g| g.contains_key(&uid(slice)))
    }

    /// Whether the slice is newer than what this controller wrote (`ShouldSync`).
    pub fn should_sync(&self, slice: &EndpointSlice) -> bool {
        let s = self.state.lock();
        match s
            .by_service
            .get(&service_key(slice))
            .and_then(|g| g.get(&uid(slice)))
        {
            None | Some(Expected::Deletion) => true,
            Some(Expected::Generation(g)) => generation(slice) > *g,
        }
    }

    /// Whether the cached `slices` of `svc` lag behind this controller's writes (`StaleSlices`).
    pub fn stale_slices(&self, svc: &Service, slices: &[&EndpointSlice]) -> bool {
        let key = (
            svc.metadata.namespace.clone().unwrap_or_default(),
            svc.metadata.name.clone().unwrap_or_default(),
        );
        let svc_uid = svc.metadata.uid.clone().unwrap_or_default();
        let mut s = self.state.lock();
        if let Some(tracked) = s.service_uids.get(&key) {
            if !tracked.is_empty() && !svc_uid.is_empty() && *tracked != svc_uid {
                s.by_service.remove(&key);
            }
        }
        s.service_uids.insert(key.clone(), svc_uid);
        let Some(gens) = s.by_service.get(&key) else {
            return false;
        };
        for slice in slices {
            match gens.get(&uid(slice)) {
                Some(Expected::Deletion) => return true,
                Some(Expected::Generation(g)) if *g > generation(slice) => return true,
                _ => {}
            }
        }
        gens.iter().any(|(u, e)| {
            matches!(e, Expected::Generation(_))
                && !slices
                    .iter()
                    .any(|s| s.metadata.uid.as_deref() == Some(u.as_str()))
        })
    }

    /// Record a slice this controller created or updated (`Update`).
    pub fn update(&self, slice: &EndpointSlice) {
        let mut s = self.state.lock();
        s.by_service
            .entry(service_key(slice))
            .or_default()
            .insert(uid(slice), Expected::Generation(generation(slice)));
    }

    /// Record a slice this controller deleted (`ExpectDeletion`).
    pub fn expect_deletion(&self, slice: &EndpointSlice) {
        let mut s = self.state.lock();
        s.by_service
            .entry(service_key(slice))
            .or_default()
            .insert(uid(slice), Expected::Deletion);
    }

    /// A slice was deleted: forget it; `false` if the deletion was not this controller's
    /// (`HandleDeletion`).
    pub fn handle_deletion(&self, slice: &EndpointSlice) -> bool {
        let mut s = self.state.lock();
        let removed = s
            .by_service
            .get_mut(&service_key(slice))
            .and_then(|g| g.remove(&uid(slice)));
        !matches!(removed, Some(Expected::Generation(_)))
    }

    /// Forget a Service (`DeleteService`).
    pub fn delete_service(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        let mut s = self.state.lock();
        s.by_service.remove(&key);
        s.service_uids.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn slice(uid: &str, gen: i64) -> EndpointSlice {
        let mut s = EndpointSlice::default();
        s.metadata.namespace = Some("default".into());
        s.metadata.uid = Some(uid.into());
        s.metadata.generation = Some(gen);
        s.metadata.labels = Some(BTreeMap::from([(
            LABEL_SERVICE_NAME.to_string(),
            "web".to_string(),
        )]));
        s
    }

    fn svc(uid: &str) -> Service {
        let mut s = Service::default();
        s.metadata.namespace = Some("default".into());
        s.metadata.name = Some("web".into());
        s.metadata.uid = Some(uid.into());
        s
    }

    #[test]
    fn own_writes_do_not_sync_and_stale_caches_are_detected() {
        let t = EndpointSliceTracker::new();
        assert!(t.should_sync(&slice("a", 1)));
        t.update(&slice("a", 2));
        assert!(!t.should_sync(&slice("a", 2)));
        assert!(t.should_sync(&slice("a", 3)));
        // The cache still holds generation 1, or lacks the slice: stale.
        assert!(t.stale_slices(&svc("s"), &[&slice("a", 1)]));
        assert!(t.stale_slices(&svc("s"), &[]));
        assert!(!t.stale_slices(&svc("s"), &[&slice("a", 2)]));
        t.expect_deletion(&slice("a", 2));
        assert!(t.stale_slices(&svc("s"), &[&slice("a", 2)]));
        assert!(!t.stale_slices(&svc("s"), &[]));
        assert!(t.handle_deletion(&slice("a", 2)));
        assert!(!t.has(&slice("a", 2)));
    }

    #[test]
    fn unexpected_deletion_and_recreated_service() {
        let t = EndpointSliceTracker::new();
        t.update(&slice("a", 1));
        assert!(!t.handle_deletion(&slice("a", 1)));
        t.update(&slice("b", 1));
        assert!(t.stale_slices(&svc("s1"), &[]));
        // A new Service under the same name: the old writes no longer count.
        assert!(!t.stale_slices(&svc("s2"), &[]));
    }
}
