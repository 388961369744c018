//! Classification (upstream `apf_filter.go` / `rule.go`, read for behaviour): the first
//! FlowSchema, in order of `matchingPrecedence` then name, with a rule that matches the request
//! decides its priority level; its distinguisher method names the flow.
//!
//! A rule matches when one of its subjects matches the user and one of its resource rules (for a
//! resource request) or non-resource rules (otherwise) matches the request:
//! * subjects: `User` by name, `Group` by any of the user's groups, `ServiceAccount` by
//!   `system:serviceaccount:<ns>:<name>` (`*` for any name in the namespace); `*` matches any;
//! * resource rules: verb, API group and resource (`pods/status` for a subresource) each listed
//!   or `*`; a namespaced request needs its namespace listed (or `*`), a cluster-scoped one
//!   `clusterScope: true`;
//! * non-resource rules: verb listed or `*`, and a URL that is the path, `*`, or `<prefix>/*`
//!   matching the prefix itself and everything under it.

use super::config::{
    Distinguisher, NonResourceRule, PolicyRules, ResourceRule, SchemaSpec, Subject,
};
use super::request::RequestDigest;

fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

fn subject_matches(s: &Subject, d: &RequestDigest) -> bool {
    match s {
        Subject::User(name) => name == "*" || *name == d.user.username,
        Subject::Group(name) => name == "*" || d.user.groups.iter().any(|g| g == name),
        Subject::ServiceAccount { namespace, name } => {
            let Some(rest) = d.user.username.strip_prefix("system:serviceaccount:") else {
                return false;
            };
            match rest.split_once(':') {
                Some((ns, n)) => ns == namespace && (name == "*" || name == n),
                None => false,
            }
        }
    }
}

fn resource_rule_matches(r: &ResourceRule, d: &RequestDigest) -> bool {
    let i = &d.info;
    if !listed(&r.verbs, &i.verb)
        || !listed(&r.api_groups, &i.api_group)
        || !r.resources.iter().any(|p| i.resource_matches(p))
    {
        return false;
    }
    if i.namespace.is_empty() {
        r.cluster_scope
    } else {
        listed(&r.namespaces, &i.namespace)
    }
}

fn url_matches(pattern: &str, path: &str) -> bool {
    if pattern == "*" || pattern == path {
        return true;
    }
    match pattern.strip_suffix('*') {
        Some(prefix) if prefix.ends_with('/') => {
            path.starts_with(prefix) || path == &prefix[..prefix.len() - 1]
        }
        _ => false,
    }
}

fn non_resource_rule_matches(r: &NonResourceRule, d: &RequestDigest) -> bool {
    listed(&r.verbs, &d.info.verb) && r.urls.iter().any(|u| url_matches(u, &d.info.path))
}

fn rules_match(r: &PolicyRules, d: &RequestDigest) -> bool {
    if !r.subjects.iter().any(|s| subject_matches(s, d)) {
        return false;
    }
    if d.info.resource_request {
        r.resource_rules
            .iter()
            .any(|rr| resource_rule_matches(rr, d))
    } else {
        r.non_resource_rules
            .iter()
            .any(|nr| non_resource_rule_matches(nr, d))
    }
}

/// Whether `schema` matches the request.
pub fn matches(schema: &SchemaSpec, d: &RequestDigest) -> bool {
    schema.rules.iter().any(|r| rules_match(r, d))
}

/// The flow distinguisher of a request under `schema` (empty without a method).
pub fn distinguisher<'a>(schema: &SchemaSpec, d: &'a RequestDigest) -> &'a str {
    match schema.distinguisher {
        Some(Distinguisher::ByUser) => &d.user.username,
        Some(Distinguisher::ByNamespace) => &d.info.namespace,
        None => "",
    }
}

/// Sorts schemas into matching order: `matchingPrecedence`, then name.
pub fn sort(schemas: &mut [SchemaSpec]) {
    schemas.sort_by(|a, b| {
        a.precedence
            .cmp(&b.precedence)
            .then_with(|| a.name.cmp(&b.name))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::identity::UserInfo;
    use crate::bootstrap::flowcontrol::flow_schemas;
    use crate::flowcontrol::config::schema_spec;
    use crate::flowcontrol::subject::from_user_agent;
    use crate::http::request_info::RequestInfo;
    use axum::http::Method;

    fn bootstrap() -> Vec<SchemaSpec> {
        let mut s: Vec<_> = flow_schemas().iter().filter_map(schema_spec).collect();
        sort(&mut s);
        s
    }

    fn digest(user: UserInfo, method: Method, path: &str) -> RequestDigest {
        RequestDigest {
            info: RequestInfo::parse(&method, path, None),
            user,
        }
    }

    fn first<'a>(schemas: &'a [SchemaSpec], d: &RequestDigest) -> &'a str {
        schemas
            .iter()
            .find(|s| matches(s, d))
            .map_or("", |s| s.name.as_str())
    }

    fn agent(agent: &str, method: Method, path: &str) -> RequestDigest {
        let info = RequestInfo::parse(&method, path, None);
        RequestDigest {
            user: from_user_agent(agent, &info),
            info,
        }
    }

    #[test]
    fn bootstrap_schemas_classify_as_upstream() {
        let s = bootstrap();
        assert_eq!(
            first(&s, &digest(UserInfo::admin(), Method::GET, "/api/v1/pods")),
            "exempt"
        );
        let probe = agent("kube-probe/1.33", Method::GET, "/readyz");
        assert_eq!(first(&s, &probe), "probes");
        let lease = agent(
            "kubelet/v1",
            Method::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
        );
        assert_eq!(first(&s, &lease), "system-node-high");
        let status = agent(
            "kubelet/v1",
            Method::PATCH,
            "/api/v1/namespaces/a/pods/p/status",
        );
        assert_eq!(first(&s, &status), "system-nodes");
        let cm = agent(
            "kube-controller-manager/v1",
            Method::POST,
            "/api/v1/namespaces/a/pods",
        );
        assert_eq!(first(&s, &cm), "kube-controller-manager");
        let sched = agent(
            "kube-scheduler/v1",
            Method::POST,
            "/api/v1/namespaces/a/pods/p/binding",
        );
        assert_eq!(first(&s, &sched), "kube-scheduler");
        let user = agent("kubectl/v1.33", Method::GET, "/api/v1/namespaces/a/pods");
        assert_eq!(first(&s, &user), "global-default");
        let sa = digest(
            UserInfo::service_account("app", "runner"),
            Method::GET,
            "/api/v1/namespaces/app/pods",
        );
        assert_eq!(first(&s, &sa), "service-accounts");
        let ks = digest(
            UserInfo::service_account("kube-system", "x"),
            Method::GET,
            "/api/v1/pods",
        );
        assert_eq!(first(&s, &ks), "kube-system-service-accounts");
        let le = agent(
            "kube-controller-manager/v1",
            Method::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager",
        );
        assert_eq!(first(&s, &le), "system-leader-election");
    }

    fn schema(name: &str, precedence: i32, rules: Vec<PolicyRules>) -> SchemaSpec {
        SchemaSpec {
            name: name.to_string(),
            uid: String::new(),
            precedence,
            level: "l".to_string(),
            distinguisher: Some(Distinguisher::ByNamespace),
            rules,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn resource(
        verbs: &[&str],
        resources: &[&str],
        namespaces: &[&str],
        cluster: bool,
    ) -> PolicyRules {
        PolicyRules {
            subjects: vec![Subject::Group("system:authenticated".into())],
            resource_rules: vec![ResourceRule {
                verbs: strings(verbs),
                api_groups: strings(&[""]),
                resources: strings(resources),
                namespaces: strings(namespaces),
                cluster_scope: cluster,
            }],
            non_resource_rules: vec![],
        }
    }

    #[test]
    fn precedence_then_name_decides() {
        let mut s = vec![
            schema("z", 10, vec![resource(&["*"], &["*"], &["*"], true)]),
            schema("b", 5, vec![resource(&["*"], &["*"], &["*"], true)]),
            schema("a", 5, vec![resource(&["get"], &["*"], &["*"], true)]),
        ];
        sort(&mut s);
        let list = agent("x", Method::GET, "/api/v1/namespaces/n/pods");
        let get = agent("x", Method::GET, "/api/v1/namespaces/n/pods/p");
        assert_eq!(first(&s, &list), "b");
        assert_eq!(first(&s, &get), "a");
        assert_eq!(distinguisher(&s[0], &get), "n");
    }

    #[test]
    fn each_rule_kind() {
        let s = [schema(
            "r",
            1,
            vec![resource(&["create"], &["pods/status"], &["n1"], false)],
        )];
        assert!(matches(
            &s[0],
            &agent("x", Method::POST, "/api/v1/namespaces/n1/pods/p/status")
        ));
        assert!(!matches(
            &s[0],
            &agent("x", Method::POST, "/api/v1/namespaces/n2/pods/p/status")
        ));
        assert!(!matches(
            &s[0],
            &agent("x", Method::POST, "/api/v1/namespaces/n1/pods")
        ));
        assert!(!matches(
            &s[0],
            &agent("x", Method::PUT, "/api/v1/namespaces/n1/pods/p/status")
        ));
        // Cluster scope.
        let c = schema("c", 1, vec![resource(&["*"], &["nodes"], &[], true)]);
        assert!(matches(&c, &agent("x", Method::GET, "/api/v1/nodes")));
        let nc = schema("nc", 1, vec![resource(&["*"], &["nodes"], &["*"], false)]);
        assert!(!matches(&nc, &agent("x", Method::GET, "/api/v1/nodes")));
        // Non-resource URLs.
        let nr = schema(
            "nr",
            1,
            vec![PolicyRules {
                subjects: vec![Subject::User("*".into())],
                resource_rules: vec![],
                non_resource_rules: vec![NonResourceRule {
                    verbs: strings(&["get"]),
                    urls: strings(&["/healthz/*", "/version"]),
                }],
            }],
        );
        assert!(matches(&nr, &agent("x", Method::GET, "/healthz")));
        assert!(matches(&nr, &agent("x", Method::GET, "/healthz/ping")));
        assert!(matches(&nr, &agent("x", Method::GET, "/version")));
        assert!(!matches(&nr, &agent("x", Method::GET, "/versions")));
        assert!(!matches(&nr, &agent("x", Method::POST, "/version")));
        assert!(!matches(&nr, &agent("x", Method::GET, "/api/v1/nodes")));
        // Subjects.
        let sa = schema(
            "sa",
            1,
            vec![PolicyRules {
                subjects: vec![Subject::ServiceAccount {
                    namespace: "ns".into(),
                    name: "*".into(),
                }],
                ..resource(&["*"], &["*"], &["*"], true)
            }],
        );
        let ok = digest(
            UserInfo::service_account("ns", "a"),
            Method::GET,
            "/api/v1/nodes",
        );
        let other = digest(
            UserInfo::service_account("ns2", "a"),
            Method::GET,
            "/api/v1/nodes",
        );
        assert!(matches(&sa, &ok) && !matches(&sa, &other));
        let u = schema(
            "u",
            1,
            vec![PolicyRules {
                subjects: vec![Subject::User("jane".into())],
                ..resource(&["*"], &["*"], &["*"], true)
            }],
        );
        let jane = UserInfo {
            username: "jane".into(),
            ..Default::default()
        };
        assert!(matches(&u, &digest(jane, Method::GET, "/api/v1/nodes")));
        assert!(!matches(
            &u,
            &digest(UserInfo::admin(), Method::GET, "/api/v1/nodes")
        ));
    }
}
