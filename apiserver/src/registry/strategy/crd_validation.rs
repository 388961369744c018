//! Validation of CustomResourceDefinitions themselves (upstream's
//! `apiextensions-apiserver/pkg/apis/apiextensions/validation`): group, scope, names, versions,
//! schemas (structural rules in the `schema` crate, `x-kubernetes-validations` in `k8s_cel`),
//! subresources, printer columns, selectable fields, conversion, stored versions, the API approval
//! annotation of protected groups, and the update and status rules.
//!
//! Upstream validates the *internal* form of a CRD, into which a v1 object is converted first: when
//! every version has the same schema (always, with a single version), the same subresources or the
//! same printer columns, the conversion moves them to the top level (`spec.validation`,
//! `spec.subresources`, `spec.additionalPrinterColumns`) and the errors are reported there, e.g.
//! `spec.validation.openAPIV3Schema.properties[spec].type`. The conversion webhook is validated as
//! `spec.conversion.webhookClientConfig` and `spec.conversion.conversionReviewVersions`. [`View`] is
//! that form, so the field paths are the ones kube-apiserver reports.
//!
//! Object metadata (the DNS-subdomain name) is validated by the generic pipeline; the rule that the
//! name is `<plural>.<group>` is here. Deviations: values of whole structs (`spec.versions` in
//! "must have exactly one version marked as storage version") render as JSON, not as Go's `%#v`;
//! a group kube-apiserver serves itself is refused here (upstream accepts such a CRD but never serves
//! it, since its built-in group shadows it).

use api::validation::{self, FieldError, FieldErrorKind};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceConversion, CustomResourceDefinition,
    CustomResourceDefinitionNames, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps, SelectableField,
};
use serde_json::{json, Value};

use super::admissionregistration::{validate_webhook_service, validate_webhook_url};

/// Printer column types (`printerColumnDatatypes`), sorted as upstream lists them.
const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
/// Printer column formats (`customResourceColumnDefinitionFormats`), sorted.
const COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];
/// `MaxSelectableFields`.
const MAX_SELECTABLE_FIELDS: usize = 8;
/// The ConversionReview versions this server understands.
const CONVERSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
/// The annotation protected groups need (`KubeAPIApprovedAnnotation`).
pub const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";
/// Errors of a new CRD (`ValidateCustomResourceDefinition`); `crd` carries the defaults and the
/// status `prepare_for_create` set.
pub fn validate_crd(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    let opts = Options {
        require_openapi_schema: true,
        require_immutable_names: false,
    };
    let mut errs = name_rule(crd);
    errs.extend(validate_spec(&crd.spec, &opts));
    errs.extend(validate_status(crd));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, None));
    errs.extend(validate_preserve_unknown_fields(crd, None));
    errs
}

/// Errors of an update of a CRD (`ValidateCustomResourceDefinitionUpdate`; `old` is the stored
/// object). What an old object already broke is not tightened: a version without a schema stays
/// allowed if the old object had one.
pub fn validate_crd_update(
    crd: &CustomResourceDefinition,
    old: &CustomResourceDefinition,
) -> Vec<FieldError> {
    let opts = Options {
        require_openapi_schema: all_versions_have_schema(&old.spec),
        require_immutable_names: is_established(old),
    };
    let mut errs = name_rule(crd);
    errs.extend(validate_spec(&crd.spec, &opts));
    if opts.require_immutable_names {
        immutable(&mut errs, "spec.scope", &crd.spec.scope, &old.spec.scope);
        immutable(
            &mut errs,
            "spec.names.kind",
            &crd.spec.names.kind,
            &old.spec.names.kind,
        );
    }
    immutable(&mut errs, "spec.group", &crd.spec.group, &old.spec.group);
    immutable(
        &mut errs,
        "spec.names.plural",
        &crd.spec.names.plural,
        &old.spec.names.plural,
    );
    errs.extend(validate_status(crd));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, Some(old)));
    errs.extend(validate_preserve_unknown_fields(crd, Some(old)));
    errs
}

/// Errors of an update of a CRD's status (`ValidateUpdateCustomResourceDefinitionStatus`).
pub fn validate_crd_status_update(
    crd: &CustomResourceDefinition,
    _old: &CustomResourceDefinition,
) -> Vec<FieldError> {
    validate_status(crd)
}

/// Whether the CRD's `Established` condition is `True`.
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// Which rules an update relaxes (the subset of upstream's `validationOptions` that v1 objects can
/// reach: v1 always requires structural schemas, pruned defaults and recognized review versions).
struct Options {
    require_openapi_schema: bool,
    require_immutable_names: bool,
}

/// The internal form's per-version and top-level fields (see the module docs).
struct View<'a> {
    validation: Option<&'a CustomResourceValidation>,
    subresources: Option<&'a CustomResourceSubresources>,
    columns: Option<&'a [CustomResourceColumnDefinition]>,
    selectable: Option<&'a [SelectableField]>,
    /// Whether each per-version field was kept per version.
    per_version_schema: bool,
    per_version_subresources: bool,
    per_version_columns: bool,
    per_version_selectable: bool,
}

/// Whether a field of every version is the same (the conversion's "identical" test; all absent
/// counts as identical).
fn identical<T: PartialEq>(
    versions: &[CustomResourceDefinitionVersion],
    f: impl Fn(&CustomResourceDefinitionVersion) -> Option<&T>,
) -> bool {
    let first = versions.first().and_then(&f);
    versions.iter().all(|v| f(v) == first)
}

impl<'a> View<'a> {
    fn of(spec: &'a CustomResourceDefinitionSpec) -> Self {
        let vs = &spec.versions;
        let first = vs.first();
        let schema_same = !vs.is_empty() && identical(vs, |v| v.schema.as_ref());
        let sub_same = !vs.is_empty() && identical(vs, |v| v.subresources.as_ref());
        let cols_same = !vs.is_empty() && identical(vs, |v| v.additional_printer_columns.as_ref());
        let sel_same = !vs.is_empty() && identical(vs, |v| v.selectable_fields.as_ref());
        View {
            validation: first
                .filter(|_| schema_same)
                .and_then(|v| v.schema.as_ref()),
            subresources: first
                .filter(|_| sub_same)
                .and_then(|v| v.subresources.as_ref()),
            columns: first
                .filter(|_| cols_same)
                .and_then(|v| v.additional_printer_columns.as_deref()),
            selectable: first
                .filter(|_| sel_same)
                .and_then(|v| v.selectable_fields.as_deref()),
            per_version_schema: !schema_same,
            per_version_subresources: !sub_same,
            per_version_columns: !cols_same,
            per_version_selectable: !sel_same,
        }
    }

    /// The subresources of a version (`getSubresourcesForVersion`).
    fn subresources_of(
        &self,
        v: &'a CustomResourceDefinitionVersion,
    ) -> Option<&'a CustomResourceSubresources> {
        if self.per_version_subresources {
            v.subresources.as_ref()
        } else {
            self.subresources
        }
    }

    /// Whether the status subresource is enabled anywhere (`hasAnyStatusEnabled`).
    fn any_status(&self, spec: &'a CustomResourceDefinitionSpec) -> bool {
        has_status(self.subresources)
            || spec
                .versions
                .iter()
                .any(|v| has_status(self.subresources_of(v)))
    }
}

fn has_status(s: Option<&CustomResourceSubresources>) -> bool {
    s.is_some_and(|s| s.status.is_some())
}

fn name_rule(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    let name = crd.metadata.name.as_deref().unwrap_or("");
    let required = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
    if name.is_empty() || name == required {
        return Vec::new();
    }
    vec![FieldError::invalid(
        "metadata.name",
        name,
        r#"must be spec.names.plural+"."+spec.group"#,
    )]
}

fn immutable(errs: &mut Vec<FieldError>, path: &str, new: &str, old: &str) {
    if new != old {
        errs.push(FieldError::invalid(path, new, "field is immutable"));
    }
}

/// `validateCustomResourceDefinitionSpec`.
fn validate_spec(spec: &CustomResourceDefinitionSpec, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_group(&spec.group, &mut errs);
    enum_strings(
        &mut errs,
        "spec.scope",
        &spec.scope,
        &["Cluster", "Namespaced"],
    );
    let view = View::of(spec);
    let preserve_unknown = spec.preserve_unknown_fields == Some(true);

    if opts.require_openapi_schema {
        if view.validation.is_none() {
            for (i, v) in spec.versions.iter().enumerate() {
                if v.schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                    .is_none()
                {
                    errs.push(FieldError::required(
                        format!("spec.versions[{i}].schema.openAPIV3Schema"),
                        "schemas are required",
                    ));
                }
            }
        }
    } else if !preserve_unknown && view.validation.is_none() {
        for (i, v) in spec.versions.iter().enumerate() {
            if v.served
                && v.schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                    .is_none()
            {
                errs.push(FieldError::required(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "because otherwise all fields are pruned",
                ));
            }
        }
    }
    let has_defaults = spec.versions.iter().any(|v| {
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .is_some_and(schema_has_defaults)
    });
    if has_defaults && preserve_unknown {
        errs.push(FieldError::invalid_value(
            "spec.preserveUnknownFields",
            &json!(true),
            "must be false in order to use defaults in the schema",
        ));
    }

    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in spec.versions.iter().enumerate() {
        if v.storage {
            storage += 1;
        }
        if seen.contains(&v.name.as_str()) {
            unique = false;
        } else {
            seen.push(&v.name);
        }
        let e = validation::is_dns1035_label(&v.name);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("spec.versions[{i}].name"),
                &v.name,
                e.join(","),
            ));
        }
        errs.extend(validate_version(v, i, &view));
    }
    let versions_value = || serde_json::to_value(&spec.versions).unwrap_or(Value::Null);
    if !unique {
        errs.push(FieldError::invalid_value(
            "spec.versions",
            &versions_value(),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(FieldError::invalid_value(
            "spec.versions",
            &versions_value(),
            "must have exactly one version marked as storage version",
        ));
    }

    let names = &spec.names;
    if names.plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    }
    if names.singular.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required("spec.names.singular", ""));
    }
    if names.kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    }
    if names.list_kind.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required("spec.names.listKind", ""));
    }
    errs.extend(validate_names(names, "spec.names"));

    if let Some(validation) = view.validation {
        errs.extend(validate_validation(
            validation,
            view.any_status(spec),
            "spec.validation",
        ));
    }
    if let Some(sub) = view.subresources {
        errs.extend(validate_subresources(sub, "spec.subresources"));
    }
    for (i, col) in view.columns.unwrap_or_default().iter().enumerate() {
        errs.extend(validate_column(
            col,
            &format!("spec.additionalPrinterColumns[{i}]"),
        ));
    }
    if let Some(fields) = view.selectable.filter(|f| !f.is_empty()) {
        match view.validation.and_then(|v| v.open_api_v3_schema.as_ref()) {
            None => errs.push(FieldError::invalid(
                "spec.selectableFields",
                "",
                "selectableFields may only be set when validations.schema is included",
            )),
            Some(schema) => errs.extend(validate_selectable_fields(
                fields,
                schema,
                "spec.selectableFields",
            )),
        }
    }

    let strategy = spec.conversion.as_ref().map(|c| c.strategy.as_str());
    if strategy.is_some_and(|s| s != "None") && preserve_unknown {
        errs.push(FieldError::invalid(
            "spec.conversion.strategy",
            strategy.unwrap_or(""),
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    if let Some(conversion) = &spec.conversion {
        errs.extend(validate_conversion(conversion));
    }
    errs
}

fn validate_group(group: &str, errs: &mut Vec<FieldError>) {
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
        return;
    }
    let e = validation::is_dns1123_subdomain(group);
    if !e.is_empty() {
        errs.push(FieldError::invalid("spec.group", group, e.join(",")));
    } else if group.split('.').count() < 2 {
        errs.push(FieldError::invalid(
            "spec.group",
            group,
            "should be a domain with at least one dot",
        ));
    } else if api::resources::builtin().iter().any(|r| r.group == group) {
        errs.push(FieldError::invalid(
            "spec.group",
            group,
            "is served by the API server itself: a CustomResourceDefinition may not define kinds of a built-in group",
        ));
    }
}

/// `validateEnumStrings` with `required`.
fn enum_strings(errs: &mut Vec<FieldError>, path: &str, value: &str, accepted: &[&str]) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if !accepted.contains(&value) {
        errs.push(FieldError::not_supported(path, &json!(value), accepted));
    }
}

/// `validateCustomResourceDefinitionVersion`, with the per-version fields the internal form kept.
fn validate_version(
    v: &CustomResourceDefinitionVersion,
    i: usize,
    view: &View<'_>,
) -> Vec<FieldError> {
    let path = format!("spec.versions[{i}]");
    let mut errs = Vec::new();
    for msg in deprecation_warning_errors(
        v.deprecated.unwrap_or(false),
        v.deprecation_warning.as_deref(),
    ) {
        let value = v.deprecation_warning.as_deref().unwrap_or("");
        errs.push(FieldError::invalid(
            format!("{path}.deprecationWarning"),
            value,
            msg,
        ));
    }
    if view.per_version_schema {
        if let Some(schema) = &v.schema {
            errs.extend(validate_validation(
                schema,
                has_status(view.subresources_of(v)),
                &format!("{path}.schema"),
            ));
        }
    }
    if view.per_version_subresources {
        if let Some(sub) = &v.subresources {
            errs.extend(validate_subresources(sub, &format!("{path}.subresources")));
        }
    }
    if view.per_version_columns {
        for (j, col) in v.additional_printer_columns.iter().flatten().enumerate() {
            errs.extend(validate_column(
                col,
                &format!("{path}.additionalPrinterColumns[{j}]"),
            ));
        }
    }
    if view.per_version_selectable {
        if let Some(fields) = v.selectable_fields.as_deref().filter(|f| !f.is_empty()) {
            let schema = if view.per_version_schema {
                v.schema.as_ref()
            } else {
                view.validation
            };
            match schema.and_then(|s| s.open_api_v3_schema.as_ref()) {
                None => errs.push(FieldError::invalid(
                    format!("{path}.selectableFields"),
                    "",
                    "selectableFields may only be set when version.schema.openAPIV3Schema is not included",
                )),
                Some(schema) => errs.extend(validate_selectable_fields(
                    fields,
                    schema,
                    &format!("{path}.selectableFields"),
                )),
            }
        }
    }
    errs
}

/// `validateDeprecationWarning`.
fn deprecation_warning_errors(deprecated: bool, warning: Option<&str>) -> Vec<String> {
    let Some(w) = warning else {
        return Vec::new();
    };
    if !deprecated {
        return vec!["can only be set for deprecated versions".into()];
    }
    let mut errs = Vec::new();
    if w.len() > 256 {
        errs.push("must be <= 256 characters long".into());
    }
    if w.is_empty() {
        errs.push("must not be an empty string".into());
    }
    // Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space;
    // control characters are not printable, so they are reported as such first.
    if let Some((i, _)) = w
        .char_indices()
        .find(|(_, c)| c.is_control() || (c.is_whitespace() && *c != ' '))
    {
        errs.push(format!(
            "must only contain printable UTF-8 characters; non-printable character found at index {i}"
        ));
    }
    errs
}

/// `validateCustomResourceDefinitionValidation` at `path` (`spec.validation` or
/// `spec.versions[i].schema`).
fn validate_validation(
    validation: &CustomResourceValidation,
    status_enabled: bool,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(schema) = validation.open_api_v3_schema.as_ref() else {
        return errs;
    };
    let schema_path = format!("{path}.openAPIV3Schema");
    if status_enabled {
        errs.extend(schema::validate_status_root(schema, &schema_path));
    }
    let schema_errs = schema::validate_crd_schema(schema, &schema_path);
    let structural_ok = schema_errs.is_empty();
    errs.extend(schema_errs);
    if structural_ok {
        // Rules are compiled only against a structural schema, as upstream (its CEL context is
        // nil otherwise); their errors follow the schema's.
        if let Err(cel_errs) = k8s_cel::Validator::compile(schema, &schema_path) {
            errs.extend(cel_errs);
        }
    }
    errs
}

fn schema_has_defaults(s: &JSONSchemaProps) -> bool {
    fn walk(s: &JSONSchemaProps, depth: usize) -> bool {
        if depth > 64 {
            return false;
        }
        if s.default.is_some() {
            return true;
        }
        let children = s
            .properties
            .iter()
            .flat_map(|p| p.values())
            .chain(s.all_of.iter().flatten())
            .chain(s.any_of.iter().flatten())
            .chain(s.one_of.iter().flatten())
            .chain(s.not.as_deref())
            .chain(s.additional_properties.as_ref().and_then(|a| match a {
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrBool::Schema(s) => Some(&**s),
                _ => None,
            }))
            .chain(s.items.as_ref().into_iter().flat_map(|i| match i {
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(s) => vec![&**s],
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schemas(v) => v.iter().collect(),
            }));
        for c in children {
            if walk(c, depth + 1) {
                return true;
            }
        }
        false
    }
    walk(s, 0)
}

/// `ValidateCustomResourceDefinitionSubresources`.
fn validate_subresources(sub: &CustomResourceSubresources, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(scale) = &sub.scale else {
        return errs;
    };
    let spec_path = format!("{path}.scale.specReplicasPath");
    if scale.spec_replicas_path.is_empty() {
        errs.push(FieldError::required(spec_path, ""));
    } else {
        let e = simple_json_path(&scale.spec_replicas_path, &spec_path);
        if !e.is_empty() {
            errs.extend(e);
        } else if !scale.spec_replicas_path.starts_with(".spec.") {
            errs.push(FieldError::invalid(
                spec_path,
                &scale.spec_replicas_path,
                "should be a json path under .spec",
            ));
        }
    }
    let status_path = format!("{path}.scale.statusReplicasPath");
    if scale.status_replicas_path.is_empty() {
        errs.push(FieldError::required(status_path, ""));
    } else {
        let e = simple_json_path(&scale.status_replicas_path, &status_path);
        if !e.is_empty() {
            errs.extend(e);
        } else if !scale.status_replicas_path.starts_with(".status.") {
            errs.push(FieldError::invalid(
                status_path,
                &scale.status_replicas_path,
                "should be a json path under .status",
            ));
        }
    }
    if let Some(sel) = scale
        .label_selector_path
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        let sel_path = format!("{path}.scale.labelSelectorPath");
        let e = simple_json_path(sel, &sel_path);
        if !e.is_empty() {
            errs.extend(e);
        } else if !sel.starts_with(".spec.") && !sel.starts_with(".status.") {
            errs.push(FieldError::invalid(
                sel_path,
                sel,
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}

/// `validateSimpleJSONPath`.
fn simple_json_path(s: &str, path: &str) -> Vec<FieldError> {
    if s.is_empty() {
        vec![FieldError::invalid(path, s, "must not be empty")]
    } else if !s.starts_with('.') {
        vec![FieldError::invalid(
            path,
            s,
            "must be a simple json path starting with .",
        )]
    } else {
        Vec::new()
    }
}

/// `ValidateCustomResourceColumnDefinition`.
fn validate_column(col: &CustomResourceColumnDefinition, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if col.name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    let types = format!("must be one of {}", COLUMN_TYPES.join(","));
    if col.type_.is_empty() {
        errs.push(FieldError::required(format!("{path}.type"), types));
    } else if !COLUMN_TYPES.contains(&col.type_.as_str()) {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            &col.type_,
            types,
        ));
    }
    if let Some(format) = col.format.as_deref().filter(|f| !f.is_empty()) {
        if !COLUMN_FORMATS.contains(&format) {
            errs.push(FieldError::invalid(
                format!("{path}.format"),
                format,
                format!("must be one of {}", COLUMN_FORMATS.join(",")),
            ));
        }
    }
    // Upstream's internal field is named `JSONPath`, and so is the path in its errors.
    if col.json_path.is_empty() {
        errs.push(FieldError::required(format!("{path}.JSONPath"), ""));
    } else {
        errs.extend(simple_json_path(
            &col.json_path,
            &format!("{path}.JSONPath"),
        ));
    }
    errs
}

/// `ValidateCustomResourceSelectableFields`: each path names a string, boolean or integer field of
/// the schema outside `metadata`, at most once, and at most eight of them.
fn validate_selectable_fields(
    fields: &[SelectableField],
    schema: &JSONSchemaProps,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut unique: Vec<String> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let p = format!("{path}[{i}].jsonPath");
        if f.json_path.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        let (segments, found) = match field_path_in_schema(&f.json_path, schema) {
            Ok(x) => x,
            Err(e) => {
                errs.push(FieldError::invalid(
                    p,
                    &f.json_path,
                    format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        if segments.first().map(String::as_str) == Some("metadata") {
            errs.push(FieldError::invalid(
                p.clone(),
                &f.json_path,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            found.type_.as_deref(),
            Some("string" | "boolean" | "integer")
        ) {
            errs.push(FieldError::invalid(
                p.clone(),
                &f.json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        let key = segments.join(".");
        if unique.contains(&key) {
            errs.push(FieldError::duplicate(p, &json!(f.json_path)));
        } else {
            unique.push(key);
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError {
            field: path.into(),
            kind: FieldErrorKind::TooMany,
            message: format!("must have at most {MAX_SELECTABLE_FIELDS} items"),
            value: Some(unique.len().to_string()),
        });
    }
    errs
}

/// `ValidFieldPath` without array notation: `.a.b` through `properties` (or a map's
/// `additionalProperties`); returns the path's segments and the schema found there.
fn field_path_in_schema<'a>(
    json_path: &str,
    mut schema: &'a JSONSchemaProps,
) -> Result<(Vec<String>, &'a JSONSchemaProps), String> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrBool;
    let mut segments = Vec::new();
    let mut rest = json_path;
    while !rest.is_empty() {
        if rest.starts_with('[') {
            return Err("array notation is not allowed".into());
        }
        let Some(after) = rest.strip_prefix('.') else {
            let tok: String = rest
                .chars()
                .take_while(|c| !matches!(c, '.' | '[' | ']'))
                .collect();
            return Err(format!("expected [ or . but got: {tok}"));
        };
        let end = after.find(['.', '[', ']']).unwrap_or(after.len());
        let name = &after[..end];
        if name.is_empty() {
            return Err("unexpected end of JSON path".into());
        }
        rest = &after[end..];
        if let Some(props) = &schema.properties {
            schema = props.get(name).ok_or("does not refer to a valid field")?;
        } else if let Some(JSONSchemaPropsOrBool::Schema(s)) = &schema.additional_properties {
            schema = s;
        } else {
            return Err("does not refer to a valid field".into());
        }
        segments.push(name.to_string());
    }
    Ok((segments, schema))
}

/// `validateCustomResourceConversion` (internal paths: `webhookClientConfig`,
/// `conversionReviewVersions`).
fn validate_conversion(c: &CustomResourceConversion) -> Vec<FieldError> {
    let mut errs = Vec::new();
    enum_strings(
        &mut errs,
        "spec.conversion.strategy",
        &c.strategy,
        &["None", "Webhook"],
    );
    let client_config = c.webhook.as_ref().and_then(|w| w.client_config.as_ref());
    let review_versions: &[String] = c
        .webhook
        .as_ref()
        .map(|w| w.conversion_review_versions.as_slice())
        .unwrap_or_default();
    if c.strategy == "Webhook" {
        match client_config {
            None => errs.push(FieldError::required(
                "spec.conversion.webhookClientConfig",
                "required when strategy is set to Webhook",
            )),
            Some(cc) => match (&cc.url, &cc.service) {
                (Some(url), None) => {
                    validate_webhook_url(url, "spec.conversion.webhookClientConfig.url", &mut errs)
                }
                (None, Some(svc)) => validate_webhook_service(
                    &serde_json::to_value(svc).unwrap_or(Value::Null),
                    "spec.conversion.webhookClientConfig.service",
                    &mut errs,
                ),
                _ => errs.push(FieldError::required(
                    "spec.conversion.webhookClientConfig",
                    "exactly one of url or service is required",
                )),
            },
        }
        validate_review_versions(review_versions, &mut errs);
    } else {
        if client_config.is_some() {
            errs.push(FieldError::forbidden(
                "spec.conversion.webhookClientConfig",
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review_versions.is_empty() {
            errs.push(FieldError::forbidden(
                "spec.conversion.conversionReviewVersions",
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}

/// `validateConversionReviewVersions` (a recognized version is always required of v1 objects).
fn validate_review_versions(versions: &[String], errs: &mut Vec<FieldError>) {
    let path = "spec.conversion.conversionReviewVersions";
    if versions.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut accepted = false;
    for (i, v) in versions.iter().enumerate() {
        if seen.contains(&v.as_str()) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                v,
                "duplicate version",
            ));
            continue;
        }
        seen.push(v);
        for e in validation::is_dns1035_label(v) {
            errs.push(FieldError::invalid(format!("{path}[{i}]"), v, e));
        }
        accepted |= CONVERSION_REVIEW_VERSIONS.contains(&v.as_str());
    }
    if !accepted {
        errs.push(FieldError::invalid_value(
            path,
            &json!(versions),
            format!(
                "must include at least one of {}",
                CONVERSION_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// `ValidateCustomResourceDefinitionNames` at `path` (`spec.names`, `status.acceptedNames`).
fn validate_names(names: &CustomResourceDefinitionNames, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let label = |errs: &mut Vec<FieldError>, field: String, value: &str| {
        let e = validation::is_dns1035_label(value);
        if !value.is_empty() && !e.is_empty() {
            errs.push(FieldError::invalid(field, value, e.join(",")));
        }
    };
    label(&mut errs, format!("{path}.plural"), &names.plural);
    label(
        &mut errs,
        format!("{path}.singular"),
        names.singular.as_deref().unwrap_or(""),
    );
    let mixed = |errs: &mut Vec<FieldError>, field: String, value: &str| {
        let e = validation::is_dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !e.is_empty() {
            errs.push(FieldError::invalid(
                field,
                value,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    e.join(",")
                ),
            ));
        }
    };
    let list_kind = names.list_kind.as_deref().unwrap_or("");
    mixed(&mut errs, format!("{path}.kind"), &names.kind);
    mixed(&mut errs, format!("{path}.listKind"), list_kind);
    for (i, s) in names.short_names.iter().flatten().enumerate() {
        let e = validation::is_dns1035_label(s);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.shortNames[{i}]"),
                s,
                e.join(","),
            ));
        }
    }
    if !names.kind.is_empty() && names.kind == list_kind {
        errs.push(FieldError::invalid(
            format!("{path}.listKind"),
            list_kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, c) in names.categories.iter().flatten().enumerate() {
        let e = validation::is_dns1035_label(c);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.categories[{i}]"),
                c,
                e.join(","),
            ));
        }
    }
    errs
}

/// `ValidateCustomResourceDefinitionStatus`.
fn validate_status(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    match crd.status.as_ref().and_then(|s| s.accepted_names.as_ref()) {
        Some(names) => validate_names(names, "status.acceptedNames"),
        None => Vec::new(),
    }
}

/// `ValidateCustomResourceDefinitionStoredVersions`.
fn validate_stored_versions(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    let path = "status.storedVersions";
    let stored: &[String] = crd
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.as_deref())
        .unwrap_or_default();
    if stored.is_empty() {
        return vec![FieldError::invalid_value(
            path,
            &json!([]),
            "must have at least one stored version",
        )];
    }
    let mut errs = Vec::new();
    for v in &crd.spec.versions {
        if v.storage && !stored.contains(&v.name) {
            errs.push(FieldError::invalid_value(
                path,
                &json!(stored),
                format!("must have the storage version {}", v.name),
            ));
        }
    }
    for (i, s) in stored.iter().enumerate() {
        if !crd.spec.versions.iter().any(|v| &v.name == s) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                s,
                format!(
                    "missing from spec.versions; {s} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {s} and removes {s} from status.storedVersions"
                ),
            ));
        }
    }
    errs
}

fn all_versions_have_schema(spec: &CustomResourceDefinitionSpec) -> bool {
    spec.versions.iter().all(|v| {
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .is_some()
    })
}

/// Whether kinds of `group` need the API approval annotation (`IsProtectedCommunityGroup`).
fn is_protected_group(group: &str) -> bool {
    group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io")
}

/// The state of the approval annotation (`GetAPIApprovalState`).
#[derive(Debug, PartialEq, Eq)]
enum Approval {
    Approved,
    Bypassed,
    Missing,
    Invalid,
}

fn approval_state(crd: &CustomResourceDefinition) -> Approval {
    let Some(v) = crd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(API_APPROVED_ANNOTATION))
    else {
        return Approval::Missing;
    };
    if v.starts_with("unapproved") {
        return Approval::Bypassed;
    }
    // Go's url.Parse followed by a check for a scheme and host.
    match v.split_once("://") {
        Some((scheme, rest))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.split(['/', '?', '#']).next().unwrap_or("").is_empty() =>
        {
            Approval::Approved
        }
        _ => Approval::Invalid,
    }
}

/// `validateAPIApproval`.
fn validate_api_approval(
    crd: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
) -> Vec<FieldError> {
    if !is_protected_group(&crd.spec.group) {
        return Vec::new();
    }
    let new = approval_state(crd);
    if old.is_some_and(|o| approval_state(o) == new) {
        return Vec::new();
    }
    let path = format!("metadata.annotations[{API_APPROVED_ANNOTATION}]");
    match new {
        Approval::Approved | Approval::Bypassed => Vec::new(),
        Approval::Missing => vec![FieldError::required(
            path,
            format!(
                "protected groups must have approval annotation {:?}, see https://github.com/kubernetes/enhancements/pull/1111",
                API_APPROVED_ANNOTATION
            ),
        )],
        Approval::Invalid => {
            let value = crd
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(API_APPROVED_ANNOTATION))
                .map(String::as_str)
                .unwrap_or("");
            vec![FieldError::invalid(
                path,
                value,
                format!(
                    "protected groups must have approval annotation {:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111",
                    API_APPROVED_ANNOTATION
                ),
            )]
        }
    }
}

/// `validatePreserveUnknownFields`: v1 refuses `spec.preserveUnknownFields: true` unless the old
/// object already had it.
fn validate_preserve_unknown_fields(
    crd: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
) -> Vec<FieldError> {
    if old.is_some_and(|o| o.spec.preserve_unknown_fields == Some(true)) {
        return Vec::new();
    }
    if crd.spec.preserve_unknown_fields == Some(true) {
        return vec![FieldError::invalid_value(
            "spec.preserveUnknownFields",
            &json!(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        )];
    }
    Vec::new()
}

#[cfg(test)]
#[path = "crd_validation_tests.rs"]
mod tests;
