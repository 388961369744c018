//! Client configuration and kubeconfig loading.
//!
//! `Config::from_kubeconfig` reads the `current-context` of a kubeconfig file and takes from it the
//! cluster `server`, `certificate-authority` / `certificate-authority-data`, `insecure-skip-tls-verify`
//! and the user's `token` / `tokenFile` — enough for every component of this project to run as its own
//! process against any apiserver. Relative file paths are resolved against the kubeconfig's folder,
//! as kubectl does. Client certificates and exec plugins are not supported (reported as absent).

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde::Deserialize;

use crate::error::{Error, Result};

/// How to reach and authenticate to an apiserver.
#[derive(Clone, Debug)]
pub struct Config {
    /// Base URL, `http(s)://host:port`.
    pub server: String,
    /// Bearer token sent as `Authorization: Bearer …`.
    pub token: Option<String>,
    /// Bearer tokens renewed from a source (takes the place of `token`).
    pub token_source: Option<super::token_source::DynamicToken>,
    /// PEM bundle of CAs trusted for `https` (in addition to none: only these are trusted).
    pub ca_pem: Option<Vec<u8>>,
    /// Skip TLS certificate verification (kubeconfig `insecure-skip-tls-verify`).
    pub insecure_skip_verify: bool,
    /// Client certificate and its PKCS#8 key, PEM, concatenated (kubeconfig
    /// `client-certificate(-data)` and `client-key(-data)`): the x509 identity.
    pub identity_pem: Option<Vec<u8>>,
    /// Client-side token-bucket rate, requests per second; `<= 0` disables the limiter, which is the
    /// default so an in-process sandbox is never throttled. (client-go's default is 5 QPS / burst 10;
    /// kube-controller-manager runs with 20 / 30.)
    pub qps: f32,
    /// Token-bucket burst (at least 1 when `qps > 0`).
    pub burst: u32,
    /// Per-request timeout for non-watch requests. Watches use `timeoutSeconds` + a grace period.
    pub timeout: Duration,
    /// `User-Agent` header.
    pub user_agent: String,
}

impl Config {
    /// Defaults: no auth, no client-side limit, 30 s request timeout.
    pub fn new(server: impl Into<String>) -> Self {
        Config {
            server: server.into().trim_end_matches('/').to_string(),
            token: None,
            token_source: None,
            ca_pem: None,
            insecure_skip_verify: false,
            identity_pem: None,
            qps: 0.0,
            burst: 0,
            timeout: Duration::from_secs(30),
            user_agent: format!("minik8s-client/{}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// Loads the current context of a kubeconfig file.
    pub fn from_kubeconfig(path: &Path) -> Result<Self> {
        let err = |message: String| Error::Kubeconfig {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let kc: Kubeconfig = serde_yaml::from_str(&text).map_err(|e| err(e.to_string()))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        kc.resolve(&base).map_err(err)
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(default)]
    current_context: Option<String>,
    #[serde(default)]
    clusters: Vec<Named<Cluster>>,
    #[serde(default)]
    users: Vec<Named<User>>,
    #[serde(default)]
    contexts: Vec<Named<Context>>,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: Option<T>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Deserialize, Default)]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    #[serde(rename = "client-certificate")]
    client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data")]
    client_certificate_data: Option<String>,
    #[serde(rename = "client-key")]
    client_key: Option<String>,
    #[serde(rename = "client-key-data")]
    client_key_data: Option<String>,
}

/// Inline `*-data` (base64) or a file, of a kubeconfig entry.
fn data_or_file(
    base: &Path,
    data: Option<&String>,
    file: Option<&String>,
    what: &str,
) -> std::result::Result<Option<Vec<u8>>, String> {
    if let Some(data) = data {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| format!("{what}-data: {e}"));
    }
    match file {
        Some(f) => {
            let p = resolve_path(base, f);
            std::fs::read(&p)
                .map(Some)
                .map_err(|e| format!("{}: {e}", p.display()))
        }
        None => Ok(None),
    }
}

#[derive(Deserialize, Default)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
}

fn find<'a, T>(items: &'a [Named<T>], name: &str) -> Option<&'a T> {
    items
        .iter()
        .find(|n| n.name == name)
        .and_then(|n| n.value.as_ref())
}

fn resolve_path(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

impl Kubeconfig {
    fn resolve(self, base: &Path) -> std::result::Result<Config, String> {
        let ctx_name = self
            .current_context
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or("no current-context")?;
        let ctx = find(&self.contexts, &ctx_name)
            .ok_or_else(|| format!("context {ctx_name:?} not found"))?;
        let cluster_name = ctx.cluster.clone().ok_or("context has no cluster")?;
        let cluster = find(&self.clusters, &cluster_name)
            .ok_or_else(|| format!("cluster {cluster_name:?} not found"))?;
        let server = cluster.server.clone().ok_or("cluster has no server")?;
        let mut cfg = Config::new(server);
        cfg.insecure_skip_verify = cluster.insecure_skip_tls_verify;
        if let Some(data) = &cluster.certificate_authority_data {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| format!("certificate-authority-data: {e}"))?;
            cfg.ca_pem = Some(pem);
        } else if let Some(file) = &cluster.certificate_authority {
            let p = resolve_path(base, file);
            cfg.ca_pem = Some(std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?);
        }
        if let Some(user) = ctx.user.as_deref().and_then(|u| find(&self.users, u)) {
            if let Some(t) = &user.token {
                cfg.token = Some(t.clone());
            } else if let Some(file) = &user.token_file {
                let p = resolve_path(base, file);
                let t = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                cfg.token = Some(t.trim().to_string());
            }
            let cert = data_or_file(
                base,
                user.client_certificate_data.as_ref(),
                user.client_certificate.as_ref(),
                "client-certificate",
            )?;
            let key = data_or_file(
                base,
                user.client_key_data.as_ref(),
                user.client_key.as_ref(),
                "client-key",
            )?;
            if let (Some(mut cert), Some(key)) = (cert, key) {
                cert.push(b'\n');
                cert.extend(key);
                cfg.identity_pem = Some(cert);
            }
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_current_context() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::Config(e.to_string()))?;
        std::fs::write(dir.path().join("ca.pem"), b"PEM")
            .map_err(|e| Error::Config(e.to_string()))?;
        let kc = r#"
apiVersion: v1
kind: Config
current-context: b
clusters:
- name: one
  cluster: { server: "http://127.0.0.1:1", insecure-skip-tls-verify: true }
- name: two
  cluster: { server: "https://127.0.0.1:6443/", certificate-authority: ca.pem }
users:
- name: u
  user: { token: secret }
contexts:
- name: a
  context: { cluster: one }
- name: b
  context: { cluster: two, user: u }
"#;
        let path = dir.path().join("config");
        std::fs::write(&path, kc).map_err(|e| Error::Config(e.to_string()))?;
        let cfg = Config::from_kubeconfig(&path)?;
        assert_eq!(cfg.server, "https://127.0.0.1:6443");
        assert_eq!(cfg.token.as_deref(), Some("secret"));
        assert_eq!(cfg.ca_pem.as_deref(), Some(&b"PEM"[..]));
        assert!(!cfg.insecure_skip_verify);
        assert!(cfg.qps <= 0.0, "in-process default must not throttle");

        let data = base64::engine::general_purpose::STANDARD.encode("DATA");
        let kc2 = format!(
            "current-context: a\ncontexts: [{{name: a, context: {{cluster: c}}}}]\n\
             clusters: [{{name: c, cluster: {{server: 'http://h:1', certificate-authority-data: {data}}}}}]\n"
        );
        std::fs::write(&path, kc2).map_err(|e| Error::Config(e.to_string()))?;
        let cfg = Config::from_kubeconfig(&path)?;
        assert_eq!(cfg.ca_pem.as_deref(), Some(&b"DATA"[..]));
        assert!(cfg.token.is_none());
        assert!(cfg.identity_pem.is_none());

        // A client certificate: inline data, or a file beside the kubeconfig for the key.
        std::fs::write(dir.path().join("key.pem"), b"KEY")
            .map_err(|e| Error::Config(e.to_string()))?;
        let cert = base64::engine::general_purpose::STANDARD.encode("CERT");
        let kc3 = format!(
            "current-context: a\ncontexts: [{{name: a, context: {{cluster: c, user: u}}}}]\n\
             clusters: [{{name: c, cluster: {{server: 'https://h:1'}}}}]\n\
             users: [{{name: u, user: {{client-certificate-data: {cert}, client-key: key.pem}}}}]\n"
        );
        std::fs::write(&path, kc3).map_err(|e| Error::Config(e.to_string()))?;
        let cfg = Config::from_kubeconfig(&path)?;
        assert_eq!(cfg.identity_pem.as_deref(), Some(&b"CERT\nKEY"[..]));

        std::fs::write(&path, "current-context: missing\n")
            .map_err(|e| Error::Config(e.to_string()))?;
        assert!(matches!(
            Config::from_kubeconfig(&path),
            Err(Error::Kubeconfig { .. })
        ));
        Ok(())
    }
}
