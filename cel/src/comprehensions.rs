//! cel-go's two-variable comprehensions (`ext.TwoVarComprehensions()`, in Kubernetes' base
//! environment since 1.32): `all`, `exists`, `existsOne` with an index/key and a value variable,
//! `transformList`, `transformMap` and `transformMapEntry`.
//!
//! The `cel` crate's interpreter binds only one iteration variable, so the macros expand into
//! one-variable comprehensions over the range's keys (indices for a list) with the value bound
//! by `cel.bind`: `x.all(k, v, p)` is
//! `cel.bind(@tv, x, @k8s.keys(@tv).all(k, cel.bind(v, @tv[k], p)))`. Maps are built with
//! `@k8s.mapInsert`, which refuses a repeated key as cel-go's `cel.@mapInsert` does.

use crate::env::{charge, owned, CelResult};
use cel::common::ast::{
    CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
};
use cel::common::types::{CelInt, CelList, CelMap, CelMapKey, DYN_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper};
use cel::{DeclarationError, Env, ExecutionError, ParseError};
use std::collections::HashMap;

pub const KEYS_FN: &str = "@k8s.keys";
const MAP_INSERT_FN: &str = "@k8s.mapInsert";
const MAP_MERGE_FN: &str = "@k8s.mapMerge";

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let d = || DYN_TYPE.to_owned();
    env.add_overload(KEYS_FN, "k8s_keys", vec![d()], keys)?;
    env.add_overload(
        MAP_INSERT_FN,
        "k8s_map_insert",
        vec![d(), d(), d()],
        map_insert,
    )?;
    env.add_overload(MAP_MERGE_FN, "k8s_map_merge", vec![d(), d()], map_merge)?;
    for (name, arity) in [
        ("all", 3),
        ("exists", 3),
        ("existsOne", 3),
        ("transformList", 3),
        ("transformList", 4),
        ("transformMap", 3),
        ("transformMap", 4),
        ("transformMapEntry", 3),
        ("transformMapEntry", 4),
    ] {
        env.add_macro(Macro::receiver(name, arity, move |h, t, a| {
            expand(name, h, t, a)
        }))?;
    }
    Ok(())
}

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_owned()))
}

fn call(
    h: &mut MacroExprHelper<'_>,
    name: &str,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: name.to_owned(),
        target: target.map(Box::new),
        args,
    }))
}

/// `cel.bind(name, init, body)`, expanded.
fn bind(h: &mut MacroExprHelper<'_>, name: &str, init: IdedExpr, body: IdedExpr) -> IdedExpr {
    let comprehension = ComprehensionExpr {
        iter_range: h.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name.to_owned(),
        accu_init: init,
        loop_cond: h.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: ident(h, name),
        result: body,
    };
    h.next_expr(Expr::Comprehension(Box::new(comprehension)))
}

fn var_name(h: &MacroExprHelper<'_>, e: &IdedExpr, what: &str) -> Result<String, ParseError> {
    match &e.expr {
        Expr::Ident(n) => Ok(n.clone()),
        _ => Err(h.new_error(e.id, format!("{what} must be a simple name"))),
    }
}

fn expand(
    name: &str,
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let (Some(first), Some(second)) = (args.first(), args.get(1)) else {
        return Ok(None);
    };
    let k = var_name(h, first, "The first variable")?;
    let v = var_name(h, second, "The second variable")?;
    let Some(range) = target.take() else {
        return Ok(None);
    };
    let tv = format!("@tv{}", range.id);
    let mut rest: Vec<IdedExpr> = args.drain(2..).collect();
    // `cel.bind(v, @tv[k], e)`.
    let with_value = |h: &mut MacroExprHelper<'_>, e: IdedExpr| {
        let index_args = vec![ident(h, &tv), ident(h, &k)];
        let at = call(h, cel::common::ast::operators::INDEX, None, index_args);
        bind(h, &v, at, e)
    };
    let keys_args = vec![ident(h, &tv)];
    let keys = call(h, KEYS_FN, None, keys_args);
    let body = match name {
        "all" | "exists" | "existsOne" | "transformList" => {
            let macro_name = match name {
                "transformList" => "map",
                "existsOne" => "exists_one",
                other => other,
            };
            let mut margs = vec![ident(h, &k)];
            for e in rest.drain(..) {
                margs.push(with_value(h, e));
            }
            // Expand the one-variable macro by building its comprehension the way the
            // standard library's expander would: re-enter through a call the parser expands.
            one_var(h, macro_name, keys, margs)?
        }
        _ => {
            // transformMap / transformMapEntry: fold into a map.
            let (filter, value) = match rest.len() {
                2 => {
                    let e = rest.pop().unwrap_or_default();
                    (rest.pop(), e)
                }
                _ => (None, rest.pop().unwrap_or_default()),
            };
            let value = with_value(h, value);
            let step_call = if name == "transformMap" {
                let a = vec![ident(h, "@result"), ident(h, &k), value];
                call(h, MAP_INSERT_FN, None, a)
            } else {
                let a = vec![ident(h, "@result"), value];
                call(h, MAP_MERGE_FN, None, a)
            };
            let step = match filter {
                Some(f) => {
                    let cond = with_value(h, f);
                    let keep = ident(h, "@result");
                    call(
                        h,
                        cel::common::ast::operators::CONDITIONAL,
                        None,
                        vec![cond, step_call, keep],
                    )
                }
                None => step_call,
            };
            let comprehension = ComprehensionExpr {
                iter_range: keys,
                iter_var: k.clone(),
                iter_var2: None,
                accu_var: "@result".to_owned(),
                accu_init: h.next_expr(Expr::Map(MapExpr::default())),
                loop_cond: h.next_expr(Expr::Literal(LiteralValue::Boolean(true.into()))),
                loop_step: step,
                result: ident(h, "@result"),
            };
            h.next_expr(Expr::Comprehension(Box::new(comprehension)))
        }
    };
    Ok(Some(bind(h, &tv, range, body)))
}

/// The standard one-variable macro `range.name(args)`, expanded.
fn one_var(
    h: &mut MacroExprHelper<'_>,
    name: &str,
    range: IdedExpr,
    mut args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    use cel::common::ast::operators as op;
    let var = match args.first().map(|a| &a.expr) {
        Some(Expr::Ident(n)) => n.clone(),
        _ => return Err(h.new_error(range.id, "argument must be a simple name")),
    };
    args.remove(0);
    let result = "@result";
    let accu = |h: &mut MacroExprHelper<'_>| ident(h, result);
    let (init, cond, step, out) = match name {
        "all" | "exists" => {
            let pred = args.pop().unwrap_or_default();
            let (init, f) = if name == "all" {
                (true, op::LOGICAL_AND)
            } else {
                (false, op::LOGICAL_OR)
            };
            let init = h.next_expr(Expr::Literal(LiteralValue::Boolean(init.into())));
            let a = accu(h);
            let cond_arg = if name == "all" {
                a
            } else {
                let a2 = accu(h);
                call(h, op::LOGICAL_NOT, None, vec![a2])
            };
            let a3 = accu(h);
            let nsf = call(h, op::NOT_STRICTLY_FALSE, None, vec![cond_arg]);
            let step = call(h, f, None, vec![a3, pred]);
            let out = accu(h);
            (init, nsf, step, out)
        }
        "exists_one" => {
            let pred = args.pop().unwrap_or_default();
            let zero = h.next_expr(Expr::Literal(LiteralValue::Int(CelInt::from(0))));
            let one = h.next_expr(Expr::Literal(LiteralValue::Int(CelInt::from(1))));
            let a = accu(h);
            let plus = call(h, op::ADD, None, vec![a, one]);
            let keep = accu(h);
            let step = call(h, op::CONDITIONAL, None, vec![pred, plus, keep]);
            let cond = h.next_expr(Expr::Literal(LiteralValue::Boolean(true.into())));
            let a = accu(h);
            let one = h.next_expr(Expr::Literal(LiteralValue::Int(CelInt::from(1))));
            let out = call(h, op::EQUALS, None, vec![a, one]);
            (zero, cond, step, out)
        }
        _ => {
            // map(x, e) or map(x, filter, e)
            let e = args.pop().unwrap_or_default();
            let filter = args.pop();
            let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
            let item = h.next_expr(Expr::List(ListExpr::new(vec![e])));
            let a = accu(h);
            let append = call(h, op::ADD, None, vec![a, item]);
            let step = match filter {
                Some(f) => {
                    let keep = accu(h);
                    call(h, op::CONDITIONAL, None, vec![f, append, keep])
                }
                None => append,
            };
            let cond = h.next_expr(Expr::Literal(LiteralValue::Boolean(true.into())));
            let out = accu(h);
            (init, cond, step, out)
        }
    };
    let comprehension = ComprehensionExpr {
        iter_range: range,
        iter_var: var,
        iter_var2: None,
        accu_var: result.to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result: out,
    };
    Ok(h.next_expr(Expr::Comprehension(Box::new(comprehension))))
}

/// `@k8s.keys(x)`: a list's indices or a map's keys.
fn keys<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let x = crate::env::arg(&args, 0)?;
    if let Some(list) = x.downcast_ref::<CelList>() {
        let n = list.inner().len();
        charge(n as u64)?;
        let idx: Vec<Box<dyn Val>> = (0..n as i64)
            .map(|i| Box::new(CelInt::from(i)) as Box<dyn Val>)
            .collect();
        return owned(CelList::from(idx));
    }
    if let Some(map) = x.downcast_ref::<CelMap>() {
        charge(map.inner().len() as u64)?;
        let ks: Vec<Box<dyn Val + 'v>> = map
            .inner()
            .keys()
            .map(|k| k.inner().clone_as_boxed())
            .collect();
        return owned(CelList::from(ks));
    }
    Err(ExecutionError::function_error(
        "comprehension",
        "range must be a list or a map",
    ))
}

fn entries<'v>(
    m: &(dyn Val + 'v),
) -> Result<HashMap<CelMapKey<'v>, Box<dyn Val + 'v>>, ExecutionError> {
    let map = m.downcast_ref::<CelMap>().ok_or_else(|| {
        ExecutionError::function_error("transformMap", "accumulator must be a map")
    })?;
    charge(map.inner().len() as u64)?;
    Ok(map.inner().clone())
}

fn insert<'v>(
    map: &mut HashMap<CelMapKey<'v>, Box<dyn Val + 'v>>,
    k: Box<dyn Val + 'v>,
    v: Box<dyn Val + 'v>,
) -> Result<(), ExecutionError> {
    let key = CelMapKey::try_from(k)?;
    if map.contains_key(&key) {
        return Err(ExecutionError::function_error(
            "transformMap",
            format!("insert failed: key {:?} already exists", key.inner()),
        ));
    }
    map.insert(key, v);
    Ok(())
}

fn map_insert<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let mut it = args.into_iter();
    let (Some(m), Some(k), Some(v)) = (it.next(), it.next(), it.next()) else {
        return Err(ExecutionError::invalid_argument_count(3, 0));
    };
    let mut map = entries(m.as_ref())?;
    insert(&mut map, k.into_owned(), v.into_owned())?;
    owned(CelMap::from(map))
}

fn map_merge<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let mut it = args.into_iter();
    let (Some(m), Some(e)) = (it.next(), it.next()) else {
        return Err(ExecutionError::invalid_argument_count(2, 0));
    };
    let mut map = entries(m.as_ref())?;
    for (k, v) in entries(e.as_ref())? {
        insert(&mut map, k.inner().clone_as_boxed(), v)?;
    }
    owned(CelMap::from(map))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::eval;

    #[test]
    fn two_variable_comprehensions() {
        assert_eq!(eval("[10, 20].all(i, v, v == (i + 1) * 10)"), "true");
        assert_eq!(eval("[10, 20].all(i, v, v == 10)"), "false");
        assert_eq!(
            eval("{'a': 1, 'b': 2}.exists(k, v, k == 'b' && v == 2)"),
            "true"
        );
        assert_eq!(
            eval("{'a': 1, 'b': 2}.exists(k, v, k == 'b' && v == 1)"),
            "false"
        );
        assert_eq!(eval("[1, 2, 1].existsOne(i, v, v == 2)"), "true");
        assert_eq!(eval("[1, 2, 1].existsOne(i, v, v == 1)"), "false");
        assert_eq!(eval("[1, 2].transformList(i, v, i + v) == [1, 3]"), "true");
        assert_eq!(
            eval("[1, 2, 3].transformList(i, v, v > 1, v * 2) == [4, 6]"),
            "true"
        );
        assert_eq!(
            eval("{'a': 1}.transformMap(k, v, v + 1) == {'a': 2}"),
            "true"
        );
        assert_eq!(
            eval("{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v) == {'b': 2}"),
            "true"
        );
        assert_eq!(
            eval("{'a': 1}.transformMapEntry(k, v, {v: k}) == {1: 'a'}"),
            "true"
        );
        assert!(eval("{'a': 1, 'b': 1}.transformMapEntry(k, v, {v: k})").contains("already exists"));
    }
}
