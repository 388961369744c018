//! One replication controller for two kinds (informer.md §6.12).
//!
//! Kubernetes runs the ReplicationController on the ReplicaSet controller through adapters that convert
//! RC objects to RS objects and back. Here the controller is generic over [`ReplicaOwner`]: it reads
//! every owner as a `ReplicaSet` view ([`ReplicaOwner::to_replica_set`]) and writes status back in the
//! owner's own kind ([`ReplicaOwner::with_status`]), so exactly one sync implementation serves both.
//! Conversion maps replicas, minReadySeconds, template and every status field (conditions included)
//! 1:1; the RC's equality map becomes `matchLabels`, but an empty RC selector selects nothing.

use api::labels::{self, Selector};
use k8s_openapi::api::apps::v1::{
    ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{
    ReplicationController, ReplicationControllerCondition, ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::Result;

/// A kind the replication controller manages.
///
/// The controller ownerReference uses the kind's own `apiVersion` and `kind`
/// (`k8s_openapi::Resource::{API_VERSION, KIND}`).
pub trait ReplicaOwner: k8s_openapi::Resource + Clone + Send + Sync + 'static {
    /// Work-queue name (`replicaset` / `replicationmanager`).
    const QUEUE_NAME: &'static str;
    /// Event source component (`replicaset-controller` / `replication-controller`).
    const EVENT_SOURCE: &'static str;

    /// The object as the controller sees it.
    fn to_replica_set(&self) -> ReplicaSet;
    /// The compiled pod selector.
    fn selector(&self) -> Result<Selector>;
    /// A copy with `status` replaced (for the `/status` write).
    fn with_status(&self, status: &ReplicaSetStatus) -> Self;
}

impl ReplicaOwner for ReplicaSet {
    const QUEUE_NAME: &'static str = "replicaset";
    const EVENT_SOURCE: &'static str = "replicaset-controller";

    fn to_replica_set(&self) -> ReplicaSet {
        self.clone()
    }

    fn selector(&self) -> Result<Selector> {
        Ok(labels::label_selector_as_selector(
            self.spec.as_ref().map(|s| &s.selector),
        )?)
    }

    fn with_status(&self, status: &ReplicaSetStatus) -> Self {
        let mut rs = self.clone();
        rs.status = Some(status.clone());
        rs
    }
}

impl ReplicaOwner for ReplicationController {
    const QUEUE_NAME: &'static str = "replicationmanager";
    const EVENT_SOURCE: &'static str = "replication-controller";

    fn to_replica_set(&self) -> ReplicaSet {
        ReplicaSet {
            metadata: self.metadata.clone(),
            spec: self.spec.as_ref().map(|s| ReplicaSetSpec {
                min_ready_seconds: s.min_ready_seconds,
                replicas: s.replicas,
                selector: LabelSelector {
                    match_labels: s.selector.clone(),
                    match_expressions: None,
                },
                template: s.template.clone(),
            }),
            status: self.status.as_ref().map(|s| ReplicaSetStatus {
                available_replicas: s.available_replicas,
                conditions: s.conditions.as_ref().map(|cs| {
                    cs.iter()
                        .map(|c| ReplicaSetCondition {
                            last_transition_time: c.last_transition_time.clone(),
                            message: c.message.clone(),
                            reason: c.reason.clone(),
                            status: c.status.clone(),
                            type_: c.type_.clone(),
                        })
                        .collect()
                }),
                fully_labeled_replicas: s.fully_labeled_replicas,
                observed_generation: s.observed_generation,
                ready_replicas: s.ready_replicas,
                replicas: s.replicas,
                terminating_replicas: None,
            }),
        }
    }

    fn selector(&self) -> Result<Selector> {
        // An empty or absent RC selector selects nothing (where `SelectorFromSet` would select all).
        Ok(match self.spec.as_ref().and_then(|s| s.selector.as_ref()) {
            Some(m) if !m.is_empty() => Selector::from_map(m),
            _ => Selector::nothing(),
        })
    }

    fn with_status(&self, s: &ReplicaSetStatus) -> Self {
        let mut rc = self.clone();
        rc.status = Some(ReplicationControllerStatus {
            available_replicas: s.available_replicas,
            conditions: s.conditions.as_ref().map(|cs| {
                cs.iter()
                    .map(|c| ReplicationControllerCondition {
                        last_transition_time: c.last_transition_time.clone(),
                        message: c.message.clone(),
                        reason: c.reason.clone(),
                        status: c.status.clone(),
                        type_: c.type_.clone(),
                    })
                    .collect()
            }),
            fully_labeled_replicas: s.fully_labeled_replicas,
            observed_generation: s.observed_generation,
            ready_replicas: s.ready_replicas,
            replicas: s.replicas,
        });
        rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ReplicationControllerSpec;
    use std::collections::BTreeMap;

    fn rc(selector: Option<BTreeMap<String, String>>) -> ReplicationController {
        ReplicationController {
            spec: Some(ReplicationControllerSpec {
                replicas: Some(3),
                min_ready_seconds: Some(7),
                selector,
                template: None,
            }),
            status: Some(ReplicationControllerStatus {
                replicas: 2,
                conditions: Some(vec![ReplicationControllerCondition {
                    type_: "ReplicaFailure".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn rc_round_trips_through_replica_set_view() {
        let sel: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let rc = rc(Some(sel.clone()));
        let rs = rc.to_replica_set();
        let spec = rs.spec.clone().unwrap_or_default();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.min_ready_seconds, Some(7));
        assert_eq!(spec.selector.match_labels, Some(sel.clone()));
        let status = rs.status.clone().unwrap_or_default();
        assert_eq!(status.replicas, 2);
        let back = rc.with_status(&status);
        assert_eq!(back.status, rc.status);
        assert!(rc.selector().is_ok_and(|s| s.matches(Some(&sel))));
    }

    #[test]
    fn owner_reference_identity_comes_from_the_kind() {
        use k8s_openapi::Resource;
        assert_eq!(
            (ReplicaSet::API_VERSION, ReplicaSet::KIND),
            ("apps/v1", "ReplicaSet")
        );
        assert_eq!(
            (
                ReplicationController::API_VERSION,
                ReplicationController::KIND
            ),
            ("v1", "ReplicationController")
        );
    }

    #[test]
    fn empty_rc_selector_selects_nothing() {
        let rc = rc(Some(BTreeMap::new()));
        assert!(rc.selector().is_ok_and(|s| !s.matches(None)));
    }
}
