//! Pods for quota (`pkg/quota/v1/evaluator/core/pods.go`): usage, scopes and the cpu/memory
//! constraints.
//!
//! * Usage: `count/pods` = 1 always; a pod that still counts ([`counts_for_quota`]: not
//!   Succeeded/Failed, not past its deletion grace period) adds `pods` = 1 and its compute
//!   resources from the pod's requests and limits (`resourcehelper.PodRequests`/`PodLimits`: the
//!   containers' sum, raised to the largest init container — restartable (sidecar) init
//!   containers add to everything after them — plus `spec.overhead`): `cpu`/`requests.cpu`,
//!   `limits.cpu`, the same for `memory` and `ephemeral-storage`, `hugepages-*` with their
//!   `requests.` form, and `requests.<name>` for extended resources.
//! * Scopes: Terminating (`activeDeadlineSeconds >= 0`), NotTerminating, BestEffort,
//!   NotBestEffort (the QoS class), PriorityClass (`priorityClassName` against the selector),
//!   CrossNamespacePodAffinity.
//! * Constraints: a quota on cpu or memory (requests, limits, or bare) requires every container
//!   and init container to state it: `must specify limits.cpu for: a,b; requests.memory for: a`.
//!
//! Deviation: usage reads the spec only; upstream also raises it to the resources a kubelet
//! reports as allocated during an in-place resize (the fake kubelets never report them).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::scope::{self, ScopeRequirement};
use super::{add, Quantity, ResourceList};

/// `count/pods`.
pub const OBJECT_COUNT: &str = "count/pods";

/// `podResources`: the quota resources pods consume (besides the prefixed ones).
pub const RESOURCES: &[&str] = &[
    OBJECT_COUNT,
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];

/// `validationSet`: quota resources every container must state when a quota tracks them.
const VALIDATION_SET: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// `helper.IsNativeResource`: no domain, or one under `kubernetes.io`.
fn is_native(name: &str) -> bool {
    match name.split_once('/') {
        None => true,
        Some((domain, _)) => domain.contains("kubernetes.io"),
    }
}

/// `helper.IsExtendedResourceName`: not native, not `requests.`-prefixed, and `requests.<name>`
/// a qualified name.
fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && crate::validation::is_qualified_name(&format!("requests.{name}")).is_empty()
}

/// Whether `name` is a pod quota resource (`podEvaluator.MatchingResources` for one name).
pub fn is_pod_resource(name: &str) -> bool {
    RESOURCES.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-")
        || (!is_native(name) && name.starts_with("requests."))
}

fn list_at(v: Option<&Value>) -> ResourceList {
    super::from_json(v)
}

fn add_into(list: &mut ResourceList, other: &ResourceList) {
    *list = add(list, other);
}

/// `maxResourceList`: each entry raised to `other`'s where that is larger.
fn max_into(list: &mut ResourceList, other: &ResourceList) {
    for (k, q) in other {
        match list.get(k) {
            Some(have) if *have >= *q => {}
            _ => {
                list.insert(k.clone(), *q);
            }
        }
    }
}

/// `AggregateContainerRequests`/`AggregateContainerLimits` over `field` (`requests` or `limits`).
fn aggregate(spec: &Value, field: &str) -> ResourceList {
    let of = |c: &Value| list_at(c.get("resources").and_then(|r| r.get(field)));
    let mut total = ResourceList::new();
    for c in containers(spec, "containers") {
        add_into(&mut total, &of(c));
    }
    let mut restartable = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in containers(spec, "initContainers") {
        let own = of(c);
        let in_use = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add_into(&mut total, &own);
            add_into(&mut restartable, &own);
            restartable.clone()
        } else {
            add(&own, &restartable)
        };
        max_into(&mut init_max, &in_use);
    }
    max_into(&mut total, &init_max);
    total
}

fn containers<'a>(spec: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    spec.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// `PodRequests`: aggregated container requests plus the overhead.
pub fn pod_requests(pod: &Value) -> ResourceList {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let reqs = aggregate(spec, "requests");
    add(&reqs, &list_at(spec.get("overhead")))
}

/// `PodLimits`: aggregated container limits, the overhead added to the limits that are set.
pub fn pod_limits(pod: &Value) -> ResourceList {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut limits = aggregate(spec, "limits");
    for (k, q) in list_at(spec.get("overhead")) {
        if let Some(have) = limits.get_mut(&k) {
            *have = *have + q;
        }
    }
    limits
}

/// `podComputeUsageHelper`: quota resources from requests and limits (and `pods` = 1).
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("pods".to_string(), Quantity::from_units(1));
    for name in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(r) = requests.get(name) {
            out.insert(name.to_string(), *r);
            out.insert(format!("requests.{name}"), *r);
        }
        if let Some(l) = limits.get(name) {
            out.insert(format!("limits.{name}"), *l);
        }
    }
    for (name, r) in requests {
        if name.starts_with("hugepages-") {
            out.insert(name.clone(), *r);
            out.insert(format!("requests.{name}"), *r);
        }
        if is_extended(name) {
            out.insert(format!("requests.{name}"), *r);
        }
    }
    out
}

/// `QuotaV1Pod`: whether the pod is charged compute quota — not terminal, and not past its
/// deletion grace period at `now` (a pod stuck terminating on a lost node is not charged).
pub fn counts_for_quota(pod: &Value, now: jiff::Timestamp) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return false;
    }
    let deletion =
        crate::meta::deletion_timestamp(pod).and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    if let (Some(at), Some(grace)) = (deletion, grace) {
        let deadline = at.checked_add(jiff::SignedDuration::from_secs(grace));
        if deadline.is_ok_and(|d| now > d) {
            return false;
        }
    }
    true
}

/// `PodUsageFunc`: the pod's quota usage at `now`.
pub fn usage(pod: &Value, now: jiff::Timestamp) -> ResourceList {
    let mut out = ResourceList::from([(OBJECT_COUNT.to_string(), Quantity::from_units(1))]);
    if !counts_for_quota(pod, now) {
        return out;
    }
    out = add(&out, &compute_usage(&pod_requests(pod), &pod_limits(pod)));
    out
}

/// `isTerminating`.
fn is_terminating(pod: &Value) -> bool {
    pod.pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0)
}

fn is_best_effort(pod: &Value) -> bool {
    crate::qos::qos_class(pod.get("spec").unwrap_or(&Value::Null)) == crate::qos::BEST_EFFORT
}

/// `usesCrossNamespacePodAffinity`: a (preferred or required) pod affinity or anti-affinity term
/// naming namespaces or with a namespace selector.
fn uses_cross_namespace_affinity(pod: &Value) -> bool {
    let cross = |term: Option<&Value>| {
        term.is_some_and(|t| {
            t.get("namespaces")
                .and_then(Value::as_array)
                .is_some_and(|n| !n.is_empty())
                || t.get("namespaceSelector").is_some_and(|s| !s.is_null())
        })
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(a) = pod.pointer(&format!("/spec/affinity/{kind}")) else {
            return false;
        };
        let required = a
            .get("requiredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|t| cross(Some(t)));
        let preferred = a
            .get("preferredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|t| cross(t.get("podAffinityTerm")));
        required || preferred
    })
}

/// `podMatchesScopeFunc`: whether the pod is in the scope `req` describes.
pub fn matches_scope(req: &ScopeRequirement, pod: &Value) -> Result<bool, String> {
    Ok(match req.scope.as_str() {
        scope::TERMINATING => is_terminating(pod),
        scope::NOT_TERMINATING => !is_terminating(pod),
        scope::BEST_EFFORT => is_best_effort(pod),
        scope::NOT_BEST_EFFORT => !is_best_effort(pod),
        scope::PRIORITY_CLASS => {
            let class = pod
                .pointer("/spec/priorityClassName")
                .and_then(Value::as_str)
                .unwrap_or("");
            if req.operator == "Exists" {
                return Ok(!class.is_empty());
            }
            let labels = if class.is_empty() {
                BTreeMap::new()
            } else {
                BTreeMap::from([(scope::PRIORITY_CLASS.to_string(), class.to_string())])
            };
            req.selector_matches(&labels)?
        }
        scope::CROSS_NAMESPACE_POD_AFFINITY => uses_cross_namespace_affinity(pod),
        _ => false,
    })
}

/// `podEvaluator.Constraints`: every container and init container states each cpu/memory
/// resource of `required` that quota validates; else `must specify <res> for: <containers>; …`.
pub fn constraints(required: &[String], pod: &Value) -> Result<(), String> {
    let required: BTreeSet<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|r| VALIDATION_SET.contains(r))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in containers(spec, "containers").chain(containers(spec, "initContainers")) {
        let res = c.get("resources");
        let usage = compute_usage(
            &list_at(res.and_then(|r| r.get("requests"))),
            &list_at(res.and_then(|r| r.get("limits"))),
        );
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        for r in &required {
            if !usage.contains_key(*r) {
                missing.entry(r).or_default().insert(name.to_string());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            format!("{r} for: {}", names.join(","))
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

#[cfg(test)]
#[path = "pods_tests.rs"]
mod tests;
