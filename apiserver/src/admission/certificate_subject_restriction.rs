//! The `CertificateSubjectRestriction` admission plugin
//! (`plugin/pkg/admission/certificates/subjectrestriction`): a new CertificateSigningRequest for
//! the `kubernetes.io/kube-apiserver-client` signer may not ask for the `system:masters`
//! organization (group), whoever asks, so no client certificate of the cluster's own signer can
//! be `system:masters`. Validating; CSRs of other signers, updates and subresources are not
//! looked at. An unparsable request is refused with upstream's `unable to parse csr: ...`
//! (validation refuses it first in practice).

use base64::Engine as _;
use serde_json::Value;
use x509_parser::prelude::*;

use super::{Attributes, Operation, Plugin, CERTIFICATE_SUBJECT_RESTRICTION};
use crate::registry::{Forbidden, Objects};

/// The signer whose certificates authenticate to the apiserver.
const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
/// The group that may do everything.
const SYSTEM_MASTERS: &str = "system:masters";

/// The plugin.
pub struct CertificateSubjectRestriction;

/// The organizations of the subject of the PEM CSR `request`.
fn organizations(request: &[u8]) -> Result<Vec<String>, String> {
    const NOT_CSR: &str = "PEM block type must be CERTIFICATE REQUEST";
    let block = ::pem::parse(request).map_err(|_| NOT_CSR.to_string())?;
    if block.tag() != "CERTIFICATE REQUEST" {
        return Err(NOT_CSR.into());
    }
    let (_, csr) = X509CertificationRequest::from_der(block.contents())
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    Ok(csr
        .certification_request_info
        .subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect())
}

impl Plugin for CertificateSubjectRestriction {
    fn name(&self) -> &'static str {
        CERTIFICATE_SUBJECT_RESTRICTION
    }

    fn validate(
        &self,
        attrs: &Attributes<'_>,
        csr: &Value,
        _objects: &dyn Objects,
    ) -> Result<(), Forbidden> {
        if !attrs.is("certificates.k8s.io", "certificatesigningrequests")
            || !attrs.subresource.is_empty()
            || attrs.operation != Operation::Create
        {
            return Ok(());
        }
        let signer = csr.pointer("/spec/signerName").and_then(Value::as_str);
        if signer != Some(KUBE_APISERVER_CLIENT) {
            return Ok(());
        }
        let request = csr
            .pointer("/spec/request")
            .and_then(Value::as_str)
            .and_then(|r| base64::engine::general_purpose::STANDARD.decode(r).ok())
            .unwrap_or_default();
        let orgs =
            organizations(&request).map_err(|e| Forbidden(format!("unable to parse csr: {e}")))?;
        if orgs.iter().any(|o| o == SYSTEM_MASTERS) {
            return Err(Forbidden(format!(
                "use of {KUBE_APISERVER_CLIENT} signer with {SYSTEM_MASTERS} group is not allowed"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn csr_pem(orgs: &[&str]) -> String {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        for o in orgs {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn csr(signer: &str, orgs: &[&str]) -> Value {
        let request = base64::engine::general_purpose::STANDARD.encode(csr_pem(orgs));
        json!({"spec": {"signerName": signer, "request": request, "usages": ["client auth"]}})
    }

    fn attrs(operation: Operation) -> Attributes<'static> {
        Attributes {
            operation,
            group: "certificates.k8s.io",
            resource: "certificatesigningrequests",
            namespace: None,
            old: None,
            subresource: "",
            warnings: None,
            audit: None,
            user: None,
            authorizes: false,
        }
    }

    struct Nothing;
    impl Objects for Nothing {
        fn list(&self, _g: &str, _p: &str) -> Vec<std::sync::Arc<Value>> {
            Vec::new()
        }
        fn get(
            &self,
            _g: &str,
            _p: &str,
            _n: Option<&str>,
            _name: &str,
        ) -> Option<std::sync::Arc<Value>> {
            None
        }
    }

    #[test]
    fn system_masters_is_refused_for_the_apiserver_client_signer_only() {
        let p = CertificateSubjectRestriction;
        let create = attrs(Operation::Create);
        let masters = csr(KUBE_APISERVER_CLIENT, &["dev", "system:masters"]);
        assert_eq!(
            p.validate(&create, &masters, &Nothing),
            Err(Forbidden(
                "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed".into()
            ))
        );
        let dev = csr(KUBE_APISERVER_CLIENT, &["dev"]);
        assert_eq!(p.validate(&create, &dev, &Nothing), Ok(()));
        let other = csr("example.com/other", &["system:masters"]);
        assert_eq!(p.validate(&create, &other, &Nothing), Ok(()));
        assert_eq!(
            p.validate(&attrs(Operation::Update), &masters, &Nothing),
            Ok(())
        );
        let garbage = json!({"spec": {"signerName": KUBE_APISERVER_CLIENT, "request": "aGVsbG8="}});
        assert_eq!(
            p.validate(&create, &garbage, &Nothing),
            Err(Forbidden(
                "unable to parse csr: PEM block type must be CERTIFICATE REQUEST".into()
            ))
        );
    }
}
