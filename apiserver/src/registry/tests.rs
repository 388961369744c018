//! Table-driven tests of the strategies.

use super::*;
use serde_json::json;

fn s(group: &str, plural: &str) -> &'static dyn Strategy {
    match get(group, "v1", plural) {
        Some(s) => s,
        None => panic!("no strategy for {group}/{plural}"),
    }
}

#[test]
fn every_resource_has_its_strategy_and_aligned_table() {
    let now = jiff::Timestamp::now();
    for r in api::resources() {
        let st = strategy_for(r);
        assert_eq!(st.resource(), r, "{}", r.plural);
        let obj = json!({"metadata": {"name": "x", "namespace": "default", "creationTimestamp": api::meta::now_rfc3339()}});
        assert_eq!(
            st.table_columns().len(),
            st.table_cells(&obj, now).len(),
            "{}",
            r.plural
        );
        assert_eq!(st.has_status(), r.has_status_subresource(), "{}", r.plural);
        assert_eq!(
            st.scale().is_some(),
            r.subresource("scale").is_some(),
            "{}",
            r.plural
        );
        assert_eq!(st.field_value(&obj, "metadata.name").as_deref(), Some("x"));
        assert!(st.field_value(&obj, "no.such.field").is_none());
    }
}
