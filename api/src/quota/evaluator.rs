//! Quota evaluators (`quota.Evaluator` and `pkg/quota/v1/evaluator/core`'s registry): one per
//! group-resource, deciding which quota resources it measures and an object's usage.
//!
//! * Pods, services and PersistentVolumeClaims have their own rules ([`super::pods`], service
//!   types, claim storage per class); every other resource is counted as objects
//!   (`count/<resource>[.<group>]`), with the legacy aliases `configmaps`, `secrets`,
//!   `replicationcontrollers` and `resourcequotas` (`legacyObjectCountAliases`).
//! * [`Evaluator::handles`] says whether an operation can change usage: creates always; updates of
//!   services and claims (a type or size can change), a claim's status when its allocated size
//!   changes, and a pod's `resize`; object counts only on create.
//! * [`Evaluator::matches`] is `generic.Matches`: the quota names one of the evaluator's resources
//!   in `status.hard`, and the object is in every scope of the quota (only pods have scopes).
//! * [`calculate_usage`] is `quota.CalculateUsage`, the controller's recount of a namespace.

use serde_json::Value;

use super::scope::{quota_scopes, ScopeRequirement};
use super::{add, mask, pods, Quantity, ResourceList};

/// An admission operation that can change usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// What an evaluator measures.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Measure {
    Pods,
    Services,
    Claims,
    /// Object counts, with a legacy alias for some core kinds.
    Objects {
        alias: Option<&'static str>,
    },
}

/// The evaluator of one group-resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluator {
    group: String,
    resource: String,
    measure: Measure,
}

/// `count/services`.
const SERVICE_COUNT: &str = "count/services";
/// `serviceResources`.
const SERVICE_RESOURCES: &[&str] = &[
    SERVICE_COUNT,
    "services",
    "services.loadbalancers",
    "services.nodeports",
];
/// `count/persistentvolumeclaims`.
const CLAIM_COUNT: &str = "count/persistentvolumeclaims";
/// `pvcResources`.
const CLAIM_RESOURCES: &[&str] = &["persistentvolumeclaims", "requests.storage"];
/// `storageClassSuffix`: `<class>.storageclass.storage.k8s.io/<resource>`.
pub const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
/// The beta storage-class annotation a claim's class is read from first.
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// `legacyObjectCountAliases`.
const ALIASES: &[(&str, &str)] = &[
    ("configmaps", "configmaps"),
    ("resourcequotas", "resourcequotas"),
    ("replicationcontrollers", "replicationcontrollers"),
    ("secrets", "secrets"),
];

/// `generic.ObjectCountQuotaResourceNameFor`: `count/<resource>` or `count/<resource>.<group>`.
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

impl Evaluator {
    /// The evaluator of `group`/`resource`: the registered one, else an object counter.
    pub fn for_resource(group: &str, resource: &str) -> Evaluator {
        let measure = match (group, resource) {
            ("", "pods") => Measure::Pods,
            ("", "services") => Measure::Services,
            ("", "persistentvolumeclaims") => Measure::Claims,
            ("", r) => Measure::Objects {
                alias: ALIASES.iter().find(|(res, _)| *res == r).map(|(_, a)| *a),
            },
            _ => Measure::Objects { alias: None },
        };
        Evaluator {
            group: group.to_string(),
            resource: resource.to_string(),
            measure,
        }
    }

    /// The evaluator counting the objects a `count/<resource>[.<group>]` quota resource names.
    pub fn for_count_name(name: &str) -> Option<Evaluator> {
        let rest = name.strip_prefix("count/")?;
        let (resource, group) = rest.split_once('.').unwrap_or((rest, ""));
        (!resource.is_empty()).then(|| Evaluator::for_resource(group, resource))
    }

    /// `NewEvaluators`' static registry: pods, services, claims and the aliased core counters.
    pub fn registry() -> Vec<Evaluator> {
        ["pods", "services", "persistentvolumeclaims"]
            .into_iter()
            .chain(ALIASES.iter().map(|(r, _)| *r))
            .map(|r| Evaluator::for_resource("", r))
            .collect()
    }

    /// The API group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The resource (plural).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Whether `op` on the resource (`subresource` empty for the main one) can change usage;
    /// `obj`/`old` are the new and stored states of an update.
    pub fn handles(
        &self,
        op: Operation,
        subresource: &str,
        obj: &Value,
        old: Option<&Value>,
    ) -> bool {
        match (&self.measure, subresource) {
            (Measure::Pods, "") => op == Operation::Create,
            (Measure::Pods, "resize") => op == Operation::Update,
            (Measure::Services | Measure::Claims, "") => true,
            (Measure::Claims, "status") => {
                old.is_some_and(|old| claim_allocated_storage(obj) != claim_allocated_storage(old))
            }
            (Measure::Objects { .. }, "") => op == Operation::Create,
            _ => false,
        }
    }

    /// `MatchingResources`: those of `names` this evaluator measures.
    pub fn matching_resources<'a>(
        &self,
        names: impl IntoIterator<Item = &'a String>,
    ) -> Vec<String> {
        names
            .into_iter()
            .filter(|n| self.measures(n))
            .cloned()
            .collect()
    }

    fn measures(&self, name: &str) -> bool {
        match &self.measure {
            Measure::Pods => pods::is_pod_resource(name),
            Measure::Services => SERVICE_RESOURCES.contains(&name),
            Measure::Claims => {
                name == CLAIM_COUNT
                    || CLAIM_RESOURCES.contains(&name)
                    || CLAIM_RESOURCES
                        .iter()
                        .any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
            }
            Measure::Objects { alias } => {
                name == object_count_name(&self.group, &self.resource) || Some(name) == *alias
            }
        }
    }

    /// Whether `obj` is in the scope `req` describes (only pods have scopes).
    pub fn matches_scope(&self, req: &ScopeRequirement, obj: &Value) -> Result<bool, String> {
        match self.measure {
            Measure::Pods => pods::matches_scope(req, obj),
            _ => Ok(false),
        }
    }

    /// `MatchingScopes`: the requirements of `scopes` that `obj` is in.
    pub fn matching_scopes(
        &self,
        obj: &Value,
        scopes: &[ScopeRequirement],
    ) -> Result<Vec<ScopeRequirement>, String> {
        let mut out = Vec::new();
        for s in scopes {
            if self.matches_scope(s, obj)? {
                out.push(s.clone());
            }
        }
        Ok(out)
    }

    /// `generic.Matches`: `quota` tracks one of this evaluator's resources in `status.hard` and
    /// `obj` is in every scope of the quota.
    pub fn matches(&self, quota: &Value, obj: &Value) -> Result<bool, String> {
        let hard = super::from_json(quota.pointer("/status/hard"));
        if self.matching_resources(hard.keys()).is_empty() {
            return Ok(false);
        }
        self.in_scopes(&quota_scopes(quota), obj)
    }

    fn in_scopes(&self, scopes: &[ScopeRequirement], obj: &Value) -> Result<bool, String> {
        for s in scopes {
            if !self.matches_scope(s, obj)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `Constraints`: pods must state the cpu/memory resources a quota tracks.
    pub fn constraints(&self, required: &[String], obj: &Value) -> Result<(), String> {
        match self.measure {
            Measure::Pods => pods::constraints(required, obj),
            _ => Ok(()),
        }
    }

    /// `Usage`: what `obj` consumes (pods as of `now`).
    pub fn usage(&self, obj: &Value, now: jiff::Timestamp) -> ResourceList {
        match &self.measure {
            Measure::Pods => pods::usage(obj, now),
            Measure::Services => service_usage(obj),
            Measure::Claims => claim_usage(obj),
            Measure::Objects { alias } => {
                let one = Quantity::from_units(1);
                let mut out =
                    ResourceList::from([(object_count_name(&self.group, &self.resource), one)]);
                if let Some(alias) = alias {
                    out.insert((*alias).to_string(), one);
                }
                out
            }
        }
    }

    /// `UsageStats` (`generic.CalculateUsageStats`): each of `resources` starts at zero, then the
    /// usage of every item in all of `scopes` is added.
    pub fn usage_stats<'a>(
        &self,
        items: impl IntoIterator<Item = &'a Value>,
        scopes: &[ScopeRequirement],
        resources: &[String],
        now: jiff::Timestamp,
    ) -> Result<ResourceList, String> {
        let mut used: ResourceList = resources
            .iter()
            .map(|r| (r.clone(), Quantity::default()))
            .collect();
        for item in items {
            if self.in_scopes(scopes, item)? {
                used = add(&used, &self.usage(item, now));
            }
        }
        Ok(used)
    }
}

/// `serviceEvaluator.Usage`.
fn service_usage(svc: &Value) -> ResourceList {
    let spec = svc.get("spec").unwrap_or(&Value::Null);
    let ports = spec.get("ports").and_then(Value::as_array);
    let port_count = ports.map_or(0, Vec::len) as i64;
    let one = Quantity::from_units(1);
    let (mut node_ports, mut balancers) = (Quantity::default(), Quantity::default());
    match spec.get("type").and_then(Value::as_str) {
        Some("NodePort") => node_ports = Quantity::from_units(port_count),
        Some("LoadBalancer") => {
            let allocate = spec
                .get("allocateLoadBalancerNodePorts")
                .and_then(Value::as_bool);
            node_ports = if allocate == Some(false) {
                let with = ports.into_iter().flatten().filter(|p| {
                    p.get("nodePort")
                        .and_then(Value::as_i64)
                        .is_some_and(|n| n != 0)
                });
                Quantity::from_units(with.count() as i64)
            } else {
                Quantity::from_units(port_count)
            };
            balancers = one;
        }
        _ => {}
    }
    ResourceList::from([
        (SERVICE_COUNT.to_string(), one),
        ("services".to_string(), one),
        ("services.loadbalancers".to_string(), balancers),
        ("services.nodeports".to_string(), node_ports),
    ])
}

/// `GetPersistentVolumeClaimClass`: the beta annotation, else `spec.storageClassName`.
fn claim_class(pvc: &Value) -> &str {
    let annotated = pvc
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(BETA_STORAGE_CLASS))
        .and_then(Value::as_str);
    annotated
        .or_else(|| {
            pvc.pointer("/spec/storageClassName")
                .and_then(Value::as_str)
        })
        .unwrap_or("")
}

fn claim_allocated_storage(pvc: &Value) -> Option<Quantity> {
    let v = pvc.pointer("/status/allocatedResources/storage")?;
    Quantity::parse(v.as_str()?).ok()
}

/// `pvcEvaluator.Usage`: the claim (overall and per class) and its storage — the request, or
/// the allocated size when larger — rounded up to whole bytes.
fn claim_usage(pvc: &Value) -> ResourceList {
    let one = Quantity::from_units(1);
    let mut out = ResourceList::from([
        ("persistentvolumeclaims".to_string(), one),
        (CLAIM_COUNT.to_string(), one),
    ]);
    let class = claim_class(pvc);
    if !class.is_empty() {
        out.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            one,
        );
    }
    let requested = pvc
        .pointer("/spec/resources/requests/storage")
        .and_then(Value::as_str)
        .and_then(|s| Quantity::parse(s).ok())
        .map(Quantity::round_up_to_units);
    let storage = match (requested, claim_allocated_storage(pvc)) {
        (Some(r), Some(a)) if a > r => Some(a.round_up_to_units()),
        (r, _) => r,
    };
    if let Some(storage) = storage {
        out.insert("requests.storage".to_string(), storage);
        if !class.is_empty() {
            out.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                storage,
            );
        }
    }
    out
}

/// `quota.CalculateUsage`: the usage of the resources of `hard` that `evaluators` measure, over
/// the objects `list` gives for each evaluator (the namespace's), in `scopes`. An evaluator whose
/// list fails is left out (its resources keep their old usage) and its error returned.
pub fn calculate_usage<L>(
    hard: &ResourceList,
    scopes: &[ScopeRequirement],
    evaluators: &[Evaluator],
    mut list: L,
    now: jiff::Timestamp,
) -> (ResourceList, Vec<String>)
where
    L: FnMut(&Evaluator) -> Result<Vec<std::sync::Arc<Value>>, String>,
{
    let mut matched: Vec<String> = hard
        .keys()
        .filter(|k| evaluators.iter().any(|e| e.measures(k)))
        .cloned()
        .collect();
    let mut used = ResourceList::new();
    let mut errors = Vec::new();
    for e in evaluators {
        let resources = e.matching_resources(matched.iter());
        if resources.is_empty() {
            continue;
        }
        let stats = list(e)
            .and_then(|items| e.usage_stats(items.iter().map(|i| &**i), scopes, &resources, now));
        match stats {
            Ok(stats) => used = add(&used, &stats),
            Err(err) => {
                errors.push(err);
                matched.retain(|m| !resources.contains(m));
            }
        }
    }
    (mask(&used, matched.iter().map(String::as_str)), errors)
}

#[cfg(test)]
#[path = "evaluator_tests.rs"]
mod tests;
