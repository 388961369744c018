//! The server's signing material: the service-account token key (ES256, P-256) and the sandbox
//! CA that signs approved `kubernetes.io/kube-apiserver-client` CSRs. Generated once; with a
//! credentials directory they are kept there (`sa.key`, `ca.key`, `ca.crt`, keys mode 0600) and
//! read back at every start, so tokens and certificates stay valid across restarts; without one
//! (an in-memory sandbox) they live as long as the process.
//!
//! Upstream kube-apiserver takes `--service-account-key-file`/`--service-account-signing-key-file`
//! and the controller manager `--cluster-signing-cert-file`/`-key-file`; here there are no flags:
//! the files are the server's own.

use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256,
};
use serde_json::{json, Value};

/// The issuer (`iss`) of service-account tokens, and the default API audience: what kind and
/// kubeadm clusters configure with `--service-account-issuer`.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Why the signing material could not be loaded or generated.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A stored key or certificate does not parse, or generation failed.
    #[error("{what}: {message}")]
    Crypto {
        /// What was being done.
        what: String,
        /// The library's message.
        message: String,
    },
}

fn crypto(what: &str, e: impl std::fmt::Display) -> CredentialsError {
    CredentialsError::Crypto {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// The token key and the CA of one server.
pub struct Credentials {
    issuer: String,
    kid: String,
    jwk: Value,
    encoding: jsonwebtoken::EncodingKey,
    decoding: jsonwebtoken::DecodingKey,
    ca_key: KeyPair,
    ca_cert: rcgen::Certificate,
    ca_pem: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

const URL_SAFE: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

fn read_or_create(
    dir: Option<&Path>,
    file: &str,
    create: impl FnOnce() -> Result<String, CredentialsError>,
) -> Result<String, CredentialsError> {
    let Some(dir) = dir else {
        return create();
    };
    let path = dir.join(file);
    match std::fs::read_to_string(&path) {
        Ok(s) => return Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(CredentialsError::Io { path, source }),
    }
    let text = create()?;
    let io = |source| CredentialsError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    // Written to a temporary file and renamed: a crash never leaves half a key.
    let tmp = dir.join(format!(".{file}.tmp"));
    write_private(&tmp, &text).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok(text)
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

fn generate_key() -> Result<String, CredentialsError> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
        .map(|k| k.serialize_pem())
        .map_err(|e| crypto("generating a P-256 key", e))
}

/// Upstream's key id: base64url of the SHA-256 of the public key's PKIX DER
/// (`keyIDFromPublicKey`).
fn key_id(public_der: &[u8]) -> String {
    URL_SAFE.encode(ring::digest::digest(&ring::digest::SHA256, public_der))
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "minik8s-ca");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    // kubeadm's CA lifetime: ten years.
    params.not_after = now + time::Duration::days(3650);
    params
}

impl Credentials {
    /// Loads the material from `dir`, generating (and storing) what is missing; `None` keeps it
    /// in memory only.
    pub fn load_or_generate(dir: Option<&Path>, issuer: &str) -> Result<Self, CredentialsError> {
        let sa_pem = read_or_create(dir, "sa.key", generate_key)?;
        let sa_key = KeyPair::from_pem(&sa_pem).map_err(|e| crypto("reading sa.key", e))?;
        let ca_key_pem = read_or_create(dir, "ca.key", generate_key)?;
        let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|e| crypto("reading ca.key", e))?;
        let ca_pem = read_or_create(dir, "ca.crt", || {
            ca_params()
                .self_signed(&ca_key)
                .map(|c| c.pem())
                .map_err(|e| crypto("generating the CA certificate", e))
        })?;
        // The issuing form of the CA: its stored subject and validity over its key (signing a
        // certificate needs the issuer's name and key, not its stored signature).
        let ca_cert = CertificateParams::from_ca_cert_pem(&ca_pem)
            .and_then(|p| p.self_signed(&ca_key))
            .map_err(|e| crypto("reading ca.crt", e))?;

        let raw = sa_key.public_key_raw();
        // An uncompressed P-256 point: 0x04 || x (32 bytes) || y (32 bytes).
        if raw.len() != 65 || raw[0] != 4 {
            return Err(crypto("reading sa.key", "not an uncompressed P-256 key"));
        }
        let x = URL_SAFE.encode(&raw[1..33]);
        let y = URL_SAFE.encode(&raw[33..65]);
        let kid = key_id(&sa_key.public_key_der());
        let jwk = json!({
            "use": "sig",
            "kty": "EC",
            "kid": kid,
            "crv": "P-256",
            "alg": "ES256",
            "x": x,
            "y": y,
        });
        let encoding = jsonwebtoken::EncodingKey::from_ec_der(&sa_key.serialize_der());
        let decoding = jsonwebtoken::DecodingKey::from_ec_components(&x, &y)
            .map_err(|e| crypto("reading sa.key", e))?;
        Ok(Credentials {
            issuer: issuer.to_string(),
            kid,
            jwk,
            encoding,
            decoding,
            ca_key,
            ca_cert,
            ca_pem,
        })
    }

    /// The token issuer (`iss`), also the default audience.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The audiences a token gets when its request names none (`--api-audiences`, which
    /// defaults to the issuer).
    pub fn api_audiences(&self) -> Vec<String> {
        vec![self.issuer.clone()]
    }

    /// The signing key's id (`kid` of tokens and of the JWKS entry).
    pub fn key_id(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> &Value {
        &self.jwk
    }

    /// The token signing key.
    pub(crate) fn encoding_key(&self) -> &jsonwebtoken::EncodingKey {
        &self.encoding
    }

    /// The token verification key.
    pub(crate) fn decoding_key(&self) -> &jsonwebtoken::DecodingKey {
        &self.decoding
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA's issuing certificate and key.
    pub(crate) fn ca(&self) -> (&rcgen::Certificate, &KeyPair) {
        (&self.ca_cert, &self.ca_key)
    }

    /// The CA's `notAfter`.
    pub(crate) fn ca_not_after(&self) -> time::OffsetDateTime {
        self.ca_cert.params().not_after
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn material_is_kept_in_the_directory_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let a = Credentials::load_or_generate(Some(dir.path()), DEFAULT_ISSUER).unwrap();
        let b = Credentials::load_or_generate(Some(dir.path()), DEFAULT_ISSUER).unwrap();
        assert_eq!(a.key_id(), b.key_id());
        assert_eq!(a.jwk(), b.jwk());
        assert_eq!(a.ca_pem(), b.ca_pem());
        for f in ["sa.key", "ca.key", "ca.crt"] {
            assert!(dir.path().join(f).exists(), "{f}");
        }
        let c = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        assert_ne!(a.key_id(), c.key_id());
        assert_eq!(a.jwk()["kty"], "EC");
        assert_eq!(a.jwk()["alg"], "ES256");
    }

    #[test]
    fn a_corrupt_key_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("sa.key"), "not a key").unwrap();
        assert!(Credentials::load_or_generate(Some(dir.path()), DEFAULT_ISSUER).is_err());
    }
}
