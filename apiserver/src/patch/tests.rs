//! Patch tests: strategic merge cases from Kubernetes' own semantics, merge/JSON patch, server-side apply.

use super::*;
use serde_json::json;

fn info(group: &str, plural: &str) -> &'static ResourceInfo {
    match api::find_resource(group, "v1", plural) {
        Some(i) => i,
        None => panic!("no resource {plural}"),
    }
}

fn smp(plural: &str, original: Value, patch: Value) -> Value {
    let g = if plural == "deployments" || plural == "replicasets" {
        "apps"
    } else {
        ""
    };
    match apply_patch(
        info(g, plural),
        PatchType::StrategicMerge,
        &original,
        patch.to_string().as_bytes(),
    ) {
        Ok(v) => v,
        Err(e) => panic!("patch failed: {e}"),
    }
}

#[test]
fn content_types() {
    assert_eq!(
        PatchType::from_content_type("application/strategic-merge-patch+json; charset=utf-8"),
        Some(PatchType::StrategicMerge)
    );
    assert_eq!(
        PatchType::from_content_type("application/apply-patch+yaml"),
        Some(PatchType::Apply)
    );
    assert_eq!(PatchType::from_content_type("application/json"), None);
}
