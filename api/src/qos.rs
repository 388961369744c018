//! A pod's QoS class, as Kubernetes 1.33 computes it (`pkg/apis/core/helper/qos/qos.go`,
//! `ComputePodQOS`), over either form a pod comes in.
//!
//! Rules, upstream's: only `cpu` and `memory` count, and only quantities greater than zero; every
//! container and init container contributes (ephemeral containers cannot set resources); a resource a
//! container limits but does not request is requested at its limit (`SetDefaults_Pod`, applied here so
//! an undefaulted spec classifies like its defaulted form). The pod is
//! * `BestEffort` when no container requests or limits cpu or memory;
//! * `Guaranteed` when every container limits both cpu and memory and, per resource, the pod's summed
//!   requests equal its summed limits — compared as quantities, so `"1"` equals `"1000m"`;
//! * `Burstable` otherwise.
//!
//! Pod-level `spec.resources` is ignored: it counts only behind the `PodLevelResources` feature gate,
//! alpha and off by default in 1.33. A quantity that does not parse counts as absent (the API rejects
//! such a pod).
//!
//! [`qos_class`] is generic over [`PodResources`], implemented for the typed [`PodSpec`] (the kubelet)
//! and for a spec's JSON (the apiserver, which classifies every created pod and so must not
//! deserialize the whole spec to do it). Both read the four quantities per container and nothing else.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use crate::quantity::Amount;

/// `PodQOSGuaranteed`.
pub const GUARANTEED: &str = "Guaranteed";
/// `PodQOSBurstable`.
pub const BURSTABLE: &str = "Burstable";
/// `PodQOSBestEffort`.
pub const BEST_EFFORT: &str = "BestEffort";

/// The resources QoS looks at, in this order.
const RESOURCES: [&str; 2] = ["cpu", "memory"];

/// One container's cpu and memory requests and limits (indexed like `RESOURCES`), as written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContainerResources {
    pub requests: [Option<Amount>; 2],
    pub limits: [Option<Amount>; 2],
}

/// A pod spec in some form: yields the resources of every container and init container.
pub trait PodResources {
    /// Every regular and init container's resources.
    fn containers(&self) -> impl Iterator<Item = ContainerResources> + '_;
}

impl PodResources for PodSpec {
    fn containers(&self) -> impl Iterator<Item = ContainerResources> + '_ {
        self.containers
            .iter()
            .chain(self.init_containers.iter().flatten())
            .map(|c| ContainerResources::of(c.resources.as_ref()))
    }
}

impl ContainerResources {
    /// The resources a container's typed `resources` ask for.
    pub fn of(resources: Option<&ResourceRequirements>) -> ContainerResources {
        let list = |pick: fn(&ResourceRequirements) -> Option<&BTreeMap<String, Quantity>>| {
            RESOURCES.map(|name| {
                resources
                    .and_then(pick)
                    .and_then(|m| m.get(name))
                    .and_then(|q| Amount::parse(&q.0).ok())
            })
        };
        ContainerResources {
            requests: list(|r| r.requests.as_ref()),
            limits: list(|r| r.limits.as_ref()),
        }
    }
}

/// A pod's `spec` as JSON; anything but an object has no containers.
impl PodResources for Value {
    fn containers(&self) -> impl Iterator<Item = ContainerResources> + '_ {
        ["containers", "initContainers"]
            .into_iter()
            .filter_map(|k| self.get(k).and_then(Value::as_array))
            .flatten()
            .map(json_container)
    }
}

fn json_container(c: &Value) -> ContainerResources {
    let resources = c.get("resources");
    let list = |key: &str| {
        let m = resources.and_then(|r| r.get(key));
        RESOURCES.map(|name| m.and_then(|m| m.get(name)).and_then(json_quantity))
    };
    ContainerResources {
        requests: list("requests"),
        limits: list("limits"),
    }
}

/// A quantity in JSON: a string, or a number (`Quantity.UnmarshalJSON` takes both).
fn json_quantity(v: &Value) -> Option<Amount> {
    match v {
        Value::String(s) => Amount::parse(s).ok(),
        Value::Number(n) => Amount::parse(&n.to_string()).ok(),
        _ => None,
    }
}

fn add(sum: &mut Option<Amount>, q: Amount) {
    *sum = Some(sum.map_or(q, |s| s.saturating_add(q)));
}

/// `ComputePodQOS`: [`GUARANTEED`], [`BURSTABLE`] or [`BEST_EFFORT`].
pub fn qos_class(spec: &impl PodResources) -> &'static str {
    let mut requests: [Option<Amount>; 2] = [None; 2];
    let mut limits: [Option<Amount>; 2] = [None; 2];
    let mut guaranteed = true;
    for c in spec.containers() {
        for i in 0..RESOURCES.len() {
            // SetDefaults_Pod: a resource limited but not requested is requested at its limit.
            if let Some(q) = c.requests[i].or(c.limits[i]).filter(|q| q.is_positive()) {
                add(&mut requests[i], q);
            }
            match c.limits[i].filter(|q| q.is_positive()) {
                Some(q) => add(&mut limits[i], q),
                // Guaranteed needs every container to limit both cpu and memory.
                None => guaranteed = false,
            }
        }
    }
    if requests.iter().chain(&limits).all(Option::is_none) {
        BEST_EFFORT
    } else if guaranteed && requests == limits {
        GUARANTEED
    } else {
        BURSTABLE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Both forms of a spec with one container carrying `res`: they must agree.
    fn both(spec: Value) -> &'static str {
        let typed: PodSpec = serde_json::from_value(spec.clone()).unwrap_or_default();
        let (a, b) = (qos_class(&typed), qos_class(&spec));
        assert_eq!(a, b, "typed and JSON disagree on {spec}");
        a
    }

    fn with(res: Value) -> &'static str {
        both(json!({"containers": [{"name": "c", "image": "x", "resources": res}]}))
    }

    // Moved from the kubelet's pod-status tests.
    #[test]
    fn qos_classes() {
        assert_eq!(with(json!({})), BEST_EFFORT);
        assert_eq!(with(json!({"requests": {"cpu": "100m"}})), BURSTABLE);
        assert_eq!(
            with(json!({"limits": {"cpu": "1", "memory": "1Gi"}})),
            GUARANTEED
        );
        assert_eq!(
            with(json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}})),
            BURSTABLE
        );
    }

    /// Regression: requests and limits are compared as quantities (the apiserver compared the JSON
    /// strings, the kubelet the quantity strings, so `"1"` vs `"1000m"` was Burstable).
    #[test]
    fn requests_equal_to_limits_in_other_units_are_guaranteed() {
        assert_eq!(
            with(json!({
                "requests": {"cpu": "1000m", "memory": "1024Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"}
            })),
            GUARANTEED
        );
        assert_eq!(
            with(
                json!({"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"cpu": "1", "memory": 1073741824}})
            ),
            GUARANTEED,
            "numbers in JSON are quantities too"
        );
    }

    /// Regression: zero quantities do not count (a zero request made the pod Burstable).
    #[test]
    fn zero_quantities_do_not_count() {
        assert_eq!(
            with(json!({"requests": {"cpu": "0", "memory": "0Mi"}})),
            BEST_EFFORT
        );
        assert_eq!(
            with(json!({"limits": {"cpu": "0", "memory": "0"}})),
            BEST_EFFORT
        );
        assert_eq!(
            with(json!({"requests": {"cpu": "0"}, "limits": {"cpu": "1", "memory": "1Gi"}})),
            BURSTABLE,
            "a zero request of a limited resource is not its limit"
        );
    }

    #[test]
    fn only_cpu_and_memory_count() {
        assert_eq!(
            with(json!({"requests": {"ephemeral-storage": "1Gi", "hugepages-2Mi": "2Mi"}})),
            BEST_EFFORT
        );
        assert_eq!(
            with(json!({
                "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                "requests": {"ephemeral-storage": "500Mi"}
            })),
            GUARANTEED
        );
        assert_eq!(with(json!({"limits": {"cpu": "1"}})), BURSTABLE);
    }

    #[test]
    fn every_container_including_init_must_be_guaranteed() {
        let g = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
        assert_eq!(
            both(
                json!({"containers": [{"name": "a", "resources": g}, {"name": "b", "resources": g}]})
            ),
            GUARANTEED
        );
        assert_eq!(
            both(json!({"containers": [{"name": "a", "resources": g}, {"name": "b"}]})),
            BURSTABLE
        );
        assert_eq!(
            both(
                json!({"containers": [{"name": "a", "resources": g}], "initContainers": [{"name": "i"}]})
            ),
            BURSTABLE
        );
        assert_eq!(
            both(
                json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "resources": g}]})
            ),
            BURSTABLE
        );
        assert_eq!(
            both(
                json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "resources": {"requests": {"memory": "1Mi"}}}]})
            ),
            BURSTABLE
        );
    }

    #[test]
    fn pod_level_resources_and_empty_specs() {
        assert_eq!(both(json!({})), BEST_EFFORT);
        assert_eq!(qos_class(&Value::Null), BEST_EFFORT);
        assert_eq!(
            both(
                json!({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}, "containers": [{"name": "a"}]})
            ),
            BEST_EFFORT,
            "spec.resources is behind a feature gate that is off in 1.33"
        );
    }

    #[test]
    fn unparseable_quantities_count_as_absent() {
        assert_eq!(json_quantity(&json!("abc")), None);
        assert_eq!(
            qos_class(&json!({"containers": [{"resources": {"requests": {"cpu": "abc"}}}]})),
            BEST_EFFORT
        );
    }
}
