//! The Kubernetes CEL libraries (`apiserver/pkg/cel/library/`), registered as overloads on the
//! shared environment. Each module is one upstream library.

pub mod authz;
mod format;
mod lists;
mod net;
mod quantity;
pub mod regex;
mod sets;
mod urls;

pub use self::regex::cached_regex;

use cel::Env;

/// Registers every library. Registration only fails on a duplicate overload, which is a
/// programming error that the library tests catch.
pub fn register(env: &mut Env) {
    let results = [
        lists::register(env),
        self::regex::register(env),
        urls::register(env),
        quantity::register(env),
        net::register(env),
        format::register(env),
        sets::register(env),
        authz::register(env),
    ];
    debug_assert!(results.iter().all(Result::is_ok), "{results:?}");
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::env::ENV;
    use cel::common::types::{CelBool, CelDouble, CelInt, CelString};
    use cel::Context;

    /// Evaluates a closed expression and renders the result for assertions: `true`, `3`,
    /// `"s"`, `error: ...`.
    pub fn eval(src: &str) -> String {
        let program = match crate::compile::parse(src) {
            Ok(p) => p,
            Err(e) => return format!("parse error: {e}"),
        };
        let ctx = Context::with_env(ENV.clone());
        match cel::Value::resolve_val(&program, &ctx) {
            Ok(v) => {
                if let Some(b) = v.downcast_ref::<CelBool>() {
                    b.inner().to_string()
                } else if let Some(i) = v.downcast_ref::<CelInt>() {
                    i.inner().to_string()
                } else if let Some(d) = v.downcast_ref::<CelDouble>() {
                    format!("{:?}", d.inner())
                } else if let Some(s) = v.downcast_ref::<CelString>() {
                    format!("{:?}", s.inner())
                } else {
                    format!("{v:?}")
                }
            }
            Err(e) => format!("error: {}", crate::errors::runtime_message(&e)),
        }
    }
}

/// Implements `Val` for a library's own value type (`URL`, `Quantity`, `net.IP`, ...): owned,
/// compared with `PartialEq`, dispatched on its own CEL type.
macro_rules! library_type {
    ($ty:ty, $type_const:ident, $name:literal) => {
        pub static $type_const: cel::common::types::Type =
            cel::common::types::Type::new_unspecified_type($name);

        impl cel::common::value::Val for $ty {
            fn get_type(&self) -> &cel::common::types::Type {
                &$type_const
            }
            fn cel_type() -> &'static cel::common::types::Type {
                &$type_const
            }
            fn equals(&self, other: &dyn cel::common::value::Val) -> bool {
                other.downcast_ref::<Self>().is_some_and(|o| o == self)
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn cel::common::value::Val + 'v>
            where
                Self: 'v,
            {
                Box::new(self.clone())
            }
            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }
        impl cel::common::value::StaticVal for $ty {}
    };
}
pub(crate) use library_type;

#[cfg(test)]
mod tests {
    use super::testing::eval;

    /// cel-go's strings extension, which Kubernetes enables, comes from the `cel` crate.
    #[test]
    fn strings_extension() {
        assert_eq!(eval("'hello'.charAt(1)"), "\"e\"");
        assert_eq!(eval("'hello'.indexOf('l')"), "2");
        assert_eq!(eval("'hello'.lastIndexOf('l')"), "3");
        assert_eq!(eval("'HeLLo'.lowerAscii()"), "\"hello\"");
        assert_eq!(eval("'HeLLo'.upperAscii()"), "\"HELLO\"");
        assert_eq!(eval("'a-b-c'.replace('-', '+')"), "\"a+b+c\"");
        assert_eq!(eval("'a-b-c'.replace('-', '+', 1)"), "\"a+b-c\"");
        assert_eq!(eval("'a,b'.split(',') == ['a', 'b']"), "true");
        assert_eq!(eval("'hello'.substring(1, 3)"), "\"el\"");
        assert_eq!(eval("'  x '.trim()"), "\"x\"");
        assert_eq!(eval("['a', 'b'].join('/')"), "\"a/b\"");
        assert_eq!(eval("strings.quote('a\"b')"), "\"\\\"a\\\\\\\"b\\\"\"");
    }

    #[test]
    fn standard_macros() {
        assert_eq!(eval("[1, 2, 3].all(x, x > 0)"), "true");
        assert_eq!(eval("[1, 2, 3].exists(x, x > 2)"), "true");
        assert_eq!(eval("[1, 2, 3].exists_one(x, x > 1)"), "false");
        assert_eq!(eval("[1, 2, 3].map(x, x * 2) == [2, 4, 6]"), "true");
        assert_eq!(eval("[1, 2, 3].filter(x, x > 1) == [2, 3]"), "true");
        assert_eq!(eval("has({'a': 1}.a)"), "true");
    }

    #[test]
    fn the_meter_stops_long_loops() {
        let (out, usage) = crate::env::Meter::run(0, 1000, || {
            eval("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(b, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(c, a + b + c > 0)))")
        });
        assert!(usage.exceeded);
        assert!(out.contains("actual cost limit exceeded"), "{out}");
        let (out, usage) = crate::env::Meter::run(0, 1_000_000, || eval("[1, 2].all(a, a > 0)"));
        assert_eq!(out, "true");
        assert!(!usage.exceeded && usage.cost > 0);
    }
}
