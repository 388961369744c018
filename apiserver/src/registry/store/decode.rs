//! The typed-decoding step of every write ([`super::super::typed`]), with upstream's answers:
//!
//! - a create or update body that does not decode is a 400 BadRequest, `Node in version "v1"
//!   cannot be handled as a Node: json: cannot unmarshal string into Go struct field Node.spec
//!   of type v1.NodeSpec` (`transformDecodeError` in `endpoints/handlers/rest.go`);
//! - a patch whose result does not decode is a 422 Invalid on field `patch` with kind and name
//!   empty (`applyPatchToCurrentObject`/`applyPatchToObject` in `endpoints/handlers/patch.go`):
//!   its value is the patched object's JSON for JSON and merge patches, Go's `%+v` of the patch
//!   for strategic merge (and apply) patches.

use std::sync::OnceLock;

use serde_json::Value;

use super::{PatchRequest, Store};
use crate::error::{ApiError, Result};
use crate::openapi::schemas::KindSchema;
use crate::patch::PatchType;

/// What a checked object came from, for the answer's shape.
#[derive(Clone, Copy)]
pub enum Written<'p> {
    /// A create or update body.
    Body,
    /// The result of this patch.
    Patched(&'p PatchRequest<'p>),
}

impl Store<'_> {
    /// Refuses `obj` (in the endpoint's version) unless it decodes into the kind's type.
    pub fn check_decodes(&self, obj: &Value, from: Written<'_>) -> Result<()> {
        let Err(message) = self.resource.decodes(obj) else {
            return Ok(());
        };
        let info = &self.resource.info;
        Err(refusal(&info.kind, &info.version, message, obj, from))
    }

    /// Refuses a Scale (`autoscaling/v1`, what `*/scale` reads and writes) that does not decode.
    pub fn check_scale_decodes(&self, scale: &Value, from: Written<'_>) -> Result<()> {
        use k8s_openapi::api::autoscaling::v1::Scale;
        static SCHEMA: OnceLock<KindSchema> = OnceLock::new();
        let Err(e) = crate::registry::typed::decode::<Scale>(scale) else {
            return Ok(());
        };
        let schema = SCHEMA
            .get_or_init(|| crate::openapi::schemas::kind_schema(|g| g.subschema_for::<Scale>()));
        let message = crate::registry::typed::go_message(schema, scale, &e);
        Err(refusal("Scale", "v1", message, scale, from))
    }
}

/// The answer to an object of `kind` that does not decode (see the module docs).
fn refusal(kind: &str, version: &str, message: String, obj: &Value, from: Written<'_>) -> ApiError {
    match from {
        Written::Body => ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {message}"
        )),
        Written::Patched(patch) => {
            let value = match patch.ty {
                PatchType::Json | PatchType::Merge => {
                    serde_json::to_string(obj).unwrap_or_default()
                }
                PatchType::StrategicMerge => serde_json::from_slice::<Value>(patch.body)
                    .map(|p| crate::registry::typed::go_print(&p))
                    .unwrap_or_default(),
                PatchType::Apply => serde_yaml::from_slice::<Value>(patch.body)
                    .map(|p| crate::registry::typed::go_print(&p))
                    .unwrap_or_default(),
            };
            api::status::invalid(
                "",
                "",
                &[api::validation::FieldError::invalid(
                    "patch", &value, message,
                )],
            )
            .into()
        }
    }
}
