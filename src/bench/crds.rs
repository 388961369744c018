//! Custom resources: installing the Gateway API CRDs until Established, and durable creates/s of
//! a custom resource with a schema like cert-manager's `Certificate` and of an `HTTPRoute` (the
//! Gateway API's, with its CEL rules), side by side with 1 KiB ConfigMaps in the same run.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{in_memory_config, Error};
use crate::control_plane::{ControlPlane, ControlPlaneConfig, Storage};

/// A `Certificate`-shaped CRD: typed fields, formats, an enum list, required fields; no CEL.
fn certificate_crd() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "certificates.bench.example.com"},
        "spec": {
            "group": "bench.example.com", "scope": "Namespaced",
            "names": {"plural": "certificates", "singular": "certificate", "kind": "Certificate"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["secretName", "issuerRef"], "properties": {
                        "commonName": {"type": "string", "maxLength": 64},
                        "dnsNames": {"type": "array", "items": {"type": "string"}},
                        "duration": {"type": "string"},
                        "renewBefore": {"type": "string"},
                        "secretName": {"type": "string"},
                        "isCA": {"type": "boolean"},
                        "usages": {"type": "array", "items": {"type": "string",
                            "enum": ["digital signature", "key encipherment", "server auth", "client auth"]}},
                        "privateKey": {"type": "object", "properties": {
                            "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"]},
                            "size": {"type": "integer", "format": "int32"}}},
                        "issuerRef": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"}, "kind": {"type": "string"},
                            "group": {"type": "string"}}}
                    }},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    })
}

fn certificate(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "bench.example.com/v1", "kind": "Certificate",
        "metadata": {"name": name},
        "spec": {"commonName": "example.com", "dnsNames": ["example.com", "www.example.com"],
            "duration": "2160h", "renewBefore": "360h", "secretName": format!("{name}-tls"),
            "usages": ["digital signature", "key encipherment", "server auth"],
            "privateKey": {"algorithm": "ECDSA", "size": 256},
            "issuerRef": {"name": "letsencrypt", "kind": "ClusterIssuer", "group": "cert-manager.io"}}})
}

fn http_route(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
    "metadata": {"name": name},
    "spec": {
        "parentRefs": [{"name": "gw"}],
        "hostnames": ["example.com"],
        "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
            "filters": [{"type": "RequestHeaderModifier",
                "requestHeaderModifier": {"add": [{"name": "x-bench", "value": "1"}]}}],
            "backendRefs": [{"name": "api", "port": 8080}]
        }]
    }})
}

/// Builds the body of the object named by its argument.
type MakeBody = fn(&str) -> serde_json::Value;

/// Creates/s with `clients` concurrent clients for `load`, each POSTing `make(name)` to `url`.
async fn creates_per_second(
    url: &str,
    clients: usize,
    load: Duration,
    make: MakeBody,
    label: &str,
) -> Result<(f64, u64), Error> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()?;
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + load;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (http, url, done, errors) =
            (http.clone(), url.to_string(), done.clone(), errors.clone());
        let label = label.to_string();
        tasks.push(tokio::spawn(async move {
            // Bounded by time and by count; a 429 is retried after a pause, at most 100 times.
            for i in 0..1_000_000u64 {
                if Instant::now() > deadline {
                    break;
                }
                let body = make(&format!("{label}-{c}-{i}"));
                for _ in 0..100 {
                    match http.post(&url).json(&body).send().await {
                        Ok(r) if r.status().as_u16() == 201 => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) if r.status().as_u16() == 429 => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    break;
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let n = done.load(Ordering::Relaxed);
    Ok((
        n as f64 / start.elapsed().as_secs_f64(),
        errors.load(Ordering::Relaxed),
    ))
}

/// The benchmark; `gateway_dir` holds the Gateway API CRDs (`../shared/crds/gateway-api`).
pub async fn crds(gateway_dir: &Path, load: Duration) -> Result<(), Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::Failed(e.to_string()))?;
    let config = ControlPlaneConfig {
        storage: Storage::Dir(dir.path().to_path_buf()),
        kubeconfig: Some(dir.path().join("kubeconfig")),
        ..in_memory_config()
    };
    let plane = ControlPlane::start(config).await?;
    let client = client::Client::new(client::Config::new(plane.url().to_string()))
        .map_err(|e| Error::Failed(e.to_string()))?;

    let gateway = crate::crds::read_dir(gateway_dir).map_err(|e| Error::Failed(e.to_string()))?;
    let start = Instant::now();
    crate::crds::install(&client, &gateway, Duration::from_secs(30))
        .await
        .map_err(|e| Error::Failed(e.to_string()))?;
    println!(
        "crds: {} Gateway API CRDs created and Established in {:.1} ms",
        gateway.len(),
        start.elapsed().as_secs_f64() * 1e3
    );
    let cert: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(certificate_crd()).map_err(|e| Error::Failed(e.to_string()))?;
    crate::crds::install(&client, &[cert], Duration::from_secs(10))
        .await
        .map_err(|e| Error::Failed(e.to_string()))?;

    let base = plane.url().to_string();
    let runs: [(&str, String, MakeBody); 3] = [
        (
            "ConfigMap (1 KiB)",
            format!("{base}/api/v1/namespaces/default/configmaps"),
            |n| super::configmap(n, &"x".repeat(1024)),
        ),
        (
            "Certificate CR",
            format!("{base}/apis/bench.example.com/v1/namespaces/default/certificates"),
            certificate,
        ),
        (
            "HTTPRoute CR (CEL rules)",
            format!("{base}/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes"),
            http_route,
        ),
    ];
    let mut baseline = None;
    for (what, url, make) in runs {
        let label = what.split_whitespace().next().unwrap_or("x").to_lowercase();
        let (rate, errors) = creates_per_second(&url, 16, load, make, &label).await?;
        let base_rate = *baseline.get_or_insert(rate);
        println!(
            "crds: 16 clients, durable creates of {what}: {rate:.0}/s ({:.0} % of ConfigMaps, {errors} errors)",
            100.0 * rate / base_rate
        );
    }
    plane.shutdown().await;
    Ok(())
}
