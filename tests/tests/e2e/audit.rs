//! The audit log end to end (issue 18, "Audit log"): one secure sandbox with an audit policy,
//! requests of every outcome, and the JSON lines they leave in the log.
//!
//! Each request is found in the log by its audit ID, which the test gives in the `Audit-ID`
//! request header (as a client may) or reads from the `Audit-ID` response header; the log is
//! read until the expected stages are there, under a deadline (the writer flushes whenever its
//! queue is empty).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tests::eventually;

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: []
rules:
- level: None
  namespaces: [hidden]
  resources: [{group: "", resources: [secrets]}]
- level: RequestResponse
  resources: [{group: "", resources: [secrets]}]
- level: Request
  verbs: [create, update]
  resources: [{group: "", resources: [configmaps]}]
- level: None
  nonResourceURLs: [/healthz*, /livez*, /readyz*]
- level: Metadata
"#;

struct Http {
    client: reqwest::Client,
    base: String,
}

struct Answer {
    code: u16,
    audit_id: String,
    body: Value,
}

impl Http {
    fn new(kubeconfig: &Path, with_identity: bool) -> Self {
        let cfg = minik8s::client::Config::from_kubeconfig(kubeconfig).unwrap();
        let mut b = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .timeout(Duration::from_secs(20));
        for c in reqwest::Certificate::from_pem_bundle(cfg.ca_pem.as_ref().unwrap()).unwrap() {
            b = b.add_root_certificate(c);
        }
        if with_identity {
            if let Some(id) = &cfg.identity_pem {
                b = b.identity(reqwest::Identity::from_pem(id).unwrap());
            }
        }
        Http {
            client: b.build().unwrap(),
            base: cfg.server,
        }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("User-Agent", "audit-test/v1");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.header("Content-Type", "application/json").body(b);
        }
        let resp = req.send().await.unwrap();
        let code = resp.status().as_u16();
        let audit_id = resp
            .headers()
            .get("Audit-ID")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let text = resp.text().await.unwrap_or_default();
        Answer {
            code,
            audit_id,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        }
    }
}

fn json_body(v: Value) -> Option<Vec<u8>> {
    Some(serde_json::to_vec(&v).unwrap())
}

/// Every event in the log.
fn read_log(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The events of `audit_id`, once `stages` are all there (in this order).
async fn events(path: &Path, audit_id: &str, stages: &[&str]) -> Vec<Value> {
    eventually(&format!("{stages:?} of {audit_id}"), || async {
        let evs: Vec<Value> = read_log(path)
            .into_iter()
            .filter(|e| e["auditID"] == audit_id)
            .collect();
        let got: Vec<&str> = evs.iter().map(|e| e["stage"].as_str().unwrap()).collect();
        (got == stages).then_some(evs)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_of_every_outcome_are_audited_at_the_policys_level() {
    let dir = tempfile::tempdir().unwrap();
    let log: PathBuf = dir.path().join("audit/audit.log");
    let sandbox = minik8s::Sandbox::builder()
        .secure()
        .without_controllers()
        .audit_log(&log)
        .audit_policy(POLICY)
        .start()
        .await
        .unwrap();
    let admin = Http::new(sandbox.kubeconfig_path(), true);
    let cms = "/api/v1/namespaces/default/configmaps";

    // A create at Request: the object sent, its name completing objectRef, the decision.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"k": "v"}});
    let created = admin
        .send("POST", cms, &[("Audit-ID", "create-1")], json_body(cm))
        .await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert_eq!(created.audit_id, "create-1");
    let evs = events(&log, "create-1", &["RequestReceived", "ResponseComplete"]).await;
    let (received, done) = (&evs[0], &evs[1]);
    assert_eq!(received["kind"], "Event");
    assert_eq!(received["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(received["level"], "Request");
    assert_eq!(received["verb"], "create");
    assert_eq!(received["requestURI"], cms);
    assert_eq!(received["userAgent"], "audit-test/v1");
    assert_eq!(received["sourceIPs"], json!(["127.0.0.1"]));
    assert_eq!(
        received["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "apiVersion": "v1"})
    );
    assert!(received.get("responseStatus").is_none());
    assert_eq!(
        received["stageTimestamp"],
        received["requestReceivedTimestamp"]
    );
    let admin_name = done["user"]["username"].as_str().unwrap().to_string();
    assert_eq!(admin_name, "kubernetes-admin");
    assert!(done["user"]["groups"]
        .as_array()
        .unwrap()
        .contains(&json!("system:masters")));
    assert_eq!(
        done["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "name": "c1", "apiVersion": "v1"})
    );
    assert_eq!(done["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert_eq!(done["requestObject"]["data"], json!({"k": "v"}));
    assert!(done.get("responseObject").is_none());
    assert_eq!(
        done["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    let ts = done["stageTimestamp"].as_str().unwrap();
    assert_eq!(ts.len(), "2026-01-01T00:00:00.000000Z".len(), "{ts}");
    assert!(ts >= done["requestReceivedTimestamp"].as_str().unwrap());

    // A get at Metadata: no objects; the response header carries the server's audit ID.
    let got = admin.send("GET", &format!("{cms}/c1"), &[], None).await;
    assert_eq!(got.code, 200);
    assert_eq!(got.audit_id.len(), 36, "a UUID: {}", got.audit_id);
    let evs = events(
        &log,
        &got.audit_id,
        &["RequestReceived", "ResponseComplete"],
    )
    .await;
    assert_eq!(evs[1]["level"], "Metadata");
    assert_eq!(evs[1]["verb"], "get");
    assert_eq!(evs[1]["objectRef"]["name"], "c1");
    assert!(evs[1].get("requestObject").is_none() && evs[1].get("responseObject").is_none());

    // A secret at RequestResponse, another excluded by the None rule before it.
    let secret = |ns: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
            "stringData": {"password": "hunter2"}})
    };
    let ns = admin
        .send(
            "POST",
            "/api/v1/namespaces",
            &[],
            json_body(json!({"metadata": {"name": "hidden"}})),
        )
        .await;
    assert_eq!(ns.code, 201);
    let hidden = admin
        .send(
            "POST",
            "/api/v1/namespaces/hidden/secrets",
            &[("Audit-ID", "secret-hidden")],
            json_body(secret("hidden")),
        )
        .await;
    assert_eq!(hidden.code, 201, "{}", hidden.body);
    let shown = admin
        .send(
            "POST",
            "/api/v1/namespaces/default/secrets",
            &[("Audit-ID", "secret-shown")],
            json_body(secret("default")),
        )
        .await;
    assert_eq!(shown.code, 201, "{}", shown.body);
    let evs = events(
        &log,
        "secret-shown",
        &["RequestReceived", "ResponseComplete"],
    )
    .await;
    assert_eq!(evs[1]["level"], "RequestResponse");
    assert_eq!(evs[1]["requestObject"]["stringData"]["password"], "hunter2");
    assert_eq!(evs[1]["responseObject"]["kind"], "Secret");
    assert_eq!(
        evs[1]["responseObject"]["metadata"]["uid"],
        shown.body["metadata"]["uid"]
    );
    // Written in order: the hidden secret's create came first and left nothing.
    assert!(read_log(&log)
        .iter()
        .all(|e| e["auditID"] != "secret-hidden"));

    // Impersonation: the event names both users.
    let imp = admin
        .send(
            "GET",
            &format!("{cms}/c1"),
            &[("Impersonate-User", "bob"), ("Audit-ID", "impersonated")],
            None,
        )
        .await;
    assert_eq!(imp.code, 403, "{}", imp.body);
    let evs = events(
        &log,
        "impersonated",
        &["RequestReceived", "ResponseComplete"],
    )
    .await;
    assert_eq!(evs[0]["user"]["username"], admin_name);
    assert!(evs[0].get("impersonatedUser").is_none());
    assert_eq!(evs[1]["impersonatedUser"]["username"], "bob");

    // 403: the decision, its reason and the Status' message.
    let (_, alice_kubeconfig) = sandbox.add_user("alice", &[]).unwrap();
    let alice = Http::new(&alice_kubeconfig, true);
    let denied = alice
        .send("GET", "/api/v1/namespaces/default/pods", &[], None)
        .await;
    assert_eq!(denied.code, 403);
    let evs = events(
        &log,
        &denied.audit_id,
        &["RequestReceived", "ResponseComplete"],
    )
    .await;
    assert_eq!(evs[1]["user"]["username"], "alice");
    assert_eq!(evs[1]["verb"], "list");
    assert_eq!(
        evs[1]["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert!(evs[1]["annotations"]
        .as_object()
        .unwrap()
        .contains_key("authorization.k8s.io/reason"));
    assert_eq!(
        evs[1]["responseStatus"],
        json!({"metadata": {}, "status": "Failure",
            "message": "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"",
            "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403})
    );

    // 400: a body that is not JSON.
    let bad = admin
        .send(
            "POST",
            cms,
            &[("Audit-ID", "bad-body")],
            Some(b"{nope".to_vec()),
        )
        .await;
    assert_eq!(bad.code, 400, "{}", bad.body);
    let evs = events(&log, "bad-body", &["RequestReceived", "ResponseComplete"]).await;
    assert_eq!(evs[1]["responseStatus"]["code"], 400);
    assert_eq!(evs[1]["responseStatus"]["reason"], "BadRequest");
    assert_eq!(evs[1]["responseStatus"]["message"], bad.body["message"]);

    // 401: one event at ResponseStarted, without a user, saying what was tried.
    let stranger = Http::new(sandbox.kubeconfig_path(), false);
    let refused = stranger
        .send(
            "GET",
            cms,
            &[
                ("Authorization", "Bearer not-a-token"),
                ("Audit-ID", "unauth"),
            ],
            None,
        )
        .await;
    assert_eq!(refused.code, 401);
    assert_eq!(refused.audit_id, "unauth");
    let evs = events(&log, "unauth", &["ResponseStarted"]).await;
    assert_eq!(evs[0]["user"], json!({}));
    assert_eq!(
        evs[0]["responseStatus"],
        json!({"metadata": {}, "message": "Authentication failed, attempted: bearer", "code": 401})
    );

    // A watch: ResponseStarted when its headers go out, ResponseComplete when it ends.
    let watch = admin
        .send(
            "GET",
            &format!("{cms}?watch=true&timeoutSeconds=1"),
            &[("Audit-ID", "watch-1")],
            None,
        )
        .await;
    assert_eq!(watch.code, 200);
    let evs = events(
        &log,
        "watch-1",
        &["RequestReceived", "ResponseStarted", "ResponseComplete"],
    )
    .await;
    assert_eq!(evs[1]["verb"], "watch");
    assert_eq!(
        evs[1]["responseStatus"],
        json!({"metadata": {}, "code": 200})
    );
    assert!(evs[2]["stageTimestamp"].as_str() >= evs[1]["stageTimestamp"].as_str());

    // Probes are excluded by a nonResourceURLs rule; discovery is a non-resource request.
    let probe = admin.send("GET", "/readyz", &[], None).await;
    assert_eq!(probe.code, 200);
    let api = admin.send("GET", "/api", &[], None).await;
    let evs = events(
        &log,
        &api.audit_id,
        &["RequestReceived", "ResponseComplete"],
    )
    .await;
    assert!(evs[1].get("objectRef").is_none());
    assert_eq!(evs[1]["verb"], "get");
    assert!(read_log(&log)
        .iter()
        .all(|e| e["auditID"] != probe.audit_id));

    // Admission's audit annotations: a ValidatingAdmissionPolicy's `auditAnnotations` land in
    // the event as `<policy>/<key>` once the policy is in force.
    let vap = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    let policy = json!({"metadata": {"name": "tag"}, "spec": {"failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["configmaps"]}]},
        "auditAnnotations": [{"key": "name", "valueExpression": "object.metadata.name"}]}});
    assert_eq!(
        admin.send("POST", vap, &[], json_body(policy)).await.code,
        201
    );
    let binding = json!({"metadata": {"name": "tag"},
        "spec": {"policyName": "tag", "validationActions": ["Audit"]}});
    let bindings = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    assert_eq!(
        admin
            .send("POST", bindings, &[], json_body(binding))
            .await
            .code,
        201
    );
    let mut attempt = 0;
    let annotated = eventually("the policy's audit annotation", || {
        attempt += 1;
        let (admin, log) = (&admin, &log);
        async move {
            let (name, id) = (format!("tagged-{attempt}"), format!("tag-{attempt}"));
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
            let created = admin
                .send("POST", cms, &[("Audit-ID", id.as_str())], json_body(cm))
                .await;
            assert_eq!(created.code, 201, "{}", created.body);
            let evs = events(log, &id, &["RequestReceived", "ResponseComplete"]).await;
            let value = evs[1]["annotations"]["tag/name"].clone();
            (value != Value::Null).then_some((name, value))
        }
    })
    .await;
    assert_eq!(annotated.1, annotated.0.as_str());

    // The metrics count events and levels.
    let metrics = admin.send("GET", "/metrics", &[], None).await;
    let text = metrics.body.as_str().unwrap().to_string();
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    assert!(value("apiserver_audit_event_total") >= 20.0);
    assert_eq!(
        value("apiserver_audit_error_total{plugin=\"buffered\"}"),
        0.0
    );
    assert!(value("apiserver_audit_level_total{level=\"RequestResponse\"}") >= 1.0);
    assert!(value("apiserver_audit_level_total{level=\"None\"}") >= 2.0);

    // The file is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    sandbox.stop().await;
}

#[tokio::test]
async fn an_invalid_policy_stops_the_start_with_upstreams_message() {
    let dir = tempfile::tempdir().unwrap();
    let err = minik8s::Sandbox::builder()
        .without_controllers()
        .audit_log(dir.path().join("audit.log"))
        .audit_policy("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n")
        .start()
        .await
        .err()
        .expect("started with an invalid policy");
    assert!(
        err.to_string().contains(
            "loading audit policy file: rules[0].level: Unsupported value: \"Everything\""
        ),
        "{err}"
    );
}

#[test]
fn the_binary_audits_kubectl_and_flushes_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  userAgents: ignored-unknown-field\n",
    )
    .unwrap();
    let log = dir.path().join("logs/audit.log");
    let (policy_s, log_s) = (
        policy.to_string_lossy().into_owned(),
        log.to_string_lossy().into_owned(),
    );
    let mut server = tests::Minik8s::up(
        &dir.path().join("data"),
        &[
            "--nodes",
            "0",
            "--audit-log",
            &log_s,
            "--audit-policy-file",
            &policy_s,
            "--audit-log-maxbackup",
            "2",
        ],
    );
    let kubectl = server.kubectl();
    kubectl.ok(&["create", "configmap", "from-kubectl", "--from-literal=a=b"]);
    let status = server.terminate(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "{}", server.log_text());
    // Everything was written by the time the process ended: no polling here.
    let events = read_log(&log);
    let create = events
        .iter()
        .find(|e| e["verb"] == "create" && e["objectRef"]["name"] == "from-kubectl")
        .unwrap_or_else(|| {
            let creates: Vec<String> = events
                .iter()
                .map(|e| {
                    format!(
                        "{} {} {} {}",
                        e["stage"], e["verb"], e["requestURI"], e["userAgent"]
                    )
                })
                .collect();
            panic!(
                "no create of from-kubectl in {} events; creates: {creates:#?}",
                events.len()
            )
        });
    assert_eq!(create["stage"], "ResponseComplete");
    assert!(create["userAgent"].as_str().unwrap().starts_with("kubectl"));
    assert_eq!(create["user"]["username"], "system:admin");
    assert_eq!(
        create["annotations"],
        json!({"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""})
    );
    assert!(events.iter().all(|e| e["stage"] != "RequestReceived"));
}

#[test]
fn the_binary_refuses_an_invalid_policy_file() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [healthz]\n",
    )
    .unwrap();
    let out = std::process::Command::new(tests::binary_path())
        .args(["up", "--in-memory", "--port", "0", "--audit-policy-file"])
        .arg(&policy)
        .args(["--audit-log-path", "-"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("loading audit policy file: rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character: from file"),
        "{err}"
    );
}
