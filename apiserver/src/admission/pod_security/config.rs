//! The `PodSecurity` plugin's configuration (`PodSecurityConfiguration` of
//! `pod-security.admission.config.k8s.io/v1`, also `v1beta1`), read from kube-apiserver's
//! `--admission-control-config-file` (an `AdmissionConfiguration` of
//! `apiserver.config.k8s.io/v1`, YAML or JSON, whose `PodSecurity` entry carries it inline under
//! `configuration` or in the file named by `path`, relative to the config file's folder).
//!
//! - `defaults`: the `enforce`, `audit`, `warn` levels and their `-version`s of a namespace
//!   without labels (each `privileged` / `latest` when not given).
//! - `exemptions`: `usernames` (requests by these users), `namespaces` (requests in these
//!   namespaces) and `runtimeClasses` (pods and templates of these classes) are not evaluated.
//!
//! Checked as upstream's `ValidatePodSecurityConfiguration` (levels, versions, exemption names
//! valid and not repeated); an invalid file stops the apiserver from starting.

use std::collections::BTreeSet;
use std::path::Path;

use api::validation::FieldError;
use serde::Deserialize;
use serde_json::Value;

use super::policy::{Level, LevelVersion, Policy, Version};

/// What the plugin is configured with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSecurityConfig {
    /// The policy of a namespace without labels.
    pub defaults: Policy,
    /// Requests not evaluated.
    pub exemptions: Exemptions,
}

/// `PodSecurityExemptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exemptions {
    pub usernames: BTreeSet<String>,
    pub namespaces: BTreeSet<String>,
    pub runtime_classes: BTreeSet<String>,
}

impl Exemptions {
    /// `exemptNamespace`.
    pub fn namespace(&self, ns: &str) -> bool {
        !ns.is_empty() && self.namespaces.contains(ns)
    }

    /// `exemptUser`.
    pub fn user(&self, name: &str) -> bool {
        !name.is_empty() && self.usernames.contains(name)
    }

    /// `exemptRuntimeClass`, of a pod spec.
    pub fn runtime_class(&self, spec: &Value) -> bool {
        spec.get("runtimeClassName")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty() && self.runtime_classes.contains(c))
    }
}

#[derive(Deserialize)]
struct AdmissionConfiguration {
    #[serde(default)]
    plugins: Vec<AdmissionPluginConfiguration>,
}

#[derive(Deserialize)]
struct AdmissionPluginConfiguration {
    name: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    configuration: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawExemptions {
    #[serde(default)]
    usernames: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    runtime_classes: Vec<String>,
}

fn parse_yaml(text: &str, what: &str) -> Result<Value, String> {
    serde_yaml::from_str(text).map_err(|e| format!("failed to read {what}: {e}"))
}

impl PodSecurityConfig {
    /// The `PodSecurity` configuration of the `AdmissionConfiguration` in the file `path`; the
    /// default one when the file has no `PodSecurity` entry.
    pub fn from_admission_config_file(path: &Path) -> Result<Self, String> {
        let what = format!("admission control config file {}", path.display());
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("failed to read {what}: {e}"))?;
        let config: AdmissionConfiguration = serde_json::from_value(parse_yaml(&text, &what)?)
            .map_err(|e| format!("failed to read {what}: {e}"))?;
        let Some(entry) = config.plugins.into_iter().find(|p| p.name == "PodSecurity") else {
            return Ok(Self::default());
        };
        let raw = match (entry.configuration, entry.path) {
            (Some(inline), _) => inline,
            (None, Some(file)) => {
                let file = path.parent().unwrap_or(Path::new("")).join(file);
                let what = format!("PodSecurity configuration {}", file.display());
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| format!("failed to read {what}: {e}"))?;
                parse_yaml(&text, &what)?
            }
            (None, None) => return Ok(Self::default()),
        };
        Self::from_value(&raw)
            .map_err(|e| format!("couldn't init admission plugin \"PodSecurity\": {e}"))
    }

    /// A `PodSecurityConfiguration` object, defaulted and validated.
    pub fn from_value(raw: &Value) -> Result<Self, String> {
        match raw.get("apiVersion").and_then(Value::as_str) {
            None
            | Some("pod-security.admission.config.k8s.io/v1")
            | Some("pod-security.admission.config.k8s.io/v1beta1") => {}
            Some(other) => {
                return Err(format!(
                    "unsupported PodSecurityConfiguration apiVersion {other:?}"
                ))
            }
        }
        let package = match raw.get("apiVersion").and_then(Value::as_str) {
            Some("pod-security.admission.config.k8s.io/v1beta1") => "v1beta1",
            _ => "v1",
        };
        check_types(raw, package)?;
        let mut errs = Vec::new();
        let defaults = raw.get("defaults").cloned().unwrap_or(Value::Null);
        let field = |k: &str| defaults.get(k).and_then(Value::as_str).map(str::to_string);
        let mut mode = |level_key: &str, version_key: &str| {
            let mut lv = LevelVersion::PRIVILEGED_LATEST;
            if let Some(l) = field(level_key) {
                match Level::parse(&l) {
                    Ok(level) => lv.level = level,
                    Err((_, msg)) => errs.push(FieldError::invalid(
                        format!("defaults.{level_key}"),
                        &l,
                        msg,
                    )),
                }
            }
            if let Some(v) = field(version_key) {
                match Version::parse(&v) {
                    Ok(version) => lv.version = version,
                    Err((_, msg)) => errs.push(FieldError::invalid(
                        format!("defaults.{version_key}"),
                        &v,
                        msg,
                    )),
                }
            }
            lv
        };
        let defaults = Policy {
            enforce: mode("enforce", "enforce-version"),
            audit: mode("audit", "audit-version"),
            warn: mode("warn", "warn-version"),
        };
        let raw_exemptions: RawExemptions = match raw.get("exemptions") {
            None | Some(Value::Null) => RawExemptions::default(),
            Some(e) => serde_json::from_value(e.clone()).map_err(|e| format!("exemptions: {e}"))?,
        };
        let exemptions = Exemptions {
            namespaces: names(
                "exemptions.namespaces",
                raw_exemptions.namespaces,
                |n| api::validation::name_is_dns1123_label(n, false),
                &mut errs,
            ),
            runtime_classes: names(
                "exemptions.runtimeClasses",
                raw_exemptions.runtime_classes,
                |n| api::validation::name_is_dns1123_subdomain(n, false),
                &mut errs,
            ),
            usernames: names(
                "exemptions.usernames",
                raw_exemptions.usernames,
                |n| {
                    if n.is_empty() {
                        vec!["username must not be empty".to_string()]
                    } else {
                        Vec::new()
                    }
                },
                &mut errs,
            ),
        };
        match errs.len() {
            0 => Ok(PodSecurityConfig {
                defaults,
                exemptions,
            }),
            1 => Err(errs[0].to_string()),
            _ => Err(format!(
                "[{}]",
                errs.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// What Go's JSON decoder calls the kind of `v` (`UnmarshalTypeError.Value`).
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The configuration's fields have the types of upstream's `PodSecurityConfiguration` (of the
/// Go `package` of its apiVersion), else the error its decoder stops at (`json: cannot
/// unmarshal number into Go struct field PodSecurityDefaults.defaults.enforce of type
/// string`): a mistyped value is refused, never read as absent. `null` is Go's zero value;
/// keys the struct does not have are ignored, as the (non-strict) decoder ignores them.
fn check_types(raw: &Value, package: &str) -> Result<(), String> {
    let refuse = |v: &Value, owner: &str, path: &str, ty: &str| {
        Err(format!(
            "json: cannot unmarshal {} into Go struct field {owner}.{path} of type {ty}",
            json_kind(v)
        ))
    };
    let section =
        |key: &str, owner: &str| -> Result<Option<&serde_json::Map<String, Value>>, String> {
            match raw.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Object(m)) => Ok(Some(m)),
                Some(v) => refuse(
                    v,
                    "PodSecurityConfiguration",
                    key,
                    &format!("{package}.{owner}"),
                )
                .map(|()| None),
            }
        };
    const DEFAULTS: [&str; 6] = [
        "enforce",
        "enforce-version",
        "audit",
        "audit-version",
        "warn",
        "warn-version",
    ];
    const EXEMPTIONS: [&str; 3] = ["usernames", "namespaces", "runtimeClasses"];
    if let Some(defaults) = section("defaults", "PodSecurityDefaults")? {
        for (k, v) in defaults
            .iter()
            .filter(|(k, _)| DEFAULTS.contains(&k.as_str()))
        {
            if !matches!(v, Value::String(_) | Value::Null) {
                return refuse(v, "PodSecurityDefaults", &format!("defaults.{k}"), "string");
            }
        }
    }
    if let Some(exemptions) = section("exemptions", "PodSecurityExemptions")? {
        for (k, v) in exemptions
            .iter()
            .filter(|(k, _)| EXEMPTIONS.contains(&k.as_str()))
        {
            let path = format!("exemptions.{k}");
            match v {
                Value::Null => {}
                Value::Array(items) => {
                    if let Some(item) = items.iter().find(|i| !i.is_string()) {
                        return refuse(item, "PodSecurityExemptions", &path, "string");
                    }
                }
                other => return refuse(other, "PodSecurityExemptions", &path, "[]string"),
            }
        }
    }
    Ok(())
}

/// The exemption list at `path`, each name checked by `check` and not repeated.
fn names(
    path: &str,
    list: Vec<String>,
    check: impl Fn(&str) -> Vec<String>,
    errs: &mut Vec<FieldError>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, name) in list.into_iter().enumerate() {
        let problems = check(&name);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                &name,
                problems.join(", "),
            ));
        } else if !out.insert(name.clone()) {
            errs.push(FieldError::duplicate(
                format!("{path}[{i}]"),
                &Value::String(name),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_and_exemptions_are_read_and_defaulted() {
        let c = PodSecurityConfig::from_value(&json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline", "warn": "restricted", "warn-version": "v1.30"},
            "exemptions": {"usernames": ["ci"], "namespaces": ["kube-system"],
                "runtimeClasses": ["kata"]},
        }))
        .unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "baseline:latest");
        assert_eq!(c.defaults.audit.to_string(), "privileged:latest");
        assert_eq!(c.defaults.warn.to_string(), "restricted:v1.30");
        assert!(c.exemptions.user("ci") && !c.exemptions.user("") && !c.exemptions.user("x"));
        assert!(c.exemptions.namespace("kube-system") && !c.exemptions.namespace("default"));
        assert!(c
            .exemptions
            .runtime_class(&json!({"runtimeClassName": "kata"})));
        assert!(!c.exemptions.runtime_class(&json!({})));
        assert_eq!(
            PodSecurityConfig::from_value(&json!({})).unwrap(),
            PodSecurityConfig::default()
        );
    }

    #[test]
    fn invalid_configurations_are_refused_with_field_paths() {
        let err = PodSecurityConfig::from_value(&json!({
            "defaults": {"enforce": "strict", "audit-version": "1.2"},
            "exemptions": {"usernames": ["a", "a", ""], "namespaces": ["Not_A_Label"]},
        }))
        .unwrap_err();
        assert!(err.contains("defaults.enforce: Invalid value: \"strict\": must be one of privileged, baseline, restricted"), "{err}");
        assert!(
            err.contains("defaults.audit-version: Invalid value: \"1.2\""),
            "{err}"
        );
        assert!(
            err.contains("exemptions.usernames[1]: Duplicate value: \"a\""),
            "{err}"
        );
        assert!(
            err.contains(
                "exemptions.usernames[2]: Invalid value: \"\": username must not be empty"
            ),
            "{err}"
        );
        assert!(
            err.contains("exemptions.namespaces[0]: Invalid value: \"Not_A_Label\""),
            "{err}"
        );
    }

    #[test]
    fn mistyped_values_are_refused_as_go_decodes_them() {
        let err = |raw: Value| PodSecurityConfig::from_value(&raw).unwrap_err();
        assert_eq!(
            err(json!({"defaults": {"enforce": 1}})),
            "json: cannot unmarshal number into Go struct field PodSecurityDefaults.defaults.enforce of type string"
        );
        assert_eq!(
            err(json!({"apiVersion": "pod-security.admission.config.k8s.io/v1beta1", "defaults": ["restricted"]})),
            "json: cannot unmarshal array into Go struct field PodSecurityConfiguration.defaults of type v1beta1.PodSecurityDefaults"
        );
        assert_eq!(
            err(json!({"exemptions": {"usernames": "admin"}})),
            "json: cannot unmarshal string into Go struct field PodSecurityExemptions.exemptions.usernames of type []string"
        );
        assert_eq!(
            err(json!({"exemptions": {"namespaces": [true]}})),
            "json: cannot unmarshal bool into Go struct field PodSecurityExemptions.exemptions.namespaces of type string"
        );
        // null is the zero value: the default; a key the struct does not have is ignored.
        let c = PodSecurityConfig::from_value(
            &json!({"defaults": {"enforce": null, "extra": 1}, "exemptions": {"other": 2}}),
        )
        .unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "privileged:latest");
    }

    #[test]
    fn the_admission_configuration_file_names_the_plugin_inline_or_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let inline = dir.path().join("admission.yaml");
        std::fs::write(
            &inline,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n\
             - name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n\
             \x20   kind: PodSecurityConfiguration\n    defaults:\n      enforce: restricted\n",
        )
        .unwrap();
        let c = PodSecurityConfig::from_admission_config_file(&inline).unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "restricted:latest");

        std::fs::write(
            dir.path().join("pss.yaml"),
            "kind: PodSecurityConfiguration\nexemptions:\n  namespaces: [tools]\n",
        )
        .unwrap();
        let by_path = dir.path().join("by-path.yaml");
        std::fs::write(
            &by_path,
            "kind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: pss.yaml\n",
        )
        .unwrap();
        let c = PodSecurityConfig::from_admission_config_file(&by_path).unwrap();
        assert!(c.exemptions.namespace("tools"));
        assert!(PodSecurityConfig::from_admission_config_file(&dir.path().join("none")).is_err());

        // A number where a level belongs stops start-up, in the plugin's words.
        let numeric = dir.path().join("numeric.yaml");
        std::fs::write(
            &numeric,
            "kind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n\
             \x20   kind: PodSecurityConfiguration\n    defaults:\n      enforce: 3\n",
        )
        .unwrap();
        assert_eq!(
            PodSecurityConfig::from_admission_config_file(&numeric).unwrap_err(),
            "couldn't init admission plugin \"PodSecurity\": json: cannot unmarshal number into Go struct field PodSecurityDefaults.defaults.enforce of type string"
        );
    }
}
