//! `certificates.k8s.io/v1` CertificateSigningRequests, as upstream's
//! `pkg/apis/certificates/validation` and `pkg/registry/certificates/certificates/strategy.go`:
//!
//! - A create gets an empty status and the requesting user in `spec.username`/`groups` (here
//!   always the server's fixed identity, see [`crate::authn::identity`]); `spec.request` must be
//!   a PEM `CERTIFICATE REQUEST` whose signature verifies, `usages` are required and known,
//!   `signerName` qualified (`example.com/name`), `expirationSeconds` at least 600.
//! - An update of the main resource changes only metadata (spec and status come from storage).
//! - `/status` may set `status.certificate` (once) and non-approval conditions; approval
//!   conditions change only through `/approval` ([`approval_update`]), which changes only
//!   `status.conditions`. Approved and Denied are exclusive, they and Failed are `True` only, and
//!   none of them can be removed.
//! - Conditions get `lastUpdateTime`/`lastTransitionTime` when they come without.
//! - Table: NAME, AGE, SIGNERNAME, REQUESTOR, REQUESTEDDURATION, CONDITION.

use api::validation::{FieldError, FieldErrorKind};
use base64::Engine;
use serde_json::{json, Value};

use super::table::{age_cell, age_column, column, name_column};
use super::Strategy;

const APPROVED: &str = "Approved";
const DENIED: &str = "Denied";
const FAILED: &str = "Failed";

const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

const VALID_USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// The CertificateSigningRequest strategy.
pub struct CertificateSigningRequestStrategy;

fn conditions(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn cond_type(c: &Value) -> &str {
    c.get("type").and_then(Value::as_str).unwrap_or("")
}

fn of_type<'a>(obj: &'a Value, ty: &str) -> Vec<&'a Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| cond_type(c) == ty)
        .collect()
}

/// The decoded bytes of a `[]byte` field (base64 in JSON); `Err` for undecodable text.
fn bytes_of(obj: &Value, pointer: &str) -> Result<Vec<u8>, String> {
    match obj.pointer(pointer) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| format!("illegal base64 data: {e}")),
        Some(_) => Err("must be a base64 string".to_string()),
    }
}

/// Go's `%#v` of a `[]byte`.
fn go_bytes(b: &[u8]) -> String {
    if b.is_empty() {
        return "[]byte(nil)".to_string();
    }
    let items: Vec<String> = b.iter().map(|x| format!("0x{x:x}")).collect();
    format!("[]byte{{{}}}", items.join(", "))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `validateCertificate`: PEM CERTIFICATE blocks only, each parsing.
fn validate_certificate(pem_data: &[u8]) -> Result<(), String> {
    if pem_data.is_empty() {
        return Ok(());
    }
    let text = std::str::from_utf8(pem_data)
        .map_err(|_| "must contain at least one CERTIFICATE PEM block".to_string())?;
    let blocks = pem::parse_many(text).unwrap_or_default();
    if blocks.is_empty() {
        return Err("must contain at least one CERTIFICATE PEM block".to_string());
    }
    for block in blocks {
        if block.tag() != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {}",
                api::validation::go_quote(block.tag())
            ));
        }
        if block.headers().iter().next().is_some() {
            return Err("no PEM block headers are permitted".to_string());
        }
        use x509_parser::prelude::FromDer;
        x509_parser::certificate::X509Certificate::from_der(block.contents())
            .map_err(|e| format!("x509: malformed certificate: {e}"))?;
    }
    Ok(())
}

/// `ValidateSignerName` (core validation).
pub fn validate_signer_name(path: &str, signer: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if signer.is_empty() {
        errs.push(FieldError::required(path, ""));
        return errs;
    }
    let segments: Vec<&str> = signer.split('/').collect();
    if segments.len() != 2 {
        errs.push(FieldError::invalid(
            path,
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return errs;
    }
    let (domain, name) = (segments[0], segments[1]);
    if domain.len() > 253 {
        errs.push(FieldError::too_long(path, "may not be more than 253 bytes"));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for l in &labels {
        let e = api::validation::is_dns1123_label(l);
        if !e.is_empty() {
            for m in e {
                errs.push(FieldError::invalid(
                    path,
                    domain,
                    format!("validating label {}: {m}", api::validation::go_quote(l)),
                ));
            }
            break;
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            path,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    let max_path = 253usize.saturating_sub(domain.len()).saturating_sub(1);
    if name.len() > max_path {
        errs.push(FieldError::too_long(
            path,
            format!("may not be more than {max_path} bytes"),
        ));
    }
    for m in api::validation::is_dns1123_subdomain(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            format!(
                "validating component {}: {m}",
                api::validation::go_quote(name)
            ),
        ));
    }
    errs
}

/// What an update path may do (`certificateValidationOptions`).
#[derive(Default, Clone, Copy)]
struct Options {
    setting_approval: bool,
    setting_certificate: bool,
    both_approved_and_denied: bool,
    legacy_signer: bool,
    duplicate_conditions: bool,
    empty_condition_type: bool,
    arbitrary_certificate: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
}

fn has_duplicates(items: &[String]) -> bool {
    items
        .iter()
        .enumerate()
        .any(|(i, x)| items[..i].contains(x))
}

/// `getValidationOptions`: what the stored object already gets away with stays tolerated.
fn options(new: &Value, old: Option<&Value>) -> Options {
    let Some(old) = old else {
        return Options::default();
    };
    let types: Vec<String> = conditions(old)
        .iter()
        .map(|c| cond_type(c).to_string())
        .collect();
    let usages = strings(old.pointer("/spec/usages"));
    let old_cert = bytes_of(old, "/status/certificate").unwrap_or_default();
    let new_cert = bytes_of(new, "/status/certificate").unwrap_or_default();
    Options {
        both_approved_and_denied: types.iter().any(|t| t == APPROVED)
            && types.iter().any(|t| t == DENIED),
        legacy_signer: old.pointer("/spec/signerName").and_then(Value::as_str)
            == Some(LEGACY_UNKNOWN_SIGNER),
        duplicate_conditions: has_duplicates(&types),
        empty_condition_type: types.iter().any(String::is_empty),
        arbitrary_certificate: new_cert == old_cert || validate_certificate(&old_cert).is_err(),
        unknown_usages: usages.iter().any(|u| !VALID_USAGES.contains(&u.as_str())),
        duplicate_usages: has_duplicates(&usages),
        ..Options::default()
    }
}

fn validate(csr: &Value, opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match bytes_of(csr, "/spec/request") {
        Ok(request) => {
            if let Err(m) = crate::authn::signer::check_request(&request) {
                errs.push(FieldError {
                    field: "spec.request".into(),
                    kind: FieldErrorKind::Invalid,
                    message: m,
                    value: Some(go_bytes(&request)),
                });
            }
        }
        Err(m) => errs.push(FieldError::invalid_value(
            "spec.request",
            csr.pointer("/spec/request").unwrap_or(&Value::Null),
            m,
        )),
    }
    let usages = strings(csr.pointer("/spec/usages"));
    if usages.is_empty() {
        errs.push(FieldError::required("spec.usages", ""));
    }
    if !opts.unknown_usages {
        for (i, u) in usages.iter().enumerate() {
            if !VALID_USAGES.contains(&u.as_str()) {
                errs.push(FieldError::not_supported(
                    format!("spec.usages[{i}]"),
                    &json!(u),
                    VALID_USAGES,
                ));
            }
        }
    }
    if !opts.duplicate_usages {
        for (i, u) in usages.iter().enumerate() {
            if usages[..i].contains(u) {
                errs.push(FieldError::duplicate(
                    format!("spec.usages[{i}]"),
                    &json!(u),
                ));
            }
        }
    }
    let signer = csr
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !opts.legacy_signer && signer == LEGACY_UNKNOWN_SIGNER {
        errs.push(FieldError::invalid(
            "spec.signerName",
            signer,
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errs.extend(validate_signer_name("spec.signerName", signer));
    }
    if let Some(secs) = csr
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
    {
        if secs < 600 {
            errs.push(FieldError::invalid_value(
                "spec.expirationSeconds",
                &json!(secs),
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
    }
    errs.extend(validate_conditions(csr, opts));
    if !opts.arbitrary_certificate {
        let cert = bytes_of(csr, "/status/certificate").unwrap_or_default();
        if let Err(m) = validate_certificate(&cert) {
            errs.push(FieldError {
                field: "status.certificate".into(),
                kind: FieldErrorKind::Invalid,
                message: m,
                value: Some("\"<certificate data>\"".into()),
            });
        }
    }
    errs
}

fn validate_conditions(csr: &Value, opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in conditions(csr).iter().enumerate() {
        let path = format!("status.conditions[{i}]");
        let ty = cond_type(c);
        if !opts.empty_condition_type && ty.is_empty() {
            errs.push(FieldError::required(format!("{path}.type"), ""));
        }
        let status = c.get("status").and_then(Value::as_str).unwrap_or("");
        let allowed: &[&str] = if [APPROVED, DENIED, FAILED].contains(&ty) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            errs.push(FieldError::required(format!("{path}.status"), ""));
        } else if !allowed.contains(&status) {
            errs.push(FieldError::not_supported(
                format!("{path}.status"),
                &json!(status),
                allowed,
            ));
        }
        if !opts.both_approved_and_denied {
            let exclusive = match ty {
                APPROVED => {
                    approved = true;
                    denied
                }
                DENIED => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if exclusive {
                errs.push(FieldError::invalid(
                    format!("{path}.type"),
                    ty,
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !opts.duplicate_conditions {
            if seen.iter().any(|s| s == ty) {
                errs.push(FieldError::duplicate(format!("{path}.type"), &json!(ty)));
            }
            seen.push(ty.to_string());
        }
    }
    errs
}

/// Conditions compared without their timestamps' representation differences.
fn same_conditions(a: &[&Value], b: &[&Value]) -> bool {
    a == b
}

fn validate_update(new: &Value, old: &Value, mut opts: Options) -> Vec<FieldError> {
    let base = options(new, Some(old));
    opts = Options {
        setting_approval: opts.setting_approval,
        setting_certificate: opts.setting_certificate,
        ..base
    };
    let mut errs = validate(new, opts);
    for ty in [APPROVED, DENIED, FAILED] {
        if of_type(new, ty).len() < of_type(old, ty).len() {
            errs.push(FieldError::forbidden(
                "status.conditions",
                format!(
                    "updates may not remove a condition of type {}",
                    api::validation::go_quote(ty)
                ),
            ));
        }
    }
    if !opts.setting_approval {
        for ty in [APPROVED, DENIED] {
            let (o, n) = (of_type(old, ty), of_type(new, ty));
            if n.len() < o.len() {
                // reported above
            } else if n.len() > o.len() {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!(
                        "updates may not add a condition of type {}",
                        api::validation::go_quote(ty)
                    ),
                ));
            } else if !same_conditions(&o, &n) {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!(
                        "updates may not modify a condition of type {}",
                        api::validation::go_quote(ty)
                    ),
                ));
            }
        }
    }
    let old_cert = bytes_of(old, "/status/certificate").unwrap_or_default();
    let new_cert = bytes_of(new, "/status/certificate").unwrap_or_default();
    if new_cert != old_cert {
        if !opts.setting_certificate {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !old_cert.is_empty() {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
    errs
}

/// `ValidateCertificateSigningRequestApprovalUpdate`.
pub fn validate_approval_update(new: &Value, old: &Value) -> Vec<FieldError> {
    validate_update(
        new,
        old,
        Options {
            setting_approval: true,
            ..Options::default()
        },
    )
}

/// The approval strategy's `PrepareForUpdate`: only `status.conditions` (and the labels and
/// annotations of the metadata) come from `new`, everything else from the stored `old`; the
/// conditions' `status` defaults to `True` and missing timestamps are filled.
pub fn approval_update(new: &mut Value, old: &Value) {
    let conds = new
        .pointer("/status/conditions")
        .cloned()
        .unwrap_or(Value::Null);
    let mut merged = old.clone();
    for k in ["labels", "annotations"] {
        match new.pointer(&format!("/metadata/{k}")) {
            Some(v) => {
                if let Some(m) = api::meta::metadata_mut(&mut merged) {
                    m.insert(k.to_string(), v.clone());
                }
            }
            None => api::meta::remove(&mut merged, k),
        }
    }
    if !merged.get("status").is_some_and(Value::is_object) {
        merged["status"] = json!({});
    }
    match conds {
        Value::Null => {
            if let Some(s) = merged.get_mut("status").and_then(Value::as_object_mut) {
                s.remove("conditions");
            }
        }
        c => merged["status"]["conditions"] = c,
    }
    *new = merged;
    default_conditions(new);
    populate_condition_timestamps(new, Some(old));
}

/// `SetDefaults_CertificateSigningRequestCondition`: an empty status is `True`.
fn default_conditions(obj: &mut Value) {
    if let Some(cs) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in cs {
            if c.get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                if let Some(m) = c.as_object_mut() {
                    m.insert("status".into(), json!("True"));
                }
            }
        }
    }
}

/// `populateConditionTimestamps`: `lastUpdateTime` now when missing; `lastTransitionTime` kept
/// from an old condition of the same type and status, else now.
fn populate_condition_timestamps(new: &mut Value, old: Option<&Value>) {
    let now = api::meta::now_rfc3339();
    let old_conds = old.map(conditions).unwrap_or_default();
    if let Some(cs) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in cs {
            let Some(m) = c.as_object_mut() else { continue };
            if m.get("lastUpdateTime").is_none_or(Value::is_null) {
                m.insert("lastUpdateTime".into(), json!(now));
            }
            if m.get("lastTransitionTime").is_none_or(Value::is_null) {
                let ty = m.get("type").cloned();
                let st = m.get("status").cloned();
                let kept = old_conds
                    .iter()
                    .find(|o| o.get("type") == ty.as_ref() && o.get("status") == st.as_ref())
                    .and_then(|o| o.get("lastTransitionTime"))
                    .filter(|t| !t.is_null())
                    .cloned();
                m.insert("lastTransitionTime".into(), kept.unwrap_or(json!(now)));
            }
        }
    }
}

/// `extractCSRStatus` of the printer.
fn condition_cell(csr: &Value) -> String {
    let types: Vec<String> = conditions(csr)
        .iter()
        .map(|c| cond_type(c).to_string())
        .collect();
    let has = |t: &str| types.iter().any(|x| x == t);
    let mut s = if has(DENIED) {
        "Denied".to_string()
    } else if has(APPROVED) {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has(FAILED) {
        s.push_str(",Failed");
    }
    if csr
        .pointer("/status/certificate")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        s.push_str(",Issued");
    }
    s
}

impl Strategy for CertificateSigningRequestStrategy {
    fn name_validation(&self) -> api::validation::NameValidator {
        api::validation::name_is_path_segment
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // The requesting user: every request acts as the server's fixed identity.
        let user = crate::authn::UserInfo::admin();
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("username".into(), json!(user.username));
            spec.insert("groups".into(), json!(user.groups));
            spec.remove("uid");
            spec.remove("extra");
        }
    }

    fn initial_status(&self, _obj: &Value) -> Option<Value> {
        Some(json!({}))
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        validate(obj, options(obj, None))
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // Metadata only: spec here, status by the generic store.
        match old.get("spec") {
            Some(spec) => new["spec"] = spec.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("spec");
                }
            }
        }
    }

    /// `ValidateCertificateSigningRequestStatusUpdate` (a main update keeps spec and status, so
    /// only its metadata is checked by this).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update(
            new,
            old,
            Options {
                setting_certificate: true,
                ..Options::default()
            },
        )
    }

    fn canonicalize(&self, obj: &mut Value) {
        default_conditions(obj);
        populate_condition_timestamps(obj, None);
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            age_column(),
            column("SignerName", "string", "", "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`. If empty, it will be defaulted:\n 1. If it's a kubelet client certificate, it is assigned\n    \"kubernetes.io/kube-apiserver-client-kubelet\".\n 2. If it's a kubelet serving certificate, it is assigned\n    \"kubernetes.io/kubelet-serving\".\n 3. Otherwise, it is assigned \"kubernetes.io/legacy-unknown\".\nDistribution of trust for signers happens out of band. You can select on this field using `spec.signerName`.", 0),
            column("Requestor", "string", "", "Name of requestor", 0),
            column("RequestedDuration", "string", "", "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.\n\nThe v1.22+ in-tree implementations of the well-known Kubernetes signers will honor this field as long as the requested duration is not greater than the maximum duration they will honor per the --cluster-signing-duration CLI flag to the Kubernetes controller manager.\n\nCertificate signers may not honor this field for various reasons:\n\n  1. Old signer that is unaware of the field (such as the in-tree\n     implementations prior to v1.22)\n  2. Signer whose configured maximum is shorter than the requested duration\n  3. Signer whose configured minimum is longer than the requested duration\n\nThe minimum valid value for expirationSeconds is 600, i.e. 10 minutes.\n\nAs of v1.22, this field is beta and is controlled via the CSRDuration feature gate.", 0),
            column("Condition", "string", "", "State of the signing request", 0),
        ]
    }

    fn table_cells(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let s = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("<none>")
                .to_string()
        };
        let duration = obj
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .map(|secs| {
                api::duration::duration_short(std::time::Duration::from_secs(
                    u64::try_from(secs).unwrap_or(0),
                ))
            })
            .unwrap_or_else(|| "<none>".to_string());
        vec![
            json!(api::meta::name(obj).unwrap_or("")),
            age_cell(obj, now),
            json!(s("/spec/signerName")),
            json!(obj
                .pointer("/spec/username")
                .and_then(Value::as_str)
                .unwrap_or("")),
            json!(duration),
            json!(condition_cell(obj)),
        ]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "spec.signerName" => Some(
                obj.pointer("/spec/signerName")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            ),
            _ => None,
        }
    }
}
