//! The RBAC objects compiled for authorization (upstream's `DefaultRuleResolver` over its
//! listers, `pkg/registry/rbac/validation/rule.go`): every role's rules parsed once, and the
//! bindings indexed by subject, so a decision costs a few hash lookups instead of a walk over
//! every binding with JSON parsing.
//!
//! - **Roles.** Each ClusterRole's rules, with an `aggregationRule` resolved to the rules of the
//!   ClusterRoles its selectors pick (transitively, each role once, as the
//!   clusterrole-aggregation controller would write them), and each Role's rules.
//! - **Bindings.** ClusterRoleBindings, and RoleBindings per namespace, each with its roleRef
//!   resolved (its rules, or upstream's "not found" error), indexed by the subjects it names:
//!   a `User` and a `ServiceAccount` by user name (`system:serviceaccount:<ns>:<name>`, the
//!   namespace defaulting to a RoleBinding's own; none for a ClusterRoleBinding without one),
//!   a `Group` by group name (`appliesToUser`).
//!
//! [`RuleResolver::visit`] yields the bindings that apply to a user in the same order as a walk
//! over the bindings in key order would (ClusterRoleBindings, then the namespace's
//! RoleBindings; upstream's `VisitRulesFor`), each with the first of its subjects that names the
//! user, so reasons and errors are the walk's. A resolver is immutable: a change of any RBAC
//! object compiles a new one ([`super::policy_cache`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::rbac::Rule;
use crate::authn::identity::UserInfo;
use crate::registry::Objects;

const RBAC: &str = "rbac.authorization.k8s.io";

/// A role's rules, or the error upstream reports for a missing role.
pub type RoleRules = Result<Arc<[Rule]>, String>;

/// One binding, compiled.
#[derive(Debug)]
struct Binding {
    /// `ClusterRoleBinding "name" of ClusterRole "role"` / `RoleBinding "name/ns" of Kind "role"`.
    describe: String,
    /// Each subject as `describeSubject` spells it (`User "alice"`), in the binding's order.
    subjects: Vec<String>,
    rules: RoleRules,
}

/// Where a subject points: binding `binding`'s subject `subject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Named {
    binding: u32,
    subject: u32,
}

/// Bindings of one scope (the cluster, or one namespace) in key order, by subject.
#[derive(Debug, Default)]
struct Bindings {
    bindings: Vec<Binding>,
    by_user: HashMap<String, Vec<Named>>,
    by_group: HashMap<String, Vec<Named>>,
}

impl Bindings {
    /// Adds `b` (bindings arrive in key order) with its roleRef resolved to `rules`;
    /// `namespace` is a RoleBinding's ("" for a ClusterRoleBinding).
    fn add(&mut self, b: &Value, namespace: &str, rules: RoleRules) {
        let at = u32::try_from(self.bindings.len()).unwrap_or(u32::MAX);
        let subjects = b.get("subjects").and_then(Value::as_array);
        let mut described = Vec::new();
        for (i, subject) in subjects.into_iter().flatten().enumerate() {
            let named = Named {
                binding: at,
                subject: u32::try_from(i).unwrap_or(u32::MAX),
            };
            let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
            described.push(describe_subject(subject, namespace));
            match s("kind") {
                "User" => self.by_user.entry(s("name").to_string()),
                "Group" => self.by_group.entry(s("name").to_string()),
                "ServiceAccount" => {
                    let ns = if s("namespace").is_empty() {
                        namespace
                    } else {
                        s("namespace")
                    };
                    if ns.is_empty() {
                        continue;
                    }
                    let user = crate::authn::token::service_account_username(ns, s("name"));
                    self.by_user.entry(user)
                }
                _ => continue,
            }
            .or_default()
            .push(named);
        }
        let name = api::meta::name(b).unwrap_or("");
        let role = b
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let describe = if namespace.is_empty() {
            format!(
                "ClusterRoleBinding {} of ClusterRole {}",
                api::validation::go_quote(name),
                api::validation::go_quote(role)
            )
        } else {
            let kind = b
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            format!(
                "RoleBinding \"{name}/{namespace}\" of {kind} {}",
                api::validation::go_quote(role)
            )
        };
        self.bindings.push(Binding {
            describe,
            subjects: described,
            rules,
        });
    }

    /// The bindings naming `user`, in key order, each with the first subject that names it.
    fn applying(&self, user: &UserInfo) -> Vec<Named> {
        let mut found: Vec<Named> = Vec::new();
        let groups = user.groups.iter().map(|g| self.by_group.get(g));
        for list in std::iter::once(self.by_user.get(&user.username))
            .chain(groups)
            .flatten()
        {
            found.extend_from_slice(list);
        }
        found.sort_unstable();
        found.dedup_by_key(|n| n.binding);
        found
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

/// One binding that applies to a user, as [`RuleResolver::visit`] yields it.
#[derive(Debug, Clone, Copy)]
pub struct Applied<'a> {
    describe: &'a str,
    subject: &'a str,
    /// The rules of its role, or why there are none.
    pub rules: &'a RoleRules,
}

impl Applied<'_> {
    /// `ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`, as upstream's reason names it.
    pub fn description(&self) -> String {
        format!("{} to {}", self.describe, self.subject)
    }
}

/// The compiled RBAC objects. Cloning one shares every part; a change of one namespace's Roles
/// or RoleBindings, or of the ClusterRoleBindings, compiles only that part again
/// ([`with_namespace`](Self::with_namespace), [`with_cluster_bindings`](Self::with_cluster_bindings));
/// a ClusterRole's change compiles everything (roles may aggregate it, bindings anywhere refer
/// to it).
#[derive(Debug, Default, Clone)]
pub struct RuleResolver {
    /// Each ClusterRole's rules, aggregation resolved, by name.
    cluster_roles: Arc<HashMap<String, Arc<[Rule]>>>,
    cluster: Arc<Bindings>,
    namespaced: HashMap<String, Arc<Bindings>>,
}

impl RuleResolver {
    /// Compiles the four RBAC resources, each given in key order.
    pub fn compile<'a>(
        cluster_roles: impl IntoIterator<Item = &'a Value>,
        roles: impl IntoIterator<Item = &'a Value>,
        cluster_role_bindings: impl IntoIterator<Item = &'a Value>,
        role_bindings: impl IntoIterator<Item = &'a Value>,
    ) -> Self {
        let cluster_roles: Vec<(&Value, BTreeMap<String, String>)> = cluster_roles
            .into_iter()
            .map(|r| (r, labels_of(r)))
            .collect();
        let mut compiled: HashMap<String, Arc<[Rule]>> = HashMap::new();
        for (role, _) in &cluster_roles {
            let name = api::meta::name(role).unwrap_or("").to_string();
            compiled.insert(name, cluster_role_rules(&cluster_roles, role).into());
        }
        let mut resolver = RuleResolver {
            cluster_roles: Arc::new(compiled),
            ..Default::default()
        }
        .with_cluster_bindings(cluster_role_bindings);
        let mut roles_by_ns: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        for role in roles {
            let ns = api::meta::namespace(role).unwrap_or("");
            roles_by_ns.entry(ns).or_default().push(role);
        }
        let mut bindings_by_ns: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        for b in role_bindings {
            let ns = api::meta::namespace(b).unwrap_or("");
            bindings_by_ns.entry(ns).or_default().push(b);
        }
        for (ns, bindings) in bindings_by_ns {
            let roles = roles_by_ns.get(ns).map_or(&[][..], Vec::as_slice);
            let compiled = resolver.namespace_bindings(ns, roles.iter().copied(), bindings);
            resolver
                .namespaced
                .insert(ns.to_string(), Arc::new(compiled));
        }
        resolver
    }

    /// This resolver with the ClusterRoleBindings `bindings` (in key order) compiled again.
    pub fn with_cluster_bindings<'a>(
        mut self,
        bindings: impl IntoIterator<Item = &'a Value>,
    ) -> Self {
        let mut compiled = Bindings::default();
        for b in bindings {
            compiled.add(b, "", self.resolve(b, &HashMap::new()));
        }
        self.cluster = Arc::new(compiled);
        self
    }

    /// This resolver with namespace `namespace`'s Roles and RoleBindings (in key order)
    /// compiled again.
    pub fn with_namespace<'a>(
        mut self,
        namespace: &str,
        roles: impl IntoIterator<Item = &'a Value>,
        bindings: impl IntoIterator<Item = &'a Value>,
    ) -> Self {
        let compiled = self.namespace_bindings(namespace, roles, bindings);
        if compiled.bindings.is_empty() {
            self.namespaced.remove(namespace);
        } else {
            self.namespaced
                .insert(namespace.to_string(), Arc::new(compiled));
        }
        self
    }

    /// One namespace's RoleBindings with their roleRefs resolved.
    fn namespace_bindings<'a>(
        &self,
        namespace: &str,
        roles: impl IntoIterator<Item = &'a Value>,
        bindings: impl IntoIterator<Item = &'a Value>,
    ) -> Bindings {
        let roles: HashMap<&str, Arc<[Rule]>> = roles
            .into_iter()
            .map(|r| (api::meta::name(r).unwrap_or(""), own_rules(r).into()))
            .collect();
        let mut compiled = Bindings::default();
        for b in bindings {
            compiled.add(b, namespace, self.resolve(b, &roles));
        }
        compiled
    }

    /// The rules a binding's roleRef names (`roles`: the Roles of its namespace, none for a
    /// ClusterRoleBinding), or upstream's error for a missing role.
    fn resolve(&self, b: &Value, roles: &HashMap<&str, Arc<[Rule]>>) -> RoleRules {
        let s = |p: &str| b.pointer(p).and_then(Value::as_str).unwrap_or("");
        let name = s("/roleRef/name");
        match s("/roleRef/kind") {
            "ClusterRole" => self.cluster_roles.get(name).cloned().ok_or_else(|| {
                format!("clusterrole.rbac.authorization.k8s.io \"{name}\" not found")
            }),
            "Role" => roles
                .get(name)
                .cloned()
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io \"{name}\" not found")),
            other => Err(format!("unsupported role reference kind: {other:?}")),
        }
    }

    /// Compiles what `objects` holds now (a view without a maintained resolver: tests, tools).
    pub fn from_objects(objects: &dyn Objects) -> Self {
        let list = |plural: &str| objects.list(RBAC, plural);
        let (cr, r, crb, rb) = (
            list("clusterroles"),
            list("roles"),
            list("clusterrolebindings"),
            list("rolebindings"),
        );
        Self::compile(
            cr.iter().map(AsRef::as_ref),
            r.iter().map(AsRef::as_ref),
            crb.iter().map(AsRef::as_ref),
            rb.iter().map(AsRef::as_ref),
        )
    }

    /// Calls `visit` with each binding that applies to `user` in `namespace` ("" = cluster
    /// bindings only): the ClusterRoleBindings first, then the namespace's RoleBindings, each in
    /// key order, until `visit` returns false (`VisitRulesFor`).
    pub fn visit(
        &self,
        user: &UserInfo,
        namespace: &str,
        mut visit: impl FnMut(Applied<'_>) -> bool,
    ) {
        let scopes = std::iter::once(&self.cluster).chain(
            (!namespace.is_empty())
                .then(|| self.namespaced.get(namespace))
                .flatten(),
        );
        for scope in scopes {
            for named in scope.applying(user) {
                let Some(b) = scope.bindings.get(named.binding as usize) else {
                    continue;
                };
                let subject = b
                    .subjects
                    .get(named.subject as usize)
                    .map_or("", String::as_str);
                let applied = Applied {
                    describe: &b.describe,
                    subject,
                    rules: &b.rules,
                };
                if !visit(applied) {
                    return;
                }
            }
        }
    }
}

/// A role's own `rules`.
fn own_rules(role: &Value) -> Vec<Rule> {
    role.get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(Rule::from_json)
        .collect()
}

fn labels_of(role: &Value) -> BTreeMap<String, String> {
    role.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect()
}

/// The rules of a ClusterRole: its own, or with an aggregation rule those of every ClusterRole
/// of `all` (each with its labels) its selectors pick (transitively; each role once; each rule
/// once).
fn cluster_role_rules(all: &[(&Value, BTreeMap<String, String>)], role: &Value) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut stack = vec![role];
    // Bounded: every role is expanded at most once.
    while let Some(r) = stack.pop() {
        if !seen.insert(api::meta::name(r).unwrap_or("")) {
            continue;
        }
        let selectors = r
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array);
        match selectors {
            Some(sels) if !sels.is_empty() => {
                // An invalid selector matches nothing (the aggregation controller skips it).
                let sels: Vec<_> = sels
                    .iter()
                    .filter_map(|s| api::labels::from_label_selector_json(s).ok())
                    .collect();
                for (other, labels) in all {
                    if sels.iter().any(|s| s.matches(labels)) {
                        stack.push(other);
                    }
                }
            }
            _ => {
                for rule in own_rules(r) {
                    if !out.contains(&rule) {
                        out.push(rule);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    fn binding(name: &str, namespace: Option<&str>, role: (&str, &str), subjects: Value) -> Value {
        let mut meta = json!({"name": name});
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        json!({"metadata": meta, "roleRef": {"apiGroup": RBAC, "kind": role.0, "name": role.1}, "subjects": subjects})
    }

    /// What `visit` yields: each description and its rule count (or error).
    fn visited(r: &RuleResolver, u: &UserInfo, ns: &str) -> Vec<(String, Result<usize, String>)> {
        let mut out = Vec::new();
        r.visit(u, ns, |b| {
            let rules = b.rules.as_ref().map(|r| r.len()).map_err(Clone::clone);
            out.push((b.description(), rules));
            true
        });
        out
    }

    #[test]
    fn bindings_apply_by_subject_in_key_order_with_the_first_subject_named() {
        let roles = [
            json!({"metadata": {"name": "a"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
            json!({"metadata": {"name": "b"}, "rules": []}),
        ];
        let crbs = [
            // Names the user twice: by group first in the list, by name second.
            binding(
                "1-both",
                None,
                ("ClusterRole", "a"),
                json!([
                {"kind": "Group", "name": "devs"}, {"kind": "User", "name": "alice"}]),
            ),
            binding(
                "2-other",
                None,
                ("ClusterRole", "a"),
                json!([{"kind": "User", "name": "bob"}]),
            ),
            // A ServiceAccount without a namespace names nobody in a ClusterRoleBinding.
            binding(
                "3-sa",
                None,
                ("ClusterRole", "a"),
                json!([
                {"kind": "ServiceAccount", "name": "sa"},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "team"}]),
            ),
            binding(
                "4-missing",
                None,
                ("ClusterRole", "gone"),
                json!([{"kind": "User", "name": "alice"}]),
            ),
        ];
        let rbs = [
            binding(
                "x",
                Some("team"),
                ("ClusterRole", "b"),
                json!([{"kind": "ServiceAccount", "name": "sa"}]),
            ),
            binding(
                "y",
                Some("other"),
                ("ClusterRole", "a"),
                json!([{"kind": "User", "name": "alice"}]),
            ),
        ];
        let r = RuleResolver::compile(roles.iter(), [], crbs.iter(), rbs.iter());
        let alice = user("alice", &["devs", "system:authenticated"]);
        assert_eq!(
            visited(&r, &alice, "team"),
            vec![
                (
                    r#"ClusterRoleBinding "1-both" of ClusterRole "a" to Group "devs""#.into(),
                    Ok(1)
                ),
                (
                    r#"ClusterRoleBinding "4-missing" of ClusterRole "gone" to User "alice""#
                        .into(),
                    Err(r#"clusterrole.rbac.authorization.k8s.io "gone" not found"#.into())
                ),
            ]
        );
        // Namespaced bindings only in their namespace, and only with a namespace asked.
        assert_eq!(visited(&r, &alice, "other").len(), 3);
        assert_eq!(visited(&r, &alice, "").len(), 2);
        let sa = UserInfo::service_account("team", "sa");
        assert_eq!(
            visited(&r, &sa, "team"),
            vec![
                (
                    r#"ClusterRoleBinding "3-sa" of ClusterRole "a" to ServiceAccount "sa/team""#
                        .into(),
                    Ok(1)
                ),
                (
                    r#"RoleBinding "x/team" of ClusterRole "b" to ServiceAccount "sa/team""#.into(),
                    Ok(0)
                ),
            ]
        );
        // The visitor stops when asked.
        let mut seen = 0;
        r.visit(&alice, "other", |_| {
            seen += 1;
            false
        });
        assert_eq!(seen, 1);
    }

    #[test]
    fn aggregated_cluster_roles_have_the_rules_of_the_roles_they_select() {
        let rule =
            |resource: &str| json!({"verbs": ["get"], "apiGroups": [""], "resources": [resource]});
        let roles = [
            json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"to-agg": "true"}}]}, "rules": [rule("ignored")]}),
            json!({"metadata": {"name": "p", "labels": {"to-agg": "true"}}, "rules": [rule("pods"), rule("pods")]}),
            json!({"metadata": {"name": "s", "labels": {"to-agg": "true"}}, "rules": [rule("services")]}),
            json!({"metadata": {"name": "n"}, "rules": [rule("nodes")]}),
        ];
        let crbs = [binding(
            "b",
            None,
            ("ClusterRole", "agg"),
            json!([{"kind": "User", "name": "u"}]),
        )];
        let r = RuleResolver::compile(roles.iter(), [], crbs.iter(), []);
        let mut resources = Vec::new();
        r.visit(&user("u", &[]), "", |b| {
            for rule in b.rules.as_ref().unwrap().iter() {
                resources.extend(rule.resources.clone());
            }
            true
        });
        resources.sort();
        assert_eq!(resources, vec!["pods", "services"]);
    }

    #[test]
    fn role_bindings_resolve_roles_of_their_own_namespace() {
        let roles = [
            json!({"metadata": {"name": "r", "namespace": "a"}, "rules": [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}),
        ];
        let rbs = [
            binding(
                "in-a",
                Some("a"),
                ("Role", "r"),
                json!([{"kind": "User", "name": "u"}]),
            ),
            binding(
                "in-b",
                Some("b"),
                ("Role", "r"),
                json!([{"kind": "User", "name": "u"}]),
            ),
            binding(
                "odd",
                Some("b"),
                ("Widget", "r"),
                json!([{"kind": "User", "name": "u"}]),
            ),
        ];
        let r = RuleResolver::compile([], roles.iter(), [], rbs.iter());
        let u = user("u", &[]);
        assert_eq!(visited(&r, &u, "a")[0].1, Ok(1));
        let b = visited(&r, &u, "b");
        assert_eq!(
            b[0].1,
            Err(r#"role.rbac.authorization.k8s.io "r" not found"#.into())
        );
        assert_eq!(
            b[1].1,
            Err(r#"unsupported role reference kind: "Widget""#.into())
        );
    }
}
