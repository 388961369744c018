//! `admissionregistration.k8s.io/v1`: MutatingWebhookConfigurations,
//! ValidatingWebhookConfigurations, ValidatingAdmissionPolicies (with status) and their
//! bindings, as upstream's `pkg/apis/admissionregistration/v1/defaults.go`,
//! `pkg/apis/admissionregistration/validation` and `pkg/registry/admissionregistration/*` define
//! them. Stored and validated here; the webhooks are called by [`crate::admission::webhook`],
//! which follows these objects in the watch cache (policies are not evaluated yet).
//!
//! - Defaults: each webhook's `failurePolicy` Fail, `matchPolicy` Equivalent, `namespaceSelector`
//!   and `objectSelector` `{}`, `timeoutSeconds` 10 (mutating: `reinvocationPolicy` Never), each
//!   rule's `scope` `*`, a service reference's `port` 443; a policy's `failurePolicy` Fail and its
//!   match resources' `matchPolicy` Equivalent and selectors `{}`.
//! - Validation with upstream's messages and field paths: webhook names fully qualified and
//!   unique, `sideEffects` and `admissionReviewVersions` required, exactly one of
//!   `clientConfig.url` (https, no user, query or fragment) and `clientConfig.service`, rules'
//!   operations, groups, versions, resources and scope. On an update, the rules an old object
//!   already broke (side effects, review versions, unique names, selector values) are relaxed as
//!   upstream relaxes them.
//! - CEL expressions (match conditions, validations, variables, audit annotations) are checked for
//!   presence and shape only and stored as given: they are not compiled (no CEL here yet).
//! - Generation is 1 at create and bumped when `webhooks` (configurations) or `spec` (policies,
//!   bindings) change.
//! - Tables: NAME WEBHOOKS AGE; policies NAME VALIDATIONS PARAMKIND AGE; bindings NAME
//!   POLICYNAME PARAMREF AGE.

use super::common::{default_field, object_at};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, FieldError, FieldErrorKind};
use serde_json::{json, Map, Value};

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const NO_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const POLICY_REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const MAX_MATCH_CONDITIONS: usize = 64;
const MAX_AUDIT_ANNOTATIONS: usize = 20;
const MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH: usize = 5 * 1024;

// ---- JSON accessors ----

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Go's `%#v` of a `[]<type>` of strings.
fn go_slice(ty: &str, items: &[String]) -> String {
    let q: Vec<String> = items.iter().map(|s| validation::go_quote(s)).collect();
    format!("[]{ty}{{{}}}", q.join(", "))
}

fn invalid_rendered(field: String, rendered: String, msg: impl Into<String>) -> FieldError {
    FieldError {
        field,
        kind: FieldErrorKind::Invalid,
        message: msg.into(),
        value: Some(rendered),
    }
}

fn not_supported(field: String, value: &str, supported: &[&str]) -> FieldError {
    FieldError::not_supported(field, &json!(value), supported)
}

/// `ValidateQualifiedName`.
fn qualified_name(value: &str, path: String, errs: &mut Vec<FieldError>) {
    for msg in validation::is_qualified_name(value) {
        errs.push(FieldError::invalid(path.clone(), value, msg));
    }
}

// ---- defaults (v1/defaults.go) ----

fn default_rules(rules: Option<&mut Value>) {
    if let Some(Value::Array(rules)) = rules {
        for r in rules.iter_mut().filter_map(Value::as_object_mut) {
            default_field(r, "scope", json!("*"));
        }
    }
}

fn default_webhook(hook: &mut Map<String, Value>, mutating: bool) {
    default_field(hook, "failurePolicy", json!("Fail"));
    default_field(hook, "matchPolicy", json!("Equivalent"));
    default_field(hook, "namespaceSelector", json!({}));
    default_field(hook, "objectSelector", json!({}));
    default_field(hook, "timeoutSeconds", json!(10));
    if mutating {
        default_field(hook, "reinvocationPolicy", json!("Never"));
    }
    default_rules(hook.get_mut("rules"));
    if let Some(Value::Object(svc)) = hook
        .get_mut("clientConfig")
        .and_then(|c| c.get_mut("service"))
    {
        default_field(svc, "port", json!(443));
    }
}

fn default_match_resources(m: Option<&mut Value>) {
    let Some(Value::Object(m)) = m else { return };
    default_field(m, "matchPolicy", json!("Equivalent"));
    default_field(m, "namespaceSelector", json!({}));
    default_field(m, "objectSelector", json!({}));
    default_rules(m.get_mut("resourceRules"));
    default_rules(m.get_mut("excludeResourceRules"));
}

// ---- rules ----

fn validate_resources(resources: &[String], path: &str, errs: &mut Vec<FieldError>) {
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    let mut with_wildcard_sub: Vec<&str> = Vec::new();
    let mut sub_with_wildcard_res: Vec<&str> = Vec::new();
    let (mut double, mut single, mut without_sub) = (false, false, false);
    for (i, rs) in resources.iter().enumerate() {
        if rs.is_empty() {
            errs.push(FieldError::required(format!("{path}[{i}]"), ""));
            continue;
        }
        double |= rs == "*/*";
        single |= rs == "*";
        let Some((res, sub)) = rs.split_once('/') else {
            without_sub = rs != "*";
            continue;
        };
        if with_wildcard_sub.contains(&res) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                rs,
                format!("if '{res}/*' is present, must not specify {rs}"),
            ));
        }
        if sub_with_wildcard_res.contains(&sub) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                rs,
                format!("if '*/{sub}' is present, must not specify {rs}"),
            ));
        }
        if sub == "*" {
            with_wildcard_sub.push(res);
        }
        if res == "*" {
            sub_with_wildcard_res.push(sub);
        }
    }
    if resources.len() > 1 && double {
        errs.push(invalid_rendered(
            path.into(),
            go_slice("string", resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && without_sub {
        errs.push(invalid_rendered(
            path.into(),
            go_slice("string", resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

/// `validateRuleWithOperations` (also the rule part of a NamedRuleWithOperations).
fn validate_rule_with_operations(rule: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let ops = strings(rule, "operations");
    if ops.is_empty() {
        errs.push(FieldError::required(format!("{path}.operations"), ""));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        errs.push(invalid_rendered(
            format!("{path}.operations"),
            go_slice("admissionregistration.OperationType", &ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(&op.as_str()) {
            errs.push(not_supported(
                format!("{path}.operations[{i}]"),
                op,
                OPERATIONS,
            ));
        }
    }
    let groups = strings(rule, "apiGroups");
    if groups.is_empty() {
        errs.push(FieldError::required(format!("{path}.apiGroups"), ""));
    }
    if groups.len() > 1 && groups.iter().any(|g| g == "*") {
        errs.push(invalid_rendered(
            format!("{path}.apiGroups"),
            go_slice("string", &groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = strings(rule, "apiVersions");
    if versions.is_empty() {
        errs.push(FieldError::required(format!("{path}.apiVersions"), ""));
    }
    if versions.len() > 1 && versions.iter().any(|v| v == "*") {
        errs.push(invalid_rendered(
            format!("{path}.apiVersions"),
            go_slice("string", &versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(format!("{path}.apiVersions[{i}]"), ""));
        }
    }
    validate_resources(
        &strings(rule, "resources"),
        &format!("{path}.resources"),
        errs,
    );
    if let Some(scope) = text(rule, "scope").filter(|s| !SCOPES.contains(s)) {
        errs.push(not_supported(format!("{path}.scope"), scope, SCOPES));
    }
}

// ---- webhooks ----

/// What an update relaxes because the stored object already broke it (`validationOptions`).
#[derive(Clone, Copy)]
struct Options {
    require_no_side_effects: bool,
    require_recognized_review_version: bool,
    require_unique_names: bool,
    allow_invalid_label_values: bool,
}

impl Options {
    const CREATE: Options = Options {
        require_no_side_effects: true,
        require_recognized_review_version: true,
        require_unique_names: true,
        allow_invalid_label_values: false,
    };

    fn for_update(old: &Value) -> Options {
        let hooks = items(old, "webhooks");
        let mut names: Vec<&str> = Vec::new();
        let unique = hooks.iter().all(|h| {
            let n = text(h, "name").unwrap_or("");
            let fresh = !names.contains(&n);
            names.push(n);
            fresh
        });
        let invalid_values = hooks.iter().any(|h| {
            ["namespaceSelector", "objectSelector"].iter().any(|k| {
                h.get(*k)
                    .filter(|s| s.is_object())
                    .is_some_and(|s| !validation::validate_label_selector(s, "", false).is_empty())
            })
        });
        Options {
            require_no_side_effects: hooks
                .iter()
                .all(|h| text(h, "sideEffects").is_some_and(|s| NO_SIDE_EFFECTS.contains(&s))),
            require_recognized_review_version: hooks.iter().all(|h| {
                let v = strings(h, "admissionReviewVersions");
                v.is_empty() || v.iter().any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
            }),
            require_unique_names: unique,
            allow_invalid_label_values: invalid_values,
        }
    }
}

/// `IsFullyQualifiedName`.
fn fully_qualified_name(name: &str, path: String, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let e = validation::is_dns1123_subdomain(name);
    if !e.is_empty() {
        errs.push(FieldError::invalid(path, name, e.join(",")));
    } else if name.split('.').count() < 3 {
        errs.push(FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

/// The parts of a URL that `ValidateWebhookURL` checks, as Go's `url.Parse` splits them.
struct UrlParts<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

fn split_url(url: &str) -> UrlParts<'_> {
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (scheme, authority) = match rest.split_once("://") {
        Some((s, r)) if !s.is_empty() && !s.contains('/') => (s, r.split('/').next().unwrap_or("")),
        _ => ("", ""),
    };
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    UrlParts {
        scheme,
        user,
        host,
        query,
        fragment,
    }
}

pub(super) fn validate_webhook_url(url: &str, path: &str, errs: &mut Vec<FieldError>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = split_url(url);
    if u.scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            u.scheme,
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.host,
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = u.user {
        errs.push(FieldError::invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if !u.fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !u.query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.query,
            "query parameters are not permitted in the URL",
        ));
    }
}

/// `ValidateWebhookService`. Upstream calls it with the service's name and namespace in the
/// opposite order of its parameters, so a missing name is reported on `namespace` and the other
/// way round (kubernetes/kubernetes#141353); kept, since clients see exactly that.
pub(super) fn validate_webhook_service(svc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let (name, namespace) = (
        text(svc, "name").unwrap_or(""),
        text(svc, "namespace").unwrap_or(""),
    );
    // Parameter `name` receives the namespace, and `namespace` the name.
    if namespace.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.namespace"), ""));
    }
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid_value(
            format!("{path}.port"),
            &json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = text(svc, "path") else {
        return;
    };
    let p = format!("{path}.path");
    if url_path.is_empty() || url_path == "/" {
        return;
    }
    if url_path == "//" {
        errs.push(FieldError::invalid(
            p,
            url_path,
            "segment[0] may not be empty",
        ));
        return;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(
            p.clone(),
            url_path,
            "must start with a '/'",
        ));
    }
    let check = url_path.get(1..).unwrap_or("");
    let check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                p.clone(),
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in validation::is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                p.clone(),
                url_path,
                format!("segment[{i}]: {failure}"),
            ));
        }
    }
}

/// `validateMatchConditions`: names and expressions present; expressions are not compiled.
fn validate_match_conditions(conds: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    if conds.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError {
            field: path.into(),
            kind: FieldErrorKind::TooMany,
            message: format!("must have at most {MAX_MATCH_CONDITIONS} items"),
            value: Some(conds.len().to_string()),
        });
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in conds.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if text(c, "expression").unwrap_or("").trim().is_empty() {
            errs.push(FieldError::required(format!("{p}.expression"), ""));
        }
        let name = text(c, "name").unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            qualified_name(name, format!("{p}.name"), errs);
            if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{p}.name"), &json!(name)));
            } else {
                names.push(name);
            }
        }
    }
}

fn validate_selector(
    hook: &Value,
    key: &str,
    path: &str,
    allow_invalid: bool,
    errs: &mut Vec<FieldError>,
) {
    if let Some(sel) = hook.get(key).filter(|s| s.is_object()) {
        errs.extend(validation::validate_label_selector(
            sel,
            &format!("{path}.{key}"),
            allow_invalid,
        ));
    }
}

fn validate_webhook(
    hook: &Value,
    mutating: bool,
    opts: Options,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    fully_qualified_name(
        text(hook, "name").unwrap_or(""),
        format!("{path}.name"),
        errs,
    );
    for (i, r) in items(hook, "rules").iter().enumerate() {
        validate_rule_with_operations(r, &format!("{path}.rules[{i}]"), errs);
    }
    if let Some(f) = text(hook, "failurePolicy").filter(|f| !FAILURE_POLICIES.contains(f)) {
        errs.push(not_supported(
            format!("{path}.failurePolicy"),
            f,
            FAILURE_POLICIES,
        ));
    }
    if let Some(m) = text(hook, "matchPolicy").filter(|m| !MATCH_POLICIES.contains(m)) {
        errs.push(not_supported(
            format!("{path}.matchPolicy"),
            m,
            MATCH_POLICIES,
        ));
    }
    let allowed = if opts.require_no_side_effects {
        NO_SIDE_EFFECTS
    } else {
        SIDE_EFFECTS
    };
    match hook.get("sideEffects").filter(|s| !s.is_null()) {
        None => errs.push(FieldError::required(
            format!("{path}.sideEffects"),
            format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(s) => {
            let s = s.as_str().unwrap_or("");
            if !allowed.contains(&s) {
                errs.push(not_supported(format!("{path}.sideEffects"), s, allowed));
            }
        }
    }
    if let Some(t) = hook
        .get("timeoutSeconds")
        .and_then(Value::as_i64)
        .filter(|t| !(1..=30).contains(t))
    {
        errs.push(FieldError::invalid_value(
            format!("{path}.timeoutSeconds"),
            &json!(t),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    validate_selector(
        hook,
        "namespaceSelector",
        path,
        opts.allow_invalid_label_values,
        errs,
    );
    validate_selector(
        hook,
        "objectSelector",
        path,
        opts.allow_invalid_label_values,
        errs,
    );
    if mutating {
        if let Some(r) =
            text(hook, "reinvocationPolicy").filter(|r| !REINVOCATION_POLICIES.contains(r))
        {
            errs.push(not_supported(
                format!("{path}.reinvocationPolicy"),
                r,
                REINVOCATION_POLICIES,
            ));
        }
    }
    let cc = hook.get("clientConfig").unwrap_or(&Value::Null);
    match (
        cc.get("url").and_then(Value::as_str),
        cc.get("service").filter(|s| s.is_object()),
    ) {
        (Some(url), None) => validate_webhook_url(url, &format!("{path}.clientConfig.url"), errs),
        (None, Some(svc)) => {
            validate_webhook_service(svc, &format!("{path}.clientConfig.service"), errs)
        }
        _ => errs.push(FieldError::required(
            format!("{path}.clientConfig"),
            "exactly one of url or service is required",
        )),
    }
    validate_match_conditions(
        items(hook, "matchConditions"),
        &format!("{path}.matchConditions"),
        errs,
    );
}

fn validate_review_versions(
    versions: &[String],
    require_recognized: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if versions.is_empty() {
        errs.push(FieldError::required(
            path,
            format!("must specify one of {}", REVIEW_VERSIONS.join(", ")),
        ));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
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
        for msg in validation::is_dns1035_label(v) {
            errs.push(FieldError::invalid(format!("{path}[{i}]"), v, msg));
        }
    }
    if require_recognized
        && !versions
            .iter()
            .any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
    {
        errs.push(invalid_rendered(
            path.into(),
            go_slice("string", versions),
            format!(
                "must include at least one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

fn validate_webhook_configuration(obj: &Value, mutating: bool, opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, hook) in items(obj, "webhooks").iter().enumerate() {
        let path = format!("webhooks[{i}]");
        validate_webhook(hook, mutating, opts, &path, &mut errs);
        validate_review_versions(
            &strings(hook, "admissionReviewVersions"),
            opts.require_recognized_review_version,
            &format!("{path}.admissionReviewVersions"),
            &mut errs,
        );
        let name = text(hook, "name").unwrap_or("");
        if opts.require_unique_names && !name.is_empty() {
            if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{path}.name"), &json!(name)));
            } else {
                names.push(name);
            }
        }
    }
    errs
}

/// A `{"message": …}` error of a body whose fields have the wrong JSON types.
fn typed_check<T: serde::de::DeserializeOwned>(obj: &Value) -> Option<FieldError> {
    serde_json::from_value::<T>(obj.clone())
        .err()
        .map(|e| FieldError::invalid("", "", format!("cannot be decoded: {e}")))
}

fn webhooks_changed(new: &Value, old: &Value) -> bool {
    new.get("webhooks") != old.get("webhooks")
}

fn webhook_table_cells(obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        Value::from(api::meta::name(obj).unwrap_or("")),
        Value::from(items(obj, "webhooks").len()),
        age_cell(obj, now),
    ]
}

fn webhook_table_columns() -> Vec<Value> {
    vec![
        name_column(),
        column(
            "Webhooks",
            "integer",
            "",
            "Webhooks indicates the number of webhooks registered in this configuration",
            0,
        ),
        age_column(),
    ]
}

/// Mutating and validating webhook configurations.
pub struct WebhookConfigurationStrategy {
    /// true for MutatingWebhookConfigurations.
    pub mutating: bool,
}

impl WebhookConfigurationStrategy {
    fn validate(&self, obj: &Value, opts: Options) -> Vec<FieldError> {
        let check = if self.mutating {
            typed_check::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>(
                obj,
            )
        } else {
            typed_check::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>(
                obj,
            )
        };
        if let Some(e) = check {
            return vec![e];
        }
        validate_webhook_configuration(obj, self.mutating, opts)
    }

    fn defaults(&self, obj: &mut Value) {
        if let Some(Value::Array(hooks)) = obj.get_mut("webhooks") {
            for h in hooks.iter_mut().filter_map(Value::as_object_mut) {
                default_webhook(h, self.mutating);
            }
        }
    }
}

impl Strategy for WebhookConfigurationStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        self.defaults(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, |o| self.defaults(o))
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj, Options::CREATE)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        self.defaults(new);
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        webhooks_changed(new, old)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.validate(new, Options::for_update(old))
    }
    fn table_columns(&self) -> Vec<Value> {
        webhook_table_columns()
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        webhook_table_cells(obj, now)
    }
}

// ---- ValidatingAdmissionPolicy and its bindings ----

fn validate_match_resources(m: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match text(m, "matchPolicy") {
        None => errs.push(FieldError::required(format!("{path}.matchPolicy"), "")),
        Some(p) if !MATCH_POLICIES.contains(&p) => errs.push(not_supported(
            format!("{path}.matchPolicy"),
            p,
            MATCH_POLICIES,
        )),
        Some(_) => {}
    }
    for key in ["namespaceSelector", "objectSelector"] {
        match m.get(key).filter(|s| s.is_object()) {
            None => errs.push(FieldError::required(format!("{path}.{key}"), "")),
            Some(sel) => errs.extend(validation::validate_label_selector(
                sel,
                &format!("{path}.{key}"),
                false,
            )),
        }
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in items(m, key).iter().enumerate() {
            let p = format!("{path}.{key}[{i}]");
            let mut names: Vec<String> = Vec::new();
            for (j, n) in strings(r, "resourceNames").into_iter().enumerate() {
                for msg in validation::is_valid_path_segment_name(&n) {
                    errs.push(FieldError::invalid(
                        format!("{p}.resourceNames[{j}]"),
                        &n,
                        msg,
                    ));
                }
                if names.contains(&n) {
                    errs.push(FieldError::duplicate(
                        format!("{p}.resourceNames[{j}]"),
                        &json!(n),
                    ));
                } else {
                    names.push(n);
                }
            }
            validate_rule_with_operations(r, &p, errs);
        }
    }
}

fn validate_param_kind(pk: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let av = text(pk, "apiVersion").unwrap_or("");
    let p = format!("{path}.apiVersion");
    if av.is_empty() {
        errs.push(FieldError::required(p, ""));
    } else if av.matches('/').count() > 1 {
        errs.push(FieldError::invalid(
            p,
            av,
            format!("unexpected GroupVersion string: {av}"),
        ));
    } else {
        let (group, version) = if av == "/" {
            ("", "")
        } else {
            av.split_once('/').unwrap_or(("", av))
        };
        if !group.is_empty() {
            let e = validation::is_dns1123_subdomain(group);
            if !e.is_empty() {
                errs.push(FieldError::invalid(p.clone(), group, e.join(",")));
            }
        }
        if version.is_empty() {
            errs.push(FieldError::invalid(p, av, "version must be specified"));
        } else {
            let e = validation::is_dns1035_label(version);
            if !e.is_empty() {
                errs.push(FieldError::invalid(p, version, e.join(",")));
            }
        }
    }
    let kind = text(pk, "kind").unwrap_or("");
    if kind.is_empty() {
        errs.push(FieldError::required(format!("{path}.kind"), ""));
    } else {
        let e = validation::is_dns1035_label(&kind.to_lowercase());
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.kind"),
                kind,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    e.join(",")
                ),
            ));
        }
    }
}

/// `isCELIdentifier`.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&name)
}

fn validate_policy_spec(name: &str, spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match text(spec, "failurePolicy") {
        None => errs.push(FieldError::required("spec.failurePolicy", "")),
        Some(f) if !FAILURE_POLICIES.contains(&f) => errs.push(not_supported(
            "spec.failurePolicy".into(),
            f,
            FAILURE_POLICIES,
        )),
        Some(_) => {}
    }
    if let Some(pk) = spec.get("paramKind").filter(|p| p.is_object()) {
        validate_param_kind(pk, "spec.paramKind", &mut errs);
    }
    match spec.get("matchConstraints").filter(|m| m.is_object()) {
        None => errs.push(FieldError::required("spec.matchConstraints", "")),
        Some(m) => {
            validate_match_resources(m, "spec.matchConstraints", &mut errs);
            if items(m, "resourceRules").is_empty() {
                errs.push(FieldError::required(
                    "spec.matchConstraints.resourceRules",
                    "",
                ));
            }
        }
    }
    validate_match_conditions(
        items(spec, "matchConditions"),
        "spec.matchConditions",
        &mut errs,
    );
    for (i, v) in items(spec, "variables").iter().enumerate() {
        let p = format!("spec.variables[{i}]");
        let n = text(v, "name").unwrap_or("");
        if n.trim().is_empty() {
            errs.push(FieldError::required(
                format!("{p}.name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(n) {
            errs.push(FieldError::invalid(
                format!("{p}.name"),
                n,
                "name is not a valid CEL identifier",
            ));
        }
        if text(v, "expression").unwrap_or("").trim().is_empty() {
            errs.push(FieldError::required(
                format!("{p}.expression"),
                "expression is not specified",
            ));
        }
    }
    let validations = items(spec, "validations");
    let audits = items(spec, "auditAnnotations");
    if validations.is_empty() && audits.is_empty() {
        let msg = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required("spec.validations", msg));
        errs.push(FieldError::required("spec.auditAnnotations", msg));
        return errs;
    }
    for (i, v) in validations.iter().enumerate() {
        let p = format!("spec.validations[{i}]");
        if text(v, "expression").unwrap_or("").trim().is_empty() {
            errs.push(FieldError::required(
                format!("{p}.expression"),
                "expression is not specified",
            ));
        }
        let me = text(v, "messageExpression").unwrap_or("");
        if !me.is_empty() && me.trim().is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.messageExpression"),
                me,
                "must be non-empty if specified",
            ));
        }
        let msg = text(v, "message").unwrap_or("");
        if !msg.is_empty() && msg.trim().is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.message"),
                msg,
                "message must be non-empty if specified",
            ));
        } else if msg.trim().contains(['\n', '\r']) {
            errs.push(FieldError::invalid(
                format!("{p}.message"),
                msg,
                "message must not contain line breaks",
            ));
        }
        if let Some(r) = text(v, "reason").filter(|r| !POLICY_REASONS.contains(r)) {
            errs.push(not_supported(format!("{p}.reason"), r, POLICY_REASONS));
        }
    }
    if audits.len() > MAX_AUDIT_ANNOTATIONS {
        errs.push(invalid_rendered(
            "spec.auditAnnotations".into(),
            Value::from(audits.to_vec()).to_string(),
            format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let mut keys: Vec<&str> = Vec::new();
    for (i, a) in audits.iter().enumerate() {
        let p = format!("spec.auditAnnotations[{i}]");
        let key = text(a, "key").unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.key"),
                key,
                "requires metadata.name be non-empty",
            ));
        } else {
            qualified_name(&format!("{name}/{key}"), format!("{p}.key"), &mut errs);
        }
        let ve = text(a, "valueExpression").unwrap_or("").trim();
        if ve.is_empty() {
            errs.push(FieldError::required(
                format!("{p}.valueExpression"),
                "valueExpression is not specified",
            ));
        } else if ve.len() > MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH {
            errs.push(FieldError::required(format!("{p}.valueExpression"), format!("must not exceed {MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH} bytes in length")));
        }
        if keys.contains(&key) {
            errs.push(FieldError::duplicate(format!("{p}.key"), &json!(key)));
        }
        keys.push(key);
    }
    errs
}

/// `validateValidatingAdmissionPolicyStatus`: expression warnings name a field and a warning.
fn validate_policy_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let warnings = obj
        .pointer("/status/typeChecking/expressionWarnings")
        .and_then(Value::as_array);
    for (i, w) in warnings.into_iter().flatten().enumerate() {
        let p = format!("status.typeChecking.expressionWarnings[{i}]");
        if text(w, "warning").unwrap_or("").is_empty() {
            errs.push(FieldError::required(format!("{p}.warning"), ""));
        }
        if text(w, "fieldRef").unwrap_or("").trim().is_empty() {
            errs.push(FieldError::required(format!("{p}.fieldRef"), ""));
        }
    }
    errs
}

/// ValidatingAdmissionPolicies.
pub struct ValidatingAdmissionPolicyStrategy;

fn policy_defaults(obj: &mut Value) {
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    default_field(spec, "failurePolicy", json!("Fail"));
    default_match_resources(spec.get_mut("matchConstraints"));
}

impl ValidatingAdmissionPolicyStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        if let Some(e) = typed_check::<
            k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
        >(obj)
        {
            return vec![e];
        }
        let name = api::meta::name(obj).unwrap_or("");
        let mut errs = validate_policy_spec(name, obj.get("spec").unwrap_or(&Value::Null));
        errs.extend(validate_policy_status(obj));
        errs
    }
}

impl Strategy for ValidatingAdmissionPolicyStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        policy_defaults(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, policy_defaults)
    }
    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({}))
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        policy_defaults(new);
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Validations", "integer", "", "Validations indicates the number of validation rules defined in this configuration", 0),
            column("ParamKind", "string", "", "ParamKind specifies the kind of resources used to parameterize this policy", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let param_kind = spec.get("paramKind").filter(|p| p.is_object()).map_or_else(
            || "<unset>".to_string(),
            |p| {
                format!(
                    "{}/{}",
                    text(p, "apiVersion").unwrap_or(""),
                    text(p, "kind").unwrap_or("")
                )
            },
        );
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(items(spec, "validations").len()),
            Value::from(param_kind),
            age_cell(obj, now),
        ]
    }
}

fn validate_param_ref(pr: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let name = text(pr, "name").unwrap_or("");
    let selector = pr.get("selector").filter(|s| s.is_object());
    if !name.is_empty() {
        for msg in validation::is_valid_path_segment_name(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
        }
        if selector.is_some() {
            errs.push(FieldError::forbidden(
                format!("{path}.name"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if let Some(sel) = selector {
        errs.extend(validation::validate_label_selector(
            sel,
            &format!("{path}.selector"),
            false,
        ));
        if !name.is_empty() {
            errs.push(FieldError::forbidden(
                format!("{path}.selector"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if name.is_empty() && selector.is_none() {
        errs.push(FieldError::required(
            path,
            "one of name or selector must be specified",
        ));
    }
    match text(pr, "parameterNotFoundAction").filter(|a| !a.is_empty()) {
        None => errs.push(FieldError::required(
            format!("{path}.parameterNotFoundAction"),
            "",
        )),
        Some(a) if a != "Deny" && a != "Allow" => {
            // Upstream passes the pointer: Go renders its address; the value is shown instead.
            errs.push(not_supported(
                format!("{path}.parameterNotFoundAction"),
                a,
                &["Deny", "Allow"],
            ));
        }
        Some(_) => {}
    }
}

fn validate_binding_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match text(spec, "policyName").filter(|p| !p.is_empty()) {
        None => errs.push(FieldError::required("spec.policyName", "")),
        Some(p) => {
            for msg in validation::is_dns1123_subdomain(p) {
                errs.push(FieldError::invalid("spec.policyName", p, msg));
            }
        }
    }
    if let Some(pr) = spec.get("paramRef").filter(|p| p.is_object()) {
        validate_param_ref(pr, "spec.paramRef", &mut errs);
    }
    if let Some(m) = spec.get("matchResources").filter(|m| m.is_object()) {
        validate_match_resources(m, "spec.matchResources", &mut errs);
    }
    let actions = strings(spec, "validationActions");
    let mut seen: Vec<&str> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let p = format!("spec.validationActions[{i}]");
        if !VALIDATION_ACTIONS.contains(&a.as_str()) {
            errs.push(not_supported(p.clone(), a, VALIDATION_ACTIONS));
        }
        if seen.contains(&a.as_str()) {
            errs.push(FieldError::duplicate(p, &json!(a)));
        }
        seen.push(a);
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        errs.push(invalid_rendered("spec.validationActions".into(), go_slice("admissionregistration.ValidationAction", &actions), "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    errs
}

/// ValidatingAdmissionPolicyBindings.
pub struct ValidatingAdmissionPolicyBindingStrategy;

fn binding_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        default_match_resources(spec.get_mut("matchResources"));
    }
}

impl ValidatingAdmissionPolicyBindingStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        if let Some(e) = typed_check::<
            k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        >(obj)
        {
            return vec![e];
        }
        validate_binding_spec(obj.get("spec").unwrap_or(&Value::Null))
    }
}

impl Strategy for ValidatingAdmissionPolicyBindingStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        binding_defaults(obj);
    }

    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, binding_defaults)
    }
    fn tracks_generation(&self) -> bool {
        true
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.validate(obj)
    }
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        binding_defaults(new);
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "PolicyName",
                "string",
                "",
                "PolicyName indicates the policy definition which the policy binding binded to",
                0,
            ),
            column(
                "ParamRef",
                "string",
                "",
                "ParamRef indicates the param resource which sets the configration param",
                0,
            ),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let param = match spec.get("paramRef").filter(|p| p.is_object()) {
            None => "<unset>".to_string(),
            Some(pr) => match (
                text(pr, "name").filter(|n| !n.is_empty()),
                text(pr, "namespace").filter(|n| !n.is_empty()),
            ) {
                (Some(n), Some(ns)) => format!("{ns}/{n}"),
                (Some(n), None) => format!("*/{n}"),
                (None, _) => match pr.get("selector").filter(|s| s.is_object()) {
                    Some(sel) => api::labels::from_label_selector_json(sel)
                        .map(|s| s.to_string())
                        .unwrap_or_default(),
                    None => "<unset>".to_string(),
                },
            },
        };
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(text(spec, "policyName").unwrap_or("")),
            Value::from(param),
            age_cell(obj, now),
        ]
    }
}
