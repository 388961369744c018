//! The typed-decoding step of every write ([`super::super::typed`]), with upstream's answers:
//!
//! - a create or update body that does not decode is a 400 BadRequest, `Node in version "v1"
//!   cannot be handled as a Node: json: cannot unmarshal string into Go struct field Node.spec
//!   of type v1.NodeSpec` (`transformDecodeError` in `endpoints/handlers/rest.go`);
//! - a patch whose result does not decode is a 422 Invalid on field `patch` with kind and name
//!   empty (`applyPatchToCurrentObject`/`applyPatchToObject` in `endpoints/handlers/patch.go`):
//!   its value is the patched object's JSON for JSON and merge patches, Go's `%+v` of the patch
//!   for strategic merge (and apply) patches.

use serde_json::Value;

use super::{PatchRequest, Store};
use crate::error::{ApiError, Result};
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

    /// Refuses the body of a subresource whose kind is not the resource's (a `Scale` of
    /// `*/scale`, a `Binding` of `pods/binding`) unless it decodes into `T`, the `kind` of
    /// `version`. The schema for the message is only generated for a refusal.
    pub fn check_decodes_as<T>(
        &self,
        (kind, version): (&str, &str),
        obj: &Value,
        from: Written<'_>,
    ) -> Result<()>
    where
        T: serde::de::DeserializeOwned + schemars::JsonSchema,
    {
        let Err(e) = crate::registry::typed::decode::<T>(obj) else {
            return Ok(());
        };
        let schema = crate::openapi::schemas::kind_schema(|g| g.subschema_for::<T>());
        let message = crate::registry::typed::go_message(&schema, obj, &e);
        Err(refusal(kind, version, message, obj, from))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_are_400_and_patches_422_on_field_patch() {
        let go = "json: cannot unmarshal number into Go struct field PodSpec.spec.tolerations of type []v1.Toleration";
        let obj = json!({"spec": {"tolerations": 5}});
        let body = refusal("Pod", "v1", go.to_string(), &obj, Written::Body);
        assert_eq!(body.code(), 400);
        assert_eq!(
            body.to_status()["message"],
            format!("Pod in version \"v1\" cannot be handled as a Pod: {go}")
        );
        let smp = PatchRequest {
            ty: PatchType::StrategicMerge,
            body: br#"{"spec":{"tolerations":5}}"#,
        };
        let patched = refusal("Pod", "v1", go.to_string(), &obj, Written::Patched(&smp));
        let status = patched.to_status();
        assert_eq!(patched.code(), 422);
        assert_eq!(
            status["message"],
            format!(
                " \"\" is invalid: patch: Invalid value: \"map[spec:map[tolerations:5]]\": {go}"
            )
        );
        assert_eq!(status["details"]["causes"][0]["field"], "patch");
        let merge = PatchRequest {
            ty: PatchType::Merge,
            body: br#"{"spec":{"tolerations":5}}"#,
        };
        let patched = refusal("Pod", "v1", go.to_string(), &obj, Written::Patched(&merge));
        let message = patched.to_status()["message"].clone();
        assert!(
            message
                .as_str()
                .is_some_and(|m| m.contains(r#"Invalid value: "{\"spec\":{\"tolerations\":5}}""#)),
            "the patched object's JSON: {message}"
        );
    }
}
