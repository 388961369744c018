//! Which webhooks a request goes to (upstream's `webhook/predicates/rules`,
//! `predicates/namespace`, `predicates/object` and `generic.Webhook.ShouldCallHook`): a
//! configuration's webhooks compiled once into [`Hook`]s, then matched per request.
//!
//! - `rules`: a rule matches when the operation (`*` for all; CONNECT is the connect
//!   subresources' `pods/exec`, `attach`, `portforward`, `proxy`), the group, the version and the resource
//!   (`pods`, `pods/status`, `*`, `*/status`, `pods/*`, `*/*`; `*` alone is every main resource
//!   and no subresource) match, and `scope` (`*`, `Cluster`, `Namespaced`) admits the request's
//!   namespace.
//! - `matchPolicy`: `Exact` matches the request's group/version only; `Equivalent` (the default)
//!   also matches a rule that names a resource equivalent to the request's: another served
//!   version, or another group of the same storage (`events.k8s.io` and core events), as
//!   upstream's `EquivalentResourceMapper` (the request's
//!   [`Equivalent`](super::request::Equivalent)s). A version that is not
//!   served is no equivalent (`apps/v1beta1` deployments are gone in 1.33).
//! - `namespaceSelector`: cluster-scoped requests other than namespaces always match; a namespace's
//!   own create or update is matched on the object's labels; others on the labels of the
//!   request's namespace, read from the watch cache.
//! - `objectSelector`: matched against the labels of the object and of the old object; either
//!   matching is enough.
//! - `matchConditions` ([`super::conditions`]) are evaluated last, only for hooks that matched so
//!   far.

use std::time::Duration;

use api::labels::{label_selector_as_selector, Selector};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, RuleWithOperations};
use serde_json::Value;

use super::conditions::Conditions;
use super::request::{Operation, Request};

/// The timeout of a webhook without `timeoutSeconds` (upstream's default, 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a hook is reached (`clientConfig`), owned.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    pub url: Option<String>,
    pub service: Option<(String, String)>,
    pub ca_bundle: Vec<u8>,
}

impl ClientConfig {
    /// The shared client's view of it.
    pub fn endpoint(&self) -> crate::webhook::Endpoint<'_> {
        crate::webhook::Endpoint {
            url: self.url.as_deref(),
            service: self
                .service
                .as_ref()
                .map(|(ns, n)| (ns.as_str(), n.as_str())),
            ca_bundle: &self.ca_bundle,
        }
    }
}

/// One webhook of a configuration, compiled.
#[derive(Debug)]
pub struct Hook {
    /// `webhooks[].name`.
    pub name: String,
    /// The configuration's `metadata.name`.
    pub configuration: String,
    /// Its position in the configuration, for upstream's ordering (configuration name, then index).
    pub index: usize,
    pub client: ClientConfig,
    rules: Vec<RuleWithOperations>,
    exact: bool,
    /// A selector that does not parse fails every request it is asked about (upstream's
    /// `GetParsedNamespaceSelector` error).
    namespace_selector: ParsedSelector,
    object_selector: ParsedSelector,
    /// `sideEffects`.
    pub side_effects: String,
    pub timeout: Duration,
    /// `failurePolicy: Ignore`.
    pub ignore_failures: bool,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke_if_needed: bool,
    /// `admissionReviewVersions`.
    pub review_versions: Vec<String>,
    pub conditions: Conditions,
}

impl Hook {
    /// Compiles the `index`th webhook (JSON of a `MutatingWebhook` or `ValidatingWebhook`) of
    /// the configuration `configuration`; `None` for one that does not decode.
    pub fn compile(configuration: &str, index: usize, webhook: &Value) -> Option<Hook> {
        let w: MutatingWebhook = serde_json::from_value(webhook.clone()).ok()?;
        let selector = |s: &Option<_>| parse_selector(s.as_ref());
        let client = ClientConfig {
            url: w.client_config.url.clone(),
            service: w
                .client_config
                .service
                .as_ref()
                .map(|s| (s.namespace.clone(), s.name.clone())),
            ca_bundle: w
                .client_config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default(),
        };
        let timeout = w
            .timeout_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        Some(Hook {
            conditions: Conditions::compile(w.match_conditions.as_deref().unwrap_or_default()),
            name: w.name,
            configuration: configuration.to_string(),
            index,
            client,
            rules: w.rules.unwrap_or_default(),
            exact: w.match_policy.as_deref() == Some("Exact"),
            namespace_selector: selector(&w.namespace_selector),
            object_selector: selector(&w.object_selector),
            side_effects: w.side_effects,
            timeout,
            ignore_failures: w.failure_policy.as_deref() == Some("Ignore"),
            reinvoke_if_needed: w.reinvocation_policy.as_deref() == Some("IfNeeded"),
            review_versions: w.admission_review_versions,
        })
    }

    /// Whether a rule admits the request (`rules` and `matchPolicy`).
    pub fn matches_rules(&self, req: &Request<'_>) -> bool {
        let exact = self.rules.iter().any(|r| rule_matches(r, req, true));
        exact || (!self.exact && self.rules.iter().any(|r| rule_matches(r, req, false)))
    }

    /// The request as this hook sees it (upstream's `WebhookInvocation`): see [`invocation`].
    pub fn invocation<'a>(&self, req: &Request<'a>) -> Request<'a> {
        invocation(req, self.exact, |r| {
            self.rules.iter().any(|rule| rule_matches(rule, r, true))
        })
    }

    /// `objectSelector` against the object and the old object.
    pub fn matches_object(&self, req: &Request<'_>) -> Result<bool, String> {
        object_matches(&self.object_selector, req)
    }

    /// `namespaceSelector`, with the labels of the request's namespace from `namespace_labels`
    /// (`None`: the namespace does not exist).
    pub fn matches_namespace(
        &self,
        req: &Request<'_>,
        namespace_labels: impl FnOnce(&str) -> Option<std::collections::BTreeMap<String, String>>,
    ) -> Result<bool, NamespaceMiss> {
        namespace_matches(&self.namespace_selector, req, namespace_labels)
    }
}

/// A configured label selector, parsed once; one that does not parse fails every request it is
/// asked about (upstream's `GetParsedNamespaceSelector`/`GetParsedObjectSelector` error). Shared
/// with ValidatingAdmissionPolicy's `matchResources`.
pub type ParsedSelector = Result<Selector, String>;

/// Parses a configured selector; absent is the default `{}`: everything.
pub fn parse_selector(
    s: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> ParsedSelector {
    match s {
        None => Ok(Selector::everything()),
        Some(s) => label_selector_as_selector(Some(s)).map_err(|e| e.to_string()),
    }
}

/// `objectSelector` against the object and the old object: either matching is enough.
pub fn object_matches(selector: &ParsedSelector, req: &Request<'_>) -> Result<bool, String> {
    let selector = selector.as_ref().map_err(Clone::clone)?;
    if selector.is_empty() {
        return Ok(true);
    }
    let matches = |o: Option<&Value>| o.is_some_and(|o| selector.matches(&api::meta::labels(o)));
    Ok(matches(req.object) || matches(req.old))
}

/// `namespaceSelector`, with the labels of the request's namespace from `namespace_labels`
/// (`None`: the namespace does not exist).
pub fn namespace_matches(
    selector: &ParsedSelector,
    req: &Request<'_>,
    namespace_labels: impl FnOnce(&str) -> Option<std::collections::BTreeMap<String, String>>,
) -> Result<bool, NamespaceMiss> {
    let namespace = req.namespace.unwrap_or("");
    let is_namespace = req.group.is_empty() && req.resource == "namespaces";
    if namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    let selector = selector
        .as_ref()
        .map_err(|e| NamespaceMiss::Invalid(e.clone()))?;
    if selector.is_empty() {
        return Ok(true);
    }
    let own = is_namespace
        && req.subresource.is_empty()
        && matches!(req.operation, Operation::Create | Operation::Update);
    let labels = if own {
        req.object.map(api::meta::labels).unwrap_or_default()
    } else {
        let name = if is_namespace { req.name } else { namespace };
        namespace_labels(name).ok_or_else(|| NamespaceMiss::NotFound(name.to_string()))?
    };
    Ok(selector.matches(&labels))
}

/// Why a namespace selector could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceMiss {
    /// The selector does not parse (500).
    Invalid(String),
    /// The namespace does not exist (404, as upstream for backwards compatibility).
    NotFound(String),
}

fn listed(values: &Option<Vec<String>>, value: &str) -> bool {
    values.iter().flatten().any(|v| v == "*" || v == value)
}

/// The request as rules matched it (upstream's `WebhookInvocation`, a policy's `matchResource`):
/// admitted by none (`admits` reads rules exactly) but through an equivalent resource (not
/// `exact`), a subresource of its own kind (a Scale, `autoscaling/v1` in every version) names
/// the matched resource as `resource`, the addressed one as `requestResource`. An object of the
/// resource's own kind would need converting to the matched version: it is sent as addressed.
pub fn invocation<'a>(
    req: &Request<'a>,
    exact: bool,
    admits: impl Fn(&Request<'a>) -> bool,
) -> Request<'a> {
    let own_kind = req.kind_group == req.group && req.kind_version == req.version;
    if exact || own_kind || admits(req) {
        return *req;
    }
    let matched = req.equivalents.iter().find_map(|e| {
        let own = e.group == req.group && e.version == req.version && e.resource == req.resource;
        let as_equivalent = Request {
            group: &e.group,
            version: &e.version,
            resource: &e.resource,
            requested: Some((req.group, req.version, req.resource)),
            ..*req
        };
        (!own && admits(&as_equivalent)).then_some(as_equivalent)
    });
    matched.unwrap_or(*req)
}

/// One rule against the request; with `exact` false, against the resources equivalent to the
/// request's instead (`matchPolicy: Equivalent`: another served version, or the other group of
/// the same storage). Shared with ValidatingAdmissionPolicy.
pub fn rule_matches(rule: &RuleWithOperations, req: &Request<'_>, exact: bool) -> bool {
    if exact {
        return rule_matches_resource(rule, req, req.group, req.version, req.resource);
    }
    req.equivalents.iter().any(|e| {
        let own = e.group == req.group && e.version == req.version && e.resource == req.resource;
        !own && rule_matches_resource(rule, req, &e.group, &e.version, &e.resource)
    })
}

/// One rule against the request as if it were for `group`/`version`/`resource`.
fn rule_matches_resource(
    rule: &RuleWithOperations,
    req: &Request<'_>,
    group: &str,
    version: &str,
    resource: &str,
) -> bool {
    let op = req.operation.as_str();
    if !rule
        .operations
        .iter()
        .flatten()
        .any(|o| o == "*" || o == op)
    {
        return false;
    }
    if !listed(&rule.api_groups, group) || !listed(&rule.api_versions, version) {
        return false;
    }
    let resource_ok = rule
        .resources
        .iter()
        .flatten()
        .any(|r| resource_matches(r, resource, req.subresource));
    if !resource_ok {
        return false;
    }
    match rule.scope.as_deref().unwrap_or("*") {
        "Cluster" => req.namespace.unwrap_or("").is_empty(),
        "Namespaced" => !req.namespace.unwrap_or("").is_empty(),
        _ => true,
    }
}

/// A rule's resource entry against `resource` and `subresource` (`""` for the main resource).
fn resource_matches(entry: &str, resource: &str, subresource: &str) -> bool {
    let (r, s) = entry.split_once('/').unwrap_or((entry, ""));
    let resource_ok = r == "*" || r == resource;
    let sub_ok = if entry.contains('/') {
        s == "*" || s == subresource
    } else {
        subresource.is_empty()
    };
    resource_ok && sub_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::webhook::request::Equivalent;
    use crate::authn::UserInfo;
    use serde_json::json;

    fn hook(rules: Value, extra: Value) -> Hook {
        let mut w = json!({"name": "w.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://127.0.0.1/"},
            "rules": rules});
        if let (Some(w), Value::Object(extra)) = (w.as_object_mut(), extra) {
            w.extend(extra);
        }
        Hook::compile("c", 0, &w).unwrap_or_else(|| panic!("webhook does not decode"))
    }

    /// What this server serves of the request's storage: both autoscaling versions of
    /// horizontalpodautoscalers, only `apps/v1` deployments.
    fn served(group: &str, resource: &str) -> Vec<Equivalent> {
        let served: Vec<(&str, &str)> = match (group, resource) {
            ("autoscaling", "horizontalpodautoscalers") => vec![(group, "v1"), (group, "v2")],
            // Both `Event` groups share one storage.
            ("" | "events.k8s.io", "events") => vec![("", "v1"), ("events.k8s.io", "v1")],
            _ => vec![(group, "v1")],
        };
        served
            .into_iter()
            .map(|(g, v)| Equivalent {
                group: g.into(),
                version: v.into(),
                resource: resource.into(),
            })
            .collect()
    }

    /// The two `Event` groups are one storage: a rule on `events.k8s.io` events sees core
    /// events under `Equivalent`, not under `Exact`.
    #[test]
    fn equivalent_resources_of_another_group() {
        let rule = json!([{"operations": ["*"], "apiGroups": ["events.k8s.io"],
            "apiVersions": ["v1"], "resources": ["events"]}]);
        let core = ("", "v1", "events", "");
        let on = |h: &Hook| check(core, Some("default"), json!({}), |r| h.matches_rules(r));
        assert!(on(&hook(rule.clone(), json!({}))));
        assert!(!on(&hook(rule, json!({"matchPolicy": "Exact"}))));
        let pods = json!([{"operations": ["*"], "apiGroups": ["events.k8s.io"],
            "apiVersions": ["v1"], "resources": ["pods"]}]);
        assert!(!on(&hook(pods, json!({}))));
    }

    /// A request for `group/version resource[/sub]` in `namespace`, labelled `labels`.
    fn check<T>(
        (group, version, resource, sub): (&str, &str, &str, &str),
        namespace: Option<&str>,
        labels: Value,
        f: impl FnOnce(&Request<'_>) -> T,
    ) -> T {
        let user = UserInfo::admin();
        let obj = json!({"metadata": {"name": "n", "labels": labels}});
        let opts = json!({});
        let equivalents = served(group, resource);
        let req = Request {
            operation: Operation::Update,
            group,
            version,
            resource,
            kind_group: group,
            kind_version: version,
            kind: "K",
            subresource: sub,
            name: "n",
            namespace,
            object: Some(&obj),
            old: None,
            user: &user,
            dry_run: false,
            options: &opts,
            equivalents: &equivalents,
            requested: None,
        };
        f(&req)
    }

    #[test]
    fn rules_operations_versions_policy_and_scope() {
        let rule = json!([{"operations": ["UPDATE"], "apiGroups": ["autoscaling"],
            "apiVersions": ["v1"], "resources": ["horizontalpodautoscalers"], "scope": "Namespaced"}]);
        let equivalent = hook(rule.clone(), json!({}));
        let exact = hook(rule, json!({"matchPolicy": "Exact"}));
        let hpa = |v| ("autoscaling", v, "horizontalpodautoscalers", "");
        let ns = Some("default");
        assert!(check(hpa("v1"), ns, json!({}), |r| exact.matches_rules(r)));
        assert!(!check(hpa("v2"), ns, json!({}), |r| exact.matches_rules(r)));
        assert!(check(hpa("v2"), ns, json!({}), |r| equivalent.matches_rules(r)));
        // Cluster scope is not Namespaced.
        assert!(!check(hpa("v1"), None, json!({}), |r| exact.matches_rules(r)));
        let status = ("autoscaling", "v1", "horizontalpodautoscalers", "status");
        assert!(!check(status, ns, json!({}), |r| exact.matches_rules(r)));
        let create_only = hook(
            json!([{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"],
                "resources": ["*"]}]),
            json!({}),
        );
        assert!(!check(hpa("v1"), ns, json!({}), |r| create_only.matches_rules(r)));
    }

    #[test]
    fn namespace_and_object_selectors() {
        let rules = json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
            "resources": ["*"]}]);
        let h = hook(
            rules,
            json!({"namespaceSelector": {"matchLabels": {"env": "prod"}},
                "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}}),
        );
        let cm = ("", "v1", "configmaps", "");
        let prod = |ns: &str| (ns == "p").then(|| [("env".to_string(), "prod".to_string())].into());
        let ns_match =
            |ns: Option<&str>| check(cm, ns, json!({}), |r| h.matches_namespace(r, prod));
        assert_eq!(ns_match(Some("p")), Ok(true));
        assert_eq!(
            ns_match(Some("q")),
            Err(NamespaceMiss::NotFound("q".into()))
        );
        // Cluster-scoped objects other than namespaces are never exempted.
        assert_eq!(ns_match(None), Ok(true));
        // A namespace's own write is matched on its labels.
        let namespace = ("", "v1", "namespaces", "");
        let own = |labels| {
            check(namespace, None, labels, |r| {
                h.matches_namespace(r, |_| None)
            })
        };
        assert_eq!(own(json!({"env": "prod"})), Ok(true));
        assert_eq!(own(json!({})), Ok(false));
        assert_eq!(
            check(cm, None, json!({}), |r| h.matches_object(r)),
            Ok(true)
        );
        assert_eq!(
            check(cm, None, json!({"skip": "1"}), |r| h.matches_object(r)),
            Ok(false)
        );
    }

    /// `*/scale` under `matchPolicy`: `Equivalent` maps a rule naming another served version of
    /// the resource to the request's (`autoscaling/v1` and `v2` horizontalpodautoscalers, as a
    /// custom resource's versions), `Exact` does not; a version no longer served is no
    /// equivalent (`apps/v1beta1` deployments); `*/scale` and `*/*` see every scale,
    /// `deployments` alone none.
    #[test]
    fn scale_rules_and_match_policy() {
        let rule = |resources: Value, versions: Value| {
            json!([{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": versions,
                "resources": resources}])
        };
        let scale = ("apps", "v1", "deployments", "scale");
        let matches = |h: &Hook| check(scale, Some("default"), json!({}), |r| h.matches_rules(r));
        let beta = rule(json!(["deployments/scale"]), json!(["v1beta1"]));
        assert!(!matches(&hook(beta, json!({}))));
        let hpa_scale = ("autoscaling", "v2", "horizontalpodautoscalers", "scale");
        let v1 = json!([{"operations": ["UPDATE"], "apiGroups": ["autoscaling"],
            "apiVersions": ["v1"], "resources": ["horizontalpodautoscalers/scale"]}]);
        let on = |h: &Hook| {
            check(hpa_scale, Some("default"), json!({}), |r| {
                h.matches_rules(r)
            })
        };
        assert!(on(&hook(v1.clone(), json!({}))));
        assert!(!on(&hook(v1, json!({"matchPolicy": "Exact"}))));
        let v1 = rule(json!(["deployments/scale"]), json!(["v1"]));
        assert!(matches(&hook(v1, json!({"matchPolicy": "Exact"}))));
        assert!(matches(&hook(
            rule(json!(["*/scale"]), json!(["*"])),
            json!({})
        )));
        assert!(matches(&hook(
            rule(json!(["*/*"]), json!(["*"])),
            json!({})
        )));
        assert!(!matches(&hook(
            rule(json!(["deployments"]), json!(["v1"])),
            json!({})
        )));
        assert!(!matches(&hook(
            rule(json!(["deployments/status"]), json!(["v1"])),
            json!({})
        )));
        // Another group's deployments are not equivalent here.
        let other = json!([{"operations": ["UPDATE"], "apiGroups": ["extensions"],
            "apiVersions": ["v1beta1"], "resources": ["deployments/scale"]}]);
        assert!(!matches(&hook(other, json!({}))));
    }

    /// A Scale matched through an equivalent version is sent as that version's (`resource`),
    /// with the addressed one as `requestResource`; matched exactly, or an object of the
    /// resource's own kind, it is sent as addressed.
    #[test]
    fn an_equivalent_match_of_a_scale_names_the_matched_resource() {
        let on_v1 = json!([{"operations": ["UPDATE"], "apiGroups": ["autoscaling"],
            "apiVersions": ["v1"], "resources": ["horizontalpodautoscalers/scale"]}]);
        let on_both = json!([{"operations": ["UPDATE"], "apiGroups": ["autoscaling"],
            "apiVersions": ["v1", "v2"], "resources": ["horizontalpodautoscalers/scale"]}]);
        let hpa_scale = ("autoscaling", "v2", "horizontalpodautoscalers", "scale");
        let sent = |h: &Hook, kind: &str| {
            check(hpa_scale, Some("default"), json!({}), |r| {
                let scale = Request {
                    kind_version: "v1",
                    kind,
                    ..*r
                };
                let r = h.invocation(&scale).admission_request("u");
                (
                    r["resource"]["version"].clone(),
                    r["requestResource"]["version"].clone(),
                )
            })
        };
        assert_eq!(
            sent(&hook(on_v1.clone(), json!({})), "Scale"),
            (json!("v1"), json!("v2"))
        );
        assert_eq!(
            sent(&hook(on_both, json!({})), "Scale"),
            (json!("v2"), json!("v2"))
        );
        // The kind of the resource itself (its own version): sent unconverted, as addressed.
        let own = check(hpa_scale, Some("default"), json!({}), |r| {
            let r = hook(on_v1.clone(), json!({})).invocation(r);
            (r.version.to_string(), r.requested.is_some())
        });
        assert_eq!(own, ("v2".to_string(), false));
    }

    #[test]
    fn connect_rules() {
        let exec = json!([{"operations": ["CONNECT"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["pods/exec"]}]);
        let h = hook(exec, json!({}));
        let user = UserInfo::admin();
        let opts = json!({});
        let req = Request {
            operation: Operation::Connect,
            group: "",
            version: "v1",
            resource: "pods",
            kind_group: "",
            kind_version: "v1",
            kind: "PodExecOptions",
            subresource: "exec",
            name: "web",
            namespace: Some("default"),
            object: None,
            old: None,
            user: &user,
            dry_run: false,
            options: &opts,
            equivalents: &[],
            requested: None,
        };
        assert!(h.matches_rules(&req));
        let attach = Request {
            subresource: "attach",
            ..req
        };
        assert!(!h.matches_rules(&attach));
        let update = Request {
            operation: Operation::Update,
            ..req
        };
        assert!(!h.matches_rules(&update));
    }

    #[test]
    fn resource_entries_and_subresources() {
        assert!(resource_matches("pods", "pods", ""));
        assert!(!resource_matches("pods", "pods", "status"));
        assert!(resource_matches("pods/status", "pods", "status"));
        assert!(!resource_matches("pods/status", "pods", ""));
        assert!(resource_matches("*", "configmaps", ""));
        assert!(!resource_matches("*", "pods", "status"));
        assert!(resource_matches("*/status", "deployments", "status"));
        assert!(!resource_matches("*/status", "deployments", "scale"));
        assert!(resource_matches("pods/*", "pods", "binding"));
        assert!(resource_matches("*/*", "pods", ""));
        assert!(resource_matches("*/*", "pods", "exec"));
        assert!(!resource_matches("services", "pods", ""));
    }
}
