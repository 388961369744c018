//! cel-go's sets extension (`ext.Sets()`), which Kubernetes enables: `sets.contains`,
//! `sets.equivalent` and `sets.intersects` on lists, comparing elements with CEL equality.

use crate::env::{boolean, charge, CelResult};
use cel::common::types::{CelList, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let l = || LIST_TYPE.to_owned();
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        vec![l(), l()],
        contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        vec![l(), l()],
        equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        vec![l(), l()],
        intersects,
    )?;
    Ok(())
}

/// The elements of a list argument.
type Items<'a, 'v> = &'a [Box<dyn Val + 'v>];

fn lists<'a, 'v>(
    args: &'a [CowVal<'_, 'v>],
) -> Result<(Items<'a, 'v>, Items<'a, 'v>), ExecutionError> {
    let list = |i: usize| {
        args.get(i)
            .and_then(|a| a.downcast_ref::<CelList>())
            .map(|l| l.inner())
            .ok_or_else(|| ExecutionError::function_error("sets", "arguments must be lists"))
    };
    let (a, b) = (list(0)?, list(1)?);
    charge((a.len() as u64).saturating_mul(b.len() as u64))?;
    Ok((a, b))
}

fn has(list: &[Box<dyn Val + '_>], x: &dyn Val) -> bool {
    list.iter().any(|y| y.as_ref().equals(x))
}

fn contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = lists(&args)?;
    boolean(b.iter().all(|x| has(a, x.as_ref())))
}

fn equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = lists(&args)?;
    boolean(b.iter().all(|x| has(a, x.as_ref())) && a.iter().all(|x| has(b, x.as_ref())))
}

fn intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = lists(&args)?;
    boolean(b.iter().any(|x| has(a, x.as_ref())))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::eval;

    #[test]
    fn sets() {
        assert_eq!(eval("sets.contains([1, 2, 3], [3, 1])"), "true");
        assert_eq!(eval("sets.contains([1, 2], [4])"), "false");
        assert_eq!(eval("sets.contains([1], [])"), "true");
        assert_eq!(eval("sets.equivalent([1, 2, 2], [2, 1])"), "true");
        assert_eq!(eval("sets.equivalent([1, 2], [1])"), "false");
        assert_eq!(eval("sets.intersects([1, 2], [2, 5])"), "true");
        assert_eq!(eval("sets.intersects([1, 2], [5])"), "false");
    }
}
