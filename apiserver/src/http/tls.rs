//! HTTPS: the rustls configuration of a secure server and the client certificate a connection
//! presented.
//!
//! As kube-apiserver (`ClientAuth: tls.RequestClientCert`), the server asks every client for a
//! certificate but does not judge it during the handshake: the handshake only checks that the
//! client holds the key of the certificate it presented (the CertificateVerify signature). The
//! certificate's chain to the cluster CA, its validity period and its `clientAuth` usage are
//! checked afterwards by [`verify_client`], and the x509 authenticator answers 401 for a
//! certificate that fails — never a handshake error the client cannot read. TLS 1.2 and 1.3
//! only (rustls' safe defaults), ALPN `h2` then `http/1.1` (kubectl speaks HTTP/2 over TLS).
//!
//! What a connection presented travels to every request on it as a [`PeerCertificate`]
//! request extension, set once per connection after the handshake.

use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms,
};
use tokio_rustls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime,
};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use x509_parser::prelude::FromDer;

/// What the client of a connection presented, verified after the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerCertificate {
    /// A certificate of the cluster CA, valid now, for client authentication: its CN and Os.
    Verified {
        /// The CN.
        user: String,
        /// The Os.
        groups: Vec<String>,
        /// Its `notAfter` (Unix seconds): checked again by every request of the connection, as
        /// upstream verifies the chain per request.
        not_after: i64,
    },
    /// A certificate of the cluster CA, valid now, whose CN is empty: it names nobody, so the
    /// x509 authenticator has no opinion (`CommonNameUserConversion`) and the request goes on to
    /// the next authenticator, or is anonymous.
    Unnamed {
        /// Its `notAfter` (Unix seconds).
        not_after: i64,
    },
    /// A certificate that does not verify; the reason is logged, never sent.
    Rejected(String),
}

/// Asks for a client certificate, checks possession of its key, leaves the rest to
/// [`verify_client`].
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for RequestClientCert {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn der_of(pem_text: &str, what: &str) -> Result<Vec<u8>, String> {
    pem::parse(pem_text)
        .map(pem::Pem::into_contents)
        .map_err(|e| format!("{what}: {e}"))
}

/// The rustls configuration of a secure server: `serving_cert_pem`/`serving_key_pem` (PKCS#8) as
/// its identity, client certificates requested with `ca_pem`'s subject as the hint.
pub fn server_config(
    ca_pem: &str,
    serving_cert_pem: &str,
    serving_key_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let ca_der = der_of(ca_pem, "the CA certificate")?;
    let (_, ca) = x509_parser::certificate::X509Certificate::from_der(&ca_der)
        .map_err(|e| format!("the CA certificate: {e}"))?;
    let verifier = RequestClientCert {
        hints: vec![DistinguishedName::from(ca.subject().as_raw().to_vec())],
        algorithms: provider.signature_verification_algorithms,
    };
    let cert = CertificateDer::from(der_of(serving_cert_pem, "the serving certificate")?);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der_of(
        serving_key_pem,
        "the serving key",
    )?));
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(vec![cert], key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Verifies the end-entity certificate a client presented against the CA (`ca_der`): signed
/// by it, valid at `now` (Unix seconds), usable for client authentication; then the user it
/// names, if any.
pub fn verify_client(ca_der: &[u8], cert_der: &[u8], now: i64) -> PeerCertificate {
    let rejected = |why: &str| PeerCertificate::Rejected(why.to_string());
    let Ok((_, ca)) = x509_parser::certificate::X509Certificate::from_der(ca_der) else {
        return rejected("the CA certificate does not parse");
    };
    let Ok((_, cert)) = x509_parser::certificate::X509Certificate::from_der(cert_der) else {
        return rejected("x509: malformed certificate");
    };
    if cert.issuer() != ca.subject() || cert.verify_signature(Some(ca.public_key())).is_err() {
        return rejected("x509: certificate signed by unknown authority");
    }
    let validity = cert.validity();
    if now < validity.not_before.timestamp() || now > validity.not_after.timestamp() {
        return rejected("x509: certificate has expired or is not yet valid");
    }
    let client_auth = match cert.extended_key_usage() {
        Ok(Some(eku)) => eku.value.client_auth || eku.value.any,
        // Go's verifier with `ExtKeyUsageClientAuth` accepts a certificate without the extension.
        Ok(None) => true,
        Err(_) => false,
    };
    if !client_auth {
        return rejected("x509: certificate specifies an incompatible key usage");
    }
    let not_after = validity.not_after.timestamp();
    match crate::authn::pki::user_of_certificate(&cert) {
        Some((user, groups)) => PeerCertificate::Verified {
            user,
            groups,
            not_after,
        },
        None => PeerCertificate::Unnamed { not_after },
    }
}

/// Serves one accepted TCP connection of a secure server: the TLS handshake, bounded by the
/// header-read deadline (a client that stalls it is closed), then HTTP/1.1 or h2 as ALPN chose,
/// every request carrying the connection's [`PeerCertificate`]. On `shutdown` the connection
/// finishes its in-flight requests and closes.
pub async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    router: axum::Router,
    security: &crate::authn::Security,
    header_timeout: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let acceptor = tokio_rustls::TlsAcceptor::from(security.tls.clone());
    let tls = tokio::select! {
        _ = shutdown.cancelled() => return,
        r = tokio::time::timeout(header_timeout, acceptor.accept(stream)) => match r {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
    };
    let presented = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| {
            verify_client(
                &security.ca_der,
                cert.as_ref(),
                crate::authn::authenticator::now(),
            )
        });
    let service = tower::ServiceExt::map_request(
        router,
        move |mut req: axum::http::Request<hyper::body::Incoming>| {
            if let Some(p) = &presented {
                req.extensions_mut().insert(p.clone());
            }
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            req
        },
    );
    let service = hyper_util::service::TowerToHyperService::new(service);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended with error");
            }
        }
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended with error during shutdown");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::authn::credentials::{Credentials, DEFAULT_ISSUER};
    use crate::authn::pki;

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    #[test]
    fn only_client_certificates_of_the_cluster_ca_verify() {
        let creds = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let other = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let ca = der_of(creds.ca_pem(), "ca").unwrap();
        let mine = pki::client(&creds, "alice", &["devs".to_string()]).unwrap();
        let mine = der_of(&mine.cert_pem, "cert").unwrap();
        let verified = verify_client(&ca, &mine, now());
        let PeerCertificate::Verified {
            user,
            groups,
            not_after,
        } = &verified
        else {
            panic!("{verified:?}");
        };
        assert_eq!(
            (user.as_str(), groups.as_slice()),
            ("alice", &["devs".to_string()][..])
        );
        // A year from now, give or take the test's second.
        assert!((not_after - now() - 365 * 86400).abs() <= 5, "{not_after}");
        let foreign = pki::client(&other, "alice", &["system:masters".to_string()]).unwrap();
        let foreign = der_of(&foreign.cert_pem, "cert").unwrap();
        assert!(matches!(
            verify_client(&ca, &foreign, now()),
            PeerCertificate::Rejected(_)
        ));
        assert!(matches!(
            verify_client(&ca, b"garbage", now()),
            PeerCertificate::Rejected(_)
        ));
        // A serving certificate is not for client authentication.
        let serving = pki::serving(&creds, &[]).unwrap();
        let serving = der_of(&serving.cert_pem, "cert").unwrap();
        assert!(matches!(
            verify_client(&ca, &serving, now()),
            PeerCertificate::Rejected(_)
        ));
        // Verified, but with an empty CN: nobody.
        let unnamed = pki::client(&creds, "", &["devs".to_string()]).unwrap();
        let unnamed = der_of(&unnamed.cert_pem, "cert").unwrap();
        assert!(matches!(
            verify_client(&ca, &unnamed, now()),
            PeerCertificate::Unnamed { .. }
        ));
        // Expired: a year and a day later.
        assert!(matches!(
            verify_client(&ca, &mine, now() + 366 * 86400),
            PeerCertificate::Rejected(_)
        ));
    }

    #[test]
    fn the_server_configuration_offers_h2_and_http1() {
        let creds = Credentials::load_or_generate(None, DEFAULT_ISSUER).unwrap();
        let serving = pki::serving(&creds, &[]).unwrap();
        let config = server_config(creds.ca_pem(), &serving.cert_pem, &serving.key_pem).unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }
}
