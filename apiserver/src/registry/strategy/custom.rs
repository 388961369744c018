//! Custom resources: one [`CustomResourceStrategy`] per served version of a CRD (upstream's
//! `registry/customresource` strategy, status and scale REST, and the serving half of
//! `customresource_handler.go`).
//!
//! Built once per CRD change from the CRD object ([`CustomVersion::from_crd`]): the structural
//! schema and the compiled CEL rules are shared by every request until the CRD changes.
//! - Unknown fields are pruned ([`Strategy::prune_unknown`]; `fieldValidation=Strict` refuses
//!   them), then defaults are applied, then the object is validated (schema, then CEL unless the
//!   schema found type errors), as upstream decodes and validates.
//! - `status` is a subresource when the version enables it: create drops it, updates keep it, and
//!   generation counts changes of everything but metadata and status (everything but metadata
//!   without the subresource).
//! - Objects are stored in the CRD's storage version; with conversion `None` a version's view
//!   differs only in `apiVersion`. With `Webhook` the hooks leave `apiVersion` alone: the store
//!   converts through the webhook ([`crate::registry::conversion`]) and the hooks see the
//!   object in this version.
//! - `scale` reads and writes the version's `specReplicasPath`, `statusReplicasPath` and
//!   `labelSelectorPath`; the Table has the version's printer columns ([`super::custom_table`]);
//!   `selectableFields` are field-selector labels.
//! - Strategic merge patches are refused (415), as for every custom resource.

use std::sync::Arc;

use api::validation::{FieldError, FieldErrorKind};
use serde_json::{json, Value};

use super::custom_table::{self, JsonPath, PrinterColumn};
use super::{ScaleAccess, Strategy};

/// The `scale` subresource of a version: JSONPaths as the CRD gives them (`.spec.replicas`).
#[derive(Debug, Clone)]
pub struct ScalePaths {
    spec_replicas: String,
    status_replicas: String,
    label_selector: Option<String>,
}

/// Everything one served version of a CRD needs, built once per CRD change.
#[derive(Debug, Clone)]
pub struct CustomVersion {
    /// `apiVersion` of this version (`example.com/v1`).
    pub api_version: String,
    /// `apiVersion` objects are stored in.
    pub storage_api_version: String,
    /// `kind`.
    pub kind: String,
    /// The version's structural schema, when it has one.
    pub structural: Option<Arc<schema::Structural>>,
    /// Its compiled `x-kubernetes-validations`.
    pub validator: Option<Arc<k8s_cel::Validator>>,
    /// Whether `status` is a subresource.
    pub status: bool,
    /// The `scale` subresource.
    pub scale: Option<ScalePaths>,
    /// Printer columns.
    pub columns: Vec<PrinterColumn>,
    /// `selectableFields` as field labels (`spec.color`) with their paths.
    pub selectable: Vec<(String, JsonPath)>,
    /// Whether the CRD is being deleted (creates are refused).
    pub terminating: bool,
    /// Whether the schema has defaults (then they are applied to objects read from storage,
    /// [`Strategy::default_decoded`]).
    pub has_defaults: bool,
    /// Whether the CRD converts through a webhook (the store converts; the hooks do not).
    pub webhook: bool,
}

/// Most schema nodes [`has_defaults`] looks at (a CRD's schema is bounded by the request size;
/// this bounds the walk of a pathological one).
const MAX_SCHEMA_NODES: usize = 100_000;

/// Whether a JSON schema (`openAPIV3Schema`) declares a `default` anywhere, walking only its
/// sub-schemas (a property named `default` is not one).
pub fn has_defaults(schema: &Value) -> bool {
    let mut stack = vec![schema];
    let mut seen = 0;
    while let Some(s) = stack.pop() {
        seen += 1;
        if seen > MAX_SCHEMA_NODES {
            return true;
        }
        let Some(o) = s.as_object() else { continue };
        if o.get("default").is_some_and(|d| !d.is_null()) {
            return true;
        }
        if let Some(props) = o.get("properties").and_then(Value::as_object) {
            stack.extend(props.values());
        }
        for k in ["items", "additionalProperties", "not"] {
            if let Some(v) = o.get(k) {
                stack.push(v);
            }
        }
        for k in ["allOf", "anyOf", "oneOf"] {
            if let Some(list) = o.get(k).and_then(Value::as_array) {
                stack.extend(list.iter());
            }
        }
    }
    false
}

/// The `/`-joined form of a JSONPath of a CRD (`.spec.replicas` → `["spec", "replicas"]`).
fn path_segments(path: &str) -> Vec<&str> {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .collect()
}

fn value_at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path_segments(path)
        .into_iter()
        .try_fold(obj, |v, seg| v.get(seg))
}

impl CustomVersion {
    /// The strategy parts of `version` (a JSON object of `spec.versions`) of the CRD `crd`.
    pub fn from_crd(crd: &Value, version: &Value) -> CustomVersion {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = version.get("name").and_then(Value::as_str).unwrap_or("");
        let storage = super::crd::storage_version(crd).unwrap_or(name);
        let kind = crd
            .pointer("/spec/names/kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let props = version
            .pointer("/schema/openAPIV3Schema")
            .filter(|v| !v.is_null())
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        let structural = props.as_ref().map(|p| Arc::new(schema::Structural::new(p)));
        let validator = props
            .as_ref()
            .and_then(|p| k8s_cel::Validator::compile(p, "").ok())
            .filter(|v| !v.is_empty())
            .map(Arc::new);
        let subresources = version.get("subresources");
        let scale = subresources
            .and_then(|s| s.get("scale"))
            .filter(|s| s.is_object())
            .map(|s| {
                let text = |k: &str| s.get(k).and_then(Value::as_str).map(String::from);
                ScalePaths {
                    spec_replicas: text("specReplicasPath").unwrap_or_default(),
                    status_replicas: text("statusReplicasPath").unwrap_or_default(),
                    label_selector: text("labelSelectorPath").filter(|p| !p.is_empty()),
                }
            });
        let selectable = version
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|fields| {
                fields
                    .iter()
                    .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                    .filter_map(|p| {
                        Some((p.trim_start_matches('.').to_string(), JsonPath::parse(p)?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        CustomVersion {
            api_version: format!("{group}/{name}"),
            storage_api_version: format!("{group}/{storage}"),
            kind,
            structural,
            validator,
            status: subresources
                .and_then(|s| s.get("status"))
                .is_some_and(Value::is_object),
            scale,
            columns: PrinterColumn::of_version(version),
            selectable,
            terminating: super::crd::condition_true(crd, "Terminating"),
            has_defaults: version
                .pointer("/schema/openAPIV3Schema")
                .is_some_and(has_defaults),
            webhook: crate::registry::customresource::serving::webhook_conversion(crd),
        }
    }
}

/// The strategy of one served version of a CRD.
#[derive(Debug, Clone)]
pub struct CustomResourceStrategy {
    v: CustomVersion,
}

impl CustomResourceStrategy {
    /// The strategy of `version`.
    pub fn new(version: CustomVersion) -> Self {
        CustomResourceStrategy { v: version }
    }

    /// The version it serves.
    pub fn version(&self) -> &CustomVersion {
        &self.v
    }

    /// Sets `apiVersion` (a `None` conversion); under a webhook the store converts instead.
    fn set_api_version(&self, obj: &mut Value, api_version: &str) {
        if self.v.webhook {
            return;
        }
        if let Some(o) = obj.as_object_mut() {
            o.insert("apiVersion".into(), Value::from(api_version));
        }
    }

    fn default(&self, obj: &mut Value) {
        if let Some(s) = &self.v.structural {
            s.apply_defaults(obj);
        }
    }

    /// Schema errors, then the CEL rules unless the schema found values of the wrong type
    /// (upstream's `hasBlockingErr`: rules are not evaluated on mistyped data).
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = self
            .v
            .structural
            .as_ref()
            .map(|s| match old {
                // 1.33 ratchets: values an update leaves unchanged are not refused again.
                Some(old) => s.validate_update(obj, old),
                None => s.validate(obj),
            })
            .unwrap_or_default();
        errs.extend(self.validate_scale_paths(obj));
        if let Some(cel) = &self.v.validator {
            let blocking = errs.iter().any(|e| {
                e.kind == FieldErrorKind::NotSupported
                    || (e.kind == FieldErrorKind::Invalid && e.message.contains("must be of type"))
            });
            if blocking {
                errs.push(FieldError::invalid(
                    "<nil>",
                    "",
                    "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                ));
            } else {
                errs.extend(cel.validate(obj, old));
            }
        }
        errs
    }

    /// The replicas at `specReplicasPath` must be a non-negative 32-bit integer when present
    /// (upstream's `validateScale` of a custom resource).
    fn validate_scale_paths(&self, obj: &Value) -> Vec<FieldError> {
        let Some(scale) = &self.v.scale else {
            return Vec::new();
        };
        let mut errs = Vec::new();
        for path in [&scale.spec_replicas, &scale.status_replicas] {
            let field = path.trim_start_matches('.');
            match value_at(obj, path) {
                None | Some(Value::Null) => {}
                Some(v) => match v.as_i64() {
                    Some(n) if n < 0 => errs.push(FieldError::invalid_value(
                        field,
                        v,
                        "should be a non-negative integer",
                    )),
                    Some(n) if n > i64::from(i32::MAX) => errs.push(FieldError::invalid_value(
                        field,
                        v,
                        format!("should be less than or equal to {}", i32::MAX),
                    )),
                    Some(_) => {}
                    None => errs.push(FieldError::invalid_value(field, v, "should be an integer")),
                },
            }
        }
        errs
    }
}

/// `obj` without `metadata` (and `status`, when `status` is a subresource), for generation.
fn generation_view(obj: &Value, status: bool) -> Value {
    let mut v = obj.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("metadata");
        if status {
            o.remove("status");
        }
        o.remove("apiVersion");
        o.remove("kind");
    }
    v
}

impl Strategy for CustomResourceStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        if self.v.status {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
        self.default(obj);
        self.set_api_version(obj, &self.v.storage_api_version);
    }

    /// The version's structural schema `default`s (upstream's CRD codec defaults what it
    /// decodes from storage).
    fn default_decoded(&self, obj: &mut Value) -> bool {
        self.v.has_defaults && super::defaulted(obj, |obj| self.default(obj))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        generation_view(new, self.v.status) != generation_view(old, self.v.status)
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj, None)
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        self.default(new);
    }

    fn finish_update(&self, new: &mut Value, _old: &Value) {
        self.set_api_version(new, &self.v.storage_api_version);
    }

    fn prepare_for_status_update(&self, new: &mut Value, _old: &Value) {
        self.default(new);
        self.set_api_version(new, &self.v.storage_api_version);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.validate(new, Some(old))
    }

    fn create_refused(&self) -> Option<String> {
        self.v
            .terminating
            .then(|| "create not allowed while custom resource definition is terminating".into())
    }

    fn prune_unknown(&self, obj: &mut Value) -> Option<Vec<String>> {
        Some(
            self.v
                .structural
                .as_ref()
                .map(|s| {
                    let mut unknown = s.prune(obj);
                    // Embedded resources' metadata as ObjectMeta (upstream coerces after
                    // pruning). Ill-typed metadata is left as it is for validation to refuse.
                    if let Ok(more) = s.coerce_embedded_metadata(obj, false) {
                        unknown.extend(more);
                    }
                    unknown
                })
                .unwrap_or_default(),
        )
    }

    fn strategic_merge(&self) -> bool {
        false
    }

    fn structural(&self) -> Option<&schema::Structural> {
        self.v.structural.as_deref()
    }

    fn scale(&self) -> Option<&dyn ScaleAccess> {
        self.v.scale.as_ref().map(|_| self as &dyn ScaleAccess)
    }

    fn table_columns(&self) -> Vec<Value> {
        custom_table::columns(&self.v.columns)
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        custom_table::cells(&self.v.columns, obj, now)
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        let (_, path) = self.v.selectable.iter().find(|(f, _)| f == field)?;
        Some(match path.find(obj).first() {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(v) => custom_table::print_value(v),
        })
    }

    fn to_storage(&self, mut obj: Value) -> Value {
        self.set_api_version(&mut obj, &self.v.storage_api_version);
        obj
    }

    fn from_storage(&self, mut obj: Value) -> Value {
        self.set_api_version(&mut obj, &self.v.api_version);
        self.default(&mut obj);
        obj
    }
}

impl ScaleAccess for CustomResourceStrategy {
    fn to_scale(&self, obj: &Value) -> Value {
        let Some(scale) = &self.v.scale else {
            return Value::Null;
        };
        let int_at = |p: &str| value_at(obj, p).and_then(Value::as_i64).unwrap_or(0);
        let mut meta = serde_json::Map::new();
        if let Some(m) = obj.get("metadata").and_then(Value::as_object) {
            for k in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "creationTimestamp",
            ] {
                if let Some(v) = m.get(k) {
                    meta.insert(k.to_string(), v.clone());
                }
            }
        }
        let mut status = json!({ "replicas": int_at(&scale.status_replicas) });
        if let Some(sel) = scale
            .label_selector
            .as_deref()
            .and_then(|p| value_at(obj, p))
            .and_then(Value::as_str)
        {
            status["selector"] = Value::from(sel);
        }
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": meta,
            "spec": { "replicas": int_at(&scale.spec_replicas) },
            "status": status,
        })
    }

    fn apply_scale(&self, obj: &mut Value, scale: &Value) -> Result<(), Vec<FieldError>> {
        let Some(paths) = &self.v.scale else {
            return Ok(());
        };
        let r = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
        match r.as_i64() {
            Some(n) if (0..=i64::from(i32::MAX)).contains(&n) => {
                set_path(obj, &paths.spec_replicas, Value::from(n));
                Ok(())
            }
            _ => Err(vec![FieldError::invalid_value(
                "spec.replicas",
                &r,
                "must be greater than or equal to 0",
            )]),
        }
    }
}

/// Sets the value at a dotted path, creating (or replacing mistyped) objects on the way.
fn set_path(obj: &mut Value, path: &str, value: Value) {
    let segs = path_segments(path);
    let Some((last, parents)) = segs.split_last() else {
        return;
    };
    let mut v = obj;
    for seg in parents {
        if !v.is_object() {
            *v = json!({});
        }
        let Some(o) = v.as_object_mut() else { return };
        v = o.entry((*seg).to_string()).or_insert_with(|| json!({}));
    }
    if !v.is_object() {
        *v = json!({});
    }
    if let Some(o) = v.as_object_mut() {
        o.insert((*last).to_string(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector"}},
                     "selectableFields": [{"jsonPath": ".spec.color"}]},
                    {"name": "v2", "served": true, "storage": false}]},
        })
    }

    fn strategy(version: usize) -> CustomResourceStrategy {
        let crd = crd();
        CustomResourceStrategy::new(CustomVersion::from_crd(
            &crd,
            &crd["spec"]["versions"][version],
        ))
    }

    #[test]
    fn status_is_dropped_on_create_and_generation_ignores_it() {
        let s = strategy(0);
        let mut obj = json!({"apiVersion": "example.com/v1", "spec": {"replicas": 1}, "status": {"replicas": 5}});
        s.prepare_for_create(&mut obj);
        assert_eq!(obj.get("status"), None);
        let old = json!({"metadata": {"generation": 1}, "spec": {"a": 1}, "status": {"x": 1}});
        let new = json!({"metadata": {"generation": 1, "labels": {}}, "spec": {"a": 1}, "status": {"x": 2}});
        assert!(!s.generation_changed(&new, &old));
        let spec = json!({"spec": {"a": 2}});
        assert!(s.generation_changed(&spec, &old));
        // Without a status subresource, status changes count.
        assert!(strategy(1).generation_changed(&new, &old));
    }

    #[test]
    fn versions_are_views_of_the_storage_version() {
        let v2 = strategy(1);
        let stored = v2.to_storage(json!({"apiVersion": "example.com/v2", "kind": "Widget"}));
        assert_eq!(stored["apiVersion"], "example.com/v1");
        assert_eq!(v2.from_storage(stored)["apiVersion"], "example.com/v2");
    }

    #[test]
    fn under_a_webhook_the_hooks_leave_the_api_version_alone() {
        let mut crd = crd();
        crd["spec"]["conversion"] = json!({"strategy": "Webhook"});
        let v2 =
            CustomResourceStrategy::new(CustomVersion::from_crd(&crd, &crd["spec"]["versions"][1]));
        let obj = json!({"apiVersion": "example.com/v2", "kind": "Widget"});
        assert_eq!(v2.to_storage(obj.clone()), obj);
        let mut created = obj.clone();
        v2.prepare_for_create(&mut created);
        assert_eq!(created["apiVersion"], "example.com/v2");
        let stored = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
        assert_eq!(v2.from_storage(stored)["apiVersion"], "example.com/v1");
    }

    #[test]
    fn scale_reads_and_writes_the_configured_paths() {
        let s = strategy(0);
        let obj = json!({"metadata": {"name": "w", "namespace": "d", "resourceVersion": "7"},
                         "spec": {"replicas": 2}, "status": {"replicas": 1, "selector": "app=w"}});
        let scale = s.to_scale(&obj);
        assert_eq!(scale["spec"]["replicas"], 2);
        assert_eq!(scale["status"], json!({"replicas": 1, "selector": "app=w"}));
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
        let mut obj = json!({"metadata": {"name": "w"}});
        assert!(s
            .apply_scale(&mut obj, &json!({"spec": {"replicas": 4}}))
            .is_ok());
        assert_eq!(obj["spec"]["replicas"], 4);
        let refused = s.apply_scale(&mut obj, &json!({"spec": {"replicas": -1}}));
        assert!(refused.is_err());
        let errs = s.validate_create(&json!({"spec": {"replicas": -3}}));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.replicas");
    }

    #[test]
    fn defaults_are_found_in_sub_schemas_only() {
        assert!(!has_defaults(&json!({"type": "object", "properties": {
            "default": {"type": "string"}}})));
        assert!(has_defaults(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "object", "properties": {
                    "x": {"type": "integer", "default": 1}}}}}}}})));
        assert!(has_defaults(&json!({"anyOf": [{"default": "a"}]})));
        assert!(!has_defaults(
            &json!({"properties": {"a": {"default": null}}})
        ));
    }

    #[test]
    fn selectable_fields_are_field_labels() {
        let s = strategy(0);
        let obj = json!({"spec": {"color": "blue"}});
        assert_eq!(s.field_value(&obj, "spec.color").as_deref(), Some("blue"));
        assert_eq!(s.field_value(&json!({}), "spec.color").as_deref(), Some(""));
        assert_eq!(s.field_value(&obj, "spec.size"), None);
        assert!(!s.strategic_merge());
    }
}
