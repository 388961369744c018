//! Admission expressions with composited variables (upstream's `admission/plugin/cel`
//! `CompositedCompiler` and `CompositionContext`, as ValidatingAdmissionPolicy uses them):
//! `validations`, `messageExpression`, `auditAnnotations[].valueExpression` and policy
//! `matchConditions` over `object`, `oldObject`, `request`, `params`, `namespaceObject` and
//! `variables`.
//!
//! - [`Composition::new`] compiles a policy's `variables` in order; each may use the ones
//!   declared before it (`variables.a` in the definition of `b`), as upstream.
//! - [`Composition::compile`] compiles an expression over the variables and the declared
//!   request variables. Typed declarations (a schema [`Node`]) are checked for fields they do not
//!   define (`undefined field 'x'`); a reference to an undeclared variable is
//!   `undefined field 'x'` on `variables`, as cel-go reports it.
//! - [`Activation`] evaluates for one request: each variable at most once, and only when an
//!   expression that is evaluated refers to it (the names an expression selects on `variables`
//!   are known from its AST), so an unused variable that would fail never fails anything.
//!   Upstream is lazier still: a variable referenced only in a branch not taken is not evaluated
//!   there, while here every variable an evaluated expression names is evaluated first (its
//!   error becomes the expression's error).
//! - Each evaluation is metered under [`crate::cost::PER_CALL_LIMIT`]. A variable's value is
//!   kept as a `cel::Value`; a value of a library type without one (a `quantity`, an `ip`) cannot
//!   be kept in a variable here and is the error `no value representation`.
//!
//! - The `authorizer` variable and its `authorizer.requestResource` (the [authz library]
//!   (crate::library::authz)) are declared for every expression compiled with
//!   [`Composition::compile`] and bound by [`Activation::with_authorizer`]; an expression
//!   compiled with [`Composition::compile_without_authorizer`] (upstream's `messageExpression`)
//!   cannot name them.
//! - [`Activation::take_cost`] is the cost spent since it was last taken, the variables an
//!   expression needed included, so the caller can hold a request to its cost budget (upstream's
//!   `RuntimeCELCostBudget`, spent across a policy's expressions).

use crate::compile::{compile_declared, Want};
use crate::convert::untyped;
use crate::cost::PER_CALL_LIMIT;
use crate::env::{Meter, COST_EXCEEDED, ENV};
use crate::library::authz::AuthorizerVal;
use crate::schema::Node;
use cel::common::types::{CelBool, CelMap, CelMapKey, CelNull, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::Context;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

/// The request variables every admission expression may use, in binding order.
pub const REQUEST_VARIABLES: [&str; 5] = [
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
];

/// The authorizer variable (its field `requestResource`: the check of the request's own
/// resource).
pub const AUTHORIZER: &str = "authorizer";

/// One compiled expression and the variables it refers to (indices into the composition).
#[derive(Debug)]
pub struct Program {
    expr: cel::parser::Expression,
    uses: Vec<usize>,
}

/// A policy's compiled `variables`, in declaration order.
#[derive(Debug, Default)]
pub struct Composition {
    names: Vec<String>,
    programs: Vec<Result<Program, String>>,
}

/// What an expression produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Bool(bool),
    String(String),
    Null,
    /// Any other type, by its CEL name.
    Other(String),
}

/// The schema of each request variable (`None`: `dyn`).
pub type Declared<'a> = [(&'a str, Option<Arc<Node>>)];

impl Composition {
    /// Compiles `variables` (`(name, expression)`) in order over `declared`.
    pub fn new(variables: &[(String, String)], declared: &Declared<'_>) -> Composition {
        let mut c = Composition::default();
        for (name, src) in variables {
            let program = c.compile(src, None, declared);
            c.names.push(name.clone());
            c.programs.push(program);
        }
        c
    }

    /// The variables' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The compile error of each variable, by name.
    pub fn errors(&self) -> impl Iterator<Item = (&str, &str)> {
        self.names
            .iter()
            .zip(&self.programs)
            .filter_map(|(n, p)| p.as_ref().err().map(|e| (n.as_str(), e.as_str())))
    }

    /// Compiles `src` over the variables declared so far, `declared` and `authorizer`; `want`
    /// checks a result visibly of another type.
    pub fn compile(
        &self,
        src: &str,
        want: Option<Want>,
        declared: &Declared<'_>,
    ) -> Result<Program, String> {
        self.compile_declaring(src, want, declared, true)
    }

    /// [`compile`](Self::compile) without `authorizer` declared.
    pub fn compile_without_authorizer(
        &self,
        src: &str,
        want: Option<Want>,
        declared: &Declared<'_>,
    ) -> Result<Program, String> {
        self.compile_declaring(src, want, declared, false)
    }

    fn compile_declaring(
        &self,
        src: &str,
        want: Option<Want>,
        declared: &Declared<'_>,
        authorizer: bool,
    ) -> Result<Program, String> {
        let mut all: Vec<(&str, Option<Arc<Node>>)> = declared.to_vec();
        for name in REQUEST_VARIABLES {
            if !declared.iter().any(|(n, _)| *n == name) {
                all.push((name, None));
            }
        }
        if authorizer {
            all.push((AUTHORIZER, None));
        }
        all.push(("variables", None));
        let (expr, names) = compile_declared(src, &all, want)?;
        let mut uses = Vec::with_capacity(names.len());
        for n in names {
            match self.names.iter().position(|v| *v == n) {
                Some(i) => uses.push(i),
                None => {
                    return Err(crate::errors::issue(
                        src,
                        src.find(&format!("variables.{n}"))
                            .and_then(|o| u32::try_from(o + "variables".len()).ok()),
                        &format!("undefined field '{n}'"),
                    ))
                }
            }
        }
        Ok(Program { expr, uses })
    }
}

/// The request variables bound for one evaluation, and the variables evaluated so far.
pub struct Activation<'a> {
    composition: &'a Composition,
    /// `REQUEST_VARIABLES`' values (`null` when absent).
    bindings: [&'a Value; 5],
    memo: RefCell<Vec<Option<Result<cel::Value, String>>>>,
    /// `authorizer`, when bound.
    authorizer: Option<AuthorizerVal>,
    /// Cost spent since [`take_cost`](Self::take_cost).
    spent: Cell<u64>,
}

struct Vars<'a> {
    vars: Vec<(&'static str, Box<dyn Val + 'a>)>,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        self.vars
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| CowVal::Borrowed(v.as_ref()))
    }
}

impl<'a> Activation<'a> {
    /// An activation of `composition` with `object`, `oldObject`, `request`, `params` and
    /// `namespaceObject` bound, in that order.
    pub fn new(composition: &'a Composition, bindings: [&'a Value; 5]) -> Activation<'a> {
        Activation {
            composition,
            bindings,
            memo: RefCell::new(vec![None; composition.programs.len()]),
            authorizer: None,
            spent: Cell::new(0),
        }
    }

    /// Binds `authorizer`.
    pub fn with_authorizer(mut self, authorizer: AuthorizerVal) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// The cost spent by the evaluations since the last call.
    pub fn take_cost(&self) -> u64 {
        self.spent.replace(0)
    }

    /// The value of variable `i`, evaluated on first use.
    fn variable(&self, i: usize) -> Result<cel::Value, String> {
        if let Some(Some(done)) = self.memo.borrow().get(i) {
            return done.clone();
        }
        let result = match self.composition.programs.get(i) {
            Some(Ok(p)) => self.run(p, |v| {
                cel::Value::try_from(v).map_err(|e| crate::errors::runtime_message(&e))
            }),
            Some(Err(e)) => Err(e.clone()),
            None => Err("no such variable".to_owned()),
        };
        if let Some(slot) = self.memo.borrow_mut().get_mut(i) {
            *slot = Some(result.clone());
        }
        result
    }

    /// Evaluates `p` and hands its result to `f`.
    fn run<T>(
        &self,
        p: &Program,
        f: impl FnOnce(&dyn Val) -> Result<T, String>,
    ) -> Result<T, String> {
        // The variables it uses first (each metered on its own), then the expression.
        let mut variables: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::new();
        for &i in &p.uses {
            let value = self.variable(i)?;
            let boxed: Box<dyn Val> =
                Box::<dyn Val>::try_from(value).map_err(|e| crate::errors::runtime_message(&e))?;
            let name = self.composition.names.get(i).cloned().unwrap_or_default();
            variables.insert(CelMapKey::from(name), boxed);
        }
        let mut vars: Vec<(&'static str, Box<dyn Val + '_>)> = REQUEST_VARIABLES
            .iter()
            .zip(self.bindings)
            .map(|(n, v)| (*n, untyped(v)))
            .collect();
        vars.push(("variables", Box::new(CelMap::from(variables))));
        if let Some(authorizer) = &self.authorizer {
            vars.push((AUTHORIZER, Box::new(authorizer.clone())));
        }
        let resolver = Vars { vars };
        let mut ctx = Context::with_env(ENV.clone());
        ctx.set_variable_resolver(&resolver);
        let (out, usage) = Meter::run(0, PER_CALL_LIMIT, || {
            match cel::Value::resolve_val(&p.expr, &ctx) {
                Ok(v) => f(v.as_ref()),
                Err(e) => Err(crate::errors::runtime_message(&e)),
            }
        });
        self.spent.set(self.spent.get().saturating_add(usage.cost));
        if usage.exceeded {
            return Err(COST_EXCEEDED.to_owned());
        }
        out
    }

    /// Evaluates `p`.
    pub fn eval(&self, p: &Program) -> Result<Output, String> {
        self.run(p, |v| {
            Ok(if let Some(b) = v.downcast_ref::<CelBool>() {
                Output::Bool(*b.inner())
            } else if let Some(s) = v.downcast_ref::<CelString>() {
                Output::String(s.inner().to_string())
            } else if v.downcast_ref::<CelNull>().is_some() {
                Output::Null
            } else {
                Output::Other(v.get_type().name().to_owned())
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn composition(vars: &[(&str, &str)]) -> Composition {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(n, e)| (n.to_string(), e.to_string()))
            .collect();
        Composition::new(&vars, &[])
    }

    #[test]
    fn variables_compose_in_order_and_fail_only_when_used() {
        let c = composition(&[
            ("name", "object.metadata.name"),
            ("long", "variables.name.size() > 3"),
            ("broken", "object.nope"),
        ]);
        assert_eq!(c.errors().count(), 0);
        let object = json!({"metadata": {"name": "pod-a"}});
        let null = Value::Null;
        let request = json!({"operation": "CREATE"});
        let act = Activation::new(&c, [&object, &null, &request, &null, &null]);
        let eval = |src: &str| c.compile(src, None, &[]).and_then(|p| act.eval(&p));
        assert_eq!(eval("variables.long"), Ok(Output::Bool(true)));
        assert_eq!(
            eval("variables.name + '!'"),
            Ok(Output::String("pod-a!".into()))
        );
        assert_eq!(
            eval("request.operation == 'CREATE'"),
            Ok(Output::Bool(true))
        );
        assert_eq!(eval("params"), Ok(Output::Null));
        assert_eq!(eval("variables.broken"), Err("no such key: nope".into()));
        assert_eq!(eval("1"), Ok(Output::Other("int".into())));
        // A variable that is not declared, and one declared after the expression's own.
        assert!(
            matches!(eval("variables.missing"), Err(e) if e.contains("undefined field 'missing'"))
        );
        let later = composition(&[("a", "variables.b"), ("b", "1")]);
        assert!(later.errors().any(|(n, _)| n == "a"));
    }

    #[test]
    fn typed_declarations_catch_undefined_fields() {
        let props: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps =
            match serde_json::from_value(json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}))
            {
                Ok(p) => p,
                Err(e) => panic!("{e}"),
            };
        let node = crate::schema::node(&props, false);
        let declared = [("object", Some(node))];
        let c = Composition::default();
        assert!(c
            .compile("object.spec.replicas > 1", Some(Want::Bool), &declared)
            .is_ok());
        let err = c.compile("object.spec.replica > 1", Some(Want::Bool), &declared);
        assert!(
            matches!(&err, Err(e) if e.contains("undefined field 'replica'")),
            "{err:?}"
        );
        assert!(c.compile("self.x", None, &declared).is_err());
    }
}
