//! Schemas of the served kinds for `components.schemas`.
//!
//! Interim: an open object schema per kind with its top-level fields; replaced by generated
//! schemas (k8s-openapi `schemars`) for `kubectl explain`.

use serde_json::{json, Value};

/// The schema of one kind.
pub fn schema_of(info: &api::ResourceInfo) -> Value {
    json!({
        "type": "object",
        "description": format!("{} is a Kubernetes {} object.", info.kind, info.api_version()),
        "properties": {
            "apiVersion": { "type": "string", "description": "APIVersion defines the versioned schema of this representation of an object." },
            "kind": { "type": "string", "description": "Kind is a string value representing the REST resource this object represents." },
            "metadata": { "type": "object", "description": "Standard object's metadata." },
            "spec": { "type": "object" },
            "status": { "type": "object" },
        },
    })
}

/// Definitions referenced by the kinds' schemas.
pub fn shared_definitions() -> Vec<(String, Value)> {
    Vec::new()
}
