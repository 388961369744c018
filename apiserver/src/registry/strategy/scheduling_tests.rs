//! PriorityClasses and the Priority admission of pods: upstream's messages, immutability, the
//! table, and priority resolution against a fixed set of classes.

use super::{Forbidden, Objects};
use crate::registry::{builtin, Resource};
use serde_json::{json, Value};
use std::sync::Arc;

fn pcs() -> Arc<Resource> {
    match builtin::find("scheduling.k8s.io", "priorityclasses") {
        Some(s) => s,
        None => panic!("no priorityclasses"),
    }
}

fn pc(name: &str, value: i64) -> Value {
    json!({"metadata": {"name": name}, "value": value})
}

fn errors(obj: &Value) -> Vec<String> {
    let r = pcs();
    let mut obj = obj.clone();
    r.prepare_for_create(&mut obj);
    r.validate_create(&obj)
        .iter()
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn values_and_system_names() {
    assert_eq!(errors(&pc("high", 1_000_000_000)), Vec::<String>::new());
    assert_eq!(
        errors(&pc("higher", 1_000_000_001)),
        ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
    );
    assert_eq!(errors(&pc("negative", -5)), Vec::<String>::new());
    assert_eq!(
        errors(&pc("system-node-critical", 2_000_001_000)),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&pc("system-cluster-critical", 5)),
        ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-cluster-critical PriorityClass must be 2000000000"]
    );
    let mut global = pc("system-node-critical", 2_000_001_000);
    global["globalDefault"] = json!(true);
    assert_eq!(
        errors(&global),
        ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: globalDefault of system-node-critical PriorityClass must be false"]
    );
    assert_eq!(
        errors(&pc("system-mine", 1)),
        ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"]
    );
    assert_eq!(
        errors(&pc("Bad", 1)),
        ["metadata.name: Invalid value: \"Bad\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
    );
}

#[test]
fn preemption_policy_defaults_and_is_checked() {
    let r = pcs();
    let mut obj = pc("p", 1);
    r.prepare_for_create(&mut obj);
    assert_eq!(obj["preemptionPolicy"], json!("PreemptLowerPriority"));
    assert_eq!(api::meta::generation(&obj), Some(1));
    let mut never = pc("p", 1);
    never["preemptionPolicy"] = json!("Never");
    assert_eq!(errors(&never), Vec::<String>::new());
    never["preemptionPolicy"] = json!("Sometimes");
    assert_eq!(
        errors(&never),
        ["preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\""]
    );
    never["preemptionPolicy"] = json!("");
    assert_eq!(errors(&never), ["preemptionPolicy: Required value"]);
}

#[test]
fn value_and_preemption_policy_are_immutable() {
    let r = pcs();
    let mut old = pc("p", 10);
    r.prepare_for_create(&mut old);
    let mut same = pc("p", 10);
    same["description"] = json!("changed");
    same["globalDefault"] = json!(true);
    r.prepare_for_update(&mut same, &old);
    assert!(r.validate_update(&same, &old).is_empty());
    let mut changed = pc("p", 11);
    changed["preemptionPolicy"] = json!("Never");
    r.prepare_for_update(&mut changed, &old);
    let errs: Vec<String> = r
        .validate_update(&changed, &old)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        [
            "value: Forbidden: may not be changed in an update.",
            "preemptionPolicy: Invalid value: \"Never\": field is immutable",
        ]
    );
}

#[test]
fn system_classes_cannot_be_deleted_and_table() {
    let r = pcs();
    assert_eq!(
        r.strategy.protected_from_deletion("system-node-critical"),
        Some("this is a system priority class and cannot be deleted")
    );
    assert_eq!(r.strategy.protected_from_deletion("high"), None);
    let names: Vec<Value> = r
        .strategy
        .table_columns()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(
        names,
        ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
    );
    let now = api::meta::parse_time("2026-12-02T16:00:00Z").unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let obj = json!({"metadata": {"name": "system-node-critical", "creationTimestamp": "2026-12-01T16:00:00Z"},
        "value": 2_000_001_000, "preemptionPolicy": "PreemptLowerPriority"});
    assert_eq!(
        r.strategy.table_cells(&obj, now),
        [
            json!("system-node-critical"),
            json!(2_000_001_000),
            json!(false),
            json!("24h"),
            json!("PreemptLowerPriority")
        ]
    );
}

/// A fixed set of priority classes.
struct Classes(Vec<Value>);

impl Objects for Classes {
    fn list(&self, group: &str, plural: &str) -> Vec<Arc<Value>> {
        assert_eq!((group, plural), ("scheduling.k8s.io", "priorityclasses"));
        self.0.iter().cloned().map(Arc::new).collect()
    }
    fn get(&self, _: &str, _: &str, _: Option<&str>, name: &str) -> Option<Arc<Value>> {
        self.0
            .iter()
            .find(|pc| api::meta::name(pc) == Some(name))
            .cloned()
            .map(Arc::new)
    }
}

fn class(name: &str, value: i64, global: bool, policy: &str) -> Value {
    json!({"metadata": {"name": name}, "value": value, "globalDefault": global, "preemptionPolicy": policy})
}

fn pod(spec: Value) -> Value {
    let mut p = json!({"metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "i"}]}});
    if let (Some(s), Some(extra)) = (p["spec"].as_object_mut(), spec.as_object()) {
        s.extend(extra.clone());
    }
    p
}

fn admit(classes: &Classes, mut p: Value) -> Result<Value, Forbidden> {
    let pods = builtin::find("", "pods").map(|r| r.strategy.clone());
    let Some(pods) = pods else { panic!("no pods") };
    pods.admit(&mut p, None, classes).map(|()| p)
}

#[test]
fn pod_priority_comes_from_its_class() {
    let classes = Classes(vec![
        class(
            "system-node-critical",
            2_000_001_000,
            false,
            "PreemptLowerPriority",
        ),
        class("batch", 100, false, "Never"),
    ]);
    // No class, no default class: 0 and PreemptLowerPriority, as before.
    let p = admit(&classes, pod(json!({}))).unwrap_or_default();
    assert_eq!(
        (&p["spec"]["priority"], &p["spec"]["preemptionPolicy"]),
        (&json!(0), &json!("PreemptLowerPriority"))
    );
    assert_eq!(p["spec"].get("priorityClassName"), None);
    let p = admit(&classes, pod(json!({"priorityClassName": "batch"}))).unwrap_or_default();
    assert_eq!(
        (&p["spec"]["priority"], &p["spec"]["preemptionPolicy"]),
        (&json!(100), &json!("Never"))
    );
    let p = admit(
        &classes,
        pod(json!({"priorityClassName": "system-node-critical"})),
    )
    .unwrap_or_default();
    assert_eq!(p["spec"]["priority"], json!(2_000_001_000));
    assert_eq!(
        admit(&classes, pod(json!({"priorityClassName": "foo"}))),
        Err(Forbidden("no PriorityClass with name foo was found".into()))
    );
    // A priority or policy the client set must be the computed one.
    assert!(admit(
        &classes,
        pod(json!({"priorityClassName": "batch", "priority": 100}))
    )
    .is_ok());
    assert_eq!(
        admit(&classes, pod(json!({"priority": 5}))),
        Err(Forbidden("the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name".into()))
    );
    assert_eq!(
        admit(&classes, pod(json!({"priorityClassName": "batch", "preemptionPolicy": "PreemptLowerPriority"}))),
        Err(Forbidden("the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name".into()))
    );
    // An update keeps what the create set.
    let pods = builtin::find("", "pods").map(|r| r.strategy.clone());
    let mut upd = pod(json!({"priorityClassName": "gone"}));
    let old = upd.clone();
    assert!(pods.is_some_and(|s| s.admit(&mut upd, Some(&old), &classes).is_ok()));
}

#[test]
fn the_lowest_global_default_class_applies_to_pods_without_one() {
    let classes = Classes(vec![
        class("low", 10, true, "Never"),
        class("lower", 5, true, "PreemptLowerPriority"),
        class("other", 1, false, "PreemptLowerPriority"),
    ]);
    let p = admit(&classes, pod(json!({}))).unwrap_or_default();
    assert_eq!(p["spec"]["priorityClassName"], json!("lower"));
    assert_eq!(p["spec"]["priority"], json!(5));
    // A second global default is refused at admission, but a default may be updated.
    let r = pcs();
    let mut new = class("third", 1, true, "Never");
    assert_eq!(
        r.strategy.admit(&mut new, None, &classes),
        Err(Forbidden(
            "PriorityClass lower is already marked as default. Only one default can exist".into()
        ))
    );
    let mut lower = class("lower", 5, true, "PreemptLowerPriority");
    let old = lower.clone();
    assert!(r.strategy.admit(&mut lower, Some(&old), &classes).is_ok());
    let mut not_default = class("x", 1, false, "Never");
    assert!(r.strategy.admit(&mut not_default, None, &classes).is_ok());
}
