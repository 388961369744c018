//! JSON to CEL values by schema, as upstream's `UnstructuredToVal`: `integer` is `int`, `number`
//! is `double` (even when the JSON has no fraction), `int-or-string` is whichever it holds,
//! `date-time`/`date` strings are timestamps, `duration` strings durations, `byte` strings bytes,
//! objects are maps keyed by escaped property names and hold only declared properties.
//!
//! Strings borrow from the JSON, so a conversion allocates only the containers.

use crate::schema::{Kind, Node};
use base64::Engine;
use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelList, CelMap, CelMapKey, CelNull,
    CelString, CelTimestamp,
};
use cel::common::value::Val;
use serde_json::Value;
use std::collections::HashMap;

/// Converts `v` typed by `node`.
pub fn to_val<'a>(v: &'a Value, node: &Node) -> Box<dyn Val + 'a> {
    match (&node.kind, v) {
        (_, Value::Null) => Box::new(CelNull),
        (Kind::Int, Value::Number(n)) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or_default())),
        },
        (Kind::Double, Value::Number(n)) => {
            Box::new(CelDouble::from(n.as_f64().unwrap_or_default()))
        }
        (Kind::Timestamp, Value::String(s)) => match parse_timestamp(s) {
            Some(t) => Box::new(CelTimestamp::from(t)),
            None => Box::new(CelString::from(s.as_str())),
        },
        (Kind::Duration, Value::String(s)) => match parse_duration(s) {
            Some(d) => Box::new(CelDuration::from(d)),
            None => Box::new(CelString::from(s.as_str())),
        },
        (Kind::Bytes, Value::String(s)) => {
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(b) => Box::new(CelBytes::from(b)),
                Err(_) => Box::new(CelString::from(s.as_str())),
            }
        }
        (Kind::List(item), Value::Array(items)) => {
            let list: Vec<Box<dyn Val + 'a>> = items.iter().map(|i| to_val(i, item)).collect();
            match node.list_type.as_deref() {
                Some("set") | Some("map") => {
                    Box::new(UnorderedList(std::sync::Arc::new(CelList::from(list))))
                }
                _ => shared_list(list),
            }
        }
        (Kind::Map(value), Value::Object(m)) => {
            let map: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = m
                .iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), to_val(v, value)))
                .collect();
            shared_map(map)
        }
        (Kind::Object { fields, open }, Value::Object(m)) => {
            let mut map: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> =
                HashMap::with_capacity(fields.len().min(m.len()));
            for (name, field) in fields {
                if let Some(v) = m.get(&field.json) {
                    map.insert(CelMapKey::from(name.clone()), to_val(v, &field.node));
                }
            }
            if *open {
                // Undeclared fields of a preserve-unknown-fields object are `dyn`.
                for (k, v) in m {
                    if !fields.values().any(|f| f.json == *k) {
                        map.insert(CelMapKey::from(k.as_str()), untyped(v));
                    }
                }
            }
            shared_map(map)
        }
        _ => untyped(v),
    }
}

/// A value without (or not matching) a schema: JSON's own types, integral numbers as `int`.
pub fn untyped(v: &Value) -> Box<dyn Val + '_> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            let list: Vec<Box<dyn Val + '_>> = items.iter().map(untyped).collect();
            shared_list(list)
        }
        Value::Object(m) => {
            let map: HashMap<CelMapKey<'_>, Box<dyn Val + '_>> = m
                .iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), untyped(v)))
                .collect();
            shared_map(map)
        }
    }
}

fn parse_timestamp(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t);
    }
    let date = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let utc = chrono::FixedOffset::east_opt(0)?;
    date.and_hms_opt(0, 0, 0)?.and_local_timezone(utc).single()
}

/// go-openapi's `strfmt.ParseDuration`: Go durations plus `d` and `w` units.
pub fn parse_duration(s: &str) -> Option<chrono::Duration> {
    let s = s.trim();
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_end);
        let n: f64 = num.parse().ok()?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let ns = match unit.trim() {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            "w" => 7.0 * 86400e9,
            _ => return None,
        };
        total += n * ns;
        rest = tail;
    }
    if total > i64::MAX as f64 {
        return None;
    }
    let d = chrono::Duration::nanoseconds(total as i64);
    Some(if neg { -d } else { d })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_strfmt() {
        assert_eq!(parse_duration("1h30m"), Some(chrono::Duration::minutes(90)));
        assert_eq!(parse_duration("2d"), Some(chrono::Duration::hours(48)));
        assert_eq!(
            parse_duration("1.5s"),
            Some(chrono::Duration::milliseconds(1500))
        );
        assert_eq!(parse_duration("10x"), None);
    }
}

/// Maps and lists of converted objects, shared: cloning one (the interpreter clones every item a
/// comprehension visits) is a reference count, not a deep copy. Everything else is the built-in
/// `CelMap`/`CelList` inside, which `as_builtin` exposes, so every operation sees a built-in.
macro_rules! shared {
    ($name:ident, $inner:ident, $variant:ident, $ty:ident, $eq:expr, [$($extra:ident),*]) => {
        #[derive(Debug, Clone)]
        pub struct $name<'v>(std::sync::Arc<$inner<'v>>);

        impl<'v> Val for $name<'v> {
            fn get_type(&self) -> &cel::common::types::Type {
                self.0.get_type()
            }
            fn cel_type() -> &'static cel::common::types::Type {
                &cel::common::types::$ty
            }
            fn as_container(&self) -> Option<&dyn cel::common::traits::Container> {
                self.0.as_container()
            }
            fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn cel::common::traits::Indexer + 'w)>
            where
                Self: 'w,
            {
                self.0.as_indexer()
            }
            fn into_indexer<'w>(self: Box<Self>) -> Option<Box<dyn cel::common::traits::Indexer + 'w>>
            where
                Self: 'w,
            {
                Box::new(std::sync::Arc::unwrap_or_clone(self.0)).into_indexer()
            }
            fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn cel::common::traits::Iterable + 'w)>
            where
                Self: 'w,
            {
                self.0.as_iterable()
            }
            fn as_sizer(&self) -> Option<&dyn cel::common::traits::Sizer> {
                self.0.as_sizer()
            }
            fn as_zeroer(&self) -> Option<&dyn cel::common::traits::Zeroer> {
                self.0.as_zeroer()
            }
            $(shared!(@$extra);)*
            fn equals(&self, other: &dyn Val) -> bool {
                let eq: fn(&$inner<'_>, &dyn Val) -> bool = $eq;
                eq(&self.0, other)
            }
            fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
            where
                Self: 'w,
            {
                Box::new(self.clone())
            }
            fn as_builtin<'b, 'w>(&'b self) -> cel::common::value::BuiltinRef<'b, 'w>
            where
                Self: 'w,
            {
                cel::common::value::BuiltinRef::$variant(&self.0)
            }
            fn into_builtin<'w>(self: Box<Self>) -> Option<cel::common::value::Builtin<'w>>
            where
                Self: 'w,
            {
                Some(cel::common::value::Builtin::$variant(std::sync::Arc::unwrap_or_clone(self.0)))
            }
        }
    };
    (@adder) => {
        fn as_adder<'b, 'w>(&'b self) -> Option<&'b (dyn cel::common::traits::Adder + 'w)>
        where
            Self: 'w,
        {
            self.0.as_adder()
        }
    };
}

shared!(SharedMap, CelMap, Map, MAP_TYPE, |a, b| a.equals(b), []);
shared!(
    SharedList,
    CelList,
    List,
    LIST_TYPE,
    |a, b| a.equals(b),
    [adder]
);
// `x-kubernetes-list-type: set` and `map` lists are equal regardless of order, as upstream's
// `unstructuredSetList` / `unstructuredMapList`.
shared!(
    UnorderedList,
    CelList,
    List,
    LIST_TYPE,
    unordered_equals,
    [adder]
);

fn unordered_equals(a: &CelList<'_>, b: &dyn Val) -> bool {
    let Some(b) = b.downcast_ref::<CelList>() else {
        return false;
    };
    let (a, b) = (a.inner(), b.inner());
    if a.len() != b.len() {
        return false;
    }
    let mut used = vec![false; b.len()];
    a.iter().all(|x| {
        let found = b
            .iter()
            .enumerate()
            .position(|(i, y)| !used[i] && x.as_ref().equals(y.as_ref()));
        found.map(|i| used[i] = true).is_some()
    })
}

fn shared_map<'a>(m: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>>) -> Box<dyn Val + 'a> {
    Box::new(SharedMap(std::sync::Arc::new(CelMap::from(m))))
}

fn shared_list<'a>(l: Vec<Box<dyn Val + 'a>>) -> Box<dyn Val + 'a> {
    Box::new(SharedList(std::sync::Arc::new(CelList::from(l))))
}
