//! Field validation with apimachinery's exact wording.
//!
//! The `is_*` functions return the list of problems (empty = valid), like apimachinery's
//! `validation.IsDNS1123Subdomain`. [`FieldError`] is one entry of a 422 `Invalid` response; its
//! [`FieldError::body`] renders exactly as `field.Error.ErrorBody()` (`Invalid value: "Web_1": …`).

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// Kind of a field error (apimachinery `field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
}

impl FieldErrorKind {
    /// The `StatusCause.reason` string.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Internal => "InternalError",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
        }
    }
}

/// One validation failure at a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path with indices: `metadata.name`, `spec.containers[0].image`.
    pub field: String,
    pub kind: FieldErrorKind,
    /// Detail text after the type (may be empty).
    pub message: String,
    /// The offending value as rendered in messages (strings quoted like Go's `%q`, numbers bare).
    pub value: Option<String>,
}

impl FieldError {
    fn new(
        field: impl Into<String>,
        kind: FieldErrorKind,
        value: Option<String>,
        msg: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            kind,
            message: msg.into(),
            value,
        }
    }

    pub fn required(field: impl Into<String>, msg: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Required, None, msg)
    }

    pub fn forbidden(field: impl Into<String>, msg: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Forbidden, None, msg)
    }

    pub fn too_long(field: impl Into<String>, msg: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::TooLong, None, msg)
    }

    pub fn internal(field: impl Into<String>, msg: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Internal, None, msg)
    }

    /// Invalid string value.
    pub fn invalid(field: impl Into<String>, value: &str, msg: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Invalid, Some(go_quote(value)), msg)
    }

    /// Invalid value of any JSON type.
    pub fn invalid_value(field: impl Into<String>, value: &Value, msg: impl Into<String>) -> Self {
        Self::new(
            field,
            FieldErrorKind::Invalid,
            Some(render_value(value)),
            msg,
        )
    }

    pub fn duplicate(field: impl Into<String>, value: &Value) -> Self {
        Self::new(
            field,
            FieldErrorKind::Duplicate,
            Some(render_value(value)),
            "",
        )
    }

    pub fn not_found(field: impl Into<String>, value: &Value) -> Self {
        Self::new(
            field,
            FieldErrorKind::NotFound,
            Some(render_value(value)),
            "",
        )
    }

    /// Unsupported value; `supported` are listed as apimachinery does.
    pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let msg = if list.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", list.join(", "))
        };
        Self::new(
            field,
            FieldErrorKind::NotSupported,
            Some(render_value(value)),
            msg,
        )
    }

    /// The `StatusCause.reason`: `FieldValueRequired`, `FieldValueInvalid`, ….
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// `field.Error.ErrorBody()`: the message without the field path.
    pub fn body(&self) -> String {
        let mut s = match (self.kind, &self.value) {
            (
                FieldErrorKind::Required
                | FieldErrorKind::Forbidden
                | FieldErrorKind::TooLong
                | FieldErrorKind::Internal,
                _,
            )
            | (_, None) => self.kind.text().to_string(),
            (k, Some(v)) => format!("{}: {}", k.text(), v),
        };
        if !self.message.is_empty() {
            s.push_str(": ");
            s.push_str(&self.message);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Go `%q` of a string (enough for messages: escapes `"`, `\` and control characters).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

/// Max length of a DNS-1123 label / DNS-1035 label / qualified-name part / label value.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Max length of a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Max total size of annotations (keys + values).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn max_len_msg(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn is_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && lower_alnum(b[0])
        && lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_msg(DNS1123_LABEL_MAX_LENGTH));
    }
    if !is_label_shape(s) {
        errs.push(DNS1123_LABEL_MSG.to_string());
    }
    errs
}

/// Dot-separated DNS-1123 labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_msg(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if s.is_empty() || !s.split('.').all(is_label_shape) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errs
}

/// `[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 characters (service names).
pub fn is_dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_msg(DNS1123_LABEL_MAX_LENGTH));
    }
    if !is_label_shape(s) || !s.as_bytes()[0].is_ascii_lowercase() {
        errs.push(DNS1035_LABEL_MSG.to_string());
    }
    errs
}

fn qualified_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| alnum(c) || c == b'-' || c == b'_' || c == b'.')
}

/// A label or annotation key: optional DNS-1123 subdomain prefix and `/`, then a name part.
pub fn is_qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for m in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!("a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > DNS1123_LABEL_MAX_LENGTH {
            errs.push(format!(
                "name part {}",
                max_len_msg(DNS1123_LABEL_MAX_LENGTH)
            ));
        }
        if !qualified_part_ok(name) {
            errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
        }
    }
    errs
}

/// A label value: empty, or a qualified-name part of at most 63 characters.
pub fn is_valid_label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_msg(DNS1123_LABEL_MAX_LENGTH));
    }
    if !s.is_empty() && !qualified_part_ok(s) {
        errs.push(LABEL_VALUE_MSG.to_string());
    }
    errs
}

/// Path-segment rule every name must pass (`.`/`..` and `/`, `%` are not allowed).
pub fn is_valid_path_segment_name(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    let mut errs = Vec::new();
    for bad in ["/", "%"] {
        if s.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// Name validator signature: (name, is_prefix) → problems. `is_prefix` is true for `generateName`.
pub type NameValidator = fn(&str, bool) -> Vec<String>;

/// DNS-1123 subdomain names (most kinds). A generateName prefix may end in `-`.
pub fn name_is_dns1123_subdomain(name: &str, prefix: bool) -> Vec<String> {
    is_dns1123_subdomain(&mask_prefix(name, prefix))
}

/// DNS-1123 label names (namespaces).
pub fn name_is_dns1123_label(name: &str, prefix: bool) -> Vec<String> {
    is_dns1123_label(&mask_prefix(name, prefix))
}

/// DNS-1035 label names (services).
pub fn name_is_dns1035_label(name: &str, prefix: bool) -> Vec<String> {
    is_dns1035_label(&mask_prefix(name, prefix))
}

/// Any name passing the path-segment rule (RBAC's `ValidateRBACName`; also for generateName
/// prefixes).
pub fn name_is_path_segment(name: &str, _prefix: bool) -> Vec<String> {
    is_valid_path_segment_name(name)
}

/// apimachinery `maskTrailingDash`: a generateName prefix `web-` is validated as `wea`.
fn mask_prefix(name: &str, prefix: bool) -> String {
    if prefix && name.len() > 1 && name.ends_with('-') {
        let mut s = name[..name.len() - 1].to_string();
        s.push('a');
        s
    } else {
        name.to_string()
    }
}

/// Validates `metadata.labels` (a JSON object of strings) at `path`.
pub fn validate_labels(labels: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(map) = labels.as_object() else {
        if !labels.is_null() {
            errs.push(FieldError::invalid_value(
                path,
                labels,
                "must be a map of strings",
            ));
        }
        return errs;
    };
    for (k, v) in map {
        for m in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, k, m));
        }
        match v.as_str() {
            Some(s) => {
                for m in is_valid_label_value(s) {
                    errs.push(FieldError::invalid(format!("{path}.{k}"), s, m));
                }
            }
            None => errs.push(FieldError::invalid_value(
                format!("{path}.{k}"),
                v,
                "must be a string",
            )),
        }
    }
    errs
}

/// Validates `metadata.annotations`: keys are qualified names (lower-cased), total size ≤ 256 KiB.
pub fn validate_annotations(annotations: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(map) = annotations.as_object() else {
        if !annotations.is_null() {
            errs.push(FieldError::invalid_value(
                path,
                annotations,
                "must be a map of strings",
            ));
        }
        return errs;
    };
    let mut total = 0usize;
    for (k, v) in map {
        for m in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, k, m));
        }
        total += k.len();
        match v.as_str() {
            Some(s) => total += s.len(),
            None => errs.push(FieldError::invalid_value(
                format!("{path}.{k}"),
                v,
                "must be a string",
            )),
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(
            path,
            format!("must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
    errs
}

/// Validates an object's `metadata` (apimachinery `ValidateObjectMeta`): name or generateName, name
/// format, namespace presence per scope, labels, annotations, finalizers and owner references.
pub fn validate_object_meta(
    meta: &Value,
    namespaced: bool,
    name_validator: NameValidator,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(m) = meta.as_object() else {
        errs.push(FieldError::required("metadata", ""));
        return errs;
    };
    let s = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
    let name = s("name");
    let generate_name = s("generateName");
    if !generate_name.is_empty() {
        for msg in name_validator(generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                generate_name,
                msg,
            ));
        }
    }
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        }
    } else {
        let kind_msgs = name_validator(name, false);
        // Every name must be a path segment; a kind whose own rule is that one (RBAC) reports
        // each problem once.
        let segment_msgs: Vec<String> = is_valid_path_segment_name(name)
            .into_iter()
            .filter(|m| !kind_msgs.contains(m))
            .collect();
        for msg in kind_msgs.into_iter().chain(segment_msgs) {
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    }
    let namespace = s("namespace");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid("metadata.namespace", namespace, msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(l) = m.get("labels") {
        errs.extend(validate_labels(l, "metadata.labels"));
    }
    if let Some(a) = m.get("annotations") {
        errs.extend(validate_annotations(a, "metadata.annotations"));
    }
    if let Some(g) = m.get("generation") {
        if g.as_i64().is_some_and(|g| g < 0) {
            errs.push(FieldError::invalid_value(
                "metadata.generation",
                g,
                "must be greater than or equal to 0",
            ));
        }
    }
    if let Some(f) = m.get("finalizers").and_then(Value::as_array) {
        let mut seen = std::collections::BTreeSet::new();
        for (i, v) in f.iter().enumerate() {
            let path = format!("metadata.finalizers[{i}]");
            match v.as_str() {
                Some(name) => {
                    for msg in is_qualified_name(name) {
                        errs.push(FieldError::invalid(path.clone(), name, msg));
                    }
                    if !seen.insert(name) {
                        errs.push(FieldError::duplicate(path, v));
                    }
                }
                None => errs.push(FieldError::invalid_value(path, v, "must be a string")),
            }
        }
    }
    if let Some(refs) = m.get("ownerReferences").and_then(Value::as_array) {
        errs.extend(validate_owner_references(refs));
    }
    errs
}

fn validate_owner_references(refs: &[Value]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut controllers = 0;
    for (i, r) in refs.iter().enumerate() {
        let base = format!("metadata.ownerReferences[{i}]");
        for field in ["apiVersion", "kind", "name", "uid"] {
            if r.get(field)
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                let msg = match field {
                    "apiVersion" => "version must not be empty",
                    "kind" => "kind must not be empty",
                    "name" => "name must not be empty",
                    _ => "uid must not be empty",
                };
                errs.push(FieldError::invalid_value(
                    format!("{base}.{field}"),
                    r.get(field).unwrap_or(&Value::String(String::new())),
                    msg,
                ));
            }
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            controllers += 1;
        }
    }
    if controllers > 1 {
        errs.push(FieldError::invalid_value(
            "metadata.ownerReferences",
            &Value::Array(refs.to_vec()),
            "Only one reference can have Controller set to true",
        ));
    }
    errs
}

/// `ValidateLabelSelector` of a `metav1.LabelSelector` (JSON) at `path`: `matchLabels` as labels,
/// each of `matchExpressions` with a known operator, values exactly when the operator needs
/// them, a qualified key and (unless `allow_invalid_values`) valid label values.
pub fn validate_label_selector(
    selector: &Value,
    path: &str,
    allow_invalid_values: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = selector.get("matchLabels") {
        errs.extend(validate_labels(labels, &format!("{path}.matchLabels")));
    }
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    let opts = LabelSelectorValidationOptions {
        allow_invalid_label_value: allow_invalid_values,
        allow_unknown_operator: false,
    };
    for (i, e) in exprs.into_iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        errs.extend(validate_label_selector_requirement(e, &p, opts));
    }
    errs
}

/// Options of [`validate_label_selector_requirement`] (`LabelSelectorValidationOptions`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LabelSelectorValidationOptions {
    /// Label values are not checked (existing objects stored before the check).
    pub allow_invalid_label_value: bool,
    /// An operator this server does not know passes (an access review from a newer client:
    /// the requirement is dropped, which only broadens the check).
    pub allow_unknown_operator: bool,
}

/// `ValidateLabelSelectorRequirement` of one `{key, operator, values}` at `path`: values exactly
/// when the operator needs them, a known operator (unless allowed), a qualified key and (unless
/// allowed) valid label values.
pub fn validate_label_selector_requirement(
    e: &Value,
    path: &str,
    opts: LabelSelectorValidationOptions,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let values: Vec<&Value> = e
        .get("values")
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let operator = e.get("operator").and_then(Value::as_str).unwrap_or("");
    match operator {
        "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
            format!("{path}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
            format!("{path}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        _ if opts.allow_unknown_operator => {}
        other => errs.push(FieldError::invalid(
            format!("{path}.operator"),
            other,
            "not a valid selector operator",
        )),
    }
    let key = e.get("key").and_then(Value::as_str).unwrap_or("");
    for m in is_qualified_name(key) {
        errs.push(FieldError::invalid(format!("{path}.key"), key, m));
    }
    if !opts.allow_invalid_label_value {
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or("");
            for m in is_valid_label_value(v) {
                errs.push(FieldError::invalid(format!("{path}.values[{j}]"), v, m));
            }
        }
    }
    errs
}

/// Validates a `map[string]string` such as a selector (`spec.selector` of an RC) as labels.
pub fn validate_label_map(map: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let v = Value::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    );
    validate_labels(&v, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn dns_names() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert!(is_dns1123_subdomain("a").is_empty());
        assert_eq!(
            is_dns1123_subdomain("Web_1"),
            vec![DNS1123_SUBDOMAIN_MSG.to_string()]
        );
        assert!(!is_dns1123_subdomain("a..b").is_empty());
        assert!(!is_dns1123_subdomain("-a").is_empty());
        assert_eq!(is_dns1123_subdomain(&"a".repeat(254)).len(), 1);
        assert!(is_dns1123_label("my-name").is_empty());
        assert!(!is_dns1123_label("a.b").is_empty());
        assert!(!is_dns1035_label("1abc").is_empty());
        assert!(is_dns1035_label("abc-1").is_empty());
    }

    #[test]
    fn qualified_names_and_values() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("example.com/My_name.x").is_empty());
        assert!(!is_qualified_name("a/b/c").is_empty());
        assert!(!is_qualified_name("/x").is_empty());
        assert!(!is_qualified_name("Ex.com/x").is_empty());
        assert!(is_valid_label_value("").is_empty());
        assert!(!is_valid_label_value("-a").is_empty());
        assert!(!is_valid_label_value(&"a".repeat(64)).is_empty());
    }

    #[test]
    fn object_meta_messages_match_apimachinery() {
        let errs = validate_object_meta(
            &json!({"name":"Web_1","namespace":"default"}),
            true,
            name_is_dns1123_subdomain,
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].reason(), "FieldValueInvalid");
        assert_eq!(
            errs[0].to_string(),
            format!("metadata.name: Invalid value: \"Web_1\": {DNS1123_SUBDOMAIN_MSG}")
        );
        let errs = validate_object_meta(
            &json!({"namespace":"default"}),
            true,
            name_is_dns1123_subdomain,
        );
        assert_eq!(
            errs[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        let ok = validate_object_meta(
            &json!({"generateName":"web-","namespace":"d"}),
            true,
            name_is_dns1123_subdomain,
        );
        assert!(ok.is_empty(), "{ok:?}");
        let cluster = validate_object_meta(
            &json!({"name":"n","namespace":"d"}),
            false,
            name_is_dns1123_label,
        );
        assert_eq!(cluster[0].kind, FieldErrorKind::Forbidden);
        let labels = validate_object_meta(
            &json!({"name":"n","labels":{"a":"-x"}}),
            false,
            name_is_dns1123_label,
        );
        assert_eq!(labels[0].field, "metadata.labels.a");
    }

    #[test]
    fn annotations_size_limit() {
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let errs = validate_annotations(&json!({"a": big}), "metadata.annotations");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].kind, FieldErrorKind::TooLong);
    }

    #[test]
    fn bodies_render_like_go() {
        let e = FieldError::required("spec.containers", "");
        assert_eq!(e.body(), "Required value");
        let e = FieldError::invalid_value(
            "spec.replicas",
            &json!(-1),
            "must be greater than or equal to 0",
        );
        assert_eq!(
            e.to_string(),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        let e = FieldError::not_supported("spec.restartPolicy", &json!("X"), &["Always", "Never"]);
        assert_eq!(
            e.body(),
            "Unsupported value: \"X\": supported values: \"Always\", \"Never\""
        );
    }

    proptest! {
        #[test]
        fn validators_never_panic(s in "\\PC{0,300}") {
            let _ = is_dns1123_subdomain(&s);
            let _ = is_dns1123_label(&s);
            let _ = is_dns1035_label(&s);
            let _ = is_qualified_name(&s);
            let _ = is_valid_label_value(&s);
            let _ = name_is_dns1123_subdomain(&s, true);
        }

        #[test]
        fn generated_subdomains_are_valid(s in "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?){0,3}") {
            prop_assert!(is_dns1123_subdomain(&s).is_empty());
        }

        #[test]
        fn uppercase_never_valid_subdomain(s in "[a-z]{0,5}[A-Z][a-z]{0,5}") {
            prop_assert!(!is_dns1123_subdomain(&s).is_empty());
        }
    }
}
