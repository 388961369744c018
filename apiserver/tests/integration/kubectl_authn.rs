//! The real `/usr/bin/kubectl` against an in-process apiserver: `kubectl create token`,
//! `kubectl auth whoami` and `kubectl auth can-i` (protobuf bodies), `kubectl certificate
//! approve|deny` of CertificateSigningRequests with kubectl's columns, and `kubectl get
//! apiservices`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use base64::Engine;
use common::{blocking, Kube};

fn row<'a>(out: &'a str, first: &str) -> Vec<&'a str> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row {first} in:\n{out}"))
}

fn header(out: &str) -> Vec<&str> {
    out.lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect()
}

fn claims(token: &str) -> serde_json::Value {
    let part = token.trim().split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn csr_pem(cn: &str) -> String {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_identity_and_access_reviews_with_kubectl() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        k.ok(&["create", "serviceaccount", "default"]);
        let token = k.ok(&["create", "token", "default"]);
        let c = claims(&token);
        assert_eq!(c["sub"], "system:serviceaccount:default:default", "{c}");
        assert_eq!(
            c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
            3600
        );
        let token = k.ok(&[
            "create",
            "token",
            "default",
            "--duration=2h",
            "--audience=vault",
        ]);
        let c = claims(&token);
        assert_eq!(c["aud"], serde_json::json!(["vault"]));
        assert_eq!(
            c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
            7200
        );
        let (ok, _, err) = k.run(&["create", "token", "default", "--duration=5m"]);
        assert!(!ok, "{err}");
        assert!(
            err.contains("may not specify a duration less than 10 minutes"),
            "{err}"
        );
        let (ok, _, err) = k.run(&["create", "token", "nobody"]);
        assert!(
            !ok && err.contains("serviceaccounts \"nobody\" not found"),
            "{err}"
        );

        let out = k.ok(&["auth", "whoami"]);
        assert_eq!(header(&out), ["ATTRIBUTE", "VALUE"], "{out}");
        assert_eq!(row(&out, "Username")[1], "system:admin", "{out}");
        assert!(
            out.contains("[system:masters system:authenticated]"),
            "{out}"
        );
        let out = k.ok(&[
            "auth",
            "whoami",
            "--as=jane",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ]);
        assert_eq!(out, "jane");

        let out = k.ok(&["auth", "can-i", "create", "pods"]);
        assert_eq!(out.trim(), "yes");
        let (ok, out, _) = k.run(&[
            "auth",
            "can-i",
            "list",
            "secrets",
            "--as=system:serviceaccount:default:default",
        ]);
        assert!(!ok, "{out}");
        assert_eq!(out.trim(), "no");
        let out = k.ok(&[
            "auth",
            "can-i",
            "get",
            "/version",
            "--as=system:serviceaccount:default:default",
        ]);
        assert_eq!(out.trim(), "yes");
        k.ok(&[
            "create",
            "rolebinding",
            "sa-view",
            "--clusterrole=view",
            "--serviceaccount=default:default",
        ]);
        let out = k.ok(&[
            "auth",
            "can-i",
            "list",
            "pods",
            "--as=system:serviceaccount:default:default",
        ]);
        assert_eq!(out.trim(), "yes");
        let (ok, out, _) = k.run(&[
            "auth",
            "can-i",
            "list",
            "pods",
            "-n",
            "kube-system",
            "--as=system:serviceaccount:default:default",
        ]);
        assert!(!ok && out.trim() == "no", "{out}");
        let out = k.ok(&["auth", "can-i", "--list"]);
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some("*.*")),
            "{out}"
        );
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_signing_requests_and_apiservices_with_kubectl() {
    let server = common::start().await;
    let k = Kube::new(&server.url());
    blocking(move || {
        let request = base64::engine::general_purpose::STANDARD.encode(csr_pem("jane"));
        let manifest = |name: &str, usages: &str| {
            format!(
                "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {request}\n  signerName: kubernetes.io/kube-apiserver-client\n  expirationSeconds: 86400\n  usages: [{usages}]\n"
            )
        };
        let jane = k.write("jane.yaml", &manifest("jane", "client auth"));
        let out = k.ok(&["create", "-f", jane.to_str().unwrap()]);
        assert!(out.contains("certificatesigningrequest.certificates.k8s.io/jane created"), "{out}");
        let out = k.ok(&["get", "csr"]);
        assert_eq!(header(&out), ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"], "{out}");
        let cols = row(&out, "jane");
        assert_eq!((cols[2], cols[3], cols[4], cols[5]), ("kubernetes.io/kube-apiserver-client", "system:admin", "24h", "Pending"), "{out}");
        let out = k.ok(&["certificate", "approve", "jane"]);
        assert!(out.contains("certificatesigningrequest.certificates.k8s.io/jane approved"), "{out}");
        let out = k.ok(&["get", "csr", "jane"]);
        assert_eq!(row(&out, "jane")[5], "Approved,Issued", "{out}");
        let cert = k.ok(&["get", "csr", "jane", "-o", "jsonpath={.status.certificate}"]);
        let pem_text = base64::engine::general_purpose::STANDARD.decode(cert.trim()).unwrap();
        assert!(String::from_utf8(pem_text).unwrap().starts_with("-----BEGIN CERTIFICATE-----"));

        let bob = k.write("bob.yaml", &manifest("bob", "client auth"));
        k.ok(&["create", "-f", bob.to_str().unwrap()]);
        let out = k.ok(&["certificate", "deny", "bob"]);
        assert!(out.contains("certificatesigningrequest.certificates.k8s.io/bob denied"), "{out}");
        let out = k.ok(&["get", "csr", "bob"]);
        assert_eq!(row(&out, "bob")[5], "Denied", "{out}");
        let (ok, _, err) = k.run(&["certificate", "approve", "bob"]);
        assert!(!ok && err.contains("certificate signing request \"bob\" is already Denied"), "{err}");
        // (The server's own refusal, `Approved and Denied conditions are mutually exclusive`,
        // is in tests/authn_authz.rs: kubectl refuses before sending, even with --force.)

        let bad = k.write("bad.yaml", &manifest("bad", "client auth").replace(&request, "aGVsbG8="));
        let (ok, _, err) = k.run(&["create", "-f", bad.to_str().unwrap()]);
        assert!(!ok && err.contains("PEM block type must be CERTIFICATE REQUEST"), "{err}");

        let out = k.ok(&["get", "apiservices"]);
        assert_eq!(header(&out), ["NAME", "SERVICE", "AVAILABLE", "AGE"], "{out}");
        for name in ["v1.", "v1.apps", "v1.authentication.k8s.io", "v1.certificates.k8s.io", "v1.apiregistration.k8s.io"] {
            let cols = row(&out, name);
            assert_eq!((cols[1], cols[2]), ("Local", "True"), "{out}");
        }
    })
    .await;
    server.stop().await.unwrap();
}
