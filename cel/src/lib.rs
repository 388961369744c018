//! CEL for Kubernetes (upstream's `k8s.io/apiserver/pkg/cel` and the CRD validator of
//! `apiextensions-apiserver/pkg/apiserver/schema/cel`): `x-kubernetes-validations` rules compiled
//! on a maintained CEL implementation (the `cel` crate) with Kubernetes' libraries added, their
//! estimated and run-time cost limits.
//!
//! - [`schema`]: the CEL types of schema nodes; [`convert`]: JSON to CEL values by schema.
//! - [`compile`]: parsing, the field-reference check, run-time cost instrumentation;
//!   [`cost`]: static cost estimation and the limits.
//! - [`rules`]: the compiled rule tree and the CRD-time errors; [`validate`]: evaluation.
//! - [`env`]: the shared environment and the cost meter; [`library`]: Kubernetes' libraries.
//!
//! Compilation happens once per schema ([`Validator::compile`]); validation converts the object
//! once and evaluates the pre-parsed programs.
//!
//! # Known differences from Kubernetes 1.33
//!
//! - No type checker (the `cel` crate has none). Compile time catches syntax errors, fields the
//!   schema does not declare (`undefined field 'x'`), fields selected on scalars (`type 'int'
//!   does not support field selection`), unknown identifiers and visibly non-bool
//!   (non-string, for `messageExpression`) results; overload mismatches (`1 + 'a'`,
//!   `self.name > 3`) surface at run time as `no such overload` instead of at CRD creation.
//! - Static cost follows cel-go's estimator for the operators, macros, string functions and the
//!   Kubernetes libraries; functions it does not model cost 1. Run-time cost is charged per
//!   comprehension (range size times the nodes of one iteration, before the loop runs, so an
//!   `exists` that stops early is charged in full) and per library call by input size, not
//!   node-by-node as cel-go's tracker does: limits trip at approximately, not exactly, the same
//!   point.
//! - Ratcheted errors (unchanged values) are dropped; upstream returns them as warnings.
//! - The `%#v` of a rule in compile errors shows set pointer fields (`reason`,
//!   `optionalOldSelf`) with a fixed address `0xc000000000` where Go prints the real one.
//! - The strings extension is the `cel` crate's (cel-go's latest: it also has `reverse` and
//!   `format`); Kubernetes' `semver` library and the `authz` selectors (`fieldSelector`,
//!   `labelSelector`) are not provided; `cel.bind`, `sets`, `authz` (for admission expressions,
//!   [`admission`]) and the two-variable comprehensions (expanded to one-variable ones, see
//!   [`comprehensions`]) are.
//! - URL parsing is a reduction of Go's `url.ParseRequestURI`; quantities are exact decimals up to
//!   38 digits (larger ones are refused).

pub mod admission;
pub mod compile;
pub mod comprehensions;
pub mod convert;
pub mod cost;
pub mod env;
pub mod errors;
pub mod expression;
pub mod library;
pub mod rules;
pub mod schema;
pub mod validate;

use api::validation::FieldError;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::Value;
use std::sync::Arc;

/// Every `x-kubernetes-validations` rule of one schema, compiled.
#[derive(Debug, Clone, Default)]
pub struct Validator {
    tree: Option<Arc<rules::Tree>>,
    rule_count: usize,
}

fn count(t: &rules::Tree) -> usize {
    t.rules.len()
        + t.properties.iter().map(|(_, _, s)| count(s)).sum::<usize>()
        + t.items.as_deref().map_or(0, count)
        + t.additional.as_deref().map_or(0, count)
        + t.all_of.iter().map(count).sum::<usize>()
}

impl Validator {
    /// Compiles the rules of `props` (the schema of a whole resource) and everything under it.
    /// Errors (compilation, estimated cost over budget) carry the CRD field paths under `path`
    /// (e.g. `spec.versions[0].schema.openAPIV3Schema`), as upstream reports them.
    pub fn compile(props: &JSONSchemaProps, path: &str) -> Result<Validator, Vec<FieldError>> {
        let node = schema::node(props, true);
        let mut compiler = rules::Compiler::new();
        let tree = compiler.tree(props, props, node, &rules::root_at(path));
        compiler.finish(path);
        if !compiler.errors.is_empty() {
            return Err(compiler.errors);
        }
        let rule_count = tree.as_ref().map_or(0, count);
        Ok(Validator {
            tree: tree.map(Arc::new),
            rule_count,
        })
    }

    /// Whether the schema has no rules.
    pub fn is_empty(&self) -> bool {
        self.rule_count == 0
    }

    /// How many rules were compiled.
    pub fn len(&self) -> usize {
        self.rule_count
    }

    /// Evaluates the rules against `obj` (and `old` on update, for transition rules and
    /// ratcheting), within the per-request cost budget.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        self.validate_with_budget(obj, old, cost::RUNTIME_CEL_COST_BUDGET)
    }

    /// [`Validator::validate`] with another request budget (upstream's `costBudget` argument).
    pub fn validate_with_budget(
        &self,
        obj: &Value,
        old: Option<&Value>,
        budget: u64,
    ) -> Vec<FieldError> {
        let Some(tree) = &self.tree else {
            return Vec::new();
        };
        let val = convert::to_val(obj, &tree.node);
        let old_val = old.map(|o| (o, convert::to_val(o, &tree.node)));
        let old_ref = old_val
            .as_ref()
            .map(|(json, v)| validate::Old::new(json, v.as_ref()));
        let mut run = validate::Run::new(budget);
        tree.validate(
            &mut run,
            &validate::Path::Root,
            obj,
            val.as_ref(),
            old_ref.as_ref(),
            false,
        );
        run.errors
    }
}
