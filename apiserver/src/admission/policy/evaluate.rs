//! One policy evaluated for one binding and one param (upstream's `validating/validator.go`
//! `Validate`), and the params a binding selects (the generic dispatcher's `CollectParams`).
//!
//! Evaluation order and outcome, as upstream:
//! 1. `matchConditions`: any `false` skips the policy (no decision); otherwise errors (compile
//!    or evaluation, joined as Go's aggregate) are one decision under `failurePolicy`: `Fail`
//!    denies with the errors, `Ignore` admits.
//! 2. `validations`, each a decision: `true` admits; `false` (or any non-`true` value) denies
//!    with `reason` (default `Invalid`) and the message: `messageExpression`'s string when it is
//!    non-blank, at most 5120 bytes and one line, else `message`, else
//!    `failed expression: <expression>`. An error (compile: `compilation error: …`, run time:
//!    `expression '<e>' resulted in error: …`) is a decision under `failurePolicy`.
//! 3. `auditAnnotations`: a non-blank string is published (cut at 10 KiB), `null` or blank is
//!    not; another type or an error is, under `Fail`, a denial.
//! 4. Cost: each expression is limited to `PerCallLimit` (`operation cancelled: actual cost limit
//!    exceeded`, an evaluation error); `matchConditions` to `RuntimeCELCostBudgetMatchConditions`
//!    in all, the validations with their messages and the audit annotations each to
//!    `RuntimeCELCostBudget` ([`OUT_OF_BUDGET`], one error decision in place of the step's
//!    others).
//!
//! Every expression of one evaluation shares an [`Activation`]: `variables` are computed at most
//! once per binding and param.

use std::sync::Arc;

use k8s_cel::admission::{Activation, Output};
use k8s_openapi::api::admissionregistration::v1::ParamRef;
use serde_json::Value;

use super::compiled::{Compiled, ParamKind, Policy};

/// upstream's `MaxEvaluatedMessageExpressionSizeBytes` (`apiserver/pkg/apis/cel/config.go`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
/// upstream's `maxAuditAnnotationValueLength` (`validating/dispatcher.go`).
const MAX_AUDIT_VALUE_BYTES: usize = 10 * 1024;

/// One validation's outcome that is not an admit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The index of the validation (0 for a match-condition or configuration error).
    pub index: usize,
    pub message: String,
    /// `None` for errors (upstream leaves the reason empty; the refusal is then `Invalid`).
    pub reason: Option<String>,
}

/// What evaluating a policy produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Result {
    /// Decisions that deny (each then goes through the binding's `validationActions`).
    pub denials: Vec<Denial>,
    /// Audit annotations to publish (key, value).
    pub audit: Vec<(String, String)>,
    /// Audit-annotation errors under `Fail`: denials whatever the actions.
    pub audit_errors: Vec<String>,
}

/// `strings.TrimSpace`.
fn trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace())
}

fn run(act: &Activation<'_>, c: &Compiled) -> std::result::Result<Output, String> {
    let program = c
        .program
        .as_ref()
        .map_err(|e| format!("compilation error: {e}"))?;
    act.eval(program)
        .map_err(|e| format!("expression '{}' resulted in error: {e}", c.source))
}

/// Go's `utilerrors.NewAggregate(errs).Error()`.
fn aggregate(mut errors: Vec<String>) -> String {
    match errors.len() {
        1 => errors.remove(0),
        _ => format!("[{}]", errors.join(", ")),
    }
}

pub use k8s_cel::cost::OUT_OF_BUDGET;

/// A cost budget spent across expressions (upstream's `remainingBudget` of `ForInput`).
struct Budget(u64);

impl Budget {
    fn new(budget: u64) -> Budget {
        Budget(budget)
    }

    /// Charges what `act` spent since the last charge (the variables it evaluated included);
    /// `Err` once the budget is exceeded.
    fn charge(&mut self, act: &Activation<'_>) -> std::result::Result<(), ()> {
        let cost = act.take_cost();
        if cost > self.0 {
            return Err(());
        }
        self.0 -= cost;
        Ok(())
    }
}

/// Evaluates `policy` with `act`'s bindings: `matchConditions` within
/// `RuntimeCELCostBudgetMatchConditions`, `validations` and then every `messageExpression`
/// within `RuntimeCELCostBudget` (the messages get what the validations left),
/// `auditAnnotations` within another. A budget exceeded replaces every decision with one error
/// under `failurePolicy`.
pub fn evaluate(policy: &Policy, act: &Activation<'_>) -> Result {
    let mut out = Result::default();
    let error = |out: &mut Result, index, message| {
        if policy.fail {
            out.denials.push(Denial {
                index,
                message,
                reason: None,
            });
        }
    };
    act.take_cost();
    let mut errors = Vec::new();
    let mut budget = Budget::new(k8s_cel::cost::RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS);
    for c in &policy.conditions {
        let result = run(act, c);
        if budget.charge(act).is_err() {
            // The filter's error alone, as upstream's matcher returns it.
            errors = vec![OUT_OF_BUDGET.to_string()];
            break;
        }
        match result {
            Ok(Output::Bool(true)) => {}
            Ok(Output::Bool(false)) => return out,
            Ok(_) => errors.push(format!(
                "expression '{}' resulted in error: matchCondition didn't return bool",
                c.source
            )),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        error(&mut out, 0, aggregate(errors));
        return out;
    }
    let mut budget = Budget::new(k8s_cel::cost::RUNTIME_CEL_COST_BUDGET);
    let mut results = Vec::with_capacity(policy.validations.len());
    for v in &policy.validations {
        let result = run(act, &v.expression);
        if budget.charge(act).is_err() {
            error(&mut out, 0, OUT_OF_BUDGET.to_string());
            return out;
        }
        results.push(result);
    }
    // Every messageExpression, with what the validations left.
    let mut messages = Vec::with_capacity(policy.validations.len());
    let mut messages_out_of_budget = false;
    for v in &policy.validations {
        let message = match &v.message_expression {
            Some(m) if !messages_out_of_budget => {
                let result = run(act, m);
                messages_out_of_budget = budget.charge(act).is_err();
                result.ok()
            }
            _ => None,
        };
        messages.push(message);
    }
    for (index, ((v, result), message)) in policy
        .validations
        .iter()
        .zip(results)
        .zip(messages)
        .enumerate()
    {
        match result {
            Err(e) => error(&mut out, index, e),
            Ok(_) if messages_out_of_budget => error(
                &mut out,
                index,
                format!("failed messageExpression: {OUT_OF_BUDGET}"),
            ),
            Ok(Output::Bool(true)) => {}
            Ok(_) => {
                let from_expression = match message {
                    Some(Output::String(s)) => Some(trim(&s).to_string()),
                    _ => None,
                }
                .filter(|m| m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'))
                .filter(|m| !m.is_empty());
                let message = from_expression
                    .or_else(|| {
                        v.message
                            .as_deref()
                            .map(trim)
                            .filter(|m| !m.is_empty())
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| {
                        format!("failed expression: {}", trim(&v.expression.source))
                    });
                out.denials.push(Denial {
                    index,
                    message,
                    reason: Some(v.reason.clone().unwrap_or_else(|| "Invalid".into())),
                });
            }
        }
    }
    let mut budget = Budget::new(k8s_cel::cost::RUNTIME_CEL_COST_BUDGET);
    for a in &policy.audit_annotations {
        let result = run(act, &a.value);
        if budget.charge(act).is_err() {
            out.denials.clear();
            out.audit.clear();
            out.audit_errors.clear();
            error(&mut out, 0, OUT_OF_BUDGET.to_string());
            return out;
        }
        match result {
            Ok(Output::String(s)) => {
                let value = trim(&s);
                if !value.is_empty() {
                    let mut end = value.len().min(MAX_AUDIT_VALUE_BYTES);
                    while !value.is_char_boundary(end) {
                        end -= 1;
                    }
                    out.audit.push((a.key.clone(), value[..end].to_string()));
                }
            }
            Ok(Output::Null) => {}
            Ok(other) => {
                let ty = match other {
                    Output::Bool(_) => "bool".to_string(),
                    Output::Other(t) => t,
                    _ => String::new(),
                };
                out.audit_errors.push(format!(
                    "valueExpression '{}' resulted in unsupported return type: {ty}. Return type must be either string or null.",
                    a.value.source
                ));
            }
            Err(e) if policy.fail => out.audit_errors.push(e),
            Err(_) => {}
        }
    }
    out
}

/// The objects params are read from (the watch cache of the param kind).
pub trait ParamSource: Sync {
    /// Whether `kind` is namespaced; `None` when no served resource has that kind.
    fn namespaced(&self, kind: &ParamKind) -> Option<bool>;
    /// The object `name` of `kind` in `namespace`.
    fn get(&self, kind: &ParamKind, namespace: Option<&str>, name: &str) -> Option<Arc<Value>>;
    /// The objects of `kind` in `namespace` (every namespace when `None`).
    fn list(&self, kind: &ParamKind, namespace: Option<&str>) -> Vec<Arc<Value>>;
}

/// Go's `%v` of a `*ParamKind` (its protobuf `String()`).
fn kind_string(k: &ParamKind) -> String {
    format!(
        "&ParamKind{{APIVersion:{},Kind:{},}}",
        k.api_version, k.kind
    )
}

/// upstream's `CollectParams`: the params to evaluate with (`None`: the policy takes none); an
/// empty list means the binding is skipped (not found, `parameterNotFoundAction: Allow`); the
/// error is a configuration error of the binding.
pub fn collect_params(
    kind: Option<&ParamKind>,
    param_ref: Option<&ParamRef>,
    namespace: &str,
    source: &dyn ParamSource,
) -> std::result::Result<Vec<Option<Arc<Value>>>, String> {
    let (Some(kind), Some(r)) = (kind, param_ref) else {
        return Ok(vec![None]);
    };
    let Some(namespaced) = source.namespaced(kind) else {
        return Err(format!("paramKind kind `{}` not known", kind_string(kind)));
    };
    let ref_namespace = r.namespace.as_deref().unwrap_or("");
    let scope = if namespaced {
        let ns = if ref_namespace.is_empty() {
            namespace
        } else {
            ref_namespace
        };
        if ns.is_empty() {
            return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
        }
        Some(ns)
    } else {
        if !ref_namespace.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        }
        None
    };
    let name = r.name.as_deref().unwrap_or("");
    let params: Vec<Arc<Value>> = if !name.is_empty() {
        if r.selector.is_some() {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        source.get(kind, scope, name).into_iter().collect()
    } else if let Some(selector) = &r.selector {
        let selector =
            api::labels::label_selector_as_selector(Some(selector)).map_err(|e| e.to_string())?;
        source
            .list(kind, scope)
            .into_iter()
            .filter(|p| selector.matches(&api::meta::labels(p)))
            .collect()
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if params.is_empty() && r.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(params.into_iter().map(Some).collect())
}

#[cfg(test)]
#[path = "evaluate_tests.rs"]
mod tests;
