//! The RBAC authorizer over the stored RBAC objects, as upstream's
//! (`plugin/pkg/auth/authorizer/rbac/rbac.go` with `pkg/apis/rbac/v1/evaluation_helpers.go` and
//! `pkg/registry/rbac/validation/rule.go`): a request is allowed when a rule of a role bound to
//! the user (by user name, group, or service account) allows it; ClusterRoleBindings apply
//! everywhere, RoleBindings in their namespace. A ClusterRole with an `aggregationRule` has the
//! rules of the ClusterRoles its selectors match (what the clusterrole-aggregation controller
//! writes into it), so a role aggregated after start-up counts at once.
//!
//! The bindings that apply to a user come from a [`RuleResolver`]: the server's, compiled from
//! the watch cache and kept current ([`super::policy_cache`]), or one compiled from an
//! [`Objects`] view on the spot. Nothing here writes.

use std::sync::Arc;

use serde_json::Value;

use super::rule_resolver::RuleResolver;
use crate::authn::identity::UserInfo;
use crate::registry::Objects;

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
    /// The field selector the request is narrowed to (`GetFieldSelector`): its requirements and
    /// why some or all were not understood ([`super::selectors`]). The authorizers here ignore
    /// it, as upstream's RBAC does.
    pub field_selector: super::selectors::FieldSelector,
    /// The label selector likewise (`GetLabelSelector`).
    pub label_selector: super::selectors::LabelSelector,
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
        // `resource` or `resource/subresource`, `*`, or `*/subresource`: compared in place.
        let resource_ok = self.resources.iter().any(|r| {
            if r == "*" {
                return true;
            }
            if a.subresource.is_empty() {
                return *r == a.resource;
            }
            let Some((resource, sub)) = r.split_once('/') else {
                return false;
            };
            sub == a.subresource && (resource == a.resource || resource == "*")
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

/// The resolver for `objects`: a server's, kept current ([`super::policy_cache`]), or one
/// compiled from what `objects` holds now.
fn resolver(objects: &dyn Objects) -> Arc<RuleResolver> {
    objects
        .rule_resolver()
        .unwrap_or_else(|| Arc::new(RuleResolver::from_objects(objects)))
}

/// `RBACAuthorizer.Authorize`.
pub fn authorize(objects: &dyn Objects, a: &Attributes) -> Decision {
    let mut errors: Vec<String> = Vec::new();
    let mut allowed_by = None;
    resolver(objects).visit(&a.user, &a.namespace, |b| match b.rules {
        Ok(rules) if rules.iter().any(|r| r.allows(a)) => {
            allowed_by = Some(b.description());
            false
        }
        Ok(_) => true,
        Err(e) => {
            errors.push(e.clone());
            true
        }
    });
    if let Some(by) = allowed_by {
        return Decision {
            allowed: true,
            reason: format!("RBAC: allowed by {by}"),
        };
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
    resolver(objects).visit(user, namespace, |b| {
        match b.rules {
            Ok(r) => rules.extend(r.iter().cloned()),
            Err(e) => errors.push(e.clone()),
        }
        true
    });
    (rules, errors)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    const RBAC: &str = "rbac.authorization.k8s.io";

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
