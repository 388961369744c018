//! The CEL environment every rule runs in: the `cel` crate's standard library, cel-go's strings
//! extension as the crate provides it, and the Kubernetes libraries (`library/`), built once and
//! shared.
//!
//! Run-time cost is metered here. Compilation rewrites every comprehension so that its range goes
//! through [`COST_FN`] with the cost of one iteration (see `compile::instrument`), and the
//! libraries charge size-dependent work through [`charge`]. The meter is per thread and armed by
//! [`Meter::run`] around one evaluation, so a rule can never do more than the per-call limit of
//! work: evaluation stops with cel-go's `operation cancelled: actual cost limit exceeded`.

use crate::library;
use cel::common::types::{CelInt, DYN_TYPE, INT_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError};
use std::cell::Cell;
use std::sync::{Arc, LazyLock};

/// The function compilation wraps comprehension ranges in: `@k8s.cost(n, range)` charges `n`
/// per element and returns the range.
pub const COST_FN: &str = "@k8s.cost";

/// cel-go's message when the cost limit is hit.
pub const COST_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// The shared environment.
pub static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(build()));

fn build() -> Env {
    let mut env = Env::stdlib();
    // The crate's own extensions never clash with the stdlib; a failure here is a programming
    // error caught by every test, not a request-time condition.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_overload(COST_FN, "@k8s.cost", vec![INT_TYPE, DYN_TYPE], cost);
    let _ = env.add_macro(cel::parser::Macro::receiver("bind", 3, bind_macro));
    let _ = crate::comprehensions::register(&mut env);
    library::register(&mut env);
    env
}

/// cel-go's `ext.Bindings()`: `cel.bind(name, init, expr)` is `expr` with `name` bound to `init`,
/// expanded as cel-go does into a comprehension over an empty list.
fn bind_macro(
    helper: &mut cel::parser::MacroExprHelper<'_>,
    target: &mut Option<cel::IdedExpr>,
    args: &mut Vec<cel::IdedExpr>,
) -> Result<Option<cel::IdedExpr>, cel::ParseError> {
    use cel::common::ast::{ComprehensionExpr, Expr, ListExpr, LiteralValue};
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
        return Ok(None);
    }
    let name = match args.first().map(|a| &a.expr) {
        Some(Expr::Ident(n)) => n.clone(),
        _ => {
            let id = args.first().map_or(0, |a| a.id);
            return Err(
                helper.new_error(id, "cel.bind() variable names must be simple identifiers")
            );
        }
    };
    let body = args.pop().unwrap_or_default();
    let init = args.pop().unwrap_or_default();
    target.take();
    let bind = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(name)),
        result: body,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}

pub type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

thread_local! {
    static USED: Cell<u64> = const { Cell::new(0) };
    static LIMIT: Cell<u64> = const { Cell::new(u64::MAX) };
    static EXCEEDED: Cell<bool> = const { Cell::new(false) };
}

/// Charges `n` units; fails once the armed limit is passed.
pub fn charge(n: u64) -> Result<(), ExecutionError> {
    let used = USED.with(|u| {
        let v = u.get().saturating_add(n);
        u.set(v);
        v
    });
    if used > LIMIT.with(Cell::get) {
        EXCEEDED.with(|e| e.set(true));
        return Err(ExecutionError::function_error(COST_FN, COST_EXCEEDED));
    }
    Ok(())
}

/// `@k8s.cost(n, range)`: charges `n` per element of `range` and returns it.
fn cost<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let n = args
        .first()
        .and_then(|a| a.downcast_ref::<CelInt>())
        .map(|i| *i.inner())
        .unwrap_or(1);
    let size = args
        .get(1)
        .and_then(|r| r.as_sizer())
        .map_or(1, |s| *s.size().inner());
    charge((n.max(0) as u64).saturating_mul(size.max(0) as u64))?;
    args.pop()
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, 0))
}

/// One metered evaluation.
pub struct Meter;

/// What a metered evaluation used.
pub struct Usage {
    pub cost: u64,
    /// The limit stopped it.
    pub exceeded: bool,
}

impl Meter {
    /// Runs `f` with at most `limit` units of cost, starting from `base` (the rule's cost outside
    /// comprehensions).
    pub fn run<T>(base: u64, limit: u64, f: impl FnOnce() -> T) -> (T, Usage) {
        USED.with(|u| u.set(base));
        LIMIT.with(|l| l.set(limit));
        EXCEEDED.with(|e| e.set(false));
        let out = f();
        let usage = Usage {
            cost: USED.with(Cell::get),
            exceeded: EXCEEDED.with(Cell::get),
        };
        LIMIT.with(|l| l.set(u64::MAX));
        (out, usage)
    }
}

// Argument helpers for the library's functions.

pub fn arg<'a, 'b, 'v>(
    args: &'a [CowVal<'b, 'v>],
    i: usize,
) -> Result<&'a (dyn Val + 'v), ExecutionError> {
    args.get(i)
        .map(|a| a.as_ref())
        .ok_or_else(|| ExecutionError::invalid_argument_count(i + 1, args.len()))
}

pub fn typed<'a, 'b, 'v, T: cel::common::value::FromVal<'a, 'v> + Val + 'a>(
    args: &'a [CowVal<'b, 'v>],
    i: usize,
) -> Result<&'a T, ExecutionError> {
    let a = arg(args, i)?;
    a.downcast_ref::<T>()
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: a.get_type().name().to_owned(),
            want: T::cel_type().name().to_owned(),
        })
}

pub fn str_arg<'a, 'b, 'v>(
    args: &'a [CowVal<'b, 'v>],
    i: usize,
) -> Result<&'a str, ExecutionError> {
    Ok(typed::<cel::common::types::CelString>(args, i)?.inner())
}

pub fn int_arg(args: &[CowVal<'_, '_>], i: usize) -> Result<i64, ExecutionError> {
    Ok(*typed::<CelInt>(args, i)?.inner())
}

pub fn owned<'b, 'v>(v: impl Val + 'v) -> CelResult<'b, 'v> {
    Ok(CowVal::owned(v))
}

pub fn boolean<'b, 'v>(b: bool) -> CelResult<'b, 'v> {
    owned(cel::common::types::CelBool::from(b))
}

pub fn fail<'b, 'v>(function: &str, msg: impl ToString) -> CelResult<'b, 'v> {
    Err(ExecutionError::function_error(function, msg))
}
