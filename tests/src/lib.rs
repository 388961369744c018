//! End-to-end test harness: the real `minik8s` binary, the real `kubectl`, deadlines instead of sleeps.
//!
//! - [`Minik8s`] spawns `minik8s up` (or any subcommand) on a free loopback port with its own data
//!   directory and kubeconfig, waits for `/readyz`, and kills the process when dropped.
//! - [`Kubectl`] runs `/usr/bin/kubectl` against a kubeconfig with a private `--cache-dir`, so tests
//!   never share discovery caches.
//! - [`wait_for`] polls a condition until a deadline, failing with the last observation.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Path of the `minik8s` binary under test: `minik8s-e2e`, this package's build of `src/main.rs`
/// (see `tests/Cargo.toml`), which Cargo builds before this package's integration tests.
pub fn binary_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test> → target/<profile>/minik8s-e2e
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let path = profile_dir.join(format!("minik8s-e2e{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} not found: run the e2e tests through `cargo test -p tests` (it builds the binary)",
        path.display()
    );
    path
}

/// A free port on 127.0.0.1 (bound and released; the kernel will not hand it out again at once).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// Polls `f` every 50 ms until it returns `Ok`, or panics after `timeout` with the last `Err`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) => {
                if Instant::now() > deadline {
                    panic!("timed out after {timeout:?} waiting for {what}; last: {last}");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running `minik8s` process.
pub struct Minik8s {
    pub child: Child,
    pub port: u16,
    pub data_dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub log: PathBuf,
}

impl Minik8s {
    /// `minik8s up --port P --data-dir DIR --kubeconfig DIR/kubeconfig <extra>`; waits until ready.
    pub fn up(data_dir: &Path, extra: &[&str]) -> Self {
        Self::up_on(data_dir, free_port(), extra)
    }

    /// As [`Minik8s::up`], on a given port (a restart on the same address).
    pub fn up_on(data_dir: &Path, port: u16, extra: &[&str]) -> Self {
        let kubeconfig = data_dir.join("kubeconfig");
        let log = data_dir.join(format!("minik8s-{port}.log"));
        std::fs::create_dir_all(data_dir)
            .unwrap_or_else(|e| panic!("create {}: {e}", data_dir.display()));
        // A kubeconfig left by an earlier run names an old port: readiness waits for the new one.
        let _ = std::fs::remove_file(&kubeconfig);
        let log_file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("log file: {e}"));
        let port_s = port.to_string();
        let mut args = vec![
            "up",
            "--port",
            &port_s,
            "--data-dir",
            data_dir.to_str().unwrap_or_default(),
        ];
        let kc = kubeconfig.to_string_lossy().into_owned();
        args.extend(["--kubeconfig", &kc]);
        args.extend(extra);
        let child = Command::new(binary_path())
            .args(&args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn minik8s: {e}"));
        let mut this = Self {
            child,
            port,
            data_dir: data_dir.to_path_buf(),
            kubeconfig,
            log,
        };
        this.wait_ready(Duration::from_secs(30));
        this
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Waits for `/readyz` and the kubeconfig file.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let url = format!("{}/readyz", self.url());
        let kubeconfig = self.kubeconfig.clone();
        let log = self.log.clone();
        let child = &mut self.child;
        wait_for("minik8s /readyz", timeout, || {
            if let Ok(Some(status)) = child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("minik8s exited early with {status}; log:\n{text}");
            }
            match http_get(&url) {
                Ok((200, _)) if kubeconfig.exists() => Ok(()),
                Ok((code, body)) => Err(format!("{code} {body}")),
                Err(e) => Err(e),
            }
        });
    }

    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(&self.kubeconfig)
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits (up to `timeout`) for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Minik8s {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A tiny blocking HTTP/1.1 GET over loopback (no client dependency in the harness).
pub fn http_get(url: &str) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").ok_or("not http")?;
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut stream = std::net::TcpStream::connect(host).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad response: {text}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// The real `kubectl` with a private cache directory.
pub struct Kubectl {
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
}

impl Kubectl {
    pub fn new(kubeconfig: &Path) -> Self {
        Self {
            kubeconfig: kubeconfig.to_path_buf(),
            cache: tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args)
            .env_remove("KUBECONFIG");
        cmd
    }

    pub fn output(&self, args: &[&str]) -> Output {
        self.command(args)
            .output()
            .unwrap_or_else(|e| panic!("run kubectl {args:?}: {e}"))
    }

    /// Runs kubectl, panicking with its stderr unless it succeeds without printing an error.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success() && !stderr.contains("error"),
            "kubectl {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
            out.status
        );
        stdout
    }

    /// `kubectl get … -o json` parsed.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut full = args.to_vec();
        full.extend(["-o", "json"]);
        let text = self.ok(&full);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: bad JSON {e}: {text}"))
    }
}

/// Awaits `f` every 50 ms until it returns `Some`, or panics after 60 s naming `what`: the async
/// tests' [`wait_for`].
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
