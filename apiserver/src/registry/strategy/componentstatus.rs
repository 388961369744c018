//! The two core kinds that are not stored: ComponentStatus (get/list only; the objects are
//! computed per request by the handlers from [`crate::components`]) and Binding (create only; a
//! POST to `bindings` binds the pod it names, as `pods/binding`). Their strategies carry only
//! kubectl's printer.

use super::table::{column, name_column};
use super::{Strategy, Unstored};
use serde_json::{json, Value};

/// core v1 ComponentStatus.
pub struct ComponentStatusStrategy;

/// kubectl's cells: STATUS from the `Healthy` condition (`Healthy`/`Unhealthy`, `Unknown`
/// without one), its MESSAGE and ERROR.
fn health(obj: &Value) -> (String, String, String) {
    let conds = obj.get("conditions").and_then(Value::as_array);
    let healthy = conds
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Healthy"));
    let Some(c) = healthy else {
        return ("Unknown".into(), String::new(), String::new());
    };
    let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let status = if text("status") == "True" {
        "Healthy"
    } else {
        "Unhealthy"
    };
    (status.into(), text("message"), text("error"))
}

impl Strategy for ComponentStatusStrategy {
    fn unstored(&self) -> Option<Unstored> {
        Some(Unstored::ComponentStatuses)
    }

    fn deprecation_warning(&self) -> Option<&'static str> {
        Some("v1 ComponentStatus is deprecated in v1.19+")
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Status",
                "string",
                "",
                "Status of the component conditions",
                0,
            ),
            column(
                "Message",
                "string",
                "",
                "Message of the component conditions",
                0,
            ),
            column(
                "Error",
                "string",
                "",
                "Error of the component conditions",
                0,
            ),
        ]
    }

    fn table_cells(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        let (status, message, error) = health(obj);
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            json!(status),
            json!(message),
            json!(error),
        ]
    }
}

/// core v1 Binding (`POST /api/v1/namespaces/{ns}/bindings`).
pub struct BindingStrategy;

impl Strategy for BindingStrategy {
    fn unstored(&self) -> Option<Unstored> {
        Some(Unstored::Bindings)
    }
}
