//! CertificateSigningRequests: parsing a PEM CSR as upstream validation does
//! (`certificates.ParseCSR` + `CheckSignature`), and the `kubernetes.io/kube-apiserver-client`
//! signer of kube-controller-manager (`pkg/controller/certificates/signer`): an approved CSR of
//! that signer with valid client usages gets a certificate from the sandbox CA, valid for
//! `expirationSeconds` (default: a year, upstream's `--cluster-signing-duration`), never past
//! the CA; invalid usages fail it with upstream's `SignerValidationFailure` message.

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose,
    SanType, SerialNumber,
};
use x509_parser::prelude::*;

use super::credentials::Credentials;

/// The signer served here.
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

/// `--cluster-signing-duration` default.
pub const DEFAULT_DURATION_SECONDS: i64 = 365 * 24 * 3600;

/// Upstream's backdate of `notBefore` (clock skew).
const BACKDATE_SECONDS: i64 = 5 * 60;

/// The DER of the first PEM block of `request` if it is a `CERTIFICATE REQUEST`.
fn csr_der(request: &[u8]) -> Result<Vec<u8>, String> {
    const MSG: &str = "PEM block type must be CERTIFICATE REQUEST";
    let text = std::str::from_utf8(request).map_err(|_| MSG.to_string())?;
    // `pem.Decode`: the first block; text before it is skipped.
    let start = text.find("-----BEGIN ").ok_or_else(|| MSG.to_string())?;
    let block = ::pem::parse(&text[start..]).map_err(|_| MSG.to_string())?;
    if block.tag() != "CERTIFICATE REQUEST" {
        return Err(MSG.to_string());
    }
    Ok(block.into_contents())
}

/// Upstream's CSR check: a PEM `CERTIFICATE REQUEST` that parses and whose signature verifies.
/// `Err` is the message validation reports on `spec.request`.
pub fn check_request(request: &[u8]) -> Result<(), String> {
    let der = csr_der(request)?;
    let (_, csr) = X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    csr.verify_signature()
        .map_err(|_| "x509: ECDSA verification failure".to_string())
}

/// `validAPIServerClientUsages`.
pub fn check_client_usages(usages: &[String]) -> Result<(), String> {
    let mut client_auth = false;
    for u in usages {
        match u.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !client_auth {
        return Err("missing required usage for client certificate: client auth".to_string());
    }
    Ok(())
}

fn subject(name: &X509Name<'_>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for rdn in name.iter() {
        for attr in rdn.iter() {
            let Ok(value) = attr.as_str() else { continue };
            let oid = attr.attr_type();
            let ty = if *oid == x509_parser::oid_registry::OID_X509_COMMON_NAME {
                DnType::CommonName
            } else if *oid == x509_parser::oid_registry::OID_X509_ORGANIZATION_NAME {
                DnType::OrganizationName
            } else if *oid == x509_parser::oid_registry::OID_X509_ORGANIZATIONAL_UNIT {
                DnType::OrganizationalUnitName
            } else if *oid == x509_parser::oid_registry::OID_X509_COUNTRY_NAME {
                DnType::CountryName
            } else if *oid == x509_parser::oid_registry::OID_X509_STATE_OR_PROVINCE_NAME {
                DnType::StateOrProvinceName
            } else if *oid == x509_parser::oid_registry::OID_X509_LOCALITY_NAME {
                DnType::LocalityName
            } else {
                continue;
            };
            dn.push(ty, value);
        }
    }
    dn
}

fn usages(params: &mut CertificateParams, usages: &[String]) {
    for u in usages {
        match u.as_str() {
            "digital signature" => params.key_usages.push(KeyUsagePurpose::DigitalSignature),
            "content commitment" => params.key_usages.push(KeyUsagePurpose::ContentCommitment),
            "key encipherment" => params.key_usages.push(KeyUsagePurpose::KeyEncipherment),
            "key agreement" => params.key_usages.push(KeyUsagePurpose::KeyAgreement),
            "data encipherment" => params.key_usages.push(KeyUsagePurpose::DataEncipherment),
            "cert sign" => params.key_usages.push(KeyUsagePurpose::KeyCertSign),
            "crl sign" => params.key_usages.push(KeyUsagePurpose::CrlSign),
            "encipher only" => params.key_usages.push(KeyUsagePurpose::EncipherOnly),
            "decipher only" => params.key_usages.push(KeyUsagePurpose::DecipherOnly),
            "any" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::Any),
            "server auth" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth),
            "client auth" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth),
            "code signing" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::CodeSigning),
            "email protection" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::EmailProtection),
            "timestamping" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::TimeStamping),
            "ocsp signing" => params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::OcspSigning),
            _ => {}
        }
    }
}

/// Issues the certificate (PEM) of `request` with `key_usages`, valid for
/// `expiration_seconds` (or the default) from `now`, capped at the CA's expiry.
pub fn sign(
    creds: &Credentials,
    request: &[u8],
    key_usages: &[String],
    expiration_seconds: Option<i64>,
    now: ::time::OffsetDateTime,
) -> Result<String, String> {
    let der = csr_der(request)?;
    let (_, csr) = X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    let info = &csr.certification_request_info;
    let public_key = rcgen::SubjectPublicKeyInfo::from_der(info.subject_pki.raw)
        .map_err(|e| format!("unsupported public key: {e}"))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = subject(&info.subject);
    if let Some(extensions) = csr.requested_extensions() {
        for ext in extensions {
            if let ParsedExtension::SubjectAlternativeName(san) = ext {
                for name in &san.general_names {
                    let san = match name {
                        GeneralName::DNSName(d) => (*d).try_into().ok().map(SanType::DnsName),
                        GeneralName::RFC822Name(e) => (*e).try_into().ok().map(SanType::Rfc822Name),
                        GeneralName::URI(u) => (*u).try_into().ok().map(SanType::URI),
                        GeneralName::IPAddress(ip) => match ip.len() {
                            4 => <[u8; 4]>::try_from(*ip)
                                .ok()
                                .map(|b| SanType::IpAddress(std::net::IpAddr::from(b))),
                            16 => <[u8; 16]>::try_from(*ip)
                                .ok()
                                .map(|b| SanType::IpAddress(std::net::IpAddr::from(b))),
                            _ => None,
                        },
                        _ => None,
                    };
                    params.subject_alt_names.extend(san);
                }
            }
        }
    }
    usages(&mut params, key_usages);
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = true;
    let mut serial = [0u8; 16];
    rand::Rng::fill(&mut rand::thread_rng(), &mut serial[..]);
    serial[0] &= 0x7f;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    let ttl = expiration_seconds
        .map(|s| s.min(DEFAULT_DURATION_SECONDS))
        .unwrap_or(DEFAULT_DURATION_SECONDS);
    params.not_before = now - ::time::Duration::seconds(BACKDATE_SECONDS);
    let not_after = now + ::time::Duration::seconds(ttl);
    params.not_after = not_after.min(creds.ca_not_after());
    let (ca, ca_key) = creds.ca();
    params
        .signed_by(&public_key, ca, ca_key)
        .map(|c| c.pem())
        .map_err(|e| format!("signing: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::authn::credentials::DEFAULT_ISSUER;

    pub(crate) fn csr_pem(cn: &str) -> String {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cn);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "devs");
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    #[test]
    fn requests_are_checked_as_upstream() {
        assert!(check_request(csr_pem("jane").as_bytes()).is_ok());
        assert_eq!(
            check_request(b"hello").unwrap_err(),
            "PEM block type must be CERTIFICATE REQUEST"
        );
        let key = rcgen::KeyPair::generate().unwrap();
        assert_eq!(
            check_request(key.serialize_pem().as_bytes()).unwrap_err(),
            "PEM block type must be CERTIFICATE REQUEST"
        );
    }

    #[test]
    fn client_usages_follow_the_signer() {
        assert!(check_client_usages(&["client auth".into(), "digital signature".into()]).is_ok());
        assert_eq!(
            check_client_usages(&["server auth".into()]).unwrap_err(),
            "invalid usage for client certificate: server auth"
        );
        assert_eq!(
            check_client_usages(&["digital signature".into()]).unwrap_err(),
            "missing required usage for client certificate: client auth"
        );
    }

    #[test]
    fn signed_certificates_chain_to_the_ca_and_respect_the_duration() {
        let creds = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let now = ::time::OffsetDateTime::now_utc();
        let pem_cert = sign(
            &creds,
            csr_pem("jane").as_bytes(),
            &["client auth".into()],
            Some(3600),
            now,
        )
        .unwrap();
        let cert_der = ::pem::parse(&pem_cert).unwrap().into_contents();
        let (_, cert) = X509Certificate::from_der(&cert_der).unwrap();
        let ca_der = ::pem::parse(creds.ca_pem()).unwrap().into_contents();
        let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
        assert!(cert.verify_signature(Some(ca.public_key())).is_ok());
        assert_eq!(cert.issuer(), ca.subject());
        let cn: Vec<_> = cert.subject().iter_common_name().collect();
        assert_eq!(cn[0].as_str().unwrap(), "jane");
        let life = cert.validity().not_after.timestamp() - now.unix_timestamp();
        assert!((3599..=3601).contains(&life), "{life}");
    }
}
