//! Kubernetes' lists library (`library/lists.go`): `isSorted`, `sum`, `min`, `max`, `indexOf`,
//! `lastIndexOf` on lists of comparable elements.

use crate::env::{boolean, charge, fail, owned, CelResult};
use cel::common::types::{CelDouble, CelDuration, CelInt, CelList, CelUInt, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use std::cmp::Ordering;

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    let dyn_ = cel::common::types::DYN_TYPE;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![dyn_.to_owned()],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![dyn_],
        last_index_of,
    )?;
    Ok(())
}

fn items<'a, 'v>(
    args: &'a [CowVal<'_, 'v>],
    function: &str,
) -> Result<&'a [Box<dyn Val + 'v>], ExecutionError> {
    let list = args
        .first()
        .and_then(|a| a.downcast_ref::<CelList>())
        .ok_or_else(|| ExecutionError::function_error(function, "receiver is not a list"))?;
    charge(list.inner().len() as u64)?;
    Ok(list.inner())
}

fn compare(a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| {
            ExecutionError::function_error("compare", "list elements are not comparable")
        })?
        .compare(b)
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let items = items(&args, "isSorted")?;
    for w in items.windows(2) {
        if compare(w[0].as_ref(), w[1].as_ref())? == Ordering::Greater {
            return boolean(false);
        }
    }
    boolean(true)
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let items = items(&args, "sum")?;
    let Some(first) = items.first() else {
        return owned(CelInt::from(0));
    };
    if first.downcast_ref::<CelInt>().is_some() {
        let mut acc: i64 = 0;
        for i in items {
            let v = i
                .downcast_ref::<CelInt>()
                .map(|v| *v.inner())
                .ok_or_else(mixed)?;
            acc = acc
                .checked_add(v)
                .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?;
        }
        return owned(CelInt::from(acc));
    }
    if first.downcast_ref::<CelUInt>().is_some() {
        let mut acc: u64 = 0;
        for i in items {
            let v = i
                .downcast_ref::<CelUInt>()
                .map(|v| *v.inner())
                .ok_or_else(mixed)?;
            acc = acc.checked_add(v).ok_or_else(|| {
                ExecutionError::function_error("sum", "unsigned integer overflow")
            })?;
        }
        return owned(CelUInt::from(acc));
    }
    if first.downcast_ref::<CelDouble>().is_some() {
        let mut acc = 0.0;
        for i in items {
            acc += i
                .downcast_ref::<CelDouble>()
                .map(|v| *v.inner())
                .ok_or_else(mixed)?;
        }
        return owned(CelDouble::from(acc));
    }
    if first.downcast_ref::<CelDuration>().is_some() {
        let mut acc = chrono::Duration::zero();
        for i in items {
            let d = i
                .downcast_ref::<CelDuration>()
                .map(|v| *v.inner())
                .ok_or_else(mixed)?;
            acc = acc
                .checked_add(&d)
                .ok_or_else(|| ExecutionError::function_error("sum", "duration overflow"))?;
        }
        return owned(CelDuration::from(acc));
    }
    fail("sum", "no such overload")
}

fn mixed() -> ExecutionError {
    ExecutionError::function_error("sum", "list elements must have the same type")
}

fn extreme<'b, 'v>(args: Vec<CowVal<'b, 'v>>, function: &str, keep: Ordering) -> CelResult<'b, 'v> {
    let items = items(&args, function)?;
    let Some(mut best) = items.first() else {
        return fail(function, format!("{function} called on empty list"));
    };
    for i in &items[1..] {
        if compare(i.as_ref(), best.as_ref())? == keep {
            best = i;
        }
    }
    Ok(CowVal::Owned(best.as_ref().clone_as_boxed()))
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    extreme(args, "min", Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    extreme(args, "max", Ordering::Greater)
}

fn position(args: &[CowVal<'_, '_>], function: &str, last: bool) -> Result<i64, ExecutionError> {
    let items = items(args, function)?;
    let needle = crate::env::arg(args, 1)?;
    let found = |i: &dyn Val| i.equals(needle) || needle.equals(i);
    let mut values = items.iter().map(|b| b.as_ref());
    let pos = if last {
        values.rposition(found)
    } else {
        values.position(found)
    };
    Ok(pos.map_or(-1, |p| p as i64))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelInt::from(position(&args, "indexOf", false)?))
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(CelInt::from(position(&args, "lastIndexOf", true)?))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::eval;

    #[test]
    fn lists() {
        assert_eq!(eval("[1, 2, 2, 3].isSorted()"), "true");
        assert_eq!(eval("[1, 3, 2].isSorted()"), "false");
        assert_eq!(eval("['a', 'b'].isSorted()"), "true");
        assert_eq!(eval("[1, 2, 3].sum()"), "6");
        assert_eq!(eval("[1.5, 2.0].sum()"), "3.5");
        assert_eq!(eval("[].sum()"), "0");
        assert_eq!(eval("[3, 1, 2].min()"), "1");
        assert_eq!(eval("[3, 1, 2].max()"), "3");
        assert_eq!(eval("['b', 'c', 'a'].max()"), "\"c\"");
        assert!(eval("[].min()").contains("min called on empty list"));
        assert_eq!(eval("[1, 2, 3, 2].indexOf(2)"), "1");
        assert_eq!(eval("[1, 2, 3, 2].lastIndexOf(2)"), "3");
        assert_eq!(eval("[1, 2].indexOf(5)"), "-1");
        assert_eq!(eval("'abcb'.indexOf('b')"), "1");
        assert_eq!(eval("cel.bind(x, [1, 2], x.sum() + x.size())"), "5");
    }
}
