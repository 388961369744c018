//! Writing the kubeconfig that `minik8s up` and `Sandbox` hand to users and clients.
//!
//! The file names one cluster, one user and one context, all called `minik8s`, and is written
//! atomically (temporary file, then rename) with mode 0600, since it may carry a token or a
//! client key. A secure server's kubeconfig holds the cluster CA (`certificate-authority-data`)
//! and a client certificate and key (`client-certificate-data`, `client-key-data`), as kind's.

use std::io::Write;
use std::path::Path;

use base64::Engine;

/// What a secure kubeconfig carries: the CA to trust and the user's certificate and key, PEM.
#[derive(Clone, Copy)]
pub struct Tls<'a> {
    /// The cluster CA.
    pub ca_pem: &'a str,
    /// The client certificate.
    pub cert_pem: &'a str,
    /// The client key.
    pub key_pem: &'a str,
}

fn b64(pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(pem.as_bytes())
}

/// Renders a kubeconfig for `server` (e.g. `http://127.0.0.1:6443`), optionally with a bearer token.
pub fn render(server: &str, token: Option<&str>) -> String {
    render_with(server, token, None)
}

/// Renders a kubeconfig for `server` with a bearer token and/or TLS material.
pub fn render_with(server: &str, token: Option<&str>, tls: Option<Tls<'_>>) -> String {
    let mut user = String::new();
    if let Some(token) = token {
        user.push_str(&format!("    token: {}\n", yaml_string(token)));
    }
    if let Some(tls) = tls {
        user.push_str(&format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(tls.cert_pem),
            b64(tls.key_pem)
        ));
    }
    let user_block = if user.is_empty() {
        "- name: minik8s\n  user: {}\n".to_string()
    } else {
        format!("- name: minik8s\n  user:\n{user}")
    };
    // `@kubernetes/client-node` refuses a plain `http://` server unless TLS verification is
    // marked off ("HTTP protocol is not allowed when skipTLSVerify is not set or false"); there is
    // no TLS to verify, and kubectl, client-go, the Python client and kube-rs accept the flag.
    let insecure = match tls {
        _ if server.starts_with("http://") => "    insecure-skip-tls-verify: true\n".to_string(),
        Some(tls) => format!("    certificate-authority-data: {}\n", b64(tls.ca_pem)),
        None => String::new(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: minik8s\n  cluster:\n    server: {server}\n{insecure}\
         contexts:\n- name: minik8s\n  context:\n    cluster: minik8s\n    user: minik8s\n    namespace: default\n\
         current-context: minik8s\nusers:\n{user_block}preferences: {{}}\n",
        server = yaml_string(server),
    )
}

/// Writes the kubeconfig to `path` with mode 0600, replacing any previous file atomically. A file
/// that already says the same is left as it is (a restart on a full disk needs no new file).
pub fn write(path: &Path, server: &str, token: Option<&str>) -> std::io::Result<()> {
    write_text(path, &render(server, token))
}

/// Writes `text` to `path` as [`write`] does.
pub fn write_text(path: &Path, text: &str) -> std::io::Result<()> {
    if unchanged(path, text) {
        return Ok(());
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::rename(&tmp, path)
}

/// Whether `path` holds exactly `text` with mode 0600 already.
fn unchanged(path: &Path, text: &str) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let private =
            std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o777 == 0o600);
        if !private {
            return false;
        }
    }
    std::fs::read(path).is_ok_and(|found| found == text.as_bytes())
}

/// Quotes a scalar for YAML (JSON strings are valid YAML).
fn yaml_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_kubeconfig_parses_and_names_the_server() {
        let text = render("http://127.0.0.1:6443", None);
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(doc["current-context"], "minik8s");
        assert_eq!(
            doc["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:6443"
        );
        assert_eq!(doc["contexts"][0]["context"]["user"], "minik8s");
    }

    #[test]
    fn a_plain_http_server_is_marked_as_without_tls_verification() {
        // @kubernetes/client-node refuses http:// without it.
        let http: serde_yaml::Value =
            serde_yaml::from_str(&render("http://127.0.0.1:6443", None)).unwrap();
        assert_eq!(
            http["clusters"][0]["cluster"]["insecure-skip-tls-verify"],
            true
        );
        let https: serde_yaml::Value =
            serde_yaml::from_str(&render("https://127.0.0.1:6443", None)).unwrap();
        assert!(https["clusters"][0]["cluster"]
            .get("insecure-skip-tls-verify")
            .is_none());
    }

    #[test]
    fn a_secure_kubeconfig_carries_the_ca_and_the_client_certificate() {
        let tls = Tls {
            ca_pem: "CA",
            cert_pem: "CERT",
            key_pem: "KEY",
        };
        let text = render_with("https://127.0.0.1:6443", None, Some(tls));
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let cluster = &doc["clusters"][0]["cluster"];
        assert_eq!(cluster["certificate-authority-data"], b64("CA"));
        assert!(cluster.get("insecure-skip-tls-verify").is_none());
        assert_eq!(
            doc["users"][0]["user"]["client-certificate-data"],
            b64("CERT")
        );
        assert_eq!(doc["users"][0]["user"]["client-key-data"], b64("KEY"));
    }

    #[test]
    fn token_is_written_for_the_user() {
        let text = render("https://127.0.0.1:6443", Some("abc:def"));
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(doc["users"][0]["user"]["token"], "abc:def");
    }

    #[cfg(unix)]
    #[test]
    fn written_file_has_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("kubeconfig");
        write(&path, "http://127.0.0.1:1", None).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
