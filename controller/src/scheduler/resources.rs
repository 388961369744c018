//! Resource quantities and pod requests as the scheduler counts them.
//!
//! Quantities are parsed by [`api::quantity::Amount`] and read as milli-units (CPU in millicores,
//! memory in milli-bytes, rounded up as apimachinery's `MilliValue` does). A pod's request is the sum over its containers, raised to the
//! largest init container request, plus `spec.overhead` (`computePodResourceRequest`). For scoring,
//! containers without requests count as 100m CPU and 200 MiB (`GetNonzeroRequests`).

use std::collections::BTreeMap;

use api::quantity::Amount;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cached_pod::{CachedContainer, CachedPod, ResourceList};

/// Default CPU request for scoring when none is set: 100 millicores (`DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Default memory request for scoring when none is set: 200 MiB (`DefaultMemoryRequest`).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// CPU millicores, memory bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// Millicores.
    pub milli_cpu: i64,
    /// Bytes.
    pub memory: i64,
}

impl Resources {
    fn add(&mut self, o: Resources) {
        self.milli_cpu = self.milli_cpu.saturating_add(o.milli_cpu);
        self.memory = self.memory.saturating_add(o.memory);
    }

    fn max(&mut self, o: Resources) {
        self.milli_cpu = self.milli_cpu.max(o.milli_cpu);
        self.memory = self.memory.max(o.memory);
    }

    /// Component-wise subtraction.
    pub fn sub(&mut self, o: Resources) {
        self.milli_cpu = self.milli_cpu.saturating_sub(o.milli_cpu);
        self.memory = self.memory.saturating_sub(o.memory);
    }

    /// Component-wise addition.
    pub fn plus(mut self, o: Resources) -> Resources {
        self.add(o);
        self
    }
}

/// A resource list the scheduler reads: a node's or an overhead's map, or a cached
/// container's [`ResourceList`].
pub trait Quantities {
    fn quantity(&self, name: &str) -> Option<&Quantity>;
}

impl Quantities for BTreeMap<String, Quantity> {
    fn quantity(&self, name: &str) -> Option<&Quantity> {
        self.get(name)
    }
}

impl Quantities for ResourceList {
    fn quantity(&self, name: &str) -> Option<&Quantity> {
        self.get(name)
    }
}

fn milli_of(list: Option<&impl Quantities>, name: &str) -> Option<i128> {
    list.and_then(|l| l.quantity(name))
        .and_then(|q| Amount::parse(&q.0).ok())
        .map(Amount::milli_value)
}

/// Read `cpu` and `memory` from a resource list (absent or malformed = 0).
pub fn from_list(list: Option<&impl Quantities>) -> Resources {
    let cpu = milli_of(list, "cpu").unwrap_or(0);
    let mem = milli_of(list, "memory").unwrap_or(0);
    Resources {
        milli_cpu: i64::try_from(cpu).unwrap_or(i64::MAX),
        memory: i64::try_from((mem + 999) / 1000).unwrap_or(i64::MAX),
    }
}

fn container_requests(c: &CachedContainer, non_zero: bool) -> Resources {
    let req = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let mut r = from_list(req);
    if non_zero {
        if milli_of(req, "cpu").is_none() {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if milli_of(req, "memory").is_none() {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

/// The pod's effective request; `non_zero` substitutes the scoring defaults for unset requests.
pub fn pod_requests(pod: &CachedPod, non_zero: bool) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    let mut total = Resources::default();
    for c in &spec.containers {
        total.add(container_requests(c, non_zero));
    }
    for c in spec.init_containers.iter().flatten() {
        total.max(container_requests(c, non_zero));
    }
    total.add(from_list(spec.overhead.as_ref()));
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cached_pod::{CachedContainer, CachedPod, CachedPodSpec};
    use k8s_openapi::api::core::v1::ResourceRequirements;

    fn container(cpu: Option<&str>, mem: Option<&str>) -> CachedContainer {
        let mut req = BTreeMap::new();
        if let Some(c) = cpu {
            req.insert("cpu".to_string(), Quantity(c.into()));
        }
        if let Some(m) = mem {
            req.insert("memory".to_string(), Quantity(m.into()));
        }
        CachedContainer {
            resources: Some(
                ResourceRequirements {
                    requests: Some(req),
                    ..Default::default()
                }
                .into(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn pod_request_sums_containers_and_maxes_init() {
        let pod = CachedPod {
            spec: Some(CachedPodSpec {
                containers: vec![
                    container(Some("250m"), Some("64Mi")),
                    container(Some("250m"), None),
                ],
                init_containers: Some(vec![container(Some("2"), Some("1Mi"))]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            pod_requests(&pod, false),
            Resources {
                milli_cpu: 2000,
                memory: 64 * 1024 * 1024
            }
        );
        let nz = pod_requests(&pod, true);
        assert_eq!(nz.memory, 64 * 1024 * 1024 + DEFAULT_MEMORY_REQUEST);
    }
}
