//! The Node authorizer (`plugin/pkg/auth/authorizer/node/node_authorizer.go`): what a kubelet
//! (`system:node:<name>` in `system:nodes`) may do.
//!
//! Objects a kubelet reads only for its pods — secrets, configmaps, persistent volume claims —
//! may be read one at a time, and only when a pod bound to the node (`spec.nodeName`)
//! references them (volumes, projected sources, `env`/`envFrom`, image pull secrets); a
//! service-account token may be requested only for the account of such a pod. Leases only in
//! `kube-node-lease` under the node's own name, CSINodes only under it. Everything else is
//! decided by the static rules of the bootstrap `system:node` role (upstream's `NodeRules`).
//!
//! Upstream keeps a graph of pods, nodes and the objects they reference, updated by informers;
//! here the same relationships are read from the watch cache at each decision (the pods of one
//! node are scanned: linear in the number of pods, enough for a sandbox). Persistent volumes,
//! volume attachments, resource claims and slices are not covered: their requests fall to the
//! static rules. What a node may then write of the objects it can reach is NodeRestriction's
//! ([`crate::admission::node_restriction`]): only its own Node, Lease, pods and their status.

use serde_json::Value;

use super::rbac::{Attributes, Decision, Rule};
use crate::authn::UserInfo;
use crate::registry::Objects;

/// `user.NodesGroup`.
pub const NODES_GROUP: &str = "system:nodes";
const NODE_PREFIX: &str = "system:node:";

/// The node a user is (`nodeidentifier.NodeIdentity`): named `system:node:<name>` AND in
/// `system:nodes`, both required. The one definition the Node authorizer and NodeRestriction
/// share; `Some("")` for the bare prefix (a node, but not which one).
pub fn node_identity(user: &UserInfo) -> Option<&str> {
    let name = user.username.strip_prefix(NODE_PREFIX)?;
    user.in_group(NODES_GROUP).then_some(name)
}

fn deny(reason: String) -> Decision {
    Decision {
        allowed: false,
        reason,
    }
}

fn allow() -> Decision {
    Decision {
        allowed: true,
        reason: String::new(),
    }
}

/// The decision for a node's request; `None` when `a` is not a node's (no opinion).
pub fn authorize(objects: &dyn Objects, a: &Attributes) -> Option<Decision> {
    let node = node_identity(&a.user)?;
    if node.is_empty() {
        return Some(deny("unknown node".to_string()));
    }
    if a.resource_request {
        match (
            a.api_group.as_str(),
            a.resource.as_str(),
            a.subresource.as_str(),
        ) {
            ("", "secrets", "") => return Some(read_referenced(objects, node, a, Ref::Secret)),
            ("", "configmaps", "") => {
                return Some(read_referenced(objects, node, a, Ref::ConfigMap))
            }
            ("", "persistentvolumeclaims", "") => {
                return Some(read_referenced(objects, node, a, Ref::Claim))
            }
            ("", "serviceaccounts", "token") => {
                if a.verb != "create" {
                    return Some(deny(
                        "can only create tokens for individual service accounts".into(),
                    ));
                }
                return Some(read_referenced(objects, node, a, Ref::ServiceAccount));
            }
            ("coordination.k8s.io", "leases", "") => return Some(lease(node, a)),
            ("storage.k8s.io", "csinodes", "") if a.verb != "create" && a.name != node => {
                return Some(deny(
                    "can only access CSINode with the same name as the requesting node".into(),
                ));
            }
            _ => {}
        }
    }
    if node_rules().iter().any(|r| r.allows(a)) {
        return Some(allow());
    }
    None
}

/// The rules of the bootstrap `system:node` ClusterRole.
fn node_rules() -> &'static [Rule] {
    static RULES: std::sync::OnceLock<Vec<Rule>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        crate::bootstrap::rbac::policy()
            .cluster_roles
            .iter()
            .find(|r| r["metadata"]["name"] == "system:node")
            .and_then(|r| r["rules"].as_array())
            .map(|rules| rules.iter().map(Rule::from_json).collect())
            .unwrap_or_default()
    })
}

fn lease(node: &str, a: &Attributes) -> Decision {
    if !matches!(
        a.verb.as_str(),
        "get" | "create" | "update" | "patch" | "delete"
    ) {
        return deny("can only get, create, update, patch, or delete a node lease".into());
    }
    if a.namespace != "kube-node-lease" {
        return deny("can only access leases in the kube-node-lease namespace".into());
    }
    if a.verb != "create" && a.name != node {
        return deny("can only access node lease with the same name as the requesting node".into());
    }
    allow()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ref {
    Secret,
    ConfigMap,
    Claim,
    ServiceAccount,
}

fn read_referenced(objects: &dyn Objects, node: &str, a: &Attributes, kind: Ref) -> Decision {
    let verbs_ok = match kind {
        Ref::ServiceAccount => true,
        Ref::Claim => a.verb == "get",
        Ref::Secret | Ref::ConfigMap => matches!(a.verb.as_str(), "get" | "list" | "watch"),
    };
    if !verbs_ok || a.name.is_empty() {
        return deny("can only get individual resources of this type".into());
    }
    let related = objects
        .pods_on_node(&a.namespace, node)
        .iter()
        .any(|pod| references(pod, kind, &a.name));
    if related {
        allow()
    } else {
        deny(format!(
            "no relationship found between node '{node}' and this object"
        ))
    }
}

/// Whether `pod` references the object `name` of `kind` (`VisitPodSecretNames` and friends).
fn references(pod: &Value, kind: Ref, name: &str) -> bool {
    let spec = &pod["spec"];
    if kind == Ref::ServiceAccount {
        return spec["serviceAccountName"] == name;
    }
    let volumes = spec["volumes"].as_array().into_iter().flatten();
    for v in volumes {
        let direct = match kind {
            Ref::Secret => &v["secret"]["secretName"],
            Ref::ConfigMap => &v["configMap"]["name"],
            Ref::Claim => &v["persistentVolumeClaim"]["claimName"],
            Ref::ServiceAccount => &Value::Null,
        };
        if direct == name {
            return true;
        }
        let sources = v["projected"]["sources"].as_array().into_iter().flatten();
        for s in sources {
            let projected = match kind {
                Ref::Secret => &s["secret"]["name"],
                Ref::ConfigMap => &s["configMap"]["name"],
                _ => &Value::Null,
            };
            if projected == name {
                return true;
            }
        }
    }
    if kind == Ref::Secret
        && spec["imagePullSecrets"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["name"] == name)
    {
        return true;
    }
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| spec[*k].as_array().into_iter().flatten());
    let (key_ref, from) = match kind {
        Ref::Secret => ("secretKeyRef", "secretRef"),
        Ref::ConfigMap => ("configMapKeyRef", "configMapRef"),
        _ => return false,
    };
    for c in containers {
        let env = c["env"].as_array().into_iter().flatten();
        if env
            .into_iter()
            .any(|e| e["valueFrom"][key_ref]["name"] == name)
        {
            return true;
        }
        let env_from = c["envFrom"].as_array().into_iter().flatten();
        if env_from.into_iter().any(|e| e[from]["name"] == name) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    struct Pods(Vec<Arc<Value>>);

    impl Objects for Pods {
        fn list(&self, group: &str, plural: &str) -> Vec<Arc<Value>> {
            if group.is_empty() && plural == "pods" {
                self.0.clone()
            } else {
                Vec::new()
            }
        }

        fn get(&self, _: &str, _: &str, _: Option<&str>, _: &str) -> Option<Arc<Value>> {
            None
        }
    }

    fn node_attrs(verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> Attributes {
        Attributes {
            user: UserInfo {
                username: "system:node:n1".into(),
                groups: vec![NODES_GROUP.into(), "system:authenticated".into()],
                ..Default::default()
            },
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            namespace: ns.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn pods() -> Pods {
        Pods(vec![
            Arc::new(
                json!({"metadata": {"namespace": "a", "name": "p"}, "spec": {
                "nodeName": "n1", "serviceAccountName": "sa",
                "volumes": [{"name": "v", "secret": {"secretName": "mounted"}},
                            {"name": "w", "projected": {"sources": [{"configMap": {"name": "proj"}}]}}],
                "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "envsecret"}}]}]}}),
            ),
            Arc::new(
                json!({"metadata": {"namespace": "a", "name": "q"}, "spec": {
                "nodeName": "n2",
                "volumes": [{"name": "v", "secret": {"secretName": "elsewhere"}}],
                "containers": [{"name": "c"}]}}),
            ),
        ])
    }

    #[test]
    fn a_node_reads_only_what_its_pods_reference() {
        let p = pods();
        let ok = |a: Attributes| authorize(&p, &a).map(|d| d.allowed);
        assert_eq!(
            ok(node_attrs("get", "", "secrets", "a", "mounted")),
            Some(true)
        );
        assert_eq!(
            ok(node_attrs("get", "", "secrets", "a", "envsecret")),
            Some(true)
        );
        assert_eq!(
            ok(node_attrs("get", "", "configmaps", "a", "proj")),
            Some(true)
        );
        assert_eq!(
            ok(node_attrs("get", "", "secrets", "a", "elsewhere")),
            Some(false)
        );
        assert_eq!(
            ok(node_attrs("get", "", "secrets", "b", "mounted")),
            Some(false)
        );
        assert_eq!(ok(node_attrs("list", "", "secrets", "a", "")), Some(false));
        let mut token = node_attrs("create", "", "serviceaccounts", "a", "sa");
        token.subresource = "token".into();
        assert_eq!(ok(token), Some(true));
        let d = authorize(&p, &node_attrs("get", "", "secrets", "a", "elsewhere")).unwrap();
        assert_eq!(
            d.reason,
            "no relationship found between node 'n1' and this object"
        );
    }

    #[test]
    fn leases_are_the_nodes_own_and_the_rest_follows_the_node_rules() {
        let p = pods();
        let ok = |a: Attributes| authorize(&p, &a).map(|d| d.allowed);
        let lease = "coordination.k8s.io";
        assert_eq!(
            ok(node_attrs(
                "update",
                lease,
                "leases",
                "kube-node-lease",
                "n1"
            )),
            Some(true)
        );
        assert_eq!(
            ok(node_attrs(
                "update",
                lease,
                "leases",
                "kube-node-lease",
                "n2"
            )),
            Some(false)
        );
        assert_eq!(
            ok(node_attrs("update", lease, "leases", "default", "n1")),
            Some(false)
        );
        assert_eq!(ok(node_attrs("list", "", "pods", "", "")), Some(true));
        assert_eq!(ok(node_attrs("get", "", "nodes", "", "n2")), Some(true));
        assert_eq!(ok(node_attrs("delete", "", "namespaces", "", "a")), None);
        // Not a node without the group.
        let mut a = node_attrs("list", "", "pods", "", "");
        a.user.groups.clear();
        assert_eq!(authorize(&p, &a), None);
    }
}
