//! The Kubernetes CEL libraries (`apiserver/pkg/cel/library/`), registered as overloads on the
//! shared environment. Each module is one upstream library.

mod format;
mod lists;
mod net;
mod quantity;
pub mod regex;
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
