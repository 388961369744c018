use super::*;
use crate::authn::UserInfo;

fn policy(yaml: &str) -> Policy {
    match Policy::from_bytes(yaml.as_bytes()) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn refused(yaml: &str) -> String {
    match Policy::from_bytes(yaml.as_bytes()) {
        Ok(p) => panic!("accepted: {p:?}"),
        Err(e) => e.to_string(),
    }
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        username: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

fn request(u: UserInfo, method: &str, path: &str) -> Attributes {
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let method = axum::http::Method::from_bytes(method.as_bytes()).unwrap();
    let info = crate::http::request_info::RequestInfo::parse(&method, path, query);
    crate::authz::request_info::attributes(u, &info)
}

fn level(p: &Policy, u: UserInfo, method: &str, path: &str) -> Level {
    p.evaluate(&request(u, method, path), true).level
}

const HEADER: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";

#[test]
fn the_first_matching_rule_decides_and_none_is_the_default() {
    let p = policy(&format!(
        "{HEADER}rules:
- level: None
  users: [system:kube-proxy]
- level: RequestResponse
  resources: [{{group: '', resources: [secrets]}}]
- level: Metadata
  verbs: [get, list]
"
    ));
    let alice = || user("alice", &["system:authenticated"]);
    assert_eq!(
        level(&p, user("system:kube-proxy", &[]), "GET", "/api/v1/secrets"),
        Level::None
    );
    assert_eq!(
        level(&p, alice(), "GET", "/api/v1/namespaces/a/secrets/s"),
        Level::RequestResponse
    );
    assert_eq!(
        level(&p, alice(), "GET", "/api/v1/namespaces/a/pods"),
        Level::Metadata
    );
    assert_eq!(
        level(&p, alice(), "POST", "/api/v1/namespaces/a/pods"),
        Level::None
    );
}

#[test]
fn users_and_groups_never_match_a_request_that_failed_authentication() {
    let p = policy(&format!(
        "{HEADER}rules:
- level: Request
  userGroups: [system:unauthenticated]
- level: Metadata
"
    ));
    let a = request(UserInfo::default(), "GET", "/api/v1/pods");
    assert_eq!(p.evaluate(&a, false).level, Level::Metadata);
    let anon = request(
        user("system:anonymous", &["system:unauthenticated"]),
        "GET",
        "/api/v1/pods",
    );
    assert_eq!(p.evaluate(&anon, true).level, Level::Request);
}

#[test]
fn resources_match_subresources_wildcards_names_and_groups() {
    let p = policy(&format!(
        "{HEADER}rules:
- level: Request
  resources:
  - group: ''
    resources: [pods/log]
- level: RequestResponse
  resources:
  - group: ''
    resources: ['*/status']
- level: Metadata
  resources:
  - group: apps
    resources: ['deployments/*']
- level: Request
  namespaces: [kube-system]
  resources:
  - group: ''
    resources: [configmaps]
    resourceNames: [cfg]
- level: Metadata
  resources:
  - group: batch
"
    ));
    let u = || user("u", &[]);
    assert_eq!(
        level(&p, u(), "GET", "/api/v1/namespaces/a/pods/p/log"),
        Level::Request
    );
    assert_eq!(
        level(&p, u(), "GET", "/api/v1/namespaces/a/pods/p"),
        Level::None
    );
    assert_eq!(
        level(&p, u(), "PUT", "/api/v1/namespaces/a/pods/p/status"),
        Level::RequestResponse
    );
    assert_eq!(
        level(&p, u(), "PUT", "/api/v1/namespaces/a/services/s/status"),
        Level::RequestResponse
    );
    // `deployments/*` is the resource and every subresource of it.
    assert_eq!(
        level(
            &p,
            u(),
            "GET",
            "/apis/apps/v1/namespaces/a/deployments/d/scale"
        ),
        Level::Metadata
    );
    assert_eq!(
        level(&p, u(), "GET", "/apis/apps/v1/namespaces/a/deployments/d"),
        Level::Metadata
    );
    assert_eq!(
        level(&p, u(), "GET", "/apis/apps/v1/namespaces/a/replicasets/r"),
        Level::None
    );
    assert_eq!(
        level(
            &p,
            u(),
            "GET",
            "/api/v1/namespaces/kube-system/configmaps/cfg"
        ),
        Level::Request
    );
    assert_eq!(
        level(
            &p,
            u(),
            "GET",
            "/api/v1/namespaces/kube-system/configmaps/other"
        ),
        Level::None
    );
    assert_eq!(
        level(&p, u(), "GET", "/api/v1/namespaces/default/configmaps/cfg"),
        Level::None
    );
    // An empty resource list is every resource of the group.
    assert_eq!(
        level(&p, u(), "DELETE", "/apis/batch/v1/namespaces/a/jobs/j"),
        Level::Metadata
    );
    // A resource rule never matches a non-resource URL.
    assert_eq!(level(&p, u(), "GET", "/healthz"), Level::None);
}

#[test]
fn namespaces_match_cluster_scoped_requests_with_the_empty_string() {
    let p = policy(&format!(
        "{HEADER}rules:
- level: Metadata
  namespaces: ['']
"
    ));
    assert_eq!(
        level(&p, user("u", &[]), "GET", "/api/v1/nodes/n"),
        Level::Metadata
    );
    assert_eq!(
        level(&p, user("u", &[]), "GET", "/api/v1/namespaces/a/pods"),
        Level::None
    );
}

#[test]
fn non_resource_urls_match_exactly_or_by_prefix() {
    let p = policy(&format!(
        "{HEADER}rules:
- level: None
  nonResourceURLs: [/healthz*, /version]
- level: Metadata
  nonResourceURLs: ['*']
"
    ));
    let u = || user("u", &[]);
    assert_eq!(level(&p, u(), "GET", "/healthz"), Level::None);
    assert_eq!(level(&p, u(), "GET", "/healthz/etcd"), Level::None);
    assert_eq!(level(&p, u(), "GET", "/version"), Level::None);
    assert_eq!(level(&p, u(), "GET", "/versions"), Level::Metadata);
    // `*` among nonResourceURLs still needs a non-resource request.
    assert_eq!(level(&p, u(), "GET", "/api/v1/pods"), Level::None);
}

#[test]
fn omitted_stages_join_the_policys_and_managed_fields_fall_back_to_it() {
    let p = policy(&format!(
        "{HEADER}omitStages: [RequestReceived]
omitManagedFields: true
rules:
- level: Metadata
  verbs: [watch]
  omitStages: [ResponseStarted]
  omitManagedFields: false
- level: Request
"
    ));
    let watch = p.evaluate(
        &request(user("u", &[]), "GET", "/api/v1/pods?watch=true"),
        true,
    );
    assert_eq!(watch.level, Level::Metadata);
    assert!(!watch.writes(Stage::RequestReceived) && !watch.writes(Stage::ResponseStarted));
    assert!(watch.writes(Stage::ResponseComplete));
    assert!(!watch.omit_managed_fields);
    let get = p.evaluate(&request(user("u", &[]), "GET", "/api/v1/pods"), true);
    assert_eq!(get.level, Level::Request);
    assert!(get.omit_managed_fields);
    assert_eq!(get.omit_stages, [Stage::RequestReceived]);
}

#[test]
fn json_policies_load_too() {
    let p = policy(
        r#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"Metadata"}]}"#,
    );
    assert_eq!(level(&p, user("u", &[]), "GET", "/api"), Level::Metadata);
}

#[test]
fn invalid_policies_are_refused_with_upstreams_field_paths() {
    assert_eq!(
        refused(&format!("{HEADER}rules:\n- level: Loud\n")),
        "rules[0].level: Unsupported value: \"Loud\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\""
    );
    assert_eq!(
        refused(&format!(
            "{HEADER}rules:\n- level: None\n- users: [a]\n  omitStages: [Sometime]\n"
        )),
        "[rules[1].level: Required value, rules[1].omitStages[0]: Invalid value: \"Sometime\": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic]"
    );
    assert_eq!(
        refused(&format!(
            "{HEADER}rules:\n- level: None\n  nonResourceURLs: [healthz, '/a*b']\n"
        )),
        "[rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character, rules[0].nonResourceURLs[1]: Invalid value: \"/a*b\": non-resource URL wildcards '*' must be the final character of the rule]"
    );
    let both = refused(&format!(
        "{HEADER}rules:\n- level: None\n  namespaces: [a]\n  nonResourceURLs: [/x]\n"
    ));
    assert!(
        both.ends_with("rules cannot apply to both regular resources and non-resource URLs"),
        "{both}"
    );
    let names = refused(&format!(
        "{HEADER}rules:\n- level: None\n  resources: [{{group: Apps_, resourceNames: [x]}}]\n"
    ));
    assert!(
        names.starts_with("[rules[0].resources.group: Invalid value: \"Apps_\""),
        "{names}"
    );
    assert!(
        names.contains("using resourceNames requires at least one resource"),
        "{names}"
    );
    assert_eq!(
        refused(&format!("{HEADER}rules: []\n")),
        "loaded illegal policy with 0 rules"
    );
    assert!(refused("kind: Policy\nrules: [{level: None}]\n").starts_with("unknown group version"));
    assert!(refused("rules: [{level: None}]\n").starts_with("failed decoding"));
    assert!(refused("{not yaml").starts_with("failed decoding"));
}

#[test]
fn a_file_that_does_not_load_names_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, format!("{HEADER}rules: []\n")).unwrap();
    let e = crate::audit::AuditOptions::load_policy(&path).unwrap_err();
    assert_eq!(
        e,
        format!(
            "loading audit policy file: loaded illegal policy with 0 rules: from file {}",
            path.display()
        )
    );
    let missing = crate::audit::AuditOptions::load_policy(&dir.path().join("none")).unwrap_err();
    assert!(missing.starts_with("loading audit policy file: failed to read file path"));
}
