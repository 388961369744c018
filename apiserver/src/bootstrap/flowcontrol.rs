//! The API Priority and Fairness configuration a kube-apiserver 1.33 creates at start (upstream's
//! `staging/src/k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap/default.go`): the mandatory
//! PriorityLevelConfigurations and FlowSchemas (`exempt`, `catch-all`) and the suggested ones,
//! in their defaulted form, each annotated `apf.kubernetes.io/autoupdate-spec: "true"` as
//! upstream's config-producer writes them.

use serde_json::{json, Value};

/// The annotation with which upstream's ensurer marks objects it keeps up to date.
pub const AUTOUPDATE_SPEC_ANNOTATION: (&str, &str) = ("apf.kubernetes.io/autoupdate-spec", "true");

/// Whether `name` is one of the mandatory objects (its spec is fixed).
pub fn is_mandatory(name: &str) -> bool {
    matches!(name, "exempt" | "catch-all")
}

fn meta(name: &str) -> Value {
    json!({
        "name": name,
        "annotations": { AUTOUPDATE_SPEC_ANNOTATION.0: AUTOUPDATE_SPEC_ANNOTATION.1 },
    })
}

fn limited(name: &str, shares: i64, lendable: i64, queuing: Option<(i64, i64, i64)>) -> Value {
    let limit_response = match queuing {
        Some((queues, hand_size, queue_length_limit)) => json!({
            "type": "Queue",
            "queuing": {"queues": queues, "handSize": hand_size, "queueLengthLimit": queue_length_limit},
        }),
        None => json!({"type": "Reject"}),
    };
    json!({
        "metadata": meta(name),
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "lendablePercent": lendable,
                "limitResponse": limit_response,
            },
        },
    })
}

/// Every bootstrap PriorityLevelConfiguration: mandatory first, then the suggested ones.
pub fn priority_levels() -> Vec<Value> {
    vec![
        json!({
            "metadata": meta("exempt"),
            "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}},
        }),
        limited("catch-all", 5, 0, None),
        limited("system", 30, 33, Some((64, 6, 50))),
        limited("node-high", 40, 25, Some((64, 6, 50))),
        limited("leader-election", 10, 0, Some((16, 4, 50))),
        limited("workload-high", 40, 50, Some((128, 6, 50))),
        limited("workload-low", 100, 90, Some((128, 6, 50))),
        limited("global-default", 20, 50, Some((128, 6, 50))),
    ]
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}

fn kube_system_sa(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": "kube-system"}})
}

fn resource_rule(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    namespaces: &[&str],
    cluster_scope: bool,
) -> Value {
    let mut r = json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "namespaces": namespaces});
    if cluster_scope {
        r["clusterScope"] = json!(true);
    }
    r
}

/// Every verb on every resource and non-resource URL (`ruleRscAll`, `ruleNonRscAll`).
fn all_rules(subjects: Vec<Value>) -> Value {
    json!({
        "subjects": subjects,
        "resourceRules": [resource_rule(&["*"], &["*"], &["*"], &["*"], true)],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    })
}

fn flow_schema(
    name: &str,
    level: &str,
    precedence: i64,
    distinguisher: Option<&str>,
    rules: Value,
) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [rules],
    });
    if let Some(d) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": d});
    }
    json!({"metadata": meta(name), "spec": spec})
}

const GET_CREATE_UPDATE: &[&str] = &["get", "create", "update"];

/// Every bootstrap FlowSchema: mandatory first, then the suggested ones.
pub fn flow_schemas() -> Vec<Value> {
    let everyone = || {
        vec![
            group("system:unauthenticated"),
            group("system:authenticated"),
        ]
    };
    vec![
        flow_schema(
            "exempt",
            "exempt",
            1,
            None,
            all_rules(vec![group("system:masters")]),
        ),
        flow_schema(
            "catch-all",
            "catch-all",
            10000,
            Some("ByUser"),
            all_rules(everyone()),
        ),
        flow_schema(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            all_rules(vec![group("system:nodes")]),
        ),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            json!({
                "subjects": [group("system:nodes")],
                "resourceRules": [
                    resource_rule(&["*"], &[""], &["nodes", "nodes/status"], &["*"], true),
                    resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], &["*"], false),
                ],
            }),
        ),
        flow_schema(
            "probes",
            "exempt",
            2,
            None,
            json!({
                "subjects": everyone(),
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}],
            }),
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            json!({
                "subjects": [user("system:kube-controller-manager"), user("system:kube-scheduler"), kube_system_sa("*")],
                "resourceRules": [
                    resource_rule(GET_CREATE_UPDATE, &[""], &["endpoints", "configmaps"], &["kube-system"], false),
                    resource_rule(GET_CREATE_UPDATE, &["coordination.k8s.io"], &["leases"], &["*"], false),
                ],
            }),
        ),
        flow_schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            json!({
                "subjects": [user("system:kube-controller-manager"), kube_system_sa("endpoint-controller")],
                "resourceRules": [
                    resource_rule(&["get", "create", "update"], &[""], &["endpoints"], &["*"], false),
                ],
            }),
        ),
        flow_schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            json!({
                "subjects": [kube_system_sa("*")],
                "resourceRules": [
                    resource_rule(GET_CREATE_UPDATE, &[""], &["endpoints", "configmaps"], &["*"], false),
                    resource_rule(GET_CREATE_UPDATE, &["coordination.k8s.io"], &["leases"], &["*"], false),
                ],
            }),
        ),
        flow_schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            all_rules(vec![user("system:kube-controller-manager")]),
        ),
        flow_schema(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            all_rules(vec![user("system:kube-scheduler")]),
        ),
        flow_schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            all_rules(vec![kube_system_sa("*")]),
        ),
        flow_schema(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            all_rules(vec![group("system:serviceaccounts")]),
        ),
        flow_schema(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            all_rules(everyone()),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtin;

    #[test]
    fn every_bootstrap_object_is_valid_and_already_defaulted() {
        for (plural, objects) in [
            ("prioritylevelconfigurations", priority_levels()),
            ("flowschemas", flow_schemas()),
        ] {
            let Some(r) = builtin::find("flowcontrol.apiserver.k8s.io", plural) else {
                panic!("{plural} not served");
            };
            for obj in objects {
                let mut defaulted = obj.clone();
                r.prepare_for_create(&mut defaulted);
                assert_eq!(defaulted["spec"], obj["spec"], "{obj}");
                let errs = r.validate_create(&defaulted);
                assert!(errs.is_empty(), "{}: {errs:?}", obj["metadata"]["name"]);
            }
        }
    }

    #[test]
    fn every_flow_schema_names_a_bootstrap_level() {
        let levels: Vec<Value> = priority_levels()
            .into_iter()
            .map(|p| p["metadata"]["name"].clone())
            .collect();
        for fs in flow_schemas() {
            assert!(
                levels.contains(&fs["spec"]["priorityLevelConfiguration"]["name"]),
                "{fs}"
            );
        }
        assert_eq!(flow_schemas().len(), 13);
        assert_eq!(priority_levels().len(), 8);
    }
}
