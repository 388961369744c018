//! Helpers of the plugins' unit tests: request attributes and fixed objects.

use std::sync::Arc;

use serde_json::Value;

use super::{Attributes, Operation};
use crate::registry::Objects;

/// A request for `group`/`resource` (cluster scope, no user, no old object).
pub fn attrs(
    operation: Operation,
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
) -> Attributes<'static> {
    Attributes {
        operation,
        group,
        resource,
        namespace: None,
        old: None,
        subresource,
        warnings: None,
        audit: None,
        user: None,
        authorizes: false,
    }
}

/// No objects at all.
pub struct Nothing;

impl Objects for Nothing {
    fn list(&self, _g: &str, _p: &str) -> Vec<Arc<Value>> {
        Vec::new()
    }
    fn get(&self, _g: &str, _p: &str, _n: Option<&str>, _name: &str) -> Option<Arc<Value>> {
        None
    }
}

/// Fixed objects by (group, plural).
#[derive(Default)]
pub struct Fixed(pub Vec<(&'static str, &'static str, Value)>);

impl Objects for Fixed {
    fn list(&self, group: &str, plural: &str) -> Vec<Arc<Value>> {
        self.0
            .iter()
            .filter(|(g, p, _)| *g == group && *p == plural)
            .map(|(_, _, o)| Arc::new(o.clone()))
            .collect()
    }
    fn get(&self, group: &str, plural: &str, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        self.0
            .iter()
            .find(|(g, p, o)| {
                *g == group
                    && *p == plural
                    && api::meta::name(o) == Some(name)
                    && api::meta::namespace(o) == ns
            })
            .map(|(_, _, o)| Arc::new(o.clone()))
    }
}
