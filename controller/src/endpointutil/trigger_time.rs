//! The `endpoints.kubernetes.io/last-change-trigger-time` bookkeeping (`TriggerTimeTracker`).
//!
//! Per Service it remembers, from its previous sync, the Service's trigger time (its creation
//! time) and each pod's (the last transition of its `Ready` condition). A sync's trigger time is
//! the Service's creation time the first time the Service is seen, and otherwise the earliest of
//! the trigger times that moved forward since the previous sync — none (`None`: the annotation is
//! dropped) if nothing moved. As upstream, several changes of one object between two syncs count
//! as the last one only. Calls for one Service never run concurrently (the work queue's
//! guarantee); the map's lock is held only to read and to store a Service's state.

use std::collections::HashMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Service;
use parking_lot::Mutex;

use crate::cached_pod::CachedPod;

#[derive(Default)]
struct ServiceState {
    service: Option<Timestamp>,
    pods: HashMap<String, Timestamp>,
}

/// Trigger times of every Service a controller syncs.
#[derive(Default)]
pub struct TriggerTimeTracker {
    states: Mutex<HashMap<(String, String), ServiceState>>,
}

fn pod_trigger_time(pod: &CachedPod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

fn earliest(a: Option<Timestamp>, b: Timestamp) -> Option<Timestamp> {
    Some(a.map_or(b, |a| a.min(b)))
}

impl TriggerTimeTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// `ComputeEndpointLastChangeTriggerTime`: the trigger time to publish for this sync of `svc`
    /// over `pods` (the pods its selector matches), and the new state remembered.
    pub fn compute<P: AsRef<CachedPod>>(&self, svc: &Service, pods: &[P]) -> Option<Timestamp> {
        let key = (
            svc.metadata.namespace.clone().unwrap_or_default(),
            svc.metadata.name.clone().unwrap_or_default(),
        );
        // Taken out rather than cloned (one sync per Service at a time): no copy per sync.
        let previous = self.states.lock().remove(&key);
        let known = previous.is_some();
        let previous = previous.unwrap_or_default();
        let mut changed: Option<Timestamp> = None;
        let mut pod_times = HashMap::with_capacity(pods.len());
        for p in pods {
            let p = p.as_ref();
            let Some(t) = pod_trigger_time(p) else {
                continue;
            };
            let name = p.metadata.name.clone().unwrap_or_default();
            if previous.pods.get(&name).is_none_or(|last| t > *last) {
                changed = earliest(changed, t);
            }
            pod_times.insert(name, t);
        }
        let created = svc.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(c) = created {
            if previous.service.is_none_or(|last| c > last) {
                changed = earliest(changed, c);
            }
        }
        self.states.lock().insert(
            key,
            ServiceState {
                service: created,
                pods: pod_times,
            },
        );
        if known {
            changed
        } else {
            created
        }
    }

    /// Forget a deleted Service.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        self.states
            .lock()
            .remove(&(namespace.to_string(), name.to_string()));
    }
}

/// The annotation's value: RFC 3339 with nanoseconds, in UTC, as Go's `time.RFC3339Nano`.
pub fn format_trigger_time(t: Timestamp) -> String {
    // jiff prints the fewest fractional digits that are exact, like Go's RFC3339Nano.
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_util::testing::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::sync::Arc;

    fn svc(created: i64) -> Service {
        let mut s = Service::default();
        s.metadata.name = Some("web".into());
        s.metadata.namespace = Some("default".into());
        s.metadata.creation_timestamp = Some(Time(ts(created)));
        s
    }

    #[test]
    fn first_sync_uses_creation_then_earliest_changed_pod() {
        let t = TriggerTimeTracker::new();
        let s = svc(10);
        let a = Arc::new(ready_at(pod("a"), Some(ts(20))));
        let b = Arc::new(ready_at(pod("b"), Some(ts(30))));
        assert_eq!(t.compute(&s, &[a.clone(), b.clone()]), Some(ts(10)));
        // Nothing moved: no trigger time.
        assert_eq!(t.compute(&s, &[a.clone(), b.clone()]), None);
        let b2 = Arc::new(ready_at(pod("b"), Some(ts(40))));
        let c = Arc::new(ready_at(pod("c"), Some(ts(35))));
        assert_eq!(t.compute(&s, &[a, b2, c]), Some(ts(35)));
        t.delete_service("default", "web");
        assert_eq!(t.compute(&s, &[] as &[Arc<CachedPod>]), Some(ts(10)));
    }

    #[test]
    fn formats_like_rfc3339nano() {
        assert_eq!(format_trigger_time(ts(0)), "1970-01-01T00:00:00Z");
    }
}
