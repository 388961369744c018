//! What a new user sees: `minik8s up` says where it is, what it keeps and how to stop (also with
//! `--in-memory --port 0`, whose kubeconfig goes to a temporary directory), and a failed request
//! leaves one line in the server's log at the default level saying why.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tests::{Kubectl, Minik8s};

#[test]
fn up_in_memory_on_any_port_prints_a_summary_with_a_working_kubeconfig() {
    let mut child = Command::new(tests::binary_path())
        .args(["up", "--in-memory", "--port", "0", "--nodes", "2"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn minik8s: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.starts_with("export KUBECONFIG="))
    {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => lines.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!("no summary from up ({e}): {lines:?}");
            }
        }
    }
    let text = lines.join("\n");
    assert!(
        text.starts_with("minik8s is ready at http://127.0.0.1:"),
        "{text}"
    );
    assert!(text.contains("data:       in memory"), "{text}");
    assert!(
        text.contains("nodes:      2 fake nodes (node-0 … node-1)"),
        "{text}"
    );
    assert!(text.contains("stop:       Ctrl-C"), "{text}");
    let kubeconfig = lines
        .iter()
        .find_map(|l| l.strip_prefix("export KUBECONFIG="))
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    let nodes = Kubectl::new(&kubeconfig).ok(&["get", "nodes", "-o", "name"]);
    assert_eq!(nodes.lines().count(), 2, "{nodes}");

    // SIGTERM: it stops, and takes its temporary kubeconfig with it.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    tests::wait_for("minik8s to exit", Duration::from_secs(15), || {
        match child.try_wait() {
            Ok(Some(status)) => Ok(status),
            other => Err(format!("{other:?}")),
        }
    });
    assert!(!kubeconfig.exists(), "{} left behind", kubeconfig.display());
}

#[test]
fn a_failed_request_is_logged_with_its_reason_at_the_default_level() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let server = Minik8s::up(dir.path(), &["--nodes", "0"]);
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"no-containers"},"spec":{"containers":[]}}"#;
    let mut create = server.kubectl().command(&["create", "-f", "-"]);
    let mut child = create
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("kubectl: {e}"));
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
        stdin
            .write_all(pod.as_bytes())
            .unwrap_or_else(|e| panic!("write: {e}"));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("kubectl: {e}"));
    assert!(
        !out.status.success(),
        "an empty container list must be refused"
    );
    tests::wait_for("the failure in the log", Duration::from_secs(10), || {
        let log = server.log_text();
        let line = log
            .lines()
            .find(|l| l.contains("request failed") && l.contains("422"));
        match line {
            Some(l)
                if l.contains("POST") && l.contains("Invalid") && l.contains("spec.containers") =>
            {
                Ok(())
            }
            _ => Err(log.lines().rev().take(5).collect::<Vec<_>>().join("\n")),
        }
    });
    // Reads of missing objects are normal control flow (kubectl apply asks first): no line. A
    // delete of a missing pod afterwards is logged; once its line is there, the read's would be.
    let _ = server.kubectl().output(&["get", "pod", "missing"]);
    let _ = server.kubectl().output(&["delete", "pod", "gone"]);
    tests::wait_for("the delete's line", Duration::from_secs(10), || {
        let log = server.log_text();
        match log
            .lines()
            .any(|l| l.contains("request failed") && l.contains("/pods/gone"))
        {
            true => Ok(()),
            false => Err(log.lines().rev().take(5).collect::<Vec<_>>().join("\n")),
        }
    });
    let log = server.log_text();
    assert!(
        !log.lines()
            .any(|l| l.contains("request failed") && l.contains("/pods/missing")),
        "{log}"
    );
}
