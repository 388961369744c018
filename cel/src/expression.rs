//! Schemaless expressions over named JSON variables: admission `matchConditions` (upstream's
//! `k8s.io/apiserver/pkg/admission/plugin/cel` filter with `object`, `oldObject` and `request`).
//!
//! An [`Expression`] is parsed once on the shared environment ([`crate::env::ENV`]) and
//! instrumented for run-time cost; [`Expression::eval_bool`] converts each variable with
//! [`crate::convert::untyped`] (JSON's own types; `null` for an absent object) and evaluates it
//! under [`crate::cost::PER_CALL_LIMIT`]. Errors carry cel-go's run-time texts.
//! [`Expression::eval_bool_with`] binds the `authorizer` variable too (the authz library).

use crate::convert::untyped;
use crate::cost::PER_CALL_LIMIT;
use crate::env::{Meter, COST_EXCEEDED, ENV};
use crate::library::authz::AuthorizerVal;
use cel::common::types::CelBool;
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::Context;
use serde_json::Value;

/// A parsed, instrumented expression.
#[derive(Debug)]
pub struct Expression {
    expr: cel::parser::Expression,
}

struct Vars<'a> {
    vars: Vec<(&'a str, Box<dyn Val + 'a>)>,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        self.vars
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| CowVal::Borrowed(v.as_ref()))
    }
}

impl Expression {
    /// Parses `src`; the error is the parser's text.
    pub fn compile(src: &str) -> Result<Expression, String> {
        crate::compile::parse(src).map(|expr| Expression { expr })
    }

    /// Evaluates to a bool with `vars` bound; a result of another type is cel-go's
    /// `no such overload`-style error naming the type.
    pub fn eval_bool(&self, vars: &[(&str, &Value)]) -> Result<bool, String> {
        self.eval_bool_with(vars, None).0
    }

    /// [`eval_bool`](Self::eval_bool) with `authorizer` bound, when given, and the cost the
    /// evaluation took (for a budget over several expressions).
    pub fn eval_bool_with(
        &self,
        vars: &[(&str, &Value)],
        authorizer: Option<&AuthorizerVal>,
    ) -> (Result<bool, String>, u64) {
        let mut bound: Vec<(&str, Box<dyn Val + '_>)> =
            vars.iter().map(|(n, v)| (*n, untyped(v))).collect();
        if let Some(a) = authorizer {
            bound.push((crate::admission::AUTHORIZER, Box::new(a.clone())));
        }
        let resolver = Vars { vars: bound };
        let mut ctx = Context::with_env(ENV.clone());
        ctx.set_variable_resolver(&resolver);
        let (out, usage) = Meter::run(0, PER_CALL_LIMIT, || {
            cel::Value::resolve_val(&self.expr, &ctx)
                .map(|v| v.downcast_ref::<CelBool>().map(|b| *b.inner()))
        });
        let result = match out {
            _ if usage.exceeded => Err(COST_EXCEEDED.to_owned()),
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err("expression did not evaluate to a bool".to_owned()),
            Err(e) => Err(crate::errors::runtime_message(&e)),
        };
        (result, usage.cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_over_the_request_and_the_object() {
        let object = json!({"metadata": {"name": "p", "labels": {"team": "a"}}});
        let request = json!({"operation": "CREATE", "userInfo": {"username": "u"}});
        let vars = [
            ("object", &object),
            ("request", &request),
            ("oldObject", &Value::Null),
        ];
        let eval = |src: &str| Expression::compile(src).and_then(|e| e.eval_bool(&vars));
        assert_eq!(eval("object.metadata.labels.team == 'a'"), Ok(true));
        assert_eq!(eval("request.operation == 'UPDATE'"), Ok(false));
        assert_eq!(eval("oldObject == null"), Ok(true));
        assert_eq!(
            eval("object.metadata.labels.missing == 'x'"),
            Err("no such key: missing".into())
        );
        assert!(eval("'a'").is_err());
        assert!(Expression::compile("object.").is_err());
    }
}
