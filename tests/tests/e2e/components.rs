//! The components as separate processes: `minik8s apiserver`, `minik8s controller-manager` and
//! `minik8s kubelet`, talking HTTP to each other exactly as inside `up`.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tests::{free_port, http_get, wait_for, Kubectl};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str]) -> Killed {
    Killed(
        Command::new(tests::binary_path())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn minik8s {args:?}: {e}")),
    )
}

fn http_post(url: &str) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").ok_or("not http")?;
    let (host, path) = rest.split_once('/').ok_or("no path")?;
    let mut s = std::net::TcpStream::connect(host).map_err(|e| e.to_string())?;
    write!(
        s,
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).map_err(|e| e.to_string())?;
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("bad response")?;
    Ok((code, buf))
}

#[test]
fn separate_processes_run_a_replication_controller_to_running_pods() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _apiserver = spawn(&[
        "apiserver",
        "--port",
        &port.to_string(),
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]);
    wait_for(
        "apiserver /readyz",
        Duration::from_secs(20),
        || match http_get(&format!("{url}/readyz")) {
            Ok((200, _)) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    let (cm_port, kubelet_port) = (free_port(), free_port());
    let cm_addr = format!("127.0.0.1:{cm_port}");
    let kubelet_addr = format!("127.0.0.1:{kubelet_port}");
    let _cm = spawn(&[
        "controller-manager",
        "--server",
        &url,
        "--metrics-address",
        &cm_addr,
    ]);
    let _kubelet = spawn(&[
        "kubelet",
        "--server",
        &url,
        "--nodes",
        "2",
        "--admin-address",
        &kubelet_addr,
    ]);

    let kubeconfig = dir.path().join("kubeconfig");
    minik8s::kubeconfig::write(&kubeconfig, &url, None).unwrap();
    let k = Kubectl::new(&kubeconfig);
    wait_for("2 Ready nodes", Duration::from_secs(30), || {
        let out = k.ok(&["get", "nodes"]);
        if out.lines().filter(|l| l.contains(" Ready ")).count() == 2 {
            Ok(())
        } else {
            Err(out)
        }
    });
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/rc.yaml");
    k.ok(&["apply", "-f", manifest]);
    wait_for("3 Running pods", Duration::from_secs(30), || {
        let list = k.json(&["get", "pods", "-l", "app=web"]);
        let running = list["items"].as_array().map_or(0, |a| {
            a.iter()
                .filter(|p| p["status"]["phase"] == "Running")
                .count()
        });
        if running == 3 {
            Ok(())
        } else {
            Err(format!("{running} running"))
        }
    });

    // Both components serve health and metrics.
    let (code, _) = http_get(&format!("http://{cm_addr}/healthz")).unwrap();
    assert_eq!(code, 200);
    let (code, metrics) = http_get(&format!("http://{kubelet_addr}/metrics")).unwrap();
    assert_eq!(code, 200);
    assert!(
        metrics.contains("kubelet_fake_pods{phase=\"Running\"} 3"),
        "{metrics}"
    );

    // The admin endpoint stops a node: it stops heartbeating.
    let (code, body) = http_post(&format!("http://{kubelet_addr}/nodes/node-0/stop")).unwrap();
    assert_eq!(code, 200, "{body}");
    let (_, metrics) = http_get(&format!("http://{kubelet_addr}/metrics")).unwrap();
    assert!(
        metrics.contains("kubelet_fake_nodes_running 1"),
        "{metrics}"
    );
    let (code, _) = http_post(&format!("http://{kubelet_addr}/nodes/nope/stop")).unwrap();
    assert_eq!(code, 404);
}
