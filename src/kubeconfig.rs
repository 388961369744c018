//! Writing the kubeconfig that `minik8s up` and `Sandbox` hand to users and clients.
//!
//! The file names one cluster, one user and one context, all called `minik8s`, and is written
//! atomically (temporary file, then rename) with mode 0600, since it may one day carry a token.

use std::io::Write;
use std::path::Path;

/// Renders a kubeconfig for `server` (e.g. `http://127.0.0.1:6443`), optionally with a bearer token.
pub fn render(server: &str, token: Option<&str>) -> String {
    let user = match token {
        Some(token) => format!("    token: {}\n", yaml_string(token)),
        None => "    {}\n".to_string(),
    };
    let user_block = if token.is_some() {
        format!("- name: minik8s\n  user:\n{user}")
    } else {
        "- name: minik8s\n  user: {}\n".to_string()
    };
    // `@kubernetes/client-node` refuses a plain `http://` server unless TLS verification is
    // marked off ("HTTP protocol is not allowed when skipTLSVerify is not set or false"); there is
    // no TLS to verify, and kubectl, client-go, the Python client and kube-rs accept the flag.
    let insecure = if server.starts_with("http://") {
        "    insecure-skip-tls-verify: true\n"
    } else {
        ""
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
    let text = render(server, token);
    if unchanged(path, &text) {
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
