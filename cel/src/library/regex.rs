//! Kubernetes' regex library (`library/regex.go`): `find` and `findAll`, plus the cached regex
//! behind them and behind `matches` (compilation rewrites `matches` to use it, so a pattern is
//! compiled once per thread, not once per call, as upstream's `OptimizeRegex` precompiles).

use crate::env::{charge, int_arg, owned, str_arg, CelResult};
use cel::common::types::{CelBool, CelList, CelString, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use regex::Regex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// The `matches` that compiled rules call.
pub const MATCHES_FN: &str = "@k8s.matches";

/// Patterns kept per thread; the cache is cleared when full, which bounds its memory together
/// with [`CACHED_PATTERN_LIMIT`] and the compiled-size limit.
const CACHE_LIMIT: usize = 128;

/// Longer patterns (rarely rule literals) are compiled for each call instead of cached.
const CACHED_PATTERN_LIMIT: usize = 512;

/// The compiled-size limit of one regex (the `regex` crate's default is 10 MiB).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

thread_local! {
    static CACHE: RefCell<HashMap<String, Arc<Regex>>> = RefCell::new(HashMap::new());
}

/// The compiled `pattern`, from the cache when it has been seen. The error text is RE2's
/// (`error parsing regexp: ...`) as near as the `regex` crate's allows.
pub fn cached_regex(pattern: &str) -> Result<Arc<Regex>, String> {
    if let Some(re) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = Arc::new(
        regex::RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("error parsing regexp: {e}"))?,
    );
    if pattern.len() > CACHED_PATTERN_LIMIT {
        return Ok(re);
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_LIMIT {
            c.clear();
        }
        c.insert(pattern.to_owned(), re.clone());
    });
    Ok(re)
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let s = || STRING_TYPE.to_owned();
    env.add_member_overload("find", "string_find_string", s(), vec![s()], find)?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        s(),
        vec![s()],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        s(),
        vec![s(), cel::common::types::INT_TYPE],
        find_all_n,
    )?;
    env.add_member_overload(MATCHES_FN, "string_matches_string", s(), vec![s()], matches)?;
    env.add_overload(MATCHES_FN, "matches_string", vec![s(), s()], matches)?;
    Ok(())
}

/// cel-go's cost of matching: the string's traversal times the pattern's length factor.
fn regex_cost(s: &str, pattern: &str) -> u64 {
    let str_cost = (s.len() as u64 + 1).div_ceil(10);
    let re_cost = (pattern.len() as u64).div_ceil(4).max(1);
    str_cost.saturating_mul(re_cost)
}

fn regex_of(function: &str, pattern: &str) -> Result<Arc<Regex>, ExecutionError> {
    cached_regex(pattern).map_err(|e| ExecutionError::function_error(function, e))
}

fn matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (s, p) = (str_arg(&args, 0)?, str_arg(&args, 1)?);
    charge(regex_cost(s, p))?;
    owned(CelBool::from(regex_of("matches", p)?.is_match(s)))
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (s, p) = (str_arg(&args, 0)?, str_arg(&args, 1)?);
    charge(regex_cost(s, p))?;
    let found = regex_of("find", p)?.find(s).map(|m| m.as_str().to_owned());
    owned(CelString::from(found.unwrap_or_default()))
}

fn all(args: &[CowVal<'_, '_>], limit: i64) -> Result<CelList<'static>, ExecutionError> {
    let (s, p) = (str_arg(args, 0)?, str_arg(args, 1)?);
    charge(regex_cost(s, p))?;
    let re = regex_of("findAll", p)?;
    let limit = if limit < 0 {
        usize::MAX
    } else {
        limit as usize
    };
    let found: Vec<Box<dyn Val>> = re
        .find_iter(s)
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val>)
        .collect();
    Ok(CelList::from(found))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    owned(all(&args, -1)?)
}

fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let n = int_arg(&args, 2)?;
    if n == 0 {
        return owned(CelList::from(Vec::<Box<dyn Val>>::new()));
    }
    owned(all(&args, n)?)
}

#[cfg(test)]
mod tests {
    use crate::library::testing::eval;

    #[test]
    fn regex() {
        assert_eq!(eval("'abc 123'.find('[0-9]+')"), "\"123\"");
        assert_eq!(eval("'abc'.find('[0-9]+')"), "\"\"");
        assert_eq!(
            eval("'123 abc 456'.findAll('[0-9]+') == ['123', '456']"),
            "true"
        );
        assert_eq!(
            eval("'123 abc 456'.findAll('[0-9]+', 1) == ['123']"),
            "true"
        );
        assert_eq!(eval("'123 abc 456'.findAll('[0-9]+', 0) == []"), "true");
        assert!(eval("'x'.find('[')").contains("error parsing regexp"));
        assert_eq!(eval("'foo'.matches('^f.o$')"), "true");
        assert_eq!(eval("'fooo'.matches('^f.o$')"), "false");
    }
}
