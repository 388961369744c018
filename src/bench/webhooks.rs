//! `minik8s bench webhooks`: what admission webhooks cost a write. ConfigMap creates, one client,
//! one at a time, timed in three configurations of one in-memory apiserver:
//!
//! 1. no webhook configuration at all;
//! 2. a mutating webhook whose rules match only Secrets (the ConfigMaps match nothing: the issue's
//!    "an object that matches no webhook pays nothing measurable");
//! 3. a mutating webhook on ConfigMaps served by a local HTTPS server in this process (axum over
//!    rustls, its CA generated here) answering with a one-label JSONPatch (the issue's "a local
//!    mutating webhook adds ≤ 2 ms p99").
//!
//! Then, on top of those, ValidatingAdmissionPolicy:
//!
//! 4. a policy bound to Secrets only (the ConfigMaps match nothing: a bound policy that matches
//!    nothing must cost nothing measurable), compared with the first;
//! 5. a policy on ConfigMaps with one CEL validation, compared with the third.
//!
//! Each configuration is measured only once it has taken effect (a probe write shows the label,
//! or a probe named `denied-…` is refused by the policy).
//! Prints p50/p99 per configuration and the difference to the first. Bounded by `count` creates
//! per configuration and `deadline` per phase; loopback only.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;
use serde_json::{json, Value};
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

use super::{in_memory_config, ms, percentile, Error};
use crate::control_plane::ControlPlane;

fn failed(what: &str) -> impl Fn(String) -> Error + '_ {
    move |e| Error::Failed(format!("{what}: {e}"))
}

/// The webhook: allows with a JSONPatch adding `bench=webhook`.
async fn mutate(Json(review): Json<Value>) -> Json<Value> {
    let uid = review["request"]["uid"].clone();
    let ops = json!([{"op": "add", "path": "/metadata/labels", "value": {"bench": "webhook"}}]);
    let patch = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch}}),
    )
}

/// A serving certificate for 127.0.0.1 signed by a fresh CA: (CA PEM, cert DER, key DER).
fn pki() -> Result<(String, Vec<u8>, Vec<u8>), Error> {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
    let err = failed("generating the webhook's certificate");
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| err(e.to_string()))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().map_err(|e| err(e.to_string()))?;
    let ca_cert = ca.self_signed(&ca_key).map_err(|e| err(e.to_string()))?;
    let mut leaf = CertificateParams::new(Vec::<String>::new()).map_err(|e| err(e.to_string()))?;
    leaf.subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    let leaf_key = KeyPair::generate().map_err(|e| err(e.to_string()))?;
    let leaf_cert = leaf
        .signed_by(&leaf_key, &ca_cert, &ca_key)
        .map_err(|e| err(e.to_string()))?;
    Ok((
        ca_cert.pem(),
        leaf_cert.der().to_vec(),
        leaf_key.serialize_der(),
    ))
}

/// Serves the webhook on 127.0.0.1 until `stop`; returns its address and CA.
async fn serve(stop: CancellationToken) -> Result<(SocketAddr, String), Error> {
    let (ca_pem, cert, key) = pki()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let err = failed("configuring the webhook's TLS");
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(cert)],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.into()),
        )
        .map_err(|e| err(e.to_string()))?;
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let app = Router::new().route("/mutate", post(mutate));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| failed("binding the webhook")(e.to_string()))?;
    let addr = listener
        .local_addr()
        .map_err(|e| failed("binding the webhook")(e.to_string()))?;
    tokio::spawn(async move {
        loop {
            let (tcp, _) = tokio::select! {
                _ = stop.cancelled() => return,
                a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
            };
            let (acceptor, app, stop) = (acceptor.clone(), app.clone(), stop.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service);
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = conn => {}
                }
            });
        }
    });
    Ok((addr, ca_pem))
}

/// A MutatingWebhookConfiguration calling the bench webhook for creates of `resource`.
fn configuration(name: &str, resource: &str, addr: SocketAddr, ca_pem: &str) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{"name": format!("{name}.bench.example.com"),
            "clientConfig": {"url": format!("https://{addr}/mutate"), "caBundle": ca},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": [resource]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail"}]})
}

/// POSTs `body` to `url`, expecting 201; returns the created object.
async fn create(http: &reqwest::Client, url: &str, body: &Value) -> Result<Value, Error> {
    let resp = http.post(url).json(body).send().await?;
    let code = resp.status().as_u16();
    let text = resp.text().await?;
    if code != 201 {
        return Err(Error::Failed(format!("POST {url}: {code} {text}")));
    }
    serde_json::from_str(&text).map_err(|e| failed("decoding a created object")(e.to_string()))
}

/// Creates `kind` objects at `url` until one comes back labelled by the webhook.
async fn until_labelled(
    http: &reqwest::Client,
    url: &str,
    kind: &str,
    deadline: Duration,
) -> Result<(), Error> {
    let until = Instant::now() + deadline;
    for i in 0u64.. {
        let body = json!({"apiVersion": "v1", "kind": kind,
            "metadata": {"name": format!("probe-{}-{i}", kind.to_lowercase())}});
        let created = create(http, url, &body).await?;
        if created["metadata"]["labels"]["bench"] == "webhook" {
            return Ok(());
        }
        if Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(Error::Failed(format!(
        "the webhook for {kind} did not take effect"
    )))
}

/// A ValidatingAdmissionPolicy and its binding refusing creates of `resource` named `denied-…`.
fn policy(name: &str, resource: &str) -> (Value, Value) {
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""],
                "apiVersions": ["v1"], "resources": [resource]}]},
            "validations": [{"expression": "!object.metadata.name.startsWith('denied-')"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]}});
    (policy, binding)
}

/// Installs `policy` on `resource` and waits until a probe create at `url` is refused by it.
async fn install_policy(
    http: &reqwest::Client,
    base: &str,
    url: &str,
    (name, resource, kind): (&str, &str, &str),
    deadline: Duration,
) -> Result<(), Error> {
    let group = format!("{base}/apis/admissionregistration.k8s.io/v1");
    let (p, b) = policy(name, resource);
    create(http, &format!("{group}/validatingadmissionpolicies"), &p).await?;
    create(
        http,
        &format!("{group}/validatingadmissionpolicybindings"),
        &b,
    )
    .await?;
    let until = Instant::now() + deadline;
    for i in 0u64.. {
        let body = json!({"apiVersion": "v1", "kind": kind,
            "metadata": {"name": format!("denied-{name}-{i}")}});
        let code = http.post(url).json(&body).send().await?.status().as_u16();
        if code == 422 {
            return Ok(());
        }
        if Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(Error::Failed(format!(
        "the policy {name} did not take effect"
    )))
}

/// `count` ConfigMap creates one after another; their latencies, sorted.
async fn creates(
    http: &reqwest::Client,
    url: &str,
    label: &str,
    count: usize,
    deadline: Duration,
) -> Result<Vec<Duration>, Error> {
    let until = Instant::now() + deadline;
    let mut took = Vec::with_capacity(count);
    for i in 0..count {
        if Instant::now() > until {
            break;
        }
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{label}-{i}")}, "data": {"k": "v"}});
        let t = Instant::now();
        create(http, url, &body).await?;
        took.push(t.elapsed());
    }
    took.sort();
    Ok(took)
}

fn report(label: &str, took: &[Duration], base: Option<&[Duration]>) {
    let (p50, p99) = (percentile(took, 0.5), percentile(took, 0.99));
    let added = base
        .map(|b| {
            let d = |a: Duration, b: Duration| a.as_secs_f64() * 1000.0 - b.as_secs_f64() * 1000.0;
            format!(
                " (p50 {:+.2} ms, p99 {:+.2} ms)",
                d(p50, percentile(b, 0.5)),
                d(p99, percentile(b, 0.99))
            )
        })
        .unwrap_or_default();
    println!(
        "webhooks {label}: {} creates, p50 {}, p99 {}{added}",
        took.len(),
        ms(p50),
        ms(p99)
    );
}

/// Runs the benchmark: `count` creates per configuration, each phase bounded by `deadline`.
pub async fn webhooks(count: usize, deadline: Duration) -> Result<(), Error> {
    let plane = ControlPlane::start(in_memory_config()).await?;
    let stop = CancellationToken::new();
    let result = run(&plane, stop.clone(), count, deadline).await;
    stop.cancel();
    plane.shutdown().await;
    result
}

async fn run(
    plane: &ControlPlane,
    stop: CancellationToken,
    count: usize,
    deadline: Duration,
) -> Result<(), Error> {
    let (addr, ca_pem) = serve(stop).await?;
    let http = reqwest::Client::new();
    let base = plane.url();
    let configmaps = format!("{base}/api/v1/namespaces/default/configmaps");
    let secrets = format!("{base}/api/v1/namespaces/default/secrets");
    let configurations =
        format!("{base}/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations");
    // Warm-up: connections, caches.
    creates(&http, &configmaps, "warmup", count.min(100), deadline).await?;

    let none = creates(&http, &configmaps, "none", count, deadline).await?;
    report("none configured", &none, None);

    let target = ("secrets-only", "secrets", "Secret");
    install_policy(&http, base, &secrets, target, deadline).await?;
    let unmatched_policy = creates(&http, &configmaps, "unmatched-policy", count, deadline).await?;
    report("policy not matching", &unmatched_policy, Some(&none));

    let secrets_only = configuration("secrets", "secrets", addr, &ca_pem);
    create(&http, &configurations, &secrets_only).await?;
    until_labelled(&http, &secrets, "Secret", deadline).await?;
    let unmatched = creates(&http, &configmaps, "unmatched", count, deadline).await?;
    report("one not matching", &unmatched, Some(&none));

    let on_configmaps = configuration("configmaps", "configmaps", addr, &ca_pem);
    create(&http, &configurations, &on_configmaps).await?;
    until_labelled(&http, &configmaps, "ConfigMap", deadline).await?;
    let matched = creates(&http, &configmaps, "matched", count, deadline).await?;
    report("one local mutating", &matched, Some(&none));

    let target = ("on-configmaps", "configmaps", "ConfigMap");
    install_policy(&http, base, &configmaps, target, deadline).await?;
    let policy = creates(&http, &configmaps, "policy", count, deadline).await?;
    report("+ one matching policy", &policy, Some(&matched));
    Ok(())
}
