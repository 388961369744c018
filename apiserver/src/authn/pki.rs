//! Certificates the cluster CA issues for its own use: the apiserver's serving certificate and
//! client certificates (the admin kubeconfig's `O=system:masters`, the components' identities,
//! `minik8s kubeconfig --user`, `Sandbox::add_user`).
//!
//! A client certificate names its user in the subject's CN and its groups in one O attribute per
//! group, as kube-apiserver's x509 authenticator reads them (`CommonNameUserConversion`). rcgen
//! keeps one value per attribute type, so a subject with several O attributes is written here in
//! DER and put in place of rcgen's single-valued one before the certificate is signed again with
//! the CA's key (ECDSA P-256 with SHA-256, the CA's algorithm).
//!
//! Lifetimes follow kubeadm: a serving or client certificate is valid for one year, never past
//! the CA's expiry, and is backdated five minutes for clock skew.

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber, PKCS_ECDSA_P256_SHA256,
};
use x509_parser::prelude::FromDer;

use super::credentials::Credentials;

/// kubeadm's `CertificateValidity`: one year.
const VALIDITY_DAYS: i64 = 365;
/// Backdating against clock skew (the CSR signer's `BACKDATE_SECONDS` is the same five minutes).
const BACKDATE_MINUTES: i64 = 5;

/// A certificate and its private key, both PEM (the key PKCS#8, readable by rustls, Go and
/// OpenSSL).
#[derive(Clone)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// The private key.
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").finish_non_exhaustive()
    }
}

fn base_params(creds: &Credentials) -> CertificateParams {
    let mut params = CertificateParams::default();
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(BACKDATE_MINUTES);
    params.not_after = (now + time::Duration::days(VALIDITY_DAYS)).min(creds.ca_not_after());
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = true;
    let mut serial = [0u8; 16];
    rand::Rng::fill(&mut rand::thread_rng(), &mut serial[..]);
    serial[0] &= 0x7f;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    params
}

/// The serving certificate of the apiserver for `hosts` (DNS names or IP addresses), with the
/// in-cluster names of the `kubernetes` Service as kubeadm adds them.
pub fn serving(creds: &Credentials, hosts: &[String]) -> Result<Issued, String> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let mut params = base_params(creds);
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "kube-apiserver");
    params.distinguished_name = dn;
    let mut names: Vec<String> = vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        "kubernetes.default.svc.cluster.local".into(),
    ];
    for h in hosts {
        if !h.is_empty() && !names.contains(h) {
            names.push(h.clone());
        }
    }
    for name in names {
        let san = match name.parse::<std::net::IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(name.try_into().map_err(|e| format!("{e}"))?),
        };
        params.subject_alt_names.push(san);
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let (ca, ca_key) = creds.ca();
    let cert = params
        .signed_by(&key, ca, ca_key)
        .map_err(|e| e.to_string())?;
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A client certificate for `user` in `groups` (`CN=<user>`, one `O=` per group).
pub fn client(creds: &Credentials, user: &str, groups: &[String]) -> Result<Issued, String> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let mut params = base_params(creds);
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, user);
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let (ca, ca_key) = creds.ca();
    let cert = params
        .signed_by(&key, ca, ca_key)
        .map_err(|e| e.to_string())?;
    let der = with_subject(cert.der(), &subject_der(user, groups), ca_key)?;
    Ok(Issued {
        cert_pem: pem::encode(&pem::Pem::new("CERTIFICATE", der)),
        key_pem: key.serialize_pem(),
    })
}

/// DER length octets.
fn der_len(len: usize, out: &mut Vec<u8>) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let bytes = len.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    out.push(0x80 | (bytes.len() - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

fn der_tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    der_len(content.len(), &mut out);
    out.extend_from_slice(content);
    out
}

/// `SEQUENCE { SET { SEQUENCE { O, UTF8String } } ... , SET { SEQUENCE { CN, UTF8String } } }`,
/// groups first, as kubeadm's `O=system:masters, CN=kubernetes-admin`.
fn subject_der(user: &str, groups: &[String]) -> Vec<u8> {
    const OID_O: [u8; 5] = [0x06, 0x03, 0x55, 0x04, 0x0a];
    const OID_CN: [u8; 5] = [0x06, 0x03, 0x55, 0x04, 0x03];
    let rdn = |oid: &[u8], value: &str| {
        let mut atv = oid.to_vec();
        atv.extend(der_tlv(0x0c, value.as_bytes()));
        der_tlv(0x31, &der_tlv(0x30, &atv))
    };
    let mut rdns = Vec::new();
    for g in groups {
        rdns.extend(rdn(&OID_O, g));
    }
    rdns.extend(rdn(&OID_CN, user));
    der_tlv(0x30, &rdns)
}

/// `cert` with its subject replaced by `subject`, signed again by `ca_key`.
fn with_subject(cert: &[u8], subject: &[u8], ca_key: &KeyPair) -> Result<Vec<u8>, String> {
    let (_, parsed) = x509_parser::certificate::X509Certificate::from_der(cert)
        .map_err(|e| format!("re-reading the certificate: {e}"))?;
    let tbs = parsed.tbs_certificate.as_ref();
    let old = parsed.tbs_certificate.subject.as_raw();
    // Both slices borrow `cert`: the subject's offset within the TBS is their distance.
    let start = (old.as_ptr() as usize)
        .checked_sub(tbs.as_ptr() as usize)
        .filter(|s| s + old.len() <= tbs.len())
        .ok_or("subject outside the certificate body")?;
    // The TBS's own header (tag and length) comes first; its contents follow.
    let header = header_len(tbs)?;
    if start < header {
        return Err("subject inside the certificate header".into());
    }
    let mut body = tbs[header..start].to_vec();
    body.extend_from_slice(subject);
    body.extend_from_slice(&tbs[start + old.len()..]);
    let new_tbs = der_tlv(0x30, &body);
    let rng = ring::rand::SystemRandom::new();
    let signer = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
        &ca_key.serialize_der(),
        &rng,
    )
    .map_err(|e| format!("reading the CA key: {e}"))?;
    let signature = signer
        .sign(&rng, &new_tbs)
        .map_err(|e| format!("signing: {e}"))?;
    // `SEQUENCE { ecdsa-with-SHA256 }` (1.2.840.10045.4.3.2, no parameters): the CA's key is
    // P-256, so rcgen signed with it too.
    const ECDSA_WITH_SHA256: [u8; 12] = [
        0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
    ];
    if parsed.signature_algorithm.algorithm.to_id_string() != "1.2.840.10045.4.3.2" {
        return Err("the CA does not sign with ecdsa-with-SHA256".into());
    }
    let algorithm = ECDSA_WITH_SHA256.to_vec();
    let mut bits = vec![0u8];
    bits.extend_from_slice(signature.as_ref());
    let mut out = new_tbs;
    out.extend(algorithm);
    out.extend(der_tlv(0x03, &bits));
    Ok(der_tlv(0x30, &out))
}

/// The length of a DER element's tag and length octets.
fn header_len(der: &[u8]) -> Result<usize, String> {
    match der.get(1) {
        Some(b) if *b < 0x80 => Ok(2),
        Some(b) => Ok(2 + (*b & 0x7f) as usize),
        None => Err("truncated DER".into()),
    }
}

/// The user a verified client certificate names: CN and every O, as upstream's
/// `CommonNameUserConversion` (a certificate without a CN authenticates nobody).
pub fn user_of(cert_der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(cert_der).ok()?;
    user_of_certificate(&cert)
}

/// [`user_of`] a certificate already parsed.
pub fn user_of_certificate(
    cert: &x509_parser::certificate::X509Certificate<'_>,
) -> Option<(String, Vec<String>)> {
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some((user, groups))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::authn::credentials::DEFAULT_ISSUER;

    #[test]
    fn client_certificates_carry_every_group_and_verify_against_the_ca() {
        let creds = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let groups = vec!["system:masters".to_string(), "devs".to_string()];
        let issued = client(&creds, "alice", &groups).unwrap();
        let der = pem::parse(&issued.cert_pem).unwrap().into_contents();
        assert_eq!(user_of(&der), Some(("alice".to_string(), groups.clone())));
        let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&der).unwrap();
        let ca_der = pem::parse(creds.ca_pem()).unwrap().into_contents();
        let (_, ca) = x509_parser::certificate::X509Certificate::from_der(&ca_der).unwrap();
        cert.verify_signature(Some(ca.public_key())).unwrap();
        assert_eq!(cert.issuer(), ca.subject());

        let other = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let other_der = pem::parse(other.ca_pem()).unwrap().into_contents();
        let (_, other) = x509_parser::certificate::X509Certificate::from_der(&other_der).unwrap();
        assert!(cert.verify_signature(Some(other.public_key())).is_err());
    }

    #[test]
    fn a_user_without_groups_has_none() {
        let creds = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let issued = client(&creds, "bob", &[]).unwrap();
        let der = pem::parse(&issued.cert_pem).unwrap().into_contents();
        assert_eq!(user_of(&der), Some(("bob".to_string(), vec![])));
    }

    #[test]
    fn serving_certificates_name_loopback_and_the_advertised_host() {
        let creds = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let issued = serving(&creds, &["10.1.2.3".to_string()]).unwrap();
        let der = pem::parse(&issued.cert_pem).unwrap().into_contents();
        let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&der).unwrap();
        let san = cert.subject_alternative_name().unwrap().unwrap();
        let text = format!("{:?}", san.value.general_names);
        assert!(text.contains("localhost"), "{text}");
        assert!(text.contains("[10, 1, 2, 3]"), "{text}");
        assert!(text.contains("[127, 0, 0, 1]"), "{text}");
    }
}
