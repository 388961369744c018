//! Compiling one expression: parse on the shared environment, check field references against
//! the schema, and instrument the AST for run-time cost.
//!
//! The `cel` crate has no type checker, so the check here is partial, by design of what is
//! decidable without one: a field selected (or tested with `has()`) on a value whose schema type
//! is an object without that property is `undefined field 'x'`, one selected on a scalar is
//! `type 'int' does not support field selection`, an unknown identifier is
//! `undeclared reference to 'x'`, and a rule whose result is visibly not a bool (a literal, an
//! arithmetic result, a non-boolean field) is refused. Everything typed `dyn` passes, and
//! overload mismatches surface at run time (`no such overload`), where upstream reports them at
//! compile time.

use crate::env::{COST_FN, ENV};
use crate::errors;
use crate::library::regex::MATCHES_FN;
use crate::schema::{Kind, Node};
use cel::common::ast::SourceInfo;
use cel::common::ast::{operators, CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::CelInt;
use cel::parser::Expression;
use std::sync::Arc;

/// A compiled, instrumented expression.
#[derive(Debug)]
pub struct Compiled {
    pub expr: Expression,
    /// The cost charged before evaluation: the nodes evaluated once.
    pub base_cost: u64,
    /// The static worst-case estimate (`cost::estimate`).
    pub max_cost: u64,
    pub uses_old_self: bool,
}

/// What a result must be.
#[derive(Clone, Copy, PartialEq)]
pub enum Want {
    Bool,
    String,
}

/// Parses `src` and instruments it, without a schema (the libraries' tests).
pub fn parse(src: &str) -> Result<Expression, String> {
    let program = ENV.compile(src).map_err(|e| e.to_string())?;
    let mut expr = program.expression().clone();
    instrument(&mut expr);
    Ok(expr)
}

/// Compiles `src` with `self` (and `oldSelf`) typed by `root`. The error is cel-go's issue text.
pub fn compile(src: &str, root: &Arc<Node>, want: Want) -> Result<Compiled, String> {
    let program = ENV.compile(src).map_err(|e| parse_issues(src, &e))?;
    let info = program.source_info();
    let mut checker = Checker {
        src,
        info,
        root: root.clone(),
        scope: Vec::new(),
        issues: Vec::new(),
        uses_old_self: false,
        declared: &[],
        no_self: false,
    };
    let result = checker.check(program.expression());
    if !checker.issues.is_empty() {
        return Err(checker.issues.join("\n"));
    }
    if !result_may_be(program.expression(), result.as_deref(), want) {
        return Err(match want {
            Want::Bool => "cel expression must evaluate to a bool".to_owned(),
            Want::String => "must evaluate to a string".to_owned(),
        });
    }
    let uses_old_self = checker.uses_old_self;
    let mut expr = program.expression().clone();
    let base_cost = once_nodes(&expr);
    let max_cost = crate::cost::estimate(&expr, root);
    instrument(&mut expr);
    Ok(Compiled {
        expr,
        base_cost,
        max_cost,
        uses_old_self,
    })
}

/// Compiles `src` over the `declared` variables (each typed by its schema node when known, else
/// `dyn`): parse, the field-reference check on typed variables, the result check for `want`,
/// then instrumentation. `self` is not declared. Returns the expression and the names it selects
/// on `variables`. The error is cel-go's issue text.
pub fn compile_declared(
    src: &str,
    declared: &[(&str, Option<Arc<Node>>)],
    want: Option<Want>,
) -> Result<(Expression, Vec<String>), String> {
    let program = ENV.compile(src).map_err(|e| parse_issues(src, &e))?;
    let info = program.source_info();
    let dyn_root = Arc::new(Node {
        kind: Kind::Dyn,
        type_name: String::new(),
        max_elements: 0,
        list_type: None,
        list_map_keys: Vec::new(),
        map_type: None,
    });
    let mut checker = Checker {
        src,
        info,
        root: dyn_root,
        scope: Vec::new(),
        issues: Vec::new(),
        uses_old_self: false,
        declared,
        no_self: true,
    };
    let result = checker.check(program.expression());
    if !checker.issues.is_empty() {
        return Err(checker.issues.join("\n"));
    }
    if let Some(want) = want {
        if !result_may_be(program.expression(), result.as_deref(), want) {
            return Err(match want {
                Want::Bool => "cel expression must evaluate to a bool".to_owned(),
                Want::String => "must evaluate to a string".to_owned(),
            });
        }
    }
    let variables = selected_names(program.expression(), "variables");
    let mut expr = program.expression().clone();
    instrument(&mut expr);
    Ok((expr, variables))
}

/// The names `root.<name>` selects anywhere in `e` (`variables.x` gives `x`).
pub fn selected_names(e: &IdedExpr, root: &str) -> Vec<String> {
    let mut names = Vec::new();
    visit(e, &mut |x| {
        if let Expr::Select(s) = &x.expr {
            if matches!(&s.operand.expr, Expr::Ident(n) if n == root) && !names.contains(&s.field) {
                names.push(s.field.clone());
            }
        }
        true
    });
    names
}

fn parse_issues(src: &str, e: &cel::ParseErrors) -> String {
    e.errors
        .iter()
        .map(|err| {
            let offset = line_col_offset(src, err.pos.0, err.pos.1);
            errors::issue(src, Some(offset), &err.msg)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn line_col_offset(src: &str, line: isize, col: isize) -> u32 {
    let mut offset = 0usize;
    for (i, l) in src.split_inclusive('\n').enumerate() {
        if i + 1 == line.max(1) as usize {
            let c = (col.max(1) - 1) as usize;
            return (offset + l.char_indices().nth(c).map_or(l.len(), |(b, _)| b)) as u32;
        }
        offset += l.len();
    }
    src.len() as u32
}

/// The type of an expression built from literals alone (`1 + 2`, `'a' + 'b'`), when evident.
fn literal_type(e: &IdedExpr) -> Option<&'static str> {
    match &e.expr {
        Expr::Literal(LiteralValue::Boolean(_)) => Some("bool"),
        Expr::Literal(LiteralValue::Int(_)) => Some("int"),
        Expr::Literal(LiteralValue::UInt(_)) => Some("uint"),
        Expr::Literal(LiteralValue::Double(_)) => Some("double"),
        Expr::Literal(LiteralValue::String(_)) => Some("string"),
        Expr::Literal(LiteralValue::Bytes(_)) => Some("bytes"),
        Expr::Literal(LiteralValue::Null) => Some("null"),
        Expr::List(_) => Some("list"),
        Expr::Map(_) => Some("map"),
        Expr::Call(c) if c.target.is_none() && c.args.len() == 2 => {
            let arithmetic = [
                operators::ADD,
                operators::SUBSTRACT,
                operators::MULTIPLY,
                operators::DIVIDE,
                operators::MODULO,
            ];
            if !arithmetic.contains(&c.func_name.as_str()) {
                return None;
            }
            let (a, b) = (literal_type(&c.args[0])?, literal_type(&c.args[1])?);
            (a == b).then_some(a)
        }
        _ => None,
    }
}

/// Whether an expression of this shape and type can produce `want`.
fn result_may_be(expr: &Expression, ty: Option<&Node>, want: Want) -> bool {
    if let Some(t) = literal_type(expr) {
        return t == if want == Want::Bool { "bool" } else { "string" };
    }
    let literal_ok = |l: &LiteralValue| match want {
        Want::Bool => matches!(l, LiteralValue::Boolean(_)),
        Want::String => matches!(l, LiteralValue::String(_)),
    };
    match &expr.expr {
        Expr::Literal(l) => return literal_ok(l),
        Expr::List(_) | Expr::Map(_) => return false,
        Expr::Call(call) => {
            let arithmetic = [
                operators::SUBSTRACT,
                operators::MULTIPLY,
                operators::DIVIDE,
                operators::MODULO,
                operators::NEGATE,
            ];
            if arithmetic.contains(&call.func_name.as_str()) {
                return false;
            }
            if call.func_name == operators::ADD && want == Want::Bool {
                return false;
            }
            let boolean = [
                operators::EQUALS,
                operators::NOT_EQUALS,
                operators::LESS,
                operators::LESS_EQUALS,
                operators::GREATER,
                operators::GREATER_EQUALS,
                operators::LOGICAL_NOT,
                operators::IN,
            ];
            if boolean.contains(&call.func_name.as_str()) {
                return want == Want::Bool;
            }
        }
        _ => {}
    }
    match ty.map(|n| &n.kind) {
        None | Some(Kind::Dyn) => true,
        Some(Kind::Bool) => want == Want::Bool,
        Some(Kind::String) => want == Want::String,
        Some(_) => false,
    }
}

/// Identifiers that are not variables but may appear in expressions: type names and the
/// namespaces of qualified functions.
const KNOWN_IDENTS: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "timestamp",
    "duration",
    "optional",
    "format",
    "strings",
    "math",
    "ip",
    "lists",
    "sets",
    "cel",
    "google",
];

type Ty = Option<Arc<Node>>;

struct Checker<'a> {
    src: &'a str,
    info: &'a SourceInfo,
    root: Arc<Node>,
    scope: Vec<(String, Ty)>,
    issues: Vec<String>,
    uses_old_self: bool,
    /// Variables declared besides `self`/`oldSelf` (admission's `object`, `params`, ...), each
    /// with its schema when known.
    declared: &'a [(&'a str, Ty)],
    /// `self`/`oldSelf` are undeclared (admission expressions).
    no_self: bool,
}

impl Checker<'_> {
    fn issue(&mut self, id: u64, msg: String) {
        let offset = errors::offset(self.info, id);
        self.issues.push(errors::issue(self.src, offset, &msg));
    }

    fn field(&mut self, id: u64, operand: Ty, field: &str) -> Ty {
        let node = operand?;
        match &node.kind {
            Kind::Object { fields, open } => match fields.get(field) {
                Some(f) => Some(f.node.clone()),
                None if *open => None,
                None => {
                    self.issue(id, format!("undefined field '{field}'"));
                    None
                }
            },
            Kind::Map(value) => Some(value.clone()),
            scalar => {
                let name = match scalar {
                    Kind::Bool => "bool",
                    Kind::Int => "int",
                    Kind::Double => "double",
                    Kind::String => "string",
                    Kind::Bytes => "bytes",
                    Kind::Timestamp => "google.protobuf.Timestamp",
                    Kind::Duration => "google.protobuf.Duration",
                    _ => return None,
                };
                self.issue(
                    id,
                    format!("type '{name}' does not support field selection"),
                );
                None
            }
        }
    }

    fn check(&mut self, e: &IdedExpr) -> Ty {
        match &e.expr {
            Expr::Ident(name) => {
                if let Some((_, t)) = self.scope.iter().rev().find(|(n, _)| n == name) {
                    return t.clone();
                }
                if let Some((_, t)) = self.declared.iter().find(|(n, _)| n == name) {
                    return t.clone();
                }
                match name.as_str() {
                    "self" | "oldSelf" if self.no_self => {
                        self.issue(
                            e.id,
                            format!("undeclared reference to '{name}' (in container '')"),
                        );
                        None
                    }
                    "self" => Some(self.root.clone()),
                    "oldSelf" => {
                        self.uses_old_self = true;
                        Some(self.root.clone())
                    }
                    n if KNOWN_IDENTS.contains(&n) || n.starts_with('@') => None,
                    n => {
                        self.issue(
                            e.id,
                            format!("undeclared reference to '{n}' (in container '')"),
                        );
                        None
                    }
                }
            }
            Expr::Select(sel) => {
                let operand = self.check(&sel.operand);
                let t = self.field(e.id, operand, &sel.field);
                if sel.test {
                    None
                } else {
                    t
                }
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                let item = match range.as_ref().map(|n| &n.kind) {
                    Some(Kind::List(item)) => Some(item.clone()),
                    _ => None,
                };
                let init = self.check(&c.accu_init);
                let depth = self.scope.len();
                self.scope.push((c.iter_var.clone(), item));
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push((v2.clone(), None));
                }
                // A bound value (`cel.bind`, two-variable comprehensions) keeps its type.
                self.scope.push((c.accu_var.clone(), init));
                self.check(&c.loop_cond);
                self.check(&c.loop_step);
                self.check(&c.result);
                self.scope.truncate(depth);
                None
            }
            Expr::List(l) => {
                for el in &l.elements {
                    self.check(el);
                }
                None
            }
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        self.check(&me.key);
                        self.check(&me.value);
                    }
                }
                None
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.check(&f.value);
                    }
                }
                None
            }
            Expr::Literal(_) | Expr::Unspecified => None,
        }
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> Ty {
        let target = call.target.as_ref().map(|t| {
            // A qualified function's namespace is not a value.
            match &t.expr {
                Expr::Ident(n) if KNOWN_IDENTS.contains(&n.as_str()) => None,
                _ => self.check(t),
            }
        });
        let args: Vec<Ty> = call.args.iter().map(|a| self.check(a)).collect();
        match call.func_name.as_str() {
            operators::INDEX => match args.first().cloned().flatten().map(|n| n.kind.clone()) {
                Some(Kind::List(item)) | Some(Kind::Map(item)) => Some(item),
                _ => None,
            },
            operators::OPT_SELECT => {
                if let (
                    Some(operand),
                    Some(IdedExpr {
                        expr: Expr::Literal(LiteralValue::String(f)),
                        ..
                    }),
                ) = (args.first().cloned(), call.args.get(1))
                {
                    self.field(id, operand, f.inner());
                }
                None
            }
            operators::CONDITIONAL => args.get(1).cloned().flatten(),
            _ => {
                let _ = target;
                None
            }
        }
    }
}

/// The nodes of `e` outside comprehension loops: evaluated once, charged up front.
fn once_nodes(e: &IdedExpr) -> u64 {
    let mut n = 0;
    visit(e, &mut |x| {
        n += 1;
        !matches!(x.expr, Expr::Comprehension(_))
    });
    n
}

fn count_nodes(e: &IdedExpr) -> u64 {
    let mut n = 0;
    visit(e, &mut |_| {
        n += 1;
        true
    });
    n
}

/// Calls `f` on `e` and, while `f` says so, on its children.
fn visit(e: &IdedExpr, f: &mut dyn FnMut(&IdedExpr) -> bool) {
    if !f(e) {
        return;
    }
    match &e.expr {
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                visit(t, f);
            }
            for a in &c.args {
                visit(a, f);
            }
        }
        Expr::Select(s) => visit(&s.operand, f),
        Expr::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                visit(x, f);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| visit(x, f)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    visit(&me.key, f);
                    visit(&me.value, f);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(sf) = &entry.expr {
                    visit(&sf.value, f);
                }
            }
        }
        _ => {}
    }
}

fn wrap(e: &mut IdedExpr, cost: u64) {
    let inner = std::mem::take(e);
    let id = inner.id;
    *e = IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: COST_FN.to_owned(),
            target: None,
            args: vec![
                IdedExpr {
                    id,
                    expr: Expr::Literal(LiteralValue::Int(CelInt::from(
                        cost.min(i64::MAX as u64) as i64
                    ))),
                },
                inner,
            ],
        }),
    };
}

/// The identifier a chain of selects starts from (`a` of `a.b.c`).
fn chain_root(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Ident(n) => Some(n),
        Expr::Select(s) if !s.test => chain_root(&s.operand),
        _ => None,
    }
}

/// Rewrites `matches` to the cached-regex version, selects on variables to index lookups, and
/// makes every comprehension charge its range's size times the cost of one iteration before it
/// starts (so work is refused before it is done; a loop that stops early, as `exists` may, is
/// charged as if it ran to the end). Only the range is wrapped, which keeps the loop shapes the
/// crate's interpreter optimises (`map`/`filter` appending in place, `all`/`exists` folding).
pub fn instrument(e: &mut IdedExpr) {
    match &mut e.expr {
        Expr::Call(c) => {
            if c.func_name == "matches" {
                c.func_name = MATCHES_FN.to_owned();
            }
            if let Some(t) = &mut c.target {
                instrument(t);
            }
            c.args.iter_mut().for_each(instrument);
        }
        Expr::Select(s) => {
            instrument(&mut s.operand);
            // `x.f` on a variable is `x['f']`: the same lookup, without the interpreter first
            // trying `x.f` as a qualified variable name (a string join and a scope walk).
            let root = chain_root(&s.operand).is_none_or(|r| !KNOWN_IDENTS.contains(&r));
            if !s.test && root {
                let id = e.id;
                let sel = match std::mem::take(&mut e.expr) {
                    Expr::Select(sel) => sel,
                    other => {
                        e.expr = other;
                        return;
                    }
                };
                e.expr = Expr::Call(CallExpr {
                    func_name: operators::INDEX.to_owned(),
                    target: None,
                    args: vec![
                        *sel.operand,
                        IdedExpr {
                            id,
                            expr: Expr::Literal(LiteralValue::String(sel.field.into())),
                        },
                    ],
                });
            }
        }
        Expr::List(l) => l.elements.iter_mut().for_each(instrument),
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(me) = &mut entry.expr {
                    instrument(&mut me.key);
                    instrument(&mut me.value);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &mut s.entries {
                if let EntryExpr::StructField(sf) = &mut entry.expr {
                    instrument(&mut sf.value);
                }
            }
        }
        Expr::Comprehension(c) => {
            let per_iteration = 1 + count_nodes(&c.loop_cond) + count_nodes(&c.loop_step);
            for x in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                instrument(x);
            }
            wrap(&mut c.iter_range, per_iteration);
        }
        _ => {}
    }
}
