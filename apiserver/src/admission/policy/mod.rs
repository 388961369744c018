//! ValidatingAdmissionPolicy (upstream's `admission/plugin/policy/validating` over the generic
//! policy plugin): `ValidatingAdmissionPolicy` objects, bound to requests by
//! `ValidatingAdmissionPolicyBinding`s, validate them with CEL.
//!
//! - [`source`]: policies and bindings followed in the watch cache and compiled once per change;
//!   a request reads a snapshot and pays nothing more when no policy is bound.
//! - [`compiled`]: the compiled objects and `matchConstraints`/`matchResources` matching (the
//!   webhooks' rule and selector matching, shared).
//! - [`evaluate`]: one policy for one binding and param: `matchConditions`, `validations`,
//!   `auditAnnotations`; and the params a binding selects.
//! - [`status`]: the type check written to each policy's status.
//! - [`authorizer`]: the server's authorizer behind the expressions' `authorizer` variable.
//!
//! Where it runs: after the mutating webhooks and the built-in validating plugins, before the
//! validating webhooks (upstream's plugin order); on creates, updates and deletes from clients.
//! Requests for the admission configuration kinds themselves are exempt, as upstream.
//!
//! What a request sees ([`Policies::validate`], upstream's `dispatcher.go`): for each bound
//! policy whose `matchConstraints` match, each binding whose `matchResources` match, each param:
//! a denying decision goes through the binding's `validationActions`: `Deny` refuses (the first
//! denial in policy, binding, validation order: `<resource> "<name>" is forbidden:
//! ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: <message>`, code by
//! reason: 403 Forbidden, 401 Unauthorized, 413 RequestEntityTooLarge, otherwise 422 Invalid),
//! `Warn` adds a `Warning` header, `Audit` the `validation.policy.admission.k8s.io/
//! validation_failure` audit annotation. A binding that cannot be configured (missing params with
//! `Deny`, an unknown param kind) denies under `failurePolicy: Fail` with
//! `failed to configure binding: <error>`. Published audit annotations are kept on the request as
//! `<policy>/<key>`, distinct values of several bindings joined by `, `.

pub mod authorizer;
pub mod compiled;
pub mod evaluate;
pub mod source;
pub mod status;
pub mod typecheck;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_cel::admission::Activation;
use serde_json::{json, Value};

use crate::admission::webhook::{Effects, Request};
use crate::error::Result;
pub use evaluate::ParamSource;
pub use source::Source;

/// `ValidatingAdmissionPolicy`.
pub const VALIDATING_ADMISSION_POLICY: &str = "ValidatingAdmissionPolicy";

/// What evaluation reads besides the request.
pub struct Lookups<'a> {
    /// A namespace object by name.
    pub namespace: &'a (dyn Fn(&str) -> Option<Arc<Value>> + Sync),
    pub params: &'a dyn ParamSource,
    /// The `authorizer` variable of this request (made only when a policy is evaluated).
    pub authorizer: &'a (dyn Fn() -> k8s_cel::library::authz::AuthorizerVal + Sync),
}

/// The plugin over one [`Source`].
#[derive(Debug, Default)]
pub struct Policies {
    pub source: Arc<Source>,
    enabled: bool,
}

/// A refusal being collected: policy, binding, message and reason.
struct Denied {
    policy: String,
    /// `None` for an error of the policy itself (no binding was reached).
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

/// `reasonToCode`.
fn reason_code(reason: &str) -> i32 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

impl Policies {
    /// The plugin, enabled or not.
    pub fn new(enabled: bool) -> Self {
        Policies {
            source: Arc::default(),
            enabled,
        }
    }

    /// Whether any policy could apply to a request for `group`/`resource`.
    pub fn any(&self, group: &str, resource: &str) -> bool {
        self.enabled
            && !crate::admission::webhook::exempt(group, resource)
            && !self.source.is_empty()
    }

    /// Whether the `matchConstraints` rules of some policy admit `req` (its operation, resource,
    /// subresource, scope and name; not its objects or namespace): a subresource's write builds
    /// the object policies would see (a Scale) only then. A binding only narrows its policy.
    pub fn any_rules_match(&self, req: &Request<'_>) -> bool {
        self.any(req.group, req.resource)
            && self.source.snapshot().hooks.iter().any(|h| {
                h.policy
                    .constraints
                    .as_ref()
                    .is_some_and(|c| c.matches_rules(req))
            })
    }

    /// Validates `req` against every bound policy; `gr` names the resource in refusals.
    pub fn validate(
        &self,
        req: &Request<'_>,
        fx: &Effects<'_>,
        gr: &str,
        lookups: &Lookups<'_>,
    ) -> Result<()> {
        if !self.any(req.group, req.resource) {
            return Ok(());
        }
        let snapshot = self.source.snapshot();
        let mut authorizer = None;
        let mut denied: Vec<Denied> = Vec::new();
        let mut request: Option<Value> = None;
        let null = Value::Null;
        let namespace_labels = |ns: &str| (lookups.namespace)(ns).map(|o| api::meta::labels(&o));
        for hook in &snapshot.hooks {
            let policy = &hook.policy;
            // A policy without `matchConstraints` matches nothing; one whose constraints cannot
            // be evaluated (a selector that does not parse, a namespace that is gone) is a
            // configuration error under its failure policy, as upstream's `addConfigError`.
            let Some(constraints) = &policy.constraints else {
                continue;
            };
            match constraints.matches(req, &namespace_labels) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    if policy.fail {
                        denied.push(Denied {
                            policy: policy.name.clone(),
                            binding: None,
                            message: format!("failed to configure policy: {}", miss_message(e)),
                            reason: None,
                        });
                    }
                    continue;
                }
            }
            // The `request` variable names the resource the constraints matched (a Scale
            // matched through an equivalent version: that version's).
            let invoked = constraints.invocation(req);
            let mut own_request = None;
            let mut audit: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for binding in &hook.bindings {
                let config_error = |denied: &mut Vec<Denied>, e: String| {
                    if policy.fail {
                        denied.push(Denied {
                            policy: policy.name.clone(),
                            binding: Some(binding.name.clone()),
                            message: format!("failed to configure binding: {e}"),
                            reason: None,
                        });
                    }
                };
                match binding
                    .matcher
                    .as_ref()
                    .map(|m| m.matches(req, &namespace_labels))
                {
                    None | Some(Ok(true)) => {}
                    Some(Ok(false)) => continue,
                    Some(Err(e)) => {
                        config_error(&mut denied, miss_message(e));
                        continue;
                    }
                }
                let namespace = req.namespace.unwrap_or("");
                let params = match evaluate::collect_params(
                    policy.param_kind.as_ref(),
                    binding.param_ref.as_ref(),
                    namespace,
                    lookups.params,
                ) {
                    Ok(p) => p,
                    Err(e) => {
                        config_error(&mut denied, e);
                        continue;
                    }
                };
                let is_namespace = req.group.is_empty() && req.resource == "namespaces";
                let namespace_object = (!namespace.is_empty() && !is_namespace)
                    .then(|| (lookups.namespace)(namespace))
                    .flatten()
                    .map(|ns| namespace_object(&ns));
                let request = match invoked.requested {
                    None => request.get_or_insert_with(|| req.admission_request("")),
                    Some(_) => own_request.get_or_insert_with(|| invoked.admission_request("")),
                };
                let authorizer = authorizer.get_or_insert_with(|| (lookups.authorizer)());
                for param in &params {
                    let act = Activation::new(
                        &policy.variables,
                        [
                            req.object.unwrap_or(&null),
                            req.old.unwrap_or(&null),
                            request,
                            param.as_deref().unwrap_or(&null),
                            namespace_object.as_ref().unwrap_or(&null),
                        ],
                    )
                    .with_authorizer(authorizer.clone());
                    let result = evaluate::evaluate(policy, &act);
                    for d in result.denials {
                        for action in &binding.actions {
                            match action.as_str() {
                                "Deny" => denied.push(Denied {
                                    policy: policy.name.clone(),
                                    binding: Some(binding.name.clone()),
                                    message: d.message.clone(),
                                    reason: d.reason.clone(),
                                }),
                                "Warn" => fx.warnings.push(format!(
                                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                                    policy.name, binding.name, d.message
                                )),
                                "Audit" => fx.audit.add(
                                    "validation.policy.admission.k8s.io/validation_failure".into(),
                                    json!([{"message": d.message, "policy": binding.policy_name,
                                        "binding": binding.name, "expressionIndex": d.index,
                                        "validationActions": binding.actions}])
                                    .to_string(),
                                ),
                                _ => {}
                            }
                        }
                    }
                    for (key, value) in result.audit {
                        let values = audit.entry(key).or_default();
                        if !values.contains(&value) {
                            values.push(value);
                        }
                    }
                    denied.extend(result.audit_errors.into_iter().map(|message| Denied {
                        policy: policy.name.clone(),
                        binding: Some(binding.name.clone()),
                        message,
                        reason: None,
                    }));
                }
            }
            for (key, values) in audit {
                fx.audit
                    .add(format!("{}/{key}", policy.name), values.join(", "));
            }
        }
        match denied.into_iter().next() {
            None => Ok(()),
            Some(d) => Err(refusal(req, gr, d)),
        }
    }
}

/// upstream's `CreateNamespaceObject`: the namespace's spec, status and the metadata fields
/// policies may read (not its managed fields or owners).
fn namespace_object(ns: &Value) -> Value {
    const KEPT: [&str; 13] = [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
        "selfLink",
    ];
    let metadata: serde_json::Map<String, Value> = ns
        .get("metadata")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| KEPT.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut out = json!({"metadata": metadata});
    for part in ["spec", "status"] {
        if let (Some(v), Some(o)) = (ns.get(part), out.as_object_mut()) {
            o.insert(part.into(), v.clone());
        }
    }
    out
}

fn miss_message(e: compiled::MatchError) -> String {
    match e {
        compiled::MatchError::Invalid(e) => e,
        compiled::MatchError::NotFound(ns) => format!("namespaces \"{ns}\" not found"),
    }
}

/// upstream's refusal: `NewForbidden` with the reason and code of the decision.
fn refusal(req: &Request<'_>, gr: &str, d: Denied) -> crate::error::ApiError {
    let message = match &d.binding {
        Some(binding) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
            d.policy, binding, d.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            d.policy, d.message
        ),
    };
    let name = if req.name.is_empty() {
        "Unknown"
    } else {
        req.name
    };
    let mut status = api::status::forbidden(gr, name, &message);
    let reason = d.reason.unwrap_or_else(|| "Invalid".into());
    status.code = Some(reason_code(&reason));
    status.reason = Some(reason);
    if let Some(details) = status.details.as_mut() {
        details.causes.get_or_insert_with(Vec::new).push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause {
                message: Some(message),
                ..Default::default()
            },
        );
    }
    status.into()
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
