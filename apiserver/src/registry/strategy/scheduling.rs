//! `scheduling.k8s.io/v1` PriorityClasses and the Priority admission rule of pods, as upstream's
//! `pkg/apis/scheduling/validation`, `pkg/registry/scheduling/priorityclass` and
//! `plugin/pkg/admission/priority` define them.
//!
//! - A class's `value` is at most 1,000,000,000 unless it is one of the two system classes, the
//!   only ones whose names may start with `system-`; `value` and `preemptionPolicy` (defaulted to
//!   `PreemptLowerPriority`) never change; the system classes cannot be deleted.
//! - At most one class is `globalDefault` (admission: `PriorityClass X is already marked as
//!   default`); when a race left several, the lowest value wins.
//! - A new pod's `spec.priority` and `spec.preemptionPolicy` come from its `priorityClassName`
//!   (403 when no such class exists), else from the global default class (whose name it then
//!   takes), else priority 0 and `PreemptLowerPriority`. A pod that sets either itself must
//!   match what its class gives (403 otherwise).

use super::table::{age_cell, age_column, column, name_column};
use super::{Forbidden, Objects, Strategy};
use api::validation::{FieldError, FieldErrorKind};
use serde_json::{Map, Value};

/// The system class of critical cluster add-ons.
pub const SYSTEM_CLUSTER_CRITICAL: &str = "system-cluster-critical";
/// The system class of pods that must not leave their node.
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";

/// The system classes kube-apiserver creates at start: (name, value, description), from
/// upstream's `pkg/apis/scheduling/v1/helpers.go` (`SystemCriticalPriority` = 2 × 10⁹).
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i64, &str); 2] = [
    (
        SYSTEM_NODE_CRITICAL,
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        SYSTEM_CLUSTER_CRITICAL,
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// `HighestUserDefinablePriority`.
const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

const SYSTEM_PREFIX: &str = "system-";

const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";
const PREEMPTION_POLICIES: &[&str] = &[PREEMPT_LOWER_PRIORITY, "Never"];

const GROUP: &str = "scheduling.k8s.io";
const PLURAL: &str = "priorityclasses";

fn value_of(pc: &Value) -> i64 {
    pc.get("value").and_then(Value::as_i64).unwrap_or(0)
}

fn global_default(pc: &Value) -> bool {
    pc.get("globalDefault").and_then(Value::as_bool) == Some(true)
}

fn preemption_policy(pc: &Value) -> Option<&str> {
    pc.get("preemptionPolicy").and_then(Value::as_str)
}

/// `IsKnownSystemPriorityClass`: `Err` says why `name` is not exactly a system class.
fn known_system_class(name: &str, value: i64, global: bool) -> Result<(), String> {
    let Some((_, want, _)) = SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _, _)| *n == name) else {
        return Err(format!("{name} is not a known system priority class"));
    };
    if value != *want {
        return Err(format!("value of {name} PriorityClass must be {want}"));
    }
    if global {
        return Err(format!(
            "globalDefault of {name} PriorityClass must be false"
        ));
    }
    Ok(())
}

/// The class pods without a class name get (`getDefaultPriorityClass`): the global default one
/// with the lowest value.
fn default_class(objects: &dyn Objects) -> Option<std::sync::Arc<Value>> {
    objects
        .list(GROUP, PLURAL)
        .into_iter()
        .filter(|pc| global_default(pc))
        .min_by_key(|pc| value_of(pc))
}

fn default_policy(obj: &mut Value) {
    if let Some(m) = obj.as_object_mut() {
        if m.get("preemptionPolicy").is_none_or(Value::is_null) {
            m.insert(
                "preemptionPolicy".into(),
                Value::from(PREEMPT_LOWER_PRIORITY),
            );
        }
    }
}

/// PriorityClasses.
pub struct PriorityClassStrategy;

impl PriorityClassStrategy {
    fn validate(obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = api::meta::name(obj).unwrap_or("");
        let value = match obj.get("value") {
            None => 0,
            Some(v) => match v.as_i64().filter(|n| i32::try_from(*n).is_ok()) {
                Some(n) => n,
                None => {
                    errs.push(FieldError::invalid_value(
                        "value",
                        v,
                        "must be a 32-bit integer",
                    ));
                    0
                }
            },
        };
        if name.starts_with(SYSTEM_PREFIX) {
            if let Err(why) = known_system_class(name, value, global_default(obj)) {
                errs.push(FieldError::forbidden(
                    "metadata.name",
                    format!("priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {why}"),
                ));
            }
        } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
            errs.push(FieldError::forbidden(
                "value",
                format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
                ),
            ));
        }
        match obj.get("preemptionPolicy") {
            None | Some(Value::Null) => {}
            Some(Value::String(p)) if p.is_empty() => {
                errs.push(FieldError::required("preemptionPolicy", ""));
            }
            Some(p) if p.as_str().is_some_and(|p| PREEMPTION_POLICIES.contains(&p)) => {}
            Some(p) => errs.push(FieldError::not_supported(
                "preemptionPolicy",
                p,
                PREEMPTION_POLICIES,
            )),
        }
        errs
    }
}

impl Strategy for PriorityClassStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        default_policy(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, default_policy)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_policy(new);
    }
    fn tracks_generation(&self) -> bool {
        // Upstream sets generation 1 at create; a class has no spec, so it never moves.
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        Self::validate(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // `ValidatePriorityClassUpdate`: only the immutable fields (and object meta).
        let mut errs = Vec::new();
        if new.get("value") != old.get("value") {
            errs.push(FieldError::forbidden(
                "value",
                "may not be changed in an update.",
            ));
        }
        if new.get("preemptionPolicy") != old.get("preemptionPolicy") {
            let shown = preemption_policy(new).unwrap_or("null");
            errs.push(FieldError {
                field: "preemptionPolicy".into(),
                kind: FieldErrorKind::Invalid,
                message: "field is immutable".into(),
                value: Some(api::validation::go_quote(shown)),
            });
        }
        errs
    }
    fn admit(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if !global_default(obj) {
            return Ok(());
        }
        let name = api::meta::name(obj).unwrap_or("");
        match default_class(objects) {
            Some(current) if old.is_none() || api::meta::name(&current) != Some(name) => {
                Err(Forbidden(format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    api::meta::name(&current).unwrap_or("")
                )))
            }
            _ => Ok(()),
        }
    }
    fn protected_from_deletion(&self, name: &str) -> Option<&'static str> {
        SYSTEM_PRIORITY_CLASSES
            .iter()
            .any(|(n, _, _)| *n == name)
            .then_some("this is a system priority class and cannot be deleted")
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Value", "integer", "", "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.", 0),
            column("Global-Default", "boolean", "", "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.", 0),
            age_column(),
            column("PreemptionPolicy", "string", "", "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.", 0),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(value_of(obj)),
            Value::from(global_default(obj)),
            age_cell(obj, now),
            Value::from(preemption_policy(obj).unwrap_or("<unset>")),
        ]
    }
}

/// The Priority admission of a new pod (see the module docs).
pub fn admit_pod_priority(pod: &mut Value, objects: &dyn Objects) -> Result<(), Forbidden> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        // Validation refuses a pod without a spec.
        return Ok(());
    };
    let class_name = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let (priority, policy) = if class_name.is_empty() {
        match default_class(objects) {
            Some(pc) => {
                let name = api::meta::name(&pc).unwrap_or("");
                spec.insert("priorityClassName".into(), Value::from(name));
                (value_of(&pc), preemption_policy(&pc).map(String::from))
            }
            None => (0, Some(PREEMPT_LOWER_PRIORITY.to_string())),
        }
    } else {
        match objects.get(GROUP, PLURAL, None, &class_name) {
            Some(pc) => (value_of(&pc), preemption_policy(&pc).map(String::from)),
            None => {
                return Err(Forbidden(format!(
                    "no PriorityClass with name {class_name} was found"
                )))
            }
        }
    };
    check_priority(spec, priority)?;
    spec.insert("priority".into(), Value::from(priority));
    if let Some(policy) = policy {
        if let Some(given) = spec.get("preemptionPolicy").filter(|p| !p.is_null()) {
            if given.as_str() != Some(policy.as_str()) {
                let shown = given
                    .as_str()
                    .map_or_else(|| given.to_string(), String::from);
                return Err(Forbidden(format!(
                    "the string value of PreemptionPolicy ({shown}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
                )));
            }
        }
        spec.insert("preemptionPolicy".into(), Value::from(policy));
    }
    Ok(())
}

/// A priority the client set must be the computed one.
fn check_priority(spec: &Map<String, Value>, priority: i64) -> Result<(), Forbidden> {
    match spec.get("priority").filter(|p| !p.is_null()) {
        Some(given) if given.as_i64() != Some(priority) => Err(Forbidden(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        ))),
        _ => Ok(()),
    }
}
