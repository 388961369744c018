//! `matchConditions` of a webhook (upstream's `webhook/matchconditions`): CEL expressions over
//! `object`, `oldObject` and `request`, compiled once with the configuration on the shared CEL
//! environment ([`k8s_cel::expression`]).
//!
//! Outcome, as upstream: any condition `false` → the webhook is skipped, whatever errors others
//! had; otherwise errors (of evaluation, or of an expression that did not compile) go by the
//! webhook's `failurePolicy`: `Fail` refuses the request (403 naming the errors), `Ignore`
//! skips the webhook. The `authorizer` variable asks the server's authorizer about the
//! requesting user, as for ValidatingAdmissionPolicies ([`crate::admission::policy::authorizer`]).
//! A webhook's conditions share `RuntimeCELCostBudgetMatchConditions` (2,500,000): past it,
//! upstream's out-of-budget error alone, under the `failurePolicy`.

use k8s_cel::expression::Expression;
use k8s_cel::library::authz::AuthorizerVal;
use k8s_openapi::api::admissionregistration::v1::MatchCondition;
use serde_json::Value;

/// The compiled conditions of one webhook.
#[derive(Debug, Default)]
pub struct Conditions(Vec<(String, Result<Expression, String>)>);

/// What the conditions decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Call,
    Skip,
    /// Errors and no `false`: the errors, joined as Go's aggregate.
    Error(String),
}

impl Conditions {
    /// Compiles each condition (a compile error is kept and reported at evaluation).
    pub fn compile(conditions: &[MatchCondition]) -> Conditions {
        Conditions(
            conditions
                .iter()
                .map(|c| (c.expression.clone(), Expression::compile(&c.expression)))
                .collect(),
        )
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Evaluates every condition with `object`, `oldObject`, `request` and (when given)
    /// `authorizer` bound.
    pub fn decide(
        &self,
        object: &Value,
        old: &Value,
        request: &Value,
        authorizer: Option<&AuthorizerVal>,
    ) -> Decision {
        let vars = [("object", object), ("oldObject", old), ("request", request)];
        let mut errors = Vec::new();
        let mut spent = 0u64;
        for (src, compiled) in &self.0 {
            let compiled = match compiled {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("compilation error: {e}"));
                    continue;
                }
            };
            let (result, cost) = compiled.eval_bool_with(&vars, authorizer);
            // One webhook's conditions share `RuntimeCELCostBudgetMatchConditions`: past it the
            // filter's error alone, under the webhook's failurePolicy.
            spent = spent.saturating_add(cost);
            if spent > k8s_cel::cost::RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS {
                return Decision::Error(k8s_cel::cost::OUT_OF_BUDGET.to_string());
            }
            match result {
                Ok(true) => {}
                Ok(false) => return Decision::Skip,
                Err(e) => errors.push(format!("expression '{src}' resulted in error: {e}")),
            }
        }
        match errors.len() {
            0 => Decision::Call,
            1 => Decision::Error(errors.remove(0)),
            _ => Decision::Error(format!("[{}]", errors.join(", "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conditions(exprs: &[&str]) -> Conditions {
        let list: Vec<MatchCondition> = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| MatchCondition {
                name: format!("c{i}"),
                expression: e.to_string(),
            })
            .collect();
        Conditions::compile(&list)
    }

    #[test]
    fn false_wins_over_errors_and_errors_are_reported() {
        let obj = json!({"metadata": {"name": "p"}});
        let req = json!({"operation": "CREATE"});
        let decide = |c: &Conditions| c.decide(&obj, &Value::Null, &req, None);
        assert_eq!(
            decide(&conditions(&["request.operation == 'CREATE'"])),
            Decision::Call
        );
        assert_eq!(
            decide(&conditions(&[
                "object.nope == 1",
                "request.operation == 'UPDATE'"
            ])),
            Decision::Skip
        );
        assert_eq!(
            decide(&conditions(&["object.nope == 1"])),
            Decision::Error(
                "expression 'object.nope == 1' resulted in error: no such key: nope".into()
            )
        );
        assert_eq!(decide(&conditions(&[])), Decision::Call);
        assert!(matches!(
            decide(&conditions(&["object."])),
            Decision::Error(e) if e.starts_with("compilation error: ")
        ));
    }

    /// Allows `list` and nothing else.
    struct OnlyLists;

    impl k8s_cel::library::authz::Authorize for OnlyLists {
        fn authorize(
            &self,
            _: &k8s_cel::library::authz::Principal,
            question: &k8s_cel::library::authz::Question,
        ) -> k8s_cel::library::authz::Answer {
            k8s_cel::library::authz::Answer {
                allowed: matches!(question,
                    k8s_cel::library::authz::Question::Resource { verb, .. } if verb == "list"),
                ..Default::default()
            }
        }
    }

    #[test]
    fn conditions_may_ask_the_authorizer() {
        let obj = json!({"metadata": {"name": "p"}});
        let req = json!({"operation": "CREATE"});
        let authorizer =
            AuthorizerVal::new(std::sync::Arc::new(OnlyLists), Some(Default::default()));
        let decide =
            |src: &str| conditions(&[src]).decide(&obj, &Value::Null, &req, Some(&authorizer));
        assert_eq!(
            decide("authorizer.group('').resource('secrets').check('list').allowed()"),
            Decision::Call
        );
        assert_eq!(
            decide("authorizer.group('').resource('secrets').check('get').allowed()"),
            Decision::Skip
        );
    }

    #[test]
    fn a_webhooks_conditions_share_one_budget() {
        let obj = json!({"metadata": {"name": "p"}});
        let req = json!({"operation": "CREATE"});
        let authorizer =
            AuthorizerVal::new(std::sync::Arc::new(OnlyLists), Some(Default::default()));
        let check = "authorizer.group('').resource('pods').check('list').allowed()";
        let two_checks = format!("{check} && {check}");
        // Two checks (700,000) each: three fit 2,500,000, the fourth does not.
        let decide = |n: usize| {
            let srcs: Vec<&str> = (0..n).map(|_| two_checks.as_str()).collect();
            conditions(&srcs).decide(&obj, &Value::Null, &req, Some(&authorizer))
        };
        assert_eq!(decide(3), Decision::Call);
        assert_eq!(
            decide(4),
            Decision::Error(k8s_cel::cost::OUT_OF_BUDGET.to_string())
        );
    }
}
