//! ConfigMaps, Secrets and ServiceAccounts: data-key validation, size limits, `immutable`, Secret
//! `type` defaulting and immutability, `stringData` folding, printers (DATA, TYPE, SECRETS columns).

use super::common::{self, field_text};
use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;
use api::validation::{self, FieldError};
use base64::Engine;
use serde_json::{json, Value};

/// Max total size of a ConfigMap's or Secret's data (`corev1.MaxSecretSize`).
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `IsConfigMapKey`.
pub fn is_config_map_key(k: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if k.len() > validation::DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {} characters",
            validation::DNS1123_SUBDOMAIN_MAX_LENGTH
        ));
    }
    if k.is_empty()
        || !k
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
    {
        errs.push(CONFIG_KEY_MSG.to_string());
    }
    if k == "." {
        errs.push("must not be '.'".to_string());
    } else if k == ".." {
        errs.push("must not be '..'".to_string());
    } else if k.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

fn keys(obj: &Value, field: &str) -> Vec<String> {
    obj.get(field)
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Validates the keys of `data`-like maps; returns the total byte size of the (decoded) values.
fn validate_data_maps(
    obj: &Value,
    fields: &[&str],
    base64_field: Option<&str>,
    errs: &mut Vec<FieldError>,
) -> usize {
    let mut total = 0;
    let mut seen = std::collections::BTreeSet::new();
    for field in fields {
        let Some(m) = obj.get(*field).and_then(Value::as_object) else {
            continue;
        };
        for (k, v) in m {
            for msg in is_config_map_key(k) {
                errs.push(FieldError::invalid(format!("{field}[{k}]"), k, msg));
            }
            if !seen.insert(k.clone()) {
                errs.push(FieldError::invalid(
                    format!("{field}[{k}]"),
                    k,
                    "duplicate of key present in another data map",
                ));
            }
            let s = v.as_str().unwrap_or("");
            if Some(*field) == base64_field {
                match base64::engine::general_purpose::STANDARD.decode(s) {
                    Ok(b) => total += b.len(),
                    Err(_) => errs.push(FieldError::invalid(
                        format!("{field}[{k}]"),
                        "<secret contents redacted>",
                        "illegal base64 data",
                    )),
                }
            } else {
                total += s.len();
            }
        }
    }
    total
}

fn validate_immutable(new: &Value, old: &Value, fields: &[&str], errs: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) == Some(true) {
        for f in fields {
            if new.get(*f) != old.get(*f) {
                errs.push(FieldError::forbidden(
                    *f,
                    "field is immutable when `immutable` is set",
                ));
            }
        }
        if new.get("immutable").and_then(Value::as_bool) != Some(true) {
            errs.push(FieldError::forbidden(
                "immutable",
                "field is immutable when `immutable` is set",
            ));
        }
    }
}

fn data_count(obj: &Value, fields: &[&str]) -> Value {
    Value::from(fields.iter().map(|f| keys(obj, f).len()).sum::<usize>())
}

pub struct ConfigMapStrategy;

impl ConfigMapStrategy {
    fn validate(obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let size = validate_data_maps(obj, &["data", "binaryData"], None, &mut errs);
        if size > MAX_DATA_SIZE {
            errs.push(FieldError::too_long(
                "",
                format!("must have at most {MAX_DATA_SIZE} bytes"),
            ));
        }
        errs
    }
}

impl Strategy for ConfigMapStrategy {
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        Self::validate(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Self::validate(new);
        validate_immutable(new, old, &["data", "binaryData"], &mut errs);
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Data", "string", "", "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            data_count(obj, &["data", "binaryData"]),
            age_cell(obj, now),
        ]
    }
}

pub struct SecretStrategy;

/// Folds `stringData` into `data` (base64) and defaults `type: Opaque`.
fn prepare_secret(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else { return };
    if let Some(Value::Object(sd)) = m.remove("stringData") {
        let data = m.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                let enc = base64::engine::general_purpose::STANDARD
                    .encode(v.as_str().unwrap_or("").as_bytes());
                d.insert(k, Value::from(enc));
            }
        }
    }
    common::default_field(m, "type", json!("Opaque"));
}

impl SecretStrategy {
    fn validate(obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let size = validate_data_maps(obj, &["data"], Some("data"), &mut errs);
        if size > MAX_DATA_SIZE {
            errs.push(FieldError::too_long(
                "data",
                format!("must have at most {MAX_DATA_SIZE} bytes"),
            ));
        }
        let ty = field_text(obj, "type");
        let data = keys(obj, "data");
        let need = |k: &str, errs: &mut Vec<FieldError>| {
            if !data.iter().any(|d| d == k) {
                errs.push(FieldError::required(format!("data[{k}]"), ""));
            }
        };
        match ty.as_str() {
            "kubernetes.io/dockerconfigjson" => need(".dockerconfigjson", &mut errs),
            "kubernetes.io/dockercfg" => need(".dockercfg", &mut errs),
            "kubernetes.io/tls" => {
                need("tls.crt", &mut errs);
                need("tls.key", &mut errs);
            }
            "kubernetes.io/basic-auth"
                if !data.iter().any(|d| d == "username" || d == "password") =>
            {
                errs.push(FieldError::required("data[username]", ""));
            }
            "kubernetes.io/ssh-auth" => need("ssh-privatekey", &mut errs),
            "kubernetes.io/service-account-token"
                if api::meta::annotations(obj)
                    .get("kubernetes.io/service-account.name")
                    .is_none_or(|s| s.is_empty()) =>
            {
                errs.push(FieldError::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
            _ => {}
        }
        errs
    }
}

impl Strategy for SecretStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        prepare_secret(obj);
    }

    /// `SetDefaults_Secret`: `type: Opaque` (`stringData` is merged into `data` on write only).
    fn default_decoded(&self, obj: &mut Value) -> bool {
        super::defaulted(obj, |obj| {
            if let Some(m) = obj.as_object_mut() {
                common::default_field(m, "type", json!("Opaque"));
            }
        })
    }
    fn prepare_for_update(&self, new: &mut Value, __old: &Value) {
        prepare_secret(new);
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        Self::validate(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Self::validate(new);
        let (a, b) = (field_text(new, "type"), field_text(old, "type"));
        if a != b {
            errs.push(FieldError::invalid("type", &a, "field is immutable"));
        }
        validate_immutable(new, old, &["data"], &mut errs);
        errs
    }
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Type", "string", "", "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types", 0),
            column("Data", "string", "", "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(field_text(obj, "type")),
            data_count(obj, &["data"]),
            age_cell(obj, now),
        ]
    }
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "type" => Some(field_text(obj, "type")),
            _ => None,
        }
    }
}

pub struct ServiceAccountStrategy;

impl Strategy for ServiceAccountStrategy {
    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Secrets", "string", "", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.", 0),
            age_column(),
        ]
    }
    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let n = obj
            .get("secrets")
            .and_then(Value::as_array)
            .map(Vec::len)
            .unwrap_or(0);
        vec![
            Value::from(api::meta::name(obj).unwrap_or("")),
            Value::from(n),
            age_cell(obj, now),
        ]
    }
}
