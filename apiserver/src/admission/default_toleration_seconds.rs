//! The `DefaultTolerationSeconds` admission plugin (`plugin/pkg/admission/defaulttolerationseconds`):
//! a pod (create or update of the pod itself) that does not tolerate the `NoExecute` taints
//! `node.kubernetes.io/not-ready` and `node.kubernetes.io/unreachable` gets an `Exists`
//! toleration for each, for `--default-not-ready-toleration-seconds` and
//! `--default-unreachable-toleration-seconds` (300 s each). A toleration counts when its key is
//! the taint's or empty and its effect is `NoExecute` or empty, as upstream; its operator and
//! value are not looked at.

use serde_json::{json, Value};

use super::{Attributes, Plugin, DEFAULT_TOLERATION_SECONDS};
use crate::registry::{Forbidden, Objects};

/// `--default-not-ready-toleration-seconds` and `--default-unreachable-toleration-seconds`.
pub const DEFAULT_SECONDS: i64 = 300;
pub use api::taints::{TAINT_NOT_READY, TAINT_UNREACHABLE};

/// The plugin with its two durations.
pub struct DefaultTolerationSeconds {
    not_ready_seconds: i64,
    unreachable_seconds: i64,
}

impl DefaultTolerationSeconds {
    pub fn new(not_ready_seconds: i64, unreachable_seconds: i64) -> Self {
        DefaultTolerationSeconds {
            not_ready_seconds,
            unreachable_seconds,
        }
    }
}

/// Whether `toleration` tolerates the `NoExecute` taint `key` in this plugin's sense.
fn tolerates_no_execute(toleration: &Value, key: &str) -> bool {
    let field = |f: &str| toleration.get(f).and_then(Value::as_str).unwrap_or("");
    let k = field("key");
    let effect = field("effect");
    (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
}

impl Plugin for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        DEFAULT_TOLERATION_SECONDS
    }

    fn admit(
        &self,
        attrs: &Attributes<'_>,
        pod: &mut Value,
        _objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if !attrs.is("", "pods") {
            return Ok(());
        }
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if tolerations.is_null() {
            *tolerations = json!([]);
        }
        let Some(list) = tolerations.as_array_mut() else {
            // Not a list: validation refuses it.
            return Ok(());
        };
        for (key, seconds) in [
            (TAINT_NOT_READY, self.not_ready_seconds),
            (TAINT_UNREACHABLE, self.unreachable_seconds),
        ] {
            if !list.iter().any(|t| tolerates_no_execute(t, key)) {
                list.push(json!({
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": seconds,
                }));
            }
        }
        Ok(())
    }
}
