//! Core v1 PodTemplates (the kind, not the templates embedded in controllers): the pod defaults
//! of their `template` (as every pod template gets them), `ValidatePodTemplate` through the
//! shared template rules, and kubectl's printer (CONTAINERS, IMAGES, POD LABELS).
//!
//! `metadata.generation` is 1 at create and bumped by every change of `template`.

use super::podtemplate;
use super::table::{column, containers_and_images, name_column};
use super::Strategy;
use api::validation::FieldError;
use serde_json::{json, Value};

/// core v1 PodTemplate.
pub struct PodTemplateStrategy;

/// kubectl's `labels.FormatLabels`: `k=v` pairs sorted by key, `<none>` when empty.
fn format_labels(template: Option<&Value>) -> String {
    let labels = podtemplate::labels(template);
    if labels.is_empty() {
        return "<none>".to_string();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl Strategy for PodTemplateStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        !super::common::semantically_equal(new.get("template"), old.get("template"))
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        podtemplate::default_template(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, podtemplate::default_template)
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        podtemplate::default_template(new);
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        podtemplate::validate(obj.get("template"), "template")
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        podtemplate::validate(new.get("template"), "template")
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Containers",
                "string",
                "",
                "Names of each container in the template.",
                0,
            ),
            column(
                "Images",
                "string",
                "",
                "Images referenced by each container in the template.",
                0,
            ),
            column(
                "Pod Labels",
                "string",
                "",
                "The labels for the pod template.",
                0,
            ),
        ]
    }

    fn table_cells(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        let template = obj.get("template");
        let (names, images) = containers_and_images(template.and_then(|t| t.get("spec")));
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            json!(names),
            json!(images),
            json!(format_labels(template)),
        ]
    }
}
