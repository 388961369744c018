//! The audit policy (`audit.k8s.io/v1` `Policy`): loading, validation and the rule checker, as
//! kube-apiserver's `audit/policy` (`reader.go`, `checker.go`) and
//! `apis/audit/validation/validation.go`.
//!
//! Loading: a YAML or JSON document whose `apiVersion` is `audit.k8s.io/v1` and `kind` is
//! `Policy`; unknown fields are ignored (upstream's decoder is not strict). Validation reports
//! every problem at once with upstream's field paths (`rules[0].level: Unsupported value: …`)
//! and a policy without rules is refused, so a mistyped file stops the server at start-up
//! instead of silently auditing nothing.
//!
//! Checking: the first rule that matches a request decides its level and omitted stages
//! (`None` and the policy's own `omitStages` when none does). Each rule's `omitStages` is the
//! union of its own and the policy's; its `omitManagedFields` falls back to the policy's. A rule
//! matches when every field it sets matches: `users`, `userGroups` (any group), `verbs`, then
//! either the resource fields (`namespaces`, `resources` with `group`, `resources` in the forms
//! `pods`, `pods/log`, `*`, `*/log`, `pods/*`, and `resourceNames`) for resource requests or
//! `nonResourceURLs` (exact, `*`, or a `prefix*`) for the others.

use serde::Deserialize;
use serde_json::Value;

use crate::authz::rbac::Attributes;
use api::validation::FieldError;

/// How much of a request an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    /// The level's name in the event and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }

    const NAMES: [&'static str; 4] = ["None", "Metadata", "Request", "RequestResponse"];
}

/// The stages of a request an event is written at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

impl Stage {
    /// The stage's name in the event.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }

    const NAMES: [&'static str; 4] = [
        "RequestReceived",
        "ResponseStarted",
        "ResponseComplete",
        "Panic",
    ];

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "RequestReceived" => Stage::RequestReceived,
            "ResponseStarted" => Stage::ResponseStarted,
            "ResponseComplete" => Stage::ResponseComplete,
            "Panic" => Stage::Panic,
            _ => return None,
        })
    }
}

/// What the policy decides for one request (upstream's `RequestAuditConfigWithLevel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestAuditConfig {
    pub level: Level,
    pub omit_stages: Vec<Stage>,
    pub omit_managed_fields: bool,
}

impl RequestAuditConfig {
    /// Whether events at `stage` are written.
    pub fn writes(&self, stage: Stage) -> bool {
        !self.omit_stages.contains(&stage)
    }
}

/// `GroupResources`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupResources {
    pub group: String,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
}

/// `PolicyRule`, its stages already joined with the policy's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    pub level: Level,
    pub users: Vec<String>,
    pub user_groups: Vec<String>,
    pub verbs: Vec<String>,
    pub resources: Vec<GroupResources>,
    pub namespaces: Vec<String>,
    pub non_resource_urls: Vec<String>,
    pub omit_stages: Vec<Stage>,
    pub omit_managed_fields: bool,
}

/// A loaded, valid policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub rules: Vec<PolicyRule>,
    pub omit_stages: Vec<Stage>,
    pub omit_managed_fields: bool,
}

/// Why a policy was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("failed to read file path {path:?}: {source}")]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed decoding: {0}")]
    Decode(String),
    #[error("unknown group version field {0} in policy")]
    GroupVersion(String),
    /// Field errors, aggregated as apimachinery does (one alone, several in brackets).
    #[error("{}", aggregate(.0))]
    Invalid(Vec<FieldError>),
    #[error("loaded illegal policy with 0 rules")]
    NoRules,
}

fn aggregate(errs: &[FieldError]) -> String {
    let texts: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    match texts.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", texts.join(", ")),
    }
}

/// The wire form, read leniently: validation reports what is wrong with upstream's paths.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WirePolicy {
    api_version: Option<String>,
    kind: Option<String>,
    rules: Vec<WireRule>,
    omit_stages: Vec<String>,
    omit_managed_fields: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireRule {
    level: String,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<WireGroupResources>,
    namespaces: Vec<String>,
    #[serde(rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    omit_stages: Vec<String>,
    omit_managed_fields: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireGroupResources {
    group: String,
    resources: Vec<String>,
    resource_names: Vec<String>,
}

impl Policy {
    /// Reads and validates the policy file at `path` (`--audit-policy-file`).
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read(path).map_err(|source| {
            PolicyError::Read {
                path: path.to_path_buf(),
                source,
            }
            .to_string()
        })?;
        Self::from_bytes(&text).map_err(|e| format!("{e}: from file {}", path.display()))
    }

    /// Parses and validates a policy document (YAML or JSON).
    pub fn from_bytes(text: &[u8]) -> Result<Self, PolicyError> {
        // JSON is YAML: one parser reads both.
        let value: Value =
            serde_yaml::from_slice(text).map_err(|e| PolicyError::Decode(e.to_string()))?;
        let wire: WirePolicy =
            serde_json::from_value(value).map_err(|e| PolicyError::Decode(e.to_string()))?;
        let kind = wire.kind.as_deref().unwrap_or_default();
        if kind.is_empty() {
            return Err(PolicyError::Decode("Object 'Kind' is missing".into()));
        }
        let api_version = wire.api_version.as_deref().unwrap_or_default();
        if api_version != "audit.k8s.io/v1" || kind != "Policy" {
            return Err(PolicyError::GroupVersion(format!(
                "{api_version}, Kind={kind}"
            )));
        }
        let mut errs = Vec::new();
        let policy_stages = stages(&wire.omit_stages, "omitStages", &mut errs);
        let mut rules = Vec::with_capacity(wire.rules.len());
        for (i, rule) in wire.rules.into_iter().enumerate() {
            if let Some(rule) = validate_rule(
                rule,
                &format!("rules[{i}]"),
                wire.omit_managed_fields,
                &mut errs,
            ) {
                rules.push(rule);
            }
        }
        if !errs.is_empty() {
            return Err(PolicyError::Invalid(errs));
        }
        if rules.is_empty() {
            return Err(PolicyError::NoRules);
        }
        for rule in &mut rules {
            for s in &policy_stages {
                if !rule.omit_stages.contains(s) {
                    rule.omit_stages.push(*s);
                }
            }
        }
        Ok(Policy {
            rules,
            omit_stages: policy_stages,
            omit_managed_fields: wire.omit_managed_fields,
        })
    }

    /// The level and stages of a request with `attrs`; `user_known` is false for a request
    /// whose authentication failed (rules naming users or groups never match it).
    pub fn evaluate(&self, attrs: &Attributes, user_known: bool) -> RequestAuditConfig {
        for rule in &self.rules {
            if rule_matches(rule, attrs, user_known) {
                return RequestAuditConfig {
                    level: rule.level,
                    omit_stages: rule.omit_stages.clone(),
                    omit_managed_fields: rule.omit_managed_fields,
                };
            }
        }
        RequestAuditConfig {
            level: Level::None,
            omit_stages: self.omit_stages.clone(),
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

fn stages(names: &[String], path: &str, errs: &mut Vec<FieldError>) -> Vec<Stage> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        match Stage::parse(name) {
            Some(s) => {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
            None => errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                name,
                format!("allowed stages are {}", Stage::NAMES.join(",")),
            )),
        }
    }
    out
}

/// The rule at `path`, or `None` with its problems added to `errs`; a rule without its own
/// `omitManagedFields` takes the policy's.
fn validate_rule(
    rule: WireRule,
    path: &str,
    policy_omit_managed_fields: bool,
    errs: &mut Vec<FieldError>,
) -> Option<PolicyRule> {
    let before = errs.len();
    let level = match rule.level.as_str() {
        "None" => Some(Level::None),
        "Metadata" => Some(Level::Metadata),
        "Request" => Some(Level::Request),
        "RequestResponse" => Some(Level::RequestResponse),
        "" => {
            errs.push(FieldError::required(format!("{path}.level"), ""));
            None
        }
        other => {
            errs.push(FieldError::not_supported(
                format!("{path}.level"),
                &Value::from(other),
                &Level::NAMES,
            ));
            None
        }
    };
    for (i, url) in rule.non_resource_urls.iter().enumerate() {
        if url == "*" {
            continue;
        }
        let p = format!("{path}.nonResourceURLs[{i}]");
        if !url.starts_with('/') {
            errs.push(FieldError::invalid(
                &p,
                url,
                "non-resource URL rules must begin with a '/' character",
            ));
        }
        if !url.is_empty() && url[..url.len() - 1].contains('*') {
            errs.push(FieldError::invalid(
                &p,
                url,
                "non-resource URL wildcards '*' must be the final character of the rule",
            ));
        }
    }
    for gr in &rule.resources {
        if !gr.group.is_empty() {
            let msgs = api::validation::name_is_dns1123_subdomain(&gr.group, false);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{path}.resources.group"),
                    &gr.group,
                    msgs.join(","),
                ));
            }
        }
        if !gr.resource_names.is_empty() && gr.resources.is_empty() {
            errs.push(FieldError::invalid_value(
                format!("{path}.resources.resourceNames"),
                &Value::from(gr.resource_names.clone()),
                "using resourceNames requires at least one resource",
            ));
        }
    }
    let omit_stages = stages(&rule.omit_stages, &format!("{path}.omitStages"), errs);
    if !rule.non_resource_urls.is_empty()
        && (!rule.resources.is_empty() || !rule.namespaces.is_empty())
    {
        errs.push(FieldError::invalid_value(
            format!("{path}.nonResourceURLs"),
            &Value::from(rule.non_resource_urls.clone()),
            "rules cannot apply to both regular resources and non-resource URLs",
        ));
    }
    if errs.len() != before {
        return None;
    }
    Some(PolicyRule {
        level: level?,
        users: rule.users,
        user_groups: rule.user_groups,
        verbs: rule.verbs,
        resources: rule
            .resources
            .into_iter()
            .map(|g| GroupResources {
                group: g.group,
                resources: g.resources,
                resource_names: g.resource_names,
            })
            .collect(),
        namespaces: rule.namespaces,
        non_resource_urls: rule.non_resource_urls,
        omit_stages,
        omit_managed_fields: rule
            .omit_managed_fields
            .unwrap_or(policy_omit_managed_fields),
    })
}

fn rule_matches(r: &PolicyRule, attrs: &Attributes, user_known: bool) -> bool {
    let user = &attrs.user;
    if !r.users.is_empty() && (!user_known || !r.users.contains(&user.username)) {
        return false;
    }
    if !r.user_groups.is_empty()
        && (!user_known || !user.groups.iter().any(|g| r.user_groups.contains(g)))
    {
        return false;
    }
    if !r.verbs.is_empty() && !r.verbs.contains(&attrs.verb) {
        return false;
    }
    if !r.namespaces.is_empty() || !r.resources.is_empty() {
        return resource_matches(r, attrs);
    }
    if !r.non_resource_urls.is_empty() {
        return !attrs.resource_request
            && r.non_resource_urls
                .iter()
                .any(|spec| path_matches(&attrs.path, spec));
    }
    true
}

fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

fn resource_matches(r: &PolicyRule, attrs: &Attributes) -> bool {
    if !attrs.resource_request {
        return false;
    }
    // A cluster-scoped request has the namespace "".
    if !r.namespaces.is_empty() && !r.namespaces.contains(&attrs.namespace) {
        return false;
    }
    if r.resources.is_empty() {
        return true;
    }
    let (resource, sub) = (attrs.resource.as_str(), attrs.subresource.as_str());
    let combined = if sub.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{sub}")
    };
    r.resources
        .iter()
        .filter(|gr| gr.group == attrs.api_group)
        .any(|gr| {
            gr.resources.is_empty()
                || (gr.resource_names.is_empty() || gr.resource_names.contains(&attrs.name))
                    && gr.resources.iter().any(|res| {
                        res == &combined
                            || res == "*"
                            || (!sub.is_empty() && res.strip_prefix("*/") == Some(sub))
                            || res.strip_suffix("/*") == Some(resource)
                    })
        })
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
