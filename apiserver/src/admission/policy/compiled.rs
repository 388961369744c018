//! ValidatingAdmissionPolicies and their bindings compiled once per change (upstream's
//! `validating.compilePolicy` and the generic `policy_matcher`), and matched per request.
//!
//! - A [`Policy`] holds its `matchConstraints` ([`Matcher`]), `paramKind`, `failurePolicy`
//!   (default `Fail`), and every expression compiled on the shared CEL environment with the
//!   request variables typed `dyn` ([`k8s_cel::admission`]): `matchConditions`, `variables`,
//!   `validations` (with `messageExpression`) and `auditAnnotations`. A compile error is kept
//!   with its expression and reported when the expression would run (`compilation error: …`), as
//!   upstream's filter does; it never stops the other expressions.
//! - A [`Binding`] names its policy (`policyName`), may narrow the match (`matchResources`) and
//!   holds its `paramRef` and `validationActions`.
//! - [`Matcher::matches`] is upstream's `matching.Matcher.Matches`: namespace selector, object
//!   selector, `excludeResourceRules`, then `resourceRules` (with `resourceNames`) under
//!   `matchPolicy` (default `Equivalent`), with the webhooks' rule and selector matching
//!   ([`crate::admission::webhook::matching`]).

use k8s_cel::admission::{Composition, Program};
use k8s_cel::compile::Want;
use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ParamRef, RuleWithOperations,
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::Value;

use crate::admission::webhook::matching::{
    namespace_matches, object_matches, parse_selector, rule_matches, NamespaceMiss, ParsedSelector,
};
use crate::admission::webhook::Request;

/// One expression and its compiled program (or compile error).
#[derive(Debug)]
pub struct Compiled {
    pub source: String,
    pub program: Result<Program, String>,
}

/// A `validations[]` entry.
#[derive(Debug)]
pub struct Validation {
    pub expression: Compiled,
    pub message: Option<String>,
    pub message_expression: Option<Compiled>,
    pub reason: Option<String>,
}

/// An `auditAnnotations[]` entry.
#[derive(Debug)]
pub struct AuditAnnotation {
    pub key: String,
    pub value: Compiled,
}

/// `paramKind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamKind {
    pub api_version: String,
    pub kind: String,
}

/// A compiled ValidatingAdmissionPolicy.
#[derive(Debug)]
pub struct Policy {
    pub name: String,
    /// `failurePolicy` is not `Ignore`.
    pub fail: bool,
    /// `matchConstraints` (a policy without them matches nothing).
    pub constraints: Option<Matcher>,
    pub param_kind: Option<ParamKind>,
    /// `matchConditions`: name and expression.
    pub conditions: Vec<Compiled>,
    pub variables: Composition,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<AuditAnnotation>,
}

/// A compiled ValidatingAdmissionPolicyBinding.
#[derive(Debug)]
pub struct Binding {
    pub name: String,
    pub policy_name: String,
    pub param_ref: Option<ParamRef>,
    /// `matchResources` (none: everything the policy matches).
    pub matcher: Option<Matcher>,
    /// `validationActions`: `Deny`, `Warn`, `Audit`.
    pub actions: Vec<String>,
}

/// `matchConstraints` / `matchResources`.
#[derive(Debug)]
pub struct Matcher {
    rules: Vec<(RuleWithOperations, Vec<String>)>,
    exclude: Vec<(RuleWithOperations, Vec<String>)>,
    exact: bool,
    namespace_selector: ParsedSelector,
    object_selector: ParsedSelector,
}

fn named(rules: Option<Vec<NamedRuleWithOperations>>) -> Vec<(RuleWithOperations, Vec<String>)> {
    rules
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            let rule = RuleWithOperations {
                api_groups: r.api_groups,
                api_versions: r.api_versions,
                operations: r.operations,
                resources: r.resources,
                scope: r.scope,
            };
            (rule, r.resource_names.unwrap_or_default())
        })
        .collect()
}

/// Why a matcher could not decide.
pub type MatchError = NamespaceMiss;

impl Matcher {
    fn compile(m: MatchResources) -> Matcher {
        Matcher {
            rules: named(m.resource_rules),
            exclude: named(m.exclude_resource_rules),
            exact: m.match_policy.as_deref() == Some("Exact"),
            namespace_selector: parse_selector(m.namespace_selector.as_ref()),
            object_selector: parse_selector(m.object_selector.as_ref()),
        }
    }

    /// Whether any of `rules` admits `req` (resource names included).
    fn any(&self, rules: &[(RuleWithOperations, Vec<String>)], req: &Request<'_>) -> bool {
        let one = |exact: bool| {
            rules.iter().any(|(rule, names)| {
                (names.is_empty() || names.iter().any(|n| n == req.name))
                    && rule_matches(rule, req, exact)
            })
        };
        one(true) || (!self.exact && one(false))
    }

    /// `req` as these rules matched it: through an equivalent resource, a Scale names the
    /// matched one ([`crate::admission::webhook::matching::invocation`]).
    pub fn invocation<'a>(&self, req: &Request<'a>) -> Request<'a> {
        let exact_rules = |r: &Request<'a>| {
            self.rules.is_empty()
                || self.rules.iter().any(|(rule, names)| {
                    (names.is_empty() || names.iter().any(|n| n == r.name))
                        && rule_matches(rule, r, true)
                })
        };
        crate::admission::webhook::matching::invocation(req, self.exact, exact_rules)
    }

    /// The rules alone: no exclusion and some rule (none: any resource) admits `req`.
    pub fn matches_rules(&self, req: &Request<'_>) -> bool {
        !self.any(&self.exclude, req) && (self.rules.is_empty() || self.any(&self.rules, req))
    }

    /// upstream's `Matches`: selectors, exclusions, then rules (none: any resource); a
    /// selector's error counts only when the rules match.
    pub fn matches(
        &self,
        req: &Request<'_>,
        namespace_labels: &(dyn Fn(&str) -> Option<std::collections::BTreeMap<String, String>>
              + Sync),
    ) -> Result<bool, MatchError> {
        let ns = namespace_matches(&self.namespace_selector, req, namespace_labels);
        if ns == Ok(false) {
            return Ok(false);
        }
        let obj = object_matches(&self.object_selector, req);
        if obj == Ok(false) {
            return Ok(false);
        }
        // No `resourceRules` (a binding's `matchResources`) does not constrain resources.
        if !self.matches_rules(req) {
            return Ok(false);
        }
        obj.map_err(NamespaceMiss::Invalid)?;
        ns
    }
}

fn compiled(policy: &Composition, src: &str, want: Option<Want>) -> Compiled {
    Compiled {
        source: src.to_string(),
        // upstream's compiler prefixes the CEL issues (`compilation failed: ERROR: …`).
        program: policy
            .compile(src, want, &[])
            .map_err(|e| format!("compilation failed: {e}")),
    }
}

/// A `messageExpression`: upstream compiles it without the `authorizer` variable.
fn compiled_message(policy: &Composition, src: &str) -> Compiled {
    Compiled {
        source: src.to_string(),
        program: policy
            .compile_without_authorizer(src, Some(Want::String), &[])
            .map_err(|e| format!("compilation failed: {e}")),
    }
}

impl Policy {
    /// Compiles a stored policy; `None` for one that does not decode.
    pub fn compile(obj: &Value) -> Option<Policy> {
        let p: ValidatingAdmissionPolicy = serde_json::from_value(obj.clone()).ok()?;
        let name = p.metadata.name.unwrap_or_default();
        let spec = p.spec.unwrap_or_default();
        let vars: Vec<(String, String)> = spec
            .variables
            .unwrap_or_default()
            .into_iter()
            .map(|v| (v.name, v.expression))
            .collect();
        let variables = Composition::new(&vars, &[]);
        let conditions = spec
            .match_conditions
            .unwrap_or_default()
            .iter()
            .map(|c| compiled(&variables, &c.expression, Some(Want::Bool)))
            .collect();
        let validations = spec
            .validations
            .unwrap_or_default()
            .into_iter()
            .map(|v| Validation {
                expression: compiled(&variables, &v.expression, Some(Want::Bool)),
                message: v.message,
                message_expression: v
                    .message_expression
                    .map(|m| compiled_message(&variables, &m)),
                reason: v.reason,
            })
            .collect();
        let audit_annotations = spec
            .audit_annotations
            .unwrap_or_default()
            .into_iter()
            .map(|a| AuditAnnotation {
                value: compiled(&variables, &a.value_expression, None),
                key: a.key,
            })
            .collect();
        Some(Policy {
            name,
            fail: spec.failure_policy.as_deref() != Some("Ignore"),
            constraints: spec.match_constraints.map(Matcher::compile),
            param_kind: spec.param_kind.map(|k| ParamKind {
                api_version: k.api_version.unwrap_or_default(),
                kind: k.kind.unwrap_or_default(),
            }),
            conditions,
            variables,
            validations,
            audit_annotations,
        })
    }
}

impl Binding {
    /// Compiles a stored binding; `None` for one that does not decode.
    pub fn compile(obj: &Value) -> Option<Binding> {
        let b: ValidatingAdmissionPolicyBinding = serde_json::from_value(obj.clone()).ok()?;
        let spec = b.spec.unwrap_or_default();
        Some(Binding {
            name: b.metadata.name.unwrap_or_default(),
            policy_name: spec.policy_name.unwrap_or_default(),
            param_ref: spec.param_ref,
            matcher: spec.match_resources.map(Matcher::compile),
            actions: spec.validation_actions.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::webhook::Operation;
    use crate::authn::UserInfo;
    use serde_json::json;

    fn matcher(m: Value) -> Matcher {
        match serde_json::from_value(m) {
            Ok(m) => Matcher::compile(m),
            Err(e) => panic!("{e}"),
        }
    }

    fn check(m: &Matcher, resource: &str, name: &str, labels: Value) -> Result<bool, MatchError> {
        let user = UserInfo::admin();
        let obj = json!({"metadata": {"name": name, "labels": labels}});
        let opts = json!({});
        let req = Request {
            operation: Operation::Create,
            group: "",
            version: "v1",
            resource,
            kind_group: "",
            kind_version: "v1",
            kind: "K",
            subresource: "",
            name,
            namespace: Some("default"),
            object: Some(&obj),
            old: None,
            user: &user,
            dry_run: false,
            options: &opts,
            equivalents: &[],
            requested: None,
        };
        let labels = |_: &str| Some(Default::default());
        m.matches(&req, &labels)
    }

    #[test]
    fn rules_names_exclusions_and_selectors() {
        let all = json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["configmaps", "secrets"]});
        let m = matcher(json!({
            "resourceRules": [all],
            "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["*"], "resources": ["secrets"], "resourceNames": ["keep"]}],
            "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
        }));
        assert_eq!(check(&m, "configmaps", "a", json!({})), Ok(true));
        assert_eq!(check(&m, "secrets", "a", json!({})), Ok(true));
        assert_eq!(check(&m, "secrets", "keep", json!({})), Ok(false));
        assert_eq!(check(&m, "pods", "a", json!({})), Ok(false));
        assert_eq!(
            check(&m, "configmaps", "a", json!({"skip": "y"})),
            Ok(false)
        );
        let named = matcher(
            json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["*"],
            "operations": ["*"], "resources": ["configmaps"], "resourceNames": ["only"]}]}),
        );
        assert_eq!(check(&named, "configmaps", "only", json!({})), Ok(true));
        assert_eq!(check(&named, "configmaps", "other", json!({})), Ok(false));
        let selectors_only = matcher(json!({"objectSelector": {"matchLabels": {"a": "b"}}}));
        assert_eq!(
            check(&selectors_only, "pods", "x", json!({"a": "b"})),
            Ok(true)
        );
        assert_eq!(check(&selectors_only, "pods", "x", json!({})), Ok(false));
    }

    /// The rules alone (a subresource write's pre-check): exclusions count, selectors do not.
    #[test]
    fn rules_alone_ignore_selectors() {
        let m = matcher(json!({
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                "resources": ["configmaps"]}],
            "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["*"], "resources": ["configmaps"], "resourceNames": ["keep"]}],
            "objectSelector": {"matchLabels": {"never": "set"}},
        }));
        let rules = |resource: &str, name: &str| {
            let user = UserInfo::admin();
            let opts = json!({});
            let req = Request {
                operation: Operation::Create,
                group: "",
                version: "v1",
                resource,
                kind_group: "",
                kind_version: "v1",
                kind: "K",
                subresource: "",
                name,
                namespace: Some("default"),
                object: None,
                old: None,
                user: &user,
                dry_run: false,
                options: &opts,
                equivalents: &[],
                requested: None,
            };
            m.matches_rules(&req)
        };
        assert!(rules("configmaps", "a"));
        assert!(!rules("configmaps", "keep"));
        assert!(!rules("secrets", "a"));
        assert_eq!(check(&m, "configmaps", "a", json!({})), Ok(false));
    }

    #[test]
    fn policies_and_bindings_compile_with_their_errors_kept() {
        let p = Policy::compile(&json!({"metadata": {"name": "p"}, "spec": {
            "failurePolicy": "Ignore",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "variables": [{"name": "n", "expression": "object.metadata.name"}],
            "validations": [{"expression": "variables.n != 'x'"}, {"expression": "object."},
                {"expression": "1 + 1"}],
        }}));
        let Some(p) = p else {
            panic!("policy does not decode")
        };
        assert!(!p.fail);
        assert!(p.constraints.is_none());
        assert_eq!(
            p.param_kind.as_ref().map(|k| k.kind.as_str()),
            Some("ConfigMap")
        );
        assert!(p.validations[0].expression.program.is_ok());
        assert!(p.validations[1].expression.program.is_err());
        assert!(p.validations[2].expression.program.is_err());
        let b = Binding::compile(&json!({"metadata": {"name": "b"},
            "spec": {"policyName": "p", "validationActions": ["Warn", "Audit"]}}));
        let Some(b) = b else {
            panic!("binding does not decode")
        };
        assert_eq!((b.policy_name.as_str(), b.actions.len()), ("p", 2));
    }
}
