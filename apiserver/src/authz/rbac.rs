//! The RBAC authorizer over the stored RBAC objects, as upstream's
//! (`plugin/pkg/auth/authorizer/rbac/rbac.go` with `pkg/apis/rbac/v1/evaluation_helpers.go` and
//! `pkg/registry/rbac/validation/rule.go`): a request is allowed when a rule of a role bound to
//! the user (by user name, group, or service account) allows it; ClusterRoleBindings apply
//! everywhere, RoleBindings in their namespace. A ClusterRole with an `aggregationRule` has the
//! rules of the ClusterRoles its selectors match (what the clusterrole-aggregation controller
//! writes into it), so a role aggregated after start-up counts at once.
//!
//! Reads go through [`Objects`] (the watch cache); nothing here writes.

use serde_json::Value;

use crate::authn::identity::UserInfo;
use crate::registry::Objects;

const RBAC: &str = "rbac.authorization.k8s.io";

/// What a request does (`authorizer.Attributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who.
    pub user: UserInfo,
    /// The verb (`get`, `list`, …, or an HTTP verb in lower case for non-resource requests).
    pub verb: String,
    /// Whether this is a resource request (else a non-resource URL).
    pub resource_request: bool,
    /// Namespace ("" for cluster scope or all namespaces).
    pub namespace: String,
    /// API group.
    pub api_group: String,
    /// Resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Object name.
    pub name: String,
    /// Non-resource URL path.
    pub path: String,
}

/// A policy rule (`rbacv1.PolicyRule`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    /// Verbs.
    pub verbs: Vec<String>,
    /// API groups.
    pub api_groups: Vec<String>,
    /// Resources (`pods`, `pods/log`, `*`, `*/scale`).
    pub resources: Vec<String>,
    /// Resource names.
    pub resource_names: Vec<String>,
    /// Non-resource URLs.
    pub non_resource_urls: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl Rule {
    /// A rule from its JSON.
    pub fn from_json(v: &Value) -> Self {
        Rule {
            verbs: strings(v.get("verbs")),
            api_groups: strings(v.get("apiGroups")),
            resources: strings(v.get("resources")),
            resource_names: strings(v.get("resourceNames")),
            non_resource_urls: strings(v.get("nonResourceURLs")),
        }
    }

    /// `RuleAllows`.
    pub fn allows(&self, a: &Attributes) -> bool {
        let has = |list: &[String], want: &str| list.iter().any(|x| x == "*" || x == want);
        if !has(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|u| {
                u == "*"
                    || *u == a.path
                    || u.strip_suffix('*')
                        .is_some_and(|prefix| a.path.starts_with(prefix))
            });
        }
        if !has(&self.api_groups, &a.api_group) {
            return false;
        }
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let resource_ok = self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource))
        });
        resource_ok && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }
}

/// The outcome of [`authorize`]: allowed or not, the reason, and evaluation errors (missing
/// roles), as upstream's decision, reason and error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Whether some rule allows the request.
    pub allowed: bool,
    /// `RBAC: allowed by …`, or the evaluation errors of a refusal (`RBAC: …`), else empty.
    pub reason: String,
}

/// Whether `subject` of a binding in `namespace` ("" for a ClusterRoleBinding) names `user`
/// (`appliesToUser`).
fn applies_to(user: &UserInfo, subject: &Value, namespace: &str) -> bool {
    let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match s("kind") {
        "User" => user.username == s("name"),
        "Group" => user.in_group(s("name")),
        "ServiceAccount" => {
            let ns = if s("namespace").is_empty() {
                namespace
            } else {
                s("namespace")
            };
            !ns.is_empty()
                && user.username == crate::authn::token::service_account_username(ns, s("name"))
        }
        _ => false,
    }
}

/// `describeSubject`: `User "alice"`, `Group "g"`, `ServiceAccount "name/namespace"`.
fn describe_subject(subject: &Value, namespace: &str) -> String {
    let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match s("kind") {
        "ServiceAccount" => {
            let ns = if s("namespace").is_empty() {
                namespace
            } else {
                s("namespace")
            };
            format!("ServiceAccount \"{}/{}\"", s("name"), ns)
        }
        kind => format!("{kind} {}", api::validation::go_quote(s("name"))),
    }
}

/// Whether a label selector (JSON) matches `labels`; an invalid selector matches nothing (the
/// aggregation controller skips it).
fn labels_match(selector: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    let labels: std::collections::BTreeMap<String, String> = labels
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect();
    api::labels::from_label_selector_json(selector).is_ok_and(|s| s.matches(&labels))
}

/// The rules of a ClusterRole: its own, or with an aggregation rule those of every ClusterRole
/// its selectors pick (transitively; each role once).
fn cluster_role_rules(objects: &dyn Objects, role: &Value) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut stack = vec![role.clone()];
    let all = objects.list(RBAC, "clusterroles");
    // Bounded: every role is expanded at most once.
    while let Some(r) = stack.pop() {
        let name = api::meta::name(&r).unwrap_or("").to_string();
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        let selectors = r
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array);
        match selectors {
            Some(sels) if !sels.is_empty() => {
                for other in &all {
                    let empty = serde_json::Map::new();
                    let labels = other
                        .pointer("/metadata/labels")
                        .and_then(Value::as_object)
                        .unwrap_or(&empty);
                    if sels.iter().any(|s| labels_match(s, labels)) {
                        stack.push(Value::clone(other));
                    }
                }
            }
            _ => {
                for rule in r
                    .get("rules")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let rule = Rule::from_json(rule);
                    if !out.contains(&rule) {
                        out.push(rule);
                    }
                }
            }
        }
    }
    out
}

/// The rules of a binding's roleRef, or the error upstream reports for a missing role.
fn role_ref_rules(
    objects: &dyn Objects,
    binding: &Value,
    namespace: &str,
) -> Result<Vec<Rule>, String> {
    let kind = binding
        .pointer("/roleRef/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = binding
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match kind {
        "ClusterRole" => objects
            .get(RBAC, "clusterroles", None, name)
            .map(|r| cluster_role_rules(objects, &r))
            .ok_or_else(|| format!("clusterrole.rbac.authorization.k8s.io \"{name}\" not found")),
        "Role" => objects
            .get(RBAC, "roles", Some(namespace), name)
            .map(|r| {
                r.get("rules")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(Rule::from_json)
                    .collect()
            })
            .ok_or_else(|| format!("role.rbac.authorization.k8s.io \"{name}\" not found")),
        other => Err(format!("unsupported role reference kind: {other:?}")),
    }
}

/// One binding that applies to the user: how to describe it, and its role's rules.
struct Applied {
    description: String,
    rules: Result<Vec<Rule>, String>,
}

/// Every binding that applies to `user` in `namespace` ("" = cluster bindings only): the
/// ClusterRoleBindings first, then the namespace's RoleBindings (`VisitRulesFor`).
fn applied(objects: &dyn Objects, user: &UserInfo, namespace: &str) -> Vec<Applied> {
    let mut out = Vec::new();
    for b in objects.list(RBAC, "clusterrolebindings") {
        let subjects = b.get("subjects").and_then(Value::as_array);
        let Some(subject) = subjects
            .into_iter()
            .flatten()
            .find(|s| applies_to(user, s, ""))
        else {
            continue;
        };
        let role = b
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        out.push(Applied {
            description: format!(
                "ClusterRoleBinding {} of ClusterRole {} to {}",
                api::validation::go_quote(api::meta::name(&b).unwrap_or("")),
                api::validation::go_quote(role),
                describe_subject(subject, "")
            ),
            rules: role_ref_rules(objects, &b, ""),
        });
    }
    if namespace.is_empty() {
        return out;
    }
    for b in objects.list(RBAC, "rolebindings") {
        if api::meta::namespace(&b) != Some(namespace) {
            continue;
        }
        let subjects = b.get("subjects").and_then(Value::as_array);
        let Some(subject) = subjects
            .into_iter()
            .flatten()
            .find(|s| applies_to(user, s, namespace))
        else {
            continue;
        };
        let kind = b
            .pointer("/roleRef/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        let role = b
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        out.push(Applied {
            description: format!(
                "RoleBinding \"{}/{namespace}\" of {kind} {} to {}",
                api::meta::name(&b).unwrap_or(""),
                api::validation::go_quote(role),
                describe_subject(subject, namespace)
            ),
            rules: role_ref_rules(objects, &b, namespace),
        });
    }
    out
}

/// `RBACAuthorizer.Authorize`.
pub fn authorize(objects: &dyn Objects, a: &Attributes) -> Decision {
    let mut errors = Vec::new();
    for b in applied(objects, &a.user, &a.namespace) {
        match b.rules {
            Ok(rules) => {
                if rules.iter().any(|r| r.allows(a)) {
                    return Decision {
                        allowed: true,
                        reason: format!("RBAC: allowed by {}", b.description),
                    };
                }
            }
            Err(e) => errors.push(e),
        }
    }
    let reason = match errors.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    };
    Decision {
        allowed: false,
        reason,
    }
}

/// `RBACAuthorizer.RulesFor`: every rule of the roles bound to `user` in `namespace`, and the
/// evaluation errors (then the list is incomplete).
pub fn rules_for(
    objects: &dyn Objects,
    user: &UserInfo,
    namespace: &str,
) -> (Vec<Rule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for b in applied(objects, user, namespace) {
        match b.rules {
            Ok(r) => rules.extend(r),
            Err(e) => errors.push(e),
        }
    }
    (rules, errors)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    /// The bootstrap policy as the objects view.
    struct Policy(Vec<(String, Arc<Value>)>);

    impl Policy {
        fn bootstrap() -> Self {
            let p = crate::bootstrap::rbac::policy();
            let mut all = Vec::new();
            for (plural, objs) in [
                ("clusterroles", &p.cluster_roles),
                ("clusterrolebindings", &p.cluster_role_bindings),
                ("roles", &p.roles),
                ("rolebindings", &p.role_bindings),
            ] {
                for o in objs.iter() {
                    all.push((plural.to_string(), Arc::new(o.clone())));
                }
            }
            Policy(all)
        }
    }

    impl Objects for Policy {
        fn list(&self, _group: &str, plural: &str) -> Vec<Arc<Value>> {
            self.0
                .iter()
                .filter(|(p, _)| p == plural)
                .map(|(_, o)| o.clone())
                .collect()
        }
        fn get(&self, g: &str, plural: &str, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
            self.list(g, plural)
                .into_iter()
                .find(|o| api::meta::name(o) == Some(name) && api::meta::namespace(o) == ns)
        }
    }

    fn attrs(user: UserInfo, verb: &str, ns: &str, group: &str, resource: &str) -> Attributes {
        Attributes {
            user,
            verb: verb.into(),
            resource_request: true,
            namespace: ns.into(),
            api_group: group.into(),
            resource: resource.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_bootstrap_policy_decides_as_a_real_cluster() {
        let p = Policy::bootstrap();
        let masters = UserInfo {
            username: "x".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        let d = authorize(&p, &attrs(masters, "delete", "ns", "apps", "deployments"));
        assert!(d.allowed);
        assert_eq!(
            d.reason,
            r#"RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters""#
        );
        let sa = UserInfo::service_account("default", "default");
        assert!(!authorize(&p, &attrs(sa.clone(), "list", "default", "", "secrets")).allowed);
        assert!(!authorize(&p, &attrs(sa.clone(), "list", "default", "", "pods")).allowed);
        // system:basic-user and system:discovery apply to every authenticated user.
        let ssar = attrs(
            sa.clone(),
            "create",
            "",
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
        );
        assert!(authorize(&p, &ssar).allowed);
        let api = Attributes {
            user: sa,
            verb: "get".into(),
            path: "/api".into(),
            ..Default::default()
        };
        assert!(authorize(&p, &api).allowed);
    }

    #[test]
    fn role_bindings_aggregation_and_missing_roles() {
        let mut p = Policy::bootstrap();
        let rb = json!({
            "metadata": {"name": "sa-edit", "namespace": "team"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "builder"}],
        });
        p.0.push(("rolebindings".into(), Arc::new(rb)));
        let sa = UserInfo::service_account("team", "builder");
        let d = authorize(
            &p,
            &attrs(sa.clone(), "create", "team", "apps", "deployments"),
        );
        assert!(d.allowed, "{d:?}");
        assert_eq!(
            d.reason,
            r#"RBAC: allowed by RoleBinding "sa-edit/team" of ClusterRole "edit" to ServiceAccount "builder/team""#
        );
        assert!(
            !authorize(
                &p,
                &attrs(sa.clone(), "create", "other", "apps", "deployments")
            )
            .allowed
        );

        // A new role aggregated into `view` counts at once.
        let extra = json!({
            "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}],
        });
        p.0.push(("clusterroles".into(), Arc::new(extra)));
        assert!(
            authorize(
                &p,
                &attrs(sa.clone(), "get", "team", "example.com", "widgets")
            )
            .allowed
        );

        let dangling = json!({
            "metadata": {"name": "dangling", "namespace": "team"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "nope"},
            "subjects": [{"kind": "User", "name": "u"}],
        });
        p.0.push(("rolebindings".into(), Arc::new(dangling)));
        let u = UserInfo {
            username: "u".into(),
            ..Default::default()
        };
        let d = authorize(&p, &attrs(u, "get", "team", "", "pods"));
        assert!(!d.allowed);
        assert_eq!(
            d.reason,
            r#"RBAC: role.rbac.authorization.k8s.io "nope" not found"#
        );
    }

    #[test]
    fn rule_matching_follows_upstream() {
        let r = Rule::from_json(&json!({
            "verbs": ["get"], "apiGroups": [""], "resources": ["*/scale", "pods"], "resourceNames": ["a"],
        }));
        let mut a = attrs(UserInfo::default(), "get", "ns", "", "deployments");
        a.subresource = "scale".into();
        a.name = "a".into();
        assert!(r.allows(&a));
        a.name = "b".into();
        assert!(!r.allows(&a));
        let n = Rule::from_json(&json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]}));
        let mut a = Attributes {
            verb: "get".into(),
            path: "/healthz/etcd".into(),
            ..Default::default()
        };
        assert!(n.allows(&a));
        a.path = "/version".into();
        assert!(!n.allows(&a));
    }
}
