//! Evaluating the rule tree against an object (upstream's `Validator.Validate`): each node's
//! rules run for every value at that node (each property, map value and list item), with `self`
//! the value converted by the node's schema and, on update, `oldSelf` the correlated old value
//! (same property or map key; for `x-kubernetes-list-type: map` lists, the item with the same
//! keys; nothing for other lists). Transition rules run only when there is an old value, unless
//! `optionalOldSelf`.
//!
//! Ratcheting (CRDValidationRatcheting, on by default since 1.30): a failing rule that does not use
//! `oldSelf`, on a value equal to its correlated old value (or, when uncorrelatable, under an
//! unchanged correlated ancestor), is not an error. Upstream returns it as a warning; this crate has
//! no warning channel, so it is dropped.
//!
//! Cost: every evaluation is limited to `PerCallLimit`, and the request to `RuntimeCELCostBudget`;
//! running out stops all further rules with upstream's messages.

use crate::convert::to_val;
use crate::cost::{PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET};
use crate::env::{Meter, COST_EXCEEDED, ENV};
use crate::errors::{go_quote, runtime_message};
use crate::rules::{Rule, Tree};
use api::validation::{FieldError, FieldErrorKind};
use cel::common::types::{CelBool, CelList, CelMap, CelOptional, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, ExecutionError};
use serde_json::Value;

/// `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// A value and its CEL form: borrowed from the converted parent, or converted here.
enum V<'a> {
    Borrowed(&'a (dyn Val + 'a)),
    Owned(Box<dyn Val + 'a>),
}

impl<'a> V<'a> {
    fn get(&self) -> &(dyn Val + 'a) {
        match self {
            V::Borrowed(v) => *v,
            V::Owned(b) => b.as_ref(),
        }
    }
}

struct Vars<'a> {
    this: &'a (dyn Val + 'a),
    old: Option<&'a (dyn Val + 'a)>,
    /// `oldSelf` as an optional, for `optionalOldSelf` rules.
    optional_old: Option<Box<dyn Val + 'a>>,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        match name {
            "self" => Some(CowVal::Borrowed(self.this)),
            "oldSelf" => match &self.optional_old {
                Some(o) => Some(CowVal::Borrowed(o.as_ref())),
                None => self.old.map(CowVal::Borrowed),
            },
            _ => None,
        }
    }
}

pub struct Run {
    pub errors: Vec<FieldError>,
    /// The request budget left; negative once exhausted.
    pub budget: i64,
}

impl Run {
    pub fn new(budget: u64) -> Self {
        Run {
            errors: Vec::new(),
            budget: budget.min(i64::MAX as u64) as i64,
        }
    }
}

impl Default for Run {
    fn default() -> Self {
        Self::new(RUNTIME_CEL_COST_BUDGET)
    }
}

/// Old value of a node: JSON, CEL, and whether this node correlates to it.
pub struct Old<'a> {
    json: &'a Value,
    val: V<'a>,
}

impl<'a> Old<'a> {
    pub fn new(json: &'a Value, val: &'a (dyn Val + 'a)) -> Self {
        Old {
            json,
            val: V::Borrowed(val),
        }
    }
}

/// A field path, rendered only when an error needs it.
#[derive(Clone, Copy)]
pub enum Path<'p> {
    Root,
    Field(&'p Path<'p>, &'p str),
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    /// `field.Path.String()`; the root is the empty string.
    pub fn render(&self) -> String {
        match self {
            Path::Root => String::new(),
            Path::Field(p, name) => child_path(&p.render(), name),
            Path::Key(p, k) => format!("{}[{k}]", p.render()),
            Path::Index(p, i) => format!("{}[{i}]", p.render()),
        }
    }
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn shown(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_owned()
    } else {
        path.to_owned()
    }
}

/// The converted child of a converted map by key.
fn map_child<'a>(parent: &'a (dyn Val + 'a), key: &str) -> Option<&'a (dyn Val + 'a)> {
    use cel::common::traits::Indexer;
    let map = parent.downcast_ref::<CelMap>()?;
    match map.get(&CelString::from(key)) {
        Ok(CowVal::Borrowed(v)) => Some(v),
        _ => None,
    }
}

fn list_child<'a>(parent: &'a (dyn Val + 'a), i: usize) -> Option<&'a (dyn Val + 'a)> {
    parent
        .downcast_ref::<CelList>()?
        .inner()
        .get(i)
        .map(|b| b.as_ref())
}

impl Tree {
    /// Validates the converted root. `ratchet_parent`: the nearest correlated ancestor was
    /// unchanged.
    pub fn validate<'a>(
        &self,
        run: &mut Run,
        path: &Path<'_>,
        obj: &'a Value,
        val: &'a (dyn Val + 'a),
        old: Option<&Old<'a>>,
        ratchet_parent: bool,
    ) {
        if obj.is_null() || run.budget < 0 {
            return;
        }
        let old = old.filter(|o| !o.json.is_null());
        let ratchet = old.map_or(ratchet_parent, |o| o.json == obj);
        self.expressions(run, path, val, old.map(|o| o.val.get()), ratchet);
        if run.budget < 0 {
            return;
        }
        for branch in &self.all_of {
            // allOf branches never ratchet on their own correlation (as upstream).
            branch.validate(run, path, obj, val, old, ratchet_parent && old.is_none());
            if run.budget < 0 {
                return;
            }
        }
        let child_ratchet = ratchet;
        match obj {
            Value::Object(map) => {
                let correlatable = self.node.map_type.as_deref() != Some("atomic");
                if let Some(additional) = &self.additional {
                    for (k, v) in map {
                        let cv = map_child(val, k)
                            .map(V::Borrowed)
                            .unwrap_or_else(|| V::Owned(to_val(v, &additional.node)));
                        let old_child = old.filter(|_| correlatable).and_then(|o| {
                            let json = o.json.get(k)?;
                            let ov = map_child(o.val.get(), k)
                                .map(V::Borrowed)
                                .unwrap_or_else(|| V::Owned(to_val(json, &additional.node)));
                            Some(Old { json, val: ov })
                        });
                        additional.validate(
                            run,
                            &Path::Key(path, k),
                            v,
                            cv_ref(&cv),
                            old_child.as_ref(),
                            child_ratchet,
                        );
                        if run.budget < 0 {
                            return;
                        }
                    }
                }
                for (name, escaped, sub) in &self.properties {
                    let Some(v) = map.get(name) else { continue };
                    let lookup = |parent: &'a (dyn Val + 'a)| {
                        escaped.as_deref().and_then(|e| map_child(parent, e))
                    };
                    let cv = lookup(val)
                        .map(V::Borrowed)
                        .unwrap_or_else(|| V::Owned(to_val(v, &sub.node)));
                    let old_child = old.filter(|_| correlatable).and_then(|o| {
                        let json = o.json.get(name)?;
                        let ov = lookup_in(o.val.get(), escaped.as_deref())
                            .map(V::Borrowed)
                            .unwrap_or_else(|| V::Owned(to_val(json, &sub.node)));
                        Some(Old { json, val: ov })
                    });
                    sub.validate(
                        run,
                        &Path::Field(path, name),
                        v,
                        cv_ref(&cv),
                        old_child.as_ref(),
                        child_ratchet,
                    );
                    if run.budget < 0 {
                        return;
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_tree) = &self.items else { return };
                let keys = &self.node.list_map_keys;
                let is_map = self.node.list_type.as_deref() == Some("map") && !keys.is_empty();
                for (i, item) in items.iter().enumerate() {
                    let cv = list_child(val, i)
                        .map(V::Borrowed)
                        .unwrap_or_else(|| V::Owned(to_val(item, &item_tree.node)));
                    let old_child = old.filter(|_| is_map).and_then(|o| {
                        let old_items = o.json.as_array()?;
                        let j = old_items
                            .iter()
                            .position(|oi| keys.iter().all(|k| oi.get(k) == item.get(k)))?;
                        let json = &old_items[j];
                        let ov = list_child(o.val.get(), j)
                            .map(V::Borrowed)
                            .unwrap_or_else(|| V::Owned(to_val(json, &item_tree.node)));
                        Some(Old { json, val: ov })
                    });
                    item_tree.validate(
                        run,
                        &Path::Index(path, i),
                        item,
                        cv_ref(&cv),
                        old_child.as_ref(),
                        child_ratchet,
                    );
                    if run.budget < 0 {
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    fn expressions<'a>(
        &self,
        run: &mut Run,
        path: &Path<'_>,
        val: &'a (dyn Val + 'a),
        old: Option<&'a (dyn Val + 'a)>,
        ratchet: bool,
    ) {
        if self.rules.is_empty() {
            return;
        }
        let type_name = &self.node.type_name;
        let invalid = |field: String, message: String| FieldError {
            field,
            kind: FieldErrorKind::Invalid,
            value: Some(go_quote(type_name)),
            message,
        };
        if run.budget <= 0 {
            run.errors.push(invalid(shown(&path.render()), "validation failed due to running out of cost budget, no further validation rules will be run".to_owned()));
            run.budget = -1;
            return;
        }
        let vars = Vars {
            this: val,
            old,
            optional_old: None,
        };
        let mut optional_vars: Option<Vars<'a>> = None;
        for rule in &self.rules {
            if rule.program.uses_old_self && old.is_none() && !rule.optional_old_self {
                continue;
            }
            let activation: &Vars<'a> = if rule.optional_old_self {
                optional_vars.get_or_insert_with(|| Vars {
                    this: val,
                    old: None,
                    optional_old: Some(match old {
                        Some(o) => Box::new(CelOptional::of(o.clone_as_boxed())),
                        None => Box::new(CelOptional::none()),
                    }),
                })
            } else {
                &vars
            };
            let (result, usage) = evaluate(&rule.program, activation);
            if usage.exceeded {
                run.errors.push(invalid(shown(&path.render()), format!("'{COST_EXCEEDED}': no further validation rules will be run due to call cost exceeds limit for rule: {}", rule.error_string())));
                run.budget = -1;
                return;
            }
            if usage.cost as i64 > run.budget {
                run.errors.push(invalid(shown(&path.render()), "validation failed due to running out of cost budget, no further validation rules will be run".to_owned()));
                run.budget = -1;
                return;
            }
            run.budget -= usage.cost as i64;
            match result {
                Err(e) => {
                    let msg = runtime_message(&e);
                    let text = if msg.starts_with("no such overload") {
                        format!("'{msg}': call arguments did not match a supported operator, function or macro signature for rule: {}", rule.error_string())
                    } else {
                        format!("{msg} evaluating rule: {}", rule.error_string())
                    };
                    run.errors.push(invalid(shown(&path.render()), text));
                }
                Ok(true) => {}
                Ok(false) => {
                    let at = match &rule.field_path {
                        Some(fp) if !fp.is_empty() => child_path(&path.render(), fp),
                        _ => path.render(),
                    };
                    let detail = match self.message(run, rule, &vars, &at, type_name) {
                        Ok(Some(m)) => m,
                        Ok(None) => default_message(rule),
                        Err(()) => return,
                    };
                    if !rule.program.uses_old_self && ratchet {
                        continue;
                    }
                    let at = shown(&at);
                    run.errors.push(match rule.kind() {
                        FieldErrorKind::Forbidden => FieldError::forbidden(at, detail),
                        FieldErrorKind::Required => FieldError::required(at, detail),
                        FieldErrorKind::Duplicate => {
                            FieldError::duplicate(at, &Value::String(type_name.clone()))
                        }
                        _ => invalid(at, detail),
                    });
                }
            }
        }
    }

    /// The messageExpression's result: `Ok(None)` to use the default message, `Err` when the
    /// budget ran out (the error is recorded and validation stops).
    fn message(
        &self,
        run: &mut Run,
        rule: &Rule,
        vars: &Vars<'_>,
        at: &str,
        type_name: &str,
    ) -> Result<Option<String>, ()> {
        let Some(program) = &rule.message else {
            return Ok(None);
        };
        let ctx_result = {
            let mut ctx = Context::with_env(ENV.clone());
            ctx.set_variable_resolver(vars);
            let (r, usage) = Meter::run(program.base_cost, PER_CALL_LIMIT, || {
                cel::Value::resolve_val(&program.expr, &ctx)
                    .map(|v| v.downcast_ref::<CelString>().map(|s| s.inner().to_owned()))
            });
            (r, usage)
        };
        let (result, usage) = ctx_result;
        let src = rule.source.message_expression.as_deref().unwrap_or("");
        let fail = |run: &mut Run, message: String| {
            run.errors.push(FieldError {
                field: shown(at),
                kind: FieldErrorKind::Invalid,
                value: Some(go_quote(type_name)),
                message,
            });
            run.budget = -1;
        };
        if usage.exceeded {
            fail(run, format!("no further validation rules will be run due to call cost exceeds limit for messageExpression: {}", go_quote(src)));
            return Err(());
        }
        if usage.cost as i64 > run.budget {
            fail(run, "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".to_owned());
            return Err(());
        }
        run.budget -= usage.cost as i64;
        match result {
            Ok(Some(s)) => {
                let t = s.trim();
                if t.is_empty() || t.len() > MAX_MESSAGE_BYTES || t.contains('\n') {
                    Ok(None)
                } else {
                    Ok(Some(t.to_owned()))
                }
            }
            _ => Ok(None),
        }
    }
}

fn lookup_in<'a>(parent: &'a (dyn Val + 'a), escaped: Option<&str>) -> Option<&'a (dyn Val + 'a)> {
    escaped.and_then(|e| map_child(parent, e))
}

fn cv_ref<'s, 'a>(v: &'s V<'a>) -> &'s (dyn Val + 'a) {
    v.get()
}

/// `ruleMessageOrDefault`.
fn default_message(rule: &Rule) -> String {
    match rule.source.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => format!("failed rule: {}", rule.error_string()),
    }
}

/// Runs one rule: `Ok(true)` only for the bool `true` (anything else fails the rule, as a
/// non-`true` result does upstream).
fn evaluate(
    program: &crate::compile::Compiled,
    vars: &Vars<'_>,
) -> (Result<bool, ExecutionError>, crate::env::Usage) {
    let mut ctx = Context::with_env(ENV.clone());
    ctx.set_variable_resolver(vars);
    Meter::run(program.base_cost, PER_CALL_LIMIT, || {
        cel::Value::resolve_val(&program.expr, &ctx)
            .map(|v| v.downcast_ref::<CelBool>().is_some_and(|b| *b.inner()))
    })
}
