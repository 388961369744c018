//! Secure mode end to end (issue 18, reliability T10): a `Sandbox::builder().secure()` served
//! over HTTPS, every request authenticated and authorized.
//!
//! The matrix asks, for each identity (the admin, users bound to `view`, `edit` and a namespaced
//! Role, a ServiceAccount token, a static token without bindings, anonymous, an impersonator
//! with and without the `impersonate` permission), a namespaced list, create, named get and
//! subresource get, a cluster-scoped list, a list in another namespace and non-resource URLs.
//! The expected cells are written out here from the bootstrap policy's roles (view: read pods,
//! pods/log, no secrets; edit: write configmaps, read secrets; public-info-viewer: /healthz for
//! everyone; discovery only for authenticated users) — never computed by the server's evaluator.
//! Then the token lifecycle (a pod-bound token stops working when its pod is deleted), bad input
//! (wrong or truncated tokens, `alg: none`, a certificate of another CA or without a CN, huge
//! headers, a stalled handshake) and kubectl (`whoami`, `can-i`, `--as`, `create token`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use tests::{eventually, Kubectl};

struct Http {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    impersonate: Option<&'static str>,
}

impl Http {
    fn from_kubeconfig(path: &Path) -> Self {
        let cfg = minik8s::client::Config::from_kubeconfig(path).unwrap();
        let mut b = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .timeout(Duration::from_secs(20));
        for c in reqwest::Certificate::from_pem_bundle(cfg.ca_pem.as_ref().unwrap()).unwrap() {
            b = b.add_root_certificate(c);
        }
        if let Some(id) = &cfg.identity_pem {
            b = b.identity(reqwest::Identity::from_pem(id).unwrap());
        }
        Http {
            client: b.build().unwrap(),
            base: cfg.server,
            token: None,
            impersonate: None,
        }
    }

    /// Anonymous: the CA of `path`, no identity.
    fn anonymous(path: &Path) -> Self {
        let cfg = minik8s::client::Config::from_kubeconfig(path).unwrap();
        let mut b = reqwest::Client::builder().tls_built_in_root_certs(false);
        for c in reqwest::Certificate::from_pem_bundle(cfg.ca_pem.as_ref().unwrap()).unwrap() {
            b = b.add_root_certificate(c);
        }
        Http {
            client: b.build().unwrap(),
            base: cfg.server,
            token: None,
            impersonate: None,
        }
    }

    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        if let Some(u) = self.impersonate {
            req = req.header("Impersonate-User", u);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let code = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

async fn create(admin: &Http, path: &str, body: Value) -> Value {
    let (code, obj) = admin.send("POST", path, Some(body)).await;
    assert_eq!(code, 201, "POST {path}: {obj}");
    obj
}

/// A TokenRequest's token for ServiceAccount `namespace/account` with `spec`.
async fn token(admin: &Http, namespace: &str, account: &str, spec: Value) -> String {
    let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token");
    let tr = create(admin, &path, json!({"spec": spec})).await;
    tr["status"]["token"].as_str().unwrap().to_string()
}

fn binding(name: &str, kind: &str, role: &str, subject: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role.split('/').next().unwrap(), "name": role.split('/').nth(1).unwrap()},
        "subjects": [subject],
    })
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name})
}

/// The RBAC objects and workloads of the matrix.
async fn seed(admin: &Http) {
    for ns in ["team", "other"] {
        create(
            admin,
            "/api/v1/namespaces",
            json!({"metadata": {"name": ns}}),
        )
        .await;
    }
    let rb = "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings";
    create(
        admin,
        rb,
        binding("vera-view", "RoleBinding", "ClusterRole/view", user("vera")),
    )
    .await;
    create(
        admin,
        rb,
        binding(
            "eddie-edit",
            "RoleBinding",
            "ClusterRole/edit",
            user("eddie"),
        ),
    )
    .await;
    create(
        admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles",
        json!({"metadata": {"name": "pod-getter"},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
    )
    .await;
    create(
        admin,
        rb,
        binding("rory-get", "RoleBinding", "Role/pod-getter", user("rory")),
    )
    .await;
    create(
        admin,
        "/api/v1/namespaces/team/serviceaccounts",
        json!({"metadata": {"name": "builder"}}),
    )
    .await;
    create(
        admin,
        rb,
        binding(
            "builder-view",
            "RoleBinding",
            "ClusterRole/view",
            json!({"kind": "ServiceAccount", "name": "builder", "namespace": "team"}),
        ),
    )
    .await;
    create(
        admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": "impersonator"},
               "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]}),
    )
    .await;
    create(
        admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        binding(
            "ivan-impersonates",
            "ClusterRoleBinding",
            "ClusterRole/impersonator",
            user("ivan"),
        ),
    )
    .await;
    create(
        admin,
        "/api/v1/namespaces/team/pods",
        json!({"metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
}

/// The requests of the matrix: (label, method, path, body).
fn requests() -> Vec<(&'static str, &'static str, &'static str, Option<Value>)> {
    vec![
        ("list pods", "GET", "/api/v1/namespaces/team/pods", None),
        (
            "create configmap",
            "POST",
            "/api/v1/namespaces/team/configmaps?dryRun=All",
            Some(json!({"metadata": {"name": "cm"}})),
        ),
        ("list nodes", "GET", "/api/v1/nodes", None),
        (
            "list secrets",
            "GET",
            "/api/v1/namespaces/team/secrets",
            None,
        ),
        (
            "get pods/log",
            "GET",
            "/api/v1/namespaces/team/pods/p/log",
            None,
        ),
        ("get /healthz", "GET", "/healthz", None),
        ("get /metrics", "GET", "/metrics", None),
        (
            "list pods elsewhere",
            "GET",
            "/api/v1/namespaces/other/pods",
            None,
        ),
        ("get /apis", "GET", "/apis", None),
        ("get pod", "GET", "/api/v1/namespaces/team/pods/p", None),
        (
            "watch pods",
            "GET",
            "/api/v1/namespaces/team/pods?watch=true&timeoutSeconds=1",
            None,
        ),
    ]
}

// Columns in the order of `requests()`.
const ALL: [bool; 11] = [true; 11];
const VIEW: [bool; 11] = [
    true, false, false, false, true, true, false, false, true, true, true,
];
const EDIT: [bool; 11] = [
    true, true, false, true, true, true, false, false, true, true, true,
];
const GET_ONLY: [bool; 11] = [
    false, false, false, false, false, true, false, false, true, true, false,
];
const AUTHENTICATED: [bool; 11] = [
    false, false, false, false, false, true, false, false, true, false, false,
];
const ANONYMOUS: [bool; 11] = [
    false, false, false, false, false, true, false, false, false, false, false,
];
const NOTHING: [bool; 11] = [false; 11];
// The Node authorizer's static rules (the `system:node` role): read pods and nodes everywhere,
// no pods/log, secrets only one at a time and only those its pods reference.
const NODE: [bool; 11] = [
    true, false, true, false, false, true, false, true, true, true, true,
];

#[tokio::test]
async fn the_t10_matrix_follows_the_bootstrap_policy() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "s3cret-token,tom,1001,\"testers\"\n").unwrap();
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .configure(|c| {
            if let Some(s) = c.apiserver.secure.as_mut() {
                s.token_auth_file = Some(tokens.clone());
            }
        })
        .start()
        .await
        .unwrap();
    assert!(sandbox.url().starts_with("https://"));
    let admin = Http::from_kubeconfig(sandbox.kubeconfig_path());
    seed(&admin).await;

    let as_user = |name: &str, groups: &[&str]| {
        let (_, path) = sandbox.add_user(name, groups).unwrap();
        Http::from_kubeconfig(&path)
    };
    let vera = as_user("vera", &[]);
    // RBAC reads the watch cache: wait until the seeded bindings are visible.
    eventually("vera's binding", || async {
        (vera
            .send("GET", "/api/v1/namespaces/team/pods", None)
            .await
            .0
            == 200)
            .then_some(())
    })
    .await;

    let mut sa = Http::anonymous(sandbox.kubeconfig_path());
    sa.token = Some(token(&admin, "team", "builder", json!({})).await);
    let mut tom = Http::anonymous(sandbox.kubeconfig_path());
    tom.token = Some("s3cret-token".to_string());
    let mut ivan = as_user("ivan", &[]);
    ivan.impersonate = Some("vera");
    let mut mallory = as_user("mallory", &[]);
    mallory.impersonate = Some("vera");

    let identities: Vec<(&str, Http, [bool; 11])> = vec![
        (
            "admin",
            Http::from_kubeconfig(sandbox.kubeconfig_path()),
            ALL,
        ),
        ("vera (view)", vera, VIEW),
        ("eddie (edit)", as_user("eddie", &[]), EDIT),
        ("rory (Role: get pods)", as_user("rory", &[]), GET_ONLY),
        ("team/builder (ServiceAccount, view)", sa, VIEW),
        ("tom (token file, no bindings)", tom, AUTHENTICATED),
        (
            "anonymous",
            Http::anonymous(sandbox.kubeconfig_path()),
            ANONYMOUS,
        ),
        ("ivan as vera (may impersonate)", ivan, VIEW),
        (
            "system:node:node-x (Node authorizer)",
            as_user("system:node:node-x", &["system:nodes"]),
            NODE,
        ),
        ("mallory as vera (may not)", mallory, NOTHING),
    ];
    let mut failures = Vec::new();
    for (who, http, expected) in &identities {
        for ((label, method, path, body), allowed) in requests().into_iter().zip(expected) {
            let (code, status) = http.send(method, path, body).await;
            let denied = code == 403;
            assert_ne!(code, 401, "{who} {label}: {status}");
            assert!(code < 500 || !*allowed, "{who} {label}: {code} {status}");
            if denied == *allowed {
                failures.push(format!("{who}: {label} → {code} {status}"));
            }
            if denied {
                assert_eq!(status["reason"], "Forbidden", "{who} {label}");
            }
        }
    }
    assert!(
        failures.is_empty(),
        "cells differing from the policy:\n{}",
        failures.join("\n")
    );

    // The messages, exactly as upstream's.
    let rory = as_user("rory", &[]);
    let (_, st) = rory.send("GET", "/api/v1/namespaces/team/pods", None).await;
    assert_eq!(
        st["message"],
        "pods is forbidden: User \"rory\" cannot list resource \"pods\" in API group \"\" in the namespace \"team\""
    );
    let (_, st) = rory.send("GET", "/api/v1/nodes", None).await;
    assert_eq!(
        st["message"],
        "nodes is forbidden: User \"rory\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    let (_, st) = rory.send("GET", "/metrics", None).await;
    assert_eq!(
        st["message"],
        "forbidden: User \"rory\" cannot get path \"/metrics\""
    );
    let mut mallory = as_user("mallory", &[]);
    mallory.impersonate = Some("vera");
    let (_, st) = mallory.send("GET", "/healthz", None).await;
    assert_eq!(
        st["message"],
        "users \"vera\" is forbidden: User \"mallory\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    // A node reads a secret only when a pod bound to it references it.
    let node = as_user("system:node:node-x", &["system:nodes"]);
    let (_, st) = node
        .send("GET", "/api/v1/namespaces/team/secrets/token", None)
        .await;
    assert_eq!(
        st["message"],
        "secrets \"token\" is forbidden: User \"system:node:node-x\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team\": no relationship found between node 'node-x' and this object"
    );
    let (code, lease) = node
        .send(
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            Some(json!({"metadata": {"name": "node-x"}})),
        )
        .await;
    assert_eq!(code, 201, "{lease}");
    let (code, _) = node
        .send(
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-y",
            None,
        )
        .await;
    assert_eq!(code, 403);

    // Who a request acts as reaches the handlers: SelfSubjectReview names the impersonated user.
    let mut ivan = as_user("ivan", &["devs"]);
    ivan.impersonate = Some("vera");
    let (code, review) = ivan
        .send(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        )
        .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["status"]["userInfo"]["username"], "vera");
    sandbox.stop().await;
}

#[tokio::test]
async fn bad_credentials_are_401_and_a_bound_token_dies_with_its_pod() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .configure(|c| c.apiserver.header_read_timeout = Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let admin = Http::from_kubeconfig(sandbox.kubeconfig_path());
    create(
        &admin,
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "sa"}}),
    )
    .await;
    let pod = create(
        &admin,
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "p"}, "spec": {"serviceAccountName": "sa", "containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    let bound = json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": pod["metadata"]["uid"]}});
    let token = token(&admin, "default", "sa", bound).await;
    let whoami = |token: String| {
        let mut h = Http::anonymous(sandbox.kubeconfig_path());
        h.token = Some(token);
        async move {
            h.send(
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                Some(
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
                ),
            )
            .await
        }
    };
    let (code, review) = whoami(token.clone()).await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(
        review["status"]["userInfo"]["username"],
        "system:serviceaccount:default:sa"
    );
    assert_eq!(
        review["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["p"])
    );

    // Malformed, forged and foreign credentials: 401 with upstream's bare Status.
    let parts: Vec<&str> = token.split('.').collect();
    let unsigned = format!(
        "{}.{}.",
        "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0", // {"alg":"none","typ":"JWT"}
        parts[1]
    );
    for bad in [
        "garbage".to_string(),
        token[..token.len() - 10].to_string(),
        unsigned,
        format!("{}.{}.{}", parts[0], parts[1], "AAAA"),
    ] {
        let (code, st) = whoami(bad.clone()).await;
        assert_eq!(code, 401, "{bad}: {st}");
        assert_eq!(
            st,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
    }
    let elsewhere = minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .start()
        .await
        .unwrap();
    let (_, foreign_kubeconfig) = elsewhere
        .add_user("kubernetes-admin", &["system:masters"])
        .unwrap();
    let mut foreign = Http::from_kubeconfig(&foreign_kubeconfig);
    foreign.base = sandbox.url().to_string();
    // The other CA's client certificate, trusting this server's CA.
    let cfg = minik8s::client::Config::from_kubeconfig(sandbox.kubeconfig_path()).unwrap();
    let fcfg = minik8s::client::Config::from_kubeconfig(&foreign_kubeconfig).unwrap();
    let mut b = reqwest::Client::builder().tls_built_in_root_certs(false);
    for c in reqwest::Certificate::from_pem_bundle(cfg.ca_pem.as_ref().unwrap()).unwrap() {
        b = b.add_root_certificate(c);
    }
    foreign.client = b
        .identity(reqwest::Identity::from_pem(fcfg.identity_pem.as_ref().unwrap()).unwrap())
        .build()
        .unwrap();
    let (code, st) = foreign.send("GET", "/api/v1/pods", None).await;
    assert_eq!(code, 401, "{st}");
    elsewhere.stop().await;

    // Headers beyond any server's limit (Go's MaxHeaderBytes is 1 MiB) are refused without a
    // 5xx: 431, or the connection is closed.
    let big = "a".repeat(2 * 1024 * 1024);
    let resp = admin
        .client
        .get(format!("{}/healthz", admin.base))
        .header("X-Big", big)
        .send()
        .await;
    if let Ok(r) = resp {
        assert!(
            r.status().as_u16() < 500 && r.status().as_u16() >= 400,
            "{}",
            r.status()
        );
    }

    // A stalled TLS handshake is closed by the header-read deadline.
    use tokio::io::AsyncReadExt;
    let mut raw = tokio::net::TcpStream::connect(sandbox.addr())
        .await
        .unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(30), raw.read(&mut buf))
        .await
        .expect("the server closes a stalled handshake");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

    // The bound pod goes: its token stops working.
    let (code, _) = admin
        .send(
            "DELETE",
            "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=0",
            None,
        )
        .await;
    assert_eq!(code, 200);
    eventually("the token to die with its pod", || {
        let t = token.clone();
        let f = whoami(t);
        async move { (f.await.0 == 401).then_some(()) }
    })
    .await;
    sandbox.stop().await;
}

/// A client certificate of the cluster's CA whose CN is empty names nobody (upstream's
/// `CommonNameUserConversion` answers "not authenticated", not an error): the request goes on to
/// the token authenticator, and without a token it is anonymous. The certificate's O (here
/// `system:masters`) is never taken.
#[tokio::test]
async fn a_client_certificate_without_a_common_name_authenticates_nobody() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .start()
        .await
        .unwrap();
    let admin = Http::from_kubeconfig(sandbox.kubeconfig_path());
    let (_, path) = sandbox.add_user("", &["system:masters"]).unwrap();
    let mut unnamed = Http::from_kubeconfig(&path);
    let (code, body) = unnamed.send("GET", "/version", None).await;
    assert_eq!(code, 200, "anonymous may read /version: {body}");
    let (code, status) = unnamed.send("GET", "/api/v1/namespaces", None).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        r#"namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope"#
    );
    // With a token as well, the token says who it is.
    create(
        &admin,
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "sa"}}),
    )
    .await;
    unnamed.token = Some(token(&admin, "default", "sa", json!({})).await);
    let (code, review) = unnamed
        .send(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        )
        .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(
        review["status"]["userInfo"]["username"],
        "system:serviceaccount:default:sa"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_in_secure_mode() {
    let sandbox = minik8s::Sandbox::builder()
        .in_memory()
        .secure()
        .without_controllers()
        .start()
        .await
        .unwrap();
    let admin = Kubectl::new(sandbox.kubeconfig_path());
    let whoami = admin.ok(&["auth", "whoami", "-o", "json"]);
    let whoami: Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(whoami["status"]["userInfo"]["username"], "kubernetes-admin");
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    admin.ok(&["get", "pods"]);
    admin.ok(&["create", "serviceaccount", "robot"]);
    let token = admin.ok(&["create", "token", "robot"]);
    assert_eq!(token.trim().split('.').count(), 3);
    assert_eq!(admin.ok(&["auth", "can-i", "create", "pods"]).trim(), "yes");
    let as_alice = admin.output(&["auth", "can-i", "list", "pods", "--as", "alice"]);
    assert_eq!(String::from_utf8_lossy(&as_alice.stdout).trim(), "no");

    let (_, alice_path) = sandbox.add_user("alice", &["devs"]).unwrap();
    let alice = Kubectl::new(&alice_path);
    let out = alice.output(&["get", "pods"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let who: Value = serde_json::from_str(&alice.ok(&["auth", "whoami", "-o", "json"])).unwrap();
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        json!(["devs", "system:authenticated"])
    );
    let list = alice.ok(&["auth", "can-i", "--list"]);
    assert!(
        list.contains("selfsubjectreviews.authentication.k8s.io"),
        "{list}"
    );
    // alice may not impersonate.
    let out = alice.output(&["get", "pods", "--as", "bob"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot impersonate resource \"users\""));
    admin.ok(&[
        "create",
        "rolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
    ]);
    eventually("alice's binding", || async {
        alice
            .output(&["get", "pods"])
            .status
            .success()
            .then_some(())
    })
    .await;
    sandbox.stop().await;
}

#[test]
fn the_binary_on_every_address_serves_securely_and_prints_kubeconfigs_for_users() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = tests::free_port().to_string();
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let mut child = Command::new(tests::binary_path())
        .args([
            "up",
            "--secure",
            "--nodes",
            "1",
            "--port",
            &port,
            "--data-dir",
        ])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let admin = Kubectl::new(&data.join("kubeconfig"));
    let ready = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tests::wait_for(
            "the secure server and its node",
            Duration::from_secs(60),
            || {
                let out = admin.output(&["get", "nodes", "-o", "name"]);
                let text = String::from_utf8_lossy(&out.stdout).to_string();
                text.contains("node/node-0").then_some(()).ok_or(text)
            },
        );
        // The keys are readable by their owner only.
        #[cfg(unix)]
        for key in ["ca.key", "sa.key"] {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(data.join("pki").join(key))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{key}");
        }
        let printed = Command::new(tests::binary_path())
            .args([
                "kubeconfig",
                "--user",
                "jane",
                "--group",
                "devs",
                "--data-dir",
            ])
            .arg(&data)
            .output()
            .unwrap();
        assert!(printed.status.success(), "{printed:?}");
        let jane_path = dir.path().join("jane.kubeconfig");
        std::fs::write(&jane_path, &printed.stdout).unwrap();
        let jane = Kubectl::new(&jane_path);
        let who: Value = serde_json::from_str(&jane.ok(&["auth", "whoami", "-o", "json"])).unwrap();
        assert_eq!(who["status"]["userInfo"]["username"], "jane");
        assert_eq!(
            who["status"]["userInfo"]["groups"],
            json!(["devs", "system:authenticated"])
        );
        assert!(!jane.output(&["get", "nodes"]).status.success());
        // Plain HTTP is not served on the secure port.
        assert!(tests::http_get(&format!("http://127.0.0.1:{port}/healthz"))
            .map(|(code, _)| code != 200)
            .unwrap_or(true));
    }));
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = ready {
        let text = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
        eprintln!("minik8s log:\n{}", &text[text.len().saturating_sub(4000)..]);
        std::panic::resume_unwind(e);
    }
}
