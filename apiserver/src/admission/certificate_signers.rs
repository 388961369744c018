//! The `CertificateApproval` and `CertificateSigning` admission plugins
//! (`plugin/pkg/admission/certificates/approval` and `signing`): who may approve or sign a
//! CertificateSigningRequest is decided per signer. Approving (an update of
//! `certificatesigningrequests/approval`) needs the `approve` verb, and signing (an update of
//! `certificatesigningrequests/status` that changes `status.certificate` or
//! `status.conditions`) the `sign` verb, on the synthetic resource `signers` of
//! `certificates.k8s.io` named after the request's `spec.signerName`, or else on its domain
//! wildcard (`kubernetes.io/*` for `kubernetes.io/kube-apiserver-client`), as upstream's
//! `IsAuthorizedForSignerName`. The signer name is read from the stored (old) object, so a
//! request cannot rename its signer to get in.
//!
//! Both are validating and ask the apiserver's authorizer ([`crate::authz::authorize`], over
//! the same objects admission reads). A server that does not authorize (no authentication:
//! upstream's `AlwaysAllow`) and server-internal writes (no user: the built-in signer, as
//! upstream's loopback `system:masters` client) are let through.

use serde_json::Value;

use super::{Attributes, Operation, Plugin, CERTIFICATE_APPROVAL, CERTIFICATE_SIGNING};
use crate::authz;
use crate::registry::{Forbidden, Objects};

const GROUP: &str = "certificates.k8s.io";
const RESOURCE: &str = "certificatesigningrequests";

/// `CertificateApproval`.
pub struct CertificateApproval;

/// `CertificateSigning`.
pub struct CertificateSigning;

/// Whether the request's user may `verb` the signer `signer_name`, or its `domain/*` wildcard.
fn authorized_for_signer(
    attrs: &Attributes<'_>,
    objects: &dyn Objects,
    verb: &str,
    signer_name: &str,
) -> bool {
    let Some(user) = attrs.user.filter(|_| attrs.authorizes) else {
        return true;
    };
    let on = |name: String| authz::Attributes {
        user: user.clone(),
        verb: verb.to_string(),
        resource_request: true,
        api_group: GROUP.to_string(),
        resource: "signers".to_string(),
        name,
        ..Default::default()
    };
    if authz::authorize(objects, &on(signer_name.to_string())).allowed {
        return true;
    }
    let domain = signer_name.split('/').next().unwrap_or_default();
    authz::authorize(objects, &on(format!("{domain}/*"))).allowed
}

/// The stored CSR an update of `subresource` replaces, if this request is one.
fn old_csr<'a>(attrs: &Attributes<'a>, subresource: &str) -> Option<Result<&'a Value, Forbidden>> {
    if attrs.operation != Operation::Update
        || attrs.subresource != subresource
        || !attrs.is(GROUP, RESOURCE)
    {
        return None;
    }
    Some(attrs.old.ok_or_else(|| {
        Forbidden("expected type CertificateSigningRequest, got: <nil>".to_string())
    }))
}

/// `bytes.Equal` of the two `status.certificate`s: compared decoded, so a re-encoding of the
/// same bytes (line breaks in the base64, as Go's decoder ignores them) or absent against empty
/// is no change.
fn same_certificate(old: &Value, new: &Value) -> bool {
    use base64::Engine;
    let bytes = |csr: &Value| -> Option<Vec<u8>> {
        let text = match csr.pointer("/status/certificate") {
            None | Some(Value::Null) => return Some(Vec::new()),
            Some(Value::String(s)) => s.replace(['\r', '\n'], ""),
            Some(_) => return None,
        };
        base64::engine::general_purpose::STANDARD.decode(text).ok()
    };
    match (bytes(old), bytes(new)) {
        (Some(a), Some(b)) => a == b,
        // Not base64 (the write is refused when decoded): compared as written.
        _ => old.pointer("/status/certificate") == new.pointer("/status/certificate"),
    }
}

/// `apiequality.Semantic.DeepEqual` of the two `status.conditions`: absent, null and empty lists
/// are equal, so are an empty string and an absent field (both Go's zero value), and times
/// that name the same instant.
fn same_conditions(old: &Value, new: &Value) -> bool {
    fn typed(csr: &Value) -> Option<Value> {
        let conditions = csr.pointer("/status/conditions")?.as_array()?;
        let typed = conditions.iter().map(|c| {
            let Some(fields) = c.as_object() else {
                return c.clone();
            };
            let kept = fields.iter().filter_map(|(k, v)| match v {
                Value::Null => None,
                Value::String(s) if s.is_empty() => None,
                Value::String(s) if k.ends_with("Time") => {
                    let instant = s.parse::<jiff::Timestamp>().map(|t| t.to_string());
                    Some((
                        k.clone(),
                        Value::String(instant.unwrap_or_else(|_| s.clone())),
                    ))
                }
                _ => Some((k.clone(), v.clone())),
            });
            Value::Object(kept.collect())
        });
        Some(Value::Array(typed.collect()))
    }
    crate::registry::strategy::semantically_equal(typed(old).as_ref(), typed(new).as_ref())
}

fn signer_name(csr: &Value) -> &str {
    csr.pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl Plugin for CertificateApproval {
    fn name(&self) -> &'static str {
        CERTIFICATE_APPROVAL
    }

    fn handles_subresources(&self) -> bool {
        true
    }

    fn validate(
        &self,
        attrs: &Attributes<'_>,
        _csr: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        let Some(old) = old_csr(attrs, "approval") else {
            return Ok(());
        };
        let signer = signer_name(old?);
        if authorized_for_signer(attrs, objects, "approve", signer) {
            return Ok(());
        }
        Err(Forbidden(format!(
            "user not permitted to approve requests with signerName {signer:?}"
        )))
    }
}

impl Plugin for CertificateSigning {
    fn name(&self) -> &'static str {
        CERTIFICATE_SIGNING
    }

    fn handles_subresources(&self) -> bool {
        true
    }

    fn validate(
        &self,
        attrs: &Attributes<'_>,
        csr: &Value,
        objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        let Some(old) = old_csr(attrs, "status") else {
            return Ok(());
        };
        let old = old?;
        if same_certificate(old, csr) && same_conditions(old, csr) {
            return Ok(());
        }
        let signer = signer_name(old);
        if authorized_for_signer(attrs, objects, "sign", signer) {
            return Ok(());
        }
        Err(Forbidden(format!(
            "user not permitted to sign requests with signerName {signer:?}"
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::admission::tests_support::{attrs, Fixed, Nothing};
    use crate::authn::UserInfo;

    const RBAC: &str = "rbac.authorization.k8s.io";

    fn csr(signer: &str, status: Value) -> Value {
        json!({"metadata": {"name": "req"}, "spec": {"signerName": signer}, "status": status})
    }

    /// `alice` may `verb` the signers named `names`.
    fn grants(verb: &str, names: &[&str]) -> Fixed {
        Fixed(vec![
            (
                RBAC,
                "clusterroles",
                json!({"metadata": {"name": "signer"}, "rules": [{
                    "apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                    "resourceNames": names, "verbs": [verb],
                }]}),
            ),
            (
                RBAC,
                "clusterrolebindings",
                json!({"metadata": {"name": "signer"},
                    "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "signer"},
                    "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "alice"}]}),
            ),
        ])
    }

    fn alice() -> UserInfo {
        UserInfo {
            username: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }
    }

    fn update<'a>(sub: &'static str, old: &'a Value, user: &'a UserInfo) -> Attributes<'a> {
        Attributes {
            old: Some(old),
            user: Some(user),
            authorizes: true,
            ..attrs(Operation::Update, GROUP, RESOURCE, sub)
        }
    }

    #[test]
    fn approving_needs_approve_on_the_signer_or_its_domain() {
        let old = csr("example.com/a", json!({}));
        let new = csr(
            "example.com/a",
            json!({"conditions": [{"type": "Approved"}]}),
        );
        let user = alice();
        let a = update("approval", &old, &user);
        let p = CertificateApproval;
        assert_eq!(
            p.validate(&a, &new, &Nothing),
            Err(Forbidden(
                "user not permitted to approve requests with signerName \"example.com/a\"".into()
            ))
        );
        assert_eq!(
            p.validate(&a, &new, &grants("approve", &["example.com/a"])),
            Ok(())
        );
        assert_eq!(
            p.validate(&a, &new, &grants("approve", &["example.com/*"])),
            Ok(())
        );
        assert!(p
            .validate(&a, &new, &grants("approve", &["example.com/b"]))
            .is_err());
        assert!(p
            .validate(&a, &new, &grants("sign", &["example.com/a"]))
            .is_err());
        // The old object's signer counts, not the one the request asks for.
        let renamed = csr("example.com/b", json!({}));
        assert!(p
            .validate(&a, &renamed, &grants("approve", &["example.com/b"]))
            .is_err());
    }

    #[test]
    fn signing_needs_sign_only_when_the_certificate_or_conditions_change() {
        let old = csr(
            "example.com/a",
            json!({"conditions": [{"type": "Approved"}]}),
        );
        let user = alice();
        let a = update("status", &old, &user);
        let p = CertificateSigning;
        let signed = csr(
            "example.com/a",
            json!({"conditions": [{"type": "Approved"}], "certificate": "Y2VydA=="}),
        );
        assert_eq!(
            p.validate(&a, &signed, &Nothing),
            Err(Forbidden(
                "user not permitted to sign requests with signerName \"example.com/a\"".into()
            ))
        );
        assert_eq!(
            p.validate(&a, &signed, &grants("sign", &["example.com/*"])),
            Ok(())
        );
        let failed = csr(
            "example.com/a",
            json!({"conditions": [{"type": "Approved"}, {"type": "Failed"}]}),
        );
        assert!(p.validate(&a, &failed, &Nothing).is_err());
        // Nothing the signer owns changed: no check.
        assert_eq!(p.validate(&a, &old.clone(), &Nothing), Ok(()));

        // A no-op status update that re-encodes what is stored: the same certificate bytes (line
        // breaks in the base64), an empty reason, the same instant in another zone.
        let stored = csr(
            "example.com/a",
            json!({"certificate": "Y2VydGlmaWNhdGU=", "conditions": [{"type": "Approved",
                "status": "True", "lastUpdateTime": "2026-01-01T00:00:00Z"}]}),
        );
        let a = update("status", &stored, &user);
        let reencoded = csr(
            "example.com/a",
            json!({"certificate": "Y2VydGlm\naWNhdGU=", "conditions": [{"type": "Approved",
                "status": "True", "reason": "", "lastUpdateTime": "2026-01-01T01:00:00+01:00"}]}),
        );
        assert_eq!(p.validate(&a, &reencoded, &Nothing), Ok(()));
        // Other bytes are a signing.
        let resigned = csr(
            "example.com/a",
            json!({"certificate": "b3RoZXI=", "conditions": [{"type": "Approved",
                "status": "True", "lastUpdateTime": "2026-01-01T00:00:00Z"}]}),
        );
        assert!(p.validate(&a, &resigned, &Nothing).is_err());
        // Absent conditions and an empty list are the same.
        let bare = csr("example.com/a", json!({}));
        let empty = csr("example.com/a", json!({"conditions": []}));
        let a = update("status", &bare, &user);
        assert_eq!(p.validate(&a, &empty, &Nothing), Ok(()));
    }

    #[test]
    fn other_requests_unauthorizing_servers_and_internal_writes_pass() {
        let old = csr("example.com/a", json!({}));
        let new = csr("example.com/a", json!({"certificate": "Y2VydA=="}));
        let user = alice();
        let p = CertificateSigning;
        let q = CertificateApproval;
        // Approval is not signing and the reverse.
        assert_eq!(
            p.validate(&update("approval", &old, &user), &new, &Nothing),
            Ok(())
        );
        assert_eq!(
            q.validate(&update("status", &old, &user), &new, &Nothing),
            Ok(())
        );
        assert_eq!(q.validate(&update("", &old, &user), &new, &Nothing), Ok(()));
        // No authorization on this server, or no user (the built-in signer).
        let plain = Attributes {
            authorizes: false,
            ..update("status", &old, &user)
        };
        assert_eq!(p.validate(&plain, &new, &Nothing), Ok(()));
        let internal = Attributes {
            user: None,
            ..update("status", &old, &user)
        };
        assert_eq!(p.validate(&internal, &new, &Nothing), Ok(()));
        // system:masters may do everything.
        let admin = UserInfo::admin();
        assert_eq!(
            p.validate(&update("status", &old, &admin), &new, &Nothing),
            Ok(())
        );
    }
}
